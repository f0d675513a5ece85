/* Host numbers: the elementwise built-ins applied to a host number, in
 * double (exp(0.5), pow(0.9, step), cos(pi * t) for schedules), and the
 * wall clock. */
#include <math.h>

#include "rt_internal.h"

double rt_host_unary(rt_unary_op op, double x)
{
    switch (op) {
    case RT_EXP: return exp(x);
    case RT_LOG: return log(x);
    case RT_SQRT: return sqrt(x);
    case RT_RSQRT: return 1.0 / sqrt(x);
    case RT_TANH: return tanh(x);
    case RT_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case RT_RELU: return x > 0 ? x : 0.0;
    case RT_GELU: return 0.5 * x * (1.0 + erf(x * M_SQRT1_2));
    case RT_GELU_TANH: return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    case RT_SILU: return x / (1.0 + exp(-x));
    case RT_ABS: return fabs(x);
    case RT_SQUARE: return x * x;
    case RT_SIN: return sin(x);
    case RT_COS: return cos(x);
    case RT_NEG: return -x;
    default: return NAN;
    }
}

double rt_host_binary(rt_binary_op op, double a, double b)
{
    switch (op) {
    case RT_POW: return pow(a, b);
    case RT_MAX: return a >= b ? a : b;
    case RT_MIN: return a <= b ? a : b;
    case RT_ADD: return a + b;
    case RT_SUB: return a - b;
    case RT_MUL: return a * b;
    case RT_DIV: return a / b;
    default: return NAN;
    }
}

/* Rank 0's clock, so that every rank has the same number (a value that may
 * decide control flow must be rank-uniform). */
double rt_wall_time(rt_ctx *ctx)
{
    double t = rt_now() - ctx->t_start;
    if (ctx->mpi)
        RT_CALL_MPI(ctx, MPI_Bcast(&t, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD));
    return t;
}
