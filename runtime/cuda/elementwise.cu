/* The CUDA target's elementwise kernels, from the X-lists of spmdrt.h
 * (RT_UNARY_OPS, RT_BINARY_OPS): each formula and derivative is the CPU's,
 * instantiated as a __host__ __device__ body. Unary ops compute in the
 * tensor's own precision (f32 in float), binary ops in double, rounded to
 * the dtype, as on the CPU; bf16 computes as f32 and rounds each result.
 * Also sum_to_shape: one thread per output element adds its terms in the
 * order of their flat index, the CPU's order (the same bits). */
#include <string.h>

#include "dev.h"

/* ---- the helpers the X-lists name, for float and double */
#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
#define HELPERS(T)                                                                       \
    RT_DEV_INLINE T rt_sigmoid_(T x)                                                     \
    {                                                                                    \
        return x >= 0 ? (T)1 / ((T)1 + exp(-x)) : exp(x) / ((T)1 + exp(x));              \
    }                                                                                    \
    RT_DEV_INLINE T rt_gelu_(T x) { return (T)0.5 * x * ((T)1 + erf(x * (T)M_SQRT1_2)); } \
    RT_DEV_INLINE T rt_gelu_d_(T x)                                                      \
    {                                                                                    \
        return (T)0.5 * ((T)1 + erf(x * (T)M_SQRT1_2)) +                                 \
               x * exp((T)-0.5 * x * x) * (T)(0.5 * M_2_SQRTPI * M_SQRT1_2);             \
    }                                                                                    \
    RT_DEV_INLINE T rt_gelu_tanh_(T x)                                                   \
    {                                                                                    \
        return (T)0.5 * x * ((T)1 + tanh((T)GELU_C * (x + (T)0.044715 * x * x * x)));    \
    }                                                                                    \
    RT_DEV_INLINE T rt_gelu_tanh_d_(T x)                                                 \
    {                                                                                    \
        T t = tanh((T)GELU_C * (x + (T)0.044715 * x * x * x));                           \
        return (T)0.5 * ((T)1 + t) +                                                     \
               (T)0.5 * x * ((T)1 - t * t) * (T)GELU_C * ((T)1 + (T)(3 * 0.044715) * x * x); \
    }                                                                                    \
    RT_DEV_INLINE T rt_silu_d_(T x)                                                      \
    {                                                                                    \
        T s = rt_sigmoid_(x);                                                            \
        return s * ((T)1 + x * ((T)1 - s));                                              \
    }
HELPERS(float)
HELPERS(double)

RT_DEV_INLINE double rt_pow_db_(double a, double b) { return a > 0 ? pow(a, b) * log(a) : 0.0; }

/* f(x) and its derivative for op, in T */
template <class T> RT_HD static inline T un_f(rt_unary_op op, T x)
{
    switch (op) {
#define UN_F(NAME, name, f, d) \
    case RT_##NAME: return (T)(f);
        RT_UNARY_OPS(UN_F)
#undef UN_F
    case RT_NUNARY: break;
    }
    return x;
}
template <class T> RT_HD static inline T un_d(rt_unary_op op, T x, T y)
{
    (void)y;
    switch (op) {
#define UN_D(NAME, name, f, d) \
    case RT_##NAME: return (T)(d);
        RT_UNARY_OPS(UN_D)
#undef UN_D
    case RT_NUNARY: break;
    }
    return x;
}
RT_HD static inline double bin_f(rt_binary_op op, double a, double b)
{
    switch (op) {
#define BIN_F(NAME, name, f, da, db) \
    case RT_##NAME: return (double)(f);
        RT_BINARY_OPS(BIN_F)
#undef BIN_F
    case RT_NBINARY: break;
    }
    return a;
}
RT_HD static inline void bin_d(rt_binary_op op, double a, double b, double *ga, double *gb)
{
    switch (op) {
#define BIN_D(NAME, name, f, da_, db_) \
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

#define NAME_U(NAME, name, f, d) #name,
#define NAME_B(NAME, name, f, da, db) #name,
#define NAME_UB(NAME, name, f, d) #name "_bwd",
#define NAME_UG(NAME, name, f, d) #name "_with_grad",
#define NAME_BB(NAME, name, f, da, db) #name "_bwd",
static const char *unary_names[] = {RT_UNARY_OPS(NAME_U)};
static const char *binary_names[] = {RT_BINARY_OPS(NAME_B)};
static const char *unary_bwd_names[] = {RT_UNARY_OPS(NAME_UB)};
static const char *unary_grad_names[] = {RT_UNARY_OPS(NAME_UG)};
static const char *binary_bwd_names[] = {RT_BINARY_OPS(NAME_BB)};
const char *rt_unary_name(rt_unary_op op) { return unary_names[op]; }
const char *rt_binary_name(rt_binary_op op) { return binary_names[op]; }

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
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, unary_names[op]);
    ctx->tgt->op = unary_names[op];
    if (x->dtype == RT_I32 && (op == RT_NEG || op == RT_ABS || op == RT_SQUARE || op == RT_RELU)) {
        rt_tensor *y = rt_empty(ctx, RT_I32, x->ndim, x->shape);
        const int32_t *X = (const int32_t *)x->data;
        int32_t *Y = (int32_t *)y->data;
        rt_launch(ctx, x->numel, [=] RT_HD(int64_t i) {
            Y[i] = op == RT_NEG ? -X[i] : op == RT_ABS ? (X[i] < 0 ? -X[i] : X[i])
                 : op == RT_SQUARE ? X[i] * X[i] : (X[i] > 0 ? X[i] : 0);
        });
        return y;
    }
    rt_check_float(ctx, x, unary_names[op]);
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    unary_launch(ctx, op, x, NULL, y, NULL);
    return y;
}

