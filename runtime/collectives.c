/* Collectives and casts over a mesh axis tuple (section 6 of the spec).
 * dim is RT_STACK for the V (stack) form or i >= 0 for S(i); S(i) forms on a
 * non-leading dim pack blocks into [n, ...] order before MPI and unpack after.
 * reduce_scatter uses MPI_Reduce_scatter_block for inputs under 4 MiB and
 * MPI_Allreduce plus a local slice from 4 MiB up, where OpenMPI's
 * reduce_scatter is slower than its allreduce of the same buffer
 * (SPMD_REDUCE_SCATTER=mpi|allreduce forces one; bench/ measures both).
 * A dim the group does not divide (SPEC 4, uneven shards) has per-rank
 * blocks split like torch.chunk (rt_blocks_of): MPI_Allgatherv,
 * MPI_Reduce_scatter with counts (or the ring, or an all-reduce and a
 * slice), MPI_Alltoallv; packing and unpacking as for equal blocks. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt_cpu.h"

static MPI_Datatype mpi_type(rt_dtype dt) { return rt_mpi_type(dt); }
static MPI_Op mpi_op(rt_ctx *ctx, rt_reduce_op op, rt_dtype dt) { return rt_mpi_op(ctx, op, dt); }

static size_t bytes_of(const rt_tensor *x)
{
    return (size_t)x->numel * rt_dtype_size(x->dtype);
}

static void *esz_at(const rt_tensor *x, int64_t i)
{
    return (char *)x->data + (size_t)i * rt_dtype_size(x->dtype);
}

/* a raw scratch tensor of n elements of x's dtype (pooled) */
static rt_tensor *scratch_like(rt_ctx *ctx, const rt_tensor *x, int64_t n)
{
    return rt_scratch_tensor(ctx, x->dtype, n);
}

static int coll_allgather(rt_ctx *ctx, const void *in, int n, MPI_Datatype t, void *out, MPI_Comm c)
{
    if (!ctx->wait_sleep)
        return MPI_Allgather(in, n, t, out, n, t, c);
    MPI_Request r;
    int rc = MPI_Iallgather(in, n, t, out, n, t, c, &r);
    return rc != MPI_SUCCESS ? rc : rt_mpi_wait(ctx, &r);
}

static int coll_reduce_scatter_block(rt_ctx *ctx, const void *in, void *out, int n, MPI_Datatype t, MPI_Op op,
                                     MPI_Comm c)
{
    if (!ctx->wait_sleep)
        return MPI_Reduce_scatter_block(in, out, n, t, op, c);
    MPI_Request r;
    int rc = MPI_Ireduce_scatter_block(in, out, n, t, op, c, &r);
    return rc != MPI_SUCCESS ? rc : rt_mpi_wait(ctx, &r);
}

static int coll_alltoall(rt_ctx *ctx, const void *in, int n, MPI_Datatype t, void *out, MPI_Comm c)
{
    if (!ctx->wait_sleep)
        return MPI_Alltoall(in, n, t, out, n, t, c);
    MPI_Request r;
    int rc = MPI_Ialltoall(in, n, t, out, n, t, c, &r);
    return rc != MPI_SUCCESS ? rc : rt_mpi_wait(ctx, &r);
}

static int coll_allgatherv(rt_ctx *ctx, const void *in, int n, MPI_Datatype t, void *out,
                           const int *cnt, const int *dsp, MPI_Comm c)
{
    if (!ctx->wait_sleep)
        return MPI_Allgatherv(in, n, t, out, cnt, dsp, t, c);
    MPI_Request r;
    int rc = MPI_Iallgatherv(in, n, t, out, cnt, dsp, t, c, &r);
    return rc != MPI_SUCCESS ? rc : rt_mpi_wait(ctx, &r);
}

