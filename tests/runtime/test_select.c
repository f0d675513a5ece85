/* Unit tests of the masks, selection and loss kernels of SPEC 13: iota,
 * where, take_along_dim, dropout and cross_entropy's reductions.  Each
 * forward against a naive reference, each backward against central finite
 * differences in f64 (fd_check). */
#include "rt_test_util.h"

TestSuite(select, .init = setup, .fini = teardown);

/* ------------------------------------------------------------ iota */

Test(select, iota_global_offsets)
{
    /* the block at offset (2, 4) of a [6, 8] tensor: global indices */
    rt_layout l = {.ndim = 2, .global = {6, 8}, .offset = {2, 4}, .local = {3, 4}};
    for (int dt = RT_F32; dt <= RT_I32; dt++) {
        rt_tensor *r = rt_iota(C, dt, &l, 0), *c = rt_iota(C, dt, &l, -1);
        expect_shape(r, 2, l.local, "iota dim 0");
        double rr[12], cc[12];
        for (int i = 0; i < 12; i++) {
            rr[i] = 2 + i / 4;
            cc[i] = 4 + i % 4;
        }
        expect_close(r, rr, 12, 0, "iota dim 0");
        expect_close(c, cc, 12, 0, "iota dim -1");
        cr_assert_eq(r->dtype, (rt_dtype)dt);
        rt_free(C, r);
        rt_free(C, c);
    }
    EXPECT_FAIL(rt_iota(C, RT_I32, &l, 2), "iota");
}

/* ------------------------------------------------------------ where */

/* c [2, 1, 4] (i32), a [3, 1] , b 0-d: the result is [2, 3, 4] */
Test(select, where_broadcast_forward)
{
    int32_t cv[8] = {1, 0, 0, 2, 0, -1, 1, 0};
    rt_tensor *c = rt_from_data(C, RT_I32, 3, (int64_t[]){2, 1, 4}, cv);
    for (int dt = RT_F32; dt <= RT_I32; dt++) {
        rt_tensor *a = mk_range(dt, 2, (int64_t[]){3, 1}, 3, 1, 9), *b = rt_scalar(C, dt, -7);
        rt_tensor *y = rt_where(C, c, a, b), *y2 = rt_where(C, c, b, a);
        expect_shape(y, 3, (int64_t[]){2, 3, 4}, "where");
        double ref[24], ref2[24];
        for (int i = 0; i < 24; i++) {
            int i0 = i / 12, i1 = (i / 4) % 3, i2 = i % 4;
            bool t = cv[i0 * 4 + i2] != 0;
            ref[i] = t ? rt_get(a, i1) : -7;
            ref2[i] = t ? -7 : rt_get(a, i1);
        }
        expect_close(y, ref, 24, 0, "where");
        expect_close(y2, ref2, 24, 0, "where swapped");
        rt_free(C, a); rt_free(C, b); rt_free(C, y); rt_free(C, y2);
    }
    /* a float condition: nonzero selects */
    rt_tensor *cf = rt_from_data(C, RT_F64, 1, (int64_t[]){3}, (double[]){0.5, 0.0, -0.0});
    rt_tensor *a = rt_full(C, RT_F32, 1, (int64_t[]){3}, 1), *b = rt_full(C, RT_F32, 1, (int64_t[]){3}, 2);
    rt_tensor *y = rt_where(C, cf, a, b);
    expect_close(y, (double[]){1, 2, 2}, 3, 0, "where float condition");
    rt_tensor *bad = rt_full(C, RT_F64, 1, (int64_t[]){3}, 2);
    EXPECT_FAIL(rt_where(C, cf, a, bad), "dtypes differ");
    rt_tensor *wide = rt_full(C, RT_F32, 1, (int64_t[]){4}, 2);
    EXPECT_FAIL(rt_where(C, cf, a, wide), "do not broadcast");
    rt_free(C, c); rt_free(C, cf); rt_free(C, a); rt_free(C, b); rt_free(C, y);
    rt_free(C, bad); rt_free(C, wide);
}

