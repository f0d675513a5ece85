/* Local kernels: elementwise unary and binary ops (NumPy broadcasting),
 * their backwards, reductions over a dim or everything, and cumsum. The op
 * tables are the X-macros RT_UNARY_OPS / RT_BINARY_OPS of spmdrt.h: a formula
 * and its derivative are written once, side by side. Unary ops compute in
 * the tensor's own precision; binary ops in double, rounded to the dtype. */
#include <math.h>
#include <string.h>
#include <tgmath.h>

#include "elementwise_formulas.h"
#include "rt_cpu.h"
#include "vmath.h"

/* The helpers named in the op tables come from elementwise_formulas.h: f32
 * tensors compute in float, as PyTorch does (about twice as fast for erf
 * and exp, within float rounding). The ops' names and their kernels' names
 * are host.c's. */

/* ---- unary */

typedef void (*unary_fn)(const void *in, void *out, int64_t n);
typedef void (*unary_bwd_fn)(const void *in, const void *dy, void *dx, int64_t n);

#define UNARY_T(NAME, name, f, d, T, sfx)                                            \
    static void un_##name##_##sfx(const void *in, void *out, int64_t n)            \
    {                                                                               \
        const T *X = in;                                                            \
        T *Y = out;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                           \
            T x = X[i];                                                             \
            Y[i] = (T)(f);                                                          \
        }                                                                           \
    }                                                                               \
    static void unb_##name##_##sfx(const void *in, const void *dy, void *dx, int64_t n) \
    {                                                                               \
        const T *X = in, *DY = dy;                                                  \
        T *DX = dx;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                           \
            T x = X[i], y = (T)(f);                                                 \
            (void)y;                                                                \
            DX[i] = (T)(DY[i] * (d));                                               \
        }                                                                           \
    }
#define UNARY_GRAD_T(NAME, name, f, d, T, sfx)                                       \
    static void ung_##name##_##sfx(const void *in, void *out, void *grad, int64_t n) \
    {                                                                               \
        const T *X = in;                                                            \
        T *Y = out, *G = grad;                                                      \
        for (int64_t i = 0; i < n; i++) {                                           \
            T x = X[i], y = (T)(f);                                                 \
            Y[i] = y;                                                               \
            G[i] = (T)(d);                                                          \
        }                                                                           \
    }
#define UNARY_GRAD_DEFS(NAME, name, vec, f, d) \
    UNARY_GRAD_T(NAME, name, f, d, float, f32) UNARY_GRAD_T(NAME, name, f, d, double, f64)
RT_UNARY_OPS(UNARY_GRAD_DEFS)
typedef void (*unary_grad_fn)(const void *in, void *out, void *grad, int64_t n);
#define UNG_F32(NAME, name, vec, f, d) ung_##name##_f32,
#define UNG_F64(NAME, name, vec, f, d) ung_##name##_f64,
static const unary_grad_fn unary_grad_f32[] = {RT_UNARY_OPS(UNG_F32)};
static const unary_grad_fn unary_grad_f64[] = {RT_UNARY_OPS(UNG_F64)};

#define UNARY_DEFS(NAME, name, vec, f, d) \
    UNARY_T(NAME, name, f, d, float, f32) UNARY_T(NAME, name, f, d, double, f64)
RT_UNARY_OPS(UNARY_DEFS)

#define UN_F32(NAME, name, vec, f, d) un_##name##_f32,
#define UN_F64(NAME, name, vec, f, d) un_##name##_f64,
#define UNB_F32(NAME, name, vec, f, d) unb_##name##_f32,
#define UNB_F64(NAME, name, vec, f, d) unb_##name##_f64,
static const unary_fn unary_f32[] = {RT_UNARY_OPS(UN_F32)};
static const unary_fn unary_f64[] = {RT_UNARY_OPS(UN_F64)};
static const unary_bwd_fn unary_bwd_f32[] = {RT_UNARY_OPS(UNB_F32)};
static const unary_bwd_fn unary_bwd_f64[] = {RT_UNARY_OPS(UNB_F64)};

