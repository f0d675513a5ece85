/* The CUDA target's collectives. Two backends (SPMD_COLL=auto|nccl|host):
 * NCCL, one communicator per mesh-axis tuple split from the world's
 * (ncclGetUniqueId + MPI_Bcast, then ncclCommSplit with the member order of
 * the MPI group), on the compute stream; and the host-staged path, when
 * ranks share a GPU (NCCL refuses two ranks on one device) or
 * SPMD_COLL=host: the data go through pinned host memory and the same MPI
 * calls as the CPU target (comm.c). The simulation build stands in for
 * NCCL with those MPI calls as one stream-ordered operation (sim_coll,
 * recorded by a graph's capture). Blocks of a sharded dim are packed
 * on the device before and unpacked after, with the strided-copy kernel.
 * avg is a sum, then a scale (as on the CPU). The non-blocking all_reduce
 * is eager for now: rt_all_reduce_start reduces at once and rt_wait has
 * nothing to wait for. NCCL's collectives complete in stream order: the
 * host does not wait for them; at the next synchronisation (rt_dev_sync)
 * it polls their asynchronous errors while the stream drains and aborts
 * every communicator on a failure, so no rank hangs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dev.h"

#ifndef RT_SIM
#include <nccl.h>
#endif

typedef struct ncomm {
    rt_axes axes;
#ifndef RT_SIM
    ncclComm_t comm;
#endif
} ncomm;

struct rt_cuda_comm {
    bool nccl; /* the backend: NCCL, or host memory and MPI */
#ifndef RT_SIM
    ncclComm_t world;
#endif
    ncomm *comms;
    int n, cap;
};

extern "C" {

static size_t bytes_of(const rt_tensor *x) { return (size_t)x->numel * rt_dtype_size(x->dtype); }

/* ---- choosing the backend */

static int ranks_on_node(const rt_ctx *ctx)
{
    const char *n = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!n)
        n = getenv("MPI_LOCALNRANKS");
    return n ? atoi(n) : ctx->world;
}

