/* The non-GEMM kernels of the GPT step (examples/gpt.spmd on one rank:
 * B=16 T=64 D=128 NH=4 F=512 NV=256), each timed alone on its shapes in
 * the step: median and min-max milliseconds per call over the reps, and
 * the calls per step, so that a library build can be compared with another
 * (bench/README.md: link this file against both, run them one after the
 * other).  Usage: bench_gpt_kernels [reps] */
#include <stdio.h>
#include <stdlib.h>

#include "bench_util.h"
#include "spmdrt.h"

static rt_ctx *C;

static rt_tensor *mk(int nd, const int64_t *s, unsigned seed, double lo, double hi)
{
    rt_tensor *t = rt_empty(C, RT_F32, nd, s);
    uint64_t st = seed * 2654435761u + 12345;
    for (int64_t i = 0; i < t->numel; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        ((float *)t->data)[i] = (float)(lo + (hi - lo) * (double)(st >> 11) / 9007199254740992.0);
    }
    return t;
}

typedef struct bench {
    const char *name;
    int per_step; /* calls per training step */
    void (*run)(void);
} bench;

static rt_tensor *h512, *b512, *x128, *g128, *b128, *s4, *mask, *neg, *logits, *big, *dy4, *q, *bq;

static void k_gelu(void)
{
    rt_tensor *y, *d;
    rt_unary_with_grad(C, RT_GELU, h512, &y, &d);
    rt_free(C, y);
    rt_free(C, d);
}
static void k_bias_add(void) { rt_free(C, rt_binary(C, RT_ADD, h512, b512)); }
static void k_bias_bwd(void)
{
    rt_tensor *da, *db;
    rt_binary_bwd(C, RT_ADD, h512, b512, h512, &da, &db);
    rt_free(C, da);
    rt_free(C, db);
}
static void k_ln(void) { rt_free(C, rt_layer_norm(C, x128, g128, b128, 1e-5)); }
static void k_ln_bwd(void)
{
    rt_tensor *dx, *dw, *db;
    rt_layer_norm_bwd(C, x128, g128, 1e-5, x128, &dx, &dw, &db);
    rt_free(C, dx);
    rt_free(C, dw);
    rt_free(C, db);
}
static void k_scale(void) { rt_free(C, rt_binary_scalar(C, RT_MUL, s4, 0.17677669529663687, false)); }
static void k_where(void) { rt_free(C, rt_where(C, mask, s4, neg)); }
static void k_where_bwd(void)
{
    rt_tensor *da;
    rt_where_bwd(C, mask, s4, neg, dy4, &da, NULL);
    rt_free(C, da);
}
static void k_softmax(void) { rt_free(C, rt_softmax(C, s4, -1)); }
static void k_softmax_bwd(void) { rt_free(C, rt_softmax_bwd(C, s4, dy4, -1)); }
static void k_qbias(void) { rt_free(C, rt_binary(C, RT_ADD, q, bq)); }
static void k_amax(void) { rt_free(C, rt_amax(C, logits, -1, false)); }
static void k_sum_last(void) { rt_free(C, rt_sum(C, logits, -1, false)); }
static void k_sum_all(void) { rt_free(C, rt_sum_all(C, big)); }
static void k_sq(void) { rt_free(C, rt_binary(C, RT_MUL, big, big)); }

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 50;
    C = rt_ctx_serial();
    h512 = mk(3, (int64_t[]){16, 64, 512}, 1, -3, 3);
    b512 = mk(1, (int64_t[]){512}, 2, -1, 1);
    x128 = mk(3, (int64_t[]){16, 64, 128}, 3, -2, 2);
    g128 = mk(1, (int64_t[]){128}, 4, 0.5, 1.5);
    b128 = mk(1, (int64_t[]){128}, 5, -1, 1);
    s4 = mk(4, (int64_t[]){16, 4, 64, 64}, 6, -4, 4);
    dy4 = mk(4, (int64_t[]){16, 4, 64, 64}, 7, -1, 1);
    mask = rt_empty(C, RT_I32, 2, (int64_t[]){64, 64});
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 64; j++)
            ((int32_t *)mask->data)[i * 64 + j] = i >= j;
    neg = rt_scalar(C, RT_F32, -1e9);
    logits = mk(3, (int64_t[]){16, 64, 256}, 8, -5, 5);
    big = mk(1, (int64_t[]){800000}, 9, -0.1, 0.1);
    q = mk(4, (int64_t[]){16, 4, 64, 32}, 10, -1, 1);
    bq = mk(3, (int64_t[]){4, 1, 32}, 11, -1, 1);
    const bench bs[] = {
        {"gelu_with_grad [16,64,512]", 4, k_gelu},
        {"bias add [16,64,512]+[512]", 4, k_bias_add},
        {"bias add backward", 4, k_bias_bwd},
        {"layer_norm [16,64,128]", 9, k_ln},
        {"layer_norm_bwd", 9, k_ln_bwd},
        {"scores * scale [16,4,64,64]", 4, k_scale},
        {"where(causal, s, -1e9)", 4, k_where},
        {"where backward", 4, k_where_bwd},
        {"softmax [16,4,64,64]", 4, k_softmax},
        {"softmax_bwd", 4, k_softmax_bwd},
        {"q + bias [16,4,64,32]+[4,1,32]", 12, k_qbias},
        {"amax [16,64,256] dim -1", 1, k_amax},
        {"sum [16,64,256] dim -1", 1, k_sum_last},
        {"sum_all [800000] (all 20 fields)", 1, k_sum_all},
        {"g * g [800000]", 1, k_sq},
    };
    int nb = (int)(sizeof bs / sizeof bs[0]);
    double *t = malloc(sizeof(double) * (size_t)reps);
    printf("%-34s %9s %9s %9s %6s %10s\n", "kernel", "median ms", "min ms", "max ms", "/step", "ms/step");
    double total = 0;
    for (int b = 0; b < nb; b++) {
        bs[b].run(); /* warm: pool buffers, pages */
        for (int r = 0; r < reps; r++) {
            double t0 = now_s();
            bs[b].run();
            t[r] = 1e3 * (now_s() - t0);
        }
        double lo = t[0], hi = t[0];
        for (int r = 1; r < reps; r++) {
            lo = t[r] < lo ? t[r] : lo;
            hi = t[r] > hi ? t[r] : hi;
        }
        double med = median(t, reps);
        total += med * bs[b].per_step;
        printf("%-34s %9.4f %9.4f %9.4f %6d %10.3f\n", bs[b].name, med, lo, hi, bs[b].per_step,
               med * bs[b].per_step);
    }
    printf("%-34s %9s %9s %9s %6s %10.3f\n", "total (median x calls per step)", "", "", "", "", total);
    free(t);
    rt_tensor *all[] = {h512, b512, x128, g128, b128, s4, dy4, mask, neg, logits, big, q, bq};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        rt_free(C, all[i]);
    rt_ctx_free_serial(C);
    return 0;
}