rt_tensor *rt_unary(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NUNARY, "unary: bad op %d", (int)op);
    if (x->dtype == RT_BF16)
        return rt_bf16_unary(ctx, op, x);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_unary_name(op));
    if (x->dtype == RT_I32 && rt_unary_has_i32(op)) {
        rt_tensor *y = rt_empty(ctx, RT_I32, x->ndim, x->shape);
        const int32_t *X = x->data;
        int32_t *Y = y->data;
        for (int64_t i = 0; i < x->numel; i++)
            Y[i] = rt_unary_i32(op, X[i]);
        return y;
    }
    rt_check_float(ctx, x, rt_unary_name(op));
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    rt_vm_map v = ctx->tgt->vm ? ctx->tgt->vm->un[x->dtype == RT_F64][op] : NULL;
    (v ? v : (x->dtype == RT_F32 ? unary_f32 : unary_f64)[op])(x->data, y->data, x->numel);
    return y;
}

/* One element through rt_unary's kernel (spmdrt_kernels.h RT_FUSED_UNARY:
 * the CUDA target's simulation build on this runtime): this CPU's vector
 * kernel with n = 1 (its masked tail: an element's value wherever it is),
 * or the scalar loop where rt_unary runs that */
static const rt_vm_table *elem_vm(void)
{
    static const rt_vm_table *vm;
    static bool chosen;
    if (!chosen) {
        vm = rt_vm_select();
        chosen = true;
    }
    return vm;
}

float rt_unary_elem_f32(rt_unary_op op, float x)
{
    float y = 0;
    if (op < 0 || op >= RT_NUNARY)
        return y;
    const rt_vm_table *vm = elem_vm();
    rt_vm_map v = vm ? vm->un[0][op] : NULL;
    (v ? v : unary_f32[op])(&x, &y, 1);
    return y;
}

double rt_unary_elem_f64(rt_unary_op op, double x)
{
    double y = 0;
    if (op < 0 || op >= RT_NUNARY)
        return y;
    const rt_vm_table *vm = elem_vm();
    rt_vm_map v = vm ? vm->un[1][op] : NULL;
    (v ? v : unary_f64[op])(&x, &y, 1);
    return y;
}

rt_tensor *rt_unary_bwd(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, const rt_tensor *dy)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NUNARY, "unary_bwd: bad op %d", (int)op);
    if (x->dtype == RT_BF16)
        return rt_bf16_unary_bwd(ctx, op, x, dy);
    rt_unary_bwd_check(ctx, op, x, dy);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_unary_bwd_name(op));
    rt_tensor *dx = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    rt_vm_bwd v = ctx->tgt->vm ? ctx->tgt->vm->unb[x->dtype == RT_F64][op] : NULL;
    (v ? v : (x->dtype == RT_F32 ? unary_bwd_f32 : unary_bwd_f64)[op])(x->data, dy->data,
                                                                        dx->data, x->numel);
    return dx;
}

void rt_unary_with_grad(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, rt_tensor **y,
                        rt_tensor **dydx)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NUNARY, "unary: bad op %d", (int)op);
    if (x->dtype == RT_BF16) {
        rt_bf16_unary_with_grad(ctx, op, x, y, dydx);
        return;
    }
    rt_check_float(ctx, x, rt_unary_name(op));
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_unary_grad_name(op));
    *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    *dydx = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    rt_vm_grad v = ctx->tgt->vm ? ctx->tgt->vm->ung[x->dtype == RT_F64][op] : NULL;
    (v ? v : (x->dtype == RT_F32 ? unary_grad_f32 : unary_grad_f64)[op])(
        x->data, (*y)->data, (*dydx)->data, x->numel);
}

/* ---- binary (NumPy broadcasting: rt_binary_broadcast) */

typedef void (*binary_fn)(const void *a, int64_t sa, const void *b, int64_t sb, void *out,
                          int64_t n);

#define BINARY_T(NAME, name, f, da, db, T, sfx)                                      \
    static void bin_##name##_##sfx(const void *pa, int64_t sa, const void *pb, int64_t sb, \
                                   void *po, int64_t n)                             \
    {                                                                               \
        const T *A = pa, *B = pb;                                                   \
        T *O = po;                                                                  \
        if (sa == 1 && sb == 1) { /* contiguous and scalar cases vectorise */       \
            for (int64_t i = 0; i < n; i++) {                                       \
                double a = A[i], b = B[i];                                          \
                O[i] = (T)(f);                                                      \
            }                                                                       \
        } else if (sa == 1 && sb == 0) {                                            \
            const double b = B[0];                                                  \
            for (int64_t i = 0; i < n; i++) {                                       \
                double a = A[i];                                                    \
                O[i] = (T)(f);                                                      \
            }                                                                       \
        } else if (sa == 0 && sb == 1) {                                            \
            const double a = A[0];                                                  \
            for (int64_t i = 0; i < n; i++) {                                       \
                double b = B[i];                                                    \
                O[i] = (T)(f);                                                      \
            }                                                                       \
        } else {                                                                    \
            for (int64_t i = 0; i < n; i++) {                                       \
                double a = A[i * sa], b = B[i * sb];                                \
                O[i] = (T)(f);                                                      \
            }                                                                       \
        }                                                                           \
    }
