/* The CUDA target's elementwise kernels, from the X-lists of spmdrt.h
 * (RT_UNARY_OPS, RT_BINARY_OPS): each formula and derivative is the CPU's,
 * instantiated as a __host__ __device__ body. Unary ops compute in the
 * tensor's own precision (f32 in float), binary ops in double, rounded to
 * the dtype, as on the CPU; bf16 computes as f32 and rounds each result.
 * Also sum_to_shape: one thread per output element adds its terms in the
 * order of their flat index, the CPU's order (the same bits). */
#include <string.h>

#include "dev.h"

/* the helpers the X-lists name, as __host__ __device__ overloads for float
 * and double */
#define RT_EW_QUAL RT_DEV_INLINE
#include "elementwise_formulas.h"

/* f(x) and its derivative for op, in T */
template <class T> RT_HD static inline T un_f(rt_unary_op op, T x)
{
    switch (op) {
        RT_UNARY_OPS(RT_UNARY_F_CASE)
    case RT_NUNARY: break;
    }
    return x;
}
template <class T> RT_HD static inline T un_d(rt_unary_op op, T x, T y)
{
    (void)y;
    switch (op) {
        RT_UNARY_OPS(RT_UNARY_D_CASE)
    case RT_NUNARY: break;
    }
    return x;
}
RT_HD static inline double bin_f(rt_binary_op op, double a, double b)
{
    switch (op) {
        RT_BINARY_OPS(RT_BINARY_F_CASE)
    case RT_NBINARY: break;
    }
    return a;
}
RT_HD static inline void bin_d(rt_binary_op op, double a, double b, double *ga, double *gb)
{
    switch (op) {
#define BIN_D(NAME, name, kind, f, da_, db_) \
    case RT_##NAME: *ga = (da_); *gb = (db_); return;
        RT_BINARY_OPS(BIN_D)
#undef BIN_D
    case RT_NBINARY: break;
    }
    *ga = *gb = 0;
}

/* the element of a float tensor as the kernels' T, and back (bf16 as f32) */
template <class T> RT_HD static inline T ld_t(const void *p, rt_dtype dt, int64_t i)
{
    return (T)rt_ld(p, dt, i);
}

extern "C" {

/* one element of rt_unary's kernel, on the host (spmdrt_kernels.h
 * RT_FUSED_UNARY: the simulation build's fused loops) */
float rt_unary_elem_f32(rt_unary_op op, float x) { return un_f<float>(op, x); }
double rt_unary_elem_f64(rt_unary_op op, double x) { return un_f<double>(op, x); }

/* y = f(x), dydx = f'(x) (either may be NULL), dx = dy * f'(x) */
static void unary_launch(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, const rt_tensor *dy,
                         rt_tensor *y, rt_tensor *g)
{
    const void *X = x->data, *DY = dy ? dy->data : NULL;
    void *Y = y ? y->data : NULL, *G = g ? g->data : NULL;
    rt_dtype dt = x->dtype;
    if (dt == RT_F64) {
        rt_launch(ctx, x->numel, [=] RT_HD(int64_t i) {
            double xv = ((const double *)X)[i], yv = un_f<double>(op, xv);
            if (Y) ((double *)Y)[i] = yv;
            if (G) ((double *)G)[i] = un_d<double>(op, xv, yv);
            if (DY) ((double *)G)[i] = (double)(((const double *)DY)[i] * un_d<double>(op, xv, yv));
        });
    } else { /* f32, and bf16 computed as f32 and rounded */
        rt_launch(ctx, x->numel, [=] RT_HD(int64_t i) {
            float xv = ld_t<float>(X, dt, i), yv = un_f<float>(op, xv);
            if (Y) rt_st(Y, dt, i, yv);
            if (DY) rt_st(G, dt, i, (float)(ld_t<float>(DY, dt, i) * un_d<float>(op, xv, yv)));
            else if (G) rt_st(G, dt, i, un_d<float>(op, xv, yv));
        });
    }
}

rt_tensor *rt_unary(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NUNARY, "unary: bad op %d", (int)op);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_unary_name(op));
    ctx->tgt->op = rt_unary_name(op);
    if (x->dtype == RT_I32 && rt_unary_has_i32(op)) {
        rt_tensor *y = rt_empty(ctx, RT_I32, x->ndim, x->shape);
        const int32_t *X = (const int32_t *)x->data;
        int32_t *Y = (int32_t *)y->data;
        rt_launch(ctx, x->numel, [=] RT_HD(int64_t i) { Y[i] = rt_unary_i32(op, X[i]); });
        return y;
    }
    rt_check_float(ctx, x, rt_unary_name(op));
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    unary_launch(ctx, op, x, NULL, y, NULL);
    return y;
}

