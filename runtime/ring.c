/* Large all-reduces and reduce-scatters as rings over point-to-point
 * messages, through memory that stays mapped (docs/runtime.md "Page
 * faults").
 *
 * Open MPI's collectives malloc a temporary per call: its ring all-reduce
 * one of message / group size, its recursive-doubling and reduce-then-
 * scatter algorithms one of the whole message. Under the runtime's malloc
 * policy (mesh.c) a temporary under the mmap threshold comes from the heap,
 * which is kept, and is reused by the next call; one from the threshold up
 * is a mapping of its own, returned when freed, so every call faults it in
 * afresh (tp_mlp on dp=2: 4,067 page faults per step, 7 MiB per gradient).
 * From ctx->ring_min bytes (the mmap threshold; SPMD_RING_MIN_KB for tests)
 * the runtime reduces without MPI's collectives: a ring of the group's
 * ranks, each sending to the next and receiving from the previous, in
 * messages of at most RT_RING_CHUNK bytes, every received piece combined
 * with MPI_Reduce_local (so bf16's MPI_Ops serve too), the next piece in
 * flight meanwhile. Received pieces land in the result itself, or, when the
 * all-reduce is in place, in a scratch of two pieces allocated once and
 * touched at once (ctx->ring_scratch).
 *
 * The data are split into n blocks (block k: n / p elements, one more for
 * the first n % p; a reduce-scatter's blocks are its result's, which split
 * like torch.chunk when the dim is uneven: rt_ring_reduce_scatterv). Reduce-scatter phase, steps s = 0..p-2: rank r sends
 * block (r - 1 - s) mod p (its own data at s = 0, else what it combined
 * at step s - 1) and receives block (r - 2 - s) mod p, which it combines
 * with its own data; after p - 1 steps block r holds the whole reduction.
 * All-gather phase, steps s = 0..p-2: rank r sends block (r - s) mod p
 * and receives block (r - s - 1) mod p into the result. Each element is
 * combined in a fixed order (its block's ring order), so results are
 * deterministic; on a group of 2 every element is one a + b, the same
 * bits as any MPI algorithm's. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "rt_internal.h"

static int64_t blk_len(int64_t n, int p, int k)
{
    return n / p + (k < n % p);
}

static int64_t blk_off(int64_t n, int p, int k)
{
    return (int64_t)k * (n / p) + (k < n % p ? k : n % p);
}

/* The blocks of a reduce phase: the ring's own split (len == NULL), or the
 * given per-rank lengths, contiguous in rank order (a reduce-scatter's
 * torch.chunk split, collectives.c) */
typedef struct ring_blocks {
    int64_t n;
    int p;
    const int64_t *len, *off;
    int64_t most;
} ring_blocks;

static int64_t b_len(const ring_blocks *b, int k)
{
    return b->len ? b->len[k] : blk_len(b->n, b->p, k);
}

static int64_t b_off(const ring_blocks *b, int k)
{
    return b->len ? b->off[k] : blk_off(b->n, b->p, k);
}

static char *scratch(rt_ctx *ctx)
{
    if (!ctx->ring_scratch) {
        ctx->ring_scratch = aligned_alloc(64, 2 * RT_RING_CHUNK);
        RT_CHECK(ctx, ctx->ring_scratch != NULL, "out of memory for the collectives' scratch");
        memset(ctx->ring_scratch, 0, 2 * RT_RING_CHUNK); /* mapped now, not in a step */
    }
    return ctx->ring_scratch;
}

/* One step of the ring: send ns elements from send to the next rank while
 * receiving nr from the previous one, piece by piece. Without op the
 * pieces land in recv. With op, piece c of the received data is combined
 * into dst: dst = own op received, where own is dst itself (the pieces
 * then arrive in the scratch) or, when own != NULL, own (the pieces arrive
 * in dst). */
typedef struct ring_step {
    const char *send;
    int64_t ns;
    char *recv; /* = dst when combining */
    int64_t nr;
    int64_t most; /* the largest block: every rank cuts it into the same pieces */
    const char *own;
    bool combine;
} ring_step;

static void step(rt_ctx *ctx, rt_group *g, const ring_step *st, MPI_Datatype t, MPI_Op op,
                 size_t es)
{
    int next = (g->rank + 1) % g->size, prev = (g->rank + g->size - 1) % g->size;
    int64_t per = (int64_t)(RT_RING_CHUNK / es);
    int64_t pieces = (st->most + per - 1) / per;
    bool via_scratch = st->combine && !st->own;
    char *sc = via_scratch ? scratch(ctx) : NULL;
    MPI_Request req[4];
    for (int64_t c = 0; c <= pieces; c++) {
        /* start piece c (while piece c - 1 is combined), then finish c - 1 */
        if (c < pieces) {
            int64_t a = c * per;
            int64_t ls = st->ns > a ? (st->ns - a < per ? st->ns - a : per) : 0;
            int64_t lr = st->nr > a ? (st->nr - a < per ? st->nr - a : per) : 0;
            char *into = via_scratch ? sc + (size_t)(c % 2) * RT_RING_CHUNK : st->recv + (size_t)a * es;
            MPI_Request *r = req + 2 * (c % 2);
            RT_CALL_MPI(ctx, MPI_Irecv(into, (int)lr, t, prev, 0, g->comm, &r[0]));
            RT_CALL_MPI(ctx, MPI_Isend(st->send + (size_t)a * es, (int)ls, t, next, 0, g->comm, &r[1]));
        }
        if (c == 0)
            continue;
        int64_t d = c - 1, a = d * per;
        RT_CALL_MPI(ctx, rt_mpi_waitall(ctx, 2, req + 2 * (d % 2)));
        int64_t lr = st->nr > a ? (st->nr - a < per ? st->nr - a : per) : 0;
        if (!st->combine || lr == 0)
            continue;
        char *dst = st->recv + (size_t)a * es;
        const char *other = via_scratch ? sc + (size_t)(d % 2) * RT_RING_CHUNK : st->own + (size_t)a * es;
        RT_CALL_MPI(ctx, MPI_Reduce_local(other, dst, (int)lr, t, op));
    }
}

