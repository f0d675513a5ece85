/* GEMM through oneDNN's matmul primitive (Debian libdnnl 2.6): every bf16
 * GEMM, and the f32 ones when gemm.c chose oneDNN for this machine.
 *
 * bf16 operands, f32 accumulation, a bf16 or f32 result: the numerics of
 * PyTorch's bf16 matmul on CPU (which also calls oneDNN); Debian's OpenBLAS
 * has no bf16 GEMM. f32 operands give an f32 result. oneDNN chooses its
 * kernel for the CPU it runs on (AMX, AVX512-BF16, AVX-512 or AVX2), so one
 * binary runs on any x86-64; nothing is compiled for the build machine.
 *
 * Creating a primitive costs far more than running a small one, so each
 * shape (transposes, M, N, K, result dtype, accumulate, bias, activation)
 * gets its primitive and memory objects once, cached in the ctx; a call
 * only swaps the data pointers. oneDNN runs on one OpenMP thread per rank,
 * as OpenBLAS does. */
#include <dnnl.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cpu.h"

void omp_set_num_threads(int n); /* libgomp, which libdnnl is built with */

enum { MEM_A, MEM_B, MEM_C, MEM_BIAS, NMEM };

/* compared with memcmp: 3 int64_t and 8 int, no padding */
typedef struct dnnl_key {
    int64_t M, N, K;
    int ta, tb, ab_dt, c_dt, accumulate, bias_dt, act, unused;
} dnnl_key;
_Static_assert(sizeof(dnnl_key) == 3 * sizeof(int64_t) + 8 * sizeof(int), "dnnl_key has padding");

typedef struct dnnl_entry {
    dnnl_key key;
    dnnl_primitive_t prim;
    dnnl_memory_t mem[NMEM];
} dnnl_entry;

struct rt_dnnl {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_entry *entries;
    int n, cap;
};

#define DNNL_CALL(ctx, call) dnnl_check((ctx), (call), #call)

static void dnnl_check(rt_ctx *ctx, dnnl_status_t st, const char *call)
{
    if (st != dnnl_success)
        rt_fail(ctx, "oneDNN: %s failed (status %d)", call, (int)st);
}

static struct rt_dnnl *dnnl_get(rt_ctx *ctx)
{
    if (ctx->tgt->dnnl)
        return ctx->tgt->dnnl;
    struct rt_dnnl *d = calloc(1, sizeof *d);
    RT_CHECK(ctx, d != NULL, "out of memory");
    ctx->tgt->dnnl = d;
    omp_set_num_threads(1); /* one thread per rank, like OpenBLAS */
    DNNL_CALL(ctx, dnnl_engine_create(&d->engine, dnnl_cpu, 0));
    DNNL_CALL(ctx, dnnl_stream_create(&d->stream, d->engine, dnnl_stream_default_flags));
    return d;
}

static dnnl_data_type_t dnnl_dt(rt_dtype dt)
{
    return dt == RT_BF16 ? dnnl_bf16 : dnnl_f32;
}

/* a 2-D row-major matrix [rows, cols], or its transpose when t */
static void matrix_md(rt_ctx *ctx, dnnl_memory_desc_t *md, int64_t rows, int64_t cols, bool t,
                      dnnl_data_type_t dt)
{
    dnnl_dims_t dims = {rows, cols};
    dnnl_dims_t strides = {t ? 1 : cols, t ? rows : 1};
    DNNL_CALL(ctx, dnnl_memory_desc_init_by_strides(md, 2, dims, dt, strides));
}