rt_tensor *rt_unary_bwd(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, const rt_tensor *dy)
{
    rt_unary_bwd_check(ctx, op, x, dy);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_unary_bwd_name(op));
    ctx->tgt->op = rt_unary_bwd_name(op);
    rt_tensor *dx = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    unary_launch(ctx, op, x, dy, NULL, dx);
    return dx;
}

void rt_unary_with_grad(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, rt_tensor **y,
                        rt_tensor **dydx)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NUNARY, "unary: bad op %d", (int)op);
    rt_check_float(ctx, x, rt_unary_name(op));
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_unary_grad_name(op));
    ctx->tgt->op = rt_unary_grad_name(op);
    *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    *dydx = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    unary_launch(ctx, op, x, NULL, *y, *dydx);
}

/* bf16 binary ops: both operands as f32 (exact), the f32 kernel's result
 * (computed in double, rounded to f32), then rounded to bf16.  Operands of
 * the result's size are read at the element's flat index, without the
 * per-dimension divisions of broadcasting */
rt_tensor *rt_binary(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b)
{
    rt_binary_check(ctx, op, a, b);
    rt_bcast bc = rt_binary_broadcast(ctx, a, b, rt_binary_name(op));
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_binary_name(op));
    ctx->tgt->op = rt_binary_name(op);
    rt_tensor *y = rt_empty(ctx, a->dtype, bc.ndim, bc.shape);
    rt_dshape sh = rt_dshape_of(bc.ndim, bc.shape), sa = rt_dshape_of(bc.ndim, bc.sa),
              sb = rt_dshape_of(bc.ndim, bc.sb);
    const void *A = a->data, *B = b->data;
    void *Y = y->data;
    rt_dtype dt = a->dtype;
    if (a->numel == y->numel && b->numel == y->numel) { /* no broadcast: flat indices */
        rt_launch(ctx, y->numel, [=] RT_HD(int64_t i) {
            double v = bin_f(op, rt_ld(A, dt, i), rt_ld(B, dt, i));
            if (dt == RT_BF16)
                v = (double)(float)v;
            rt_st(Y, dt, i, v);
        });
        return y;
    }
    rt_launch(ctx, y->numel, [=] RT_HD(int64_t i) {
        int64_t r = i, oa = 0, ob = 0;
        for (int d = sh.ndim - 1; d >= 0; d--) {
            int64_t k = r % sh.s[d];
            r /= sh.s[d];
            oa += k * sa.s[d];
            ob += k * sb.s[d];
        }
        double v = bin_f(op, rt_ld(A, dt, oa), rt_ld(B, dt, ob));
        if (dt == RT_BF16)
            v = (double)(float)v; /* the f32 kernel's result, then bf16 */
        rt_st(Y, dt, i, v);
    });
    return y;
}

/* a op s (or s op a): the scalar by value in the launch or, in a graph
 * region, read from its slot by the kernel (rt_slot_f), rounded there to
 * a's dtype as a scalar tensor of it would hold it (a bf16 scalar to bf16),
 * then rt_binary's arithmetic; no device scalar allocated and filled */