#define BINARY_DEFS(NAME, name, kind, f, da, db)                                         \
    BINARY_T(NAME, name, f, da, db, float, f32)                                    \
    BINARY_T(NAME, name, f, da, db, double, f64)                                   \
    BINARY_T(NAME, name, f, da, db, int32_t, i32)
RT_BINARY_OPS(BINARY_DEFS)

#define BIN_F32(NAME, name, kind, f, da, db) bin_##name##_f32,
#define BIN_F64(NAME, name, kind, f, da, db) bin_##name##_f64,
#define BIN_I32(NAME, name, kind, f, da, db) bin_##name##_i32,
static const binary_fn binary_tab[3][RT_NBINARY] = {
    [RT_F32] = {RT_BINARY_OPS(BIN_F32)},
    [RT_F64] = {RT_BINARY_OPS(BIN_F64)},
    [RT_I32] = {RT_BINARY_OPS(BIN_I32)},
};

static void run_binary(binary_fn fn, const rt_bcast *bc, size_t esz, const void *a, const void *b,
                       void *out)
{
    int64_t n = rt_numel_of(bc->ndim, bc->shape);
    if (n == 0)
        return;
    if (bc->ndim == 0) {
        fn(a, 0, b, 0, out, 1);
        return;
    }
    int last = bc->ndim - 1;
    int64_t run = bc->shape[last], idx[RT_MAX_DIMS] = {0}, oa = 0, ob = 0;
    const char *ca = a, *cb = b;
    char *co = out;
    for (int64_t o = 0; o < n; o += run) {
        fn(ca + (size_t)oa * esz, bc->sa[last], cb + (size_t)ob * esz, bc->sb[last],
           co + (size_t)o * esz, run);
        for (int d = last - 1; d >= 0; d--) {
            oa += bc->sa[d];
            ob += bc->sb[d];
            if (++idx[d] < bc->shape[d])
                break;
            oa -= bc->sa[d] * bc->shape[d];
            ob -= bc->sb[d] * bc->shape[d];
            idx[d] = 0;
        }
    }
}

rt_tensor *rt_binary(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b)
{
    rt_binary_check(ctx, op, a, b);
    if (a->dtype == RT_BF16)
        return rt_bf16_binary(ctx, op, a, b);
    rt_bcast bc = rt_binary_broadcast(ctx, a, b, rt_binary_name(op));
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_binary_name(op));
    rt_tensor *y = rt_empty(ctx, a->dtype, bc.ndim, bc.shape);
    binary_fn fn = binary_tab[a->dtype][op];
    size_t esz = rt_dtype_size(a->dtype);
    if (rt_same_shape(a, b))
        fn(a->data, 1, b->data, 1, y->data, y->numel);
    else if (b->numel == 1 && a->numel == y->numel)
        fn(a->data, 1, b->data, 0, y->data, y->numel);
    else if (a->numel == 1 && b->numel == y->numel)
        fn(a->data, 0, b->data, 1, y->data, y->numel);
    else
        run_binary(fn, &bc, esz, a->data, b->data, y->data);
    return y;
}

rt_tensor *rt_binary_scalar(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, double s,
                            bool scalar_left)
{
    if (a->dtype == RT_BF16)
        return rt_bf16_binary_scalar(ctx, op, a, s, scalar_left);
    rt_tensor *t = rt_scalar(ctx, a->dtype, s);
    rt_tensor *y = scalar_left ? rt_binary(ctx, op, t, a) : rt_binary(ctx, op, a, t);
    rt_free(ctx, t);
    return y;
}

/* ---- binary backward (composite.c's rt_binary_bwd_f64): full-size f64
 * gradients, then summed to each shape */

#define GRAD_CASE(NAME, name, kind, f, da_, db_)                       \
    case RT_##NAME:                                              \
        for (int64_t i = 0; i < n; i++) {                        \
            double a = A[i], b = B[i];                           \
            (void)a; (void)b;                                    \
            GA[i] = DY[i] * (da_);                               \
            GB[i] = DY[i] * (db_);                               \
        }                                                        \
        break;

