/* The CUDA target's masks and selection: iota, where (three operands
 * broadcast), take_along_dim and their backwards (where's is composite.c's).
 * Selection moves bytes; the shape checks are checks.c's, the CPU target's.
 * take_along_dim's indices are checked on the device (the first bad one
 * goes to the device error record and stops the run at the next
 * synchronisation with the CPU's message) and its offsets computed there:
 * it does not wait for the device. Its backward adds each input element's
 * terms in result order (no atomics), as the CPU does: on the device when
 * few results can pick an element (a loss picking its target), else
 * grouped on the host. */
#include <stdlib.h>
#include <string.h>

#include "dev.h"

extern "C" {

rt_tensor *rt_iota(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, int dim)
{
    dim = rt_norm_dim(ctx, dim, l->ndim, "iota");
    RT_KERNEL(ctx, RT_K_COPY, "iota");
    ctx->tgt->op = "iota";
    rt_tensor *t = rt_empty(ctx, dt, l->ndim, l->local);
    int64_t outer, n, inner, off = l->offset[dim];
    rt_split_dims(t, dim, &outer, &n, &inner);
    void *T = t->data;
    rt_launch(ctx, t->numel, [=] RT_HD(int64_t k) {
        rt_st(T, dt, k, (double)(off + (k / inner) % n));
    });
    return t;
}

/* where(c, a, b); a value whose data is NULL is a 0-d zero of the other's
 * dtype (rt_where_zero: the backward's where(c, dy, 0) without a device
 * scalar made and filled for it) */
static rt_tensor *where_sel(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *a, const rt_tensor *b)
{
    rt_bshape bs = rt_where_check(ctx, c, a, b);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, "where");
    ctx->tgt->op = "where";
    rt_tensor *y = rt_empty(ctx, a->dtype, bs.ndim, bs.shape);
    int64_t sc[RT_MAX_DIMS], sa[RT_MAX_DIMS], sb[RT_MAX_DIMS];
    rt_broadcast_strides(c, bs.ndim, bs.shape, sc);
    rt_broadcast_strides(a, bs.ndim, bs.shape, sa);
    rt_broadcast_strides(b, bs.ndim, bs.shape, sb);
    rt_dshape sh = rt_dshape_of(bs.ndim, bs.shape), dc = rt_dshape_of(bs.ndim, sc),
              da = rt_dshape_of(bs.ndim, sa), db = rt_dshape_of(bs.ndim, sb);
    const void *C = c->data;
    const char *A = (const char *)a->data, *B = (const char *)b->data;
    char *Y = (char *)y->data;
    rt_dtype cdt = c->dtype;
    size_t esz = rt_dtype_size(a->dtype);
    if (c->numel == y->numel && a->numel == y->numel && b->numel == y->numel) { /* flat indices */
        rt_launch(ctx, y->numel, [=] RT_HD(int64_t i) {
            const char *base = rt_ld(C, cdt, i) != 0.0 ? A /* NaN is true */ : B;
            for (size_t k = 0; k < esz; k++)
                Y[(size_t)i * esz + k] = base ? base[(size_t)i * esz + k] : 0;
        });
        return y;
    }
    rt_launch(ctx, y->numel, [=] RT_HD(int64_t i) {
        int64_t r = i, oc = 0, oa = 0, ob = 0;
        for (int d = sh.ndim - 1; d >= 0; d--) {
            int64_t k = r % sh.s[d];
            r /= sh.s[d];
            oc += k * dc.s[d];
            oa += k * da.s[d];
            ob += k * db.s[d];
        }
        double cv = rt_ld(C, cdt, oc); /* NaN is true, as on the CPU */
        const char *base = cv != 0.0 ? A : B;
        size_t o = (size_t)(cv != 0.0 ? oa : ob) * esz;
        for (size_t k = 0; k < esz; k++)
            Y[(size_t)i * esz + k] = base ? base[o + k] : 0;
    });
    return y;
}

rt_tensor *rt_where(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *a, const rt_tensor *b)
{
    return where_sel(ctx, c, a, b);
}

rt_tensor *rt_where_zero(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *x, bool first)
{
    rt_tensor zero;
    memset(&zero, 0, sizeof zero);
    zero.dtype = x->dtype;
    zero.numel = 1; /* 0-d; data NULL: zeros */
    return first ? where_sel(ctx, c, x, &zero) : where_sel(ctx, c, &zero, x);
}

/* ---- take_along_dim */

/* the backward's device path: at most this many results may pick one x
 * element (more: grouped on the host, which waits for the indices) */
#define RT_TAKE_BWD_CANDIDATES 1024

/* each result element's flat offset in x (the indices staged to the host
 * and checked by checks.c's walk); the caller frees it */
static void keep_offset(void *user, int64_t i, int64_t xoff) { ((int64_t *)user)[i] = xoff; }