rt_tensor *rt_binary_scalar_h(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, rt_hf s, bool scalar_left)
{
    rt_tensor st = {};
    st.dtype = a->dtype; /* a header for the checks: rank 0, one element */
    st.numel = 1;
    rt_binary_check(ctx, op, scalar_left ? &st : a, scalar_left ? a : &st);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_binary_name(op));
    ctx->tgt->op = rt_binary_name(op);
    rt_dtype dt = a->dtype;
    rt_tensor *y = rt_empty(ctx, dt, a->ndim, a->shape);
    const void *A = a->data;
    void *Y = y->data;
    rt_launch(ctx, y->numel, [=] RT_HD(int64_t i) {
        double held[1]; /* 8 bytes, aligned for any dtype */
        rt_st(held, dt, 0, rt_dev_hf(s));
        double sv = rt_ld(held, dt, 0);
        double x = rt_ld(A, dt, i);
        double v = scalar_left ? bin_f(op, sv, x) : bin_f(op, x, sv);
        if (dt == RT_BF16)
            v = (double)(float)v; /* the f32 kernel's result, then bf16 */
        rt_st(Y, dt, i, v);
    });
    return y;
}

rt_tensor *rt_binary_scalar(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, double s, bool scalar_left)
{
    return rt_binary_scalar_h(ctx, op, a, rt_hf{s, NULL}, scalar_left);
}

/* ---- binary backward (composite.c's rt_binary_bwd_f64): full-size f64
 * gradients, then summed to each shape (the CPU's decomposition, so the
 * same sums in the same order) */

void rt_binary_grads(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b,
                     const rt_tensor *dy, rt_tensor *ga, rt_tensor *gb)
{
    ctx->tgt->op = rt_binary_bwd_name(op);
    const double *pa = (const double *)a->data, *pb = (const double *)b->data,
                 *pdy = (const double *)dy->data;
    double *pga = (double *)ga->data, *pgb = (double *)gb->data;
    rt_launch(ctx, ga->numel, [=] RT_HD(int64_t i) {
        double gda, gdb;
        bin_d(op, pa[i], pb[i], &gda, &gdb);
        pga[i] = pdy[i] * gda;
        pgb[i] = pdy[i] * gdb;
    });
}

rt_tensor *rt_div_scalar_grad(rt_ctx *ctx, const rt_tensor *dy, const rt_tensor *s)
{
    ctx->tgt->op = rt_binary_bwd_name(RT_DIV);
    rt_dtype dt = dy->dtype, st = s->dtype;
    rt_tensor *dx = rt_empty(ctx, dt, dy->ndim, dy->shape);
    const void *DY = dy->data, *S = s->data;
    void *DX = dx->data;
    rt_launch(ctx, dx->numel, [=] RT_HD(int64_t i) { rt_st(DX, dt, i, rt_ld(DY, dt, i) * (1.0 / rt_ld(S, st, 0))); });
    return dx;
}

/* rt_div_scalar_grad's kernel with s a host number, rounded to dy's dtype
 * as rt_scalar stores it: 1 / s is the same division on the host */
rt_tensor *rt_div_scalar_grad_h(rt_ctx *ctx, const rt_tensor *dy, double s)
{
    rt_check_float(ctx, dy, "div_scalar_grad");
    RT_CHECK(ctx, dy->dtype == RT_F32 || dy->dtype == RT_F64, "div_scalar_grad: f32 or f64");
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_binary_bwd_name(RT_DIV));
    ctx->tgt->op = rt_binary_bwd_name(RT_DIV);
    rt_dtype dt = dy->dtype;
    double inv = 1.0 / (dt == RT_F32 ? (double)(float)s : s);
    rt_tensor *dx = rt_empty(ctx, dt, dy->ndim, dy->shape);
    const void *DY = dy->data;
    void *DX = dx->data;
    rt_launch(ctx, dx->numel, [=] RT_HD(int64_t i) { rt_st(DX, dt, i, rt_ld(DY, dt, i) * inv); });
    return dx;
}

void rt_binary_bwd(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b,
                   const rt_tensor *dy, rt_tensor **da, rt_tensor **db)
{
    rt_check_float(ctx, a, rt_binary_name(op));
    rt_binary_bwd_f64(ctx, op, a, b, dy, da, db);
}

