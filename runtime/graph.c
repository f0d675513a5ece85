/* Graph regions (spmdrt.h rt_region_begin, docs/runtime.md "Graph regions").
 *
 * Each region of a loop's body (spmdc marks them: device work only, host
 * arithmetic hoisted before it) goes through
 *   1. a warm-up: its first iteration runs eagerly while the target reports
 *      every wait for the device (rt_graph_host_sync); if there was one, the
 *      region stays eager for good and rank 0 says why, once;
 *   2. a capture: the second iteration's host code runs with the target
 *      recording instead of launching (a CUDA graph; the simulation build
 *      records its launches), every buffer it frees kept for the graph (the
 *      pool never hands them out again); then the graph runs once;
 *   3. replays: each later iteration copies its inputs into the buffers the
 *      graph reads (unless they are those buffers), releases what the
 *      region's code would have released, launches the graph, and hands out
 *      the graph's result buffers.
 * Host numbers: the generated code passes the ones a kernel can read from
 * device memory (random seeds, rt_binary_scalar's scalar, fused kernels'
 * host numbers) through rt_slot_f/rt_slot_i, and names every other host
 * number a device operation takes by value, and each host `if` and `for`
 * bound inside the region's callees, with rt_guard. The warm-up counts the
 * slots; the capture gives each its slot of the region's device table (its
 * value in a pinned host buffer, whose copy to the table is the graph's
 * first node) and records the guards. Before each replay the region's fill
 * (the compiler's copy of the region's host arithmetic alone, without its
 * device work) runs from the loop's host scalars and calls the same
 * functions in the same order: the slots' new values go to the pinned
 * buffer, the guards are compared. Right after the capture the fill runs
 * once from the captured scalars and must give the captured values (an
 * internal check of the compiler's copy).
 * A replay is refused (the iteration runs eagerly, with the same results)
 * when a guard differs from the captured one (without a fill: when a host
 * scalar of the region does), or when a buffer the graph writes is still
 * held by the program (a result of the previous replay kept somewhere): the region
 * holds a reference to each buffer it reads or writes, and a replay needs
 * every other reference to be one the region's code would drop.
 * SPMD_GRAPHS=0 turns all of it off (every region eager, as the CPU target). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_graph.h"

enum { R_NEW, R_WARM, R_READY, R_CAPTURED, R_EAGER };
enum { NOTE_EAGER = 1, NOTE_HOST = 2, NOTE_HELD = 4 };

struct rt_graph_region {
    char *label;
    int state;
    int iter;
    rt_tensor **in, **out, **warm; /* held: the graph's inputs and results; a warm-up's inputs */
    int nin, nout, nwarm;
    bool *written; /* per input: the capture wrote over it (rt_reuse): the graph updates it in place */
    uint64_t *host;
    int nhost;
    rt_region_fill fill;
    /* the slot table: nslots device slots (the warm-up's count), their
     * pinned host copy and its upload's event; fillbuf: a fill's values */
    int nslots, used;
    uint64_t *slot_dev, *slot_pin, *fillbuf;
    void *slot_ev;
    bool overflow;
    /* the guards: the captured numbers and their names; gi: a fill's next */
    uint64_t *guards;
    const char **guard_names;
    int nguards, capguards, gi, bad;
    void *graph;
    void **priv; /* buffers freed during the capture: the graph's scratch */
    size_t *privcap;
    int npriv, cappriv;
    long replays, eager_runs;
    long copies; /* inputs copied into the captured buffers, over all replays */
    /* --profile: the device operations its capture recorded, by kind
     * (rt_count_op during the capture): a replay adds them, as the eager
     * iteration's launches would have been counted one by one */
    double ops[RT_NOPS];
    int capture_iter;
    unsigned noted;
    struct rt_graph_region *next;
};

struct rt_graphs {
    int enabled;            /* SPMD_GRAPHS */
    bool verbose;           /* SPMD_GRAPHS_VERBOSE=1: a summary at the end */
    rt_graph_region *list;
    rt_graph_region *probe;       /* in its warm-up */
    char *probe_why;
    rt_graph_region *capture;     /* being captured */
    rt_graph_region *filling;     /* its fill running (before a replay) */
};

