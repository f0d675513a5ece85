/* The fast paths of the lane kernels give the same bits as the plain
 * row-at-a-time computations they replace: reductions over the last dim,
 * layer_norm and rms_norm (forward and backward), softmax and log_softmax
 * (forward and backward) run RT_LANES rows side by side with each row
 * summed in its own order; sum_to_shape and where walk runs of the last
 * dim.  Each is compared bit for bit with a reference written here the
 * straightforward way (or, for the softmax family, with the same kernel
 * along a dim that is not the last, which takes the lane-at-a-time path),
 * on row counts that are not multiples of RT_LANES. */
#include "rt_test_util.h"

TestSuite(rowgroups, .init = setup, .fini = teardown);

static void expect_bits(const rt_tensor *t, const double *ref, int64_t n, const char *what)
{
    cr_assert_eq(t->numel, n, "%s: %lld elements, expected %lld", what, (long long)t->numel,
                 (long long)n);
    for (int64_t i = 0; i < n; i++) {
        double got = rt_get(t, i);
        double want = t->dtype == RT_F32 ? (double)(float)ref[i] : ref[i];
        cr_assert(memcmp(&got, &want, sizeof got) == 0 || (isnan(got) && isnan(want)),
                  "%s: element %lld is %.17g, expected %.17g", what, (long long)i, got, want);
    }
}

static void expect_same(const rt_tensor *a, const rt_tensor *b, const char *what)
{
    cr_assert_eq(a->numel, b->numel, "%s: sizes differ", what);
    cr_assert_eq(a->dtype, b->dtype, "%s: dtypes differ", what);
    cr_assert(memcmp(a->data, b->data, (size_t)a->numel * rt_dtype_size(a->dtype)) == 0,
              "%s: the bits differ", what);
}

Test(rowgroups, reductions_over_last_dim)
{
    int64_t rows = 13, d = 37;
    for (int dt = RT_F32; dt <= RT_F64; dt++) {
        rt_tensor *x = mk_range(dt, 2, (int64_t[]){rows, d}, 3, -50, 50);
        rt_tensor *s = rt_sum(C, x, 1, false), *m = rt_mean(C, x, -1, true), *a = rt_amax(C, x, 1, false);
        double rs[13], rm[13], ra[13];
        for (int64_t r = 0; r < rows; r++) {
            double acc = 0, mx = -INFINITY;
            for (int64_t j = 0; j < d; j++) {
                double v = rt_get(x, r * d + j);
                acc += v;
                mx = v > mx || isnan(v) ? v : mx;
            }
            rs[r] = acc;
            rm[r] = acc / (double)d;
            ra[r] = mx;
        }
        expect_bits(s, rs, rows, "sum");
        expect_bits(m, rm, rows, "mean");
        expect_bits(a, ra, rows, "amax");
        rt_free(C, x); rt_free(C, s); rt_free(C, m); rt_free(C, a);
    }
}

/* the row-at-a-time layer_norm / rms_norm (the formulas of kernels_nn.c) */
static void ref_norm(const rt_tensor *x, const rt_tensor *w, const rt_tensor *b, const rt_tensor *dy,
                     bool rms, double eps, double *y, double *dx, double *dw, double *db)
{
    int64_t d = x->shape[x->ndim - 1], rows = x->numel / d;
    for (int64_t j = 0; j < d; j++)
        dw[j] = db[j] = 0;
    for (int64_t r = 0; r < rows; r++) {
        double xs[64], g[64], m = 0, v = 0, mg = 0, mgx = 0;
        for (int64_t j = 0; j < d; j++)
            xs[j] = rt_get(x, r * d + j);
        if (!rms) {
            for (int64_t j = 0; j < d; j++)
                m += xs[j];
            m /= (double)d;
        }
        for (int64_t j = 0; j < d; j++)
            v += (xs[j] - m) * (xs[j] - m);
        double rstd = 1.0 / sqrt(v / (double)d + eps);
        for (int64_t j = 0; j < d; j++)
            y[r * d + j] = (xs[j] - m) * rstd * (w ? rt_get(w, j) : 1.0) + (b ? rt_get(b, j) : 0.0);
        for (int64_t j = 0; j < d; j++) {
            double dyj = rt_get(dy, r * d + j);
            xs[j] = (xs[j] - m) * rstd;
            g[j] = dyj * (w ? rt_get(w, j) : 1.0);
            mg += g[j];
            mgx += g[j] * xs[j];
            dw[j] += dyj * xs[j];
            db[j] += dyj;
        }
        mg = rms ? 0.0 : mg / (double)d;
        mgx /= (double)d;
        for (int64_t j = 0; j < d; j++)
            dx[r * d + j] = rstd * (g[j] - mg - xs[j] * mgx);
    }
}

