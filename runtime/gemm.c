/* The GEMM that every matmul and einsum, and their backwards, run on
 * (matmul.c calls rt_gemm and nothing else), and the choice of library for
 * f32: OpenBLAS or oneDNN, made per machine at start-up.
 *
 * Which of the two is faster for f32 depends on the CPU, not the program:
 * on an AMD Zen 5 (AVX-512) oneDNN 2.6 runs tp_mlp's GEMMs at about twice
 * the speed of OpenBLAS 0.3.21, on an Intel machine with AMX OpenBLAS was the
 * faster. Nothing is compiled for the build machine. Instead rt_init times a
 * few GEMMs of typical sizes through both (interleaved, best of CAL_REPS, a
 * few ms) on rank 0 of the world, which picks oneDNN only when it is at least
 * RT_GEMM_DNNL_MIN times as fast, so that the choice cannot flip from run to
 * run on a machine where the two are close, and broadcasts its choice: every
 * rank uses the same library, and replicated values computed on several
 * ranks stay bit-identical. The same library and the same shapes give the
 * same bits, run after run. SPMD_GEMM=openblas|dnnl|auto (read on rank 0)
 * overrides the timing. A context without MPI (rt_ctx_serial) chooses the
 * same way at its first f32 GEMM.
 *
 * f64 always runs on OpenBLAS (oneDNN has no f64 matmul), bf16 always on
 * oneDNN (OpenBLAS has no bf16 GEMM). */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_cpu.h"

/* oneDNN is chosen by the timing only when it is at least this much faster */
#define RT_GEMM_DNNL_MIN 1.25
enum { CAL_REPS = 4 };

/* the timed GEMMs: a forward (A B) and the two backward forms (A B^T, A^T B)
 * at the sizes of a small model's per-rank shards */
typedef struct cal_shape {
    int m, n, k;
    bool ta, tb;
} cal_shape;
static const cal_shape cal_shapes[] = {
    {128, 256, 256, false, false},
    {128, 256, 256, false, true},
    {256, 256, 128, true, false},
};

const char *rt_gemm_lib_name(rt_gemm_lib lib)
{
    return lib == RT_GEMM_DNNL ? "oneDNN" : "OpenBLAS";
}

static void sgemm_openblas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                           const void *B, void *C, float beta)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, 1.0f, A, (int)(ta ? M : K), B, (int)(tb ? K : N), beta,
                C, (int)N);
}

static void sgemm_lib(rt_ctx *ctx, rt_gemm_lib lib, const cal_shape *s, const float *A,
                      const float *B, float *C)
{
    if (lib == RT_GEMM_DNNL)
        rt_dnnl_gemm(ctx, s->ta, s->tb, s->m, s->n, s->k, A, B, RT_F32, C, RT_F32, false);
    else
        sgemm_openblas(s->ta, s->tb, s->m, s->n, s->k, A, B, C, 0.0f);
}