static int coll_reduce_scatter(rt_ctx *ctx, const void *in, void *out, const int *cnt, MPI_Datatype t,
                               MPI_Op op, MPI_Comm c)
{
    if (!ctx->wait_sleep)
        return MPI_Reduce_scatter(in, out, cnt, t, op, c);
    MPI_Request r;
    int rc = MPI_Ireduce_scatter(in, out, cnt, t, op, c, &r);
    return rc != MPI_SUCCESS ? rc : rt_mpi_wait(ctx, &r);
}

static int coll_alltoallv(rt_ctx *ctx, const void *in, const int *scnt, const int *sdsp, MPI_Datatype t,
                          void *out, const int *rcnt, const int *rdsp, MPI_Comm c)
{
    if (!ctx->wait_sleep)
        return MPI_Alltoallv(in, scnt, sdsp, t, out, rcnt, rdsp, t, c);
    MPI_Request r;
    int rc = MPI_Ialltoallv(in, scnt, sdsp, t, out, rcnt, rdsp, t, c, &r);
    return rc != MPI_SUCCESS ? rc : rt_mpi_wait(ctx, &r);
}

/* MPI's int counts and displacements of n blocks of rows[k] * per elements
 * each, contiguous in order: one allocation, cnt[0..n) then dsp[0..n) */
static int *counts_of(rt_ctx *ctx, int n, const int64_t *rows, int64_t per)
{
    int *cnt = malloc(2 * (size_t)n * sizeof *cnt);
    RT_CHECK(ctx, cnt != NULL, "out of memory");
    int64_t at = 0;
    for (int k = 0; k < n; k++) {
        cnt[k] = rt_mpi_count(ctx, rows[k] * per);
        cnt[n + k] = rt_mpi_count(ctx, at);
        at += rows[k] * per;
    }
    return cnt;
}

/* ---- all_reduce */

static void scale_inplace(rt_tensor *y, double s)
{
    if (y->dtype == RT_BF16)
        rt_bf16_scale_n(y->data, s, y->numel);
    else if (y->dtype == RT_F32)
        for (int64_t i = 0; i < y->numel; i++)
            ((float *)y->data)[i] = (float)(((float *)y->data)[i] * s);
    else
        for (int64_t i = 0; i < y->numel; i++)
            ((double *)y->data)[i] *= s;
}

/* y = the reduction of x over axes; y == x: in place (MPI_IN_PLACE) */
static void all_reduce_into(rt_ctx *ctx, const rt_tensor *x, rt_tensor *y, rt_group *g,
                            rt_reduce_op op)
{
    rt_kspan ks_ = rt_kernel_begin(ctx);
    RT_CALL_MPI(ctx, rt_coll_allreduce(ctx, y == x ? MPI_IN_PLACE : x->data, y->data,
                                   rt_mpi_count(ctx, x->numel), mpi_type(x->dtype),
                                   mpi_op(ctx, op, x->dtype), g));
    if (op == RT_RED_AVG)
        scale_inplace(y, 1.0 / g->size);
    rt_coll_record(ctx, RT_COLL_ALL_REDUCE, &ks_, (double)bytes_of(x));
}

rt_tensor *rt_all_reduce(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_reduce_op op)
{
    rt_group *g = rt_group_get(ctx, axes);
    rt_all_reduce_check(ctx, x, op);
    if (g->size == 1) /* nothing to combine: share the data */
        return rt_retain((rt_tensor *)x);
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    all_reduce_into(ctx, x, y, g, op);
    return y;
}

rt_tensor *rt_all_reduce_reuse(rt_ctx *ctx, rt_tensor *x, rt_axes axes, rt_reduce_op op)
{
    if (!rt_writable(x) || rt_pending(ctx, x))
        return rt_all_reduce(ctx, x, axes, op);
    rt_group *g = rt_group_get(ctx, axes);
    rt_all_reduce_check(ctx, x, op);
    if (g->size > 1)
        all_reduce_into(ctx, x, x, g, op);
    return rt_retain(x);
}

void rt_scale_inplace(rt_tensor *y, double s) { scale_inplace(y, s); }

/* ---- all_gather */