static struct rt_graphs *graphs_of(rt_ctx *ctx)
{
    if (ctx->graphs)
        return ctx->graphs;
    struct rt_graphs *g = calloc(1, sizeof *g);
    RT_CHECK(ctx, g != NULL, "out of memory");
    const char *e = getenv("SPMD_GRAPHS");
    RT_CHECK(ctx, !e || !strcmp(e, "0") || !strcmp(e, "1"), "SPMD_GRAPHS=%s: expected 1 or 0", e);
    g->enabled = !e || !strcmp(e, "1");
    const char *v = getenv("SPMD_GRAPHS_VERBOSE");
    g->verbose = v && !strcmp(v, "1");
    ctx->graphs = g;
    return g;
}

static void note(rt_ctx *ctx, rt_graph_region *r, unsigned kind, const char *fmt, const char *a, const char *b)
{
    if (r->noted & kind)
        return;
    r->noted |= kind;
    if (ctx->rank != 0)
        return;
    fprintf(stderr, "spmd: note: graph region %s runs eagerly", r->label);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
}

/* the references to storage st the regions hold (through any tensor over
 * it: a view of a buffer the graph reads or writes is that buffer) */
static int held(const rt_ctx *ctx, const rt_storage *st)
{
    int n = 0;
    for (rt_graph_region *r = ctx->graphs->list; r; r = r->next) {
        for (int i = 0; i < r->nin; i++)
            n += r->in[i] && r->in[i]->st == st;
        for (int i = 0; i < r->nout; i++)
            n += r->out[i] && r->out[i]->st == st;
        for (int i = 0; i < r->nwarm; i++)
            n += r->warm[i] && r->warm[i]->st == st;
    }
    return n;
}

/* whether every reference to t's storage but the regions' is one of dies
 * (a live view of it, or of what it views, is a reference that is not) */
static bool only_dying(const rt_ctx *ctx, const rt_tensor *t, rt_tensor **const *dies, int ndies)
{
    int d = 0;
    for (int i = 0; i < ndies; i++)
        d += *dies[i] && (*dies[i])->st == t->st;
    return t->st->refs - held(ctx, t->st) == d;
}

static rt_tensor **hold_all(rt_ctx *ctx, rt_tensor **const *in, int n)
{
    rt_tensor **h = calloc((size_t)(n ? n : 1), sizeof *h);
    RT_CHECK(ctx, h != NULL, "out of memory");
    for (int i = 0; i < n; i++)
        h[i] = *in[i] ? rt_retain(*in[i]) : NULL;
    return h;
}

static void release_all(rt_ctx *ctx, rt_tensor **h, int n)
{
    for (int i = 0; i < n; i++)
        rt_free(ctx, h[i]);
    free(h);
}

/* the name of host scalar i ("step") from "step,lr" */
static const char *host_name(const char *names, int i, char *buf, size_t n)
{
    const char *p = names ? names : "";
    for (; i > 0 && p; i--) {
        p = strchr(p, ',');
        if (p)
            p++;
    }
    if (!p)
        p = "?";
    size_t len = strcspn(p, ",");
    snprintf(buf, n, "%.*s", (int)len, p);
    return buf;
}

/* the region's fill from host: the slots' values to fillbuf, the guards
 * compared (r->bad: the first that differs) */
static void run_fill(rt_ctx *ctx, rt_graph_region *r, const uint64_t *host)
{
    struct rt_graphs *g = ctx->graphs;
    r->used = 0;
    r->gi = 0;
    r->bad = -1;
    g->filling = r;
    r->fill(ctx, host);
    g->filling = NULL;
}

/* the slot of the region being captured for bits (NULL: none, by value) */
static const void *slot_take(rt_ctx *ctx, uint64_t bits)
{
    struct rt_graphs *g = ctx->graphs;
    if (!g)
        return NULL;
    rt_graph_region *r = g->capture;
    if (r) {
        if (r->used >= r->nslots) { /* more than the warm-up had: by value (rt_region_end) */
            r->used++;
            r->overflow = true;
            return NULL;
        }
        r->slot_pin[r->used] = bits;
        return r->slot_dev + r->used++;
    }
    if ((r = g->filling)) {
        if (r->used < r->nslots)
            r->fillbuf[r->used] = bits;
        r->used++;
        return NULL;
    }
    if ((r = g->probe))
        r->nslots++;
    return NULL;
}

