/* The f32 GEMM on both libraries (runtime/gemm.c): OpenBLAS and oneDNN give
 * correct results against a naive f64 reference for every transpose
 * combination, odd and empty shapes and beta = 1; each is deterministic
 * (the same bits again, and for operands at other addresses); matmul,
 * einsum and their backwards go through the choice; SPMD_GEMM and
 * rt_set_gemm_f32_lib override the timing. */
#include <stdlib.h>

#include "rt_cpu.h"
#include "rt_test_util.h"

TestSuite(gemm, .init = setup, .fini = teardown);

static const rt_gemm_lib libs[] = {RT_GEMM_OPENBLAS, RT_GEMM_DNNL};

static float *rand_f32(int64_t n, unsigned seed)
{
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p + 64);
    cr_assert(p != NULL);
    uint64_t st = seed * 2654435761u + 12345;
    for (int64_t i = 0; i < n; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        p[i] = (float)((double)(st >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    return p;
}

/* C = op(A) op(B) + beta C0 in f64; bound[i]: sum |a||b| + |beta C0| */
static void ref_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                     const float *B, const float *C0, double beta, double *C, double *bound)
{
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = beta * C0[i * N + j], b = fabs(s);
            for (int64_t k = 0; k < K; k++) {
                double x = ta ? A[k * M + i] : A[i * K + k], y = tb ? B[j * K + k] : B[k * N + j];
                s += x * y;
                b += fabs(x * y);
            }
            C[i * N + j] = s;
            bound[i * N + j] = b;
        }
}

Test(gemm, every_transpose_odd_and_empty_shapes_on_both_libraries)
{
    static const int64_t shapes[][3] = {{1, 1, 1},   {7, 13, 5},  {33, 17, 65}, {64, 1, 3},
                                        {1, 50, 9},  {130, 67, 257}, {5, 3, 0},  {0, 4, 3},
                                        {4, 0, 3},   {16, 16, 16}};
    for (size_t l = 0; l < 2; l++)
        for (int t = 0; t < 4; t++)
            for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
                for (int acc = 0; acc < 2; acc++) {
                    bool ta = t & 1, tb = t & 2;
                    int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
                    rt_set_gemm_f32_lib(C, libs[l]);
                    cr_assert_eq(rt_gemm_f32_lib(C), libs[l]);
                    float *A = rand_f32(M * K, 1 + (unsigned)s), *B = rand_f32(K * N, 50 + (unsigned)s);
                    float *C0 = rand_f32(M * N, 99), *Y = rand_f32(M * N, 99);
                    double *ref = malloc((size_t)(M * N + 1) * sizeof *ref);
                    double *bound = malloc((size_t)(M * N + 1) * sizeof *bound);
                    double beta = acc ? 1.0 : 0.0;
                    ref_gemm(ta, tb, M, N, K, A, B, C0, beta, ref, bound);
                    rt_gemm(C, RT_F32, ta, tb, M, N, K, A, B, Y, beta);
                    for (int64_t i = 0; i < M * N; i++)
                        cr_assert(fabs(Y[i] - ref[i]) <= 1e-6 * (double)(K + 2) * bound[i] + 1e-30,
                                  "%s %c%c %lldx%lldx%lld beta=%g: C[%lld] = %.9g, expected %.9g",
                                  rt_gemm_lib_name(libs[l]), ta ? 'T' : 'N', tb ? 'T' : 'N',
                                  (long long)M, (long long)N, (long long)K, beta, (long long)i,
                                  (double)Y[i], ref[i]);
                    /* deterministic: the same bits again, and for operands at
                     * other addresses (a replica on another rank) */
                    float *A2 = rand_f32(M * K + 3, 0), *B2 = rand_f32(K * N + 1, 0);
                    float *Y2 = rand_f32(M * N + 2, 0);
                    memcpy(A2 + 3, A, (size_t)(M * K) * sizeof *A);
                    memcpy(B2 + 1, B, (size_t)(K * N) * sizeof *B);
                    memcpy(Y2 + 2, C0, (size_t)(M * N) * sizeof *C0);
                    rt_gemm(C, RT_F32, ta, tb, M, N, K, A2 + 3, B2 + 1, Y2 + 2, beta);
                    cr_assert(memcmp(Y, Y2 + 2, (size_t)(M * N) * sizeof *Y) == 0,
                              "%s %c%c %lldx%lldx%lld: other bits at other addresses",
                              rt_gemm_lib_name(libs[l]), ta ? 'T' : 'N', tb ? 'T' : 'N',
                              (long long)M, (long long)N, (long long)K);
                    free(A); free(B); free(C0); free(Y); free(ref); free(bound);
                    free(A2); free(B2); free(Y2);
                }
}