rt_tensor *rt_unary_bwd(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, const rt_tensor *dy)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NUNARY, "unary_bwd: bad op %d", (int)op);
    rt_check_float(ctx, x, unary_names[op]);
    RT_CHECK(ctx, rt_same_shape(x, dy) && x->dtype == dy->dtype,
             "%s backward: gradient shape or dtype differs from the input", unary_names[op]);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, unary_bwd_names[op]);
    ctx->tgt->op = unary_bwd_names[op];
    rt_tensor *dx = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    unary_launch(ctx, op, x, dy, NULL, dx);
    return dx;
}

void rt_unary_with_grad(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, rt_tensor **y,
                        rt_tensor **dydx)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NUNARY, "unary: bad op %d", (int)op);
    rt_check_float(ctx, x, unary_names[op]);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, unary_grad_names[op]);
    ctx->tgt->op = unary_grad_names[op];
    *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    *dydx = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    unary_launch(ctx, op, x, NULL, *y, *dydx);
}

rt_tensor *rt_scale(rt_ctx *ctx, const rt_tensor *x, double s)
{
    return rt_binary_scalar(ctx, RT_MUL, x, s, false);
}

/* ---- broadcasting */

typedef struct bcast {
    int ndim;
    int64_t shape[RT_MAX_DIMS];
    int64_t sa[RT_MAX_DIMS], sb[RT_MAX_DIMS]; /* element strides, 0 = broadcast */
} bcast;

static bcast broadcast(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, const char *what)
{
    rt_bshape s;
    memset(&s, 0, sizeof s);
    rt_broadcast_add(ctx, &s, a, what);
    rt_broadcast_add(ctx, &s, b, what);
    bcast bc;
    memset(&bc, 0, sizeof bc);
    bc.ndim = s.ndim;
    memcpy(bc.shape, s.shape, sizeof bc.shape);
    rt_broadcast_strides(a, bc.ndim, bc.shape, bc.sa);
    rt_broadcast_strides(b, bc.ndim, bc.shape, bc.sb);
    return bc;
}

/* bf16 binary ops: both operands as f32 (exact), the f32 kernel's result
 * (computed in double, rounded to f32), then rounded to bf16 */
rt_tensor *rt_binary(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NBINARY, "binary: bad op %d", (int)op);
    RT_CHECK(ctx, a->dtype == b->dtype, "%s: dtypes differ (%s and %s); use astype",
             binary_names[op], rt_dtype_name(a->dtype), rt_dtype_name(b->dtype));
    RT_CHECK(ctx, !(a->dtype == RT_I32 && (op == RT_DIV || op == RT_POW)),
             "%s: needs a float dtype (f32, f64, bf16), got i32", binary_names[op]);
    bcast bc = broadcast(ctx, a, b, binary_names[op]);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, binary_names[op]);
    ctx->tgt->op = binary_names[op];
    rt_tensor *y = rt_empty(ctx, a->dtype, bc.ndim, bc.shape);
    rt_dshape sh = rt_dshape_of(bc.ndim, bc.shape), sa = rt_dshape_of(bc.ndim, bc.sa),
              sb = rt_dshape_of(bc.ndim, bc.sb);
    const void *A = a->data, *B = b->data;
    void *Y = y->data;
    rt_dtype dt = a->dtype;
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

rt_tensor *rt_binary_scalar(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, double s,
                            bool scalar_left)
{
    rt_tensor *t = rt_scalar(ctx, a->dtype, s); /* a bf16 scalar is rounded to bf16 */
    rt_tensor *y = scalar_left ? rt_binary(ctx, op, t, a) : rt_binary(ctx, op, a, t);
    rt_free(ctx, t);
    return y;
}

/* ---- binary backward: full-size f64 gradients, then summed to each shape
 * (the CPU's decomposition, so the same sums in the same order) */

static rt_tensor *as_f64_full(rt_ctx *ctx, const rt_tensor *x, const bcast *bc)
{
    rt_tensor *e = rt_expand(ctx, x, bc->ndim, bc->shape);
    rt_tensor *f = rt_astype(ctx, e, RT_F64);
    rt_free(ctx, e);
    return f;
}