Test(rowgroups, norms_forward_and_backward)
{
    int64_t s[3] = {3, 7, 29}, d = s[2], n = 3 * 7 * 29;
    for (int dt = RT_F32; dt <= RT_F64; dt++)
        for (int variant = 0; variant < 4; variant++) {
            bool rms = variant == 3, has_w = variant != 2, has_b = variant == 0;
            rt_tensor *x = mk_range(dt, 3, s, 21, -3, 3), *dy = mk(dt, 3, s, 22);
            rt_tensor *w = has_w ? mk(dt, 1, &d, 23) : NULL, *b = has_b ? mk(dt, 1, &d, 24) : NULL;
            double *y = malloc(sizeof(double) * (size_t)n), *dx = malloc(sizeof(double) * (size_t)n);
            double dw[29], db[29];
            double eps = rms ? 1e-6 : 1e-5;
            ref_norm(x, w, b, dy, rms, eps, y, dx, dw, db);
            rt_tensor *gy, *gx = NULL, *gw = NULL, *gb = NULL;
            if (rms) {
                gy = rt_rms_norm(C, x, w, eps);
                rt_rms_norm_bwd(C, x, w, eps, dy, &gx, &gw);
            } else {
                gy = rt_layer_norm(C, x, w, b, eps);
                rt_layer_norm_bwd(C, x, w, eps, dy, &gx, &gw, &gb);
            }
            expect_bits(gy, y, n, "norm forward");
            expect_bits(gx, dx, n, "norm backward dx");
            if (has_w)
                expect_bits(gw, dw, d, "norm backward dw");
            else
                cr_assert_null(gw);
            if (!rms)
                expect_bits(gb, db, d, "norm backward db");
            rt_free(C, x); rt_free(C, dy); rt_free(C, w); rt_free(C, b);
            rt_free(C, gy); rt_free(C, gx); rt_free(C, gw); rt_free(C, gb);
            free(y);
            free(dx);
        }
}

/* the softmax family along the last dim (row groups) against the same
 * kernel along dim 0 of the transpose (one strided lane at a time) */
Test(rowgroups, softmax_family)
{
    int64_t rows = 11, d = 19;
    for (int dt = RT_F32; dt <= RT_F64; dt++) {
        rt_tensor *x = mk_range(dt, 2, (int64_t[]){rows, d}, 31, -4, 4), *dy = mk(dt, 2, (int64_t[]){rows, d}, 32);
        rt_tensor *xt = rt_transpose(C, x, 0, 1), *dyt = rt_transpose(C, dy, 0, 1);
        for (int k = 0; k < 4; k++) {
            rt_tensor *fast, *slow_t;
            if (k == 0) {
                fast = rt_softmax(C, x, -1);
                slow_t = rt_softmax(C, xt, 0);
            } else if (k == 1) {
                fast = rt_log_softmax(C, x, 1);
                slow_t = rt_log_softmax(C, xt, 0);
            } else {
                rt_tensor *y = k == 2 ? rt_softmax(C, x, 1) : rt_log_softmax(C, x, 1);
                rt_tensor *yt = rt_transpose(C, y, 0, 1);
                fast = k == 2 ? rt_softmax_bwd(C, y, dy, 1) : rt_log_softmax_bwd(C, y, dy, 1);
                slow_t = k == 2 ? rt_softmax_bwd(C, yt, dyt, 0) : rt_log_softmax_bwd(C, yt, dyt, 0);
                rt_free(C, y);
                rt_free(C, yt);
            }
            rt_tensor *slow = rt_transpose(C, slow_t, 0, 1);
            expect_same(fast, slow, (const char *[]){"softmax", "log_softmax", "softmax_bwd", "log_softmax_bwd"}[k]);
            rt_free(C, fast); rt_free(C, slow_t); rt_free(C, slow);
        }
        rt_free(C, x); rt_free(C, dy); rt_free(C, xt); rt_free(C, dyt);
    }
}

