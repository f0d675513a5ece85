/* Memory accounting: the bytes of every live storage as requested (numel
 * times the dtype's size of the tensor that allocated it; the pool's size
 * classes and cached buffers are not counted; a view adds nothing, its
 * base's storage counts while any tensor over it lives), each in one
 * component: parameters and optimizer state
 * while a var slot of main holds the tensor (generated code calls
 * rt_mem_hold after each assignment of such a var), residuals while the
 * autodiff tape holds it (the generated tape_push/tape_pop call
 * rt_mem_tape), temporaries otherwise.  A high-water mark is kept for each
 * component and for their sum; --profile prints them next to the process's
 * peak RSS, and `spmdc --memory-report` predicts them (docs/memory.md). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "rt_internal.h"

const char *rt_mem_comp_name(rt_mem_comp c)
{
    static const char *const names[RT_MEM_NCOMP] = {"temporaries", "params", "optimizer state",
                                                    "residuals"};
    return c >= 0 && c < RT_MEM_NCOMP ? names[c] : "?";
}

static void add(rt_ctx *ctx, int comp, int64_t bytes)
{
    rt_mem_stats *m = &ctx->mem;
    m->live[comp] += bytes;
    if (bytes <= 0)
        return;
    if (m->live[comp] > m->peak[comp])
        m->peak[comp] = m->live[comp];
    int64_t total = 0;
    for (int c = 0; c < RT_MEM_NCOMP; c++)
        total += m->live[c];
    if (total > m->peak_total) {
        m->peak_total = total;
        for (int c = 0; c < RT_MEM_NCOMP; c++)
            m->at_peak[c] = m->live[c];
    }
}

/* the component t belongs to now: a var slot's, else the tape's */
static int comp_of(const rt_ctx *ctx, const rt_storage *t, int held)
{
    (void)ctx;
    if (held != RT_MEM_TEMP)
        return held;
    return t->mem_tape > 0 ? RT_MEM_RESID : RT_MEM_TEMP;
}

/* moves t's bytes to the component it belongs to now (held: its slot's
 * component, or RT_MEM_TEMP when no slot holds it) */
static void settle(rt_ctx *ctx, rt_storage *t, int held)
{
    int to = comp_of(ctx, t, held);
    if (to == t->mem_comp)
        return;
    add(ctx, t->mem_comp, -(int64_t)t->mem_bytes);
    t->mem_comp = to;
    add(ctx, to, (int64_t)t->mem_bytes);
}

void rt_mem_born(rt_ctx *ctx, rt_storage *t, size_t bytes)
{
    t->mem_bytes = bytes;
    t->mem_tape = 0;
    t->mem_slot = -1;
    t->mem_comp = ctx->mem_off ? -1 : RT_MEM_TEMP;
    if (t->mem_comp >= 0)
        add(ctx, RT_MEM_TEMP, (int64_t)t->mem_bytes);
}

rt_tensor *rt_scratch_tensor(rt_ctx *ctx, rt_dtype dt, int64_t n)
{
    ctx->mem_off++;
    rt_tensor *t = rt_empty(ctx, dt, 1, &n);
    ctx->mem_off--;
    return t;
}

void rt_mem_dies(rt_ctx *ctx, rt_storage *t)
{
    if (t->mem_comp >= 0)
        add(ctx, t->mem_comp, -(int64_t)t->mem_bytes);
    if (t->mem_slot >= 0 && t->mem_slot < ctx->nmem_slots && ctx->mem_slots[t->mem_slot] == t)
        ctx->mem_slots[t->mem_slot] = NULL;
}

