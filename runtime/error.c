/* Errors: one message on stderr naming the rank, then every rank stops.
 * Under MPI, MPI_Abort on the world brings the other ranks down too, so a
 * failure on one rank never leaves the others hanging in a collective. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

__attribute__((noreturn)) static void stop(rt_ctx *ctx)
{
    int inited = 0, finalized = 0;
    if (ctx && ctx->mpi) {
        MPI_Initialized(&inited);
        MPI_Finalized(&finalized);
    }
    if (inited && !finalized)
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void rt_at(rt_ctx *ctx, const char *loc)
{
    ctx->at_loc = loc;
}

void rt_set_error_hook(rt_ctx *ctx, rt_error_hook hook, void *user)
{
    ctx->hook = hook;
    ctx->hook_user = user;
}

void rt_fail(rt_ctx *ctx, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (ctx && ctx->hook)
        ctx->hook(ctx->hook_user, msg); /* may longjmp */
    fprintf(stderr, "spmd: error: [rank %d] %s\n", ctx ? ctx->rank : 0, msg);
    fflush(stderr);
    stop(ctx);
}

void rt_fail_mpi(rt_ctx *ctx, int code, const char *call, const char *file, int line)
{
    char text[MPI_MAX_ERROR_STRING + 1] = "unknown MPI error";
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error code %d", code);
    rt_fail(ctx, "%s failed: %s (%s:%d)", call, text, file, line);
}

void rt_call_check_(rt_ctx *ctx, int rc, const char *call, const char *file, int line)
{
    if (rc == 0)
        return;
    rt_fail(ctx, "%s failed: %s (%s:%d)", call, errno ? strerror(errno) : "error", file, line);
}

void rt_fail_all(rt_ctx *ctx, const char *msg)
{
    if (ctx && ctx->hook)
        ctx->hook(ctx->hook_user, msg); /* may longjmp */
    fprintf(stderr, "spmd: error: [rank %d] %s\n", ctx ? ctx->rank : 0, msg);
    fflush(stderr);
    /* every rank is here: let each print before the first abort stops them */
    if (ctx && ctx->mpi)
        MPI_Barrier(MPI_COMM_WORLD);
    stop(ctx);
}