/* times cal_shapes through both libraries; gflops[lib] */
static void calibrate(rt_ctx *ctx, double gflops[2])
{
    size_t na = 0, nb = 0, nc = 0;
    for (size_t i = 0; i < sizeof cal_shapes / sizeof *cal_shapes; i++) {
        const cal_shape *s = &cal_shapes[i];
        size_t a = (size_t)s->m * (size_t)s->k, b = (size_t)s->k * (size_t)s->n,
               c = (size_t)s->m * (size_t)s->n;
        na = a > na ? a : na;
        nb = b > nb ? b : nb;
        nc = c > nc ? c : nc;
    }
    float *A = aligned_alloc(64, (na * sizeof(float) + 63) & ~(size_t)63);
    float *B = aligned_alloc(64, (nb * sizeof(float) + 63) & ~(size_t)63);
    float *C = aligned_alloc(64, (nc * sizeof(float) + 63) & ~(size_t)63);
    if (!A || !B || !C) {
        free(A); free(B); free(C);
        rt_fail(ctx, "out of memory");
    }
    for (size_t i = 0; i < na; i++) /* small values: no denormals, no overflow */
        A[i] = (float)(int)(i % 17) * 0.01f - 0.08f;
    for (size_t i = 0; i < nb; i++)
        B[i] = (float)(int)(i % 13) * 0.01f - 0.06f;
    double flop = 0, total[2] = {0, 0};
    for (size_t i = 0; i < sizeof cal_shapes / sizeof *cal_shapes; i++) {
        const cal_shape *s = &cal_shapes[i];
        double best[2] = {1e30, 1e30};
        for (int r = -1; r < CAL_REPS; r++) /* r = -1: warm-up (oneDNN's JIT, first touch) */
            for (int lib = 0; lib < 2; lib++) {
                double t0 = rt_now();
                sgemm_lib(ctx, (rt_gemm_lib)lib, s, A, B, C);
                double t = rt_now() - t0;
                if (r >= 0 && t < best[lib])
                    best[lib] = t;
            }
        total[0] += best[0];
        total[1] += best[1];
        flop += 2.0 * s->m * s->n * s->k;
    }
    for (int lib = 0; lib < 2; lib++)
        gflops[lib] = total[lib] > 0 ? flop / total[lib] * 1e-9 : 0;
    free(A);
    free(B);
    free(C);
}

/* rank 0's choice: SPMD_GEMM, or the timing */
static rt_gemm_lib choose(rt_ctx *ctx)
{
    const char *env = getenv("SPMD_GEMM");
    if (env && *env && strcmp(env, "auto") != 0) {
        bool dnnl = strcmp(env, "dnnl") == 0 || strcmp(env, "onednn") == 0;
        RT_CHECK(ctx, dnnl || strcmp(env, "openblas") == 0,
                 "SPMD_GEMM=%s: expected openblas, dnnl or auto", env);
        ctx->tgt->gemm_how = "SPMD_GEMM";
        return dnnl ? RT_GEMM_DNNL : RT_GEMM_OPENBLAS;
    }
    double t0 = rt_now();
    calibrate(ctx, ctx->tgt->gemm_gflops);
    ctx->tgt->gemm_cal_s = rt_now() - t0;
    ctx->tgt->gemm_how = "auto";
    return ctx->tgt->gemm_gflops[RT_GEMM_DNNL] >= RT_GEMM_DNNL_MIN * ctx->tgt->gemm_gflops[RT_GEMM_OPENBLAS]
               ? RT_GEMM_DNNL
               : RT_GEMM_OPENBLAS;
}