bool rt_ring_applies(const rt_ctx *ctx, const rt_group *g, size_t bytes)
{
    return g->size > 1 && bytes >= ctx->ring_min;
}

/* the reduce-scatter phase: afterwards block r of work holds the whole
 * reduction (work == in: in place); final, when not NULL, receives block r
 * instead of work */
static void reduce_phase(rt_ctx *ctx, rt_group *g, const char *in, char *work, char *final,
                         const ring_blocks *b, MPI_Datatype t, MPI_Op op, size_t es)
{
    int p = g->size, r = g->rank;
    bool in_place = in == work;
    for (int s = 0; s < p - 1; s++) {
        int sb = ((r - 1 - s) % p + p) % p, rb = ((r - 2 - s) % p + p) % p;
        ring_step st = {
            .send = (s == 0 ? in : work) + (size_t)b_off(b, sb) * es,
            .ns = b_len(b, sb),
            .recv = (final && s == p - 2 ? final : work + (size_t)b_off(b, rb) * es),
            .nr = b_len(b, rb),
            .most = b->most,
            .own = in_place ? NULL : in + (size_t)b_off(b, rb) * es,
            .combine = true,
        };
        step(ctx, g, &st, t, op, es);
    }
}

void rt_ring_allreduce(rt_ctx *ctx, rt_group *g, const void *in, void *out, int64_t n,
                       MPI_Datatype t, MPI_Op op)
{
    int sz, p = g->size, r = g->rank;
    RT_CALL_MPI(ctx, MPI_Type_size(t, &sz));
    size_t es = (size_t)sz;
    RT_CHECK(ctx, RT_RING_CHUNK / es <= INT_MAX, "ring piece too large");
    char *o = out;
    const char *i = in == MPI_IN_PLACE ? o : in;
    ring_blocks b = {.n = n, .p = p, .most = blk_len(n, p, 0)};
    reduce_phase(ctx, g, i, o, NULL, &b, t, op, es);
    for (int s = 0; s < p - 1; s++) {
        int sb = ((r - s) % p + p) % p, rb = ((r - s - 1) % p + p) % p;
        ring_step st = {.send = o + (size_t)blk_off(n, p, sb) * es, .ns = blk_len(n, p, sb),
                        .recv = o + (size_t)blk_off(n, p, rb) * es, .nr = blk_len(n, p, rb),
                        .most = blk_len(n, p, 0)};
        step(ctx, g, &st, t, op, es);
    }
}

void rt_ring_reduce_scatter(rt_ctx *ctx, rt_group *g, const void *in, void *out, int64_t n,
                            MPI_Datatype t, MPI_Op op)
{
    RT_CHECK(ctx, n % g->size == 0, "reduce_scatter: %lld elements in %d blocks", (long long)n,
             g->size);
    int64_t *len = malloc(2 * (size_t)g->size * sizeof *len);
    RT_CHECK(ctx, len != NULL, "out of memory");
    for (int k = 0; k < g->size; k++)
        len[k] = n / g->size;
    rt_ring_reduce_scatterv(ctx, g, in, out, len, t, op);
    free(len);
}

void rt_ring_reduce_scatterv(rt_ctx *ctx, rt_group *g, const void *in, void *out,
                             const int64_t *counts, MPI_Datatype t, MPI_Op op)
{
    int sz;
    RT_CALL_MPI(ctx, MPI_Type_size(t, &sz));
    size_t es = (size_t)sz;
    int64_t *off = malloc((size_t)g->size * sizeof *off);
    RT_CHECK(ctx, off != NULL, "out of memory");
    ring_blocks b = {.p = g->size, .len = counts, .off = off};
    for (int k = 0; k < g->size; k++) {
        off[k] = b.n;
        b.n += counts[k];
        b.most = counts[k] > b.most ? counts[k] : b.most;
    }
    /* blocks other than r pass through a pooled buffer (groups above 2) */
    rt_tensor *work = NULL;
    if (g->size > 2) {
        int64_t bytes = (int64_t)((size_t)b.n * es);
        work = rt_empty(ctx, RT_I32, 1, (int64_t[]){(bytes + 3) / 4});
    }
    reduce_phase(ctx, g, in, work ? work->data : NULL, out, &b, t, op, es);
    rt_free(ctx, work);
    free(off);
}

void rt_ring_free(rt_ctx *ctx)
{
    free(ctx->ring_scratch);
    ctx->ring_scratch = NULL;
}