static int64_t *gather_offsets(rt_ctx *ctx, int xndim, const int64_t *xshape,
                               const rt_tensor *idx, int dim, const rt_bshape *bs, int64_t *count)
{
    int64_t n = rt_numel_of(bs->ndim, bs->shape);
    int64_t *off = (int64_t *)malloc((size_t)(n ? n : 1) * sizeof *off);
    RT_CHECK(ctx, off != NULL, "out of memory");
    rt_take_along_dim_walk(ctx, xndim, xshape, idx, dim, bs, keep_offset, off);
    *count = n;
    return off;
}

/* The indices checked on the device: the first one out of range [0, size)
 * in idx's order, which is the first in result order (the CPU's walk: a
 * broadcast index dim repeats its element after it), goes to the device
 * error record with dim and size (reported at the next synchronisation
 * with the CPU's message, rt_take_along_dim_index_fail). Not when the
 * result is empty (the CPU's walk checks nothing then). */
static void check_indices(rt_ctx *ctx, const rt_tensor *idx, int dim, int64_t size, int64_t n)
{
    if (n == 0 || idx->numel == 0)
        return;
    int64_t *REC = rt_dev_errors(ctx);
    const int32_t *I = (const int32_t *)idx->data;
    int64_t m = idx->numel, loc = (int64_t)(uintptr_t)ctx->at_loc;
    rt_launch_rows(ctx, 1, [=] RT_HD(const rt_warp &w, int64_t) {
        int64_t bad = w.reduce(m, (int64_t)INT64_MAX, [&](int64_t j) {
            int32_t v = I[j];
            return v >= 0 && v < size ? (int64_t)INT64_MAX : j;
        }, rt_op_min());
        if (w.leader() && bad != INT64_MAX && REC[0] == RT_DEVERR_NONE) {
            REC[1] = dim;
            REC[2] = I[bad];
            REC[3] = size;
            REC[4] = loc;
            REC[0] = RT_DEVERR_TAKE;
        }
    });
}

/* result element i's offsets in x (broadcast dims of x at stride 0) and in
 * the indices, and its index: on the device, from the shapes */
struct take_map {
    rt_dshape shape, xs, is; /* the result's shape; x's and idx's strides */
    int dim;
    int64_t size; /* x's size along dim */
};

static take_map take_map_of(int xndim, const int64_t *xshape, const rt_tensor *idx, int dim,
                            const rt_bshape *bs)
{
    int64_t xs[RT_MAX_DIMS], si[RT_MAX_DIMS], s = 1;
    for (int d = xndim - 1; d >= 0; d--) {
        xs[d] = xshape[d] == 1 && bs->shape[d] != 1 && d != dim ? 0 : s;
        s *= xshape[d];
    }
    rt_broadcast_strides(idx, bs->ndim, bs->shape, si);
    take_map m;
    m.shape = rt_dshape_of(bs->ndim, bs->shape);
    m.xs = rt_dshape_of(bs->ndim, xs);
    m.is = rt_dshape_of(bs->ndim, si);
    m.dim = dim;
    m.size = xshape[dim];
    return m;
}

/* x's offset of result element i (-1: its index is out of range) */
RT_DEV_INLINE int64_t take_offset(const take_map &m, const int32_t *I, int64_t i)
{
    int64_t r = i, ox = 0, oi = 0;
    for (int d = m.shape.ndim - 1; d >= 0; d--) {
        int64_t k = r % m.shape.s[d];
        r /= m.shape.s[d];
        oi += k * m.is.s[d];
        if (d != m.dim)
            ox += k * m.xs.s[d];
    }
    int32_t j = I[oi];
    return j >= 0 && j < m.size ? ox + (int64_t)j * m.xs.s[m.dim] : -1;
}

rt_tensor *rt_take_along_dim(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *idx, int dim)
{
    rt_bshape bs = rt_take_along_dim_check(ctx, x->ndim, x->shape, idx, &dim, "take_along_dim");
    RT_KERNEL(ctx, RT_K_COPY, "take_along_dim");
    ctx->tgt->op = "take_along_dim";
    int64_t n = rt_numel_of(bs.ndim, bs.shape);
    check_indices(ctx, idx, dim, x->shape[dim], n);
    take_map m = take_map_of(x->ndim, x->shape, idx, dim, &bs);
    rt_tensor *y = rt_empty(ctx, x->dtype, bs.ndim, bs.shape);
    size_t esz = rt_dtype_size(x->dtype);
    const char *X = (const char *)x->data;
    const int32_t *I = (const int32_t *)idx->data;
    char *Y = (char *)y->data;
    rt_launch(ctx, n, [=] RT_HD(int64_t i) {
        int64_t o = take_offset(m, I, i); /* a bad index (reported) gives zeros */
        for (size_t k = 0; k < esz; k++)
            Y[(size_t)i * esz + k] = o < 0 ? 0 : X[(size_t)o * esz + k];
    });
    return y;
}

