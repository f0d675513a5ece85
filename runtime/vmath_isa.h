/* The vector kernels of one instruction set, included by vmath_avx512.c and
 * vmath_avx2.c after they define, for S = F (float) and D (double):
 *   V##S (vector type), W##S (lanes), LD##S(p), ST##S(p, v), LDM##S(p, n) /
 *   STM##S(p, v, n) (the first n < W lanes, others read as 0), SET##S(c),
 *   ADD##S SUB##S MUL##S DIV##S, NEG##S(x) (sign flip), GE0##S(x, a, b)
 *   (per lane x >= 0 ? a : b), and the SLEEF functions ERFD (f64 only) EXP##S
 *   LOG##S TANH##S SIN##S COS##S; and VM_TABLE, the table's name.
 * Each op's formula and derivative follow the scalar ones (spmdrt.h's
 * RT_UNARY_OPS, elementwise_formulas.h's helpers) operation by operation, in
 * the tensor's own precision (vmath.h); the X-list's vec column says which
 * ops have vector kernels (VEC; the others, SCALAR, run the scalar loop).
 * For the random numbers also: VI (WD lanes of 64 bits), SETI(c), ADDI,
 * ANDI, XORI, SRLI(v, n), MULU32(a, b) (the 64-bit products of the low 32
 * bits), IOTAI (0, 1, ...), TOD(v) (lanes under 2^31 to double), SQRTD. */
#include <math.h>

#include "elementwise_formulas.h" /* RT_GELU_C */
#include "vmath.h"


/* y = f(x) and *d = f'(x) for each op; unused results cost nothing (the
 * SLEEF functions are declared const, so dead calls are dropped) */
#define DEF_OPS(S, V)                                                                     \
    static inline V exp_fd_##S(V x, V *d)                                                 \
    {                                                                                     \
        V y = EXP##S(x);                                                                  \
        *d = y;                                                                           \
        return y;                                                                         \
    }                                                                                     \
    static inline V log_fd_##S(V x, V *d)                                                 \
    {                                                                                     \
        *d = DIV##S(SET##S(1.0), x);                                                      \
        return LOG##S(x);                                                                 \
    }                                                                                     \
    static inline V tanh_fd_##S(V x, V *d)                                                \
    {                                                                                     \
        V y = TANH##S(x);                                                                 \
        *d = SUB##S(SET##S(1.0), MUL##S(y, y));                                           \
        return y;                                                                         \
    }                                                                                     \
    /* x >= 0 ? 1 / (1 + exp(-x)) : exp(x) / (1 + exp(x)) */                             \
    static inline V sigmoid_##S(V x)                                                      \
    {                                                                                     \
        V e = EXP##S(GE0##S(x, NEG##S(x), x));                                            \
        V one = SET##S(1.0), den = ADD##S(one, e);                                        \
        return GE0##S(x, DIV##S(one, den), DIV##S(e, den));                               \
    }                                                                                     \
    static inline V sigmoid_fd_##S(V x, V *d)                                             \
    {                                                                                     \
        V y = sigmoid_##S(x);                                                             \
        *d = MUL##S(y, SUB##S(SET##S(1.0), y));                                           \
        return y;                                                                         \
    }                                                                                     \
    static inline V gelu_tanh_fd_##S(V x, V *d)                                           \
    {                                                                                     \
        V one = SET##S(1.0), half = SET##S(0.5), c = SET##S(RT_GELU_C);                     \
        V cube = MUL##S(MUL##S(MUL##S(SET##S(0.044715), x), x), x);                       \
        V t = TANH##S(MUL##S(c, ADD##S(x, cube)));                                        \
        V hx = MUL##S(half, x);                                                           \
        V q = ADD##S(one, MUL##S(MUL##S(SET##S(3 * 0.044715), x), x));                    \
        *d = ADD##S(MUL##S(half, ADD##S(one, t)),                                         \
                    MUL##S(MUL##S(MUL##S(hx, SUB##S(one, MUL##S(t, t))), c), q));         \
        return MUL##S(hx, ADD##S(one, t));                                                \
    }                                                                                     \
    static inline V silu_fd_##S(V x, V *d)                                                \
    {                                                                                     \
        V one = SET##S(1.0), s = sigmoid_##S(x);                                          \
        *d = MUL##S(s, ADD##S(one, MUL##S(x, SUB##S(one, s))));                           \
        return MUL##S(x, s);                                                              \
    }                                                                                     \
    static inline V sin_fd_##S(V x, V *d)                                                 \
    {                                                                                     \
        *d = COS##S(x);                                                                   \
        return SIN##S(x);                                                                 \
    }                                                                                     \
    static inline V cos_fd_##S(V x, V *d)                                                 \
    {                                                                                     \
        *d = NEG##S(SIN##S(x));                                                           \
        return COS##S(x);                                                                 \
    }