rt_hf rt_slot_f(rt_ctx *ctx, double v)
{
    rt_hf h = {v, (const double *)slot_take(ctx, rt_region_f(v))};
    return h;
}

rt_hi rt_slot_i(rt_ctx *ctx, int64_t v)
{
    rt_hi h = {v, (const int64_t *)slot_take(ctx, rt_region_i(v))};
    return h;
}

void rt_guard(rt_ctx *ctx, uint64_t bits, const char *what)
{
    struct rt_graphs *g = ctx->graphs;
    if (!g)
        return;
    rt_graph_region *r = g->capture;
    if (r) {
        if (r->nguards == r->capguards) {
            int nc = r->capguards ? 2 * r->capguards : 64;
            uint64_t *ng = realloc(r->guards, sizeof *ng * (size_t)nc);
            RT_CHECK(ctx, ng != NULL, "out of memory");
            r->guards = ng;
            const char **nn = realloc(r->guard_names, sizeof *nn * (size_t)nc);
            RT_CHECK(ctx, nn != NULL, "out of memory");
            r->guard_names = nn;
            r->capguards = nc;
        }
        r->guards[r->nguards] = bits;
        r->guard_names[r->nguards++] = what;
        return;
    }
    if ((r = g->filling)) {
        if (r->bad < 0 && (r->gi >= r->nguards || r->guards[r->gi] != bits))
            r->bad = r->gi;
        r->gi++;
    }
}

/* In place during a capture: an input of the region whose every other
 * reference is the program's one (refs == 1 but for the region's holds of
 * it as an input) is written over as in an eager iteration, where the
 * program's value dies here (the generated code calls rt_reuse only on a
 * dying operand).  The graph then updates that buffer in place: a replay
 * whose input is that very buffer copies nothing (parameters, moments,
 * accumulators stay in place step after step), and one whose input
 * another part of the program still holds runs eagerly (try_replay). */
bool rt_graph_capture_writable(rt_ctx *ctx, const rt_tensor *x)
{
    struct rt_graphs *g = ctx->graphs;
    rt_graph_region *r = g ? g->capture : NULL;
    if (!r || !x)
        return false;
    int holds = 0;
    for (int i = 0; i < r->nin; i++)
        holds += r->in[i] && r->in[i]->st == x->st;
    if (holds == 0 || x->st->refs - holds != 1 || held(ctx, x->st) != holds)
        return false;
    for (int i = 0; i < r->nin; i++)
        if (r->in[i] && r->in[i]->st == x->st)
            r->written[i] = true;
    return true;
}

