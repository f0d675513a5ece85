/* The vectorised transcendental kernels (runtime/vmath*.c): close to the
 * scalar libm loops; an element's value independent of its position,
 * alignment and the array's length (what keeps results bit-identical across
 * meshes); the same bits from every instruction set the CPU has; and
 * SPMD_VMATH=scalar selecting the scalar loops. */
#include "rt_test_util.h"
#include "rt_cpu.h"
#include "vmath.h"

#include <stdlib.h>

TestSuite(vmath, .init = setup, .fini = teardown);

/* the ops the X-list's vec column marks VEC (vector kernels) */
#define VEC_OP_VEC(OP) OP,
#define VEC_OP_SCALAR(OP)
#define VEC_OP(NAME, name, vec, f, d) VEC_OP_##vec(RT_##NAME)
static const rt_unary_op vector_ops[] = {RT_UNARY_OPS(VEC_OP)};
#define NOPS (int)(sizeof vector_ops / sizeof vector_ops[0])
#define IS_VEC_VEC true
#define IS_VEC_SCALAR false
#define IS_VEC(NAME, name, vec, f, d) [RT_##NAME] = IS_VEC_##vec,
static const bool is_vec[RT_NUNARY] = {RT_UNARY_OPS(IS_VEC)};

/* Each instruction set's table has the three kernels of an op, in both
 * precisions, exactly when its vec column says VEC: a row marked VEC whose
 * kernels were left out would otherwise run the scalar loop unnoticed (and
 * the comparison below compare the scalar loop with itself). */
Test(vmath, tables_follow_the_vec_column)
{
    cr_assert_gt(NOPS, 0);
    const rt_vm_table *tabs[] = {&rt_vm_avx512, &rt_vm_avx2};
    for (int k = 0; k < 2; k++)
        for (int op = 0; op < RT_NUNARY; op++)
            for (int dt = 0; dt < 2; dt++) {
                bool has[3] = {tabs[k]->un[dt][op] != NULL, tabs[k]->unb[dt][op] != NULL,
                               tabs[k]->ung[dt][op] != NULL};
                for (int j = 0; j < 3; j++)
                    cr_assert_eq(has[j], is_vec[op], "%s: %s's kernel %d of %s is %s", tabs[k]->name,
                                 rt_unary_name((rt_unary_op)op), j, dt ? "f64" : "f32",
                                 has[j] ? "present but its vec column is SCALAR" : "missing");
            }
}

static rt_ctx *ctx_with(const char *vmath)
{
    setenv("SPMD_VMATH", vmath, 1);
    rt_ctx *c = rt_ctx_serial();
    unsetenv("SPMD_VMATH");
    return c;
}

/* inputs over the interesting range plus the special values */
static rt_tensor *inputs(rt_ctx *c, rt_dtype dt, rt_unary_op op, int64_t n)
{
    rt_tensor *x = rt_empty(c, dt, 1, &n);
    static const double special[] = {0.0, -0.0, 1e-30, -1e-30, 1e-8, 30.0, -30.0, 100.0, -100.0,
                                     INFINITY, -INFINITY, NAN};
    int ns = (int)(sizeof special / sizeof special[0]);
    for (int64_t i = 0; i < n; i++) {
        double v = i < ns ? special[i] : -12.0 + 24.0 * (double)(i - ns) / (double)(n - ns);
        if (op == RT_LOG && i >= ns)
            v = fabs(v) + 1e-3;
        rt_set(x, i, v);
    }
    return x;
}

/* Both sides round the same formula at each step, with different (1 ulp)
 * exp/erf/tanh; where a formula cancels (1 + erf(x) and 1 + tanh(z) near -1,
 * 1 - t^2 near 1) a 1-ulp difference of the function becomes an absolute
 * difference of a few float epsilons, hence the absolute part. */
static bool close_to(double got, double ref, double abs_tol, double rel_tol)
{
    if (isnan(got) || isnan(ref))
        return isnan(got) && isnan(ref);
    if (isinf(got) || isinf(ref))
        return got == ref;
    return fabs(got - ref) <= abs_tol + rel_tol * fabs(ref);
}