static rt_tensor *f_where(rt_tensor **xs, const void *p)
{
    (void)p;
    return rt_where(C, xs[2], xs[0], xs[1]);
}
static void b_where(rt_tensor **xs, const rt_tensor *dy, rt_tensor **dxs, const void *p)
{
    (void)p;
    rt_where_bwd(C, xs[2], xs[0], xs[1], dy, &dxs[0], &dxs[1]);
}

Test(select, where_backward)
{
    int32_t cv[6] = {1, 0, 1, 1, 0, 0};
    rt_tensor *xs[3] = {mk(RT_F64, 2, (int64_t[]){2, 3}, 5), mk(RT_F64, 1, (int64_t[]){3}, 6),
                        rt_from_data(C, RT_I32, 2, (int64_t[]){2, 3}, cv)};
    fd_check(2, xs, f_where, b_where, NULL, 1e-6, "where");
    /* the gradient goes to the selected operand only */
    rt_tensor *dy = rt_full(C, RT_F64, 2, (int64_t[]){2, 3}, 1), *da, *db;
    rt_where_bwd(C, xs[2], xs[0], xs[1], dy, &da, &db);
    expect_close(da, (double[]){1, 0, 1, 1, 0, 0}, 6, 0, "where da");
    expect_close(db, (double[]){0, 2, 1}, 3, 0, "where db (summed over the broadcast dim)");
    rt_free(C, xs[0]); rt_free(C, xs[1]); rt_free(C, xs[2]);
    rt_free(C, dy); rt_free(C, da); rt_free(C, db);
}

/* ------------------------------------------------------------ take_along_dim */

Test(select, take_along_dim_forward)
{
    rt_tensor *x = mk(RT_F32, 3, (int64_t[]){2, 3, 4}, 7);
    /* idx [2, 1, 2] along dim 2, broadcast along dim 1 */
    int32_t iv[4] = {3, 0, 1, 1};
    rt_tensor *idx = rt_from_data(C, RT_I32, 3, (int64_t[]){2, 1, 2}, iv);
    rt_tensor *y = rt_take_along_dim(C, x, idx, -1);
    expect_shape(y, 3, (int64_t[]){2, 3, 2}, "take_along_dim");
    double ref[12];
    for (int i = 0; i < 12; i++) {
        int i0 = i / 6, i1 = (i / 2) % 3, i2 = i % 2;
        ref[i] = rt_get(x, (i0 * 3 + i1) * 4 + iv[i0 * 2 + i2]);
    }
    expect_close(y, ref, 12, 0, "take_along_dim");
    /* along dim 0, with i32 values */
    rt_tensor *xi = rt_from_data(C, RT_I32, 2, (int64_t[]){3, 2}, (int32_t[]){10, 11, 20, 21, 30, 31});
    rt_tensor *i0 = rt_from_data(C, RT_I32, 2, (int64_t[]){1, 2}, (int32_t[]){2, 0});
    rt_tensor *y0 = rt_take_along_dim(C, xi, i0, 0);
    expect_close(y0, (double[]){30, 11}, 2, 0, "take_along_dim dim 0");
    iv[2] = 4;
    rt_tensor *bad = rt_from_data(C, RT_I32, 3, (int64_t[]){2, 1, 2}, iv);
    EXPECT_FAIL(rt_take_along_dim(C, x, bad, 2), "index 4 is out of range for dim 2 of size 4");
    iv[2] = -1;
    rt_tensor *neg = rt_from_data(C, RT_I32, 3, (int64_t[]){2, 1, 2}, iv);
    EXPECT_FAIL(rt_take_along_dim(C, x, neg, 2), "index -1 is out of range");
    rt_tensor *flat = rt_from_data(C, RT_I32, 1, (int64_t[]){2}, (int32_t[]){0, 1});
    EXPECT_FAIL(rt_take_along_dim(C, x, flat, 0), "the indices have 1 dims but the input has 3");
    rt_free(C, x); rt_free(C, idx); rt_free(C, y); rt_free(C, xi); rt_free(C, i0); rt_free(C, y0);
    rt_free(C, bad); rt_free(C, neg); rt_free(C, flat);
}