/* a replay, or false (with a note) when it would not give the eager results */
static bool try_replay(rt_ctx *ctx, rt_graph_region *r, rt_tensor **const *in, int nin, rt_tensor **const *dies,
                       int ndies, const uint64_t *host, int nhost, const char *host_names)
{
    if (nhost != r->nhost || nin != r->nin) { /* not reached: the same call site */
        note(ctx, r, NOTE_HOST, ": %s%s", "its inputs differ from the captured ones", "");
        return false;
    }
    if (r->fill) {
        run_fill(ctx, r, host);
        if (r->bad >= 0 || r->gi != r->nguards || r->used != r->nslots) {
            char name[200];
            snprintf(name, sizeof name, "%s", r->bad >= 0 && r->bad < r->nguards ? r->guard_names[r->bad]
                                              : "its host work");
            note(ctx, r, NOTE_HOST, " when the number `%s` differs from the captured one (%s)", name,
                 "a graph keeps the numbers its device operations take by value");
            return false;
        }
    }
    for (int i = 0; i < nhost && !r->fill; i++)
        if (host[i] != r->host[i]) {
            char name[64];
            note(ctx, r, NOTE_HOST,
                 " when its host scalar `%s` differs from the captured one (%s)",
                 host_name(host_names, i, name, sizeof name),
                 "a graph keeps the numbers it was captured with");
            return false;
        }
    for (int i = 0; i < nin; i++) {
        rt_tensor *src = *in[i], *dst = r->in[i];
        if (!src || !dst || src->dtype != dst->dtype || src->numel != dst->numel) {
            note(ctx, r, NOTE_HOST, ": %s%s", "an input's type differs from the captured one", "");
            return false;
        }
        if (src != dst && !only_dying(ctx, dst, dies, ndies)) {
            note(ctx, r, NOTE_HELD, " when %s%s", "a buffer it reads is still held by the program",
                 " (a result of an earlier replay, kept)");
            return false;
        }
        if (src == dst && r->written[i] && !only_dying(ctx, dst, dies, ndies)) {
            /* the graph writes over this input in place: only a dying one */
            note(ctx, r, NOTE_HELD, " when %s%s", "an input it updates in place is still held by the program",
                 " (the graph would overwrite it)");
            return false;
        }
        if (src != dst && src->st == dst->st && src->data != dst->data) { /* not reached: an overlap */
            note(ctx, r, NOTE_HELD, " when %s%s", "an input is a view of another part of the buffer it is copied to",
                 "");
            return false;
        }
    }
    for (int i = 0; i < r->nout; i++)
        if (!only_dying(ctx, r->out[i], dies, ndies)) {
            note(ctx, r, NOTE_HELD, " when %s%s", "a result of its last replay is still held by the program",
                 " (the graph would overwrite it)");
            return false;
        }
    if (r->nslots) /* the slot table's new values */
        rt_target_slots_refresh(ctx, r->graph, r->slot_dev, r->slot_pin, r->slot_ev, r->fillbuf,
                                sizeof *r->fillbuf * (size_t)r->nslots);
    for (int i = 0; i < nin; i++)
        if (*in[i] != r->in[i] && (*in[i])->data != r->in[i]->data) {
            rt_target_graph_copy(ctx, r->in[i]->data, (*in[i])->data,
                                 (size_t)r->in[i]->numel * rt_dtype_size(r->in[i]->dtype));
            r->copies++;
        }
    for (int i = 0; i < ndies; i++) {
        rt_free(ctx, *dies[i]);
        *dies[i] = NULL;
    }
    rt_target_graph_launch(ctx, r->graph);
    for (int k = 0; k < RT_NOPS; k++)
        ctx->prof.ops[k] += r->ops[k];
    r->replays++;
    return true;
}

bool rt_region_begin(rt_ctx *ctx, rt_graph_region **rp, const char *label, rt_tensor **const *in, int nin,
                     rt_tensor **const *dies, int ndies, const uint64_t *host, int nhost,
                     const char *host_names, rt_region_fill fill)
{
    struct rt_graphs *g = graphs_of(ctx);
    if (!g->enabled)
        return true;
    rt_graph_region *r = *rp;
    if (!r) {
        r = calloc(1, sizeof *r);
        RT_CHECK(ctx, r != NULL, "out of memory");
        r->label = strdup(label);
        RT_CHECK(ctx, r->label != NULL, "out of memory");
        r->next = g->list;
        g->list = r;
        *rp = r;
        const char *why = rt_target_graph_unsupported(ctx);
        if (why) {
            r->state = R_EAGER;
            if (strcmp(why, "the CPU target") != 0) /* the CPU runtime: every region eager, nothing to say */
                note(ctx, r, NOTE_EAGER, ": %s%s", why, "");
            else
                r->noted |= NOTE_EAGER;
        }
    }
    r->iter++;
    switch (r->state) {
    case R_NEW: /* the warm-up: eager, watching for waits on the device */
        r->state = R_WARM;
        r->warm = hold_all(ctx, in, nin);
        r->nwarm = nin;
        g->probe = r;
        free(g->probe_why);
        g->probe_why = NULL;
        return true;
    case R_READY: /* the capture */
        r->in = hold_all(ctx, in, nin);
        r->nin = nin;
        r->written = calloc((size_t)(nin ? nin : 1), sizeof *r->written);
        RT_CHECK(ctx, r->written != NULL, "out of memory");
        r->host = malloc(sizeof *r->host * (size_t)(nhost ? nhost : 1));
        RT_CHECK(ctx, r->host != NULL, "out of memory");
        if (nhost)
            memcpy(r->host, host, sizeof *host * (size_t)nhost);
        r->nhost = nhost;
        r->capture_iter = r->iter;
        r->fill = fill;
        if (r->nslots) { /* the warm-up's count */
            size_t bytes = sizeof(uint64_t) * (size_t)r->nslots;
            void *pin = NULL;
            r->slot_dev = rt_target_slots_new(ctx, bytes, &pin, &r->slot_ev);
            r->slot_pin = pin;
            r->fillbuf = malloc(bytes);
            RT_CHECK(ctx, r->fillbuf != NULL, "out of memory");
        }
        r->used = 0;
        g->capture = r;
        memcpy(r->ops, ctx->prof.ops, sizeof r->ops); /* the count before; the capture's, at its end */
        rt_target_capture_begin(ctx);
        if (r->nslots)
            rt_target_slots_upload(ctx, r->slot_dev, r->slot_pin, r->slot_ev, sizeof(uint64_t) * (size_t)r->nslots);
        return true;
    case R_CAPTURED:
        if (try_replay(ctx, r, in, nin, dies, ndies, host, nhost, host_names))
            return false;
        r->eager_runs++;
        return true;
    default: r->eager_runs++; return true;
    }
}

