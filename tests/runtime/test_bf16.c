/* Unit tests of bf16: the conversions bit for bit (round to nearest even,
 * NaN, infinities, overflow, subnormals), every elementwise kernel equal to
 * the f32 kernel rounded once, reductions, nn kernels and oneDNN matmul and
 * einsum (with their backwards and the fused bias/GELU GEMM) against f64
 * references within bf16 tolerances. */
#include <float.h>

#include "rt_test_util.h"

TestSuite(bf16, .init = setup, .fini = teardown);

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

Test(bf16, conversion_bits)
{
    /* exact values keep their bits */
    cr_assert_eq(rt_f32_to_bf16(1.0f), 0x3f80);
    cr_assert_eq(rt_f32_to_bf16(-2.0f), 0xc000);
    cr_assert_eq(rt_f32_to_bf16(0.0f), 0x0000);
    cr_assert_eq(rt_f32_to_bf16(-0.0f), 0x8000);
    /* ties go to even: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 */
    cr_assert_eq(rt_f32_to_bf16(from_bits(0x3f808000)), 0x3f80);
    cr_assert_eq(rt_f32_to_bf16(from_bits(0x3f818000)), 0x3f82);
    /* above and below a tie */
    cr_assert_eq(rt_f32_to_bf16(from_bits(0x3f808001)), 0x3f81);
    cr_assert_eq(rt_f32_to_bf16(from_bits(0x3f807fff)), 0x3f80);
    /* infinities, overflow to infinity, the largest finite bf16 */
    cr_assert_eq(rt_f32_to_bf16(INFINITY), 0x7f80);
    cr_assert_eq(rt_f32_to_bf16(-INFINITY), 0xff80);
    cr_assert_eq(rt_f32_to_bf16(FLT_MAX), 0x7f80);
    cr_assert_eq(rt_f32_to_bf16(from_bits(0x7f7f0000)), 0x7f7f);
    /* NaN stays NaN (c10's 0x7fc0), even a NaN whose low bits would round */
    cr_assert_eq(rt_f32_to_bf16(NAN), 0x7fc0);
    cr_assert_eq(rt_f32_to_bf16(from_bits(0x7f800001)), 0x7fc0);
    cr_assert_eq(rt_f32_to_bf16(from_bits(0xffffffff)), 0x7fc0);
    cr_assert(isnan(rt_bf16_to_f32(0x7fc0)));
    /* subnormals round like normals */
    cr_assert_eq(rt_f32_to_bf16(from_bits(0x00018000)), 0x0002);
    cr_assert_eq(rt_f32_to_bf16(from_bits(0x00010000)), 0x0001);
    /* widening is exact */
    cr_assert_eq(rt_bf16_to_f32(0x3f81), 1.0078125f);
    cr_assert_eq(rt_bf16_round(0.1f), 0.10009765625f);
}

Test(bf16, astype_round_trip_and_vector_conversion)
{
    int64_t s[1] = {1000};
    rt_tensor *x = mk_range(RT_F32, 1, s, 3, -100, 100);
    rt_set(x, 7, NAN);
    rt_set(x, 8, INFINITY);
    rt_tensor *h = rt_astype(C, x, RT_BF16), *back = rt_astype(C, h, RT_F32);
    cr_assert_eq(h->dtype, RT_BF16);
    for (int64_t i = 0; i < 1000; i++) {
        float f = ((float *)x->data)[i];
        uint16_t want = rt_f32_to_bf16(f);
        cr_assert_eq(((uint16_t *)h->data)[i], want, "element %lld", (long long)i);
        float b = ((float *)back->data)[i];
        cr_assert(isnan(f) ? isnan(b) : b == rt_bf16_to_f32(want));
    }
    rt_tensor *d = rt_astype(C, h, RT_F64); /* through rt_get */
    cr_assert_eq(rt_get(d, 3), (double)rt_bf16_to_f32(((uint16_t *)h->data)[3]));
    rt_free(C, x); rt_free(C, h); rt_free(C, back); rt_free(C, d);
}