void rt_cuda_comm_setup(rt_ctx *ctx)
{
    struct rt_cuda_comm *c = (struct rt_cuda_comm *)calloc(1, sizeof *c);
    RT_CHECK(ctx, c != NULL, "out of memory");
    ctx->tgt->comm = c;
    const char *e = getenv("SPMD_COLL");
    const char *want = e ? e : "auto";
    RT_CHECK(ctx, !strcmp(want, "auto") || !strcmp(want, "nccl") || !strcmp(want, "host"),
             "SPMD_COLL=%s: expected auto, nccl or host", want);
#ifdef RT_SIM
    RT_CHECK(ctx, strcmp(want, "nccl") != 0,
             "SPMD_COLL=nccl: the simulation build has no NCCL (its collectives go through the host)");
    /* nccl here: the simulation's stand-in for NCCL (sim_coll), a device
     * operation in stream order (recorded by a graph's capture) that moves
     * the data through host memory and MPI when it runs; SPMD_COLL=host:
     * the staged path, which waits for the device as on a GPU */
    c->nccl = strcmp(want, "host") != 0;
#else
    int gpus = 0;
    RT_CU(ctx, cudaGetDeviceCount(&gpus));
    int local = ranks_on_node(ctx);
    bool shared = local > gpus;
    if (!strcmp(want, "nccl"))
        RT_CHECK(ctx, !shared, "SPMD_COLL=nccl: %d ranks share %d GPU(s) on this node, and NCCL "
                 "refuses two ranks on one GPU (use SPMD_COLL=host)", local, gpus);
    c->nccl = ctx->mpi && !strcmp(want, "host") ? false : ctx->mpi && !shared;
    if (shared && ctx->rank == 0 && ctx->world > 1)
        fprintf(stderr, "spmd: note: %d ranks share %d GPU(s) on this node: collectives go "
                        "through host memory and MPI\n", local, gpus);
    if (c->nccl) {
        ncclUniqueId id;
        if (ctx->rank == 0) {
            ncclResult_t r = ncclGetUniqueId(&id);
            RT_CHECK(ctx, r == ncclSuccess, "ncclGetUniqueId: %s", ncclGetErrorString(r));
        }
        RT_CALL_MPI(ctx, MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
        ncclResult_t r = ncclCommInitRank(&c->world, ctx->world, id, ctx->rank);
        RT_CHECK(ctx, r == ncclSuccess, "ncclCommInitRank: %s", ncclGetErrorString(r));
    }
#endif
    (void)ranks_on_node;
}

void rt_cuda_comm_free(rt_ctx *ctx)
{
    struct rt_cuda_comm *c = ctx->tgt->comm;
    if (!c)
        return;
#ifndef RT_SIM
    for (int i = 0; i < c->n; i++)
        ncclCommDestroy(c->comms[i].comm);
    if (c->nccl)
        ncclCommDestroy(c->world);
#endif
    free(c->comms);
    free(c);
    ctx->tgt->comm = NULL;
}

#ifndef RT_SIM
static bool use_nccl(rt_ctx *ctx) { return ctx->tgt->comm && ctx->tgt->comm->nccl; }
#endif

/* ---- the host-staged path: the bytes of a device buffer through MPI */

/* out (device, n_out elements) <- MPI op on in (device, n_in elements) */
typedef enum { H_ALLREDUCE, H_ALLGATHER, H_REDUCE_SCATTER, H_ALLTOALL } host_op;

/* the MPI call of op k on host buffers (the staged path's and the
 * simulation's stand-in for NCCL) */
static void host_mpi(rt_ctx *ctx, host_op k, rt_group *g, rt_dtype dt, rt_reduce_op op, const char *hin,
                     int64_t n_in, char *hout, int64_t n_out)
{
    MPI_Datatype t = rt_mpi_type(dt);
    switch (k) {
    case H_ALLREDUCE: {
        MPI_Op mop = rt_mpi_op(ctx, op, dt);
        RT_CALL_MPI(ctx, rt_coll_allreduce(ctx, hin, hout, rt_mpi_count(ctx, n_in), t, mop, g));
        break;
    }
    case H_ALLGATHER:
        RT_CALL_MPI(ctx, MPI_Allgather(hin, rt_mpi_count(ctx, n_in), t, hout, rt_mpi_count(ctx, n_in), t, g->comm));
        break;
    case H_REDUCE_SCATTER:
        RT_CALL_MPI(ctx, MPI_Reduce_scatter_block(hin, hout, rt_mpi_count(ctx, n_out), t,
                                                  rt_mpi_op(ctx, RT_RED_SUM, dt), g->comm));
        break;
    case H_ALLTOALL:
        RT_CALL_MPI(ctx, MPI_Alltoall(hin, rt_mpi_count(ctx, n_in / g->size), t, hout,
                                      rt_mpi_count(ctx, n_in / g->size), t, g->comm));
        break;
    }
}

static void host_coll(rt_ctx *ctx, host_op k, rt_group *g, rt_dtype dt, rt_reduce_op op,
                      const void *in, int64_t n_in, void *out, int64_t n_out)
{
    rt_dev_host_sync(ctx, "a collective through host memory"); /* graph regions stay eager */
    size_t esz = rt_dtype_size(dt);
    char *buf = (char *)rt_dev_staging(ctx, (size_t)(n_in + n_out) * esz);
    char *hin = buf, *hout = buf + (size_t)n_in * esz;
    rt_dev_d2h(ctx, hin, in, (size_t)n_in * esz);
    host_mpi(ctx, k, g, dt, op, hin, n_in, hout, n_out);
    rt_dev_h2d(ctx, out, hout, (size_t)n_out * esz);
}

#ifndef RT_SIM
static ncclDataType_t nccl_type(rt_dtype dt)
{
    return dt == RT_F64 ? ncclFloat64 : dt == RT_I32 ? ncclInt32 : dt == RT_BF16 ? ncclBfloat16
                                                                                 : ncclFloat32;
}

static ncclRedOp_t nccl_op(rt_reduce_op op)
{
    return op == RT_RED_MAX ? ncclMax : op == RT_RED_MIN ? ncclMin : ncclSum;
}

static ncclComm_t nccl_comm(rt_ctx *ctx, rt_group *g)
{
    struct rt_cuda_comm *c = ctx->tgt->comm;
    for (int i = 0; i < c->n; i++)
        if (c->comms[i].axes.n == g->axes.n &&
            !memcmp(c->comms[i].axes.idx, g->axes.idx, (size_t)g->axes.n * sizeof(int)))
            return c->comms[i].comm;
    if (c->n == c->cap) {
        int nc = c->cap ? 2 * c->cap : 8;
        ncomm *m = (ncomm *)realloc(c->comms, (size_t)nc * sizeof *m);
        RT_CHECK(ctx, m != NULL, "out of memory");
        c->comms = m;
        c->cap = nc;
    }
    /* every rank splits at the same collective (SPMD): the members of a
     * group share the world rank of its member 0 as the color, and the
     * group rank as the key, so NCCL's member order is MPI's */
    ncomm *m = &c->comms[c->n];
    m->axes = g->axes;
    int color = rt_group_member(ctx, g->axes, 0);
    ncclResult_t r = ncclCommSplit(c->world, color, g->rank, &m->comm, NULL);
    RT_CHECK(ctx, r == ncclSuccess, "ncclCommSplit: %s", ncclGetErrorString(r));
    c->n++;
    return m->comm;
}

#define NCCL(ctx, call)                                                         \
    do {                                                                        \
        ncclResult_t r_ = (call);                                               \
        if (r_ != ncclSuccess && r_ != ncclInProgress)                          \
            rt_dev_fail((ctx), #call, ncclGetErrorString(r_));                  \
        (ctx)->tgt->nccl_pending = true;                                        \
    } while (0)

/* a failed communicator's error; every communicator aborted first */
static void nccl_abort_all(rt_ctx *ctx, ncclResult_t err)
{
    struct rt_cuda_comm *c = ctx->tgt->comm;
    for (int i = 0; i < c->n; i++)
        ncclCommAbort(c->comms[i].comm);
    c->n = 0;
    if (c->nccl)
        ncclCommAbort(c->world);
    c->nccl = false;
    ctx->tgt->nccl_pending = false;
    rt_dev_fail(ctx, "NCCL", ncclGetErrorString(err));
}

static ncclResult_t nccl_async_error(ncclComm_t comm)
{
    ncclResult_t st;
    ncclResult_t r = ncclCommGetAsyncError(comm, &st);
    if (r != ncclSuccess)
        return r;
    return st == ncclInProgress ? ncclSuccess : st;
}
#endif

#ifdef RT_SIM
/* the simulation's NCCL: host_coll's MPI calls on a copy of the device
 * buffers, as one device operation (recorded during a graph's capture, run
 * by its replays in the same order on every rank) */
static void sim_coll(rt_ctx *ctx, host_op k, rt_group *g, rt_dtype dt, rt_reduce_op op,
                     const void *in, int64_t n_in, void *out, int64_t n_out)
{
    auto run = [=]() {
        size_t esz = rt_dtype_size(dt);
        char *hin = (char *)malloc((size_t)(n_in + n_out) * esz + 1);
        RT_CHECK(ctx, hin != NULL, "out of memory");
        char *hout = hin + (size_t)n_in * esz;
        rt_sim_open();
        memcpy(hin, in, (size_t)n_in * esz);
        rt_sim_close();
        host_mpi(ctx, k, g, dt, op, hin, n_in, hout, n_out);
        rt_sim_open();
        memcpy(out, hout, (size_t)n_out * esz);
        rt_sim_close();
        free(hin);
    };
    if (rt_sim_capturing())
        rt_sim_record(run);
    else
        run();
}
#endif

void rt_cuda_comm_wait(rt_ctx *ctx)
{
#ifdef RT_SIM
    ctx->tgt->nccl_pending = false; /* no NCCL: the host-staged path waited */
#else
    struct rt_cuda_comm *c = ctx->tgt->comm;
    for (;;) {
        cudaError_t q = cudaStreamQuery((cudaStream_t)ctx->tgt->stream);
        if (q == cudaSuccess)
            break;
        if (q != cudaErrorNotReady)
            RT_CU(ctx, q);
        for (int i = 0; c && i < c->n; i++) {
            ncclResult_t e = nccl_async_error(c->comms[i].comm);
            if (e != ncclSuccess)
                nccl_abort_all(ctx, e);
        }
        if (c && c->nccl) {
            ncclResult_t e = nccl_async_error(c->world);
            if (e != ncclSuccess)
                nccl_abort_all(ctx, e);
        }
    }
    ctx->tgt->nccl_pending = false;
#endif
}

/* the same as host_coll, on NCCL */
static void coll(rt_ctx *ctx, host_op k, rt_group *g, rt_dtype dt, rt_reduce_op op,
                 const void *in, int64_t n_in, void *out, int64_t n_out)
{
    rt_count_op(ctx, RT_OP_COLL);
#ifdef RT_SIM
    if (ctx->tgt->comm && ctx->tgt->comm->nccl) {
        sim_coll(ctx, k, g, dt, op, in, n_in, out, n_out);
        return;
    }
#else
    if (use_nccl(ctx)) {
        ncclComm_t c = nccl_comm(ctx, g);
        cudaStream_t s = (cudaStream_t)ctx->tgt->stream;
        ncclDataType_t t = nccl_type(dt);
        size_t esz = rt_dtype_size(dt);
        switch (k) {
        case H_ALLREDUCE:
            NCCL(ctx, ncclAllReduce(in, out, (size_t)n_in, t, nccl_op(op), c, s));
            break;
        case H_ALLGATHER:
            NCCL(ctx, ncclAllGather(in, out, (size_t)n_in, t, c, s));
            break;
        case H_REDUCE_SCATTER:
            NCCL(ctx, ncclReduceScatter(in, out, (size_t)n_out, t, ncclSum, c, s));
            break;
        case H_ALLTOALL: {
            size_t blk = (size_t)(n_in / g->size);
            NCCL(ctx, ncclGroupStart());
            for (int p = 0; p < g->size; p++) {
                NCCL(ctx, ncclSend((const char *)in + p * blk * esz, blk, t, p, c, s));
                NCCL(ctx, ncclRecv((char *)out + p * blk * esz, blk, t, p, c, s));
            }
            NCCL(ctx, ncclGroupEnd());
            break;
        }
        }
        return;
    }
#endif
    host_coll(ctx, k, g, dt, op, in, n_in, out, n_out);
}

static void scale_inplace(rt_ctx *ctx, rt_tensor *y, double s)
{
    void *Y = y->data;
    rt_dtype dt = y->dtype;
    rt_launch(ctx, y->numel, [=] RT_HD(int64_t i) { rt_st(Y, dt, i, rt_ld(Y, dt, i) * s); });
}

/* a device tensor [d0, d1, d2, d3] with its first two dims swapped */
static rt_tensor *swap01(rt_ctx *ctx, const rt_tensor *x, int64_t d0, int64_t d1, int64_t d2,
                         int64_t d3)
{
    int64_t shape[4] = {d1, d0, d2, d3}, str[4] = {d2 * d3, d1 * d2 * d3, d3, 1};
    rt_tensor v = *x;
    v.ndim = 4;
    return rt_cuda_strided_copy(ctx, &v, 4, shape, str, 0);
}

static void reshape_to(rt_tensor *y, int ndim, const int64_t *shape)
{
    y->ndim = ndim;
    memcpy(y->shape, shape, (size_t)ndim * sizeof *shape);
}

/* ---- all_reduce */

static void all_reduce_into(rt_ctx *ctx, const rt_tensor *x, rt_tensor *y, rt_group *g,
                            rt_reduce_op op)
{
    rt_kspan ks_ = rt_kernel_begin(ctx);
    ctx->tgt->op = "all_reduce";
    coll(ctx, H_ALLREDUCE, g, x->dtype, op, x->data, x->numel, y->data, y->numel);
    if (op == RT_RED_AVG)
        scale_inplace(ctx, y, 1.0 / g->size);
    rt_coll_record(ctx, RT_COLL_ALL_REDUCE, &ks_, (double)bytes_of(x));
}

rt_tensor *rt_all_reduce(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_reduce_op op)
{
    rt_group *g = rt_group_get(ctx, axes);
    rt_all_reduce_check(ctx, x, op);
    if (g->size == 1)
        return rt_retain((rt_tensor *)x);
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    all_reduce_into(ctx, x, y, g, op);
    return y;
}

rt_tensor *rt_all_reduce_reuse(rt_ctx *ctx, rt_tensor *x, rt_axes axes, rt_reduce_op op)
{
    if (!rt_writable(x))
        return rt_all_reduce(ctx, x, axes, op);
    rt_group *g = rt_group_get(ctx, axes);
    rt_all_reduce_check(ctx, x, op);
    if (g->size > 1)
        all_reduce_into(ctx, x, x, g, op);
    return rt_retain(x);
}

/* eager: the result is complete when these return */
rt_tensor *rt_all_reduce_start(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_reduce_op op)
{
    return rt_all_reduce(ctx, x, axes, op);
}
rt_tensor *rt_all_reduce_start_reuse(rt_ctx *ctx, rt_tensor *x, rt_axes axes, rt_reduce_op op)
{
    return rt_all_reduce_reuse(ctx, x, axes, op);
}
void rt_wait(rt_ctx *ctx, const rt_tensor *t) { (void)ctx; (void)t; }
void rt_flush(rt_ctx *ctx) { (void)ctx; }
void rt_wait_all(rt_ctx *ctx) { (void)ctx; }
bool rt_pending(const rt_ctx *ctx, const rt_tensor *t) { (void)ctx; (void)t; return false; }

/* ---- uneven shards (SPEC 4): NCCL has no all-gather with counts, so every
 * block is padded with zeros to the largest one (rt_pad_blocks), the equal
 * form moves them, and the padding is dropped */

static int64_t largest(const rt_blocks *b)
{
    int64_t c = 0;
    for (int k = 0; k < b->n; k++)
        c = b->ext[k] > c ? b->ext[k] : c;
    return c;
}

/* x's dim padded with zeros at its end to c rows */
static rt_tensor *pad_to(rt_ctx *ctx, const rt_tensor *x, int dim, int64_t c)
{
    int64_t shape[RT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = c;
    return rt_slice_bwd(ctx, x, x->ndim, shape, dim, 0);
}

static rt_tensor *gather_uneven(rt_ctx *ctx, rt_group *g, const rt_tensor *x, rt_axes axes, int dim,
                                int64_t extent)
{
    rt_blocks b = rt_blocks_of(ctx, axes, extent);
    rt_coll_check_block(ctx, x, dim, b.ext[g->rank], extent, g->size, "all_gather");
    int64_t c = largest(&b);
    rt_tensor *xp = pad_to(ctx, x, dim, c);
    rt_tensor *yp = rt_all_gather_to(ctx, xp, axes, dim, c * g->size);
    rt_tensor *y = rt_unpad_blocks(ctx, yp, dim, &b, c);
    rt_free(ctx, xp);
    rt_free(ctx, yp);
    rt_blocks_free(&b);
    return y;
}

static rt_tensor *rs_uneven(rt_ctx *ctx, rt_group *g, const rt_tensor *x, rt_axes axes, int dim,
                            rt_reduce_op op)
{
    rt_blocks b = rt_blocks_of(ctx, axes, x->shape[dim]);
    int64_t c = largest(&b);
    rt_tensor *xp = rt_pad_blocks(ctx, x, dim, &b, c);
    rt_tensor *yp = rt_reduce_scatter(ctx, xp, axes, dim, op);
    rt_tensor *y = rt_slice_copy(ctx, yp, dim, 0, b.ext[g->rank]);
    rt_free(ctx, xp);
    rt_free(ctx, yp);
    rt_blocks_free(&b);
    return y;
}

static rt_tensor *a2a_uneven(rt_ctx *ctx, rt_group *g, const rt_tensor *x, rt_axes axes, int si, int dj,
                             int64_t extent)
{
    rt_blocks bi = rt_blocks_of(ctx, axes, extent), bj = rt_blocks_of(ctx, axes, x->shape[dj]);
    rt_coll_check_block(ctx, x, si, bi.ext[g->rank], extent, g->size, "all_to_all");
    int64_t ci = largest(&bi), cj = largest(&bj);
    rt_tensor *xi = pad_to(ctx, x, si, ci);
    rt_tensor *xp = rt_pad_blocks(ctx, xi, dj, &bj, cj);
    rt_tensor *yp = rt_all_to_all_to(ctx, xp, axes, si, dj, ci * g->size);
    rt_tensor *yi = rt_unpad_blocks(ctx, yp, si, &bi, ci);
    rt_tensor *y = rt_slice_copy(ctx, yi, dj, 0, bj.ext[g->rank]);
    rt_free(ctx, xi);
    rt_free(ctx, xp);
    rt_free(ctx, yp);
    rt_free(ctx, yi);
    rt_blocks_free(&bi);
    rt_blocks_free(&bj);
    return y;
}

/* ---- all_gather: gathered as [n, x], then moved to dim */

rt_tensor *rt_all_gather(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int dim)
{
    return rt_all_gather_to(ctx, x, axes, dim, RT_EVEN);
}

rt_tensor *rt_all_gather_to(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int dim, int64_t extent)
{
    rt_group *g = rt_group_get(ctx, axes);
    dim = rt_coll_check_dim(ctx, x, dim, "all_gather");
    if (dim != RT_STACK && extent >= 0 && extent % g->size != 0)
        return gather_uneven(ctx, g, x, axes, dim, extent);
    if (dim != RT_STACK && extent >= 0)
        rt_coll_check_block(ctx, x, dim, extent / g->size, extent, g->size, "all_gather");
    if (g->size == 1 && dim != RT_STACK)
        return rt_retain((rt_tensor *)x);
    rt_kspan ks_ = rt_kernel_begin(ctx);
    ctx->tgt->op = "all_gather";
    if (dim == RT_STACK)
        rt_coll_check_same(ctx, g, x, "all_gather");
    int64_t st[RT_MAX_DIMS]; /* gathered as [n, x] */
    rt_tensor *y = rt_empty(ctx, x->dtype, rt_all_gather_shape(ctx, x, RT_STACK, g->size, st), st);
    if (g->size == 1)
        rt_dev_d2d(ctx, y->data, x->data, bytes_of(x));
    else
        coll(ctx, H_ALLGATHER, g, x->dtype, RT_RED_SUM, x->data, x->numel, y->data, y->numel);
    if (dim != RT_STACK) {
        int64_t outer, d, inner, shape[RT_MAX_DIMS];
        rt_split_dims(x, dim, &outer, &d, &inner);
        rt_all_gather_shape(ctx, x, dim, g->size, shape);
        if (outer == 1) {
            reshape_to(y, x->ndim, shape);
        } else { /* [n, outer, d, inner] -> [outer, n, d, inner] */
            rt_tensor *z = swap01(ctx, y, g->size, outer, d, inner);
            rt_free(ctx, y);
            y = z;
            reshape_to(y, x->ndim, shape);
        }
    }
    rt_coll_record(ctx, RT_COLL_ALL_GATHER, &ks_, (double)bytes_of(y));
    return y;
}

/* ---- reduce_scatter: x packed as [n, block], block rank kept */

rt_tensor *rt_reduce_scatter(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int dim,
                             rt_reduce_op op)
{
    rt_group *g = rt_group_get(ctx, axes);
    dim = rt_coll_check_dim(ctx, x, dim, "reduce_scatter");
    rt_reduce_scatter_check(ctx, x, op);
    if (g->size == 1 && dim != RT_STACK)
        return rt_retain((rt_tensor *)x);
    if (dim != RT_STACK && x->shape[dim] % g->size != 0)
        return rs_uneven(ctx, g, x, axes, dim, op);
    rt_kspan ks_ = rt_kernel_begin(ctx);
    ctx->tgt->op = "reduce_scatter";
    int64_t shape[RT_MAX_DIMS];
    rt_tensor *y, *packed = NULL;
    const rt_tensor *src = x;
    if (dim == RT_STACK) {
        rt_coll_check_stack(ctx, x, g->size, "reduce_scatter");
        rt_coll_check_same(ctx, g, x, "reduce_scatter");
        y = rt_empty(ctx, x->dtype, x->ndim - 1, x->shape + 1);
    } else {
        memcpy(shape, x->shape, sizeof shape);
        int64_t m = shape[dim] = rt_coll_split(ctx, x, dim, g->size, "reduce_scatter");
        y = rt_empty(ctx, x->dtype, x->ndim, shape);
        int64_t outer, d, inner;
        rt_split_dims(x, dim, &outer, &d, &inner);
        if (outer > 1) /* [outer, n, m, inner] -> [n, outer, m, inner] */
            src = packed = swap01(ctx, x, outer, g->size, m, inner);
    }
    if (g->size == 1)
        rt_dev_d2d(ctx, y->data, src->data, bytes_of(y));
    else
        coll(ctx, H_REDUCE_SCATTER, g, x->dtype, RT_RED_SUM, src->data, x->numel, y->data,
             y->numel);
    if (op == RT_RED_AVG && g->size > 1)
        scale_inplace(ctx, y, 1.0 / g->size);
    rt_free(ctx, packed);
    rt_coll_record(ctx, RT_COLL_REDUCE_SCATTER, &ks_, (double)bytes_of(x));
    return y;
}

/* ---- all_to_all */

rt_tensor *rt_all_to_all(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int src_dim,
                         int dst_dim)
{
    return rt_all_to_all_to(ctx, x, axes, src_dim, dst_dim, RT_EVEN);
}

rt_tensor *rt_all_to_all_to(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int src_dim,
                            int dst_dim, int64_t extent)
{
    rt_group *g = rt_group_get(ctx, axes);
    rt_all_to_all_check(ctx, x, &src_dim, &dst_dim);
    if (src_dim != RT_STACK && extent >= 0 &&
        (extent % g->size != 0 || x->shape[dst_dim] % g->size != 0))
        return a2a_uneven(ctx, g, x, axes, src_dim, dst_dim, extent);
    if (src_dim != RT_STACK && extent >= 0)
        rt_coll_check_block(ctx, x, src_dim, extent / g->size, extent, g->size, "all_to_all");
    if (g->size == 1 && src_dim != RT_STACK)
        return rt_retain((rt_tensor *)x);
    rt_kspan ks_ = rt_kernel_begin(ctx);
    ctx->tgt->op = "all_to_all";
    int n = g->size;
    rt_tensor *y;
    if (src_dim == RT_STACK) {
        rt_coll_check_stack(ctx, x, n, "all_to_all");
        rt_coll_check_same(ctx, g, x, "all_to_all");
        y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
        if (n == 1)
            rt_dev_d2d(ctx, y->data, x->data, bytes_of(x));
        else
            coll(ctx, H_ALLTOALL, g, x->dtype, RT_RED_SUM, x->data, x->numel, y->data, y->numel);
    } else {
        /* S(i) -> S(j): chunk k of dim j goes to block k; received chunks
         * concatenate on dim i */
        int si = src_dim, dj = dst_dim;
        int64_t chunk[RT_MAX_DIMS], shape[RT_MAX_DIMS], oj, d, ij;
        int64_t m = rt_all_to_all_shapes(ctx, x, si, dj, n, chunk, shape);
        rt_split_dims(x, dj, &oj, &d, &ij);
        rt_tensor *send = oj > 1 ? swap01(ctx, x, oj, n, m, ij) : NULL;
        rt_tensor *recv = rt_empty(ctx, x->dtype, 1, &x->numel);
        coll(ctx, H_ALLTOALL, g, x->dtype, RT_RED_SUM, send ? send->data : x->data, x->numel,
             recv->data, recv->numel);
        rt_free(ctx, send);
        int64_t oi = rt_numel_of(si, chunk), di = chunk[si];
        int64_t ii = rt_numel_of(x->ndim - si - 1, chunk + si + 1);
        if (oi == 1) {
            y = recv;
        } else { /* [n, oi, di, ii] -> [oi, n, di, ii] */
            y = swap01(ctx, recv, n, oi, di, ii);
            rt_free(ctx, recv);
        }
        reshape_to(y, x->ndim, shape);
    }
    rt_coll_record(ctx, RT_COLL_ALL_TO_ALL, &ks_, (double)bytes_of(x));
    return y;
}

/* ---- ppermute: block to the rank `shift` steps further along the group */

rt_tensor *rt_ppermute(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int64_t shift)
{
    rt_group *g = rt_group_get(ctx, axes);
    int64_t n = g->size, s = ((shift % n) + n) % n;
    if (s == 0)
        return rt_retain((rt_tensor *)x);
    rt_kspan ks_ = rt_kernel_begin(ctx);
    ctx->tgt->op = "ppermute";
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    int to = (int)((g->rank + s) % n), from = (int)((g->rank - s + n) % n);
    rt_count_op(ctx, RT_OP_COLL);
#ifndef RT_SIM
    if (use_nccl(ctx)) {
        ncclComm_t c = nccl_comm(ctx, g);
        cudaStream_t st = (cudaStream_t)ctx->tgt->stream;
        ncclDataType_t t = nccl_type(x->dtype);
        NCCL(ctx, ncclGroupStart());
        NCCL(ctx, ncclSend(x->data, (size_t)x->numel, t, to, c, st));
        NCCL(ctx, ncclRecv(y->data, (size_t)x->numel, t, from, c, st));
        NCCL(ctx, ncclGroupEnd());
        rt_coll_record(ctx, RT_COLL_PPERMUTE, &ks_, (double)bytes_of(x));
        return y;
    }
#endif
    size_t bytes = bytes_of(x);
    char *buf = (char *)rt_dev_staging(ctx, 2 * bytes);
    rt_dev_d2h(ctx, buf, x->data, bytes);
    RT_CALL_MPI(ctx, MPI_Sendrecv(buf, rt_mpi_count(ctx, x->numel), rt_mpi_type(x->dtype), to, 0x5050,
                                  buf + bytes, rt_mpi_count(ctx, x->numel), rt_mpi_type(x->dtype),
                                  from, 0x5050, g->comm, MPI_STATUS_IGNORE));
    rt_dev_h2d(ctx, y->data, buf + bytes, bytes);
    rt_coll_record(ctx, RT_COLL_PPERMUTE, &ks_, (double)bytes_of(x));
    return y;
}

} /* extern "C" */