void rt_region_end(rt_ctx *ctx, rt_graph_region *r, rt_tensor *const *out, int nout)
{
    struct rt_graphs *g = ctx->graphs;
    if (!g || !g->enabled || !r)
        return;
    if (r->state == R_WARM) {
        g->probe = NULL;
        release_all(ctx, r->warm, r->nwarm);
        r->warm = NULL;
        r->nwarm = 0;
        if (g->probe_why) {
            r->state = R_EAGER;
            note(ctx, r, NOTE_EAGER, ": %s%s", g->probe_why, "");
            free(g->probe_why);
            g->probe_why = NULL;
        } else
            r->state = R_READY;
        return;
    }
    if (g->capture == r) {
        r->graph = rt_target_capture_end(ctx);
        g->capture = NULL;
        for (int k = 0; k < RT_NOPS; k++)
            r->ops[k] = ctx->prof.ops[k] - r->ops[k];
        r->out = calloc((size_t)(nout ? nout : 1), sizeof *r->out);
        RT_CHECK(ctx, r->out != NULL, "out of memory");
        for (int i = 0; i < nout; i++)
            r->out[i] = rt_retain(out[i]);
        r->nout = nout;
        r->state = R_CAPTURED;
        if (r->overflow) { /* its host work took more slots than its warm-up's: run once, then eagerly */
            r->state = R_EAGER;
            note(ctx, r, NOTE_EAGER, ": %s%s", "its device operations read more host numbers than in its warm-up",
                 "");
        } else if (r->fill) { /* the fill from the captured scalars gives the captured numbers */
            int used = r->used;
            run_fill(ctx, r, r->host);
            int slot = -1;
            for (int i = 0; i < used && i < r->nslots && slot < 0; i++)
                if (r->fillbuf[i] != r->slot_pin[i])
                    slot = i;
            if (r->used != used || r->gi != r->nguards || r->bad >= 0 || slot >= 0)
                rt_fail(ctx, "internal error: graph region %s: its fill gives %d slots and %d guards (guard %d, "
                             "slot %d differs), its capture %d and %d", r->label, r->used, r->gi, r->bad, slot,
                        used, r->nguards);
        }
        if (r->nslots) /* the captured iteration's values, written into the table during the capture */
            rt_target_slots_refresh(ctx, r->graph, r->slot_dev, r->slot_pin, r->slot_ev, r->slot_pin,
                                    sizeof *r->slot_pin * (size_t)r->nslots);
        rt_target_graph_launch(ctx, r->graph); /* the captured iteration's work */
    }
}

rt_tensor *rt_region_out(rt_ctx *ctx, rt_graph_region *r, int i)
{
    RT_CHECK(ctx, r && i >= 0 && i < r->nout, "internal error: graph region result %d of %d", i,
             r ? r->nout : 0);
    return rt_retain(r->out[i]);
}

bool rt_graph_capturing(const rt_ctx *ctx) { return ctx->graphs && ctx->graphs->capture; }

void rt_graph_host_sync(rt_ctx *ctx, const char *what)
{
    struct rt_graphs *g = ctx->graphs;
    if (!g)
        return;
    if (g->capture)
        rt_fail(ctx, "internal error: %s%s%s during the capture of graph region %s, whose warm-up had none "
                     "(SPMD_GRAPHS=0 runs every region eagerly)",
                what, ctx->at_loc ? " at " : "", ctx->at_loc ? ctx->at_loc : "", g->capture->label);
    if (g->probe && !g->probe_why) {
        size_t n = strlen(what) + (ctx->at_loc ? strlen(ctx->at_loc) : 0) + 64;
        g->probe_why = malloc(n);
        RT_CHECK(ctx, g->probe_why != NULL, "out of memory");
        snprintf(g->probe_why, n, "%s%s%s waits for the device", what, ctx->at_loc ? " at " : "",
                 ctx->at_loc ? ctx->at_loc : "");
    }
}