rt_tensor *rt_take_along_dim_bwd(rt_ctx *ctx, const rt_tensor *idx, const rt_tensor *dy,
                                 int ndim, const int64_t *x_shape, int dim)
{
    rt_bshape bs = rt_take_along_dim_bwd_check(ctx, idx, dy, ndim, x_shape, &dim);
    RT_KERNEL(ctx, RT_K_COPY, "take_along_dim_bwd");
    ctx->tgt->op = "take_along_dim_bwd";
    /* few results per x element (a loss picking its target): each x
     * element adds, in result order, the gradients of the results that
     * may pick it (its own positions outside dim and the broadcast dims of
     * x, every position along dim and those) whose index is its position
     * along dim, on the device (the forward checked the indices; one out
     * of range picks nothing here) */
    take_map m = take_map_of(ndim, x_shape, idx, dim, &bs);
    int64_t cand = 1;
    for (int d = 0; d < ndim; d++)
        cand *= d == dim || (x_shape[d] == 1 && bs.shape[d] != 1) ? bs.shape[d] : 1;
    if (cand <= RT_TAKE_BWD_CANDIDATES) {
        rt_tensor *g = rt_empty(ctx, dy->dtype, ndim, x_shape);
        rt_dshape xsh = rt_dshape_of(ndim, x_shape);
        const int32_t *I = (const int32_t *)idx->data;
        const void *DY = dy->data;
        void *G = g->data;
        rt_dtype dt = dy->dtype;
        rt_launch(ctx, g->numel, [=] RT_HD(int64_t v) {
            int64_t q[RT_MAX_DIMS];
            int64_t r = v;
            for (int d = m.shape.ndim - 1; d >= 0; d--) {
                q[d] = r % xsh.s[d];
                r /= xsh.s[d];
            }
            double s = 0;
            for (int64_t c = 0; c < cand; c++) {
                /* candidate c: the free dims' positions, the last fastest */
                int64_t rc = c, i = 0, oi = 0, mul = 1;
                for (int d = m.shape.ndim - 1; d >= 0; d--) {
                    bool free_d = d == m.dim || (xsh.s[d] == 1 && m.shape.s[d] != 1);
                    int64_t p = q[d];
                    if (free_d) {
                        p = rc % m.shape.s[d];
                        rc /= m.shape.s[d];
                    }
                    i += p * mul;
                    mul *= m.shape.s[d];
                    oi += p * m.is.s[d];
                }
                if (I[oi] == q[m.dim])
                    s += rt_ld(DY, dt, i);
            }
            rt_st(G, dt, v, s);
        });
        return g;
    }
    /* many: grouped on the host (a synchronisation) */
    int64_t n, nx = rt_numel_of(ndim, x_shape);
    int64_t *off = gather_offsets(ctx, ndim, x_shape, idx, dim, &bs, &n);
    /* group result elements by their x element, in result order */
    int64_t *start = (int64_t *)calloc((size_t)nx + 1, sizeof *start);
    int64_t *pos = (int64_t *)malloc((size_t)(n ? n : 1) * sizeof *pos);
    int64_t *fill = (int64_t *)malloc((size_t)(nx ? nx : 1) * sizeof *fill);
    RT_CHECK(ctx, start && pos && fill, "out of memory");
    for (int64_t i = 0; i < n; i++)
        start[off[i] + 1]++;
    for (int64_t v = 0; v < nx; v++)
        start[v + 1] += start[v];
    memcpy(fill, start, (size_t)nx * sizeof *fill);
    for (int64_t i = 0; i < n; i++)
        pos[fill[off[i]]++] = i;
    size_t sb = (size_t)(nx + 1) * sizeof *start, pb = (size_t)n * sizeof *pos, cap;
    int64_t *dev = (int64_t *)rt_pool_alloc(ctx, sb + pb, &cap);
    rt_dev_h2d(ctx, dev, start, sb);
    rt_dev_h2d(ctx, dev + nx + 1, pos, pb);
    free(off);
    free(start);
    free(pos);
    free(fill);
    rt_tensor *g = rt_empty(ctx, dy->dtype, ndim, x_shape);
    const int64_t *S = dev, *P = dev + nx + 1;
    const void *DY = dy->data;
    void *G = g->data;
    rt_dtype dt = dy->dtype;
    rt_launch(ctx, nx, [=] RT_HD(int64_t v) {
        double s = 0;
        for (int64_t q = S[v]; q < S[v + 1]; q++)
            s += rt_ld(DY, dt, P[q]);
        rt_st(G, dt, v, s);
    });
    rt_pool_release(ctx, dev, cap);
    return g;
}

} /* extern "C" */
