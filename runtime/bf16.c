/* bf16 (bfloat16) support: conversions, the bf16 forms of the elementwise
 * kernels and the MPI reductions of bf16 data.
 *
 * Numerics are PyTorch's on CPU: an elementwise op on bf16 widens its
 * operands to f32, computes as the f32 kernel does, and rounds each result
 * to bf16 (unary ops and their backwards through per-op tables of all 65536
 * bf16 inputs, built by the f32 kernels: the same bits, one lookup each) (round to nearest even, NaN kept); a scalar operand is a bf16
 * value too (a literal adopts the tensor's dtype, SPEC 3; PyTorch rounds a
 * Python scalar to the tensor's dtype the same way). Reductions, softmax, norms and
 * cross_entropy read bf16 rows into their f64 accumulators (tensor.c's
 * rt_load_f64) and round once at the end; matmul and einsum go to oneDNN
 * (matmul_dnnl.c) and accumulate in f32.
 *
 * Collectives move bf16 as MPI_UINT16_T and reduce it with user-defined
 * MPI_Ops (comm.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cpu.h"

/* ---- conversions: branch-free so the loops vectorise, compiled for
 * AVX-512, AVX2 and the baseline, the one for the running CPU chosen at
 * load time (ifunc), so no binary is built for one machine only */

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define RT_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RT_MULTIVERSION
#endif

RT_MULTIVERSION void rt_bf16_from_f32_n(uint16_t *restrict dst, const float *restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = rt_f32_to_bf16(src[i]);
}

RT_MULTIVERSION void rt_bf16_to_f32_n(float *restrict dst, const uint16_t *restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        dst[i] = rt_bf16_to_f32(src[i]);
}

RT_MULTIVERSION void rt_bf16_add_n(uint16_t *restrict acc, const uint16_t *restrict x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        acc[i] = rt_f32_to_bf16(rt_bf16_to_f32(acc[i]) + rt_bf16_to_f32(x[i]));
}

void rt_bf16_scale_n(uint16_t *x, double s, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rt_f32_to_bf16((float)(rt_bf16_to_f32(x[i]) * s));
}

rt_tensor *rt_bf16_widen(rt_ctx *ctx, const rt_tensor *x)
{
    if (x->dtype != RT_BF16)
        return rt_retain((rt_tensor *)x);
    rt_tensor *y = rt_empty(ctx, RT_F32, x->ndim, x->shape);
    rt_bf16_to_f32_n(y->data, x->data, x->numel);
    return y;
}

rt_tensor *rt_bf16_narrow(rt_ctx *ctx, rt_tensor *y)
{
    if (!y || y->dtype != RT_F32)
        return y;
    rt_tensor *h = rt_empty(ctx, RT_BF16, y->ndim, y->shape);
    rt_bf16_from_f32_n(h->data, y->data, y->numel);
    rt_free(ctx, y);
    return h;
}

/* ---- unary ops by table: a bf16 has 65536 values, so f(x) rounded to bf16
 * (the f32 kernel's result, rounded once) and f'(x) (as the f32 kernel
 * computes it) are tabulated on an op's first use, by the f32 kernels
 * themselves; then a unary op is one lookup per element, and its backward a
 * lookup, an f32 multiply and a rounding (PyTorch's numerics: f32 compute,
 * one rounding).  The tables live in the ctx (128 KiB + 256 KiB per op). */

static void bf16_tables(rt_ctx *ctx, rt_unary_op op)
{
    if (ctx->tgt->bf16_fwd[op])
        return;
    int64_t n = 65536;
    rt_tensor *x = rt_empty(ctx, RT_F32, 1, &n), *one = rt_full(ctx, RT_F32, 1, &n, 1.0);
    for (int64_t i = 0; i < n; i++)
        ((float *)x->data)[i] = rt_bf16_to_f32((uint16_t)i);
    rt_tensor *y = rt_unary(ctx, op, x), *d = rt_unary_bwd(ctx, op, x, one);
    uint16_t *fwd = malloc((size_t)n * sizeof *fwd);
    float *deriv = malloc((size_t)n * sizeof *deriv);
    RT_CHECK(ctx, fwd && deriv, "out of memory");
    rt_bf16_from_f32_n(fwd, y->data, n);
    memcpy(deriv, d->data, (size_t)n * sizeof *deriv);
    ctx->tgt->bf16_fwd[op] = fwd;
    ctx->tgt->bf16_deriv[op] = deriv;
    rt_free(ctx, x); rt_free(ctx, one); rt_free(ctx, y); rt_free(ctx, d);
}

