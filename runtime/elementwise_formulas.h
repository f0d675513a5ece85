/* The helper functions the elementwise X-lists of spmdrt.h (RT_UNARY_OPS,
 * RT_BINARY_OPS) name in their formulas and derivatives, written once for
 * every place that evaluates them: the CPU target's kernels (kernels.c, in
 * C), the CUDA target's (cuda/elementwise.cu: nvcc, or the host C++
 * compiler for the simulation) and host numbers (host.c). Header only: each
 * includer gets its own inline copies.
 *
 * RT_EW_QUAL qualifies every function (default `static inline`; the CUDA
 * target defines it as RT_DEV_INLINE, `__host__ __device__`). C gets a float
 * and a double version of each helper (suffix f, d) and a macro of the
 * helper's own name that picks one by the type of x (_Generic), with
 * <tgmath.h> so that float computes in float (expf, erff, tanhf) as the
 * CUDA target's overloads do; C++ gets overloads of the helper's name.
 * rt_pow_db_ (the exponent's derivative of pow) is double only: binary ops
 * compute in double on every target.
 *
 * runtime/vmath_isa.h's vector kernels follow these formulas operation by
 * operation. */
#ifndef RT_ELEMENTWISE_FORMULAS_H
#define RT_ELEMENTWISE_FORMULAS_H

#include <math.h>
#ifndef __cplusplus
#include <tgmath.h>
#endif

#include "spmdrt.h"

#ifndef RT_EW_QUAL
#define RT_EW_QUAL static inline
#endif

#define RT_GELU_C 0.7978845608028654 /* sqrt(2/pi), gelu_tanh's constant */

/* the helpers in type T, named NAME##S (S empty in C++: overloads) */
#define RT_EW_HELPERS(T, S)                                                                \
    /* 1 / (1 + exp(-x)), with exp of a non-positive number only */                        \
    RT_EW_QUAL T rt_sigmoid_##S(T x)                                                       \
    {                                                                                      \
        return x >= 0 ? (T)1 / ((T)1 + exp(-x)) : exp(x) / ((T)1 + exp(x));               \
    }                                                                                      \
    RT_EW_QUAL T rt_gelu_##S(T x) { return (T)0.5 * x * ((T)1 + erf(x * (T)M_SQRT1_2)); }  \
    RT_EW_QUAL T rt_gelu_d_##S(T x)                                                        \
    {                                                                                      \
        return (T)0.5 * ((T)1 + erf(x * (T)M_SQRT1_2)) +                                   \
               x * exp((T)-0.5 * x * x) * (T)(0.5 * M_2_SQRTPI * M_SQRT1_2);               \
    }                                                                                      \
    RT_EW_QUAL T rt_gelu_tanh_##S(T x)                                                     \
    {                                                                                      \
        return (T)0.5 * x * ((T)1 + tanh((T)RT_GELU_C * (x + (T)0.044715 * x * x * x)));   \
    }                                                                                      \
    RT_EW_QUAL T rt_gelu_tanh_d_##S(T x)                                                   \
    {                                                                                      \
        T t = tanh((T)RT_GELU_C * (x + (T)0.044715 * x * x * x));                          \
        return (T)0.5 * ((T)1 + t) +                                                       \
               (T)0.5 * x * ((T)1 - t * t) * (T)RT_GELU_C * ((T)1 + (T)(3 * 0.044715) * x * x); \
    }                                                                                      \
    RT_EW_QUAL T rt_silu_d_##S(T x)                                                        \
    {                                                                                      \
        T s = rt_sigmoid_##S(x);                                                           \
        return s * ((T)1 + x * ((T)1 - s));                                                \
    }

#ifdef __cplusplus
RT_EW_HELPERS(float, )
RT_EW_HELPERS(double, )
#else
RT_EW_HELPERS(float, f)
RT_EW_HELPERS(double, d)
#define RT_EW_PICK_(name, x) _Generic((x), float: name##f, default: name##d)(x)
#define rt_sigmoid_(x) RT_EW_PICK_(rt_sigmoid_, x)
#define rt_gelu_(x) RT_EW_PICK_(rt_gelu_, x)
#define rt_gelu_d_(x) RT_EW_PICK_(rt_gelu_d_, x)
#define rt_gelu_tanh_(x) RT_EW_PICK_(rt_gelu_tanh_, x)
#define rt_gelu_tanh_d_(x) RT_EW_PICK_(rt_gelu_tanh_d_, x)
#define rt_silu_d_(x) RT_EW_PICK_(rt_silu_d_, x)
#endif

/* d pow(a, b) / db; 0 where log(a) is not real */
RT_EW_QUAL double rt_pow_db_(double a, double b) { return a > 0 ? pow(a, b) * log(a) : 0.0; }

/* `case RT_NAME: return FORMULA;` for each row of an X-list: the body of a
 * switch (op) in a function of x (with y = f(x) for the derivative) or of
 * a and b, whose return type rounds the result (host.c, cuda/elementwise.cu) */
#define RT_UNARY_F_CASE(NAME, name, vec, f, d) \
    case RT_##NAME: return (f);
#define RT_UNARY_D_CASE(NAME, name, vec, f, d) \
    case RT_##NAME: return (d);
#define RT_BINARY_F_CASE(NAME, name, kind, f, da, db) \
    case RT_##NAME: return (f);

/* The unary ops that also take i32 (exact in integers), and their formulas:
 * the X-list's, for an int32_t x */
RT_EW_QUAL bool rt_unary_has_i32(rt_unary_op op)
{
    return op == RT_NEG || op == RT_ABS || op == RT_SQUARE || op == RT_RELU;
}
RT_EW_QUAL int32_t rt_unary_i32(rt_unary_op op, int32_t x)
{
    return op == RT_NEG ? -x : op == RT_ABS ? (x < 0 ? -x : x) : op == RT_SQUARE ? x * x : (x > 0 ? x : 0);
}

#endif /* RT_ELEMENTWISE_FORMULAS_H */
