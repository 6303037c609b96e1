/* The training kit's model: a small layer stack (dense, convolution via im2col + GEMM, 2x2 max
 * pooling) with cblas on the host. One MLP of any layer sizes (ddp_bench's W-DDP model, the
 * reducer tests, ddp_train's default 784-512-256-10) and ddp_train's small CNN, with optional
 * activation checkpointing (recompute each block's activations during backward) and mixed
 * precision emulated on the CPU. Definitions in train_model.c.
 *
 * Conventions: parameters numbered in forward order (W0 = 0, b0 = 1, W1 = 2, b1 = 3, ...),
 * PyTorch layouts (Linear W is out x in, Conv2d W is cout x cin x k x k), the loss is the mean
 * softmax cross-entropy over the local batch (so averaging the gradients of k ranks with batch
 * B each equals the gradient of one process with the concatenated batch k*B).
 *
 * Gradients are written into grad[i]: the model's own storage after creation, or any buffer the
 * caller sets with tm_set_grad (e.g. a reducer bucket view, so no copy is needed before
 * communication). The backward pass goes from the last layer back and calls ready(i, ctx) as
 * soon as gradient i is complete (bias first, then weight, per layer), which lets communication
 * of late layers overlap the backward pass of early ones.
 *
 * Usage:
 *   train_model_t m;  int sizes[] = {784, 256, 10};
 *   char err[256];
 *   if (tm_create_mlp(&m, sizes, 3, NULL, 64, 0, err, sizeof err) != 0) ...;
 *   uint64_t rng = train_rng_seed(42);
 *   tm_init_params(&m, &rng);                     // deterministic, seeded
 *   double loss = tm_forward(&m, x, labels, batch);
 *   tm_backward(&m, x, labels, batch, 0, cb, ctx); // 0 = overwrite grads, 1 = accumulate
 *   ... an optimizer step (train_optim.h) ...
 *   tm_free(&m);
 */
#ifndef TRAIN_MODEL_H
#define TRAIN_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "train_util.h"

#define TM_MAX_LAYERS 16
#define TM_MAX_PARAMS (2 * TM_MAX_LAYERS)

typedef void (*tm_grad_ready_fn)(size_t param_index, void *ctx);

typedef enum tm_kind { TM_DENSE = 0, TM_CONV, TM_POOL } tm_kind_t;

typedef struct tm_layer {
  tm_kind_t kind;
  int relu;           /* ReLU fused on the output (dense, conv) */
  int c, h, w;        /* input shape per sample (dense: c = in features, h = w = 1) */
  int oc, oh, ow;     /* output shape per sample */
  int k;              /* conv kernel size */
  int wi;             /* parameter index of W (b is wi + 1); -1 for pooling */
  int block;          /* activation-checkpointing block */
  int boundary;       /* last layer of its block: its output is kept in checkpoint mode */
  size_t in_elems, out_elems, col_elems; /* per sample */
  float *out;         /* max_batch * out_elems */
  float *col;         /* conv: max_batch * col_elems (im2col of every sample) */
  int32_t *arg;       /* pool: max_batch * out_elems */
} tm_layer_t;

typedef struct train_model {
  char name[16];
  char desc[96];                       /* e.g. "MLP 784-512-256-10" */
  int nlayers;
  tm_layer_t layer[TM_MAX_LAYERS];
  int max_batch, classes;
  size_t in_elems;
  size_t nparams, total;
  float *param[TM_MAX_PARAMS];
  size_t count[TM_MAX_PARAMS];
  char pname[TM_MAX_PARAMS][24];
  float *grad[TM_MAX_PARAMS];          /* where backward writes gradient i (tm_set_grad) */
  float *param_block;
  float *grad_block;                   /* the model's own gradient storage, same layout */
  int checkpoint;                      /* recompute non-boundary activations in backward */
  float *arena;                        /* checkpoint mode: shared scratch of one block */
  float *delta[2];                     /* back-propagated error, ping-pong */
  float *dcol;                         /* conv backward: one sample's column gradient */
  size_t act_bytes;                    /* activation bytes held between forward and backward */
  size_t act_bytes_full;               /* ... without checkpointing */
  size_t act_bytes_ckpt;               /* ... with checkpointing */
  /* Mixed precision (tm_set_amp): GEMM operands (weights, activations, back-propagated
   * errors) rounded to f16/bf16, f32 accumulation and f32 master weights and gradients. */
  train_amp_t amp;
  /* Multiplies the loss gradient (default 1): the fp16 loss scale, or 1/world with a reducer
   * created with predivided = 1 (the average folded into the loss at no cost). */
  float loss_scale;
  float *wlow_block, *wlow[TM_MAX_PARAMS];
  float *xlow;                         /* the rounded input batch */
  /* Optional (NULL by default): called with begin = 1 before and 0 after each GEMM phase of a
   * dense layer, what = "fwd", "dW" or "dX" of layer `layer`, so that a program can draw the
   * compute on a timeline (ddp_bench puts it beside the library's events). */
  void (*trace)(void *ctx, int begin, const char *what, int layer);
  void *trace_ctx;
} train_model_t;

