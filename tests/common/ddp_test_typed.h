/* Typed test buffers (library ddp_test_common): element i of a buffer of any dtype read and
 * written as a double (integers also exactly as int64), f16/bf16 encoded bit by bit with
 * round to nearest even (independent of the library's converters, which the tests check),
 * buffers filled from a (rank, index) seed, and compared exactly or within a tolerance. */
#ifndef DDP_TEST_TYPED_H
#define DDP_TEST_TYPED_H

#include <stddef.h>
#include <stdint.h>

#include "ddp.h"

/* Half precision to and from double (nearest, ties to even; overflow gives infinity). */
uint16_t ddp_tbuf_f16(double v);
uint16_t ddp_tbuf_bf16(double v);
double ddp_tbuf_f16_value(uint16_t h);
double ddp_tbuf_bf16_value(uint16_t h);

/* 1 for i32, i64, u8. */
int ddp_tbuf_is_int(ddp_dtype_t dt);

/* Element i as a double / stores v (rounded to the dtype; integers truncated toward zero,
 * u8 modulo 256). */
double ddp_tbuf_get(const void *buf, ddp_dtype_t dt, size_t i);
void ddp_tbuf_set(void *buf, ddp_dtype_t dt, size_t i, double v);
/* Exact 64-bit integer access (i64 beyond 2^53): integer dtypes as stored, floating ones
 * through the double above. */
int64_t ddp_tbuf_get_int(const void *buf, ddp_dtype_t dt, size_t i);
void ddp_tbuf_set_int(void *buf, ddp_dtype_t dt, size_t i, int64_t v);

/* Element i of buf = value(rank, i, ctx) for i < n. */
typedef double (*ddp_tbuf_value_fn)(int rank, size_t i, const void *ctx);
void ddp_tbuf_fill(void *buf, ddp_dtype_t dt, size_t n, int rank, ddp_tbuf_value_fn value,
                   const void *ctx);

/* Counts the elements i < n of buf that differ from want(i): exactly (tol == 0; a NaN never
 * matches) or by more than tol * max(1, |want|). The first difference is printed, prefixed by
 * `what` and this process's rank. */
size_t ddp_tbuf_compare(const void *buf, ddp_dtype_t dt, size_t n, ddp_tbuf_value_fn want,
                        int rank, const void *ctx, double tol, const char *what);

#endif /* DDP_TEST_TYPED_H */
