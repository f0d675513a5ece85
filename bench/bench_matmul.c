/* rt_matmul against a direct cblas_sgemm / cblas_dgemm on the same operands,
 * interleaved call by call, median of many repetitions; rt_matmul with its
 * f32 GEMMs on OpenBLAS and on oneDNN (rt_set_gemm_f32_lib; f64 always runs
 * on OpenBLAS). The runtime's own choice for this machine is printed first.
 * Usage: bench_matmul [reps] */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "spmdrt.h"

typedef struct mm_case {
    const char *name;
    int64_t batch, m, k, n; /* a [batch, m, k] @ b [k, n] */
    rt_dtype dt;
} mm_case;

static void fill(rt_tensor *t)
{
    for (int64_t i = 0; i < t->numel; i++)
        rt_set(t, i, (double)((i * 37) % 101) / 101.0 - 0.5);
}

static void raw_gemm(const mm_case *c, const rt_tensor *a, const rt_tensor *b, void *out)
{
    int M = (int)(c->batch * c->m), N = (int)c->n, K = (int)c->k;
    if (c->dt == RT_F32)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, a->data, K,
                    b->data, N, 0.0f, out, N);
    else
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0, a->data, K,
                    b->data, N, 0.0, out, N);
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 30;
    rt_ctx *ctx = rt_ctx_serial();
    printf("# f32 GEMM on this machine: %s (SPMD_GEMM, or the start-up timing)\n",
           rt_gemm_lib_name(rt_gemm_f32_lib(ctx)));
    mm_case cases[] = {
        {"256x256x256 f32", 1, 256, 256, 256, RT_F32},
        {"512x512x512 f32", 1, 512, 512, 512, RT_F32},
        {"1024x1024x1024 f32", 1, 1024, 1024, 1024, RT_F32},
        {"linear [8,256,512]@[512,1024] f32", 8, 256, 512, 1024, RT_F32},
        {"512x512x512 f64", 1, 512, 512, 512, RT_F64},
    };
    printf("%-36s %10s %10s %10s %9s %9s\n", "matmul", "cblas ms", "rt OB ms", "rt dnnl ms",
           "OB/cblas", "dnnl/OB");
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++) {
        const mm_case *c = &cases[ci];
        rt_tensor *a = rt_empty(ctx, c->dt, 3, (int64_t[]){c->batch, c->m, c->k});
        rt_tensor *b = rt_empty(ctx, c->dt, 2, (int64_t[]){c->k, c->n});
        rt_tensor *out = rt_empty(ctx, c->dt, 3, (int64_t[]){c->batch, c->m, c->n});
        fill(a);
        fill(b);
        double *tr = malloc((size_t)reps * sizeof *tr), *tm = malloc((size_t)reps * sizeof *tm);
        double *td = malloc((size_t)reps * sizeof *td);
        for (int r = -3; r < reps; r++) { /* 3 warm-up rounds */
            double t0 = now_s();
            raw_gemm(c, a, b, out->data);
            double t1 = now_s();
            rt_set_gemm_f32_lib(ctx, RT_GEMM_OPENBLAS);
            rt_tensor *y = rt_matmul(ctx, a, b);
            rt_free(ctx, y);
            double t2 = now_s();
            rt_set_gemm_f32_lib(ctx, RT_GEMM_DNNL);
            y = rt_matmul(ctx, a, b);
            rt_free(ctx, y);
            double t3 = now_s();
            if (r >= 0) {
                tr[r] = t1 - t0;
                tm[r] = t2 - t1;
                td[r] = t3 - t2;
            }
        }
        double mr = median(tr, reps), mm = median(tm, reps), md = median(td, reps);
        printf("%-36s %10.3f %10.3f %10.3f %9.3f %9.3f\n", c->name, mr * 1e3, mm * 1e3, md * 1e3,
               mm / mr, md / mm);
        free(tr); free(tm); free(td);
        rt_free(ctx, a); rt_free(ctx, b); rt_free(ctx, out);
    }
    rt_ctx_free_serial(ctx);
    return 0;
}