/* a bf16 tensor and the f32 tensor of the same values */
static void mk_pair(int nd, const int64_t *s, unsigned seed, double lo, double hi, rt_tensor **h,
                    rt_tensor **f)
{
    rt_tensor *x = mk_range(RT_F32, nd, s, seed, lo, hi);
    *h = rt_astype(C, x, RT_BF16);
    *f = rt_astype(C, *h, RT_F32);
    rt_free(C, x);
}

/* y (bf16) is exactly the f32 result rounded once */
static void expect_rounded(const rt_tensor *y, const rt_tensor *y32, const char *what)
{
    cr_assert_eq(y->dtype, RT_BF16, "%s: dtype %s", what, rt_dtype_name(y->dtype));
    cr_assert_eq(y->numel, y32->numel, "%s: size", what);
    for (int64_t i = 0; i < y->numel; i++) {
        float want = ((float *)y32->data)[i];
        uint16_t got = ((uint16_t *)y->data)[i];
        cr_assert(got == rt_f32_to_bf16(want) || (isnan(want) && isnan(rt_bf16_to_f32(got))),
                  "%s: element %lld is %g, expected %g", what, (long long)i,
                  (double)rt_bf16_to_f32(got), (double)rt_bf16_round(want));
    }
}

static bool positive_domain(rt_unary_op op)
{
    return op == RT_LOG || op == RT_SQRT || op == RT_RSQRT;
}

Test(bf16, unary_is_f32_rounded)
{
    int64_t s[2] = {7, 33};
    for (int op = 0; op < RT_NUNARY; op++) {
        rt_tensor *h, *f, *dh, *df;
        mk_pair(2, s, (unsigned)op, positive_domain(op) ? 0.1 : -4, 4, &h, &f);
        mk_pair(2, s, 99, -1, 1, &dh, &df);
        rt_tensor *y = rt_unary(C, op, h), *y32 = rt_unary(C, op, f);
        expect_rounded(y, y32, rt_unary_name(op));
        rt_tensor *dx = rt_unary_bwd(C, op, h, dh), *dx32 = rt_unary_bwd(C, op, f, df);
        expect_rounded(dx, dx32, rt_unary_name(op));
        rt_tensor *yg, *g, *yg32, *g32;
        rt_unary_with_grad(C, op, h, &yg, &g);
        rt_unary_with_grad(C, op, f, &yg32, &g32);
        expect_rounded(yg, yg32, rt_unary_name(op));
        expect_rounded(g, g32, rt_unary_name(op));
        rt_free(C, h); rt_free(C, f); rt_free(C, dh); rt_free(C, df); rt_free(C, y);
        rt_free(C, y32); rt_free(C, dx); rt_free(C, dx32); rt_free(C, yg); rt_free(C, g);
        rt_free(C, yg32); rt_free(C, g32);
    }
}

Test(bf16, binary_is_f32_rounded)
{
    int64_t sa[2] = {5, 6}, sb[1] = {6};
    for (int op = 0; op < RT_NBINARY; op++) {
        rt_tensor *a, *af, *b, *bf, *dy, *dyf;
        mk_pair(2, sa, 1, 0.5, 3, &a, &af);
        mk_pair(1, sb, 2, 0.5, 3, &b, &bf);
        mk_pair(2, sa, 3, -1, 1, &dy, &dyf);
        const char *n = rt_binary_name(op);
        rt_tensor *y = rt_binary(C, op, a, b), *y32 = rt_binary(C, op, af, bf);
        expect_rounded(y, y32, n);
        rt_tensor *ys = rt_binary_scalar(C, op, a, 0.1, true);
        rt_tensor *ys32 = rt_binary_scalar(C, op, af, rt_bf16_round(0.1f), true); /* a bf16 literal */
        expect_rounded(ys, ys32, n);
        rt_tensor *da, *db, *da32, *db32;
        rt_binary_bwd(C, op, a, b, dy, &da, &db);
        rt_binary_bwd(C, op, af, bf, dyf, &da32, &db32);
        expect_rounded(da, da32, n);
        /* db sums 5 rows: f64 partial sums rounded to f32, then to bf16 */
        for (int64_t i = 0; i < 6; i++)
            cr_assert(fabs(rt_get(db, i) - rt_get(db32, i)) <= 1e-2 * (1 + fabs(rt_get(db32, i))),
                      "%s db[%lld]", n, (long long)i);
        rt_free(C, a); rt_free(C, af); rt_free(C, b); rt_free(C, bf); rt_free(C, dy);
        rt_free(C, dyf); rt_free(C, y); rt_free(C, y32); rt_free(C, ys); rt_free(C, ys32);
        rt_free(C, da); rt_free(C, db); rt_free(C, da32); rt_free(C, db32);
    }
}