rt_tensor *rt_sum_to_shape(rt_ctx *ctx, const rt_tensor *g, int ndim, const int64_t *shape)
{
    if (!rt_sum_to_shape_check(ctx, g, ndim, shape))
        return rt_retain((rt_tensor *)g);
    RT_KERNEL(ctx, RT_K_REDUCE, "sum_to_shape");
    ctx->tgt->op = "sum_to_shape";
    /* g's dims: kept (the output's size) or reduced */
    int64_t kept[RT_MAX_DIMS];
    int lead = g->ndim - ndim;
    for (int d = 0; d < g->ndim; d++)
        kept[d] = d >= lead && shape[d - lead] == g->shape[d];
    rt_dshape gs = rt_dshape_of(g->ndim, g->shape), kp = rt_dshape_of(g->ndim, kept);
    rt_tensor *y = rt_empty(ctx, g->dtype, ndim, shape);
    const void *G = g->data;
    void *Y = y->data;
    rt_dtype dt = g->dtype;
    /* the reduced dims one run (dims of size 1 either way), as a bias's
     * gradient is: g is [outer, d, inner], each output a lane, g's flat
     * index increasing along it as below; long lanes in chunks (dev.h) */
    int first = -1, last = -1;
    bool one_run = true;
    for (int d = 0; d < g->ndim; d++) {
        if (g->shape[d] == 1 || kept[d])
            continue;
        if (last >= 0 && last != d - 1) {
            for (int e = last + 1; e < d; e++)
                one_run &= g->shape[e] == 1;
        }
        if (first < 0)
            first = d;
        last = d;
    }
    if (!one_run && y->numel > 0) {
        /* several runs: the reduced dims moved first (in order, so each
         * lane's terms keep g's row-major order), then one run */
        int perm[RT_MAX_DIMS], np = 0;
        for (int d = 0; d < g->ndim; d++)
            if (!kept[d])
                perm[np++] = d;
        for (int d = 0; d < g->ndim; d++)
            if (kept[d])
                perm[np++] = d;
        rt_tensor *t = rt_permute(ctx, g, perm);
        int64_t inner = y->numel, len = g->numel / inner;
        const void *T = t->data;
        rt_lanes_reduce(ctx, 1, len, inner, false,
                        [=] RT_HD(int64_t, int64_t j, int64_t i) { return rt_ld(T, dt, j * inner + i); },
                        [=] RT_HD(int64_t o, double v) { rt_st(Y, dt, o, v); });
        rt_free(ctx, t);
        return y;
    }
    if (one_run && first >= 0 && y->numel > 0) {
        int64_t outer = 1, len = 1, inner = 1;
        for (int d = 0; d < g->ndim; d++)
            *(d < first ? &outer : d <= last ? &len : &inner) *= g->shape[d];
        rt_lanes_reduce(ctx, outer, len, inner, false,
                        [=] RT_HD(int64_t o, int64_t j, int64_t i) {
                            return rt_ld(G, dt, (o * len + j) * inner + i);
                        },
                        [=] RT_HD(int64_t o, double v) { rt_st(Y, dt, o, v); });
        return y;
    }
    rt_launch(ctx, y->numel, [=] RT_HD(int64_t o) {
        /* the output element's coordinates in g (0 on reduced dims), then
         * the reduced dims row-major: g's flat index increases */
        int64_t base[RT_MAX_DIMS], r = o, nred = 1;
        for (int d = gs.ndim - 1; d >= 0; d--) {
            if (kp.s[d]) {
                base[d] = r % gs.s[d];
                r /= gs.s[d];
            } else {
                base[d] = 0;
                nred *= gs.s[d];
            }
        }
        double s = 0;
        for (int64_t k = 0; k < nred; k++) {
            int64_t rr = k, off = 0, str = 1;
            for (int d = gs.ndim - 1; d >= 0; d--) {
                int64_t c = base[d];
                if (!kp.s[d]) {
                    c = rr % gs.s[d];
                    rr /= gs.s[d];
                }
                off += c * str;
                str *= gs.s[d];
            }
            s += rt_ld(G, dt, off);
        }
        rt_st(Y, dt, o, s);
    });
    return y;
}

} /* extern "C" */