static rt_tensor *f_take(rt_tensor **xs, const void *p)
{
    return rt_take_along_dim(C, xs[0], xs[1], *(const int *)p);
}
static void b_take(rt_tensor **xs, const rt_tensor *dy, rt_tensor **dxs, const void *p)
{
    dxs[0] = rt_take_along_dim_bwd(C, xs[1], dy, xs[0]->ndim, xs[0]->shape, *(const int *)p);
}

Test(select, take_along_dim_backward)
{
    /* repeated indices accumulate; x's size-1 dim 0 is broadcast */
    rt_tensor *x = mk(RT_F64, 3, (int64_t[]){1, 3, 4}, 8);
    int32_t iv[12] = {0, 0, 3, 2, 1, 1, 3, 3, 0, 2, 2, 2};
    rt_tensor *idx = rt_from_data(C, RT_I32, 3, (int64_t[]){2, 3, 2}, iv);
    rt_tensor *xs[2] = {x, idx};
    int dim = 2;
    fd_check(2, xs, f_take, b_take, &dim, 1e-6, "take_along_dim");
    rt_tensor *dy = rt_full(C, RT_F64, 3, (int64_t[]){2, 3, 2}, 1);
    rt_tensor *dx = rt_take_along_dim_bwd(C, idx, dy, 3, x->shape, 2);
    expect_close(dx, (double[]){2, 0, 0, 2, 1, 0, 2, 1, 0, 2, 2, 0}, 12, 0, "take_along_dim counts");
    rt_free(C, x); rt_free(C, idx); rt_free(C, dy); rt_free(C, dx);
}

/* ------------------------------------------------------------ dropout */

Test(select, dropout_mask_and_scale)
{
    int64_t s[2] = {64, 50};
    rt_layout l = rt_layout_full(2, s);
    rt_tensor *x = mk_range(RT_F64, 2, s, 9, 0.5, 1.5);
    rt_tensor *y = rt_dropout(C, x, 0.25, 1234, &l, RT_NO_AXES);
    int64_t zeros = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        double v = rt_get(y, i);
        if (v == 0)
            zeros++;
        else
            cr_assert(fabs(v - rt_get(x, i) / 0.75) < 1e-15, "kept elements are scaled by 1/(1-p)");
    }
    /* 3200 Bernoulli(0.25) draws: the count is within 5 sigma of 800 */
    cr_assert(llabs(zeros - 800) < 5 * 25, "dropped %lld of 3200, expected about 800", (long long)zeros);
    /* the same seed gives the same mask; another seed another one */
    rt_tensor *y2 = rt_dropout(C, x, 0.25, 1234, &l, RT_NO_AXES);
    rt_tensor *y3 = rt_dropout(C, x, 0.25, 1235, &l, RT_NO_AXES);
    int64_t same = 0;
    for (int64_t i = 0; i < x->numel; i++) {
        cr_assert_eq(rt_get(y, i), rt_get(y2, i));
        same += (rt_get(y, i) == 0) == (rt_get(y3, i) == 0);
    }
    cr_assert(same < x->numel - 100, "another seed gives another mask");
    /* p = 0 is the identity; p outside [0, 1) fails */
    rt_tensor *id = rt_dropout(C, x, 0, 1, &l, RT_NO_AXES);
    cr_assert_eq(id->data, x->data);
    EXPECT_FAIL(rt_dropout(C, x, 1.0, 1, &l, RT_NO_AXES), "p=1 is not in [0, 1)");
    EXPECT_FAIL(rt_dropout(C, x, -0.1, 1, &l, RT_NO_AXES), "not in [0, 1)");
    rt_tensor *xi = rt_full(C, RT_I32, 2, s, 1);
    EXPECT_FAIL(rt_dropout(C, xi, 0.5, 1, &l, RT_NO_AXES), "needs a float dtype");
    rt_free(C, x); rt_free(C, y); rt_free(C, y2); rt_free(C, y3); rt_free(C, id); rt_free(C, xi);
}