rt_tensor *rt_bf16_unary(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x)
{
    bf16_tables(ctx, op);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_unary_name(op));
    rt_tensor *y = rt_empty(ctx, RT_BF16, x->ndim, x->shape);
    const uint16_t *restrict X = x->data, *restrict tab = ctx->tgt->bf16_fwd[op];
    uint16_t *restrict Y = y->data;
    for (int64_t i = 0; i < x->numel; i++)
        Y[i] = tab[X[i]];
    return y;
}

rt_tensor *rt_bf16_unary_bwd(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, const rt_tensor *dy)
{
    RT_CHECK(ctx, dy->dtype == RT_BF16 && rt_same_shape(x, dy),
             "%s backward: gradient is %s, input is bf16 (or the shapes differ)", rt_unary_name(op),
             rt_dtype_name(dy->dtype));
    bf16_tables(ctx, op);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_unary_name(op));
    rt_tensor *dx = rt_empty(ctx, RT_BF16, x->ndim, x->shape);
    const uint16_t *restrict X = x->data, *restrict DY = dy->data;
    const float *restrict d = ctx->tgt->bf16_deriv[op];
    uint16_t *restrict DX = dx->data;
    for (int64_t i = 0; i < x->numel; i++)
        DX[i] = rt_f32_to_bf16(rt_bf16_to_f32(DY[i]) * d[X[i]]);
    return dx;
}

void rt_bf16_unary_with_grad(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, rt_tensor **y,
                             rt_tensor **dydx)
{
    rt_tensor *x32 = rt_bf16_widen(ctx, x);
    rt_unary_with_grad(ctx, op, x32, y, dydx);
    rt_free(ctx, x32);
    *y = rt_bf16_narrow(ctx, *y);
    *dydx = rt_bf16_narrow(ctx, *dydx);
}

rt_tensor *rt_bf16_binary(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b)
{
    RT_CHECK(ctx, a->dtype == b->dtype, "%s: dtypes differ (%s and %s); use astype",
             rt_binary_name(op), rt_dtype_name(a->dtype), rt_dtype_name(b->dtype));
    rt_tensor *a32 = rt_bf16_widen(ctx, a), *b32 = rt_bf16_widen(ctx, b);
    rt_tensor *y = rt_binary(ctx, op, a32, b32);
    rt_free(ctx, a32);
    rt_free(ctx, b32);
    return rt_bf16_narrow(ctx, y);
}

rt_tensor *rt_bf16_binary_scalar(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, double s,
                                 bool scalar_left)
{
    rt_tensor *a32 = rt_bf16_widen(ctx, a);
    rt_tensor *y = rt_binary_scalar(ctx, op, a32, rt_bf16_round((float)s), scalar_left);
    rt_free(ctx, a32);
    return rt_bf16_narrow(ctx, y);
}

void rt_bf16_binary_bwd(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b,
                        const rt_tensor *dy, rt_tensor **da, rt_tensor **db)
{
    RT_CHECK(ctx, a->dtype == RT_BF16 && b->dtype == RT_BF16 && dy->dtype == RT_BF16,
             "%s backward: dtypes differ (%s, %s, gradient %s)", rt_binary_name(op),
             rt_dtype_name(a->dtype), rt_dtype_name(b->dtype), rt_dtype_name(dy->dtype));
    rt_tensor *a32 = rt_bf16_widen(ctx, a), *b32 = rt_bf16_widen(ctx, b);
    rt_tensor *dy32 = rt_bf16_widen(ctx, dy);
    rt_binary_bwd(ctx, op, a32, b32, dy32, da, db);
    rt_free(ctx, a32);
    rt_free(ctx, b32);
    rt_free(ctx, dy32);
    if (da)
        *da = rt_bf16_narrow(ctx, *da);
    if (db)
        *db = rt_bf16_narrow(ctx, *db);
}

void rt_bf16_free(rt_ctx *ctx)
{
    for (int op = 0; op < RT_NUNARY; op++) {
        free(ctx->tgt->bf16_fwd[op]);
        free(ctx->tgt->bf16_deriv[op]);
        ctx->tgt->bf16_fwd[op] = NULL;
        ctx->tgt->bf16_deriv[op] = NULL;
    }
}
