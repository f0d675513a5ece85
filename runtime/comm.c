/* The MPI plumbing both targets' collectives share: datatypes and
 * reduction ops (bf16 through user-defined ops), waiting by spinning or by
 * testing and sleeping, the all-reduce every reduction goes through.
 *
 * bf16 moves as MPI_UINT16_T (half the bytes of f32). MPI has no bf16
 * arithmetic, so sums, maxima and minima use user-defined MPI_Ops that
 * combine two bf16 values in f32 and round the partial result to bf16, as
 * PyTorch's bf16 all_reduce does: `dtype=f32` on a collective sums in f32 on
 * the wire instead. The ops are declared commutative, so OpenMPI picks the
 * same algorithm (and so the same reduction order, fixed for a given group
 * size and message size) as for MPI_SUM on f32, and every rank receives the
 * same result.
 * Also the local casts (convert, reinterpret), written with the target's
 * kernels, and the barrier. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt_internal.h"

MPI_Datatype rt_mpi_type(rt_dtype dt)
{
    switch (dt) {
    case RT_F32: return MPI_FLOAT;
    case RT_F64: return MPI_DOUBLE;
    case RT_I32: return MPI_INT32_T;
    case RT_BF16: return MPI_UINT16_T; /* moved as bits; reduced by rt_bf16_mpi_op */
    }
    return MPI_DATATYPE_NULL;
}

int rt_mpi_count(rt_ctx *ctx, int64_t n)
{
    RT_CHECK(ctx, n <= INT_MAX, "collective of %lld elements exceeds MPI's int count",
             (long long)n);
    return (int)n;
}

MPI_Op rt_mpi_op(rt_ctx *ctx, rt_reduce_op op, rt_dtype dt)
{
    if (dt == RT_BF16)
        return rt_bf16_mpi_op(ctx, op);
    switch (op) {
    case RT_RED_SUM:
    case RT_RED_AVG: return MPI_SUM;
    case RT_RED_MAX: return MPI_MAX;
    case RT_RED_MIN: return MPI_MIN;
    }
    return MPI_OP_NULL;
}

/* ---- waiting: spin (MPI's blocking calls) or test and sleep */

void rt_wait_setup(rt_ctx *ctx)
{
    const char *w = getenv("SPMD_WAIT");
    if (w && strcmp(w, "sleep") == 0) {
        ctx->wait_sleep = true;
    } else if (w && strcmp(w, "spin") == 0) {
        ctx->wait_sleep = false;
    } else { /* more ranks on this node than cores: a spinning rank would take
              * the core of one that is still computing.  The launcher says
              * how many ranks share the node (OpenMPI, MPICH); without it,
              * the world (no collective here: MPI_Comm_split_type hangs in
              * some multi-host TCP set-ups) */
        const char *n = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
        if (!n)
            n = getenv("MPI_LOCALNRANKS");
        long local = n ? strtol(n, NULL, 10) : ctx->world;
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        ctx->wait_sleep = cpus > 0 && local > cpus;
    }
}

