/* 1. GELU with its derivative (the tp_mlp forward's elementwise kernel) over
 * 2^20 floats: the runtime's SLEEF kernels (AVX-512 and AVX2) against the
 * scalar libm loop they replace and against glibc's libmvec (AVX-512 and
 * AVX2), interleaved pass by pass, medians and min-max over the passes. It
 * also counts the elements where each vector variant's bits differ from
 * the other instruction set's (SLEEF's finz functions: none; libmvec: the
 * AVX2 and AVX-512 variants are different algorithms).
 * 2. Start-up: rt_randn of tp_mlp's parameters and data (w1 [1024, 4096],
 * w2 [4096, 1024], x and t [256, 1024], f32: 8.9 M values) with the scalar
 * loop (SPMD_VMATH=scalar) and the vector kernels, and how many values differ.
 * Usage: bench_vmath [reps] */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "spmdrt.h"

enum { N = 1 << 20 };

/* the runtime's scalar formula (kernels.c), libm erff/expf */
static void gelu_scalar(const float *x, float *y, float *g)
{
    for (int i = 0; i < N; i++) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2));
        g[i] = 0.5f * (1.0f + erff(v * (float)M_SQRT1_2)) +
               v * expf(-0.5f * v * v) * (float)(0.5 * M_2_SQRTPI * M_SQRT1_2);
    }
}

/* the vector variants are built for AVX-512F and AVX2+FMA (chosen at run time) */
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#endif
__m512 _ZGVeN16v_erff(__m512);
__m512 _ZGVeN16v_expf(__m512);
__m256 _ZGVdN8v_erff(__m256);
__m256 _ZGVdN8v_expf(__m256);

/* N is a multiple of 16: no tail */
static void gelu_mvec512(const float *x, float *y, float *g)
{
    const __m512 h = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f),
                 s = _mm512_set1_ps((float)M_SQRT1_2),
                 k = _mm512_set1_ps((float)(0.5 * M_2_SQRTPI * M_SQRT1_2));
    for (int i = 0; i < N; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        __m512 p = _mm512_add_ps(one, _ZGVeN16v_erff(_mm512_mul_ps(v, s)));
        __m512 e = _ZGVeN16v_expf(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5f), v), v));
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_mul_ps(h, v), p));
        _mm512_storeu_ps(g + i, _mm512_add_ps(_mm512_mul_ps(h, p), _mm512_mul_ps(_mm512_mul_ps(v, e), k)));
    }
}

static void gelu_mvec256(const float *x, float *y, float *g)
{
    const __m256 h = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f),
                 s = _mm256_set1_ps((float)M_SQRT1_2),
                 k = _mm256_set1_ps((float)(0.5 * M_2_SQRTPI * M_SQRT1_2));
    for (int i = 0; i < N; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 p = _mm256_add_ps(one, _ZGVdN8v_erff(_mm256_mul_ps(v, s)));
        __m256 e = _ZGVdN8v_expf(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-0.5f), v), v));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(h, v), p));
        _mm256_storeu_ps(g + i, _mm256_add_ps(_mm256_mul_ps(h, p), _mm256_mul_ps(_mm256_mul_ps(v, e), k)));
    }
}
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

typedef struct variant {
    const char *name;
    rt_ctx *ctx;                                       /* the runtime with SPMD_VMATH=... */
    void (*fn)(const float *x, float *y, float *g);    /* or a direct loop */
    float *y, *g;
    double *t;
} variant;

static rt_ctx *ctx_with(const char *vmath)
{
    setenv("SPMD_VMATH", vmath, 1);
    rt_ctx *c = rt_ctx_serial();
    unsetenv("SPMD_VMATH");
    return c;
}

static long differing(const float *a, const float *b)
{
    long n = 0;
    for (int i = 0; i < N; i++)
        n += memcmp(a + i, b + i, sizeof *a) != 0;
    return n;
}