static rt_tensor *grad_to(rt_ctx *ctx, rt_tensor *g64, const rt_tensor *like)
{
    rt_tensor *s = rt_sum_to_shape(ctx, g64, like->ndim, like->shape);
    rt_tensor *r = rt_astype(ctx, s, like->dtype);
    rt_free(ctx, s);
    rt_free(ctx, g64);
    return r;
}

static bool binary_bwd_same_shape(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a,
                                  const rt_tensor *b, const rt_tensor *dy, rt_tensor **da,
                                  rt_tensor **db)
{
    if (!rt_same_shape(a, b) || !rt_same_shape(a, dy) || a->dtype != b->dtype ||
        a->dtype != dy->dtype || (op != RT_ADD && op != RT_SUB && op != RT_MUL))
        return false;
    if (da)
        *da = op == RT_MUL ? rt_binary(ctx, RT_MUL, dy, b) : rt_retain((rt_tensor *)dy);
    if (db)
        *db = op == RT_MUL ? rt_binary(ctx, RT_MUL, dy, a)
            : op == RT_SUB ? rt_unary(ctx, RT_NEG, dy) : rt_retain((rt_tensor *)dy);
    return true;
}

void rt_binary_bwd(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b,
                   const rt_tensor *dy, rt_tensor **da, rt_tensor **db)
{
    rt_check_float(ctx, a, binary_names[op]);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, binary_bwd_names[op]);
    if (binary_bwd_same_shape(ctx, op, a, b, dy, da, db))
        return;
    if ((op == RT_ADD || op == RT_SUB) && a->dtype == b->dtype && a->dtype == dy->dtype) {
        if (da)
            *da = rt_sum_to_shape(ctx, dy, a->ndim, a->shape);
        if (db) {
            rt_tensor *s = rt_sum_to_shape(ctx, dy, b->ndim, b->shape);
            *db = op == RT_SUB ? rt_unary(ctx, RT_NEG, s) : rt_retain(s);
            rt_free(ctx, s);
        }
        return;
    }
    if (op == RT_MUL && a->dtype == b->dtype && a->dtype == dy->dtype &&
        ((b->numel == 1 && !db && rt_same_shape(a, dy)) || (a->numel == 1 && !da && rt_same_shape(b, dy)))) {
        if (da)
            *da = rt_binary(ctx, RT_MUL, dy, b);
        if (db)
            *db = rt_binary(ctx, RT_MUL, dy, a);
        return;
    }
    bcast bc = broadcast(ctx, a, b, binary_names[op]);
    RT_CHECK(ctx, dy->ndim == bc.ndim && rt_numel_of(bc.ndim, bc.shape) == dy->numel,
             "%s backward: gradient shape differs from the result", binary_names[op]);
    ctx->tgt->op = binary_bwd_names[op];
    rt_tensor *A = as_f64_full(ctx, a, &bc), *B = as_f64_full(ctx, b, &bc);
    rt_tensor *DY = rt_astype(ctx, dy, RT_F64);
    rt_tensor *GA = rt_empty(ctx, RT_F64, bc.ndim, bc.shape);
    rt_tensor *GB = rt_empty(ctx, RT_F64, bc.ndim, bc.shape);
    const double *pa = (const double *)A->data, *pb = (const double *)B->data,
                 *pdy = (const double *)DY->data;
    double *pga = (double *)GA->data, *pgb = (double *)GB->data;
    rt_launch(ctx, GA->numel, [=] RT_HD(int64_t i) {
        double ga, gb;
        bin_d(op, pa[i], pb[i], &ga, &gb);
        pga[i] = pdy[i] * ga;
        pgb[i] = pdy[i] * gb;
    });
    rt_free(ctx, A);
    rt_free(ctx, B);
    rt_free(ctx, DY);
    if (da)
        *da = grad_to(ctx, GA, a);
    else
        rt_free(ctx, GA);
    if (db)
        *db = grad_to(ctx, GB, b);
    else
        rt_free(ctx, GB);
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
        rt_tensor *sums = rt_lanes_f64(ctx, 1, len, inner, false,
                                       [=] RT_HD(int64_t, int64_t j, int64_t i) {
                                           return rt_ld(T, dt, j * inner + i);
                                       });
        rt_free(ctx, t);
        const double *S = (const double *)sums->data;
        rt_launch(ctx, y->numel, [=] RT_HD(int64_t o) { rt_st(Y, dt, o, S[o]); });
        rt_free(ctx, sums);
        return y;
    }
    if (one_run && first >= 0 && y->numel > 0) {
        int64_t outer = 1, len = 1, inner = 1;
        for (int d = 0; d < g->ndim; d++)
            *(d < first ? &outer : d <= last ? &len : &inner) *= g->shape[d];
        rt_tensor *sums = rt_lanes_f64(ctx, outer, len, inner, false,
                                       [=] RT_HD(int64_t o, int64_t j, int64_t i) {
                                           return rt_ld(G, dt, (o * len + j) * inner + i);
                                       });
        const double *S = (const double *)sums->data;
        rt_launch(ctx, y->numel, [=] RT_HD(int64_t o) { rt_st(Y, dt, o, S[o]); });
        rt_free(ctx, sums);
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
