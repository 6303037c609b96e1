/* The training kit's GPT-2 decoder on the CPU: token + position embeddings, N pre-LayerNorm
 * blocks of causal multi-head self-attention and a GELU (tanh approximation) MLP, a final
 * LayerNorm and an output head tied to the token embedding; forward and backward written out,
 * every GEMM through cblas_sgemm over all B*T rows of a batch (attention as one GEMM per
 * (sequence, head) on strided views of the qkv rows, no copies). Definitions in gpt.c.
 *
 * Parameters: one flat f32 vector, tensors in forward order (gpt_tensor()), PyTorch layouts
 * (Linear W is out x in), so a reducer registers them in that order and its buckets are views:
 *   0 wte (V x C), 1 wpe (T x C), then per block l: ln1.w, ln1.b, attn.qkv.w (3C x C),
 *   attn.qkv.b, attn.proj.w (C x C), attn.proj.b, ln2.w, ln2.b, mlp.fc.w (4C x C), mlp.fc.b,
 *   mlp.proj.w (C x 4C), mlp.proj.b; then lnf.w, lnf.b.
 * The loss is the mean cross-entropy over the batch's B*T positions, times loss_scale in the
 * backward pass (1/accumulation steps, 1/world with a predivided reducer, ...).
 *
 * Gradients go to grad[i]: the model's own block after creation, or buffers the caller sets
 * (gpt_set_grads: a reducer's bucket views). Backward runs from the head back and calls
 * ready(i, ctx) as soon as gradient i is complete, in exactly the reverse of the order above
 * (lnf.b, lnf.w, block L-1's mlp.proj.b, mlp.proj.w ... ln1.w, ..., block 0, and last wpe and
 * wte: the tied head's gradient gets the embedding's share last).
 * Every buffer is allocated once, at creation, for at most max_batch sequences.
 *
 *   gpt_t m;  gpt_config_t c = {.layers = 6, .heads = 6, .dim = 384, .seq = 256, .vocab = 256};
 *   if (gpt_create(&m, &c, batch, 0, err, sizeof err) != 0) ...;
 *   gpt_init_params(&m, seed);
 *   double loss = gpt_forward(&m, tokens, targets, batch); // tokens, targets: batch x seq
 *   gpt_backward(&m, 0, ready, ctx);                       // 1: add to the gradients
 *   gpt_free(&m);
 */
#ifndef GPT_H
#define GPT_H

#include <stddef.h>
#include <stdint.h>

#define GPT_PER_BLOCK 12 /* tensors per block */

typedef struct gpt_config {
  int layers, heads, dim, seq, vocab;
} gpt_config_t;

/* Tensors of a block, in forward order. */
enum {
  GPT_LN1_W = 0, GPT_LN1_B, GPT_QKV_W, GPT_QKV_B, GPT_PROJ_W, GPT_PROJ_B,
  GPT_LN2_W, GPT_LN2_B, GPT_FC_W, GPT_FC_B, GPT_FCPROJ_W, GPT_FCPROJ_B
};

/* bf16 mixed precision (gpt_set_bf16): every linear layer's GEMMs (forward, input and weight
 * gradients, the tied head included: ~90% of the model FLOPs at the default sizes) take their
 * operands rounded to bf16 and sum in f32; attention's GEMMs, LayerNorm, GELU, softmax, the
 * loss, the gradients and the parameters (the master copy the optimizer updates) stay f32.
 * NATIVE rounds with AVX-512-BF16's VCVTNEPS2BF16 (only where the CPU has it, checked at run
 * time), EMULATED with the same rounding in plain code: both give the same bits. The GEMMs
 * themselves are OpenBLAS's sgemm on the rounded values (Debian's OpenBLAS 0.3.21 has no
 * sbgemm): bf16's numerics, not its speed. */
typedef enum gpt_bf16 { GPT_BF16_OFF = 0, GPT_BF16_EMULATED, GPT_BF16_NATIVE } gpt_bf16_t;

typedef void (*gpt_grad_ready_fn)(size_t param_index, void *ctx);

/* One block's activations of a batch (N = B*T rows). */
typedef struct gpt_block_act {
  float *ln1, *ln1_mean, *ln1_rstd; /* N x C, N, N */
  float *qkv;                       /* N x 3C */
  float *att;                       /* B x H x T x T softmax probabilities (0 above the diagonal) */
  float *atty;                      /* N x C attention output before the projection */
  float *res1;                      /* N x C residual after attention */
  float *ln2, *ln2_mean, *ln2_rstd;
  float *fch, *fcg;                 /* N x 4C before and after the GELU */
  float *res2;                      /* N x C block output */
} gpt_block_act_t;

