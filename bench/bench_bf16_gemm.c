/* bench_bf16_gemm: the GEMMs of one tp_mlp step (B=256 D=1024 H=4096, one
 * rank) in bf16 through libspmdrt (oneDNN, f32 accumulation) against f32
 * through cblas_sgemm (OpenBLAS) and rt_matmul on f32, interleaved, medians
 * of REPS. GFLOP/s = 2*M*N*K / time. Serial, no MPI.
 *
 *   build/bench/bench_bf16_gemm [REPS]
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "spmdrt.h"

typedef struct { const char *name; int64_t m, k, n; bool ta, tb; } shape;

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 11;
    if (reps < 1)
        reps = 1;
    rt_ctx *ctx = rt_ctx_serial();
    const shape shapes[] = {
        {"h = x @ w1        [256,1024]x[1024,4096]", 256, 1024, 4096, false, false},
        {"y = h @ w2        [256,4096]x[4096,1024]", 256, 4096, 1024, false, false},
        {"dh = dy @ w2^T    [256,1024]x[1024,4096]", 256, 1024, 4096, false, true},
        {"dw1 = x^T @ dh    [1024,256]x[256,4096]", 1024, 256, 4096, true, false},
    };
    double *t = malloc(sizeof(double) * (size_t)reps * 3);
    printf("%-42s %9s %9s %9s %9s\n", "GEMM (GFLOP/s, median)", "sgemm", "rt f32", "rt bf16", "bf16/sgemm");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        int64_t as[2] = {sh->ta ? sh->k : sh->m, sh->ta ? sh->m : sh->k};
        int64_t bs[2] = {sh->tb ? sh->n : sh->k, sh->tb ? sh->k : sh->n};
        int64_t cs[2] = {sh->m, sh->n};
        rt_layout la = rt_layout_full(2, as), lb = rt_layout_full(2, bs);
        rt_tensor *a = rt_randn(ctx, RT_F32, &la, 1, 1.0), *b = rt_randn(ctx, RT_F32, &lb, 2, 1.0);
        rt_tensor *ah = rt_astype(ctx, a, RT_BF16), *bh = rt_astype(ctx, b, RT_BF16);
        rt_tensor *c = rt_empty(ctx, RT_F32, 2, cs);
        double flop = 2.0 * (double)sh->m * (double)sh->n * (double)sh->k;
        for (int r = -1; r < reps; r++) { /* r = -1: warm-up (primitive creation) */
            double t0 = now_s();
            cblas_sgemm(CblasRowMajor, sh->ta ? CblasTrans : CblasNoTrans, sh->tb ? CblasTrans : CblasNoTrans,
                        (int)sh->m, (int)sh->n, (int)sh->k, 1.0f, a->data, (int)as[1], b->data, (int)bs[1], 0.0f,
                        c->data, (int)sh->n);
            double t1 = now_s();
            rt_tensor *at = sh->ta ? rt_transpose(ctx, a, 0, 1) : rt_retain(a);
            rt_tensor *bt = sh->tb ? rt_transpose(ctx, b, 0, 1) : rt_retain(b);
            double t2 = now_s();
            rt_tensor *y = rt_matmul(ctx, at, bt);
            double t3 = now_s();
            rt_tensor *ath = sh->ta ? rt_transpose(ctx, ah, 0, 1) : rt_retain(ah);
            rt_tensor *bth = sh->tb ? rt_transpose(ctx, bh, 0, 1) : rt_retain(bh);
            double t4 = now_s();
            rt_tensor *yh = rt_matmul(ctx, ath, bth);
            double t5 = now_s();
            if (r >= 0) {
                t[r] = t1 - t0;
                t[reps + r] = t3 - t2;
                t[2 * reps + r] = t5 - t4;
            }
            rt_free(ctx, at); rt_free(ctx, bt); rt_free(ctx, y);
            rt_free(ctx, ath); rt_free(ctx, bth); rt_free(ctx, yh);
        }
        double g0 = flop / median(t, reps) * 1e-9, g1 = flop / median(t + reps, reps) * 1e-9;
        double g2 = flop / median(t + 2 * reps, reps) * 1e-9;
        printf("%-42s %9.1f %9.1f %9.1f %9.2fx\n", sh->name, g0, g1, g2, g2 / g0);
        rt_free(ctx, a); rt_free(ctx, b); rt_free(ctx, ah); rt_free(ctx, bh); rt_free(ctx, c);
    }
    free(t);
    rt_ctx_free_serial(ctx);
    return 0;
}