Test(vmath, close_to_the_scalar_loops)
{
    rt_ctx *cs = ctx_with("scalar");
    if (!C->tgt->vm)
        cr_skip_test("no vector kernels on this CPU");
    for (int k = 0; k < NOPS; k++)
        for (int dt = RT_F32; dt <= RT_F64; dt++) {
            rt_unary_op op = vector_ops[k];
            double atol = dt == RT_F32 ? 1e-5 : 1e-13, rtol = dt == RT_F32 ? 2e-6 : 1e-14;
            rt_tensor *x = inputs(C, dt, op, 1001), *dy = inputs(C, dt, RT_EXP, 1001);
            rt_tensor *y = rt_unary(C, op, x), *ys = rt_unary(cs, op, x);
            rt_tensor *dx = rt_unary_bwd(C, op, x, dy), *dxs = rt_unary_bwd(cs, op, x, dy);
            rt_tensor *y2, *g, *y2s, *gs;
            rt_unary_with_grad(C, op, x, &y2, &g);
            rt_unary_with_grad(cs, op, x, &y2s, &gs);
            for (int64_t i = 0; i < x->numel; i++) {
                double xi = rt_get(x, i);
                cr_assert(close_to(rt_get(y, i), rt_get(ys, i), atol, rtol), "%s %s(%.9g) = %.9g, scalar %.9g",
                          rt_dtype_name(dt), rt_unary_name(op), xi, rt_get(y, i), rt_get(ys, i));
                cr_assert(close_to(rt_get(g, i), rt_get(gs, i), atol, rtol), "%s %s'(%.9g) = %.9g, scalar %.9g",
                          rt_dtype_name(dt), rt_unary_name(op), xi, rt_get(g, i), rt_get(gs, i));
                cr_assert(close_to(rt_get(dx, i), rt_get(dxs, i), atol, rtol),
                          "%s %s backward at %.9g: %.9g, scalar %.9g", rt_dtype_name(dt),
                          rt_unary_name(op), xi, rt_get(dx, i), rt_get(dxs, i));
                cr_assert(memcmp((char *)y->data + i * rt_dtype_size(dt),
                                 (char *)y2->data + i * rt_dtype_size(dt), rt_dtype_size(dt)) == 0,
                          "%s: forward and with_grad differ at %lld", rt_unary_name(op), (long long)i);
            }
            rt_free(C, x); rt_free(C, dy); rt_free(C, y); rt_free(cs, ys); rt_free(C, dx);
            rt_free(cs, dxs); rt_free(C, y2); rt_free(C, g); rt_free(cs, y2s); rt_free(cs, gs);
        }
    rt_ctx_free_serial(cs);
}

/* every (offset, length) of a 45-element array, at every alignment, gives
 * each element the bits the whole array gave it */
static void check_positions(const rt_vm_table *t, const char *isa)
{
    enum { N = 45, PAD = 16 };
    for (int k = 0; k < NOPS; k++)
        for (int dt = 0; dt < 2; dt++) {
            rt_unary_op op = vector_ops[k];
            size_t esz = dt ? 8 : 4;
            char x[(N + PAD) * 8], whole[N * 8], y[N * 8], y2[N * 8], g[N * 8], gwhole[N * 8],
                gy[N * 8];
            for (int i = 0; i < N + PAD; i++) {
                double v = -5.0 + 0.37 * i;
                if (op == RT_LOG)
                    v = 0.05 + 0.37 * i;
                if (dt)
                    ((double *)x)[i] = v;
                else
                    ((float *)x)[i] = (float)v;
            }
            t->un[dt][op](x, whole, N);
            t->ung[dt][op](x, gy, gwhole, N);
            cr_assert(memcmp(whole, gy, N * esz) == 0, "%s %s: with_grad differs", isa,
                      rt_unary_name(op));
            for (int off = 0; off < 20; off++)
                for (int len = 1; off + len <= N; len += 3) {
                    /* the input at another alignment: shifted by off elements in x */
                    t->un[dt][op](x + off * esz, y, len);
                    t->ung[dt][op](x + off * esz, y2, g, len);
                    cr_assert(memcmp(y, whole + off * esz, (size_t)len * esz) == 0 &&
                                  memcmp(y2, whole + off * esz, (size_t)len * esz) == 0,
                              "%s %s (%s): elements %d..%d differ from the whole array's", isa,
                              rt_unary_name(op), dt ? "f64" : "f32", off, off + len - 1);
                    cr_assert(memcmp(g, gwhole + off * esz, (size_t)len * esz) == 0,
                              "%s %s' (%s): elements %d..%d differ from the whole array's", isa,
                              rt_unary_name(op), dt ? "f64" : "f32", off, off + len - 1);
                }
        }
}