static dnnl_entry *entry_for(rt_ctx *ctx, const dnnl_key *k)
{
    struct rt_dnnl *d = dnnl_get(ctx);
    for (int i = 0; i < d->n; i++)
        if (memcmp(&d->entries[i].key, k, sizeof *k) == 0)
            return &d->entries[i];
    if (d->n == d->cap) {
        int cap = d->cap ? 2 * d->cap : 16;
        dnnl_entry *e = realloc(d->entries, (size_t)cap * sizeof *e);
        RT_CHECK(ctx, e != NULL, "out of memory");
        d->entries = e;
        d->cap = cap;
    }
    dnnl_entry *e = &d->entries[d->n];
    memset(e, 0, sizeof *e);
    e->key = *k;
    dnnl_memory_desc_t a, b, c, bias;
    /* A is [M, K] stored as [K, M] when ta; B is [K, N] stored as [N, K] when tb */
    matrix_md(ctx, &a, k->M, k->K, k->ta, dnnl_dt((rt_dtype)k->ab_dt));
    matrix_md(ctx, &b, k->K, k->N, k->tb, dnnl_dt((rt_dtype)k->ab_dt));
    matrix_md(ctx, &c, k->M, k->N, false, dnnl_dt((rt_dtype)k->c_dt));
    if (k->bias_dt >= 0)
        matrix_md(ctx, &bias, 1, k->N, false, dnnl_dt((rt_dtype)k->bias_dt));
    dnnl_matmul_desc_t md;
    DNNL_CALL(ctx, dnnl_matmul_desc_init(&md, &a, &b, k->bias_dt >= 0 ? &bias : NULL, &c));
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t po;
    DNNL_CALL(ctx, dnnl_primitive_attr_create(&attr));
    DNNL_CALL(ctx, dnnl_post_ops_create(&po));
    if (k->accumulate)
        DNNL_CALL(ctx, dnnl_post_ops_append_sum(po, 1.0f));
    if (k->act == RT_GELU)
        DNNL_CALL(ctx, dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_erf, 0, 0));
    else if (k->act == RT_GELU_TANH)
        DNNL_CALL(ctx, dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_gelu_tanh, 0, 0));
    else if (k->act == RT_RELU)
        DNNL_CALL(ctx, dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0, 0));
    DNNL_CALL(ctx, dnnl_primitive_attr_set_post_ops(attr, po));
    dnnl_primitive_desc_t pd;
    DNNL_CALL(ctx, dnnl_primitive_desc_create(&pd, &md, attr, d->engine, NULL));
    DNNL_CALL(ctx, dnnl_primitive_create(&e->prim, pd));
    DNNL_CALL(ctx, dnnl_primitive_desc_destroy(pd));
    DNNL_CALL(ctx, dnnl_post_ops_destroy(po));
    DNNL_CALL(ctx, dnnl_primitive_attr_destroy(attr));
    DNNL_CALL(ctx, dnnl_memory_create(&e->mem[MEM_A], &a, d->engine, DNNL_MEMORY_NONE));
    DNNL_CALL(ctx, dnnl_memory_create(&e->mem[MEM_B], &b, d->engine, DNNL_MEMORY_NONE));
    DNNL_CALL(ctx, dnnl_memory_create(&e->mem[MEM_C], &c, d->engine, DNNL_MEMORY_NONE));
    if (k->bias_dt >= 0)
        DNNL_CALL(ctx, dnnl_memory_create(&e->mem[MEM_BIAS], &bias, d->engine, DNNL_MEMORY_NONE));
    d->n++;
    return e;
}

/* C = act(op(A) op(B) + bias) (+ C when accumulate) */
static void dnnl_gemm_ex(rt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                         const void *A, const void *B, rt_dtype ab_dt, void *C, rt_dtype c_dt,
                         bool accumulate, const rt_tensor *bias, int act)
{
    if (M == 0 || N == 0)
        return;
    if (K == 0 && !bias && act < 0) {
        if (!accumulate)
            memset(C, 0, (size_t)(M * N) * rt_dtype_size(c_dt));
        return;
    }
    dnnl_key k = {.M = M, .N = N, .K = K, .ta = ta, .tb = tb, .ab_dt = (int)ab_dt,
                  .c_dt = (int)c_dt, .accumulate = accumulate,
                  .bias_dt = bias ? (int)bias->dtype : -1, .act = act};
    dnnl_entry *e = entry_for(ctx, &k);
    struct rt_dnnl *d = ctx->tgt->dnnl;
    DNNL_CALL(ctx, dnnl_memory_set_data_handle(e->mem[MEM_A], (void *)A));
    DNNL_CALL(ctx, dnnl_memory_set_data_handle(e->mem[MEM_B], (void *)B));
    DNNL_CALL(ctx, dnnl_memory_set_data_handle(e->mem[MEM_C], C));
    dnnl_exec_arg_t args[4] = {
        {DNNL_ARG_SRC, e->mem[MEM_A]},
        {DNNL_ARG_WEIGHTS, e->mem[MEM_B]},
        {DNNL_ARG_DST, e->mem[MEM_C]},
    };
    int nargs = 3;
    if (bias) {
        DNNL_CALL(ctx, dnnl_memory_set_data_handle(e->mem[MEM_BIAS], bias->data));
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, e->mem[MEM_BIAS]};
    }
    DNNL_CALL(ctx, dnnl_primitive_execute(e->prim, d->stream, nargs, args));
    DNNL_CALL(ctx, dnnl_stream_wait(d->stream));
}