/* The seeded start of a parameter-initialisation stream (tm_init_params): one seed gives the
 * same parameters in every program. */
uint64_t train_rng_seed(uint64_t seed);

/* An MLP sizes[0] -> sizes[1] -> ... -> sizes[nsizes-1] (2 <= nsizes <= TM_MAX_LAYERS + 1): ReLU
 * after every layer but the last, `classes` = sizes[nsizes-1]. blocks[l] (NULL: every layer its
 * own block) groups layers for activation checkpointing. Work buffers for max_batch samples.
 * Returns 0, or -1 with a message in err (m is left freed). */
int tm_create_mlp(train_model_t *m, const int *sizes, int nsizes, const int *blocks, int max_batch,
                  int checkpoint, char *err, size_t errlen);
/* ddp_train's models for 1 x 28 x 28 inputs and `classes` outputs: "mlp" (784-512-256-classes,
 * blocks [fc1 fc2][fc3]) or "cnn" (conv 1->16 5x5, ReLU, pool, conv 16->32 5x5, ReLU, pool,
 * fc 512->classes; blocks [conv pool][conv pool][fc]). Returns 0, or -1 with a message in err. */
int tm_create(train_model_t *m, const char *kind, int max_batch, int classes, int checkpoint,
              char *err, size_t errlen);
void tm_free(train_model_t *m);

/* Switches mixed precision on (TRAIN_AMP_FP16 / TRAIN_AMP_BF16) or off. Returns 0, or -1
 * when the rounded copies cannot be allocated. */
int tm_set_amp(train_model_t *m, train_amp_t amp);
/* Points gradient i at g (count[i] floats), e.g. a reducer bucket view; NULL restores the
 * model's own storage. */
void tm_set_grad(train_model_t *m, size_t i, float *g);
/* tm_set_grad for every tensor: g[i] for i in 0 .. nparams-1 (e.g. all of a reducer's views
 * from ddp_reducer_grads); g NULL restores the model's own storage for all. */
void tm_set_grads(train_model_t *m, void *const *g);
/* PyTorch's default Linear/Conv2d range U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for W and b from one
 * splitmix64 stream (*rng, advanced) in parameter order. */
void tm_init_params(train_model_t *m, uint64_t *rng);

/* Forward pass over `batch` (<= max_batch) samples of x (batch x in_elems); the logits are left
 * in tm_logits(m). With labels, returns the mean cross-entropy (else 0). */
double tm_forward(train_model_t *m, const float *x, const int32_t *labels, int batch);
const float *tm_logits(const train_model_t *m);
/* Backward pass after tm_forward(m, x, labels, batch) with the same arguments: writes
 * (accumulate = 0) or adds (accumulate = 1, gradient accumulation) each gradient into grad[i]
 * and calls ready(i, ctx) (if not NULL) right after gradient i is complete: b_{L-1}, W_{L-1},
 * b_{L-2}, ... With checkpointing, each block's inner activations are recomputed from its kept
 * input first. */
void tm_backward(train_model_t *m, const float *x, const int32_t *labels, int batch, int accumulate,
                 tm_grad_ready_fn ready, void *ctx);
/* Number of correct predictions among `batch` samples (forward without labels). */
size_t tm_count_correct(train_model_t *m, const float *x, const int32_t *labels, int batch);

#endif /* TRAIN_MODEL_H */
