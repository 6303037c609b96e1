/* The CNN kernels (see cnn.h). */
#include "cnn.h"

#include <string.h>

void cnn_im2col(const float *img, int c, int h, int w, int k, float *col) {
  int oh = h - k + 1, ow = w - k + 1;
  size_t p = (size_t)oh * (size_t)ow;
  for (int ci = 0; ci < c; ci++)
    for (int ky = 0; ky < k; ky++)
      for (int kx = 0; kx < k; kx++) {
        float *row = col + ((size_t)(ci * k + ky) * (size_t)k + (size_t)kx) * p;
        for (int y = 0; y < oh; y++) {
          const float *src = img + ((size_t)ci * (size_t)h + (size_t)(y + ky)) * (size_t)w + (size_t)kx;
          memcpy(row + (size_t)y * (size_t)ow, src, sizeof(float) * (size_t)ow);
        }
      }
}

void cnn_col2im(const float *col, int c, int h, int w, int k, float *img) {
  int oh = h - k + 1, ow = w - k + 1;
  size_t p = (size_t)oh * (size_t)ow;
  memset(img, 0, sizeof(float) * (size_t)c * (size_t)h * (size_t)w);
  for (int ci = 0; ci < c; ci++)
    for (int ky = 0; ky < k; ky++)
      for (int kx = 0; kx < k; kx++) {
        const float *row = col + ((size_t)(ci * k + ky) * (size_t)k + (size_t)kx) * p;
        for (int y = 0; y < oh; y++) {
          float *dst = img + ((size_t)ci * (size_t)h + (size_t)(y + ky)) * (size_t)w + (size_t)kx;
          const float *s = row + (size_t)y * (size_t)ow;
          for (int x = 0; x < ow; x++) dst[x] += s[x];
        }
      }
}

void cnn_maxpool2(const float *in, int c, int h, int w, float *out, int32_t *arg) {
  int oh = h / 2, ow = w / 2;
  for (int ci = 0; ci < c; ci++)
    for (int y = 0; y < oh; y++)
      for (int x = 0; x < ow; x++) {
        int base = (ci * h + 2 * y) * w + 2 * x;
        int best = base;
        int cand[3] = {base + 1, base + w, base + w + 1};
        for (int j = 0; j < 3; j++)
          if (in[cand[j]] > in[best]) best = cand[j];
        size_t o = ((size_t)ci * (size_t)oh + (size_t)y) * (size_t)ow + (size_t)x;
        out[o] = in[best];
        arg[o] = best;
      }
}

void cnn_maxpool2_backward(const float *dout, const int32_t *arg, size_t out_count,
                           size_t in_count, float *din) {
  memset(din, 0, sizeof(float) * in_count);
  for (size_t o = 0; o < out_count; o++) din[arg[o]] += dout[o];
}

