/* Local kernels: elementwise unary and binary ops (NumPy broadcasting),
 * their backwards, reductions over a dim or everything, and cumsum. The op
 * tables are the X-macros RT_UNARY_OPS / RT_BINARY_OPS of spmdrt.h: a formula
 * and its derivative are written once, side by side. Unary ops compute in
 * the tensor's own precision; binary ops in double, rounded to the dtype. */
#include <math.h>
#include <string.h>
#include <tgmath.h>

#include "rt_cpu.h"
#include "vmath.h"

/* ---- helpers named in the op tables
 * Each has a float and a double version; the tables' formulas pick one by
 * the type of x (f32 tensors compute in float, as PyTorch does: about twice
 * as fast for erf and exp, within float rounding). */

#define HELPERS(T, S, L)                                                                 \
    static inline T rt_sigmoid_##S(T x)                                                  \
    {                                                                                    \
        return x >= 0 ? (T)1 / ((T)1 + exp(-x)) : exp(x) / ((T)1 + exp(x));             \
    }                                                                                    \
    static inline T rt_gelu_##S(T x) { return (T)0.5 * x * ((T)1 + erf(x * (T)M_SQRT1_2)); } \
    static inline T rt_gelu_d_##S(T x)                                                   \
    {                                                                                    \
        return (T)0.5 * ((T)1 + erf(x * (T)M_SQRT1_2)) +                                 \
               x * exp((T)-0.5 * x * x) * (T)(0.5 * M_2_SQRTPI * M_SQRT1_2);             \
    }                                                                                    \
    static inline T rt_gelu_tanh_##S(T x)                                                \
    {                                                                                    \
        return (T)0.5 * x * ((T)1 + tanh((T)GELU_C * (x + (T)0.044715 * x * x * x)));   \
    }                                                                                    \
    static inline T rt_gelu_tanh_d_##S(T x)                                              \
    {                                                                                    \
        T t = tanh((T)GELU_C * (x + (T)0.044715 * x * x * x));                           \
        return (T)0.5 * ((T)1 + t) +                                                     \
               (T)0.5 * x * ((T)1 - t * t) * (T)GELU_C * ((T)1 + (T)(3 * 0.044715) * x * x); \
    }                                                                                    \
    static inline T rt_silu_d_##S(T x)                                                   \
    {                                                                                    \
        T s = rt_sigmoid_##S(x);                                                         \
        return s * ((T)1 + x * ((T)1 - s));                                              \
    }
#define GELU_C 0.7978845608028654 /* sqrt(2/pi) */
HELPERS(float, f, F)
HELPERS(double, d, D)
#define PICK(name, x) _Generic((x), float: name##f, default: name##d)(x)
#define rt_sigmoid_(x) PICK(rt_sigmoid_, x)
#define rt_gelu_(x) PICK(rt_gelu_, x)
#define rt_gelu_d_(x) PICK(rt_gelu_d_, x)
#define rt_gelu_tanh_(x) PICK(rt_gelu_tanh_, x)
#define rt_gelu_tanh_d_(x) PICK(rt_gelu_tanh_d_, x)
#define rt_silu_d_(x) PICK(rt_silu_d_, x)

static inline double rt_pow_db_(double a, double b)
{
    return a > 0 ? pow(a, b) * log(a) : 0.0;
}

/* ---- names */

#define NAME_U(NAME, name, f, d) #name,
#define NAME_B(NAME, name, f, da, db) #name,
#define NAME_UB(NAME, name, f, d) #name "_bwd",
#define NAME_UG(NAME, name, f, d) #name "_with_grad",
#define NAME_BB(NAME, name, f, da, db) #name "_bwd",
static const char *unary_names[] = {RT_UNARY_OPS(NAME_U)};
static const char *binary_names[] = {RT_BINARY_OPS(NAME_B)};
/* kernel names in --trace and --profile */
static const char *unary_bwd_names[] = {RT_UNARY_OPS(NAME_UB)};
static const char *unary_grad_names[] = {RT_UNARY_OPS(NAME_UG)};
static const char *binary_bwd_names[] = {RT_BINARY_OPS(NAME_BB)};
const char *rt_unary_name(rt_unary_op op) { return unary_names[op]; }
const char *rt_binary_name(rt_binary_op op) { return binary_names[op]; }

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
#define UNARY_GRAD_DEFS(NAME, name, f, d) \
    UNARY_GRAD_T(NAME, name, f, d, float, f32) UNARY_GRAD_T(NAME, name, f, d, double, f64)