static void gather_raw(rt_ctx *ctx, rt_group *g, const rt_tensor *x, void *out)
{
    if (g->size == 1) {
        memcpy(out, x->data, bytes_of(x));
        return;
    }
    int c = rt_mpi_count(ctx, x->numel);
    RT_CALL_MPI(ctx, coll_allgather(ctx, x->data, c, mpi_type(x->dtype), out, g->comm));
}

/* all_gather S(i) of blocks split like torch.chunk: MPI_Allgatherv */
static rt_tensor *gather_uneven(rt_ctx *ctx, rt_group *g, const rt_tensor *x, rt_axes axes, int dim,
                                int64_t extent)
{
    rt_blocks b = rt_blocks_of(ctx, axes, extent);
    rt_coll_check_block(ctx, x, dim, b.ext[g->rank], extent, g->size, "all_gather");
    int64_t shape[RT_MAX_DIMS], outer, d, inner;
    size_t esz = rt_dtype_size(x->dtype);
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = extent;
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, shape);
    rt_split_dims(x, dim, &outer, &d, &inner);
    int *cnt = counts_of(ctx, g->size, b.ext, outer * inner);
    rt_tensor *tmp = outer == 1 ? NULL : scratch_like(ctx, x, y->numel);
    RT_CALL_MPI(ctx, coll_allgatherv(ctx, x->data, rt_mpi_count(ctx, x->numel), mpi_type(x->dtype),
                                     tmp ? tmp->data : y->data, cnt, cnt + g->size, g->comm));
    for (int k = 0; tmp && k < g->size; k++) /* [n][outer, ext_k, inner] to [outer, extent, inner] */
        rt_copy_block(esz_at(y, b.off[k] * inner), esz_at(tmp, cnt[g->size + k]), esz, outer,
                      extent * inner, b.ext[k] * inner, b.ext[k] * inner);
    rt_free(ctx, tmp);
    free(cnt);
    rt_blocks_free(&b);
    return y;
}

rt_tensor *rt_all_gather(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int dim)
{
    return rt_all_gather_to(ctx, x, axes, dim, RT_EVEN);
}

rt_tensor *rt_all_gather_to(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int dim,
                            int64_t extent)
{
    rt_group *g = rt_group_get(ctx, axes);
    dim = rt_coll_check_dim(ctx, x, dim, "all_gather");
    if (dim != RT_STACK && extent >= 0 && extent % g->size != 0) {
        rt_kspan ks_ = rt_kernel_begin(ctx);
        rt_tensor *y = gather_uneven(ctx, g, x, axes, dim, extent);
        rt_coll_record(ctx, RT_COLL_ALL_GATHER, &ks_, (double)bytes_of(y));
        return y;
    }
    if (dim != RT_STACK && extent >= 0)
        rt_coll_check_block(ctx, x, dim, extent / g->size, extent, g->size, "all_gather");
    if (g->size == 1 && dim != RT_STACK)
        return rt_retain((rt_tensor *)x);
    rt_kspan ks_ = rt_kernel_begin(ctx);
    int64_t shape[RT_MAX_DIMS], outer, d, inner;
    int ndim = rt_all_gather_shape(ctx, x, dim, g->size, shape);
    rt_tensor *y = rt_empty(ctx, x->dtype, ndim, shape);
    if (dim == RT_STACK) {
        rt_coll_check_same(ctx, g, x, "all_gather");
        gather_raw(ctx, g, x, y->data);
    } else {
        rt_split_dims(x, dim, &outer, &d, &inner);
        if (outer == 1) {
            gather_raw(ctx, g, x, y->data);
        } else { /* gathered as [n, outer, d, inner]: unpack to [outer, n*d, inner] */
            rt_tensor *tmp = scratch_like(ctx, x, x->numel * g->size);
            gather_raw(ctx, g, x, tmp->data);
            for (int r = 0; r < g->size; r++)
                rt_copy_block(esz_at(y, r * d * inner), esz_at(tmp, r * x->numel),
                              rt_dtype_size(x->dtype), outer, g->size * d * inner, d * inner,
                              d * inner);
            rt_free(ctx, tmp);
        }
    }
    rt_coll_record(ctx, RT_COLL_ALL_GATHER, &ks_, (double)bytes_of(y));
    return y;
}

