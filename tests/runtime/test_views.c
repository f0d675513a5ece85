/* Views (issue 26): rt_reshape, rt_index and rt_slice of a contiguous
 * block share their operand's storage instead of copying; the reference
 * count is the storage's, so a view keeps the memory alive after its base
 * is released, and no in-place writer (rt_reuse, rt_add_, rt_index_add_,
 * rt_index_add, rt_take_data) writes a storage that a live view or its
 * base shares. The memory accounting counts a storage once. */
#include <stdint.h>
#include <stdlib.h>

#include "rt_internal.h" /* ctx->prof.views: --profile's count of views */
#include "rt_test_util.h"

TestSuite(views, .init = setup, .fini = teardown);

static rt_tensor *iota_f32(int nd, const int64_t *s)
{
    rt_tensor *t = rt_empty(C, RT_F32, nd, s);
    for (int64_t i = 0; i < t->numel; i++)
        rt_set(t, i, (double)i);
    return t;
}

static int64_t live_temp(void) { return rt_mem_get(C).live[RT_MEM_TEMP]; }

Test(views, reshape_index_slice_share_the_storage)
{
    rt_tensor *x = iota_f32(2, (int64_t[]){4, 3});
    int64_t live = live_temp();
    rt_tensor *r = rt_reshape(C, x, 1, (int64_t[]){12});
    rt_tensor *i = rt_index(C, x, 2);
    rt_tensor *s = rt_slice(C, x, 0, 1, 3);
    cr_assert_eq(r->data, x->data, "reshape copied");
    cr_assert_eq(i->data, (float *)x->data + 6, "index copied");
    cr_assert_eq(s->data, (float *)x->data + 3, "a slice of dim 0 copied");
    cr_assert(r->st == x->st && i->st == x->st && s->st == x->st);
    expect_shape(i, 1, (int64_t[]){3}, "index");
    expect_shape(s, 2, (int64_t[]){2, 3}, "slice");
    expect_close(i, (double[]){6, 7, 8}, 3, 0, "index");
    expect_close(s, (double[]){3, 4, 5, 6, 7, 8}, 6, 0, "slice");
    cr_assert_eq(x->st->refs, 4, "the storage's references: x and its 3 views");
    cr_assert_eq(x->refs, 1, "x's own references");
    cr_assert_eq(live_temp(), live, "views are no new bytes");
    /* a view of a view: the same storage, offsets added */
    rt_tensor *ii = rt_index(C, s, 1);
    cr_assert_eq(ii->data, (float *)x->data + 6);
    cr_assert_eq(ii->st, x->st);
    /* not a contiguous block (dim 1 of 4 rows): a copy */
    rt_tensor *c = rt_slice(C, x, 1, 1, 2);
    cr_assert_neq(c->st, x->st, "a strided slice is a copy");
    expect_close(c, (double[]){1, 4, 7, 10}, 4, 0, "strided slice");
    /* dim 1 of a tensor whose dim 0 has one row: contiguous, a view */
    rt_tensor *one = rt_reshape(C, x, 2, (int64_t[]){1, 12});
    rt_tensor *cs = rt_slice(C, one, 1, 4, 9);
    cr_assert_eq(cs->data, (float *)x->data + 4);
    rt_free(C, cs); rt_free(C, one); rt_free(C, c); rt_free(C, ii);
    rt_free(C, r); rt_free(C, i); rt_free(C, s);
    cr_assert_eq(x->st->refs, 1);
    rt_free(C, x);
}

Test(views, a_view_keeps_its_storage_alive)
{
    rt_tensor *x = iota_f32(2, (int64_t[]){4, 3});
    int64_t before = live_temp() - 48;
    rt_tensor *v = rt_index(C, x, 3);
    rt_free(C, x); /* the base is gone; its storage is the view's */
    cr_assert_eq(v->st->refs, 1);
    cr_assert_eq(live_temp(), before + 48, "the whole storage stays counted while a view holds it");
    /* a buffer of x's size class now must not be x's */
    rt_tensor *y = rt_full(C, RT_F32, 2, (int64_t[]){4, 3}, -1.0);
    cr_assert(y->data != v->st->base, "the pool handed out a buffer a view still uses");
    expect_close(v, (double[]){9, 10, 11}, 3, 0, "the view after its base was released");
    /* the view is now the only reference: writable in place */
    cr_assert(rt_writable(v));
    rt_tensor *w = rt_reuse(C, v);
    cr_assert_eq(w, v, "rt_reuse refused the storage's only reference");
    rt_free(C, w);
    rt_free(C, v);
    cr_assert_eq(live_temp(), before + 48, "y's bytes alone");
    rt_free(C, y);
    cr_assert_eq(live_temp(), before);
}