RT_UNARY_OPS(UNARY_GRAD_DEFS)
typedef void (*unary_grad_fn)(const void *in, void *out, void *grad, int64_t n);
#define UNG_F32(NAME, name, f, d) ung_##name##_f32,
#define UNG_F64(NAME, name, f, d) ung_##name##_f64,
static const unary_grad_fn unary_grad_f32[] = {RT_UNARY_OPS(UNG_F32)};
static const unary_grad_fn unary_grad_f64[] = {RT_UNARY_OPS(UNG_F64)};

#define UNARY_DEFS(NAME, name, f, d) \
    UNARY_T(NAME, name, f, d, float, f32) UNARY_T(NAME, name, f, d, double, f64)
RT_UNARY_OPS(UNARY_DEFS)

#define UN_F32(NAME, name, f, d) un_##name##_f32,
#define UN_F64(NAME, name, f, d) un_##name##_f64,
#define UNB_F32(NAME, name, f, d) unb_##name##_f32,
#define UNB_F64(NAME, name, f, d) unb_##name##_f64,
static const unary_fn unary_f32[] = {RT_UNARY_OPS(UN_F32)};
static const unary_fn unary_f64[] = {RT_UNARY_OPS(UN_F64)};
static const unary_bwd_fn unary_bwd_f32[] = {RT_UNARY_OPS(UNB_F32)};
static const unary_bwd_fn unary_bwd_f64[] = {RT_UNARY_OPS(UNB_F64)};

rt_tensor *rt_unary(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NUNARY, "unary: bad op %d", (int)op);
    if (x->dtype == RT_BF16)
        return rt_bf16_unary(ctx, op, x);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, unary_names[op]);
    if (x->dtype == RT_I32 && (op == RT_NEG || op == RT_ABS || op == RT_SQUARE || op == RT_RELU)) {
        rt_tensor *y = rt_empty(ctx, RT_I32, x->ndim, x->shape);
        const int32_t *X = x->data;
        int32_t *Y = y->data;
        for (int64_t i = 0; i < x->numel; i++)
            Y[i] = op == RT_NEG ? -X[i] : op == RT_ABS ? (X[i] < 0 ? -X[i] : X[i])
                 : op == RT_SQUARE ? X[i] * X[i] : (X[i] > 0 ? X[i] : 0);
        return y;
    }
    rt_check_float(ctx, x, unary_names[op]);
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    rt_vm_map v = ctx->tgt->vm ? ctx->tgt->vm->un[x->dtype == RT_F64][op] : NULL;
    (v ? v : (x->dtype == RT_F32 ? unary_f32 : unary_f64)[op])(x->data, y->data, x->numel);
    return y;
}

rt_tensor *rt_unary_bwd(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, const rt_tensor *dy)
{
    RT_CHECK(ctx, op >= 0 && op < RT_NUNARY, "unary_bwd: bad op %d", (int)op);
    if (x->dtype == RT_BF16)
        return rt_bf16_unary_bwd(ctx, op, x, dy);
    rt_check_float(ctx, x, unary_names[op]);
    RT_CHECK(ctx, rt_same_shape(x, dy) && x->dtype == dy->dtype,
             "%s backward: gradient shape or dtype differs from the input", unary_names[op]);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, unary_bwd_names[op]);
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
    rt_check_float(ctx, x, unary_names[op]);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, unary_grad_names[op]);
    *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    *dydx = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    rt_vm_grad v = ctx->tgt->vm ? ctx->tgt->vm->ung[x->dtype == RT_F64][op] : NULL;
    (v ? v : (x->dtype == RT_F32 ? unary_grad_f32 : unary_grad_f64)[op])(
        x->data, (*y)->data, (*dydx)->data, x->numel);
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
    rt_bshape s = {0};
    rt_broadcast_add(ctx, &s, a, what);
    rt_broadcast_add(ctx, &s, b, what);
    bcast bc = {.ndim = s.ndim};
    memcpy(bc.shape, s.shape, sizeof bc.shape);
    rt_broadcast_strides(a, bc.ndim, bc.shape, bc.sa);
    rt_broadcast_strides(b, bc.ndim, bc.shape, bc.sb);
    return bc;
}

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
#define BINARY_DEFS(NAME, name, f, da, db)                                         \
    BINARY_T(NAME, name, f, da, db, float, f32)                                    \
    BINARY_T(NAME, name, f, da, db, double, f64)                                   \
    BINARY_T(NAME, name, f, da, db, int32_t, i32)
