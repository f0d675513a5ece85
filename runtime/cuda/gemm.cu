/* The CUDA target's GEMM (rt_gemm, under matmul.c's matmul and einsum):
 * cuBLASLt, row-major through the column-major identity C^T = B^T A^T. f32
 * computes in f32 without TF32 unless SPMD_TF32=1, f64 in f64, bf16 with
 * f32 accumulation. One algorithm per shape (the heuristic's first, chosen
 * once and cached) and a fixed workspace, so a rerun is bit-identical.
 * The simulation build multiplies on the host in a fixed order (f64 and
 * f32 accumulate in double, bf16 in float). Also matmul_bias_act. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"

/* rt_gelu_tanh_ (the simulation's epilogue) */
#define RT_EW_QUAL RT_DEV_INLINE
#include "elementwise_formulas.h"

#ifndef RT_SIM
#include <cublasLt.h>

#define RT_GEMM_WORKSPACE ((size_t)32 << 20)

typedef struct plan {
    int dt, ta, tb, beta;
    int epi; /* a cublasLtEpilogue_t (rt_matmul_bias_act, rt_gemm_bgrad), CUBLASLT_EPILOGUE_DEFAULT otherwise */
    bool none; /* rt_gemm_bgrad's: the heuristic has no algorithm (the caller falls back) */
    int64_t M, N, K;
    int64_t batch, sa, sb, sc; /* rt_gemm_strided's (batch 1: rt_gemm) */
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} plan;

struct rt_gemm_plans {
    cublasLtHandle_t lt;
    void *workspace;
    bool tf32;
    plan *plans;
    int n, cap;
};

static void lt_check(rt_ctx *ctx, cublasStatus_t st, const char *call)
{
    if (st != CUBLAS_STATUS_SUCCESS) {
        char msg[64];
        snprintf(msg, sizeof msg, "cuBLAS status %d", (int)st);
        rt_dev_fail(ctx, call, msg);
    }
}
#define LT(ctx, call) lt_check((ctx), (call), #call)
#endif