/* y as f64 (a new tensor) */
static rt_tensor *f64(const rt_tensor *y) { return rt_astype(C, y, RT_F64); }

static void expect_near_f64(const rt_tensor *got, const rt_tensor *want, double tol, const char *what)
{
    rt_tensor *w = f64(want);
    expect_close(got, (const double *)w->data, w->numel, tol, what);
    rt_free(C, w);
}

/* matmul (broadcast batch, shared weight, 1-D), einsum and their backwards
 * in f32 on each library against the same in f64 (OpenBLAS dgemm) */
Test(gemm, matmul_einsum_and_backwards_on_both_libraries)
{
    rt_tensor *a = mk(RT_F32, 4, (int64_t[]){3, 1, 5, 7}, 1), *b = mk(RT_F32, 3, (int64_t[]){4, 7, 6}, 2);
    rt_tensor *x = mk(RT_F32, 3, (int64_t[]){2, 9, 11}, 3), *w = mk(RT_F32, 2, (int64_t[]){11, 13}, 4);
    rt_tensor *v = mk(RT_F32, 1, (int64_t[]){11}, 5);
    rt_tensor *e = mk(RT_F32, 3, (int64_t[]){2, 5, 12}, 6), *f = mk(RT_F32, 3, (int64_t[]){12, 3, 4}, 7);
    rt_tensor *a64 = f64(a), *b64 = f64(b), *x64 = f64(x), *w64 = f64(w), *v64 = f64(v);
    rt_tensor *e64 = f64(e), *f64_ = f64(f);
    const double tol = 1e-5;
    for (size_t l = 0; l < 2; l++) {
        rt_set_gemm_f32_lib(C, libs[l]);
        const rt_tensor *pairs[][4] = {{a, b, a64, b64}, {x, w, x64, w64}, {x, v, x64, v64}};
        for (size_t p = 0; p < 3; p++) {
            rt_tensor *y = rt_matmul(C, pairs[p][0], pairs[p][1]);
            rt_tensor *y64 = rt_matmul(C, pairs[p][2], pairs[p][3]);
            expect_near_f64(y64, y, tol, "matmul");
            rt_tensor *dy = mk(RT_F32, y->ndim, y->shape, 8), *dy64 = f64(dy);
            rt_tensor *da, *db, *da64, *db64;
            rt_matmul_bwd(C, pairs[p][0], pairs[p][1], dy, &da, &db);
            rt_matmul_bwd(C, pairs[p][2], pairs[p][3], dy64, &da64, &db64);
            expect_near_f64(da64, da, tol, "matmul da");
            expect_near_f64(db64, db, tol, "matmul db");
            rt_free(C, y); rt_free(C, y64); rt_free(C, dy); rt_free(C, dy64);
            rt_free(C, da); rt_free(C, db); rt_free(C, da64); rt_free(C, db64);
        }
        const char *eq = "btd,dhe->bthe";
        rt_tensor *y = rt_einsum(C, eq, 2, (const rt_tensor *[]){e, f});
        rt_tensor *y64 = rt_einsum(C, eq, 2, (const rt_tensor *[]){e64, f64_});
        expect_near_f64(y64, y, tol, "einsum");
        rt_tensor *dy = mk(RT_F32, y->ndim, y->shape, 9), *dy64 = f64(dy);
        rt_tensor *d[2], *d64[2];
        rt_einsum_bwd(C, eq, 2, (const rt_tensor *[]){e, f}, dy, d);
        rt_einsum_bwd(C, eq, 2, (const rt_tensor *[]){e64, f64_}, dy64, d64);
        expect_near_f64(d64[0], d[0], tol, "einsum d0");
        expect_near_f64(d64[1], d[1], tol, "einsum d1");
        rt_free(C, y); rt_free(C, y64); rt_free(C, dy); rt_free(C, dy64);
        for (int i = 0; i < 2; i++) {
            rt_free(C, d[i]);
            rt_free(C, d64[i]);
        }
    }
    rt_tensor *all[] = {a, b, x, w, v, e, f, a64, b64, x64, w64, v64, e64, f64_};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        rt_free(C, all[i]);
}