Test(views, in_place_writers_refuse_a_storage_a_view_shares)
{
    rt_tensor *x = iota_f32(2, (int64_t[]){2, 3});
    rt_tensor *v = rt_reshape(C, x, 1, (int64_t[]){6});
    cr_assert_eq(x->refs, 1, "x's own count says one reference");
    cr_assert(!rt_writable(x) && !rt_writable(v));
    /* rt_reuse: a new buffer for either */
    rt_tensor *rx = rt_reuse(C, x), *rv = rt_reuse(C, v);
    cr_assert(rx != x && rx->st != x->st, "rt_reuse handed out x while a view of it lives");
    cr_assert(rv != v && rv->st != x->st, "rt_reuse handed out a view while its base lives");
    rt_free(C, rx); rt_free(C, rv);
    /* rt_add_ / rt_index_add_ refuse; rt_index_add copies */
    rt_tensor *one = rt_full(C, RT_F32, 1, (int64_t[]){3}, 100.0);
    rt_tensor *six = rt_full(C, RT_F32, 1, (int64_t[]){6}, 100.0);
    EXPECT_FAIL(rt_add_(C, v, six), "views included");
    EXPECT_FAIL(rt_index_add_(C, x, 0, one), "views included");
    rt_tensor *x2 = rt_retain(x);
    rt_tensor *acc = rt_index_add(C, x2, 1, one); /* consumes x2's reference */
    cr_assert(acc->st != x->st, "rt_index_add wrote into a storage a view shares");
    expect_close(acc, (double[]){0, 1, 2, 103, 104, 105}, 6, 0, "rt_index_add's copy");
    expect_close(v, (double[]){0, 1, 2, 3, 4, 5}, 6, 0, "the view after rt_index_add");
    EXPECT_FAIL(rt_take_data(C, x), "2 references");
    /* once the view is gone x is writable again */
    rt_free(C, v);
    cr_assert(rt_writable(x));
    rt_tensor *same = rt_reuse(C, x);
    cr_assert_eq(same, x);
    rt_free(C, same);
    rt_add_(C, acc, acc); /* acc: a storage of its own */
    rt_free(C, acc); rt_free(C, one); rt_free(C, six); rt_free(C, x);
}

/* the multi-tensor ones (a layer's stacked gradients, issue 26):
 * rt_index_add_multi_ and rt_zero_multi refuse a storage a view shares;
 * rt_index_add_multi copies that accumulator and adds in place into the
 * others */
Test(views, multi_tensor_writers_refuse_a_storage_a_view_shares)
{
    rt_tensor *x = iota_f32(2, (int64_t[]){2, 3}), *y = iota_f32(2, (int64_t[]){2, 3});
    rt_tensor *v = rt_reshape(C, x, 1, (int64_t[]){6});
    rt_tensor *one = rt_full(C, RT_F32, 1, (int64_t[]){3}, 100.0);
    rt_tensor *accs[2] = {y, x};
    const rt_tensor *xs[2] = {one, one};
    EXPECT_FAIL(rt_index_add_multi_(C, 2, accs, 1, xs), "views included");
    EXPECT_FAIL(rt_zero_multi(C, 2, accs), "tensor 1 is shared");
    rt_tensor *ys = y;
    rt_index_add_multi(C, 2, accs, 1, xs); /* consumes x's reference: copied */
    cr_assert_eq(accs[0], ys, "y is writable: in place");
    cr_assert(accs[1] != x && accs[1]->st != x->st, "rt_index_add_multi wrote into a storage a view shares");
    expect_close(accs[0], (double[]){0, 1, 2, 103, 104, 105}, 6, 0, "y in place");
    expect_close(accs[1], (double[]){0, 1, 2, 103, 104, 105}, 6, 0, "x's copy");
    expect_close(v, (double[]){0, 1, 2, 3, 4, 5}, 6, 0, "the view after rt_index_add_multi");
    rt_zero_multi(C, 2, accs);
    expect_close(accs[0], (double[]){0, 0, 0, 0, 0, 0}, 6, 0, "zeroed");
    expect_close(accs[1], (double[]){0, 0, 0, 0, 0, 0}, 6, 0, "zeroed");
    rt_free(C, accs[0]); rt_free(C, accs[1]); rt_free(C, v); rt_free(C, one);
}

Test(views, take_data_of_a_view_copies_its_elements)
{
    rt_tensor *x = iota_f32(2, (int64_t[]){5, 4});
    rt_tensor *v = rt_index(C, x, 2);
    rt_free(C, x);
    float *p = rt_take_data(C, v); /* v was the storage's only reference */
    cr_assert_eq((uintptr_t)p % 64, 0);
    for (int k = 0; k < 4; k++)
        cr_assert_eq(p[k], (float)(8 + k));
    free(p);
}

Test(views, the_accounting_follows_the_storage)
{
    int64_t t0 = live_temp();
    rt_tensor *x = iota_f32(1, (int64_t[]){8}); /* 32 B */
    rt_tensor *v = rt_reshape(C, x, 2, (int64_t[]){2, 4});
    rt_mem_tape(C, v, 1); /* the tape holds the view: the storage is a residual */
    rt_mem_stats m = rt_mem_get(C);
    cr_assert_eq(m.live[RT_MEM_RESID], 32);
    cr_assert_eq(m.live[RT_MEM_TEMP], t0);
    rt_mem_hold(C, 0, x, RT_MEM_PARAM); /* a var slot holds the base: a parameter */
    m = rt_mem_get(C);
    cr_assert_eq(m.live[RT_MEM_PARAM], 32);
    cr_assert_eq(m.live[RT_MEM_RESID], 0);
    rt_mem_hold(C, 0, NULL, RT_MEM_PARAM);
    rt_mem_tape(C, v, -1);
    cr_assert_eq(rt_mem_get(C).live[RT_MEM_TEMP], t0 + 32);
    rt_free(C, x);
    cr_assert_eq(rt_mem_get(C).live[RT_MEM_TEMP], t0 + 32, "the view holds the storage");
    rt_free(C, v);
    cr_assert_eq(rt_mem_get(C).live[RT_MEM_TEMP], t0);
}

Test(views, profile_counts_views)
{
    double v0 = C->prof.views;
    rt_tensor *x = iota_f32(2, (int64_t[]){3, 2});
    rt_tensor *a = rt_reshape(C, x, 1, (int64_t[]){6});
    rt_tensor *b = rt_index(C, x, 1);
    rt_tensor *c = rt_slice(C, x, 1, 0, 1); /* a copy */
    cr_assert_eq(C->prof.views - v0, 2.0, "reshape and index are views, the strided slice is not");
    rt_free(C, a); rt_free(C, b); rt_free(C, c); rt_free(C, x);
}
