/* Non-blocking all_reduce with bucketing (docs/runtime.md "Overlap").
 *
 * rt_all_reduce_start returns the result tensor at once; its data are valid
 * after rt_wait(ctx, result), which generated code calls right before the
 * result's first use (rt_free waits too). rt_all_reduce_start_reuse, for an
 * input that dies at the call, reduces in the input's buffer (MPI_IN_PLACE;
 * the result is the input) when the caller holds its only reference. An input of at least the bucket
 * size starts its own MPI_Iallreduce; smaller ones are copied into the open
 * bucket of their (communicator, op, dtype), which starts as one
 * MPI_Iallreduce (in place) when it reaches the bucket size, at rt_flush
 * (generated backward functions call it before returning), when one of its
 * results is waited for, or before a blocking collective. Results are
 * elementwise sums in whatever order MPI reduces; tests check that they are
 * bit-identical to the blocking rt_all_reduce's. While requests are in
 * flight, kernels call rt_progress, which tests them so that MPI advances
 * its schedules between kernels.
 *
 * A request larger than the piece size (SPMD_PIECE_KB, default 2048; 0: no
 * pieces) starts only its first piece (an MPI_Iallreduce of that many
 * bytes); the wait reduces the rest with one blocking MPI_Allreduce. Open
 * MPI's libnbc mallocs a temporary as large as the message for each
 * request, which for whole gradients cost as much memory as the gradients
 * themselves; its blocking algorithms work in small segments. (Pieces
 * after the first as further MPI_Iallreduces, one at a time, were slower
 * than the blocking call: each needs several MPI_Test rounds. They could
 * only start where every rank starts them in the same order anyway --
 * collectives on a communicator must be called in one order on all ranks
 * -- not when MPI_Test happens to find the last one done.)
 *
 * SPMD_OVERLAP=0 makes rt_all_reduce_start the blocking rt_all_reduce
 * (the blocking schedule, same binary); SPMD_BUCKET_KB sets the bucket size
 * (default 1024; 0 disables bucketing). */
#include <stdlib.h>
#include <string.h>

#include "rt_cpu.h"

static size_t bytes_of(const rt_tensor *x)
{
    return (size_t)x->numel * rt_dtype_size(x->dtype);
}

static void *grow(rt_ctx *ctx, void *p, int *cap, int need, size_t each)
{
    if (need <= *cap)
        return p;
    int c = *cap ? 2 * *cap : 8;
    while (c < need)
        c *= 2;
    void *q = realloc(p, (size_t)c * each);
    RT_CHECK(ctx, q != NULL, "out of memory for pending collectives");
    *cap = c;
    return q;
}

/* ---- requests: one MPI_Iallreduce each (a large tensor, or a bucket) */

static int new_request(rt_ctx *ctx, rt_group *g, rt_reduce_op op, rt_dtype dt)
{
    rt_overlap *o = &ctx->tgt->ov;
    o->reqs = grow(ctx, o->reqs, &o->cap_reqs, o->nreqs + 1, sizeof *o->reqs);
    rt_request *r = &o->reqs[o->nreqs];
    *r = (rt_request){.req = MPI_REQUEST_NULL, .group = g, .op = op, .dtype = dt, .open = true};
    return o->nreqs++;
}

/* starts the piece [r->at, r->at + r->piece) */
static void start_piece(rt_ctx *ctx, rt_request *r)
{
    size_t es = rt_dtype_size(r->dtype);
    void *send = r->in ? (char *)r->in->data + (size_t)r->at * es : MPI_IN_PLACE;
    RT_CALL_MPI(ctx, MPI_Iallreduce(send, (char *)r->buf->data + (size_t)r->at * es,
                                    rt_mpi_count(ctx, r->piece),
                                    rt_mpi_type(r->dtype), rt_mpi_op(ctx, r->op, r->dtype),
                                    r->group->comm, &r->req));
    r->done = false;
}

/* after the first piece completed: the rest of the request in one blocking
 * all-reduce (MPI's blocking algorithms work in small segments: no
 * temporary of the message's size) */
static void finish_rest(rt_ctx *ctx, rt_request *r)
{
    int64_t at = r->at + r->piece, rest = r->count - at;
    if (rest <= 0)
        return;
    size_t es = rt_dtype_size(r->dtype);
    RT_CALL_MPI(ctx, rt_coll_allreduce(ctx, r->in ? (char *)r->in->data + (size_t)at * es : MPI_IN_PLACE,
                                       (char *)r->buf->data + (size_t)at * es, rt_mpi_count(ctx, rest),
                                       rt_mpi_type(r->dtype), rt_mpi_op(ctx, r->op, r->dtype),
                                       r->group));
    r->at = r->count;
}