typedef struct gpt {
  gpt_config_t cfg;
  int max_batch;
  size_t nparams, total;   /* tensors, floats */
  float *param_block, *grad_block;
  float **param, **grad;
  size_t *count;
  int *ndim;               /* 2 for matrices (weight decay), 1 for biases and LayerNorm */
  char (*pname)[24];
  float loss_scale;        /* multiplies the loss gradient (default 1) */
  /* activations of the last forward (batch sequences) */
  int batch;
  int32_t *tokens, *targets; /* copies of the last forward's, for backward */
  float *x0;               /* N x C embeddings */
  gpt_block_act_t *act;
  float *lnf, *lnf_mean, *lnf_rstd;
  float *probs;            /* N x V */
  float *losses;           /* N */
  /* backward scratch */
  float *dres, *dC, *d4C, *dqkv, *dP;
  float *arena;
  int recompute;           /* activation checkpointing per block */
  gpt_bf16_t bf16;         /* mixed precision mode (gpt_set_bf16) */
  float *wbf, *abf, *dbf;  /* bf16 mode: rounded parameters (total), GEMM operand scratch */
  size_t act_bytes;        /* bytes of activations and scratch held */
  size_t act_bytes_full, act_bytes_ckpt; /* ... without and with recompute */
} gpt_t;

/* Index of tensor k (GPT_LN1_W ...) of block l. */
static inline size_t gpt_tensor(int l, int k) { return 2 + (size_t)l * GPT_PER_BLOCK + (size_t)k; }

/* Checks the sizes (dim a multiple of heads, everything positive), allocates parameters,
 * gradients and activations for max_batch sequences. recompute (activation checkpointing per
 * block): keep only each block's output between forward and backward, one block's activations
 * shared by all, recomputed from the block's input before its backward pass (one more forward
 * of every block but the last). Returns 0, or -1 with a message in err (m freed). */
int gpt_create(gpt_t *m, const gpt_config_t *cfg, int max_batch, int recompute, char *err,
               size_t errlen);
void gpt_free(gpt_t *m);
/* GPT-2's initialisation from one seeded stream (splitmix64, Box-Muller): every weight matrix
 * and both embeddings N(0, 0.02), the two residual projections of each block (attn.proj.w,
 * mlp.proj.w) N(0, 0.02 / sqrt(2 * layers)), biases 0, LayerNorm weights 1 and biases 0. */
void gpt_init_params(gpt_t *m, uint64_t seed);
/* Points gradient i at g[i] for every tensor (g NULL: the model's own block). */
void gpt_set_grads(gpt_t *m, void *const *g);
/* Forward pass of `batch` (<= max_batch) sequences: tokens and targets are batch x seq token
 * ids (< vocab; unchecked). Returns the mean cross-entropy; keeps what backward needs. */
double gpt_forward(gpt_t *m, const int32_t *tokens, const int32_t *targets, int batch);
/* Backward pass of the last forward: writes (accumulate 0) or adds (1) every gradient and calls
 * ready(i, ctx) (if not NULL) once gradient i is complete. */
void gpt_backward(gpt_t *m, int accumulate, gpt_grad_ready_fn ready, void *ctx);
/* 1 when this CPU has AVX-512-BF16 (cpuid, at run time). */
int gpt_bf16_native_supported(void);
/* Switches bf16 mixed precision (see gpt_bf16_t) on or off; allocates its copies once (4 bytes
 * per parameter and max_batch x seq x (4 dim + max(4 dim, vocab)) floats). Returns 0, or -1
 * with a message in err (NATIVE on a CPU without AVX-512-BF16, out of memory). */
int gpt_set_bf16(gpt_t *m, gpt_bf16_t mode, char *err, size_t errlen);
/* --bf16's value: "native", "emulated", "off", or "auto" (native where the CPU has
 * AVX-512-BF16, else emulated). Returns 0, or -1 for another string. */
int gpt_bf16_parse(const char *s, gpt_bf16_t *mode);
/* "off", "emulated", "native (AVX-512-BF16)" */
const char *gpt_bf16_name(gpt_bf16_t mode);
/* Model FLOPs per trained token: 6 * (12 L C^2 + V C) + 12 L T C (PaLM's count: the matrix
 * multiplies forward and backward, attention over the full T x T, embeddings not counted). */
double gpt_flops_per_token(const gpt_config_t *cfg);
/* "GPT L6 H6 C384 T256 V256" */
void gpt_describe(const gpt_config_t *cfg, char *buf, size_t cap);

#endif /* GPT_H */