/* a block of a sharded tensor has the mask of the same block of the whole */
Test(select, dropout_block_is_slice_of_whole)
{
    int64_t g[3] = {4, 6, 10};
    rt_layout whole = rt_layout_full(3, g);
    rt_tensor *ones = rt_full(C, RT_F32, 3, g, 1);
    rt_tensor *full = rt_dropout(C, ones, 0.5, 77, &whole, RT_NO_AXES);
    /* block (1, 2) of dims 0 and 2 split in 2 and 5: [2, 6, 2] at (2, 0, 4) */
    rt_layout blk = {.ndim = 3, .global = {4, 6, 10}, .offset = {2, 0, 4}, .local = {2, 6, 2}};
    rt_tensor *bones = rt_full(C, RT_F32, 3, blk.local, 1);
    rt_tensor *part = rt_dropout(C, bones, 0.5, 77, &blk, RT_NO_AXES);
    for (int64_t i = 0; i < part->numel; i++) {
        int64_t a = i / 12, b = (i / 2) % 6, c = i % 2;
        cr_assert_eq(rt_get(part, i), rt_get(full, ((2 + a) * 6 + b) * 10 + 4 + c));
    }
    cr_assert_eq(rt_get(full, 0) == 0 || rt_get(full, 0) == 2, 1);
    EXPECT_FAIL(rt_dropout(C, ones, 0.5, 77, &blk, RT_NO_AXES), "layout does not describe");
    rt_free(C, ones); rt_free(C, full); rt_free(C, bones); rt_free(C, part);
}

static rt_tensor *f_drop(rt_tensor **xs, const void *p)
{
    rt_layout l = rt_layout_full(xs[0]->ndim, xs[0]->shape);
    return rt_dropout(C, xs[0], *(const double *)p, 5, &l, RT_NO_AXES);
}
static void b_drop(rt_tensor **xs, const rt_tensor *dy, rt_tensor **dxs, const void *p)
{
    rt_layout l = rt_layout_full(xs[0]->ndim, xs[0]->shape);
    dxs[0] = rt_dropout(C, dy, *(const double *)p, 5, &l, RT_NO_AXES);
}

Test(select, dropout_backward_is_dropout)
{
    rt_tensor *x = mk(RT_F64, 2, (int64_t[]){5, 7}, 10);
    double p = 0.4;
    fd_check(1, &x, f_drop, b_drop, &p, 1e-6, "dropout");
    rt_free(C, x);
}

/* ------------------------------------------------------------ cross_entropy */

static double ce_row(const rt_tensor *x, int64_t r, int64_t c, int t)
{
    double m = -INFINITY, den = 0;
    for (int64_t j = 0; j < c; j++)
        m = fmax(m, rt_get(x, r * c + j));
    for (int64_t j = 0; j < c; j++)
        den += exp(rt_get(x, r * c + j) - m);
    return -(rt_get(x, r * c + t) - m - log(den));
}