/* |got - want| <= tol * (max |want| + 1e-3), elementwise */
static void expect_near(const rt_tensor *got, const rt_tensor *want, double tol, const char *what)
{
    cr_assert_eq(got->numel, want->numel, "%s: size", what);
    double m = 0;
    for (int64_t i = 0; i < want->numel; i++)
        m = fmax(m, fabs(rt_get(want, i)));
    for (int64_t i = 0; i < got->numel; i++)
        cr_assert(fabs(rt_get(got, i) - rt_get(want, i)) <= tol * (m + 1e-3),
                  "%s: element %lld is %.6g, expected %.6g", what, (long long)i, rt_get(got, i),
                  rt_get(want, i));
}

/* f64 copies of bf16 tensors: the exact values the bf16 kernels see */
static rt_tensor *f64_of(const rt_tensor *h) { return rt_astype(C, h, RT_F64); }

Test(bf16, reductions_and_nn_kernels)
{
    int64_t s[2] = {6, 40};
    rt_tensor *h, *f;
    mk_pair(2, s, 5, -3, 3, &h, &f);
    rt_tensor *d = f64_of(h);
    struct { rt_tensor *a, *b; const char *n; } cases[] = {
        {rt_sum(C, h, 1, false), rt_sum(C, d, 1, false), "sum"},
        {rt_mean(C, h, 0, true), rt_mean(C, d, 0, true), "mean"},
        {rt_amax(C, h, 1, false), rt_amax(C, d, 1, false), "amax"},
        {rt_sum_all(C, h), rt_sum_all(C, d), "sum_all"},
        {rt_cumsum(C, h, 1), rt_cumsum(C, d, 1), "cumsum"},
        {rt_softmax(C, h, 1), rt_softmax(C, d, 1), "softmax"},
        {rt_log_softmax(C, h, 1), rt_log_softmax(C, d, 1), "log_softmax"},
        {rt_layer_norm(C, h, NULL, NULL, 1e-5), rt_layer_norm(C, d, NULL, NULL, 1e-5), "layer_norm"},
        {rt_rms_norm(C, h, NULL, 1e-6), rt_rms_norm(C, d, NULL, 1e-6), "rms_norm"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(cases[i].a->dtype, RT_BF16, "%s", cases[i].n);
        expect_near(cases[i].a, cases[i].b, 1.0 / 128, cases[i].n);
        rt_free(C, cases[i].a);
        rt_free(C, cases[i].b);
    }
    int64_t nt = 6;
    rt_tensor *tg = rt_empty(C, RT_I32, 1, &nt);
    for (int i = 0; i < 6; i++)
        rt_set(tg, i, (i * 7) % 40);
    rt_tensor *ce = rt_cross_entropy(C, h, tg), *ce64 = rt_cross_entropy(C, d, tg);
    expect_near(ce, ce64, 1.0 / 128, "cross_entropy");
    rt_tensor *one = rt_scalar(C, RT_BF16, 1.0), *one64 = rt_scalar(C, RT_F64, 1.0);
    rt_tensor *g = rt_cross_entropy_bwd(C, h, tg, one), *g64 = rt_cross_entropy_bwd(C, d, tg, one64);
    expect_near(g, g64, 1.0 / 128, "cross_entropy_bwd");
    rt_free(C, ce); rt_free(C, ce64); rt_free(C, one); rt_free(C, one64); rt_free(C, g);
    rt_free(C, g64); rt_free(C, tg); rt_free(C, h); rt_free(C, f); rt_free(C, d);
}

Test(bf16, shape_kernels_move_bits)
{
    int64_t s[3] = {2, 3, 4};
    rt_tensor *h, *f;
    mk_pair(3, s, 8, -2, 2, &h, &f);
    int perm[3] = {2, 0, 1};
    rt_tensor *p = rt_permute(C, h, perm), *p32 = rt_permute(C, f, perm);
    expect_rounded(p, p32, "permute");
    int64_t es[4] = {5, 2, 3, 4};
    rt_tensor *e = rt_expand(C, h, 4, es), *e32 = rt_expand(C, f, 4, es);
    expect_rounded(e, e32, "expand");
    rt_tensor *sl = rt_slice(C, h, 2, 1, 3), *sl32 = rt_slice(C, f, 2, 1, 3);
    expect_rounded(sl, sl32, "slice");
    rt_tensor *acc = rt_zeros(C, RT_BF16, 3, s);
    rt_add_(C, acc, h);
    rt_add_(C, acc, h);
    rt_tensor *twice = rt_binary(C, RT_ADD, f, f);
    expect_rounded(acc, twice, "add_");
    rt_free(C, p); rt_free(C, p32); rt_free(C, e); rt_free(C, e32); rt_free(C, sl);
    rt_free(C, sl32); rt_free(C, acc); rt_free(C, twice); rt_free(C, h); rt_free(C, f);
}

Test(bf16, matmul_and_backward_through_onednn)
{
    int64_t sa[3] = {2, 13, 24}, sb[2] = {24, 17};
    rt_tensor *a, *af, *b, *bf;
    mk_pair(3, sa, 11, -1, 1, &a, &af);
    mk_pair(2, sb, 12, -1, 1, &b, &bf);
    rt_tensor *a64 = f64_of(a), *b64 = f64_of(b);
    rt_tensor *y = rt_matmul(C, a, b), *y64 = rt_matmul(C, a64, b64);
    cr_assert_eq(y->dtype, RT_BF16);
    expect_near(y, y64, 1.0 / 128, "matmul");
    int64_t sy[3] = {2, 13, 17};
    rt_tensor *dy, *dyf;
    mk_pair(3, sy, 13, -1, 1, &dy, &dyf);
    rt_tensor *dy64 = f64_of(dy), *da, *db, *da64, *db64;
    rt_matmul_bwd(C, a, b, dy, &da, &db);
    rt_matmul_bwd(C, a64, b64, dy64, &da64, &db64);
    expect_near(da, da64, 1.0 / 64, "matmul da (A @ B^T)");
    expect_near(db, db64, 1.0 / 64, "matmul db (A^T @ dY)");
    /* batched weights: one gemm per batch, transposes in every position */
    int64_t sbb[3] = {2, 24, 17};
    rt_tensor *bb, *bbf;
    mk_pair(3, sbb, 14, -1, 1, &bb, &bbf);
    rt_tensor *bb64 = f64_of(bb), *da2, *db2, *da2_64, *db2_64;
    rt_matmul_bwd(C, a, bb, dy, &da2, &db2);
    rt_matmul_bwd(C, a64, bb64, dy64, &da2_64, &db2_64);
    expect_near(da2, da2_64, 1.0 / 64, "batched da");
    expect_near(db2, db2_64, 1.0 / 64, "batched db");
    /* einsum goes through the same batched gemm */
    const rt_tensor *xs[2] = {a, bb}, *xs64[2] = {a64, bb64};
    rt_tensor *es = rt_einsum(C, "bmk,bkn->bnm", 2, xs), *es64 = rt_einsum(C, "bmk,bkn->bnm", 2, xs64);
    expect_near(es, es64, 1.0 / 128, "einsum");
    rt_tensor *objs[] = {a, af, b, bf, a64, b64, y, y64, dy, dyf, dy64, da, db, da64, db64,
                         bb, bbf, bb64, da2, db2, da2_64, db2_64, es, es64};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++)
        rt_free(C, objs[i]);
}