DEF_OPS(F, VF)
DEF_OPS(D, VD)

/* GELU, 0.5 x (1 + erf(x / sqrt 2)), and its derivative
 * 0.5 (1 + erf(x / sqrt 2)) + x exp(-x^2 / 2) / sqrt(2 pi).
 * f64: SLEEF's erf and exp.  f32: erf as PyTorch computes it for float on
 * CPU (ATen's vectorised erf: Abramowitz and Stegun 7.1.26, |error| <=
 * 1.5e-7), sign(z) (1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) exp(-z^2))
 * with t = 1 / (1 + p |z|), and the same exp(-z^2) = exp(-x^2 / 2) in the
 * derivative: two divisions, a handful of products and one SLEEF exp per
 * vector instead of SLEEF's erf (double-float arithmetic, about four times
 * the work).  Separate multiplications and additions (no FMA), so AVX-512
 * and AVX2 give the same bits. */
static inline VF gelu_fd_F(VF x, VF *d)
{
    VF one = SETF(1.0), half = SETF(0.5);
    VF z = MULF(x, SETF(M_SQRT1_2));
    VF az = GE0F(z, z, NEGF(z));
    VF e = EXPF(NEGF(MULF(z, z)));
    VF t = DIVF(one, ADDF(one, MULF(SETF(0.3275911), az)));
    VF q = ADDF(MULF(SETF(1.061405429), t), SETF(-1.453152027));
    q = ADDF(MULF(q, t), SETF(1.421413741));
    q = ADDF(MULF(q, t), SETF(-0.284496736));
    q = ADDF(MULF(q, t), SETF(0.254829592));
    VF erf_abs = SUBF(one, MULF(MULF(q, t), e));
    VF p = ADDF(one, GE0F(z, erf_abs, NEGF(erf_abs)));
    *d = ADDF(MULF(half, p), MULF(MULF(x, e), SETF(0.5 * M_2_SQRTPI * M_SQRT1_2)));
    return MULF(MULF(half, x), p);
}

static inline VD gelu_fd_D(VD x, VD *d)
{
    VD one = SETD(1.0), half = SETD(0.5);
    VD p = ADDD(one, ERFD(MULD(x, SETD(M_SQRT1_2))));
    VD e = EXPD(MULD(MULD(SETD(-0.5), x), x));
    *d = ADDD(MULD(half, p), MULD(MULD(x, e), SETD(0.5 * M_2_SQRTPI * M_SQRT1_2)));
    return MULD(MULD(half, x), p);
}

/* Array kernels of an op: whole vectors, then the rest as one masked vector
 * (the same function, so the same value for an element wherever it is). */