/* ---- reduce_scatter */

static bool rs_via_allreduce(const rt_ctx *ctx, size_t bytes)
{
    return ctx->rs_algo == RT_RS_ALLREDUCE ||
           (ctx->rs_algo == RT_RS_AUTO && bytes >= ctx->rs_allreduce_min);
}

/* sum of the group's buffers, block `rank` of n contiguous blocks, into out */
static void rs_block(rt_ctx *ctx, rt_group *g, const void *in, int64_t total, rt_dtype dt,
                     void *out)
{
    int64_t blk = total / g->size;
    size_t esz = rt_dtype_size(dt);
    if (g->size == 1) {
        memcpy(out, in, (size_t)total * esz);
        return;
    }
    if (ctx->rs_algo == RT_RS_AUTO && rt_ring_applies(ctx, g, (size_t)total * esz)) {
        rt_ring_reduce_scatter(ctx, g, in, out, total, mpi_type(dt), mpi_op(ctx, RT_RED_SUM, dt));
        return;
    }
    if (!rs_via_allreduce(ctx, (size_t)total * esz)) {
        RT_CALL_MPI(ctx, coll_reduce_scatter_block(ctx, in, out, rt_mpi_count(ctx, blk), mpi_type(dt),
                                                   mpi_op(ctx, RT_RED_SUM, dt), g->comm));
        return;
    }
    rt_tensor *tmp = rt_scratch_tensor(ctx, dt, total);
    RT_CALL_MPI(ctx, rt_coll_allreduce(ctx, in, tmp->data, rt_mpi_count(ctx, total), mpi_type(dt),
                                    mpi_op(ctx, RT_RED_SUM, dt), g));
    memcpy(out, esz_at(tmp, g->rank * blk), (size_t)blk * esz);
    rt_free(ctx, tmp);
}

static void rs_dim(rt_ctx *ctx, rt_group *g, const rt_tensor *x, int dim, rt_tensor *y)
{
    int64_t outer, d, inner, m = y->shape[dim];
    size_t esz = rt_dtype_size(x->dtype);
    rt_split_dims(x, dim, &outer, &d, &inner);
    if (outer == 1) {
        rs_block(ctx, g, x->data, x->numel, x->dtype, y->data);
        return;
    }
    rt_tensor *tmp = scratch_like(ctx, x, x->numel);
    bool ring = ctx->rs_algo == RT_RS_AUTO && rt_ring_applies(ctx, g, (size_t)x->numel * esz);
    if (!ring && rs_via_allreduce(ctx, (size_t)x->numel * esz) && g->size > 1) { /* reduce, slice */
        RT_CALL_MPI(ctx, rt_coll_allreduce(ctx, x->data, tmp->data, rt_mpi_count(ctx, x->numel),
                                       mpi_type(x->dtype), mpi_op(ctx, RT_RED_SUM, x->dtype), g));
        rt_copy_block(y->data, esz_at(tmp, g->rank * m * inner), esz, outer, m * inner,
                      d * inner, m * inner);
    } else { /* pack [outer, n*m, inner] as [n, outer, m, inner] */
        for (int r = 0; r < g->size; r++)
            rt_copy_block(esz_at(tmp, r * y->numel), esz_at(x, r * m * inner), esz, outer,
                          m * inner, d * inner, m * inner);
        rs_block(ctx, g, tmp->data, x->numel, x->dtype, y->data);
    }
    rt_free(ctx, tmp);
}

/* reduce_scatter onto S(i) blocks split like torch.chunk: the operand packed
 * as the blocks in rank order, then the ring, MPI_Reduce_scatter with counts,
 * or an all-reduce and this rank's block */
