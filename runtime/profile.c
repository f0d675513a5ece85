/* --profile: where a run's time goes. Every kernel is measured between
 * rt_kernel_begin and rt_kernel_end (RT_KERNEL in the runtime, explicit calls
 * around the generated program's fused loops) and attributed to its kind
 * (matmul, elementwise, nn, reductions, copies, random, I/O, collectives);
 * allocation is measured in the pool and subtracted from the kernel that
 * allocated; trace regions (the generated functions, forward and backward,
 * and each iteration of main's loops) get their inclusive and self time and
 * the self time per kind. At rt_finalize rank 0 prints the tables, with the
 * mean and the maximum over ranks. With --trace the same spans become
 * Chrome trace events. Nothing is measured without either option. */
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "rt_internal.h"

static const char *const coll_names[RT_NCOLL] = {"all_reduce", "all_gather", "reduce_scatter",
                                                 "all_to_all", "ppermute"};
static const char *const kind_names[RT_NKINDS + 1] = {
    "matmul", "elementwise", "nn", "reduce", "copy", "random", "io", "collectives", "alloc"};
static const char *const kind_help[RT_NKINDS + 1] = {
    "matmul, einsum, their backwards (gemm)",
    "unary/binary ops, backwards, fused loops",
    "softmax, norms, cross entropy, embedding",
    "sum, mean, amax, cumsum, sum_to_shape",
    "shapes, copies, fills, converts, accumulation",
    "randn, uniform",
    ".npy load and save",
    "blocked in collectives (and waits)",
    "allocation (pool and malloc)",
};

const char *rt_coll_name(rt_coll_kind kind) { return coll_names[kind]; }

bool rt_measuring(const rt_ctx *ctx) { return ctx->profile || ctx->trace_path != NULL; }

/* the whole process's minor page faults (every thread's: MPI's and
 * OpenBLAS's too) */
static long minor_faults(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return ru.ru_minflt;
}

rt_kspan rt_kernel_begin(rt_ctx *ctx)
{
    rt_kspan s = {.on = false};
    if (!rt_measuring(ctx))
        return s;
    s.on = true;
    if (ctx->prof.kdepth++ == 0) {
        s.alloc0 = ctx->prof.alloc_s;
        s.faults0 = ctx->profile ? minor_faults() : 0;
        s.t0 = rt_now();
        if (ctx->profile && ctx->prof.dev_begin)
            ctx->prof.dev_begin(ctx);
    }
    return s;
}

void rt_prof_device_time(rt_ctx *ctx, int kind, int region, double seconds)
{
    ctx->prof.kind_s[kind] += seconds;
    if (region >= 0 && region < ctx->prof.nregions)
        ctx->prof.regions[region].kind[kind] += seconds;
}

/* the innermost open region's totals */
static rt_region *open_region(rt_ctx *ctx)
{
    if (!ctx->profile || ctx->nopen == 0)
        return NULL;
    return &ctx->prof.regions[ctx->open_region[ctx->nopen - 1]];
}

static void kernel_done(rt_ctx *ctx, rt_kspan *s, rt_kind kind, const char *name, double bytes)
{
    if (!s->on)
        return;
    s->on = false;
    if (--ctx->prof.kdepth > 0)
        return;
    double now = rt_now();
    double dur = now - s->t0 - (ctx->prof.alloc_s - s->alloc0); /* allocation counts apart */
    if (!ctx->prof.counts_launches && kind != RT_K_IO) { /* the CPU target: a runtime call */
        ctx->prof.op_name = name;
        rt_count_op(ctx, kind == RT_K_COLL     ? RT_OP_COLL
                         : kind == RT_K_MATMUL ? RT_OP_GEMM
                         : kind == RT_K_COPY   ? RT_OP_COPY
                                               : RT_OP_KERNEL);
        ctx->prof.op_name = NULL;
    }
    rt_trace_record(ctx, name, kind == RT_K_COLL ? "comm" : "compute", s->t0, now - s->t0,
                    bytes);
    if (!ctx->profile)
        return;
    ctx->prof.kind_calls[kind] += 1;
    ctx->prof.kind_faults[kind] += (double)(minor_faults() - s->faults0);
    /* the device's time where the target measures it (collectives: the
     * time blocked; file I/O: the host's) */
    int region = ctx->nopen ? ctx->open_region[ctx->nopen - 1] : -1;
    if (ctx->prof.dev_end && ctx->prof.dev_end(ctx, kind == RT_K_COLL || kind == RT_K_IO ? -1 : (int)kind, region))
        return;
    ctx->prof.kind_s[kind] += dur;
    rt_region *r = open_region(ctx);
    if (r)
        r->kind[kind] += dur;
}