void rt_binary_grads(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b,
                     const rt_tensor *dy, rt_tensor *ga, rt_tensor *gb)
{
    (void)ctx;
    const double *A = a->data, *B = b->data, *DY = dy->data;
    double *GA = ga->data, *GB = gb->data;
    int64_t n = ga->numel;
    switch (op) {
        RT_BINARY_OPS(GRAD_CASE)
    case RT_NBINARY: break;
    }
}

static rt_tensor *div_scalar_grad(rt_ctx *ctx, const rt_tensor *dy, double inv);

rt_tensor *rt_div_scalar_grad(rt_ctx *ctx, const rt_tensor *dy, const rt_tensor *s)
{
    return div_scalar_grad(ctx, dy, 1.0 / rt_get(s, 0));
}

rt_tensor *rt_div_scalar_grad_h(rt_ctx *ctx, const rt_tensor *dy, double s)
{
    rt_check_float(ctx, dy, "div_scalar_grad");
    RT_CHECK(ctx, dy->dtype == RT_F32 || dy->dtype == RT_F64, "div_scalar_grad: f32 or f64");
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, rt_binary_bwd_name(RT_DIV));
    return div_scalar_grad(ctx, dy, 1.0 / (dy->dtype == RT_F32 ? (double)(float)s : s));
}

static rt_tensor *div_scalar_grad(rt_ctx *ctx, const rt_tensor *dy, double inv)
{
    rt_tensor *dx = rt_empty(ctx, dy->dtype, dy->ndim, dy->shape);
    if (dy->dtype == RT_F32) {
        const float *DY = dy->data;
        float *DX = dx->data;
        for (int64_t i = 0; i < dx->numel; i++)
            DX[i] = (float)((double)DY[i] * inv);
    } else {
        const double *DY = dy->data;
        double *DX = dx->data;
        for (int64_t i = 0; i < dx->numel; i++)
            DX[i] = DY[i] * inv;
    }
    return dx;
}

void rt_binary_bwd(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b,
                   const rt_tensor *dy, rt_tensor **da, rt_tensor **db)
{
    rt_check_float(ctx, a, rt_binary_name(op));
    if (a->dtype == RT_BF16)
        rt_bf16_binary_bwd(ctx, op, a, b, dy, da, db);
    else
        rt_binary_bwd_f64(ctx, op, a, b, dy, da, db);
}

rt_tensor *rt_sum_to_shape(rt_ctx *ctx, const rt_tensor *g, int ndim, const int64_t *shape)
{
    if (!rt_sum_to_shape_check(ctx, g, ndim, shape))
        return rt_retain((rt_tensor *)g);
    RT_KERNEL(ctx, RT_K_REDUCE, "sum_to_shape");
    rt_tensor tgt = {.dtype = g->dtype, .ndim = ndim};
    memcpy(tgt.shape, shape, (size_t)ndim * sizeof *shape);
    int64_t str[RT_MAX_DIMS], idx[RT_MAX_DIMS] = {0}, off = 0;
    rt_broadcast_strides(&tgt, g->ndim, g->shape, str);
    int64_t n = rt_numel_of(ndim, shape);
    size_t cap, rcap;
    double *acc = rt_scratch(ctx, n, &cap);
    memset(acc, 0, (size_t)n * sizeof *acc);
    /* g in row-major order, a run of its last dim at a time: each target
     * element receives its terms in the order of their flat index in g (a
     * kept last dim adds the run elementwise, a reduced one sums it) */
    int last = g->ndim - 1;
    int64_t run = g->shape[last], sl = str[last];
    double *row = rt_scratch(ctx, run, &rcap);
    for (int64_t o = 0; o < g->numel; o += run) {
        rt_load_f64(g, o, run, row);
        double *a = acc + off;
        if (sl == 0) {
            double s = a[0];
            for (int64_t i = 0; i < run; i++)
                s += row[i];
            a[0] = s;
        } else {
            for (int64_t i = 0; i < run; i++)
                a[i] += row[i];
        }
        for (int d = last - 1; d >= 0; d--) {
            off += str[d];
            if (++idx[d] < g->shape[d])
                break;
            off -= str[d] * g->shape[d];
            idx[d] = 0;
        }
    }
    rt_tensor *y = rt_empty(ctx, g->dtype, ndim, shape);
    rt_store_f64(y, 0, n, acc);
    rt_pool_release(ctx, acc, cap);
    rt_pool_release(ctx, row, rcap);
    return y;
}