extern "C" {

#ifdef RT_SIM
struct rt_gemm_plans {
    int unused;
};

/* one GEMM (a launch counted as a GEMM, as cuBLASLt's call is) over
 * batch products at strides sa, sb, sc; the real build's cases: nothing
 * for an empty result, a fill for K == 0 */
static void sim_gemm(rt_ctx *ctx, rt_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                     const void *A, int64_t sa, const void *B, int64_t sb, void *C, int64_t sc,
                     int64_t batch, double beta)
{
    ctx->tgt->op = "gemm";
    if (batch <= 0 || M == 0 || N == 0)
        return;
    if (K == 0) {
        size_t esz = rt_dtype_size(dt);
        for (int64_t b = 0; b < batch && beta == 0; b++)
            rt_dev_memset0(ctx, (char *)C + (size_t)(b * sc) * esz, (size_t)(M * N) * esz);
        return;
    }
    rt_launch_as(ctx, RT_OP_GEMM, batch * M * N, [=] RT_HD(int64_t u) {
        int64_t b = u / (M * N), t = u % (M * N);
        int64_t i = t / N, j = t % N;
        int64_t oa = b * sa, ob = b * sb, oc = b * sc;
        double acc = 0;
        float accf = 0;
        for (int64_t k = 0; k < K; k++) {
            double a = rt_ld(A, dt, oa + (ta ? k * M + i : i * K + k));
            double x = rt_ld(B, dt, ob + (tb ? j * K + k : k * N + j));
            if (dt == RT_BF16)
                accf += (float)a * (float)x;
            else
                acc += a * x;
        }
        double r = dt == RT_BF16 ? (double)accf : acc;
        if (beta != 0) /* the epilogue: the product's f32 result (the device's
                        * accumulator) added to C, rounded once */
            r = (dt == RT_F32 ? (double)(float)r : r) + beta * rt_ld(C, dt, oc + t);
        rt_st(C, dt, oc + t, r);
    });
}

void rt_gemm(rt_ctx *ctx, rt_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
             const void *A, const void *B, void *C, double beta)
{
    sim_gemm(ctx, dt, ta, tb, M, N, K, A, 0, B, 0, C, 0, 1, beta);
}

/* the device's accumulating GEMM (below): sim_gemm with beta 1 */
bool rt_gemm_acc(rt_ctx *ctx, rt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, const void *B,
                 void *C)
{
    if (dt != RT_F32 && dt != RT_F64)
        return false;
    sim_gemm(ctx, dt, false, true, M, N, K, A, 0, B, 0, C, 0, 1, 1.0);
    return true;
}

void rt_gemm_strided(rt_ctx *ctx, rt_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                     const void *A, int64_t sa, const void *B, int64_t sb, void *C, int64_t sc,
                     int64_t batch)
{
    sim_gemm(ctx, dt, ta, tb, M, N, K, A, sa, B, sb, C, sc, batch, 0.0);
}

/* the device's epilogue GEMM (below), as the device orders it: the bf16
 * product accumulated in f32 (sim_gemm's order), the bias added to the
 * accumulator, the activation on it in f32, one rounding to bf16 */
static void gemm_epilogue(rt_ctx *ctx, rt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                          const void *B, const void *bias, int act, void *C)
{
    ctx->tgt->op = "gemm";
    rt_launch_as(ctx, RT_OP_GEMM, M * N, [=] RT_HD(int64_t t) {
        int64_t i = t / N, j = t % N;
        float accf = 0;
        double acc = 0;
        for (int64_t k = 0; k < K; k++) {
            double a = rt_ld(A, dt, i * K + k), x = rt_ld(B, dt, k * N + j);
            if (dt == RT_BF16)
                accf += (float)a * (float)x;
            else
                acc += a * x;
        }
        if (dt != RT_BF16) /* f32: sim_gemm's result, then rt_binary's add (double, rounded) */
            accf = bias ? (float)((double)(float)acc + rt_ld(bias, dt, j)) : (float)acc;
        else if (bias)
            accf += (float)rt_ld(bias, dt, j);
        if (act == RT_RELU)
            accf = accf > 0 ? accf : 0.0f;
        else if (act == RT_GELU_TANH)
            accf = rt_gelu_tanh_(accf);
        rt_st(C, dt, t, accf);
    });
}

/* the device's bias-gradient GEMM (below) in one launch: C as sim_gemm
 * computes A^T B, then bias[j] = B's column j summed over K in order (f32
 * in double, bf16 in float, rounded once); the simulation has it for f32
 * and bf16, as the device's heuristic does */
bool rt_gemm_bgrad(rt_ctx *ctx, rt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                   const void *B, void *C, void *bias)
{
    if (dt != RT_F32 && dt != RT_BF16)
        return false;
    ctx->tgt->op = "gemm";
    rt_launch_as(ctx, RT_OP_GEMM, M * N + N, [=] RT_HD(int64_t u) {
        double acc = 0;
        float accf = 0;
        if (u < M * N) {
            int64_t i = u / N, j = u % N;
            for (int64_t k = 0; k < K; k++) {
                double a = rt_ld(A, dt, k * M + i), x = rt_ld(B, dt, k * N + j);
                if (dt == RT_BF16)
                    accf += (float)a * (float)x;
                else
                    acc += a * x;
            }
            rt_st(C, dt, u, dt == RT_BF16 ? (double)accf : acc);
        } else {
            int64_t j = u - M * N;
            for (int64_t k = 0; k < K; k++) {
                if (dt == RT_BF16)
                    accf += (float)rt_ld(B, dt, k * N + j);
                else
                    acc += rt_ld(B, dt, k * N + j);
            }
            rt_st(bias, dt, j, dt == RT_BF16 ? (double)accf : acc);
        }
    });
    return true;
}

void rt_cuda_gemm_free(rt_ctx *ctx) { (void)ctx; }

void rt_gemm_describe(const rt_ctx *ctx, char *buf, size_t n)
{
    (void)ctx;
    snprintf(buf, n, "GEMM: simulated device (host loops, fixed order)");
}
#else
static cudaDataType_t cuda_type(rt_dtype dt)
{
    return dt == RT_F64 ? CUDA_R_64F : dt == RT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static struct rt_gemm_plans *plans_of(rt_ctx *ctx)
{
    if (!ctx->tgt->gemm) {
        struct rt_gemm_plans *g = (struct rt_gemm_plans *)calloc(1, sizeof *g);
        RT_CHECK(ctx, g != NULL, "out of memory");
        LT(ctx, cublasLtCreate(&g->lt));
        RT_CU(ctx, cudaMalloc(&g->workspace, RT_GEMM_WORKSPACE));
        const char *e = getenv("SPMD_TF32");
        g->tf32 = e && strcmp(e, "1") == 0;
        ctx->tgt->gemm = g;
    }
    return ctx->tgt->gemm;
}

static plan *plan_for_epi(rt_ctx *ctx, rt_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                          bool beta, int64_t batch, int64_t sa, int64_t sb, int64_t sc, int epi)
{
    struct rt_gemm_plans *g = plans_of(ctx);
    for (int i = 0; i < g->n; i++) {
        plan *p = &g->plans[i];
        if (p->dt == dt && p->ta == ta && p->tb == tb && p->M == M && p->N == N && p->K == K &&
            p->beta == beta && p->batch == batch && p->sa == sa && p->sb == sb && p->sc == sc &&
            p->epi == epi)
            return p;
    }
    if (g->n == g->cap) {
        int nc = g->cap ? 2 * g->cap : 16;
        plan *np = (plan *)realloc(g->plans, (size_t)nc * sizeof *np);
        RT_CHECK(ctx, np != NULL, "out of memory");
        g->plans = np;
        g->cap = nc;
    }
    plan *p = &g->plans[g->n];
    memset(p, 0, sizeof *p);
    p->dt = dt; p->ta = ta; p->tb = tb; p->M = M; p->N = N; p->K = K; p->beta = beta;
    p->batch = batch; p->sa = sa; p->sb = sb; p->sc = sc; p->epi = epi;
    cublasComputeType_t ct = dt == RT_F64 ? CUBLAS_COMPUTE_64F
                           : dt == RT_F32 && g->tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                     : CUBLAS_COMPUTE_32F;
    cudaDataType_t st = dt == RT_F64 ? CUDA_R_64F : CUDA_R_32F, t = cuda_type(dt);
    LT(ctx, cublasLtMatmulDescCreate(&p->op, ct, st));
    /* column-major: C^T[N,M] = op(B)^T[N,K] op(A)^T[K,M] */
    cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT(ctx, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    LT(ctx, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (epi != CUBLASLT_EPILOGUE_DEFAULT) { /* the bias (a vector over C^T's rows: N) in the output's type */
        cublasLtEpilogue_t e = (cublasLtEpilogue_t)epi;
        cudaDataType_t bt = cuda_type(dt);
        LT(ctx, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
        LT(ctx, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt));
    }
    LT(ctx, cublasLtMatrixLayoutCreate(&p->la, t, tb ? K : N, tb ? N : K, tb ? K : N));
    LT(ctx, cublasLtMatrixLayoutCreate(&p->lb, t, ta ? M : K, ta ? K : M, ta ? M : K));
    LT(ctx, cublasLtMatrixLayoutCreate(&p->lc, t, N, M, N));
    if (batch > 1) { /* la is B's layout, lb A's (column-major, above) */
        RT_CHECK(ctx, batch <= INT32_MAX, "gemm: %lld batch entries", (long long)batch);
        int32_t count = (int32_t)batch;
        struct { cublasLtMatrixLayout_t l; int64_t stride; } ls[3] = {{p->la, sb}, {p->lb, sa}, {p->lc, sc}};
        for (int i = 0; i < 3; i++) {
            LT(ctx, cublasLtMatrixLayoutSetAttribute(ls[i].l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                     &count, sizeof count));
            LT(ctx, cublasLtMatrixLayoutSetAttribute(ls[i].l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                     &ls[i].stride, sizeof ls[i].stride));
        }
    }
    cublasLtMatmulPreference_t pref;
    LT(ctx, cublasLtMatmulPreferenceCreate(&pref));
    size_t ws = RT_GEMM_WORKSPACE;
    LT(ctx, cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(g->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1,
                                                       &res, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (epi == CUBLASLT_EPILOGUE_BGRADA && (hs != CUBLAS_STATUS_SUCCESS || found <= 0)) {
        /* refused (not supported, or no algorithm): remembered, and rt_gemm_bgrad falls back */
        p->none = true;
        g->n++;
        return p;
    }
    lt_check(ctx, hs, "cublasLtMatmulAlgoGetHeuristic");
    RT_CHECK(ctx, found > 0, "gemm: cuBLASLt has no algorithm for %s [%lld, %lld] x [%lld, %lld]",
             rt_dtype_name(dt), (long long)M, (long long)K, (long long)K, (long long)N);
    p->algo = res.algo;
    g->n++;
    return p;
}

static plan *plan_for(rt_ctx *ctx, rt_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool beta,
                      int64_t batch, int64_t sa, int64_t sb, int64_t sc)
{
    return plan_for_epi(ctx, dt, ta, tb, M, N, K, beta, batch, sa, sb, sc, CUBLASLT_EPILOGUE_DEFAULT);
}

/* C[M, N] = act(A[M, K] B[K, N] + bias[N]) in one cuBLASLt call (bf16 or
 * f32, f32 accumulation): its epilogue adds the bias to the f32 accumulator
 * and applies the activation before the one rounding to the dtype (for f32
 * the bits of the GEMM, then the add, then relu, as separate kernels).  act: -1,
 * RT_RELU or RT_GELU_TANH (cuBLASLt's GELU is the tanh form); bias may be
 * NULL.  K > 0, M, N > 0. */
static void gemm_epilogue(rt_ctx *ctx, rt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                          const void *B, const void *bias, int act, void *C)
{
    cublasLtEpilogue_t e = bias ? (act == RT_RELU ? CUBLASLT_EPILOGUE_RELU_BIAS
                                   : act == RT_GELU_TANH ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                : (act == RT_RELU ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_GELU);
    plan *p = plan_for_epi(ctx, dt, false, false, M, N, K, false, 1, 0, 0, 0, (int)e);
    struct rt_gemm_plans *g = ctx->tgt->gemm;
    if (bias)
        LT(ctx, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    float one = 1.0f, zero = 0.0f; /* bf16 and f32 compute in f32 */
    rt_count_op(ctx, RT_OP_GEMM);
    LT(ctx, cublasLtMatmul(g->lt, p->op, &one, B, p->la, A, p->lb, &zero, C, p->lc, C, p->lc, &p->algo,
                           g->workspace, RT_GEMM_WORKSPACE, (cudaStream_t)ctx->tgt->stream));
}

/* C[M,N] = A^T B with bias[N] = B summed over K, one cuBLASLt call.  In
 * the column-major identity C^T = B^T A, cuBLASLt's A operand is our B
 * (not transposed: [N, K] column-major) and D's rows are N, so the
 * epilogue is BGRADA (the bias gradient of cuBLASLt's A, a vector over D's
 * rows, reduced over the GEMM's K); the bias in the output's type.  false
 * where the heuristic has no algorithm for it (f64 among others). */
bool rt_gemm_bgrad(rt_ctx *ctx, rt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                   const void *B, void *C, void *bias)
{
    if (dt != RT_F32 && dt != RT_BF16)
        return false;
    plan *p = plan_for_epi(ctx, dt, true, false, M, N, K, false, 1, 0, 0, 0, (int)CUBLASLT_EPILOGUE_BGRADA);
    if (p->none)
        return false;
    struct rt_gemm_plans *g = ctx->tgt->gemm;
    ctx->tgt->op = "gemm";
    LT(ctx, cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
    float one = 1.0f, zero = 0.0f; /* bf16 and f32 compute in f32 */
    rt_count_op(ctx, RT_OP_GEMM);
    LT(ctx, cublasLtMatmul(g->lt, p->op, &one, B, p->la, A, p->lb, &zero, C, p->lc, C, p->lc, &p->algo,
                           g->workspace, RT_GEMM_WORKSPACE, (cudaStream_t)ctx->tgt->stream));
    return true;
}

void rt_gemm(rt_ctx *ctx, rt_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
             const void *A, const void *B, void *C, double beta)
{
    ctx->tgt->op = "gemm";
    if (M == 0 || N == 0)
        return;
    if (K == 0) {
        if (beta == 0)
            rt_dev_memset0(ctx, C, (size_t)(M * N) * rt_dtype_size(dt));
        return;
    }
    plan *p = plan_for(ctx, dt, ta, tb, M, N, K, beta != 0, 1, 0, 0, 0);
    struct rt_gemm_plans *g = ctx->tgt->gemm;
    double one64 = 1.0, beta64 = beta;
    float one32 = 1.0f, beta32 = (float)beta;
    const void *alpha = dt == RT_F64 ? (const void *)&one64 : (const void *)&one32;
    const void *bp = dt == RT_F64 ? (const void *)&beta64 : (const void *)&beta32;
    rt_count_op(ctx, RT_OP_GEMM);
    LT(ctx, cublasLtMatmul(g->lt, p->op, alpha, B, p->la, A, p->lb, bp, C, p->lc, C, p->lc,
                           &p->algo, g->workspace, RT_GEMM_WORKSPACE,
                           (cudaStream_t)ctx->tgt->stream));
}

/* C += A B^T: the GEMM with beta = 1, whose epilogue adds its f32 (f64)
 * result to C, rounded once; bf16 would round the product to bf16 first:
 * not offered */
bool rt_gemm_acc(rt_ctx *ctx, rt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, const void *B,
                 void *C)
{
    if (dt != RT_F32 && dt != RT_F64)
        return false;
    rt_gemm(ctx, dt, false, true, M, N, K, A, B, C, 1.0);
    return true;
}

void rt_gemm_strided(rt_ctx *ctx, rt_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                     const void *A, int64_t sa, const void *B, int64_t sb, void *C, int64_t sc,
                     int64_t batch)
{
    ctx->tgt->op = "gemm";
    if (batch <= 0 || M == 0 || N == 0)
        return;
    if (batch == 1 || K == 0) {
        size_t esz = rt_dtype_size(dt);
        for (int64_t i = 0; i < batch; i++)
            rt_gemm(ctx, dt, ta, tb, M, N, K, (const char *)A + (size_t)(i * sa) * esz,
                    (const char *)B + (size_t)(i * sb) * esz, (char *)C + (size_t)(i * sc) * esz, 0.0);
        return;
    }
    plan *p = plan_for(ctx, dt, ta, tb, M, N, K, false, batch, sa, sb, sc);
    struct rt_gemm_plans *g = ctx->tgt->gemm;
    double one64 = 1.0, zero64 = 0.0;
    float one32 = 1.0f, zero32 = 0.0f;
    const void *alpha = dt == RT_F64 ? (const void *)&one64 : (const void *)&one32;
    const void *bp = dt == RT_F64 ? (const void *)&zero64 : (const void *)&zero32;
    rt_count_op(ctx, RT_OP_GEMM);
    LT(ctx, cublasLtMatmul(g->lt, p->op, alpha, B, p->la, A, p->lb, bp, C, p->lc, C, p->lc,
                           &p->algo, g->workspace, RT_GEMM_WORKSPACE,
                           (cudaStream_t)ctx->tgt->stream));
}

void rt_cuda_gemm_free(rt_ctx *ctx)
{
    struct rt_gemm_plans *g = ctx->tgt->gemm;
    if (!g)
        return;
    for (int i = 0; i < g->n; i++) {
        cublasLtMatrixLayoutDestroy(g->plans[i].la);
        cublasLtMatrixLayoutDestroy(g->plans[i].lb);
        cublasLtMatrixLayoutDestroy(g->plans[i].lc);
        cublasLtMatmulDescDestroy(g->plans[i].op);
    }
    free(g->plans);
    cudaFree(g->workspace);
    cublasLtDestroy(g->lt);
    free(g);
    ctx->tgt->gemm = NULL;
}

void rt_gemm_describe(const rt_ctx *ctx, char *buf, size_t n)
{
    bool tf32 = ctx->tgt->gemm ? ctx->tgt->gemm->tf32 : false;
    snprintf(buf, n, "GEMM: cuBLASLt (f32 %s, one algorithm per shape)",
             tf32 ? "with TF32 (SPMD_TF32=1)" : "without TF32");
}
#endif

/* act(a @ b + bias) for bf16 or f32 [.., M, K] x [K, N] (b may be [K,
 * n...] with the bias of its trailing dims: an einsum "btd,dhe->bthe" whose
 * result is [.., n...]; the compiler's GEMM epilogues, sched_gemm_epilogue; f32 on the CUDA target only, its
 * training forwards' `x @ w + b` included): one cuBLASLt GEMM whose epilogue
 * adds the bias to the f32 accumulator and applies relu or gelu_tanh before
 * the one rounding to the dtype, as the CPU target's oneDNN post-ops do for
 * bf16 (the sums' order aside; for f32 the separate kernels' bits); gelu (erf) is not cuBLASLt's GELU (the tanh form), so it
 * runs after the GEMM as its own kernel, on the bf16 result.  The
 * simulation emulates the epilogue in the same order.  An empty product
 * (K == 0) or result takes the plain path: matmul, bias, activation. */
rt_tensor *rt_matmul_bias_act(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b,
                              const rt_tensor *bias, int act)
{
    rt_dtype dt = a->dtype;
    RT_CHECK(ctx, (dt == RT_BF16 || dt == RT_F32) && b->dtype == dt && a->ndim >= 2 && b->ndim >= 2 &&
                      a->ndim + b->ndim - 2 <= RT_MAX_DIMS,
             "matmul_bias_act: needs bf16 or f32 [..., m, k] and [k, n...] of one dtype");
    int nn = b->ndim - 1;
    int64_t k = a->shape[a->ndim - 1], n = rt_numel_of(nn, b->shape + 1), m = a->numel / (k ? k : 1);
    RT_CHECK(ctx, b->shape[0] == k, "matmul_bias_act: inner sizes %lld and %lld differ", (long long)k,
             (long long)b->shape[0]);
    RT_CHECK(ctx, !bias || (bias->ndim == nn && bias->dtype == dt &&
                            memcmp(bias->shape, b->shape + 1, (size_t)nn * sizeof *bias->shape) == 0),
             "matmul_bias_act: bias must be %s of b's trailing dims ([%lld] in all)", rt_dtype_name(dt),
             (long long)n);
    /* the result [..., n...]: a's leading dims, then b's trailing (an
     * einsum "btd,dhe->bthe"; a matmul's [..., m, n]) */
    int64_t shape[RT_MAX_DIMS] = {0};
    memcpy(shape, a->shape, (size_t)(a->ndim - 1) * sizeof *shape);
    memcpy(shape + a->ndim - 1, b->shape + 1, (size_t)nn * sizeof *shape);
    int ndim = a->ndim - 1 + nn;
    rt_tensor *y;
    int post = act; /* what the epilogue leaves to a kernel of its own */
    if (k > 0 && m > 0 && n > 0 && (bias || act == RT_RELU || act == RT_GELU_TANH)) {
        y = rt_empty(ctx, dt, ndim, shape);
        int in_epi = act == RT_RELU || act == RT_GELU_TANH ? act : -1;
        RT_KERNEL(ctx, RT_K_MATMUL, "matmul_bias_act");
        gemm_epilogue(ctx, dt, m, n, k, a->data, b->data, bias ? bias->data : NULL, in_epi, y->data);
        post = in_epi >= 0 ? -1 : act;
    } else {
        rt_tensor bv = *b; /* [k, n] */
        bv.ndim = 2;
        bv.shape[1] = n;
        y = rt_matmul(ctx, a, &bv);
        y->ndim = ndim; /* the same elements */
        memcpy(y->shape, shape, sizeof y->shape);
        if (bias) {
            rt_tensor *z = rt_binary(ctx, RT_ADD, y, bias);
            rt_free(ctx, y);
            y = z;
        }
    }
    if (post >= 0) {
        rt_tensor *z = rt_unary(ctx, (rt_unary_op)post, y);
        rt_free(ctx, y);
        y = z;
    }
    return y;
}

} /* extern "C" */