static void start_request(rt_ctx *ctx, rt_request *r)
{
    if (!r->open)
        return;
    rt_kspan ks_ = rt_kernel_begin(ctx);
    r->t_start = rt_now();
    /* in pieces of at most piece_bytes, one at a time: MPI's non-blocking
     * all-reduce (Open MPI's libnbc) mallocs a temporary of the whole
     * message per request, so a piece bounds that memory */
    int64_t per = ctx->tgt->ov.piece_bytes ? (int64_t)(ctx->tgt->ov.piece_bytes / rt_dtype_size(r->dtype)) : 0;
    r->at = 0;
    r->piece = per > 0 && per < r->count ? per : r->count;
    start_piece(ctx, r);
    r->open = false;
    ctx->stats[RT_COLL_ALL_REDUCE].count += 1;
    ctx->stats[RT_COLL_ALL_REDUCE].bytes += (double)r->count * rt_dtype_size(r->dtype);
    rt_coll_record_part(ctx, "all_reduce (start)", &ks_, (double)r->count * rt_dtype_size(r->dtype));
}

/* the open bucket of (group, op, dtype), or -1 */
static int open_bucket(rt_ctx *ctx, rt_group *g, rt_reduce_op op, rt_dtype dt)
{
    rt_overlap *o = &ctx->tgt->ov;
    for (int i = 0; i < o->nreqs; i++) {
        rt_request *r = &o->reqs[i];
        if (r->open && r->bucket && r->group == g && r->op == op && r->dtype == dt)
            return i;
    }
    return -1;
}

/* in_place: the result is x itself (the caller's reference is x's only one) */
static rt_tensor *start(rt_ctx *ctx, rt_tensor *x, rt_axes axes, rt_reduce_op op, bool in_place)
{
    rt_group *g = rt_group_get(ctx, axes);
    rt_all_reduce_check(ctx, x, op);
    if (g->size == 1)
        return rt_retain(x);
    if (!ctx->tgt->ov.enabled)
        return in_place ? rt_all_reduce_reuse(ctx, x, axes, op) : rt_all_reduce(ctx, x, axes, op);
    rt_overlap *o = &ctx->tgt->ov;
    rt_tensor *y = in_place ? rt_retain(x) : rt_empty(ctx, x->dtype, x->ndim, x->shape);
    o->members = grow(ctx, o->members, &o->cap_members, o->nmembers + 1, sizeof *o->members);
    rt_member *m = &o->members[o->nmembers];
    *m = (rt_member){.out = y, .op = op, .group_size = g->size};
    size_t bytes = bytes_of(x);
    if (bytes >= o->bucket_bytes) { /* its own request, out of place from x or in place */
        int k = new_request(ctx, g, op, x->dtype);
        rt_request *r = &o->reqs[k];
        r->in = in_place ? NULL : rt_retain(x); /* MPI reads it until the wait */
        r->buf = y;                        /* borrowed: rt_free(y) waits first */
        r->count = x->numel;
        m->req = k;
        o->nmembers++;
        start_request(ctx, r);
        return y;
    }
    int k = open_bucket(ctx, g, op, x->dtype);
    if (k < 0) {
        k = new_request(ctx, g, op, x->dtype);
        rt_request *r = &o->reqs[k];
        r->bucket = true;
        int64_t cap = (int64_t)(o->bucket_bytes / rt_dtype_size(x->dtype));
        r->buf = rt_scratch_tensor(ctx, x->dtype, cap); /* the runtime's buffer, not counted */
    }
    rt_request *r = &o->reqs[k];
    if ((size_t)(r->count + x->numel) * rt_dtype_size(x->dtype) > o->bucket_bytes) {
        start_request(ctx, r); /* full: a new bucket for this one */
        k = new_request(ctx, g, op, x->dtype);
        r = &o->reqs[k];
        r->bucket = true;
        int64_t cap = (int64_t)(o->bucket_bytes / rt_dtype_size(x->dtype));
        r->buf = rt_scratch_tensor(ctx, x->dtype, cap); /* the runtime's buffer, not counted */
    }
    m->req = k;
    m->offset = r->count;
    memcpy((char *)r->buf->data + (size_t)r->count * rt_dtype_size(x->dtype), x->data, bytes);
    r->count += x->numel;
    o->nmembers++;
    return y;
}

rt_tensor *rt_all_reduce_start(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_reduce_op op)
{
    return start(ctx, (rt_tensor *)x, axes, op, false);
}

rt_tensor *rt_all_reduce_start_reuse(rt_ctx *ctx, rt_tensor *x, rt_axes axes, rt_reduce_op op)
{
    return start(ctx, x, axes, op, rt_writable(x) && !rt_pending(ctx, x));
}

void rt_flush(rt_ctx *ctx)
{
    rt_overlap *o = &ctx->tgt->ov;
    for (int i = 0; i < o->nreqs; i++)
        if (o->reqs[i].open)
            start_request(ctx, &o->reqs[i]);
}