int rt_mpi_wait(rt_ctx *ctx, MPI_Request *req)
{
    if (!ctx->wait_sleep)
        return MPI_Wait(req, MPI_STATUS_IGNORE);
    for (int i = 0;; i++) {
        int flag = 0, rc = MPI_Test(req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || flag)
            return rc;
        if (i >= 8) { /* not a quick one: give the core away for a while */
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

int rt_mpi_waitall(rt_ctx *ctx, int n, MPI_Request *reqs)
{
    if (!ctx->wait_sleep)
        return MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    for (int i = 0;; i++) {
        int flag = 0, rc = MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS || flag)
            return rc;
        if (i >= 8) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
}

/* The collectives the runtime issues: blocking, or started and waited for
 * with rt_mpi_wait (the same operation and result either way); an
 * all-reduce from ctx->ring_min bytes goes round the runtime's ring
 * (ring.c) instead of MPI's. in and out are host memory (the CUDA target
 * stages through host buffers). */
int rt_coll_allreduce(rt_ctx *ctx, const void *in, void *out, int n, MPI_Datatype t, MPI_Op op, rt_group *g)
{
    MPI_Comm c = g->comm;
    int es = 0;
    RT_CALL_MPI(ctx, MPI_Type_size(t, &es));
    if (rt_ring_applies(ctx, g, (size_t)n * (size_t)es)) {
        rt_ring_allreduce(ctx, g, in, out, n, t, op);
        return MPI_SUCCESS;
    }
    if (!ctx->wait_sleep)
        return MPI_Allreduce(in, out, n, t, op, c);
    MPI_Request r;
    int rc = MPI_Iallreduce(in, out, n, t, op, c, &r);
    return rc != MPI_SUCCESS ? rc : rt_mpi_wait(ctx, &r);
}

/* ---- MPI reductions: inout[i] = in[i] op inout[i], in f32, rounded */

#define BF16_MPI_OP(name, expr)                                                       \
    static void bf16_mpi_##name(void *in, void *inout, int *len, MPI_Datatype *dt)   \
    {                                                                                 \
        (void)dt;                                                                     \
        const uint16_t *restrict x = in;                                              \
        uint16_t *restrict y = inout;                                                 \
        for (int i = 0; i < *len; i++) {                                              \
            float a = rt_bf16_to_f32(x[i]), b = rt_bf16_to_f32(y[i]);                 \
            y[i] = rt_f32_to_bf16(expr);                                              \
        }                                                                             \
    }
BF16_MPI_OP(sum, a + b)
BF16_MPI_OP(max, (a > b || isnan(a) ? a : b))
BF16_MPI_OP(min, (a < b || isnan(a) ? a : b))

MPI_Op rt_bf16_mpi_op(rt_ctx *ctx, rt_reduce_op op)
{
    if (!ctx->bf16_ops_made) {
        RT_CALL_MPI(ctx, MPI_Op_create(bf16_mpi_sum, 1, &ctx->bf16_ops[0]));
        RT_CALL_MPI(ctx, MPI_Op_create(bf16_mpi_max, 1, &ctx->bf16_ops[1]));
        RT_CALL_MPI(ctx, MPI_Op_create(bf16_mpi_min, 1, &ctx->bf16_ops[2]));
        ctx->bf16_ops_made = true;
    }
    switch (op) {
    case RT_RED_SUM:
    case RT_RED_AVG: return ctx->bf16_ops[0];
    case RT_RED_MAX: return ctx->bf16_ops[1];
    case RT_RED_MIN: return ctx->bf16_ops[2];
    }
    return MPI_OP_NULL;
}

void rt_bf16_mpi_free(rt_ctx *ctx)
{
    if (!ctx->bf16_ops_made)
        return;
    for (int i = 0; i < 3; i++)
        RT_CALL_MPI(ctx, MPI_Op_free(&ctx->bf16_ops[i]));
    ctx->bf16_ops_made = false;
}

/* The stacked V forms move whole per-rank values, one shape on every rank:
 * with uneven shards (SPEC 4) a block of a split dim differs between ranks,
 * which MPI would report as a truncation, or not at all. One all-reduce of
 * the element count's range over the group. */
void rt_coll_check_same(rt_ctx *ctx, rt_group *g, const rt_tensor *x, const char *what)
{
    if (g->size == 1)
        return;
    int64_t mine[2] = {x->numel, -x->numel}, all[2];
    RT_CALL_MPI(ctx, MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_MAX, g->comm));
    RT_CHECK(ctx, all[0] == -all[1],
             "%s: the V (stacked) form needs one shape on every rank, but the ranks' values hold "
             "from %lld to %lld elements (uneven shards, SPEC 4: the blocks of a dim the mesh "
             "does not divide differ); gather or exchange them with src=S(i)",
             what, (long long)-all[1], (long long)all[0]);
}

/* ---- convert, reinterpret: local, on the target's kernels */

static const char *ltype_name(rt_ltype t)
{
    static const char *names[] = {"R", "I", "V", "P"};
    return names[t];
}

/* own block of a replicated value: index (stack) or chunk of dim (split
 * like torch.chunk where the group does not divide it) */
static rt_tensor *own_block(rt_ctx *ctx, rt_group *g, rt_axes axes, const rt_tensor *x, int dim)
{
    if (dim == RT_STACK) {
        rt_coll_check_stack(ctx, x, g->size, "convert");
        return rt_index_copy(ctx, x, g->rank);
    }
    int64_t off, ext = rt_shard_block(ctx, x->shape[dim], axes, g->rank, &off);
    if (g->size == 1) /* the whole of x: shared, as between R and I */
        return rt_retain((rt_tensor *)x);
    return rt_slice_copy(ctx, x, dim, off, off + ext);
}

/* own block placed into zeros of the gathered shape (extent rows on dim) */
static rt_tensor *place_block(rt_ctx *ctx, rt_group *g, rt_axes axes, const rt_tensor *x, int dim,
                              int64_t extent)
{
    int64_t shape[RT_MAX_DIMS];
    if (dim == RT_STACK) {
        RT_CHECK(ctx, x->ndim < RT_MAX_DIMS, "convert: result would exceed %d dims",
                 RT_MAX_DIMS);
        shape[0] = g->size;
        memcpy(shape + 1, x->shape, (size_t)x->ndim * sizeof *shape);
        return rt_index_bwd(ctx, x, x->ndim + 1, shape, g->rank);
    }
    memcpy(shape, x->shape, sizeof shape);
    int64_t off = g->rank * x->shape[dim];
    if (extent < 0) {
        shape[dim] *= g->size;
    } else {
        int64_t want = rt_shard_block(ctx, extent, axes, g->rank, &off);
        rt_coll_check_block(ctx, x, dim, want, extent, g->size, "convert");
        shape[dim] = extent;
    }
    if (g->size == 1) /* x is the whole (checked above): shared */
        return rt_retain((rt_tensor *)x);
    return rt_slice_bwd(ctx, x, x->ndim, shape, dim, off);
}

rt_tensor *rt_convert(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_ltype src,
                      rt_ltype dst, int dim)
{
    return rt_convert_to(ctx, x, axes, src, dst, dim, RT_EVEN);
}

rt_tensor *rt_convert_to(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_ltype src,
                         rt_ltype dst, int dim, int64_t extent)
{
    rt_group *g = rt_group_get(ctx, axes);
    RT_KERNEL(ctx, RT_K_COPY, "convert");
    bool rep = src == RT_R || src == RT_I;
    /* the data do not change: share them (tensors are written only when
     * rt_writable) */
    if (rep && (dst == RT_R || dst == RT_I))
        return rt_retain((rt_tensor *)x);
    if (rep && dst == RT_V)
        return own_block(ctx, g, axes, x, rt_coll_check_dim(ctx, x, dim, "convert"));
    if (rep && dst == RT_P)
        return g->rank == 0 ? rt_retain((rt_tensor *)x) : rt_zeros(ctx, x->dtype, x->ndim, x->shape);
    if (src == RT_V && dst == RT_P)
        return place_block(ctx, g, axes, x, rt_coll_check_dim(ctx, x, dim, "convert"), extent);
    rt_fail(ctx, "convert(%s, %s) is not a local conversion", ltype_name(src), ltype_name(dst));
}

rt_tensor *rt_reinterpret(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_ltype src,
                          rt_ltype dst)
{
    rt_group_get(ctx, axes);
    bool ok = src == dst || (src == RT_R && dst != RT_R) || (src == RT_I && dst != RT_I) ||
              (src == RT_V && dst == RT_P);
    RT_CHECK(ctx, ok, "reinterpret(%s, %s) is not allowed", ltype_name(src), ltype_name(dst));
    return rt_retain((rt_tensor *)x);
}

void rt_barrier(rt_ctx *ctx)
{
    if (ctx->mpi)
        RT_CALL_MPI(ctx, MPI_Barrier(MPI_COMM_WORLD));
}