/* ---- global_norm's sum of squares over several tensors (f32, f64): each
 * tensor's squares, rounded to its dtype, summed in order in double and
 * rounded (rt_sum_all of rt_unary(SQUARE)), the tensors' sums added in
 * order with each addition rounded (rt_binary(ADD)); its backward
 * 2 * x * dy (exact in double for f32 and bf16, rounded once on storing) */

rt_tensor *rt_sum_squares_dev(rt_ctx *ctx, int n, const rt_tensor *const *xs)
{
    rt_dtype dt = xs[0]->dtype;
    size_t cap;
    double *lane = rt_scratch(ctx, 4096, &cap), total = 0;
    for (int j = 0; j < n; j++) {
        double a = 0;
        for (int64_t o = 0; o < xs[j]->numel; o += 4096) {
            int64_t m = xs[j]->numel - o < 4096 ? xs[j]->numel - o : 4096;
            rt_load_f64(xs[j], o, m, lane);
            if (dt == RT_F32)
                for (int64_t i = 0; i < m; i++)
                    a += (double)(float)(lane[i] * lane[i]);
            else
                for (int64_t i = 0; i < m; i++)
                    a += lane[i] * lane[i];
        }
        if (dt == RT_F32)
            a = (double)(float)a;
        total = j == 0 ? a : dt == RT_F32 ? (double)(float)(total + a) : total + a;
    }
    rt_pool_release(ctx, lane, cap);
    rt_tensor *y = rt_empty(ctx, dt, 0, NULL);
    rt_store_f64(y, 0, 1, &total);
    return y;
}

void rt_sum_squares_multi_dev(rt_ctx *ctx, int ngroups, const int *counts, const rt_tensor *const *xs,
                              rt_tensor **ys)
{
    for (int g = 0, o = 0; g < ngroups; o += counts[g++])
        ys[g] = rt_sum_squares_dev(ctx, counts[g], xs + o);
}

void rt_sum_squares_bwd_dev(rt_ctx *ctx, int n, const rt_tensor *const *xs, const rt_tensor *dy,
                            const bool *want, rt_tensor **dxs)
{
    double d;
    rt_load_f64(dy, 0, 1, &d);
    size_t cap;
    double *lane = rt_scratch(ctx, 4096, &cap);
    for (int j = 0; j < n; j++) {
        dxs[j] = NULL;
        if (!want[j])
            continue;
        rt_tensor *g = dxs[j] = rt_empty(ctx, xs[j]->dtype, xs[j]->ndim, xs[j]->shape);
        for (int64_t o = 0; o < g->numel; o += 4096) {
            int64_t m = g->numel - o < 4096 ? g->numel - o : 4096;
            rt_load_f64(xs[j], o, m, lane);
            for (int64_t i = 0; i < m; i++)
                lane[i] = 2.0 * lane[i] * d;
            rt_store_f64(g, o, m, lane);
        }
    }
    rt_pool_release(ctx, lane, cap);
}

/* ---- reductions over one dim: x viewed as [outer, d, inner] (composite.c:
 * rt_sum, rt_mean, rt_amax and their backwards) */