Test(select, cross_entropy_reductions_forward)
{
    /* logits [2, 3, 5], targets [2, 3] with one ignored row */
    rt_tensor *x = mk_range(RT_F64, 3, (int64_t[]){2, 3, 5}, 11, -3, 3);
    int32_t tv[6] = {4, 0, -100, 2, 2, 1};
    rt_tensor *t = rt_from_data(C, RT_I32, 2, (int64_t[]){2, 3}, tv);
    double rows[6], sum = 0;
    for (int r = 0; r < 6; r++) {
        rows[r] = tv[r] < 0 ? 0 : ce_row(x, r, 5, tv[r]);
        sum += rows[r];
    }
    double mean = sum / 5;
    rt_tensor *n = rt_cross_entropy_reduce(C, x, t, RT_CE_NONE);
    rt_tensor *s = rt_cross_entropy_reduce(C, x, t, RT_CE_SUM);
    rt_tensor *m = rt_cross_entropy_reduce(C, x, t, RT_CE_MEAN);
    rt_tensor *m2 = rt_cross_entropy(C, x, t);
    expect_shape(n, 2, (int64_t[]){2, 3}, "cross_entropy none");
    cr_assert_eq(s->ndim, 0);
    expect_close(n, rows, 6, 1e-12, "cross_entropy none");
    expect_close(s, &sum, 1, 1e-12, "cross_entropy sum");
    expect_close(m, &mean, 1, 1e-12, "cross_entropy mean");
    expect_close(m2, &mean, 1, 1e-12, "cross_entropy (mean)");
    /* every row ignored: the mean is NaN, as in PyTorch; the sum 0 */
    int32_t all[6] = {-100, -100, -100, -100, -100, -100};
    rt_tensor *ti = rt_from_data(C, RT_I32, 2, (int64_t[]){2, 3}, all);
    rt_tensor *mi = rt_cross_entropy_reduce(C, x, ti, RT_CE_MEAN), *si = rt_cross_entropy_reduce(C, x, ti, RT_CE_SUM);
    cr_assert(isnan(rt_item(C, mi)));
    cr_assert_eq(rt_item(C, si), 0);
    /* f32 logits: the loss is f32, computed in double */
    rt_tensor *xf = rt_astype(C, x, RT_F32);
    rt_tensor *nf = rt_cross_entropy_reduce(C, xf, t, RT_CE_NONE);
    cr_assert_eq(nf->dtype, RT_F32);
    expect_close(nf, rows, 6, 1e-6, "cross_entropy none f32");
    rt_tensor *bad = rt_from_data(C, RT_I32, 1, (int64_t[]){6}, tv);
    EXPECT_FAIL(rt_cross_entropy_reduce(C, x, bad, RT_CE_SUM),
                "expects logits [..., C] and targets [...], got (2, 3, 5) and (6,)");
    rt_free(C, x); rt_free(C, t); rt_free(C, n); rt_free(C, s); rt_free(C, m); rt_free(C, m2);
    rt_free(C, ti); rt_free(C, mi); rt_free(C, si); rt_free(C, xf); rt_free(C, nf); rt_free(C, bad);
}

static rt_tensor *f_ce(rt_tensor **xs, const void *p)
{
    return rt_cross_entropy_reduce(C, xs[0], xs[1], *(const rt_ce_reduction *)p);
}
static void b_ce(rt_tensor **xs, const rt_tensor *dy, rt_tensor **dxs, const void *p)
{
    dxs[0] = rt_cross_entropy_reduce_bwd(C, xs[0], xs[1], dy, *(const rt_ce_reduction *)p);
}

Test(select, cross_entropy_reductions_backward)
{
    rt_tensor *x = mk_range(RT_F64, 3, (int64_t[]){2, 2, 4}, 12, -2, 2);
    int32_t tv[4] = {3, -100, 0, 1};
    rt_tensor *t = rt_from_data(C, RT_I32, 2, (int64_t[]){2, 2}, tv);
    rt_tensor *xs[2] = {x, t};
    static const char *names[] = {"mean", "sum", "none"};
    for (rt_ce_reduction red = RT_CE_MEAN; red <= RT_CE_NONE; red++)
        fd_check(2, xs, f_ce, b_ce, &red, 1e-6, names[red]);
    rt_tensor *dy = rt_full(C, RT_F64, 1, (int64_t[]){4}, 1);
    EXPECT_FAIL(rt_cross_entropy_reduce_bwd(C, x, t, dy, RT_CE_SUM), "gradient's shape differs");
    rt_free(C, x); rt_free(C, t); rt_free(C, dy);
}