/* sum_to_shape: every target element's terms added in the order of their
 * flat index in g (the element-at-a-time walk) */
Test(rowgroups, sum_to_shape_orders)
{
    int64_t gs[3] = {5, 6, 7};
    const int64_t targets[][3] = {{7, 0, 0}, {6, 1, 0}, {5, 1, 7}, {1, 6, 1}, {5, 6, 1}, {1, 1, 1}};
    const int tnd[] = {1, 2, 3, 3, 3, 3};
    for (int dt = RT_F32; dt <= RT_F64; dt++) {
        rt_tensor *g = mk_range(dt, 3, gs, 41, -1e3, 1e3);
        for (int t = 0; t < 6; t++) {
            int nd = tnd[t];
            rt_tensor *s = rt_sum_to_shape(C, g, nd, targets[t]);
            double ref[210] = {0};
            int64_t n = g->numel;
            for (int64_t i = 0; i < n; i++) {
                int64_t idx[3] = {i / 42, (i / 7) % 6, i % 7}, off = 0;
                for (int dd = 0; dd < nd; dd++) {
                    int gd = 3 - nd + dd;
                    off = off * targets[t][dd] + (targets[t][dd] == 1 ? 0 : idx[gd]);
                }
                ref[off] += rt_get(g, i);
            }
            expect_bits(s, ref, s->numel, "sum_to_shape");
            rt_free(C, s);
        }
        rt_free(C, g);
    }
}

/* where over runs: every broadcast pattern of the three operands, dtypes of
 * 2, 4 and 8 bytes, conditions of every dtype (NaN counts as true) */
Test(rowgroups, where_runs)
{
    const int64_t full[3] = {3, 4, 5};
    const int64_t shapes[][3] = {{3, 4, 5}, {4, 5, 0}, {4, 1, 0}, {5, 0, 0}, {1, 0, 0}, {3, 1, 5}};
    const int nds[] = {3, 2, 2, 1, 1, 3};
    for (int dt = 0; dt < 4; dt++)
        for (int ct = 0; ct < 4; ct++)
            for (int sc = 0; sc < 6; sc++)
                for (int sa = 0; sa < 6; sa++) {
                    int sb = sc == 0 || sa == 0 ? (sc + sa) % 6 : 0; /* one operand is whole */
                    rt_tensor *c = mk_range((rt_dtype)ct, nds[sc], shapes[sc], 51 + sc, -1, 2);
                    rt_tensor *a = mk_range((rt_dtype)dt, nds[sa], shapes[sa], 61 + sa, -9, 9);
                    rt_tensor *b = mk_range((rt_dtype)dt, nds[sb], shapes[sb], 71 + sb, -9, 9);
                    if (ct == RT_I32)
                        for (int64_t i = 0; i < c->numel; i++)
                            rt_set(c, i, i % 3 == 0);
                    else if (c->numel > 1)
                        rt_set(c, 1, NAN);
                    rt_tensor *y = rt_where(C, c, a, b);
                    double ref[60];
                    for (int64_t i = 0; i < 60; i++) {
                        int64_t idx[3] = {i / 20, (i / 5) % 4, i % 5};
                        int64_t o[3];
                        const rt_tensor *ops[3] = {c, a, b};
                        const int which[3] = {sc, sa, sb};
                        for (int k = 0; k < 3; k++) {
                            int nd = nds[which[k]];
                            int64_t off = 0;
                            for (int dd = 0; dd < nd; dd++) {
                                int64_t sz = shapes[which[k]][dd];
                                off = off * sz + (sz == 1 ? 0 : idx[3 - nd + dd]);
                            }
                            o[k] = off;
                            (void)ops;
                        }
                        ref[i] = rt_get(c, o[0]) != 0 ? rt_get(a, o[1]) : rt_get(b, o[2]);
                    }
                    expect_shape(y, 3, full, "where");
                    expect_bits(y, ref, 60, "where");
                    rt_free(C, c); rt_free(C, a); rt_free(C, b); rt_free(C, y);
                }
}