rt_tensor *rt_reduce_dim(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim,
                         rt_reduce_kind k, const char *what)
{
    int64_t outer, d, inner, shape[RT_MAX_DIMS];
    int ndim;
    rt_reduce_check(ctx, x, &dim, keepdim, k, what, &ndim, shape);
    RT_KERNEL(ctx, RT_K_REDUCE, what);
    rt_split_dims(x, dim, &outer, &d, &inner);
    size_t cap, rcap;
    if (inner == 1 && outer > 1 && d <= 65536) {
        /* contiguous lanes (a reduction over the last dim): RT_LANES rows
         * side by side, each reduced in order (rt_internal.h) */
        double *buf = rt_scratch(ctx, RT_LANES * d, &rcap), acc[RT_LANES];
        rt_tensor *y = rt_empty(ctx, x->dtype, ndim, shape);
        for (int64_t o0 = 0; o0 < outer; o0 += RT_LANES) {
            int64_t n = outer - o0 < RT_LANES ? outer - o0 : RT_LANES;
            rt_load_rows_t(x, o0, n, d, buf);
            for (int r = 0; r < RT_LANES; r++)
                acc[r] = k == RT_REDUCE_MAX ? -INFINITY : 0.0;
            if (k == RT_REDUCE_MAX)
                for (int64_t j = 0; j < d; j++)
                    for (int r = 0; r < RT_LANES; r++) {
                        double v = buf[j * RT_LANES + r];
                        acc[r] = v > acc[r] || isnan(v) ? v : acc[r];
                    }
            else
                for (int64_t j = 0; j < d; j++)
                    for (int r = 0; r < RT_LANES; r++)
                        acc[r] += buf[j * RT_LANES + r];
            if (k == RT_REDUCE_MEAN)
                for (int r = 0; r < RT_LANES; r++)
                    acc[r] /= (double)d;
            rt_store_f64(y, o0, n, acc);
        }
        rt_pool_release(ctx, buf, rcap);
        return y;
    }
    if (inner == 1) {
        /* one long contiguous lane at a time (everything, or very long
         * rows): loaded in chunks and reduced in order */
        int64_t chunk = d < 4096 ? d : 4096;
        double *lane = rt_scratch(ctx, chunk, &rcap);
        rt_tensor *y = rt_empty(ctx, x->dtype, ndim, shape);
        for (int64_t o = 0; o < outer; o++) {
            double a = k == RT_REDUCE_MAX ? -INFINITY : 0.0;
            for (int64_t j0 = 0; j0 < d; j0 += chunk) {
                int64_t m = d - j0 < chunk ? d - j0 : chunk;
                rt_load_f64(x, o * d + j0, m, lane);
                if (k == RT_REDUCE_MAX)
                    for (int64_t j = 0; j < m; j++)
                        a = lane[j] > a || isnan(lane[j]) ? lane[j] : a;
                else
                    for (int64_t j = 0; j < m; j++)
                        a += lane[j];
            }
            if (k == RT_REDUCE_MEAN)
                a /= (double)d;
            rt_store_f64(y, o, 1, &a);
        }
        rt_pool_release(ctx, lane, rcap);
        return y;
    }
    double *acc = rt_scratch(ctx, outer * inner, &cap), *row = rt_scratch(ctx, inner, &rcap);
    for (int64_t o = 0; o < outer; o++) {
        double *a = acc + o * inner;
        for (int64_t i = 0; i < inner; i++)
            a[i] = k == RT_REDUCE_MAX ? -INFINITY : 0.0;
        for (int64_t j = 0; j < d; j++) {
            rt_load_f64(x, (o * d + j) * inner, inner, row);
            for (int64_t i = 0; i < inner; i++)
                a[i] = k == RT_REDUCE_MAX ? (row[i] > a[i] || isnan(row[i]) ? row[i] : a[i])
                                    : a[i] + row[i];
        }
        if (k == RT_REDUCE_MEAN)
            for (int64_t i = 0; i < inner; i++)
                a[i] /= (double)d;
    }
    rt_tensor *y = rt_empty(ctx, x->dtype, ndim, shape);
    rt_store_f64(y, 0, y->numel, acc);
    rt_pool_release(ctx, acc, cap);
    rt_pool_release(ctx, row, rcap);
    return y;
}

static rt_tensor *scan(rt_ctx *ctx, const rt_tensor *x, int dim, bool reverse)
{
    dim = rt_norm_dim(ctx, dim, x->ndim, "cumsum");
    RT_KERNEL(ctx, RT_K_REDUCE, reverse ? "cumsum_bwd" : "cumsum");
    int64_t outer, d, inner;
    rt_split_dims(x, dim, &outer, &d, &inner);
    size_t cap, acap;
    double *row = rt_scratch(ctx, inner, &cap), *acc = rt_scratch(ctx, inner, &acap);
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    for (int64_t o = 0; o < outer; o++) {
        memset(acc, 0, (size_t)inner * sizeof *acc);
        for (int64_t jj = 0; jj < d; jj++) {
            int64_t j = reverse ? d - 1 - jj : jj, off = (o * d + j) * inner;
            rt_load_f64(x, off, inner, row);
            for (int64_t i = 0; i < inner; i++)
                acc[i] += row[i];
            rt_store_f64(y, off, inner, acc);
        }
    }
    rt_pool_release(ctx, row, cap);
    rt_pool_release(ctx, acc, acap);
    return y;
}

rt_tensor *rt_cumsum(rt_ctx *ctx, const rt_tensor *x, int dim) { return scan(ctx, x, dim, false); }
rt_tensor *rt_cumsum_bwd(rt_ctx *ctx, const rt_tensor *dy, int dim) { return scan(ctx, dy, dim, true); }