void rt_kernel_end(rt_ctx *ctx, rt_kspan *s, rt_kind kind, const char *name)
{
    kernel_done(ctx, s, kind, name, 0);
}

void rt_kscope_end_(rt_kscope *k)
{
    kernel_done(k->ctx, &k->s, k->kind, k->name, 0);
}

void rt_coll_record(rt_ctx *ctx, rt_coll_kind kind, rt_kspan *s, double bytes)
{
    if (!s->on)
        return;
    double blocked = rt_now() - s->t0 - (ctx->prof.alloc_s - s->alloc0);
    rt_coll_stat *st = &ctx->stats[kind];
    st->count += 1;
    st->bytes += bytes;
    st->seconds += blocked;
    kernel_done(ctx, s, RT_K_COLL, coll_names[kind], bytes);
}

void rt_coll_record_part(rt_ctx *ctx, const char *name, rt_kspan *s, double bytes)
{
    if (!s->on)
        return;
    ctx->stats[RT_COLL_ALL_REDUCE].seconds += rt_now() - s->t0 - (ctx->prof.alloc_s - s->alloc0);
    kernel_done(ctx, s, RT_K_COLL, name, bytes);
}

void rt_alloc_record(rt_ctx *ctx, double t0, bool fresh, size_t bytes)
{
    double dur = rt_now() - t0;
    ctx->prof.alloc_s += dur;
    ctx->prof.alloc_calls += 1;
    if (fresh) {
        ctx->prof.alloc_fresh += 1;
        ctx->prof.alloc_fresh_bytes += (double)bytes;
    }
    rt_region *r = open_region(ctx);
    if (r)
        r->kind[RT_NKINDS] += dur;
}

/* ---- regions */

/* SPMD_PROFILE_OPS=1 (with --profile): each device operation on stderr,
 * "op KIND REGION: CALL" on rank 0, to see what a region's ops/call are.
 * CALL: on the CPU target the kernel span's name (name); on the CUDA
 * target the runtime's entry point the program called (the outermost
 * frame of the runtime library's, a shared library there) */
static void print_op(rt_op_kind k, const rt_region *r, const char *name)
{
    static const char *const op_names[RT_NOPS] = {"kernel", "gemm", "copy", "collective"};
    if (name) {
        fprintf(stderr, "op %s %s: %s\n", op_names[k], r ? r->name : "-", name);
        return;
    }
    void *frames[64];
    int n = backtrace(frames, 64);
    char **sym = backtrace_symbols(frames, n);
    const char *call = NULL;
    if (sym && n > 1) {
        /* frame 0 is this function, in the runtime library: the module is
         * the text before '(', a frame "module(function+offset) [address]" */
        size_t lib = strcspn(sym[0], "(");
        for (int i = 1; i < n; i++) {
            if (strncmp(sym[i], sym[0], lib) != 0 || sym[i][lib] != '(')
                break;
            if (sym[i][lib + 1] != '+') /* an exported function's name */
                call = sym[i] + lib + 1;
        }
    }
    /* none: the program's own kernel (a fused loop: rt_sim_kernel_count) */
    int len = call ? (int)strcspn(call, "+)") : 0;
    fprintf(stderr, "op %s %s: %.*s\n", op_names[k], r ? r->name : "-", call ? len : 9,
            call ? call : "generated");
    free(sym);
}