void rt_mem_hold(rt_ctx *ctx, int slot, rt_tensor *x, rt_mem_comp comp)
{
    RT_CHECK(ctx, slot >= 0 && (comp == RT_MEM_PARAM || comp == RT_MEM_OPT),
             "rt_mem_hold: bad slot %d or component %d", slot, (int)comp);
    if (slot >= ctx->nmem_slots) {
        int n = ctx->nmem_slots ? 2 * ctx->nmem_slots : 64;
        while (n <= slot)
            n *= 2;
        rt_storage **s = realloc(ctx->mem_slots, (size_t)n * sizeof *s);
        RT_CHECK(ctx, s != NULL, "out of memory for the memory accounting");
        for (int i = ctx->nmem_slots; i < n; i++)
            s[i] = NULL;
        ctx->mem_slots = s;
        ctx->nmem_slots = n;
    }
    rt_storage *t = x ? x->st : NULL; /* a view: its storage is held */
    rt_storage *old = ctx->mem_slots[slot];
    if (old && old != t && old->mem_slot == slot) { /* no longer held */
        old->mem_slot = -1;
        settle(ctx, old, RT_MEM_TEMP);
    }
    ctx->mem_slots[slot] = t;
    if (t && t->mem_comp >= 0) {
        t->mem_slot = slot;
        settle(ctx, t, comp);
    }
}

void rt_mem_tape(rt_ctx *ctx, rt_tensor *x, int delta)
{
    rt_storage *t = x->st;
    if (t->mem_comp < 0)
        return;
    t->mem_tape += delta;
    RT_CHECK(ctx, t->mem_tape >= 0, "internal error: a tensor left the tape more often than it went on");
    if (t->mem_comp == RT_MEM_TEMP || t->mem_comp == RT_MEM_RESID)
        settle(ctx, t, RT_MEM_TEMP);
}

rt_mem_stats rt_mem_get(const rt_ctx *ctx) { return ctx->mem; }

void rt_mem_reset_peaks(rt_ctx *ctx)
{
    rt_mem_stats *m = &ctx->mem;
    m->peak_total = 0;
    for (int c = 0; c < RT_MEM_NCOMP; c++) {
        m->peak[c] = m->at_peak[c] = m->live[c];
        m->peak_total += m->live[c];
    }
}

void rt_mem_free_all(rt_ctx *ctx)
{
    free(ctx->mem_slots);
    ctx->mem_slots = NULL;
    ctx->nmem_slots = 0;
}

/* --profile: the high-water marks (max over ranks) and the peak RSS */
void rt_mem_print(rt_ctx *ctx)
{
    enum { N = 2 + 2 * RT_MEM_NCOMP };
    double loc[N], mx[N];
    const rt_mem_stats *m = &ctx->mem;
    struct rusage ru;
    loc[0] = (double)m->peak_total;
    loc[1] = getrusage(RUSAGE_SELF, &ru) == 0 ? (double)ru.ru_maxrss : 0; /* KiB */
    for (int c = 0; c < RT_MEM_NCOMP; c++) {
        loc[2 + c] = (double)m->at_peak[c];
        loc[2 + RT_MEM_NCOMP + c] = (double)m->peak[c];
    }
    for (int i = 0; i < N; i++)
        mx[i] = loc[i];
    if (ctx->mpi)
        RT_CALL_MPI(ctx, MPI_Reduce(loc, mx, N, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    if (ctx->rank != 0)
        return;
    static const int order[] = {RT_MEM_PARAM, RT_MEM_OPT, RT_MEM_RESID, RT_MEM_TEMP};
    fprintf(stderr, "memory: live tensor bytes as requested, per rank (max over ranks)\n");
    fprintf(stderr, "  high-water %.0f B:", mx[0]);
    for (int i = 0; i < RT_MEM_NCOMP; i++)
        fprintf(stderr, "%s %s %.0f", i ? "," : "", rt_mem_comp_name(order[i]), mx[2 + order[i]]);
    fprintf(stderr, " at that point\n  each component's own high-water:");
    for (int i = 0; i < RT_MEM_NCOMP; i++)
        fprintf(stderr, "%s %s %.0f", i ? "," : "", rt_mem_comp_name(order[i]),
                mx[2 + RT_MEM_NCOMP + order[i]]);
    fprintf(stderr, "\n  peak RSS %.0f KiB (the whole process: the pool's buffers, MPI, libraries, code)\n",
            mx[1]);
}
