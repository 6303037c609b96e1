/* The f16/bf16 rounding of train_gpu.cu's kernels (__float2half_rn / __float2bfloat16_rn, here
 * their host implementations from cuda_fp16.h / cuda_bf16.h) against train_util.h's CPU
 * emulation, which the host run's --amp uses: every 4093rd f32 bit pattern plus the edges
 * (f16 overflow at 65520, subnormals, ties) must round to the same value (NaN to a NaN).
 * Runs without a GPU; built only with CUDA. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "train_util.h"

static float from_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static int check(uint32_t u, unsigned long *bad) {
  float x = from_bits(u);
  float h = __half2float(__float2half_rn(x)), he = train_round_fp16(x);
  float b = __bfloat162float(__float2bfloat16_rn(x)), be = train_round_bf16(x);
  int ok = 1;
  if (!(memcmp(&h, &he, 4) == 0 || (isnan(h) && isnan(he)))) ok = 0;
  if (!(memcmp(&b, &be, 4) == 0 || (isnan(b) && isnan(be)))) ok = 0;
  if (!ok && ++*bad <= 5)
    printf("  0x%08x (%g): f16 %g vs %g, bf16 %g vs %g\n", u, (double)x, (double)h, (double)he,
           (double)b, (double)be);
  return ok;
}

int main(void) {
  unsigned long n = 0, bad = 0;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 4093) check((uint32_t)u, &bad), n++;
  /* around f16's largest finite value and its overflow threshold, the normal/subnormal
   * boundary, the smallest subnormal, and bf16 ties, both signs */
  const uint32_t centers[] = {0x477fe000u, 0x477ff000u, 0x47800000u, 0x38800000u, 0x33800000u,
                              0x33000000u, 0x3f808000u, 0x3f818000u, 0x7f7f8000u, 0x00000000u,
                              0x7f800000u};
  for (size_t c = 0; c < sizeof centers / sizeof centers[0]; c++)
    for (int d = -4096; d <= 4096; d++)
      for (uint32_t sign = 0; sign <= 1; sign++) {
        check((centers[c] + (uint32_t)d) ^ (sign << 31), &bad);
        n++;
      }
  printf("train_gpu_round: %lu values, %lu mismatches\n", n, bad);
  return bad != 0;
}
