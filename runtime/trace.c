/* Trace and profile. --trace FILE.json records Chrome trace events ("ph":
 * "X", pid = rank) for collectives, the heavier kernels and user regions;
 * at finalize rank 0 gathers every rank's events and writes one JSON file
 * (atomically). profile.c does --profile. Event names must be static
 * strings. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rt_internal.h"

double rt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool rt_tracing(const rt_ctx *ctx)
{
    return ctx->trace_path != NULL;
}

void rt_trace_record(rt_ctx *ctx, const char *name, const char *cat, double t0, double dur,
                     double bytes)
{
    if (!ctx->trace_path)
        return;
    if (ctx->nevents == ctx->events_cap) {
        int cap = ctx->events_cap ? 2 * ctx->events_cap : 1024;
        rt_event *ev = realloc(ctx->events, (size_t)cap * sizeof *ev);
        if (!ev)
            return; /* tracing is best effort */
        ctx->events = ev;
        ctx->events_cap = cap;
    }
    ctx->events[ctx->nevents++] = (rt_event){
        .name = name, .cat = cat, .t0 = (t0 - ctx->t_start) * 1e6, .dur = dur * 1e6,
        .bytes = bytes};
}

/* Regions nest; with --profile each also adds to its name's totals. */
void rt_trace_begin(rt_ctx *ctx, const char *name)
{
    if (!rt_measuring(ctx))
        return;
    RT_CHECK(ctx, ctx->nopen < 64, "trace regions nested deeper than 64");
    int k = ctx->nopen++;
    ctx->open_names[k] = name;
    ctx->open_child[k] = 0;
    rt_region_enter(ctx, k, name);
    ctx->open_t0[k] = rt_now();
}

void rt_step_begin(rt_ctx *ctx, const char *name)
{
    if (ctx->t_first_step == 0) /* start-up ends here (rt_startup) */
        ctx->t_first_step = rt_now();
    rt_trace_begin(ctx, name);
    if (rt_measuring(ctx))
        rt_region_step(ctx, ctx->nopen - 1);
}

void rt_trace_end(rt_ctx *ctx)
{
    if (!rt_measuring(ctx))
        return;
    double now = rt_now();
    RT_CHECK(ctx, ctx->nopen > 0, "rt_trace_end without rt_trace_begin");
    int k = --ctx->nopen;
    double incl = now - ctx->open_t0[k];
    rt_trace_record(ctx, ctx->open_names[k], "user", ctx->open_t0[k], incl, 0);
    rt_region_leave(ctx, k, incl);
    if (k > 0)
        ctx->open_child[k - 1] += incl;
}

/* ---- writing the trace */

typedef struct strbuf {
    char *s;
    size_t n, cap;
} strbuf;

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k >= 0 && b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t cap = b->cap ? 2 * b->cap : 4096;
        while (cap < b->n + (size_t)k + 1)
            cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s)
            return;
        b->s = s;
        b->cap = cap;
    }
}

static void sb_json_str(strbuf *b, const char *s)
{
    sb_printf(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            sb_printf(b, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            sb_printf(b, "\\u%04x", (unsigned char)*s);
        else
            sb_printf(b, "%c", *s);
    }
    sb_printf(b, "\"");
}

static void rank_events(rt_ctx *ctx, strbuf *b)
{
    sb_printf(b, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                 "\"args\":{\"name\":\"rank %d\"}}", ctx->rank, ctx->rank);
    char label[128];
    if (rt_target_label(ctx, label, sizeof label)) /* e.g. the f32 GEMM library */
        sb_printf(b, ",\n{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,"
                     "\"args\":{\"labels\":\"%s\"}}",
                  ctx->rank, label);
    for (int i = 0; i < ctx->nevents; i++) {
        const rt_event *e = &ctx->events[i];
        sb_printf(b, ",\n{\"name\":");
        sb_json_str(b, e->name);
        sb_printf(b, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,"
                     "\"tid\":0,\"args\":{\"bytes\":%.0f}}",
                  e->cat, e->t0, e->dur, ctx->rank, e->bytes);
    }
}

static void write_file_atomic(rt_ctx *ctx, const char *path, const char *data, size_t n)
{
    size_t len = strlen(path) + 32;
    char *tmp = malloc(len);
    RT_CHECK(ctx, tmp != NULL, "out of memory");
    snprintf(tmp, len, "%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "wb");
    RT_CHECK(ctx, f != NULL, "cannot write trace '%s'", tmp);
    size_t w = fwrite(data, 1, n, f);
    int rc = fclose(f);
    RT_CHECK(ctx, w == n && rc == 0, "cannot write trace '%s'", tmp);
    RT_CHECK(ctx, rename(tmp, path) == 0, "cannot rename '%s' to '%s'", tmp, path);
    free(tmp);
}

/* gathers every rank's events text on rank 0 */
static char *gather_text(rt_ctx *ctx, strbuf *mine, size_t *total)
{
    if (!ctx->mpi) {
        *total = mine->n;
        return mine->s;
    }
    int n = (int)mine->n, *counts = NULL, *displs = NULL;
    char *all = NULL;
    if (ctx->rank == 0) {
        counts = calloc((size_t)ctx->world, sizeof *counts);
        displs = calloc((size_t)ctx->world, sizeof *displs);
    }
    RT_CALL_MPI(ctx, MPI_Gather(&n, 1, MPI_INT, counts, 1, MPI_INT, 0, MPI_COMM_WORLD));
    if (ctx->rank == 0) {
        size_t sum = 0;
        for (int r = 0; r < ctx->world; r++) {
            displs[r] = (int)sum;
            sum += (size_t)counts[r];
        }
        all = malloc(sum + 1);
        *total = sum;
    }
    RT_CALL_MPI(ctx, MPI_Gatherv(mine->s, n, MPI_CHAR, all, counts, displs, MPI_CHAR, 0,
                                 MPI_COMM_WORLD));
    if (ctx->rank == 0) { /* ranks' texts are joined with ",\n" */
        strbuf j = {0};
        for (int r = 0; r < ctx->world; r++)
            sb_printf(&j, "%s%.*s", r ? ",\n" : "", counts[r], all + displs[r]);
        free(all);
        all = j.s;
        *total = j.n;
    }
    free(counts);
    free(displs);
    return all;
}

static void write_trace(rt_ctx *ctx)
{
    strbuf mine = {0};
    rank_events(ctx, &mine);
    size_t n = 0;
    char *all = gather_text(ctx, &mine, &n);
    if (ctx->rank == 0) {
        strbuf out = {0};
        sb_printf(&out, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n%.*s\n]}\n", (int)n,
                  all);
        write_file_atomic(ctx, ctx->trace_path, out.s, out.n);
        free(out.s);
    }
    if (all != mine.s)
        free(all);
    free(mine.s);
}

void rt_trace_finish(rt_ctx *ctx)
{
    if (ctx->trace_path)
        write_trace(ctx);
    if (ctx->profile)
        rt_profile_print(ctx);
}

void rt_trace_free(rt_ctx *ctx)
{
    free(ctx->events);
    ctx->events = NULL;
    ctx->nevents = ctx->events_cap = 0;
}