Test(bf16, fused_bias_gelu_gemm)
{
    int64_t sa[2] = {9, 32}, sb[2] = {32, 20}, sc[1] = {20};
    rt_tensor *a, *af, *b, *bf, *c, *cf;
    mk_pair(2, sa, 21, -1, 1, &a, &af);
    mk_pair(2, sb, 22, -1, 1, &b, &bf);
    mk_pair(1, sc, 23, -1, 1, &c, &cf);
    rt_tensor *a64 = f64_of(a), *b64 = f64_of(b), *c64 = f64_of(c);
    rt_tensor *mm = rt_matmul(C, a64, b64), *pre = rt_binary(C, RT_ADD, mm, c64);
    int acts[] = {-1, RT_GELU, RT_GELU_TANH, RT_RELU};
    for (int i = 0; i < 4; i++) {
        rt_tensor *want = acts[i] < 0 ? rt_retain(pre) : rt_unary(C, acts[i], pre);
        rt_tensor *got = rt_matmul_bias_act(C, a, b, c, acts[i]);
        expect_near(got, want, 1.0 / 128, "matmul_bias_act");
        rt_tensor *nob = rt_matmul_bias_act(C, a, b, NULL, acts[i]);
        rt_tensor *want2 = acts[i] < 0 ? rt_retain(mm) : rt_unary(C, acts[i], mm);
        expect_near(nob, want2, 1.0 / 128, "matmul_act");
        rt_free(C, want); rt_free(C, got); rt_free(C, nob); rt_free(C, want2);
    }
    rt_tensor *objs[] = {a, af, b, bf, c, cf, a64, b64, c64, mm, pre};
    for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++)
        rt_free(C, objs[i]);
}