Test(vmath, an_element_has_one_value_wherever_it_is)
{
    __builtin_cpu_init();
    bool any = false;
    if (__builtin_cpu_supports("avx512f")) {
        check_positions(&rt_vm_avx512, "avx512");
        any = true;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        check_positions(&rt_vm_avx2, "avx2");
        any = true;
    }
    if (!any)
        cr_skip_test("no vector kernels on this CPU");
}

/* SLEEF's finz functions give the same bits on every instruction set with FMA */
Test(vmath, every_instruction_set_gives_the_same_bits)
{
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx2") ||
        !__builtin_cpu_supports("fma"))
        cr_skip_test("needs a CPU with both AVX-512F and AVX2");
    enum { N = 4099 };
    static double x[N], a[N], b[N], ga[N], gb[N];
    for (int k = 0; k < NOPS; k++)
        for (int dt = 0; dt < 2; dt++) {
            rt_unary_op op = vector_ops[k];
            for (int i = 0; i < N; i++) {
                double v = op == RT_LOG ? 1e-3 + 0.01 * i : -20.0 + 0.01 * i;
                if (dt)
                    x[i] = v;
                else
                    ((float *)x)[i] = (float)v;
            }
            rt_vm_avx512.ung[dt][op](x, a, ga, N);
            rt_vm_avx2.ung[dt][op](x, b, gb, N);
            size_t bytes = (size_t)N * (dt ? 8 : 4);
            cr_assert(memcmp(a, b, bytes) == 0 && memcmp(ga, gb, bytes) == 0,
                      "%s (%s): avx512 and avx2 differ", rt_unary_name(op), dt ? "f64" : "f32");
        }
}

/* SLEEF's scalar deterministic exp: the same bits as its vector finz exp */
float Sleef_finz_expf1_u10purecfma(float);

/* f32 GELU computes erf as PyTorch does for float on CPU (Abramowitz and
 * Stegun 7.1.26, ATen's vectorised erf): every element of the vector
 * kernels, forward and derivative, on each instruction set, has the bits of
 * this scalar formula with the same operations in the same order (SLEEF's
 * exp, the same on every instruction set) */
static void gelu_as_ref(float x, float *y, float *d)
{
    float z = x * (float)M_SQRT1_2, az = z >= 0 ? z : -z;
    float e = Sleef_finz_expf1_u10purecfma(-(z * z));
    float t = 1.0f / (1.0f + 0.3275911f * az);
    float q = 1.061405429f * t + -1.453152027f;
    q = q * t + 1.421413741f;
    q = q * t + -0.284496736f;
    q = q * t + 0.254829592f;
    float ea = 1.0f - q * t * e;
    float p = 1.0f + (z >= 0 ? ea : -ea);
    *d = 0.5f * p + x * e * (float)(0.5 * M_2_SQRTPI * M_SQRT1_2);
    *y = 0.5f * x * p;
}

Test(vmath, gelu_f32_is_pytorchs_erf)
{
    __builtin_cpu_init();
    const rt_vm_table *tabs[2] = {NULL, NULL};
    if (__builtin_cpu_supports("avx512f"))
        tabs[0] = &rt_vm_avx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        tabs[1] = &rt_vm_avx2;
    if (!tabs[0] && !tabs[1])
        cr_skip_test("no vector kernels on this CPU");
    enum { N = 6001 };
    static float x[N], y[N], g[N];
    for (int i = 0; i < N; i++)
        x[i] = -15.0f + 0.005f * (float)i;
    x[0] = 0.0f;
    x[1] = -0.0f;
    x[2] = INFINITY;
    x[3] = NAN;
    for (int k = 0; k < 2; k++) {
        if (!tabs[k])
            continue;
        tabs[k]->ung[0][RT_GELU](x, y, g, N);
        for (int i = 0; i < N; i++) {
            float ry, rd;
            gelu_as_ref(x[i], &ry, &rd);
            cr_assert((memcmp(&ry, &y[i], 4) == 0 || (isnan(ry) && isnan(y[i]))) &&
                          (memcmp(&rd, &g[i], 4) == 0 || (isnan(rd) && isnan(g[i]))),
                      "%s gelu(%.9g) = %.9g, %.9g; the formula gives %.9g, %.9g", tabs[k]->name,
                      (double)x[i], (double)y[i], (double)g[i], (double)ry, (double)rd);
        }
    }
}

