/* bench_bf16_gemm: the GEMMs of one tp_mlp step (B=256 D=1024 H=4096, one
 * rank) and of examples/gpt.spmd's per-rank shards on dp=2,tp=2 (D=128,
 * T=64, B=16), forward and backward (transposed operands), through:
 *
 *   OpenBLAS    cblas_sgemm called directly
 *   dnnl_sgemm  oneDNN's BLAS-like sgemm called directly
 *   rt OBLAS    the runtime's GEMM (rt_gemm) on f32 with OpenBLAS
 *   rt oneDNN   the same with oneDNN (its matmul primitive, cached per shape)
 *   rt bf16     the runtime's bf16 GEMM (oneDNN, f32 accumulation)
 *
 * interleaved call by call, GFLOP/s = 2*M*N*K / time of the median sample
 * (a sample runs the GEMM enough times to take about a millisecond), and
 * the ratios oneDNN / OpenBLAS in the runtime (what runtime/gemm.c's timing
 * at start-up decides on) and bf16 / OpenBLAS. Serial, no MPI, one thread.
 * The runtime's own choice for this machine is printed first.
 *
 *   build/bench/bench_bf16_gemm [REPS]
 */
#include <cblas.h>
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "rt_cpu.h"

typedef struct { const char *name; int64_t m, k, n; bool ta, tb; } shape;

enum { NWAY = 5 };

static void run(rt_ctx *ctx, int way, const shape *sh, const rt_tensor *a, const rt_tensor *b,
                const rt_tensor *ah, const rt_tensor *bh, rt_tensor *c, rt_tensor *ch)
{
    int lda = (int)(sh->ta ? sh->m : sh->k), ldb = (int)(sh->tb ? sh->k : sh->n);
    switch (way) {
    case 0:
        cblas_sgemm(CblasRowMajor, sh->ta ? CblasTrans : CblasNoTrans,
                    sh->tb ? CblasTrans : CblasNoTrans, (int)sh->m, (int)sh->n, (int)sh->k, 1.0f,
                    a->data, lda, b->data, ldb, 0.0f, c->data, (int)sh->n);
        break;
    case 1:
        RT_CHECK(ctx, dnnl_sgemm(sh->ta ? 'T' : 'N', sh->tb ? 'T' : 'N', sh->m, sh->n, sh->k, 1.0f,
                                 a->data, lda, b->data, ldb, 0.0f, c->data, sh->n) == dnnl_success,
                 "dnnl_sgemm failed");
        break;
    case 2:
    case 3:
        rt_set_gemm_f32_lib(ctx, way == 2 ? RT_GEMM_OPENBLAS : RT_GEMM_DNNL);
        rt_gemm(ctx, RT_F32, sh->ta, sh->tb, sh->m, sh->n, sh->k, a->data, b->data, c->data, 0.0);
        break;
    default:
        rt_gemm(ctx, RT_BF16, sh->ta, sh->tb, sh->m, sh->n, sh->k, ah->data, bh->data, ch->data, 0.0);
        break;
    }
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 11;
    if (reps < 1)
        reps = 1;
    rt_ctx *ctx = rt_ctx_serial();
    rt_gemm_f32_lib(ctx); /* chooses: SPMD_GEMM, or the start-up timing */
    char desc[256];
    rt_gemm_describe(ctx, desc, sizeof desc);
    printf("# the runtime's choice on this machine: %s\n", desc);
    const shape shapes[] = {
        {"tp_mlp h = x @ w1      [256,1024]x[1024,4096]", 256, 1024, 4096, false, false},
        {"tp_mlp y = h @ w2      [256,4096]x[4096,1024]", 256, 4096, 1024, false, false},
        {"tp_mlp dh = dy @ w2^T  [256,1024]x[1024,4096]", 256, 1024, 4096, false, true},
        {"tp_mlp dw2 = h^T @ dy  [4096,256]x[256,1024]", 4096, 256, 1024, true, false},
        {"tp_mlp dw1 = x^T @ da  [1024,256]x[256,4096]", 1024, 256, 4096, true, false},
        {"gpt qkv x @ wq         [512,128]x[128,64]", 512, 128, 64, false, false},
        {"gpt mlp h @ w1         [512,128]x[128,256]", 512, 128, 256, false, false},
        {"gpt mlp g @ w2         [512,256]x[256,128]", 512, 256, 128, false, false},
        {"gpt logits h @ wte^T   [512,128]x[128,128]", 512, 128, 128, false, true},
        {"gpt dw1 = h^T @ dg     [128,512]x[512,256]", 128, 512, 256, true, false},
        {"gpt dh = dg @ w1^T     [512,256]x[256,128]", 512, 256, 128, false, true},
        {"gpt attn q @ k^T       [64,32]x[32,64]", 64, 32, 64, false, true},
        {"gpt attn p @ v         [64,64]x[64,32]", 64, 64, 32, false, false},
    };
    static const char *ways[NWAY] = {"OpenBLAS", "dnnl_sgemm", "rt OBLAS", "rt oneDNN", "rt bf16"};
    double *t = malloc(sizeof(double) * (size_t)reps * NWAY);
    RT_CHECK(ctx, t != NULL, "out of memory");
    printf("%-46s", "GEMM (GFLOP/s, median)");
    for (int w = 0; w < NWAY; w++)
        printf(" %10s", ways[w]);
    printf(" %10s %10s\n", "oneDNN/OB", "bf16/OB");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const shape *sh = &shapes[s];
        int64_t as[2] = {sh->ta ? sh->k : sh->m, sh->ta ? sh->m : sh->k};
        int64_t bs[2] = {sh->tb ? sh->n : sh->k, sh->tb ? sh->k : sh->n};
        int64_t cs[2] = {sh->m, sh->n};
        rt_layout la = rt_layout_full(2, as), lb = rt_layout_full(2, bs);
        rt_tensor *a = rt_randn(ctx, RT_F32, &la, 1, 1.0), *b = rt_randn(ctx, RT_F32, &lb, 2, 1.0);
        rt_tensor *ah = rt_astype(ctx, a, RT_BF16), *bh = rt_astype(ctx, b, RT_BF16);
        rt_tensor *c = rt_empty(ctx, RT_F32, 2, cs), *ch = rt_empty(ctx, RT_BF16, 2, cs);
        double flop = 2.0 * (double)sh->m * (double)sh->n * (double)sh->k;
        int inner = (int)(5e7 / flop) + 1; /* about a millisecond per sample */
        for (int r = -1; r < reps; r++) /* r = -1: warm-up (primitive creation, first touch) */
            for (int w = 0; w < NWAY; w++) {
                double t0 = now_s();
                for (int i = 0; i < inner; i++)
                    run(ctx, w, sh, a, b, ah, bh, c, ch);
                if (r >= 0)
                    t[w * reps + r] = (now_s() - t0) / inner;
            }
        double g[NWAY];
        printf("%-46s", sh->name);
        for (int w = 0; w < NWAY; w++) {
            g[w] = flop / median(t + w * reps, reps) * 1e-9;
            printf(" %10.1f", g[w]);
        }
        printf(" %9.2fx %9.2fx\n", g[3] / g[2], g[4] / g[0]);
        rt_free(ctx, a); rt_free(ctx, b); rt_free(ctx, ah); rt_free(ctx, bh);
        rt_free(ctx, c); rt_free(ctx, ch);
    }
    free(t);
    rt_ctx_free_serial(ctx);
    return 0;
}
