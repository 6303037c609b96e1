/* Replays files through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer, so the
 * committed corpus runs in every build (gcc, ASan) as a regression test:
 *   fuzz_x_replay FILE...   (directories are not expanded: pass the files) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s FILE...\n", argv[0]);
    return 2;
  }
  for (int i = 1; i < argc; i++) {
    FILE *f = fopen(argv[i], "rb");
    if (!f) {
      fprintf(stderr, "%s: cannot open %s\n", argv[0], argv[i]);
      return 1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
      if (len == cap) {
        cap = cap ? 2 * cap : 4096;
        uint8_t *nb = realloc(buf, cap);
        if (!nb) {
          free(buf);
          fclose(f);
          return 1;
        }
        buf = nb;
      }
      size_t n = fread(buf + len, 1, cap - len, f);
      if (n == 0) break;
      len += n;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
  }
  printf("%s: %d inputs replayed: PASS\n", argv[0], argc - 1);
  return 0;
}
