/* Convolution and pooling kernels of the kit's CNN: im2col/col2im (so a convolution is one GEMM
 * per sample), 2x2 max pooling with the argmax kept for backward. Definitions in cnn.c. */
#ifndef CNN_H
#define CNN_H

#include <stddef.h>
#include <stdint.h>

/* Image [c][h][w] -> columns [c*k*k][oh*ow] for a k x k kernel, stride 1, no padding, so
 * out[cout][oh*ow] = W[cout][c*k*k] x col. Row order matches PyTorch's Conv2d weight layout
 * (cout, cin, kh, kw) flattened. */
void cnn_im2col(const float *img, int c, int h, int w, int k, float *col);
/* Adjoint of cnn_im2col: adds the columns' gradient back into the image gradient (zeroed
 * first, since every pixel may receive from several kernel positions). */
void cnn_col2im(const float *col, int c, int h, int w, int k, float *img);
/* 2x2 max pooling, stride 2 (h and w even). arg[i] is the input offset (within the sample)
 * of output i's maximum; the first maximum wins on ties, as in PyTorch. */
void cnn_maxpool2(const float *in, int c, int h, int w, float *out, int32_t *arg);
/* Gradient of cnn_maxpool2: each output's gradient goes to its argmax input. */
void cnn_maxpool2_backward(const float *dout, const int32_t *arg, size_t out_count,
                           size_t in_count, float *din);

#endif /* CNN_H */