static rt_tensor *rs_uneven(rt_ctx *ctx, rt_group *g, const rt_tensor *x, rt_axes axes, int dim)
{
    int64_t m = x->shape[dim], outer, d, inner, shape[RT_MAX_DIMS];
    size_t esz = rt_dtype_size(x->dtype);
    rt_blocks b = rt_blocks_of(ctx, axes, m);
    memcpy(shape, x->shape, sizeof shape);
    shape[dim] = b.ext[g->rank];
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, shape);
    rt_split_dims(x, dim, &outer, &d, &inner);
    int *cnt = counts_of(ctx, g->size, b.ext, outer * inner);
    rt_tensor *tmp = outer == 1 ? NULL : scratch_like(ctx, x, x->numel);
    for (int k = 0; tmp && k < g->size; k++) /* [outer, m, inner] to [n][outer, ext_k, inner] */
        rt_copy_block(esz_at(tmp, cnt[g->size + k]), esz_at(x, b.off[k] * inner), esz, outer,
                      b.ext[k] * inner, m * inner, b.ext[k] * inner);
    const void *in = tmp ? tmp->data : x->data;
    MPI_Datatype t = mpi_type(x->dtype);
    MPI_Op sum = mpi_op(ctx, RT_RED_SUM, x->dtype);
    size_t bytes = (size_t)x->numel * esz;
    if (ctx->rs_algo == RT_RS_AUTO && rt_ring_applies(ctx, g, bytes)) {
        int64_t *rows = malloc((size_t)g->size * sizeof *rows);
        RT_CHECK(ctx, rows != NULL, "out of memory");
        for (int k = 0; k < g->size; k++)
            rows[k] = cnt[k];
        rt_ring_reduce_scatterv(ctx, g, in, y->data, rows, t, sum);
        free(rows);
    } else if (!rs_via_allreduce(ctx, bytes)) {
        RT_CALL_MPI(ctx, coll_reduce_scatter(ctx, in, y->data, cnt, t, sum, g->comm));
    } else {
        rt_tensor *all = rt_scratch_tensor(ctx, x->dtype, x->numel);
        RT_CALL_MPI(ctx, rt_coll_allreduce(ctx, in, all->data, rt_mpi_count(ctx, x->numel), t, sum, g));
        memcpy(y->data, esz_at(all, cnt[g->size + g->rank]), (size_t)y->numel * esz);
        rt_free(ctx, all);
    }
    rt_free(ctx, tmp);
    free(cnt);
    rt_blocks_free(&b);
    return y;
}

rt_tensor *rt_reduce_scatter(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int dim,
                             rt_reduce_op op)
{
    rt_group *g = rt_group_get(ctx, axes);
    dim = rt_coll_check_dim(ctx, x, dim, "reduce_scatter");
    rt_reduce_scatter_check(ctx, x, op);
    if (g->size == 1 && dim != RT_STACK)
        return rt_retain((rt_tensor *)x);
    rt_kspan ks_ = rt_kernel_begin(ctx);
    int64_t shape[RT_MAX_DIMS];
    rt_tensor *y;
    if (dim == RT_STACK) {
        rt_coll_check_stack(ctx, x, g->size, "reduce_scatter");
        rt_coll_check_same(ctx, g, x, "reduce_scatter");
        y = rt_empty(ctx, x->dtype, x->ndim - 1, x->shape + 1);
        rs_block(ctx, g, x->data, x->numel, x->dtype, y->data);
    } else if (x->shape[dim] % g->size != 0) {
        y = rs_uneven(ctx, g, x, axes, dim);
    } else {
        memcpy(shape, x->shape, sizeof shape);
        shape[dim] = rt_coll_split(ctx, x, dim, g->size, "reduce_scatter");
        y = rt_empty(ctx, x->dtype, x->ndim, shape);
        rs_dim(ctx, g, x, dim, y);
    }
    if (op == RT_RED_AVG && g->size > 1)
        scale_inplace(y, 1.0 / g->size);
    rt_coll_record(ctx, RT_COLL_REDUCE_SCATTER, &ks_, (double)bytes_of(x));
    return y;
}

