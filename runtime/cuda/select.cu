/* The CUDA target's masks and selection: iota, where (three operands
 * broadcast), take_along_dim and their backwards (where's is composite.c's).
 * Selection moves bytes; the checks are checks.c's, the CPU target's: the
 * indices of take_along_dim are checked on the host by its walk, which
 * computes the gather offsets; its backward adds each input element's
 * terms in result order (a stable grouping on the host, no atomics), as
 * the CPU does. */
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

rt_tensor *rt_where(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *a, const rt_tensor *b)
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
        const char *src = cv != 0.0 ? A + (size_t)oa * esz : B + (size_t)ob * esz;
        for (size_t k = 0; k < esz; k++)
            Y[(size_t)i * esz + k] = src[k];
    });
    return y;
}

/* ---- take_along_dim */

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

rt_tensor *rt_take_along_dim(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *idx, int dim)
{
    rt_bshape bs = rt_take_along_dim_check(ctx, x->ndim, x->shape, idx, &dim, "take_along_dim");
    RT_KERNEL(ctx, RT_K_COPY, "take_along_dim");
    ctx->tgt->op = "take_along_dim";
    int64_t n;
    int64_t *off = gather_offsets(ctx, x->ndim, x->shape, idx, dim, &bs, &n);
    size_t cap;
    int64_t *doff = (int64_t *)rt_pool_alloc(ctx, (size_t)n * sizeof *doff, &cap);
    rt_dev_h2d(ctx, doff, off, (size_t)n * sizeof *off);
    free(off);
    rt_tensor *y = rt_empty(ctx, x->dtype, bs.ndim, bs.shape);
    size_t esz = rt_dtype_size(x->dtype);
    const char *X = (const char *)x->data;
    char *Y = (char *)y->data;
    const int64_t *O = doff;
    rt_launch(ctx, n, [=] RT_HD(int64_t i) {
        for (size_t k = 0; k < esz; k++)
            Y[(size_t)i * esz + k] = X[(size_t)O[i] * esz + k];
    });
    rt_pool_release(ctx, doff, cap);
    return y;
}

rt_tensor *rt_take_along_dim_bwd(rt_ctx *ctx, const rt_tensor *idx, const rt_tensor *dy,
                                 int ndim, const int64_t *x_shape, int dim)
{
    rt_bshape bs = rt_take_along_dim_bwd_check(ctx, idx, dy, ndim, x_shape, &dim);
    RT_KERNEL(ctx, RT_K_COPY, "take_along_dim_bwd");
    ctx->tgt->op = "take_along_dim_bwd";
    /* few indices along dim and no broadcast (a loss picking its target):
     * each x element adds, in result order, the gradients of the results
     * that picked it, on the device (the forward checked the indices; one
     * out of range picks nothing here) */
    bool plain = idx->shape[dim] <= RT_CHUNK;
    for (int d = 0; d < ndim; d++)
        plain &= d == dim || (x_shape[d] == bs.shape[d] && idx->shape[d] == bs.shape[d]);
    if (plain) {
        int64_t outer = 1, inner = 1, len = x_shape[dim], k = idx->shape[dim];
        for (int d = 0; d < ndim; d++)
            *(d < dim ? &outer : &inner) *= d == dim ? 1 : x_shape[d];
        rt_tensor *g = rt_empty(ctx, dy->dtype, ndim, x_shape);
        const int32_t *I = (const int32_t *)idx->data;
        const void *DY = dy->data;
        void *G = g->data;
        rt_dtype dt = dy->dtype;
        rt_launch(ctx, g->numel, [=] RT_HD(int64_t v) {
            int64_t i = v % inner, j = v / inner % len, o = v / inner / len;
            double s = 0;
            for (int64_t q = 0; q < k; q++)
                if (I[(o * k + q) * inner + i] == j)
                    s += rt_ld(DY, dt, (o * k + q) * inner + i);
            rt_st(G, dt, v, s);
        });
        return g;
    }
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
