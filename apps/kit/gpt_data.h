/* The text corpus of gpt_train and its byte-level tokenizer. Definitions in gpt_data.c.
 *
 * Corpus: Debian's `fortunes` package (/usr/share/games/fortunes, 2.6 MB of English prose,
 * quotations, poems and jokes in plain files): no download at run time, every build machine
 * can install it (ci/setup.sh), and at the default model's rate (hundreds of tokens/s per
 * core) a 30-minute run does not see it all once. A folder is read as every regular file in
 * it in byte order of the names (strcmp), skipping fortune's index files (*.dat) and links
 * (the *.u8 names are links to the same files), concatenated; a plain file is read as it is.
 *
 * Tokenizer: one token per byte (vocab 256): nothing to train or commit, the same in C and in
 * Python by construction, no unknown tokens, and the output head stays small (256 x C), so the
 * transformer blocks, not the softmax, take the compute.
 *
 * Split: the byte stream is cut into chunks of GPT_VAL_CHUNK bytes; every GPT_VAL_EVERY-th
 * chunk (k % GPT_VAL_EVERY == GPT_VAL_EVERY - 1) goes to validation, the rest, in order, to
 * training: both halves sample the whole corpus (the files are sorted by topic). */
#ifndef GPT_DATA_H
#define GPT_DATA_H

#include <stddef.h>
#include <stdint.h>

#define GPT_DEFAULT_CORPUS "/usr/share/games/fortunes"
#define GPT_VOCAB_BYTES 256
#define GPT_VAL_CHUNK 16384
#define GPT_VAL_EVERY 10

/* Reads the corpus at `path` (a folder or a file) into *bytes (malloc'd, *n bytes); *files
 * (may be NULL) gets the number of files read. Returns 0, or -1 with a message in err (nothing
 * allocated): missing path, unreadable file, empty corpus. */
int gpt_corpus_read(const char *path, uint8_t **bytes, size_t *n, int *files, char *err,
                    size_t errlen);

/* Splits all[0 .. n) as above into train (*ntrain bytes) and val (*nval); both buffers must
 * hold n bytes. */
void gpt_corpus_split(const uint8_t *all, size_t n, uint8_t *train, size_t *ntrain, uint8_t *val,
                      size_t *nval);

#endif /* GPT_DATA_H */