/* rt_matmul's f32 result is the chosen library's own: matmul dispatches */
Test(gemm, matmul_runs_on_the_chosen_library)
{
    rt_tensor *a = mk(RT_F32, 2, (int64_t[]){64, 96}, 11), *b = mk(RT_F32, 2, (int64_t[]){96, 80}, 12);
    rt_tensor *y[2], *direct[2];
    for (int l = 0; l < 2; l++) {
        rt_set_gemm_f32_lib(C, libs[l]);
        y[l] = rt_matmul(C, a, b);
        direct[l] = rt_empty(C, RT_F32, 2, (int64_t[]){64, 80});
    }
    rt_dnnl_gemm(C, false, false, 64, 80, 96, a->data, b->data, RT_F32, direct[1]->data, RT_F32, false);
    rt_set_gemm_f32_lib(C, RT_GEMM_OPENBLAS);
    rt_gemm(C, RT_F32, false, false, 64, 80, 96, a->data, b->data, direct[0]->data, 0.0);
    for (int l = 0; l < 2; l++)
        cr_assert(memcmp(y[l]->data, direct[l]->data, (size_t)y[l]->numel * sizeof(float)) == 0,
                  "rt_matmul on %s differs from the library's own result", rt_gemm_lib_name(libs[l]));
    for (int l = 0; l < 2; l++) {
        rt_free(C, y[l]);
        rt_free(C, direct[l]);
    }
    rt_free(C, a);
    rt_free(C, b);
}

static rt_gemm_lib lib_with_env(const char *value)
{
    setenv("SPMD_GEMM", value, 1);
    rt_ctx *c = rt_ctx_serial();
    rt_gemm_lib lib = rt_gemm_f32_lib(c), again = rt_gemm_f32_lib(c);
    cr_assert_eq(lib, again, "SPMD_GEMM=%s: the choice changed within a ctx", value);
    rt_ctx_free_serial(c);
    unsetenv("SPMD_GEMM");
    return lib;
}

Test(gemm, spmd_gemm_overrides_the_timing)
{
    cr_assert_eq(lib_with_env("dnnl"), RT_GEMM_DNNL);
    cr_assert_eq(lib_with_env("openblas"), RT_GEMM_OPENBLAS);
    rt_gemm_lib a = lib_with_env("auto");
    cr_assert(a == RT_GEMM_OPENBLAS || a == RT_GEMM_DNNL);
    char buf[256];
    rt_set_gemm_f32_lib(C, RT_GEMM_DNNL);
    rt_gemm_describe(C, buf, sizeof buf);
    cr_assert(strstr(buf, "f32 GEMM: oneDNN") != NULL, "%s", buf);
}

static void on_error(void *user, const char *msg)
{
    snprintf(user, 256, "%s", msg);
    exit(strstr(msg, "SPMD_GEMM=blas: expected openblas, dnnl or auto") ? 7 : 8);
}

Test(gemm, a_bad_spmd_gemm_is_an_error, .exit_code = 7)
{
    static char msg[256];
    setenv("SPMD_GEMM", "blas", 1);
    rt_set_error_hook(C, on_error, msg);
    rt_gemm_f32_lib(C);
}