RT_BINARY_OPS(BINARY_DEFS)

#define BIN_F32(NAME, name, f, da, db) bin_##name##_f32,
#define BIN_F64(NAME, name, f, da, db) bin_##name##_f64,
#define BIN_I32(NAME, name, f, da, db) bin_##name##_i32,
static const binary_fn binary_tab[3][RT_NBINARY] = {
    [RT_F32] = {RT_BINARY_OPS(BIN_F32)},
    [RT_F64] = {RT_BINARY_OPS(BIN_F64)},
    [RT_I32] = {RT_BINARY_OPS(BIN_I32)},
};

static void run_binary(binary_fn fn, const bcast *bc, size_t esz, const void *a, const void *b,
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
    RT_CHECK(ctx, op >= 0 && op < RT_NBINARY, "binary: bad op %d", (int)op);
    if (a->dtype == RT_BF16 || b->dtype == RT_BF16)
        return rt_bf16_binary(ctx, op, a, b);
    RT_CHECK(ctx, a->dtype == b->dtype, "%s: dtypes differ (%s and %s); use astype",
             binary_names[op], rt_dtype_name(a->dtype), rt_dtype_name(b->dtype));
    RT_CHECK(ctx, !(a->dtype == RT_I32 && (op == RT_DIV || op == RT_POW)),
             "%s: needs a float dtype (f32, f64, bf16), got i32", binary_names[op]);
    bcast bc = broadcast(ctx, a, b, binary_names[op]);
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, binary_names[op]);
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

/* ---- binary backward: full-size f64 gradients, then summed to each shape */

#define GRAD_CASE(NAME, name, f, da_, db_)                       \
    case RT_##NAME:                                              \
        for (int64_t i = 0; i < n; i++) {                        \
            double a = A[i], b = B[i];                           \
            (void)a; (void)b;                                    \
            GA[i] = DY[i] * (da_);                               \
            GB[i] = DY[i] * (db_);                               \
        }                                                        \
        break;

static void binary_grads(rt_binary_op op, const double *A, const double *B, const double *DY,
                         double *GA, double *GB, int64_t n)
{
    switch (op) {
        RT_BINARY_OPS(GRAD_CASE)
    case RT_NBINARY: break;
    }
}

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

/* The common case of a backward without broadcasting: +, -, * of tensors of
 * one shape need no f64 copies and no reduction. */
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
    if (a->dtype == RT_BF16) {
        rt_bf16_binary_bwd(ctx, op, a, b, dy, da, db);
        return;
    }
    RT_KERNEL(ctx, RT_K_ELEMENTWISE, binary_bwd_names[op]);
    if (binary_bwd_same_shape(ctx, op, a, b, dy, da, db))
        return;
    if ((op == RT_ADD || op == RT_SUB) && a->dtype == b->dtype && a->dtype == dy->dtype) {
        /* a bias or a position added to every row: each gradient is dy
         * summed to the operand's shape (in f64, rounded once, as below),
         * with no full-size f64 copies */
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
        /* x * s for a scalar s whose gradient nobody wants (a host number):
         * dy * s; a product of two floats rounds the same in f32 as in f64 */
        if (da)
            *da = rt_binary(ctx, RT_MUL, dy, b);
        if (db)
            *db = rt_binary(ctx, RT_MUL, dy, a);
        return;
    }
    bcast bc = broadcast(ctx, a, b, binary_names[op]);
    RT_CHECK(ctx, dy->ndim == bc.ndim && rt_numel_of(bc.ndim, bc.shape) == dy->numel,
             "%s backward: gradient shape differs from the result", binary_names[op]);
    rt_tensor *A = as_f64_full(ctx, a, &bc), *B = as_f64_full(ctx, b, &bc);
    rt_tensor *DY = rt_astype(ctx, dy, RT_F64);
    rt_tensor *GA = rt_empty(ctx, RT_F64, bc.ndim, bc.shape);
    rt_tensor *GB = rt_empty(ctx, RT_F64, bc.ndim, bc.shape);
    binary_grads(op, A->data, B->data, DY->data, GA->data, GB->data, GA->numel);
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