void rt_dnnl_gemm(rt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                  const void *B, rt_dtype ab_dt, void *C, rt_dtype c_dt, bool accumulate)
{
    dnnl_gemm_ex(ctx, ta, tb, M, N, K, A, B, ab_dt, C, c_dt, accumulate, NULL, -1);
}

rt_tensor *rt_matmul_bias_act(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b,
                              const rt_tensor *bias, int act)
{
    if (a->dtype == RT_F32) { /* the CUDA target's f32 epilogues on this runtime (its simulation
                               * build): the GEMM, the add and the activation in turn, the bits of
                               * the separate calls; b [k, n...]: an einsum "btd,dhe->bthe" */
        RT_CHECK(ctx, b->ndim >= 2 && a->ndim + b->ndim - 2 <= RT_MAX_DIMS,
                 "matmul_bias_act: needs [..., m, k] and [k, n...]");
        rt_tensor bv = *b;
        if (b->ndim > 2) {
            bv.ndim = 2;
            bv.shape[1] = rt_numel_of(b->ndim - 1, b->shape + 1);
        }
        rt_tensor *y = rt_matmul(ctx, a, &bv);
        if (b->ndim > 2) { /* a's leading dims, b's trailing */
            memcpy(y->shape + a->ndim - 1, b->shape + 1, (size_t)(b->ndim - 1) * sizeof *y->shape);
            y->ndim = a->ndim + b->ndim - 2;
        }
        if (bias) {
            rt_tensor *z = rt_binary(ctx, RT_ADD, y, bias);
            rt_free(ctx, y);
            y = z;
        }
        if (act >= 0) {
            rt_tensor *z = rt_unary(ctx, (rt_unary_op)act, y);
            rt_free(ctx, y);
            y = z;
        }
        return y;
    }
    RT_CHECK(ctx, a->dtype == RT_BF16 && b->dtype == RT_BF16 && a->ndim >= 2 && b->ndim == 2,
             "matmul_bias_act: needs bf16 [..., m, k] and [k, n]");
    int64_t k = a->shape[a->ndim - 1], n = b->shape[1], m = a->numel / (k ? k : 1);
    RT_CHECK(ctx, b->shape[0] == k, "matmul_bias_act: inner sizes %lld and %lld differ",
             (long long)k, (long long)b->shape[0]);
    RT_CHECK(ctx, !bias || (bias->ndim == 1 && bias->shape[0] == n && bias->dtype == RT_BF16),
             "matmul_bias_act: bias must be bf16[%lld]", (long long)n);
    int64_t shape[RT_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    shape[a->ndim - 1] = n;
    rt_tensor *y = rt_empty(ctx, RT_BF16, a->ndim, shape);
    RT_KERNEL(ctx, RT_K_MATMUL, "matmul_bias_act");
    dnnl_gemm_ex(ctx, false, false, m, n, k, a->data, b->data, RT_BF16, y->data, RT_BF16, false, bias,
                 act);
    return y;
}

void rt_dnnl_free(rt_ctx *ctx)
{
    struct rt_dnnl *d = ctx->tgt->dnnl;
    if (!d)
        return;
    for (int i = 0; i < d->n; i++) {
        for (int j = 0; j < NMEM; j++)
            if (d->entries[i].mem[j])
                dnnl_memory_destroy(d->entries[i].mem[j]);
        dnnl_primitive_destroy(d->entries[i].prim);
    }
    free(d->entries);
    dnnl_stream_destroy(d->stream);
    dnnl_engine_destroy(d->engine);
    free(d);
    ctx->tgt->dnnl = NULL;
}