Test(vmath, spmd_vmath_selects_the_kernels)
{
    rt_ctx *s = ctx_with("scalar");
    cr_assert_null(s->tgt->vm, "SPMD_VMATH=scalar must select the scalar loops");
    rt_ctx_free_serial(s);
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        rt_ctx *a = ctx_with("avx2");
        cr_assert_eq(a->tgt->vm, &rt_vm_avx2);
        rt_ctx_free_serial(a);
    }
    if (__builtin_cpu_supports("avx512f"))
        cr_assert_eq(C->tgt->vm, &rt_vm_avx512, "the widest vectors by default");
}

/* softmax, log_softmax, their backwards and cross entropy take exp from the
 * vector kernels too; within a few ulp of the scalar loops in f64 */
Test(vmath, softmax_family_close_to_the_scalar_loops)
{
    rt_ctx *cs = ctx_with("scalar");
    int64_t s[2] = {7, 37};
    rt_tensor *x = mk_range(RT_F64, 2, s, 3, -20, 20), *dy = mk(RT_F64, 2, s, 4);
    int32_t tg[7] = {0, 5, 36, -100, 12, 1, 30};
    rt_tensor *t = rt_from_data(C, RT_I32, 1, s, tg);
    rt_tensor *out[2][7];
    rt_ctx *cx[2] = {C, cs};
    for (int k = 0; k < 2; k++) {
        out[k][0] = rt_softmax(cx[k], x, 1);
        out[k][1] = rt_log_softmax(cx[k], x, 0);
        out[k][2] = rt_softmax_bwd(cx[k], out[k][0], dy, 1);
        out[k][3] = rt_log_softmax_bwd(cx[k], out[k][1], dy, 0);
        out[k][4] = rt_cross_entropy(cx[k], x, t);
        out[k][5] = rt_cross_entropy_bwd(cx[k], x, t, out[k][4]);
        out[k][6] = rt_softmax(cx[k], x, 0);
    }
    for (int j = 0; j < 7; j++) {
        for (int64_t i = 0; i < out[0][j]->numel; i++)
            cr_assert(close_to(rt_get(out[0][j], i), rt_get(out[1][j], i), 1e-15, 1e-14),
                      "result %d element %lld: %.17g, scalar %.17g", j, (long long)i,
                      rt_get(out[0][j], i), rt_get(out[1][j], i));
        rt_free(C, out[0][j]);
        rt_free(cs, out[1][j]);
    }
    rt_free(C, x);
    rt_free(C, dy);
    rt_free(C, t);
    rt_ctx_free_serial(cs);
}

/* rt_randn / rt_uniform through the vector kernels: uniform bit-identical to
 * the scalar loop (integer Philox, exact arithmetic); randn in f32
 * bit-identical, in f64 within 2 ulp (SLEEF's log and cos against glibc's) */
Test(vmath, random_numbers_match_the_scalar_loop)
{
    rt_ctx *cs = ctx_with("scalar");
    if (!C->tgt->vm)
        cr_skip_test("no vector kernels on this CPU");
    int64_t g[3] = {7, 33, 129};
    rt_axes sp[3] = {RT_NO_AXES, RT_NO_AXES, RT_NO_AXES};
    rt_layout l = rt_layout_of(C, "x", 3, g, sp);
    l.offset[1] = 5; /* a block: rows of 20 starting inside the global rows */
    l.local[1] = 20;
    l.offset[2] = 3;
    l.local[2] = 100;
    for (int dt = RT_F32; dt <= RT_F64; dt++) {
        rt_tensor *a = rt_randn(C, dt, &l, 42, 0.7), *b = rt_randn(cs, dt, &l, 42, 0.7);
        rt_tensor *u = rt_uniform(C, dt, &l, 43, -2, 3), *v = rt_uniform(cs, dt, &l, 43, -2, 3);
        for (int64_t i = 0; i < a->numel; i++) {
            double x = rt_get(a, i), y = rt_get(b, i);
            if (dt == RT_F32)
                cr_assert(x == y, "f32 randn element %lld: %.9g, scalar %.9g", (long long)i, x, y);
            else
                cr_assert(fabs(x - y) <= 4.5e-16 * fabs(y), "f64 randn element %lld: %.17g, scalar %.17g",
                          (long long)i, x, y);
            cr_assert(rt_get(u, i) == rt_get(v, i), "%s uniform element %lld: %.17g, scalar %.17g",
                      rt_dtype_name(dt), (long long)i, rt_get(u, i), rt_get(v, i));
        }
        rt_free(C, a); rt_free(cs, b); rt_free(C, u); rt_free(cs, v);
    }
    rt_ctx_free_serial(cs);
}