Test(bf16, creation_and_print)
{
    int64_t s[1] = {3};
    rt_tensor *t = rt_full(C, RT_BF16, 1, s, 0.1);
    cr_assert_eq(((uint16_t *)t->data)[2], rt_f32_to_bf16(0.1f));
    rt_layout l = rt_layout_full(1, s);
    rt_tensor *r = rt_randn(C, RT_BF16, &l, 7, 1.0), *r32 = rt_randn(C, RT_F32, &l, 7, 1.0);
    expect_rounded(r, r32, "randn");
    cr_assert_str_eq(rt_dtype_name(RT_BF16), "bf16");
    cr_assert_eq(rt_dtype_size(RT_BF16), 2);
    rt_free(C, t); rt_free(C, r); rt_free(C, r32);
}

/* ---- PyTorch's bf16 numerics: torch_bf16/reference.txt holds PyTorch 1.13's
 * CPU results for fixed inputs (written by torch_bf16/gen_reference.py) */

typedef struct ref_tensor {
    char name[32];
    rt_tensor *t;
} ref_tensor;

static ref_tensor refs[64];
static int nrefs;

static void load_refs(void)
{
    FILE *f = fopen(RT_TEST_TORCH_REF, "r");
    cr_assert(f != NULL, "cannot open %s", RT_TEST_TORCH_REF);
    char name[32], dt[8];
    int nd;
    while (nrefs < 64 && fscanf(f, "%31s %7s %d", name, dt, &nd) == 3) {
        int64_t shape[RT_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            cr_assert(fscanf(f, "%ld", &shape[d]) == 1);
        char colon[4];
        cr_assert(fscanf(f, "%3s", colon) == 1 && colon[0] == ':');
        rt_dtype t = !strcmp(dt, "bf16") ? RT_BF16 : !strcmp(dt, "f32") ? RT_F32 : RT_I32;
        rt_tensor *x = rt_empty(C, t, nd, shape);
        for (int64_t i = 0; i < x->numel; i++) {
            unsigned v;
            int iv;
            if (t == RT_I32) {
                cr_assert(fscanf(f, "%d", &iv) == 1);
                ((int32_t *)x->data)[i] = iv;
            } else {
                cr_assert(fscanf(f, "%x", &v) == 1);
                if (t == RT_BF16)
                    ((uint16_t *)x->data)[i] = (uint16_t)v;
                else
                    ((uint32_t *)x->data)[i] = v;
            }
        }
        snprintf(refs[nrefs].name, sizeof refs[nrefs].name, "%s", name);
        refs[nrefs++].t = x;
    }
    fclose(f);
}

static const rt_tensor *ref(const char *name)
{
    for (int i = 0; i < nrefs; i++)
        if (!strcmp(refs[i].name, name))
            return refs[i].t;
    cr_assert_fail("no tensor '%s' in the reference file", name);
    return NULL;
}

/* distance in units in the last place of two bf16 values (NaN == NaN) */
static int ulps(uint16_t a, uint16_t b)
{
    if (((a & 0x7fff) > 0x7f80) && ((b & 0x7fff) > 0x7f80))
        return 0;
    int ia = a & 0x8000 ? -(int)(a & 0x7fff) : (int)a, ib = b & 0x8000 ? -(int)(b & 0x7fff) : (int)b;
    return abs(ia - ib);
}

/* ours matches PyTorch's: every element within max_ulps, and at least
 * min_exact of them bit for bit */
static void expect_torch(rt_tensor *ours, const char *name, int max_ulps, double min_exact)
{
    const rt_tensor *want = ref(name);
    cr_assert_eq(ours->dtype, RT_BF16, "%s: dtype %s", name, rt_dtype_name(ours->dtype));
    cr_assert_eq(ours->numel, want->numel, "%s: %lld elements, PyTorch %lld", name,
                 (long long)ours->numel, (long long)want->numel);
    int64_t exact = 0;
    int worst = 0;
    for (int64_t i = 0; i < ours->numel; i++) {
        int u = ulps(((uint16_t *)ours->data)[i], ((uint16_t *)want->data)[i]);
        exact += u == 0;
        worst = u > worst ? u : worst;
        cr_assert(u <= max_ulps, "%s: element %lld is %g, PyTorch %g (%d ulps)", name, (long long)i,
                  rt_get(ours, i), rt_get(want, i), u);
    }
    cr_log_info("%s: %lld of %lld bit for bit, worst %d ulp", name, (long long)exact,
                (long long)ours->numel, worst);
    cr_assert((double)exact >= min_exact * (double)ours->numel, "%s: only %lld of %lld bit for bit",
              name, (long long)exact, (long long)ours->numel);
    rt_free(C, ours);
}

Test(bf16, matches_pytorch)
{
    load_refs();
    const rt_tensor *x = ref("x"), *xp = ref("xp"), *dy = ref("dy");
    struct { const char *n; rt_unary_op op; const rt_tensor *in; } un[] = {
        {"gelu", RT_GELU, x}, {"exp", RT_EXP, x}, {"tanh", RT_TANH, x},
        {"sigmoid", RT_SIGMOID, x}, {"sin", RT_SIN, x}, {"square", RT_SQUARE, x},
        {"relu", RT_RELU, x}, {"log", RT_LOG, xp}, {"sqrt", RT_SQRT, xp}, {"rsqrt", RT_RSQRT, xp},
        {"silu_f32", RT_SILU, x}, {"gelu_tanh_f32", RT_GELU_TANH, x},
    };
    /* elementwise: f32, then one rounding, bit for bit (PyTorch's vectorised
     * f32 functions may differ from libm's by an f32 ulp, which could flip a
     * bf16 rounding: at most 1 ulp, rarely) */
    for (size_t i = 0; i < sizeof un / sizeof un[0]; i++)
        expect_torch(rt_unary(C, un[i].op, un[i].in), un[i].n, 1, 0.95);
    expect_torch(rt_unary_bwd(C, RT_GELU, x, dy), "gelu_bwd", 1, 0.95);
    /* literals are bf16 values, as PyTorch's scalars */
    expect_torch(rt_binary_scalar(C, RT_MUL, x, 0.1, false), "mul_scalar", 0, 1.0);
    expect_torch(rt_binary_scalar(C, RT_ADD, x, 0.3, false), "add_scalar", 0, 1.0);
    const rt_tensor *a = ref("a"), *b = ref("b");
    expect_torch(rt_binary(C, RT_ADD, a, b), "add", 0, 1.0);
    expect_torch(rt_binary(C, RT_SUB, a, b), "sub", 0, 1.0);
    expect_torch(rt_binary(C, RT_MUL, a, b), "mul", 0, 1.0);
    expect_torch(rt_binary(C, RT_DIV, a, b), "div", 0, 1.0);
    expect_torch(rt_astype(C, ref("f32"), RT_BF16), "f32_to_bf16", 0, 1.0);
    /* reductions and nn kernels accumulate in f64 here, in f32 in PyTorch */
    const rt_tensor *s = ref("s");
    expect_torch(rt_softmax(C, s, 1), "softmax", 1, 0.9);
    expect_torch(rt_log_softmax(C, s, 1), "log_softmax_f32", 1, 0.9);
    expect_torch(rt_sum(C, s, 1, false), "sum", 1, 0.5);
    expect_torch(rt_mean(C, s, 1, false), "mean", 1, 0.5);
    expect_torch(rt_layer_norm(C, s, ref("ln_w"), ref("ln_b"), 1e-5), "layer_norm_f32", 1, 0.9);
    expect_torch(rt_cross_entropy(C, s, ref("targets")), "cross_entropy", 1, 0.0);
    /* oneDNN, f32 accumulation: PyTorch's f32 product rounded once */
    expect_torch(rt_matmul(C, ref("ma"), ref("mb")), "matmul_f32", 1, 0.9);
    for (int i = 0; i < nrefs; i++)
        rt_free(C, refs[i].t);
    nrefs = 0;
}

/* .npy has no bf16: a bf16 tensor is saved as '<f4' exactly and a bf16 load
 * of an '<f4' file rounds to nearest even */
Test(bf16, npy_stores_f32)
{
    char dir[] = "/tmp/spmdrt_bf16_XXXXXX", path[64], cmd[128];
    cr_assert(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/h.npy", dir);
    int64_t s[2] = {3, 5};
    rt_layout l = rt_layout_full(2, s);
    rt_tensor *h, *f;
    mk_pair(2, s, 31, -5, 5, &h, &f);
    rt_save_npy(C, path, h, &l);
    FILE *fp = fopen(path, "rb");
    char head[128] = {0};
    cr_assert(fp && fread(head, 1, sizeof head - 1, fp) > 0);
    fclose(fp);
    cr_assert(strstr(head + 10, "'descr': '<f4'") != NULL, "header: %s", head + 10);
    rt_tensor *back32 = rt_load_npy(C, path, RT_F32, &l), *back16 = rt_load_npy(C, path, RT_BF16, &l);
    cr_assert_eq(memcmp(back32->data, f->data, (size_t)f->numel * 4), 0, "saved values differ");
    cr_assert_eq(memcmp(back16->data, h->data, (size_t)h->numel * 2), 0, "round trip differs");
    rt_tensor *g = rt_full(C, RT_F32, 2, s, 0.1);  /* an f32 file loads as bf16, rounded */
    rt_save_npy(C, path, g, &l);
    rt_tensor *gh = rt_load_npy(C, path, RT_BF16, &l);
    cr_assert_eq(((uint16_t *)gh->data)[4], rt_f32_to_bf16(0.1f));
    rt_print(C, "bf16", gh); /* prints the f32 values of the bf16 bits */
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
    rt_free(C, h); rt_free(C, f); rt_free(C, back32); rt_free(C, back16); rt_free(C, g);
    rt_free(C, gh);
}