#define DEF_KERNELS(op, S, T)                                                             \
    static void op##_un_##S(const void *px, void *py, int64_t n)                          \
    {                                                                                     \
        const T *x = px;                                                                  \
        T *y = py;                                                                        \
        V##S d;                                                                           \
        int64_t i = 0;                                                                    \
        for (; i + W##S <= n; i += W##S)                                                  \
            ST##S(y + i, op##_fd_##S(LD##S(x + i), &d));                                  \
        if (i < n)                                                                        \
            STM##S(y + i, op##_fd_##S(LDM##S(x + i, n - i), &d), n - i);                  \
    }                                                                                     \
    static void op##_unb_##S(const void *px, const void *pdy, void *pdx, int64_t n)       \
    {                                                                                     \
        const T *x = px, *dy = pdy;                                                       \
        T *dx = pdx;                                                                      \
        V##S d;                                                                           \
        int64_t i = 0;                                                                    \
        for (; i + W##S <= n; i += W##S) {                                                \
            (void)op##_fd_##S(LD##S(x + i), &d);                                          \
            ST##S(dx + i, MUL##S(LD##S(dy + i), d));                                      \
        }                                                                                 \
        if (i < n) {                                                                      \
            (void)op##_fd_##S(LDM##S(x + i, n - i), &d);                                  \
            STM##S(dx + i, MUL##S(LDM##S(dy + i, n - i), d), n - i);                      \
        }                                                                                 \
    }                                                                                     \
    static void op##_ung_##S(const void *px, void *py, void *pg, int64_t n)               \
    {                                                                                     \
        const T *x = px;                                                                  \
        T *y = py, *g = pg;                                                               \
        V##S d;                                                                           \
        int64_t i = 0;                                                                    \
        for (; i + W##S <= n; i += W##S) {                                                \
            ST##S(y + i, op##_fd_##S(LD##S(x + i), &d));                                  \
            ST##S(g + i, d);                                                              \
        }                                                                                 \
        if (i < n) {                                                                      \
            STM##S(y + i, op##_fd_##S(LDM##S(x + i, n - i), &d), n - i);                  \
            STM##S(g + i, d, n - i);                                                      \
        }                                                                                 \
    }

/* the ops whose vec column in RT_UNARY_OPS is VEC: each has its name##_fd_S
 * above (a row marked VEC without one does not compile) */
#define VM_IF_VEC(...) __VA_ARGS__
#define VM_IF_SCALAR(...)
#define DEF_BOTH(NAME, op, vec, f, d) VM_IF_##vec(DEF_KERNELS(op, F, float) DEF_KERNELS(op, D, double))
RT_UNARY_OPS(DEF_BOTH)

static void exp_f64_(const double *x, double *y, int64_t n)
{
    exp_un_D(x, y, n);
}

/* ---- random.c's samples: the same integer steps as philox.h's rt_philox_ and
 * rt_philox_unit_, lane by lane; the floating point of unit() and of the
 * uniform is exact, Box-Muller's log and cos are SLEEF's (vmath.h) */

static inline void philox_v(uint64_t seed, VI g, uint32_t stream, VI r[4])
{
    const VI lo32 = SETI(0xffffffffu), m0 = SETI(0xD2511F53u), m1 = SETI(0xCD9E8D57u);
    VI c0 = ANDI(g, lo32), c1 = SRLI(g, 32), c2 = SETI(stream), c3 = SETI(0);
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int i = 0; i < 10; i++) {
        VI p0 = MULU32(m0, c0), p1 = MULU32(m1, c2);
        VI n0 = XORI(XORI(SRLI(p1, 32), c1), SETI(k0));
        VI n2 = XORI(XORI(SRLI(p0, 32), c3), SETI(k1));
        c1 = ANDI(p1, lo32);
        c3 = ANDI(p0, lo32);
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    r[0] = c0;
    r[1] = c1;
    r[2] = c2;
    r[3] = c3;
}

/* 53 random bits as a double in [0, 1), as philox.h's rt_philox_unit_ */
static inline VD unit_v(VI a, VI b)
{
    return MULD(ADDD(MULD(TOD(SRLI(a, 5)), SETD(67108864.0)), TOD(SRLI(b, 6))),
                SETD(1.0 / 9007199254740992.0));
}

#define DEF_SAMPLES(name, expr)                                                           \
    static void name##_run(uint64_t seed, uint32_t stream, uint64_t g0, int64_t n, double p0, \
                           double p1, double *out)                                        \
    {                                                                                     \
        (void)p1;                                                                         \
        for (int64_t i = 0; i < n; i += WD) {                                             \
            VI r[4];                                                                      \
            philox_v(seed, ADDI(SETI(g0 + (uint64_t)i), IOTAI), stream, r);               \
            VD v = (expr);                                                                \
            if (i + WD <= n)                                                              \
                STD(out + i, v);                                                          \
            else                                                                          \
                STMD(out + i, v, n - i);                                                  \
        }                                                                                 \
    }

/* std * sqrt(-2 log(1 - u)) * cos(2 pi u') */
DEF_SAMPLES(normal, MULD(MULD(SETD(p0), SQRTD(MULD(SETD(-2.0), LOGD(SUBD(SETD(1.0), unit_v(r[0], r[1])))))),
                         COSD(MULD(SETD(6.283185307179586), unit_v(r[2], r[3])))))
/* lo + (hi - lo) u */
DEF_SAMPLES(uniform, ADDD(SETD(p0), MULD(SETD(p1 - p0), unit_v(r[0], r[1]))))

#define UN_F(OP, op, vec, f, d) VM_IF_##vec([RT_##OP] = op##_un_F, )
#define UN_D(OP, op, vec, f, d) VM_IF_##vec([RT_##OP] = op##_un_D, )
#define UNB_F(OP, op, vec, f, d) VM_IF_##vec([RT_##OP] = op##_unb_F, )
#define UNB_D(OP, op, vec, f, d) VM_IF_##vec([RT_##OP] = op##_unb_D, )
#define UNG_F(OP, op, vec, f, d) VM_IF_##vec([RT_##OP] = op##_ung_F, )
#define UNG_D(OP, op, vec, f, d) VM_IF_##vec([RT_##OP] = op##_ung_D, )

const rt_vm_table VM_TABLE = {
    .name = VM_NAME,
    .un = {{RT_UNARY_OPS(UN_F)}, {RT_UNARY_OPS(UN_D)}},
    .unb = {{RT_UNARY_OPS(UNB_F)}, {RT_UNARY_OPS(UNB_D)}},
    .ung = {{RT_UNARY_OPS(UNG_F)}, {RT_UNARY_OPS(UNG_D)}},
    .exp_f64 = exp_f64_,
    .normal = normal_run,
    .uniform = uniform_run,
};