/* ---- all_to_all */

static void a2a_raw(rt_ctx *ctx, rt_group *g, const void *in, int64_t total, rt_dtype dt,
                    void *out)
{
    if (g->size == 1) {
        memcpy(out, in, (size_t)total * rt_dtype_size(dt));
        return;
    }
    int c = rt_mpi_count(ctx, total / g->size);
    RT_CALL_MPI(ctx, coll_alltoall(ctx, in, c, mpi_type(dt), out, g->comm));
}

/* S(i) -> S(j): chunk k of dim j goes to block k; received chunks concatenate on dim i */
static rt_tensor *a2a_dims(rt_ctx *ctx, rt_group *g, const rt_tensor *x, int si, int dj)
{
    int n = g->size;
    size_t esz = rt_dtype_size(x->dtype);
    int64_t chunk[RT_MAX_DIMS], shape[RT_MAX_DIMS], oj, d, ij;
    int64_t m = rt_all_to_all_shapes(ctx, x, si, dj, n, chunk, shape);
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, shape);
    int64_t blk = x->numel / n;
    rt_tensor *send = NULL, *recv = NULL;
    const void *sbuf = x->data;
    rt_split_dims(x, dj, &oj, &d, &ij);
    if (oj > 1) {
        send = scratch_like(ctx, x, x->numel);
        for (int k = 0; k < n; k++)
            rt_copy_block(esz_at(send, k * blk), esz_at(x, k * m * ij), esz, oj, m * ij,
                          d * ij, m * ij);
        sbuf = send->data;
    }
    int64_t oi = rt_numel_of(si, chunk), di = chunk[si];
    int64_t ii = rt_numel_of(x->ndim - si - 1, chunk + si + 1);
    if (oi == 1) {
        a2a_raw(ctx, g, sbuf, x->numel, x->dtype, y->data);
    } else {
        recv = scratch_like(ctx, x, x->numel);
        a2a_raw(ctx, g, sbuf, x->numel, x->dtype, recv->data);
        for (int k = 0; k < n; k++)
            rt_copy_block(esz_at(y, k * di * ii), esz_at(recv, k * blk), esz, oi, n * di * ii,
                          di * ii, di * ii);
    }
    rt_free(ctx, send);
    rt_free(ctx, recv);
    return y;
}

/* S(i) -> S(j) with blocks split like torch.chunk on either dim
 * (MPI_Alltoallv): block k of dim j goes to member k; the blocks received
 * (member k's rows of dim i) concatenate on dim i, of extent `extent` */