void rt_gemm_setup(rt_ctx *ctx)
{
    int lib = ctx->rank == 0 ? (int)choose(ctx) : -1;
    if (ctx->world > 1) {
        /* rank 0 is timing: the others wait without spinning, so that on a
         * node with more ranks than cores they leave it the core */
        MPI_Request req;
        RT_CALL_MPI(ctx, MPI_Ibcast(&lib, 1, MPI_INT, 0, MPI_COMM_WORLD, &req));
        for (;;) {
            int done = 0;
            RT_CALL_MPI(ctx, MPI_Test(&req, &done, MPI_STATUS_IGNORE));
            if (done)
                break;
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
        if (ctx->rank != 0)
            ctx->tgt->gemm_how = "rank 0";
    }
    ctx->tgt->gemm_f32 = lib;
}

rt_gemm_lib rt_gemm_f32_lib(rt_ctx *ctx)
{
    if (ctx->tgt->gemm_f32 < 0) /* a serial ctx: chosen at its first f32 GEMM */
        ctx->tgt->gemm_f32 = (int)choose(ctx);
    return (rt_gemm_lib)ctx->tgt->gemm_f32;
}

void rt_set_gemm_f32_lib(rt_ctx *ctx, rt_gemm_lib lib)
{
    RT_CHECK(ctx, lib == RT_GEMM_OPENBLAS || lib == RT_GEMM_DNNL,
             "rt_set_gemm_f32_lib: unknown library %d", (int)lib);
    ctx->tgt->gemm_f32 = (int)lib;
    ctx->tgt->gemm_how = "set by the program";
}

/* no GEMM library here has the bias gradient as an epilogue (the CPU
 * target's code never asks: its bias gradients are rt_binary_bwd's sums) */
bool rt_gemm_bgrad(rt_ctx *ctx, rt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                   const void *B, void *C, void *bias)
{
    (void)ctx, (void)dt, (void)M, (void)N, (void)K, (void)A, (void)B, (void)C, (void)bias;
    return false;
}

/* OpenBLAS's and oneDNN's beta = 1 add the product to C as they go (K
 * block by block), not the finished product once: other bits than the
 * GEMM and an add (the CPU target's code never asks) */
bool rt_gemm_acc(rt_ctx *ctx, rt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, const void *B,
                 void *C)
{
    (void)ctx, (void)dt, (void)M, (void)N, (void)K, (void)A, (void)B, (void)C;
    return false;
}

void rt_gemm_describe(const rt_ctx *ctx, char *buf, size_t n)
{
    if (ctx->tgt->gemm_f32 < 0) {
        snprintf(buf, n, "f32 GEMM: not chosen (no f32 GEMM ran)");
        return;
    }
    int k = snprintf(buf, n, "f32 GEMM: %s (%s", rt_gemm_lib_name((rt_gemm_lib)ctx->tgt->gemm_f32),
                     ctx->tgt->gemm_how ? ctx->tgt->gemm_how : "?");
    if (k >= 0 && (size_t)k < n && ctx->tgt->gemm_how && strcmp(ctx->tgt->gemm_how, "auto") == 0)
        k += snprintf(buf + k, n - (size_t)k,
                      ": OpenBLAS %.0f, oneDNN %.0f GFLOP/s, oneDNN when >= %.2fx; timed in "
                      "%.1f ms",
                      ctx->tgt->gemm_gflops[RT_GEMM_OPENBLAS], ctx->tgt->gemm_gflops[RT_GEMM_DNNL],
                      RT_GEMM_DNNL_MIN, ctx->tgt->gemm_cal_s * 1e3);
    if (k >= 0 && (size_t)k < n)
        snprintf(buf + k, n - (size_t)k, "); f64: OpenBLAS; bf16: oneDNN");
}

void rt_gemm_strided(rt_ctx *ctx, rt_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                     const void *A, int64_t sa, const void *B, int64_t sb, void *C, int64_t sc,
                     int64_t batch)
{
    size_t esz = rt_dtype_size(dt);
    for (int64_t i = 0; i < batch; i++)
        rt_gemm(ctx, dt, ta, tb, M, N, K, (const char *)A + (size_t)(i * sa) * esz,
                (const char *)B + (size_t)(i * sb) * esz, (char *)C + (size_t)(i * sc) * esz, 0.0);
}

void rt_gemm(rt_ctx *ctx, rt_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
             const void *A, const void *B, void *C, double beta)
{
    if (dt == RT_BF16 || (dt == RT_F32 && rt_gemm_f32_lib(ctx) == RT_GEMM_DNNL)) {
        /* oneDNN (matmul_dnnl.c); bf16 accumulates in f32, the result is bf16 */
        rt_dnnl_gemm(ctx, ta, tb, M, N, K, A, B, dt, C, dt, beta != 0.0);
        return;
    }
    if (M == 0 || N == 0)
        return;
    if (K == 0) {
        if (beta == 0)
            memset(C, 0, (size_t)(M * N) * rt_dtype_size(dt));
        return;
    }
    if (dt == RT_F32) {
        sgemm_openblas(ta, tb, M, N, K, A, B, C, (float)beta);
        return;
    }
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, 1.0, A, (int)(ta ? M : K), B, (int)(tb ? K : N), beta, C,
                (int)N);
}
