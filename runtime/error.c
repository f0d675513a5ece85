/* Errors: one message on stderr naming the rank and, in a compiled program,
 * the .spmd line being run (rt_at) and the calls that led there; then every
 * rank stops.
 *
 * A failure every rank reached together (rt_fail_all: a shape, a file, a
 * checkpoint they agreed on) ends with MPI_Finalize and exit status 1 on
 * each rank. A failure of one rank (rt_fail) cannot wait for the others,
 * which may be blocked in a collective: under Open MPI's mpirun it exits
 * with status 1, and mpirun stops the other ranks; elsewhere it calls
 * MPI_Abort. (Open MPI 4's MPI_Abort garbles its own message now and then:
 * "ORTE_ERROR_LOG: Data unpack would read past end of buffer".) */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

static bool mpi_live(rt_ctx *ctx)
{
    int inited = 0, finalized = 0;
    if (ctx && ctx->mpi) {
        MPI_Initialized(&inited);
        MPI_Finalized(&finalized);
    }
    return inited && !finalized;
}

/* Under Open MPI's mpirun a rank that exits with status 1 ends the job:
 * mpirun kills the others ("mpirun detected that one or more processes
 * exited with non-zero status"), unless told otherwise. */
static bool launcher_stops_job(void)
{
    const char *keep = getenv("OMPI_MCA_orte_abort_on_non_zero_status");
    return getenv("OMPI_COMM_WORLD_SIZE") && !(keep && strcmp(keep, "0") == 0);
}

__attribute__((noreturn)) static void stop(rt_ctx *ctx)
{
    if (mpi_live(ctx) && ctx->world > 1 && !launcher_stops_job())
        MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

void rt_at(rt_ctx *ctx, const char *loc)
{
    ctx->at_loc = loc;
}

void rt_call_begin(rt_ctx *ctx, const char *loc)
{
    ctx->at_loc = loc;
    if (ctx->at_depth >= 0 && ctx->at_depth < RT_AT_CALLS)
        ctx->at_calls[ctx->at_depth] = loc;
    ctx->at_depth++;
}

void rt_call_end(rt_ctx *ctx)
{
    if (ctx->at_depth > 0)
        ctx->at_depth--;
    if (ctx->at_depth < RT_AT_CALLS)
        ctx->at_loc = ctx->at_calls[ctx->at_depth];
}

/* msg with the line being run before it and the calls after it:
 * "nn.spmd:88: MSG (called from gpt.spmd:120)" */
static void located(const rt_ctx *ctx, char *out, size_t n, const char *msg)
{
    if (!ctx || !ctx->at_loc || strncmp(msg, ctx->at_loc, strlen(ctx->at_loc)) == 0) {
        snprintf(out, n, "%s", msg);
        return;
    }
    size_t k = (size_t)snprintf(out, n, "%s: %s", ctx->at_loc, msg);
    int depth = ctx->at_depth < RT_AT_CALLS ? ctx->at_depth : RT_AT_CALLS;
    const char *sep = " (called from ";
    for (int i = depth - 1; i >= 0 && k < n; i--) {
        if (!ctx->at_calls[i] || (i == depth - 1 && ctx->at_calls[i] == ctx->at_loc))
            continue; /* the call's own line: the error is in the call, not its callee */
        k += (size_t)snprintf(out + k, n - k, "%s%s", sep, ctx->at_calls[i]);
        sep = ", ";
    }
    if (k < n && strcmp(sep, ", ") == 0)
        snprintf(out + k, n - k, ")");
}

void rt_set_error_hook(rt_ctx *ctx, rt_error_hook hook, void *user)
{
    ctx->hook = hook;
    ctx->hook_user = user;
}

void rt_fail(rt_ctx *ctx, const char *fmt, ...)
{
    char raw[1024], msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof raw, fmt, ap);
    va_end(ap);
    located(ctx, msg, sizeof msg, raw);
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

void rt_fail_all(rt_ctx *ctx, const char *raw)
{
    char msg[1536];
    located(ctx, msg, sizeof msg, raw);
    if (ctx && ctx->hook)
        ctx->hook(ctx->hook_user, msg); /* may longjmp */
    fprintf(stderr, "spmd: error: [rank %d] %s\n", ctx ? ctx->rank : 0, msg);
    fflush(stderr);
    /* every rank is here: each has printed; all end together, without an
     * abort (with collectives in flight, which MPI_Finalize would wait
     * for, as a failure of one rank) */
    if (mpi_live(ctx)) {
        MPI_Barrier(MPI_COMM_WORLD);
        if (ctx->async)
            stop(ctx);
        MPI_Finalize();
    }
    exit(1);
}
