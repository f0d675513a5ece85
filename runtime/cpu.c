/* The CPU target: its state in the ctx (rt_cpu.h: bf16 tables, oneDNN,
 * the f32 GEMM library, the vector-math kernels, the overlap of
 * collectives) and its memory (64-byte aligned host buffers). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "rt_cpu.h"
#include "vmath.h"

void rt_target_new(rt_ctx *ctx)
{
    openblas_set_num_threads(1); /* one BLAS thread per rank */
    ctx->tgt = calloc(1, sizeof *ctx->tgt);
    if (!ctx->tgt) {
        fprintf(stderr, "spmd: error: out of memory\n");
        exit(1);
    }
    ctx->tgt->vm = rt_vm_select();
    ctx->tgt->gemm_f32 = -1; /* chosen by rt_init, or at a serial ctx's first f32 GEMM */
}

void rt_target_setup(rt_ctx *ctx)
{
    rt_overlap_setup(ctx);
    rt_gemm_setup(ctx);
}

void rt_target_free(rt_ctx *ctx)
{
    if (!ctx->tgt)
        return;
    rt_overlap_free(ctx);
    rt_bf16_free(ctx);
    rt_dnnl_free(ctx);
    free(ctx->tgt);
    ctx->tgt = NULL;
}

void *rt_mem_alloc(rt_ctx *ctx, size_t cap)
{
    void *p = aligned_alloc(64, cap);
    RT_CHECK(ctx, p != NULL, "out of memory allocating %zu bytes", cap);
    return p;
}

void rt_mem_free(rt_ctx *ctx, void *p, size_t cap)
{
    (void)ctx;
    (void)cap;
    free(p);
}

const char *rt_target_label(const rt_ctx *ctx, char *buf, size_t n)
{
    if (ctx->tgt->gemm_f32 < 0) /* the f32 GEMM library (gemm.c), once chosen */
        return NULL;
    snprintf(buf, n, "f32 GEMM: %s", rt_gemm_lib_name((rt_gemm_lib)ctx->tgt->gemm_f32));
    return buf;
}

/* files read and write tensor data where it is: host memory */
const void *rt_host_view(rt_ctx *ctx, const rt_tensor *x)
{
    (void)ctx;
    return x->data;
}

void *rt_host_buffer(rt_ctx *ctx, const rt_tensor *t)
{
    (void)ctx;
    return t->data;
}

void rt_host_commit(rt_ctx *ctx, rt_tensor *t, void *buf)
{
    (void)ctx;
    (void)t;
    (void)buf;
}