/* a device operation (rt_count_op) is the innermost open region's own */
void rt_count_op_region(rt_ctx *ctx, rt_op_kind k)
{
    rt_region *r = ctx->profile ? open_region(ctx) : NULL;
    if (r)
        r->self_ops += 1;
    static int print = -1;
    if (print < 0) {
        const char *e = getenv("SPMD_PROFILE_OPS");
        print = e && strcmp(e, "1") == 0;
    }
    if (print && ctx->profile && ctx->rank == 0)
        print_op(k, r, ctx->prof.op_name);
}

void rt_region_enter(rt_ctx *ctx, int level, const char *name)
{
    if (!ctx->profile)
        return;
    rt_prof *p = &ctx->prof;
    int i = 0;
    while (i < p->nregions && p->regions[i].name != name && strcmp(p->regions[i].name, name) != 0)
        i++;
    if (i == p->nregions) {
        if (p->nregions == p->cap_regions) {
            int cap = p->cap_regions ? 2 * p->cap_regions : 16;
            rt_region *r = realloc(p->regions, (size_t)cap * sizeof *r);
            RT_CHECK(ctx, r != NULL, "out of memory for the profile");
            p->regions = r;
            p->cap_regions = cap;
        }
        p->regions[p->nregions++] = (rt_region){.name = name};
    }
    ctx->open_region[level] = i;
}

void rt_region_step(rt_ctx *ctx, int level)
{
    if (!ctx->profile)
        return;
    ctx->prof.regions[ctx->open_region[level]].step = true;
    ctx->open_faults0[level] = minor_faults();
    memcpy(ctx->open_ops0[level], ctx->prof.ops, sizeof ctx->prof.ops);
    ctx->open_ops0[level][RT_NOPS] = ctx->prof.syncs;
}

void rt_region_leave(rt_ctx *ctx, int level, double incl)
{
    if (!ctx->profile)
        return;
    rt_region *r = &ctx->prof.regions[ctx->open_region[level]];
    if (r->step) {
        long f = minor_faults() - ctx->open_faults0[level];
        if (r->nfaults == r->cap_faults) {
            int cap = r->cap_faults ? 2 * r->cap_faults : 64;
            long *v = realloc(r->faults, (size_t)cap * sizeof *v);
            RT_CHECK(ctx, v != NULL, "out of memory for the profile");
            r->faults = v;
            r->cap_faults = cap;
        }
        r->faults[r->nfaults++] = f;
        if (r->nops == r->cap_ops) {
            int cap = r->cap_ops ? 2 * r->cap_ops : 64;
            double *o = realloc(r->ops, (size_t)cap * RT_NOPS * sizeof *o);
            double *y = realloc(r->syncs, (size_t)cap * sizeof *y);
            RT_CHECK(ctx, o && y, "out of memory for the profile");
            r->ops = o;
            r->syncs = y;
            r->cap_ops = cap;
        }
        for (int k = 0; k < RT_NOPS; k++)
            r->ops[r->nops * RT_NOPS + k] = ctx->prof.ops[k] - ctx->open_ops0[level][k];
        r->syncs[r->nops++] = ctx->prof.syncs - ctx->open_ops0[level][RT_NOPS];
    }
    r->calls += 1;
    r->incl += incl;
    r->self += incl - ctx->open_child[level];
    if (r->ndurs == r->cap_durs) {
        int cap = r->cap_durs ? 2 * r->cap_durs : 64;
        double *d = realloc(r->durs, (size_t)cap * sizeof *d);
        RT_CHECK(ctx, d != NULL, "out of memory for the profile");
        r->durs = d;
        r->cap_durs = cap;
    }
    r->durs[r->ndurs++] = incl;
}