bool rt_graph_pool_take(rt_ctx *ctx, size_t cap, void **p)
{
    rt_graph_region *r = ctx->graphs ? ctx->graphs->capture : NULL;
    if (!r)
        return false;
    for (int i = r->npriv; i-- > 0;)
        if (r->privcap[i] == cap) {
            *p = r->priv[i];
            r->priv[i] = r->priv[r->npriv - 1];
            r->privcap[i] = r->privcap[r->npriv - 1];
            r->npriv--;
            return true;
        }
    return false;
}

bool rt_graph_pool_keep(rt_ctx *ctx, void *p, size_t cap)
{
    rt_graph_region *r = ctx->graphs ? ctx->graphs->capture : NULL;
    if (!r)
        return false;
    if (r->npriv == r->cappriv) {
        int nc = r->cappriv ? 2 * r->cappriv : 16;
        void **np = realloc(r->priv, sizeof *np * (size_t)nc);
        RT_CHECK(ctx, np != NULL, "out of memory");
        r->priv = np;
        size_t *nq = realloc(r->privcap, sizeof *nq * (size_t)nc);
        RT_CHECK(ctx, nq != NULL, "out of memory");
        r->privcap = nq;
        r->cappriv = nc;
    }
    r->priv[r->npriv] = p;
    r->privcap[r->npriv++] = cap;
    return true;
}

static int written_count(const rt_graph_region *r)
{
    int n = 0;
    for (int i = 0; i < r->nin && r->written; i++)
        n += r->written[i];
    return n;
}

void rt_graphs_free(rt_ctx *ctx)
{
    struct rt_graphs *g = ctx->graphs;
    if (!g)
        return;
    for (rt_graph_region *r = g->list; r; r = r->next) {
        if (g->verbose && ctx->rank == 0)
            fprintf(stderr, "spmd: graph region %s: %s, %ld replays, %ld eager iterations (%d host numbers "
                            "read from its slot table, %d taken by value and compared)%s", r->label,
                    r->state == R_CAPTURED ? "captured" : "not captured", r->replays, r->eager_runs,
                    r->graph ? r->nslots : 0, r->nguards, r->graph ? "" : "\n");
        if (g->verbose && ctx->rank == 0 && r->graph) /* what --profile counts for each replay */
            fprintf(stderr, "; a replay counts %.0f device operations (%.0f kernels, %.0f GEMMs, %.0f copies, "
                            "%.0f collectives), its graph holds %ld nodes; %ld of its %d inputs copied into the "
                            "captured buffers over its replays (%d updated in place)\n",
                    r->ops[RT_OP_KERNEL] + r->ops[RT_OP_GEMM] + r->ops[RT_OP_COPY] + r->ops[RT_OP_COLL],
                    r->ops[RT_OP_KERNEL], r->ops[RT_OP_GEMM], r->ops[RT_OP_COPY], r->ops[RT_OP_COLL],
                    rt_target_graph_nodes(r->graph), r->copies, r->nin, written_count(r));
    }
    rt_graph_region *next;
    for (rt_graph_region *r = g->list; r; r = next) {
        next = r->next;
        if (r->graph)
            rt_target_graph_free(ctx, r->graph);
        release_all(ctx, r->in, r->nin);
        free(r->written);
        release_all(ctx, r->out, r->nout);
        release_all(ctx, r->warm, r->nwarm);
        for (int i = 0; i < r->npriv; i++)
            rt_mem_free(ctx, r->priv[i], r->privcap[i]);
        free(r->priv);
        free(r->privcap);
        free(r->host);
        if (r->slot_dev)
            rt_target_slots_free(ctx, r->slot_dev, r->slot_pin, r->slot_ev, sizeof(uint64_t) * (size_t)r->nslots);
        free(r->fillbuf);
        free(r->guards);
        free(r->guard_names);
        free(r->label);
        free(r);
    }
    free(g->probe_why);
    free(g);
    ctx->graphs = NULL;
}