static rt_tensor *a2a_uneven(rt_ctx *ctx, rt_group *g, const rt_tensor *x, rt_axes axes, int si,
                             int dj, int64_t extent)
{
    int n = g->size;
    size_t esz = rt_dtype_size(x->dtype);
    rt_blocks bi = rt_blocks_of(ctx, axes, extent), bj = rt_blocks_of(ctx, axes, x->shape[dj]);
    rt_coll_check_block(ctx, x, si, bi.ext[g->rank], extent, n, "all_to_all");
    int64_t shape[RT_MAX_DIMS], oj, mj, ij;
    memcpy(shape, x->shape, sizeof shape);
    shape[si] = extent;
    shape[dj] = bj.ext[g->rank];
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, shape);
    rt_split_dims(x, dj, &oj, &mj, &ij);
    int *scnt = counts_of(ctx, n, bj.ext, oj * ij);
    rt_tensor *send = scratch_like(ctx, x, x->numel);
    for (int k = 0; k < n; k++) /* block k of dim j, contiguous */
        rt_copy_block(esz_at(send, scnt[n + k]), esz_at(x, bj.off[k] * ij), esz, oj, bj.ext[k] * ij,
                      mj * ij, bj.ext[k] * ij);
    int64_t oi, di, ii;
    rt_split_dims(y, si, &oi, &di, &ii);
    int *rcnt = counts_of(ctx, n, bi.ext, oi * ii);
    rt_tensor *recv = scratch_like(ctx, x, y->numel);
    RT_CALL_MPI(ctx, coll_alltoallv(ctx, send->data, scnt, scnt + n, mpi_type(x->dtype), recv->data, rcnt,
                                    rcnt + n, g->comm));
    for (int k = 0; k < n; k++) /* member k's [oi, ext_k, ii] into dim i */
        rt_copy_block(esz_at(y, bi.off[k] * ii), esz_at(recv, rcnt[n + k]), esz, oi, di * ii,
                      bi.ext[k] * ii, bi.ext[k] * ii);
    rt_free(ctx, send);
    rt_free(ctx, recv);
    free(scnt);
    free(rcnt);
    rt_blocks_free(&bi);
    rt_blocks_free(&bj);
    return y;
}

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
        (extent % g->size != 0 || x->shape[dst_dim] % g->size != 0)) {
        rt_kspan ks_ = rt_kernel_begin(ctx);
        rt_tensor *y = a2a_uneven(ctx, g, x, axes, src_dim, dst_dim, extent);
        rt_coll_record(ctx, RT_COLL_ALL_TO_ALL, &ks_, (double)bytes_of(x));
        return y;
    }
    if (src_dim != RT_STACK && extent >= 0)
        rt_coll_check_block(ctx, x, src_dim, extent / g->size, extent, g->size, "all_to_all");
    if (g->size == 1 && src_dim != RT_STACK)
        return rt_retain((rt_tensor *)x);
    rt_kspan ks_ = rt_kernel_begin(ctx);
    rt_tensor *y;
    if (src_dim == RT_STACK) {
        rt_coll_check_stack(ctx, x, g->size, "all_to_all");
        rt_coll_check_same(ctx, g, x, "all_to_all");
        y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
        a2a_raw(ctx, g, x->data, x->numel, x->dtype, y->data);
    } else {
        y = a2a_dims(ctx, g, x, src_dim, dst_dim);
    }
    rt_coll_record(ctx, RT_COLL_ALL_TO_ALL, &ks_, (double)bytes_of(x));
    return y;
}

/* ---- ppermute */

static int coll_sendrecv(rt_ctx *ctx, const void *in, void *out, int n, MPI_Datatype t, int to, int from,
                         MPI_Comm c)
{
    enum { TAG = 0x5050 }; /* every rank of c issues the same sequence: MPI keeps their order */
    if (!ctx->wait_sleep)
        return MPI_Sendrecv(in, n, t, to, TAG, out, n, t, from, TAG, c, MPI_STATUS_IGNORE);
    MPI_Request r[2];
    int rc = MPI_Irecv(out, n, t, from, TAG, c, &r[0]);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = MPI_Isend(in, n, t, to, TAG, c, &r[1]);
    if (rc != MPI_SUCCESS)
        return rc;
    rc = rt_mpi_wait(ctx, &r[1]);
    return rc != MPI_SUCCESS ? rc : rt_mpi_wait(ctx, &r[0]);
}

rt_tensor *rt_ppermute(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int64_t shift)
{
    rt_group *g = rt_group_get(ctx, axes);
    int64_t n = g->size, s = ((shift % n) + n) % n;
    if (s == 0)
        return rt_retain((rt_tensor *)x);
    rt_kspan ks_ = rt_kernel_begin(ctx);
    rt_tensor *y = rt_empty(ctx, x->dtype, x->ndim, x->shape);
    int to = (int)((g->rank + s) % n), from = (int)((g->rank - s + n) % n);
    RT_CALL_MPI(ctx, coll_sendrecv(ctx, x->data, y->data, rt_mpi_count(ctx, x->numel), mpi_type(x->dtype), to, from,
                                   g->comm));
    rt_coll_record(ctx, RT_COLL_PPERMUTE, &ks_, (double)bytes_of(x));
    return y;
}