void rt_profile_start(rt_ctx *ctx)
{
    if (ctx->profile)
        ctx->prof.faults_start = minor_faults();
}

void rt_profile_free(rt_ctx *ctx)
{
    for (int i = 0; i < ctx->prof.nregions; i++) {
        free(ctx->prof.regions[i].durs);
        free(ctx->prof.regions[i].faults);
        free(ctx->prof.regions[i].ops);
        free(ctx->prof.regions[i].syncs);
    }
    free(ctx->prof.regions);
    ctx->prof.regions = NULL;
    ctx->prof.nregions = ctx->prof.cap_regions = 0;
}

/* ---- start-up */

double rt_process_start(void)
{
    /* /proc/self/stat: "pid (comm) state ..." with starttime the 22nd field,
     * in clock ticks since boot (CLOCK_BOOTTIME); comm may hold spaces */
    FILE *f = fopen("/proc/self/stat", "r");
    if (!f)
        return 0;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    long tck = sysconf(_SC_CLK_TCK);
    struct timespec boot;
    if (!p || tck <= 0 || clock_gettime(CLOCK_BOOTTIME, &boot) != 0)
        return 0;
    p++;
    for (int field = 3; field < 22 && p; field++) { /* skip state .. field 21 */
        p += strspn(p, " ");
        p = strchr(p, ' ');
    }
    char *end;
    unsigned long long ticks = p ? strtoull(p, &end, 10) : 0;
    if (!p || end == p)
        return 0;
    double age = (double)boot.tv_sec + 1e-9 * (double)boot.tv_nsec - (double)ticks / (double)tck;
    return rt_now() - age;
}

void rt_startup(const rt_ctx *ctx, double *ready, double *first_step)
{
    bool known = ctx->t_proc > 0;
    if (ready)
        *ready = known ? ctx->t_start - ctx->t_proc : -1;
    if (first_step)
        *first_step = known && ctx->t_first_step > 0 ? ctx->t_first_step - ctx->t_proc : -1;
}