/* completes request k: waits, copies bucket members out, releases buffers */
static void complete(rt_ctx *ctx, int k)
{
    rt_overlap *o = &ctx->tgt->ov;
    rt_request *r = &o->reqs[k];
    if (r->open)
        start_request(ctx, r);
    rt_kspan ks_ = rt_kernel_begin(ctx);
    if (!r->done)
        RT_CALL_MPI(ctx, rt_mpi_wait(ctx, &r->req));
    finish_rest(ctx, r);
    double now = rt_now();
    ctx->stats[RT_COLL_ALL_REDUCE].inflight += now - r->t_start;
    for (int i = 0; i < o->nmembers; i++) {
        rt_member *m = &o->members[i];
        if (m->req != k)
            continue;
        if (r->bucket)
            memcpy(m->out->data, (char *)r->buf->data + (size_t)m->offset * rt_dtype_size(r->dtype),
                   bytes_of(m->out));
        if (m->op == RT_RED_AVG)
            rt_scale_inplace(m->out, 1.0 / m->group_size);
        o->members[i] = o->members[--o->nmembers]; /* unordered */
        i--;
    }
    rt_tensor *in = r->in, *buf = r->bucket ? r->buf : NULL;
    o->reqs[k] = o->reqs[--o->nreqs]; /* request k is gone; members of the moved one follow */
    for (int i = 0; i < o->nmembers; i++)
        if (o->members[i].req == o->nreqs)
            o->members[i].req = k;
    rt_coll_record_part(ctx, "all_reduce (wait)", &ks_, 0);
    rt_free(ctx, in);
    rt_free(ctx, buf);
}

static int member_of(const rt_ctx *ctx, const rt_tensor *t)
{
    for (int i = 0; i < ctx->tgt->ov.nmembers; i++)
        if (ctx->tgt->ov.members[i].out == t)
            return i;
    return -1;
}

void rt_wait(rt_ctx *ctx, const rt_tensor *t)
{
    if (!t || ctx->tgt->ov.nmembers == 0)
        return;
    int i = member_of(ctx, t);
    if (i >= 0) {
        rt_count_sync(ctx); /* a blocking wait (--profile) */
        complete(ctx, ctx->tgt->ov.members[i].req);
    }
}

bool rt_pending(const rt_ctx *ctx, const rt_tensor *t)
{
    return ctx->tgt->ov.nmembers > 0 && member_of(ctx, t) >= 0;
}

void rt_wait_all(rt_ctx *ctx)
{
    if (ctx->tgt->ov.nreqs > 0)
        rt_count_sync(ctx);
    while (ctx->tgt->ov.nreqs > 0)
        complete(ctx, ctx->tgt->ov.nreqs - 1);
}

void rt_progress(rt_ctx *ctx)
{
    rt_overlap *o = &ctx->tgt->ov;
    for (int i = 0; i < o->nreqs; i++) {
        rt_request *r = &o->reqs[i];
        if (r->open || r->done)
            continue;
        int flag = 0;
        RT_CALL_MPI(ctx, MPI_Test(&r->req, &flag, MPI_STATUS_IGNORE));
        r->done = flag != 0; /* this piece; the next ones start at the wait */
    }
}

/* The async hook (tensor.c): requests in flight advance between kernels; a
 * buffer a request still writes is waited for before it is released. */
static void overlap_hook(rt_ctx *ctx, rt_async_event ev, rt_tensor *t)
{
    if (ev == RT_ASYNC_ALLOC) {
        if (ctx->tgt->ov.nreqs > 0)
            rt_progress(ctx);
    } else if (ctx->tgt->ov.nmembers > 0 && rt_pending(ctx, t)) { /* MPI still writes it */
        int refs = t->refs;
        t->refs = 1;
        rt_wait(ctx, t);
        t->refs = refs;
    }
}

void rt_overlap_setup(rt_ctx *ctx)
{
    ctx->async = overlap_hook;
    const char *e = getenv("SPMD_OVERLAP");
    ctx->tgt->ov.enabled = ctx->mpi && !(e && strcmp(e, "0") == 0);
    const char *b = getenv("SPMD_BUCKET_KB");
    ctx->tgt->ov.bucket_bytes = (b ? (size_t)strtoull(b, NULL, 10) : 1024) << 10;
    const char *pc = getenv("SPMD_PIECE_KB");
    ctx->tgt->ov.piece_bytes = (pc ? (size_t)strtoull(pc, NULL, 10) : 2048) << 10;
}

void rt_overlap_free(rt_ctx *ctx)
{
    rt_wait_all(ctx);
    free(ctx->tgt->ov.reqs);
    free(ctx->tgt->ov.members);
    memset(&ctx->tgt->ov, 0, sizeof ctx->tgt->ov);
}
