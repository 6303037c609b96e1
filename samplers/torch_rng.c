/* PyTorch 1.13's CPU random generator (mt19937 seeded from the low 32 bits of the seed) and
 * its CPU randperm, reproduced so our shuffles match torch.randperm element for element. */
#include "sampler_internal.h"

#define MT_N 624
#define MT_M 397

void ddp__mt19937_seed(ddp__mt19937_t *mt, uint64_t seed) {
  /* ATen's engine keeps the 64-bit seed for initial_seed() but initialises its state from
   * seed & 0xffffffff: seeds 5 and 5 + 2^32 give the same stream (checked against torch). */
  mt->state[0] = (uint32_t)(seed & 0xffffffffu);
  for (int j = 1; j < MT_N; j++) {
    uint32_t prev = mt->state[j - 1];
    mt->state[j] = 1812433253u * (prev ^ (prev >> 30)) + (uint32_t)j;
  }
  mt->next = MT_N;
}

static void mt_twist(ddp__mt19937_t *mt) {
  uint32_t *s = mt->state;
  int k = 0;
  for (; k < MT_N - MT_M; k++) {
    uint32_t y = (s[k] & 0x80000000u) | (s[k + 1] & 0x7fffffffu);
    s[k] = s[k + MT_M] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  }
  for (; k < MT_N - 1; k++) {
    uint32_t y = (s[k] & 0x80000000u) | (s[k + 1] & 0x7fffffffu);
    s[k] = s[k + MT_M - MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  }
  uint32_t y = (s[MT_N - 1] & 0x80000000u) | (s[0] & 0x7fffffffu);
  s[MT_N - 1] = s[MT_M - 1] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  mt->next = 0;
}

uint32_t ddp__mt19937_next(ddp__mt19937_t *mt) {
  if (mt->next >= MT_N) mt_twist(mt);
  uint32_t y = mt->state[mt->next++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

void ddp__randperm(ddp__mt19937_t *mt, uint64_t n, int32_t *perm32, int64_t *perm64) {
  /* torch 1.13's randperm_cpu at every size: forward Fisher-Yates where position i swaps with
   * i + random() % (n - i), random() being one 32-bit draw. (Later releases switch to 64-bit
   * draws above UINT32_MAX / 20; 1.13 does not: checked against python3-torch at n =
   * 214748363 .. 214748365.) When n - i fits in 32 bits the 32-bit modulo equals torch's
   * 64-bit one and is cheaper. */
  if (perm32) {
    uint32_t n32 = (uint32_t)n;
    for (uint32_t i = 0; i < n32; i++) perm32[i] = (int32_t)i;
    for (uint32_t i = 0; i + 1 < n32; i++) {
      uint32_t z = ddp__mt19937_next(mt) % (n32 - i);
      int32_t sav = perm32[i];
      perm32[i] = perm32[i + z];
      perm32[i + z] = sav;
    }
    return;
  }
  for (uint64_t i = 0; i < n; i++) perm64[i] = (int64_t)i;
  for (uint64_t i = 0; i + 1 < n; i++) {
    uint64_t left = n - i;
    uint32_t r = ddp__mt19937_next(mt);
    uint64_t z = left > UINT32_MAX ? (uint64_t)r : (uint64_t)(r % (uint32_t)left);
    int64_t sav = perm64[i];
    perm64[i] = perm64[i + z];
    perm64[i + z] = sav;
  }
}