void rt_startup_print(rt_ctx *ctx)
{
    double loc[3], mx[3];
    rt_startup(ctx, &loc[0], &loc[1]);
    loc[2] = loc[1] >= 0 ? loc[1] - loc[0] : -1;
    memcpy(mx, loc, sizeof loc);
    if (ctx->mpi)
        RT_CALL_MPI(ctx, MPI_Reduce(loc, mx, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
    if (ctx->rank != 0 || mx[0] < 0)
        return;
    char step[128] = "";
    if (mx[1] >= 0)
        snprintf(step, sizeof step, ", %.3f ms to the first training step, %.3f ms of them after rt_init",
                 mx[1] * 1e3, mx[2] * 1e3);
    /* one write: other ranks' output must not land inside the line */
    fprintf(stderr, "start-up: %.3f ms from the process's start to the end of rt_init (loading, "
                    "MPI_Init, the mesh)%s (max over ranks)\n", mx[0] * 1e3, step);
}

/* ---- printing (rank 0, stderr) */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* sums (into sum) and maxima (into mx) over ranks of n doubles, on rank 0 */
static void reduce_ranks(rt_ctx *ctx, const double *loc, double *sum, double *mx, int n)
{
    memcpy(sum, loc, (size_t)n * sizeof *loc);
    memcpy(mx, loc, (size_t)n * sizeof *loc);
    if (!ctx->mpi || n == 0)
        return;
    RT_CALL_MPI(ctx, MPI_Reduce(loc, sum, n, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
    RT_CALL_MPI(ctx, MPI_Reduce(loc, mx, n, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
}

static unsigned long name_hash(const rt_prof *p)
{
    unsigned long h = 5381;
    for (int i = 0; i < p->nregions; i++)
        for (const char *c = p->regions[i].name; *c; c++)
            h = h * 33 + (unsigned char)*c;
    return h % 1000000007ul;
}

/* whether every rank has the same regions in the same order */
static bool same_regions(rt_ctx *ctx)
{
    if (!ctx->mpi)
        return true;
    long mine[2] = {ctx->prof.nregions, (long)name_hash(&ctx->prof)}, lo[2], hi[2];
    RT_CALL_MPI(ctx, MPI_Allreduce(mine, lo, 2, MPI_LONG, MPI_MIN, MPI_COMM_WORLD));
    RT_CALL_MPI(ctx, MPI_Allreduce(mine, hi, 2, MPI_LONG, MPI_MAX, MPI_COMM_WORLD));
    return lo[0] == hi[0] && lo[1] == hi[1];
}

enum { NK = RT_NKINDS + 1 }; /* kinds and allocation */

static void print_kinds(rt_ctx *ctx, double total_s)
{
    rt_prof *p = &ctx->prof;
    /* per kind: calls, seconds, faults; then allocation, totals */
    enum { NV = 3 * NK + 8 };
    double loc[NV], sum[NV], mx[NV];
    for (int k = 0; k < RT_NKINDS; k++) {
        loc[3 * k] = p->kind_calls[k];
        loc[3 * k + 1] = p->kind_s[k];
        loc[3 * k + 2] = p->kind_faults[k];
    }
    loc[3 * RT_NKINDS] = p->alloc_calls;
    loc[3 * RT_NKINDS + 1] = p->alloc_s;
    loc[3 * RT_NKINDS + 2] = 0;
    double kernels = 0;
    for (int k = 0; k < NK; k++)
        kernels += loc[3 * k + 1];
    loc[3 * NK] = total_s;
    loc[3 * NK + 1] = total_s - kernels; /* outside every kernel */
    loc[3 * NK + 2] = (double)(p->faults_end - p->faults_start);
    loc[3 * NK + 3] = p->alloc_fresh;
    loc[3 * NK + 4] = p->alloc_fresh_bytes;
    loc[3 * NK + 5] = p->reuse_calls;
    loc[3 * NK + 6] = p->reuse_hits;
    loc[3 * NK + 7] = p->views;
    reduce_ranks(ctx, loc, sum, mx, NV);
    if (ctx->rank != 0)
        return;
    double w = ctx->world, T = sum[3 * NK] / w;
    fprintf(stderr, "spmd profile: %d rank%s, %.3f ms from start-up to finalize (mean over ranks; "
                    "max over ranks in the max column)\n",
            ctx->world, ctx->world > 1 ? "s" : "", T * 1e3);
    char gemm[256];
    rt_gemm_describe(ctx, gemm, sizeof gemm);
    fprintf(stderr, "%s\n", gemm);
    fprintf(stderr, "%-12s %10s %12s %12s %7s %10s  %s\n", "where", "calls", "mean ms", "max ms",
            "%", "faults", "what");
    for (int k = 0; k < NK; k++) {
        if (sum[3 * k] == 0)
            continue;
        fprintf(stderr, "%-12s %10.0f %12.3f %12.3f %6.1f%% %10.0f  %s\n", kind_names[k],
                sum[3 * k] / w, sum[3 * k + 1] / w * 1e3, mx[3 * k + 1] * 1e3,
                T > 0 ? 100 * sum[3 * k + 1] / w / T : 0, sum[3 * k + 2] / w, kind_help[k]);
    }
    fprintf(stderr, "%-12s %10s %12.3f %12.3f %6.1f%% %10s  %s\n", "other", "",
            sum[3 * NK + 1] / w * 1e3, mx[3 * NK + 1] * 1e3,
            T > 0 ? 100 * sum[3 * NK + 1] / w / T : 0, "",
            "outside kernels: generated code, tape, frees, start-up");
    double kfaults = 0;
    for (int k = 0; k < RT_NKINDS; k++)
        kfaults += sum[3 * k + 2];
    fprintf(stderr, "page faults: %.0f per rank (%.0f in the kernels above); pool: %.0f "
                    "allocations per rank, %.0f fresh (%.1f MiB), the rest reused\n",
            sum[3 * NK + 2] / w, kfaults / w, sum[3 * RT_NKINDS] / w, sum[3 * NK + 3] / w,
            sum[3 * NK + 4] / w / (1 << 20));
    if (sum[3 * NK + 5] > 0)
        fprintf(stderr, "in place: %.0f of %.0f elementwise results per rank wrote over a dying "
                        "operand (rt_reuse)\n",
                sum[3 * NK + 6] / w, sum[3 * NK + 5] / w);
    if (sum[3 * NK + 7] > 0)
        fprintf(stderr, "views: %.0f reshape, index and slice results per rank shared their operand's "
                        "memory (no copy)\n",
                sum[3 * NK + 7] / w);
}

static void print_collectives(rt_ctx *ctx)
{
    enum { NV = 4 * RT_NCOLL };
    double loc[NV], sum[NV], mx[NV];
    for (int k = 0; k < RT_NCOLL; k++) {
        loc[4 * k] = ctx->stats[k].count;
        loc[4 * k + 1] = ctx->stats[k].bytes;
        loc[4 * k + 2] = ctx->stats[k].seconds;
        loc[4 * k + 3] = ctx->stats[k].inflight;
    }
    reduce_ranks(ctx, loc, sum, mx, NV);
    if (ctx->rank != 0)
        return;
    double w = ctx->world;
    bool any = false;
    for (int k = 0; k < RT_NCOLL; k++)
        any = any || sum[4 * k] > 0;
    if (!any)
        return;
    fprintf(stderr, "%-16s %10s %12s %14s %14s %14s\n", "collective", "calls", "MiB",
            "blocked ms", "max ms", "in flight ms");
    for (int k = 0; k < RT_NCOLL; k++) {
        if (sum[4 * k] == 0)
            continue;
        fprintf(stderr, "%-16s %10.0f %12.3f %14.3f %14.3f %14.3f\n", coll_names[k],
                sum[4 * k] / w, sum[4 * k + 1] / w / (1 << 20), sum[4 * k + 2] / w * 1e3,
                mx[4 * k + 2] * 1e3, sum[4 * k + 3] / w * 1e3);
    }
}

static void print_regions(rt_ctx *ctx)
{
    rt_prof *p = &ctx->prof;
    bool same = same_regions(ctx);
    int n = p->nregions;
    enum { PER = 4 + NK };
    double *loc = calloc((size_t)(n * PER + 1), sizeof *loc);
    double *sum = calloc((size_t)(n * PER + 1), sizeof *sum);
    double *mx = calloc((size_t)(n * PER + 1), sizeof *mx);
    RT_CHECK(ctx, loc && sum && mx, "out of memory for the profile");
    for (int i = 0; i < n; i++) {
        loc[PER * i] = p->regions[i].calls;
        loc[PER * i + 1] = p->regions[i].incl;
        loc[PER * i + 2] = p->regions[i].self;
        loc[PER * i + 3] = p->regions[i].self_ops;
        for (int k = 0; k < NK; k++)
            loc[PER * i + 4 + k] = p->regions[i].kind[k];
    }
    double w = ctx->world;
    if (same) {
        reduce_ranks(ctx, loc, sum, mx, n * PER);
    } else {
        memcpy(sum, loc, (size_t)(n * PER) * sizeof *loc);
        w = 1;
    }
    if (ctx->rank == 0 && n > 0) {
        bool col[NK];
        for (int k = 0; k < NK; k++) {
            col[k] = false;
            for (int i = 0; i < n; i++)
                col[k] = col[k] || sum[PER * i + 4 + k] > 0;
        }
        fprintf(stderr, "functions and loop iterations (%s; ms/call: rank 0's median [min-max]); "
                        "self time by kind:\n",
                same ? "ms: mean over ranks" : "ranks differ: rank 0 only");
        fprintf(stderr, "%-36s %7s %11s %11s %30s %8s", "region", "calls", "total ms", "self ms",
                "ms/call", "ops/call");
        for (int k = 0; k < NK; k++)
            if (col[k])
                fprintf(stderr, " %11s", kind_names[k]);
        fprintf(stderr, " %11s\n", "other");
        for (int i = 0; i < n; i++) {
            rt_region *r = &p->regions[i];
            double *s = sum + PER * i;
            double lo = r->ndurs ? r->durs[0] : 0, hi = lo;
            for (int j = 0; j < r->ndurs; j++) {
                lo = r->durs[j] < lo ? r->durs[j] : lo;
                hi = r->durs[j] > hi ? r->durs[j] : hi;
            }
            char per[64];
            snprintf(per, sizeof per, "%.3f [%.3f-%.3f]", median(r->durs, r->ndurs) * 1e3,
                     lo * 1e3, hi * 1e3);
            fprintf(stderr, "%-36s %7.0f %11.3f %11.3f %30s %8.1f", r->name, s[0] / w,
                    s[1] / w * 1e3, s[2] / w * 1e3, per, s[0] > 0 ? s[3] / s[0] : 0.0);
            double other = s[2];
            for (int k = 0; k < NK; k++) {
                other -= s[4 + k];
                if (col[k])
                    fprintf(stderr, " %11.3f", s[4 + k] / w * 1e3);
            }
            fprintf(stderr, " %11.3f\n", other / w * 1e3);
        }
    }
    free(loc);
    free(sum);
    free(mx);
}

/* Each training-step region (a loop of main's, rt_step_begin): the page
 * faults of the whole process per step after the first (the first maps
 * and touches what later steps reuse), the median over those steps on each
 * rank, then the mean and maximum over ranks, and rank 0's minimum and
 * maximum step:
 *   page faults per training step after the first (for step (f.spmd:35)): median 2 per rank
 *   (max over ranks 3; rank 0's 20 steps: 0-41; whole process, minor faults) */
static void print_step_faults(rt_ctx *ctx, bool same)
{
    rt_prof *p = &ctx->prof;
    for (int i = 0; i < p->nregions; i++) {
        rt_region *r = &p->regions[i];
        if (!r->step) /* the same regions on every rank when same: the same reductions */
            continue;
        int n = r->nfaults - 1; /* steps after the first */
        double loc[3] = {0, 0, 0}, sum[3], mx[3];
        if (n > 0) {
            double *v = malloc((size_t)n * sizeof *v);
            RT_CHECK(ctx, v != NULL, "out of memory for the profile");
            for (int j = 0; j < n; j++)
                v[j] = (double)r->faults[j + 1];
            loc[0] = median(v, n); /* sorts v */
            loc[1] = v[0];
            loc[2] = v[n - 1];
            free(v);
        }
        double w = ctx->world;
        if (same) {
            reduce_ranks(ctx, loc, sum, mx, 3);
        } else {
            memcpy(sum, loc, sizeof loc);
            memcpy(mx, loc, sizeof loc);
            w = 1;
        }
        if (ctx->rank != 0 || n <= 0)
            continue;
        fprintf(stderr, "page faults per training step after the first (%s): median %.0f per rank "
                        "(max over ranks %.0f; rank 0's %d steps: %.0f-%.0f; whole process, minor faults)\n",
                r->name, sum[0] / w, mx[0], n, loc[1], loc[2]);
    }
}

/* Each training-step region: its device operations and host
 * synchronisations per step (rt_count_op, rt_count_sync), the median over
 * its steps on each rank, the maximum of that over ranks, rank 0's minimum
 * and maximum, rank 0's mean per step of each kind, and which of rank 0's
 * steps synchronised with the host (docs/runtime.md):
 *   device operations per training step (for step (f.spmd:35)): median 120 per rank
 *   (max over ranks 120; rank 0's 10 steps: 120-124; mean on rank 0: 90 kernels, 20 GEMMs,
 *   10 copies, 0 collectives)
 *   host synchronisations per training step (for step (f.spmd:35)): median 0 per rank
 *   (max over ranks 0; rank 0's 10 steps: 0-3; steps with any on rank 0: 10) */
static void print_step_ops(rt_ctx *ctx, bool same)
{
    static const char *const op_names[RT_NOPS] = {"kernels", "GEMMs", "copies", "collectives"};
    rt_prof *p = &ctx->prof;
    for (int i = 0; i < p->nregions; i++) {
        rt_region *r = &p->regions[i];
        if (!r->step)
            continue;
        int n = r->nops;
        double loc[2] = {0, 0}, sum[2], mx[2], lo[2] = {0, 0}, hi[2] = {0, 0}, mean[RT_NOPS] = {0};
        double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
        RT_CHECK(ctx, v != NULL, "out of memory for the profile");
        for (int w = 0; w < 2; w++) {
            for (int j = 0; j < n; j++) {
                double t = 0;
                for (int k = 0; k < RT_NOPS; k++)
                    t += r->ops[j * RT_NOPS + k];
                v[j] = w == 0 ? t : r->syncs[j];
            }
            if (n > 0) {
                loc[w] = median(v, n); /* sorts v */
                lo[w] = v[0];
                hi[w] = v[n - 1];
            }
        }
        free(v);
        for (int j = 0; j < n; j++)
            for (int k = 0; k < RT_NOPS; k++)
                mean[k] += r->ops[j * RT_NOPS + k] / n;
        double w = ctx->world;
        if (same) {
            reduce_ranks(ctx, loc, sum, mx, 2);
        } else {
            memcpy(sum, loc, sizeof loc);
            memcpy(mx, loc, sizeof loc);
            w = 1;
        }
        if (ctx->rank != 0 || n <= 0)
            continue;
        char kinds[256] = "";
        for (int k = 0; k < RT_NOPS; k++)
            snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%.1f %s",
                     k ? ", " : "", mean[k], op_names[k]);
        fprintf(stderr, "device operations per training step (%s): median %.0f per rank (max over "
                        "ranks %.0f; rank 0's %d steps: %.0f-%.0f; mean on rank 0: %s)\n",
                r->name, sum[0] / w, mx[0], n, lo[0], hi[0], kinds);
        char with[256] = "";
        int listed = 0, any = 0;
        for (int j = 0; j < n; j++) {
            if (r->syncs[j] == 0)
                continue;
            any++;
            if (listed < 16 && strlen(with) < sizeof with - 16)
                snprintf(with + strlen(with), sizeof with - strlen(with), "%s%d", listed++ ? " " : "",
                         j + 1);
        }
        if (any > listed)
            snprintf(with + strlen(with), sizeof with - strlen(with), " and %d more", any - listed);
        fprintf(stderr, "host synchronisations per training step (%s): median %.0f per rank (max over "
                        "ranks %.0f; rank 0's %d steps: %.0f-%.0f; steps with any on rank 0: %s)\n",
                r->name, sum[1] / w, mx[1], n, lo[1], hi[1], any ? with : "none");
    }
}

void rt_profile_print(rt_ctx *ctx)
{
    if (ctx->prof.dev_flush) /* the device times still queued */
        ctx->prof.dev_flush(ctx);
    double total = rt_now() - ctx->t_start;
    ctx->prof.faults_end = minor_faults();
    print_kinds(ctx, total);
    rt_mem_print(ctx);
    rt_startup_print(ctx);
    print_collectives(ctx);
    bool same = same_regions(ctx);
    print_step_faults(ctx, same);
    print_step_ops(ctx, same);
    print_regions(ctx);
    if (ctx->rank == 0)
        fflush(stderr);
}
