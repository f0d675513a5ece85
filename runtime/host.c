/* The elementwise ops' names, and the ops applied to a host number in double
 * (exp(0.5), pow(0.9, step), cos(pi * t) for schedules) from the X-lists of
 * spmdrt.h with elementwise_formulas.h's helpers, so that a host number gets
 * the bits of an f64 tensor's scalar kernel; and the wall clock. */
#include "rt_internal.h"

#include "elementwise_formulas.h"

#define NAME_U(NAME, name, vec, f, d) #name,
#define NAME_B(NAME, name, kind, f, da, db) #name,
#define NAME_UB(NAME, name, vec, f, d) #name "_bwd",
#define NAME_UG(NAME, name, vec, f, d) #name "_with_grad",
#define NAME_BB(NAME, name, kind, f, da, db) #name "_bwd",
static const char *const unary_names[] = {RT_UNARY_OPS(NAME_U)};
static const char *const binary_names[] = {RT_BINARY_OPS(NAME_B)};
static const char *const unary_bwd_names[] = {RT_UNARY_OPS(NAME_UB)};
static const char *const unary_grad_names[] = {RT_UNARY_OPS(NAME_UG)};
static const char *const binary_bwd_names[] = {RT_BINARY_OPS(NAME_BB)};
const char *rt_unary_name(rt_unary_op op) { return unary_names[op]; }
const char *rt_binary_name(rt_binary_op op) { return binary_names[op]; }
const char *rt_unary_bwd_name(rt_unary_op op) { return unary_bwd_names[op]; }
const char *rt_unary_grad_name(rt_unary_op op) { return unary_grad_names[op]; }
const char *rt_binary_bwd_name(rt_binary_op op) { return binary_bwd_names[op]; }

double rt_host_unary(rt_unary_op op, double x)
{
    switch (op) {
        RT_UNARY_OPS(RT_UNARY_F_CASE)
    case RT_NUNARY: break;
    }
    return NAN;
}

double rt_host_binary(rt_binary_op op, double a, double b)
{
    switch (op) {
        RT_BINARY_OPS(RT_BINARY_F_CASE)
    case RT_NBINARY: break;
    }
    return NAN;
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