int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 20;
    __builtin_cpu_init();
    bool avx512 = __builtin_cpu_supports("avx512f"),
         avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    variant v[6];
    int nv = 0;
    v[nv++] = (variant){.name = "scalar libm erff/expf (before)", .ctx = NULL, .fn = gelu_scalar};
    v[nv++] = (variant){.name = "runtime, SPMD_VMATH=scalar", .ctx = ctx_with("scalar"), .fn = NULL};
    if (avx512)
        v[nv++] = (variant){.name = "runtime SLEEF avx512 (default)", .ctx = ctx_with("avx512"), .fn = NULL};
    if (avx2)
        v[nv++] = (variant){.name = "runtime SLEEF avx2", .ctx = ctx_with("avx2"), .fn = NULL};
    if (avx512)
        v[nv++] = (variant){.name = "glibc libmvec avx512", .ctx = NULL, .fn = gelu_mvec512};
    if (avx2)
        v[nv++] = (variant){.name = "glibc libmvec avx2", .ctx = NULL, .fn = gelu_mvec256};
    rt_ctx *ctx = rt_ctx_serial();
    int64_t n = N;
    rt_tensor *x = rt_empty(ctx, RT_F32, 1, &n);
    for (int i = 0; i < N; i++) /* the range a gelu sees in training, and its tails */
        ((float *)x->data)[i] = -8.0f + 16.0f * (float)((i * 7919L) % N) / (float)N;
    for (int k = 0; k < nv; k++) {
        v[k].y = malloc(N * sizeof(float));
        v[k].g = malloc(N * sizeof(float));
        v[k].t = malloc((size_t)reps * sizeof(double));
    }
    for (int r = -2; r < reps; r++) /* 2 warm-up passes; variants interleaved */
        for (int k = 0; k < nv; k++) {
            double t0 = now_s();
            if (v[k].fn) {
                v[k].fn(x->data, v[k].y, v[k].g);
            } else {
                rt_tensor *y, *g;
                rt_unary_with_grad(v[k].ctx, RT_GELU, x, &y, &g);
                if (r == -1) {
                    memcpy(v[k].y, y->data, N * sizeof(float));
                    memcpy(v[k].g, g->data, N * sizeof(float));
                }
                rt_free(v[k].ctx, y);
                rt_free(v[k].ctx, g);
            }
            if (r >= 0)
                v[k].t[r] = now_s() - t0;
        }
    printf("gelu + gelu' of %d f32, %d interleaved passes\n", N, reps);
    printf("%-32s %10s %10s %10s %10s %14s\n", "variant", "median ms", "min ms", "max ms",
           "vs scalar", "max |diff|");
    double base = 0;
    for (int k = 0; k < nv; k++) {
        double lo = v[k].t[0], hi = v[k].t[0];
        for (int r = 0; r < reps; r++) {
            lo = v[k].t[r] < lo ? v[k].t[r] : lo;
            hi = v[k].t[r] > hi ? v[k].t[r] : hi;
        }
        double m = median(v[k].t, reps), dmax = 0;
        if (k == 0)
            base = m;
        for (int i = 0; i < N; i++) {
            double d = fabs((double)v[k].y[i] - v[0].y[i]), e = fabs((double)v[k].g[i] - v[0].g[i]);
            dmax = d > dmax ? d : dmax;
            dmax = e > dmax ? e : dmax;
        }
        printf("%-32s %10.3f %10.3f %10.3f %10.3f %14.3g\n", v[k].name, m * 1e3, lo * 1e3,
               hi * 1e3, m / base, dmax);
    }
    if (avx512 && avx2) {
        int s5 = 2, s2 = 3, m5 = 4, m2 = 5;
        printf("elements whose bits differ between avx512 and avx2: SLEEF %ld (gelu) %ld (gelu'), "
               "libmvec %ld (gelu) %ld (gelu')\n",
               differing(v[s5].y, v[s2].y), differing(v[s5].g, v[s2].g),
               differing(v[m5].y, v[m2].y), differing(v[m5].g, v[m2].g));
    }
    /* 2. randn */
    {
        rt_ctx *cs = ctx_with("scalar"), *cv = rt_ctx_serial();
        int64_t shapes[4][2] = {{1024, 4096}, {4096, 1024}, {256, 1024}, {256, 1024}};
        int rr = reps < 5 ? reps : 5;
        double ts[5], tv[5];
        long diff = 0, total = 0;
        for (int r = 0; r < rr; r++)
            for (int which = 0; which < 2; which++) {
                rt_ctx *c = which ? cv : cs;
                rt_tensor *t[4];
                double t0 = now_s();
                for (int i = 0; i < 4; i++) {
                    rt_layout l = rt_layout_full(2, shapes[i]);
                    t[i] = rt_randn(c, RT_F32, &l, (uint64_t)(i + 1), 0.1);
                }
                (which ? tv : ts)[r] = now_s() - t0;
                if (r == 0 && which == 1) {
                    for (int i = 0; i < 4; i++) {
                        rt_layout l = rt_layout_full(2, shapes[i]);
                        rt_tensor *s = rt_randn(cs, RT_F32, &l, (uint64_t)(i + 1), 0.1);
                        for (int64_t e = 0; e < s->numel; e++)
                            diff += ((float *)s->data)[e] != ((float *)t[i]->data)[e];
                        total += s->numel;
                        rt_free(cs, s);
                    }
                }
                for (int i = 0; i < 4; i++)
                    rt_free(c, t[i]);
            }
        double ms = median(ts, rr), mv = median(tv, rr);
        printf("\nrandn of tp_mlp's parameters and data (%ld f32), %d interleaved runs\n", total, rr);
        printf("%-32s %10.3f ms\n%-32s %10.3f ms  (%.3f of scalar)\n", "scalar (SPMD_VMATH=scalar)", ms * 1e3,
               "vector (default)", mv * 1e3, mv / ms);
        printf("values that differ from the scalar loop's: %ld of %ld\n", diff, total);
        rt_ctx_free_serial(cs);
        rt_ctx_free_serial(cv);
    }
    for (int k = 0; k < nv; k++) {
        free(v[k].y);
        free(v[k].g);
        free(v[k].t);
        if (v[k].ctx)
            rt_ctx_free_serial(v[k].ctx);
    }
    rt_free(ctx, x);
    rt_ctx_free_serial(ctx);
    return 0;
}
