/* The device mesh: program start-up (argv options, MPI), axis sizes from
 * --mesh / the declared sizes / the world size, and one communicator per
 * axis tuple, created on first use and cached. Ranks are laid out row-major
 * over the mesh (last axis fastest), as torch's init_device_mesh does. */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "rt_graph.h"

static rt_ctx *ctx_new(void)
{
    rt_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        fprintf(stderr, "spmd: error: out of memory\n");
        exit(1);
    }
    ctx->world = 1;
    ctx->pool_limit = (size_t)4 << 30;
    const char *lim = getenv("SPMD_POOL_MAX_MB");
    if (lim)
        ctx->pool_limit = (size_t)strtoull(lim, NULL, 10) << 20;
    const char *rs = getenv("SPMD_REDUCE_SCATTER");
    ctx->rs_algo = !rs ? RT_RS_AUTO : strcmp(rs, "mpi") == 0 ? RT_RS_MPI
                 : strcmp(rs, "allreduce") == 0 ? RT_RS_ALLREDUCE : RT_RS_AUTO;
    ctx->rs_allreduce_min = RT_RS_ALLREDUCE_MIN;
    const char *ring = getenv("SPMD_RING_MIN_KB");
    ctx->ring_min = ring ? (size_t)strtoull(ring, NULL, 10) << 10 : RT_MMAP_THRESHOLD;
    rt_target_new(ctx);
    ctx->t_start = rt_now();
    ctx->t_proc = rt_process_start();
    return ctx;
}

rt_ctx *rt_ctx_serial(void)
{
    return ctx_new();
}

void rt_ctx_free_serial(rt_ctx *ctx)
{
    rt_pool_free_all(ctx);
    rt_mem_free_all(ctx);
    rt_target_free(ctx);
    rt_ring_free(ctx);
    rt_trace_free(ctx);
    rt_profile_free(ctx);
    free(ctx);
}

/* ---- argv */

static void drop_args(int *argc, char **argv, int at, int n)
{
    for (int i = at; i + n <= *argc; i++)
        argv[i] = argv[i + n];
    *argc -= n;
}

/* Removes the runtime's options; returns the --mesh value or NULL. */
static const char *parse_args(rt_ctx *ctx, int *argc, char **argv)
{
    const char *mesh = NULL;
    for (int i = 1; i < *argc;) {
        const char *a = argv[i];
        if (strcmp(a, "--profile") == 0) {
            ctx->profile = true;
            drop_args(argc, argv, i, 1);
        } else if (strcmp(a, "--mesh") == 0 || strcmp(a, "--trace") == 0) {
            RT_CHECK(ctx, i + 1 < *argc, "option %s needs a value", a);
            if (a[2] == 'm')
                mesh = argv[i + 1];
            else
                ctx->trace_path = strdup(argv[i + 1]);
            drop_args(argc, argv, i, 2);
        } else if (strncmp(a, "--mesh=", 7) == 0) {
            mesh = a + 7;
            drop_args(argc, argv, i, 1);
        } else if (strncmp(a, "--trace=", 8) == 0) {
            ctx->trace_path = strdup(a + 8);
            drop_args(argc, argv, i, 1);
        } else {
            i++;
        }
    }
    return mesh;
}

/* The runtime's malloc policy (docs/runtime.md "Page faults").
 *
 * glibc raises its mmap threshold each time a mapped chunk is freed (up to
 * 32 MiB), after which large buffers come from the heap and stay resident:
 * tp_mlp's peak memory per rank was 1.10x the hand-written C's on dp=2 and
 * 1.14x on 2x2 with it, 0.99x and 1.02x without (bench/tp_mlp_startup_mem.sh,
 * when the baseline had the same fixed threshold). A fixed threshold (setting
 * it turns the adjustment off) keeps buffers of 4 MiB and more in their own
 * mappings, returned when freed. Setting it also freezes the trim threshold
 * at 128 KiB, so that every free leaving more than that at the top of the
 * heap gave it back to the kernel, and the next step faulted it in again
 * (MPI's temporaries under 4 MiB: the flagship's reduce-scatters, 3,400
 * page faults per step on a tp rank); the trim threshold is fixed too, at
 * glibc's own ratio (twice the mmap threshold). MPI's temporaries of 4 MiB
 * and more would still be mapped afresh in every call; the collectives
 * that would need them go round the runtime's ring instead (ring.c, from
 * ctx->ring_min = RT_MMAP_THRESHOLD bytes). Either glibc tunable, when set,
 * is left alone. */
#define RT_TRIM_THRESHOLD (2 * RT_MMAP_THRESHOLD)

static bool malloc_policy = true;

void rt_set_malloc_policy(bool on)
{
    malloc_policy = on;
}

static void set_malloc_policy(void)
{
    if (!malloc_policy)
        return;
    if (!getenv("MALLOC_MMAP_THRESHOLD_"))
        mallopt(M_MMAP_THRESHOLD, (int)RT_MMAP_THRESHOLD);
    if (!getenv("MALLOC_TRIM_THRESHOLD_"))
        mallopt(M_TRIM_THRESHOLD, (int)RT_TRIM_THRESHOLD);
}

/* The start every context shares: MPI (initialised if nobody has), the
 * mesh (from the declared sizes and mesh_arg), the target. */
static void start(rt_ctx *ctx, int *argc, char ***argv, int naxes, const char *const *names,
                  const int *sizes, const char *mesh_arg, bool from_argv)
{
    ctx->mpi = true;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        RT_CALL_MPI(ctx, MPI_Init(argc, argv));
        ctx->own_mpi = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    RT_CALL_MPI(ctx, MPI_Comm_rank(MPI_COMM_WORLD, &ctx->rank));
    RT_CALL_MPI(ctx, MPI_Comm_size(MPI_COMM_WORLD, &ctx->world));
    if (from_argv)
        mesh_arg = argc && argv ? parse_args(ctx, argc, *argv) : NULL;
    rt_mesh_setup(ctx, naxes, names, sizes, mesh_arg);
    rt_wait_setup(ctx);
    rt_target_setup(ctx);
    /* the GEMM timing's tensors are the runtime's, not the program's */
    rt_mem_reset_peaks(ctx);
    RT_CALL_MPI(ctx, MPI_Barrier(MPI_COMM_WORLD));
    ctx->t_start = rt_now();
    rt_profile_start(ctx);
}

rt_ctx *rt_init(int *argc, char ***argv, int naxes, const char *const *names,
                const int *sizes)
{
    set_malloc_policy();
    rt_ctx *ctx = ctx_new();
    start(ctx, argc, argv, naxes, names, sizes, NULL, true);
    return ctx;
}

rt_ctx *rt_init_lib(int naxes, const char *const *names, const int *sizes, const char *mesh,
                    rt_error_hook hook, void *user)
{
    rt_ctx *ctx = ctx_new();
    rt_set_error_hook(ctx, hook, user);
    start(ctx, NULL, NULL, naxes, names, sizes, mesh && *mesh ? mesh : NULL, false);
    return ctx;
}

int rt_finalize(rt_ctx *ctx)
{
    rt_wait_all(ctx);
    rt_graphs_free(ctx);
    rt_ring_free(ctx);
    rt_trace_finish(ctx);
    rt_bf16_mpi_free(ctx);
    rt_mesh_free(ctx);
    rt_pool_free_all(ctx);
    rt_mem_free_all(ctx);
    rt_target_free(ctx);
    rt_trace_free(ctx);
    rt_profile_free(ctx);
    free(ctx->trace_path);
    bool own = ctx->own_mpi;
    free(ctx);
    if (own)
        MPI_Finalize();
    return 0;
}

/* ---- mesh sizes */

static int find_axis(const rt_ctx *ctx, const char *name, size_t len)
{
    for (int a = 0; a < ctx->naxes; a++)
        if (strlen(ctx->names[a]) == len && strncmp(ctx->names[a], name, len) == 0)
            return a;
    return -1;
}

/* --mesh a=n,b=m: overrides declared sizes by name */
static void apply_mesh_arg(rt_ctx *ctx, const char *arg)
{
    const char *p = arg;
    unsigned given = 0;
    while (*p) {
        const char *eq = strchr(p, '=');
        RT_CHECK(ctx, eq != NULL, "--mesh '%s': expected axis=size entries", arg);
        int a = find_axis(ctx, p, (size_t)(eq - p));
        RT_CHECK(ctx, a >= 0, "--mesh '%s': no mesh axis named '%.*s'", arg, (int)(eq - p), p);
        RT_CHECK(ctx, !(given & (1u << a)), "--mesh '%s': axis '%s' is given twice", arg,
                 ctx->names[a]);
        given |= 1u << a;
        char *end;
        errno = 0;
        long n = strtol(eq + 1, &end, 10);
        RT_CHECK(ctx, end != eq + 1 && n > 0 && (*end == ',' || *end == 0),
                 "--mesh '%s': size of axis '%s' must be a positive integer", arg,
                 ctx->names[a]);
        RT_CHECK(ctx, errno != ERANGE && n <= ctx->world,
                 "--mesh '%s': axis '%s' is larger than the world size %d (mpirun -np %d)", arg,
                 ctx->names[a], ctx->world, ctx->world);
        ctx->sizes[a] = (int)n;
        p = *end ? end + 1 : end;
    }
}

static void describe_mesh(const rt_ctx *ctx, char *buf, size_t n)
{
    size_t k = 0;
    for (int a = 0; a < ctx->naxes && k < n; a++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s=%d", a ? ", " : "", ctx->names[a],
                              ctx->sizes[a]);
}

static void infer_sizes(rt_ctx *ctx)
{
    int omitted = -1;
    long prod = 1;
    for (int a = 0; a < ctx->naxes; a++) {
        if (ctx->sizes[a] > 0) {
            /* stops before it could overflow: past INT_MAX it is reported
             * as "more than" */
            prod = prod > INT_MAX ? prod : prod * ctx->sizes[a];
            continue;
        }
        RT_CHECK(ctx, omitted < 0,
                 "mesh axes '%s' and '%s' both have no size; give one with --mesh %s=N",
                 ctx->names[omitted], ctx->names[a], ctx->names[a]);
        omitted = a;
    }
    if (omitted >= 0) {
        RT_CHECK(ctx, ctx->world % prod == 0,
                 "cannot infer the size of mesh axis '%s': world size %d is not divisible by "
                 "%ld (the product of the other axes)", ctx->names[omitted], ctx->world, prod);
        ctx->sizes[omitted] = (int)(ctx->world / prod);
        prod = ctx->world;
    }
    char desc[512] = "";
    describe_mesh(ctx, desc, sizeof desc);
    RT_CHECK(ctx, prod == ctx->world, "mesh (%s) has %s%ld ranks but the program runs on %d (mpirun -np %d)",
             desc, prod > INT_MAX ? "more than " : "", prod > INT_MAX ? (long)INT_MAX : prod, ctx->world,
             ctx->world);
}

void rt_mesh_setup(rt_ctx *ctx, int naxes, const char *const *names, const int *sizes,
                   const char *mesh_arg)
{
    RT_CHECK(ctx, naxes >= 0 && naxes <= RT_MAX_AXES, "mesh has %d axes, at most %d supported",
             naxes, RT_MAX_AXES);
    ctx->naxes = naxes;
    for (int a = 0; a < naxes; a++) {
        RT_CHECK(ctx, strlen(names[a]) < RT_NAME_MAX, "axis name '%s' too long", names[a]);
        strcpy(ctx->names[a], names[a]);
        ctx->sizes[a] = sizes && sizes[a] > 0 ? sizes[a] : 0;
    }
    if (mesh_arg)
        apply_mesh_arg(ctx, mesh_arg);
    if (naxes == 0) {
        RT_CHECK(ctx, ctx->world == 1, "the program declares no mesh but runs on %d ranks",
                 ctx->world);
        return;
    }
    infer_sizes(ctx);
    int r = ctx->rank;
    for (int a = naxes - 1; a >= 0; a--) { /* last axis fastest */
        ctx->coords[a] = r % ctx->sizes[a];
        r /= ctx->sizes[a];
    }
}

/* ---- queries */

int rt_rank(const rt_ctx *ctx) { return ctx->rank; }
int rt_world_size(const rt_ctx *ctx) { return ctx->world; }
int rt_naxes(const rt_ctx *ctx) { return ctx->naxes; }
const char *rt_axis_name(const rt_ctx *ctx, int axis) { return ctx->names[axis]; }
int rt_axis_size(const rt_ctx *ctx, int axis) { return ctx->sizes[axis]; }
int rt_axis_index(const rt_ctx *ctx, int axis) { return ctx->coords[axis]; }

int rt_axis_lookup(rt_ctx *ctx, const char *name)
{
    int a = find_axis(ctx, name, strlen(name));
    RT_CHECK(ctx, a >= 0, "no mesh axis named '%s'", name);
    return a;
}

rt_axes rt_axes_parse(rt_ctx *ctx, const char *names)
{
    rt_axes ax = RT_NO_AXES;
    const char *p = names;
    while (*p) {
        size_t len = strcspn(p, ", ");
        if (len > 0) {
            int a = find_axis(ctx, p, len);
            RT_CHECK(ctx, a >= 0, "no mesh axis named '%.*s'", (int)len, p);
            RT_CHECK(ctx, ax.n < RT_MAX_AXES, "too many axes in '%s'", names);
            ax.idx[ax.n++] = a;
        }
        p += len;
        p += strspn(p, ", ");
    }
    return ax;
}

static void check_axes(rt_ctx *ctx, rt_axes axes)
{
    int seen = 0;
    RT_CHECK(ctx, axes.n >= 1 && axes.n <= ctx->naxes, "axis tuple of %d axes on a %d-axis mesh",
             axes.n, ctx->naxes);
    for (int i = 0; i < axes.n; i++) {
        int a = axes.idx[i];
        RT_CHECK(ctx, a >= 0 && a < ctx->naxes, "axis index %d out of range", a);
        RT_CHECK(ctx, !(seen & (1 << a)), "axis '%s' repeated in a tuple", ctx->names[a]);
        seen |= 1 << a;
    }
}

static bool same_axes(rt_axes a, rt_axes b)
{
    if (a.n != b.n)
        return false;
    for (int i = 0; i < a.n; i++)
        if (a.idx[i] != b.idx[i])
            return false;
    return true;
}

static bool in_axes(rt_axes axes, int a)
{
    for (int i = 0; i < axes.n; i++)
        if (axes.idx[i] == a)
            return true;
    return false;
}

/* color: the row-major index over the axes outside the tuple; key: block index */
static void split_keys(const rt_ctx *ctx, rt_axes axes, int *color, int *key)
{
    *color = 0;
    *key = 0;
    for (int a = 0; a < ctx->naxes; a++)
        if (!in_axes(axes, a))
            *color = *color * ctx->sizes[a] + ctx->coords[a];
    for (int i = 0; i < axes.n; i++)
        *key = *key * ctx->sizes[axes.idx[i]] + ctx->coords[axes.idx[i]];
}

rt_group *rt_group_get(rt_ctx *ctx, rt_axes axes)
{
    check_axes(ctx, axes);
    for (int i = 0; i < ctx->ngroups; i++)
        if (same_axes(ctx->groups[i].axes, axes))
            return &ctx->groups[i];
    if (ctx->ngroups == ctx->groups_cap) {
        int cap = ctx->groups_cap ? 2 * ctx->groups_cap : 16;
        rt_group *g = realloc(ctx->groups, (size_t)cap * sizeof *g);
        RT_CHECK(ctx, g != NULL, "out of memory");
        ctx->groups = g;
        ctx->groups_cap = cap;
    }
    rt_group *g = &ctx->groups[ctx->ngroups];
    g->axes = axes;
    int color, key;
    split_keys(ctx, axes, &color, &key);
    if (ctx->mpi) {
        RT_CALL_MPI(ctx, MPI_Comm_split(MPI_COMM_WORLD, color, key, &g->comm));
        RT_CALL_MPI(ctx, MPI_Comm_size(g->comm, &g->size));
        RT_CALL_MPI(ctx, MPI_Comm_rank(g->comm, &g->rank));
        RT_CHECK(ctx, g->rank == key, "communicator rank %d differs from block index %d",
                 g->rank, key);
    } else {
        g->comm = MPI_COMM_NULL;
        g->size = 1;
        g->rank = 0;
    }
    ctx->ngroups++;
    return g;
}

void rt_mesh_free(rt_ctx *ctx)
{
    for (int i = 0; i < ctx->ngroups; i++)
        if (ctx->groups[i].comm != MPI_COMM_NULL)
            MPI_Comm_free(&ctx->groups[i].comm);
    free(ctx->groups);
    ctx->groups = NULL;
    ctx->ngroups = ctx->groups_cap = 0;
}

int rt_group_size(rt_ctx *ctx, rt_axes axes)
{
    check_axes(ctx, axes);
    int n = 1;
    for (int i = 0; i < axes.n; i++)
        n *= ctx->sizes[axes.idx[i]];
    return n;
}

int rt_group_rank(rt_ctx *ctx, rt_axes axes)
{
    int color, key;
    check_axes(ctx, axes);
    split_keys(ctx, axes, &color, &key);
    return key;
}

int rt_group_member(rt_ctx *ctx, rt_axes axes, int k)
{
    int coords[RT_MAX_AXES];
    memcpy(coords, ctx->coords, sizeof coords);
    RT_CHECK(ctx, k >= 0 && k < rt_group_size(ctx, axes), "group member %d out of range", k);
    for (int i = axes.n - 1; i >= 0; i--) {
        int a = axes.idx[i];
        coords[a] = k % ctx->sizes[a];
        k /= ctx->sizes[a];
    }
    int r = 0;
    for (int a = 0; a < ctx->naxes; a++)
        r = r * ctx->sizes[a] + coords[a];
    return r;
}

/* ---- layouts */

static void axes_desc(const rt_ctx *ctx, rt_axes axes, char *buf, size_t n)
{
    size_t k = 0;
    if (axes.n == 1) {
        snprintf(buf, n, "axis '%s'", ctx->names[axes.idx[0]]);
        return;
    }
    k += (size_t)snprintf(buf, n, "axes (");
    for (int i = 0; i < axes.n && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", ctx->names[axes.idx[i]]);
    if (k < n)
        snprintf(buf + k, n - k, ")");
}

void rt_check_divisible(rt_ctx *ctx, const char *name, int dim, int64_t size, rt_axes axes)
{
    int n = rt_group_size(ctx, axes);
    if (size % n == 0)
        return;
    char desc[256];
    axes_desc(ctx, axes, desc, sizeof desc);
    /* the global shape and the mesh are the same on every rank: all are here */
    char msg[512];
    snprintf(msg, sizeof msg, "tensor '%s' dim %d (size %lld) is not divisible by %s (size %d)",
             name ? name : "?", dim, (long long)size, desc, n);
    rt_fail_all(ctx, msg);
}

void rt_check_blocks(rt_ctx *ctx, const rt_tensor *x, const rt_layout *l, const char *what,
                     const char *at)
{
    RT_CHECK(ctx, x->ndim == l->ndim, "%s: %s has %d dims, its type %d", at, what, x->ndim, l->ndim);
    for (int d = 0; d < l->ndim; d++)
        if (x->shape[d] != l->local[d])
            rt_fail(ctx,
                    "%s: %s has %lld rows in dim %d on this rank, but its type's layout gives "
                    "%lld (torch.chunk's split of %lld, SPEC 4): size the block with "
                    "shard_extent, or make it from the block's inputs",
                    at, what, (long long)x->shape[d], d, (long long)l->local[d],
                    (long long)l->global[d]);
}

void rt_check_even_at(rt_ctx *ctx, const char *name, const char *at, const char *what, int dim,
                      int64_t size, rt_axes axes)
{
    int n = rt_group_size(ctx, axes);
    if (size % n == 0)
        return;
    char desc[256];
    axes_desc(ctx, axes, desc, sizeof desc);
    rt_fail(ctx,
            "%s: %s of '%s' needs equal blocks, but dim %d (size %lld) is not divisible by %s "
            "(size %d): its blocks are uneven (SPEC 4); gather the dim first, or pad it to a "
            "multiple of %d",
            at, what, name ? name : "?", dim, (long long)size, desc, n, n);
}

void rt_check_reshape_even(rt_ctx *ctx, const char *name, const char *at, int dim, int64_t from,
                           int64_t to, rt_axes axes)
{
    int n = rt_group_size(ctx, axes);
    if (from % n == 0 && to % n == 0)
        return;
    char desc[256];
    axes_desc(ctx, axes, desc, sizeof desc);
    rt_fail(ctx,
            "%s: reshape of '%s' %s dim %d (size %lld), sharded on %s (size %d), into a dim of size "
            "%lld, but the blocks are uneven (SPEC 4): the new dim's blocks are not the old ones; "
            "gather the dim first, or pad it to a multiple of %d",
            at, name ? name : "?", to > from ? "merges" : "splits", dim, (long long)from, desc, n,
            (long long)to, n);
}

void rt_check_gqa_blocks(rt_ctx *ctx, const char *name, const char *at, int64_t h, int64_t hkv,
                         rt_axes axes)
{
    if (hkv <= 0 || h == hkv || h % hkv != 0)
        return;
    int64_t g = h / hkv;
    int n = rt_group_size(ctx, axes);
    for (int b = 0; b < n; b++) {
        int64_t oq, ok, eq = rt_shard_block(ctx, h, axes, b, &oq);
        int64_t ek = rt_shard_block(ctx, hkv, axes, b, &ok);
        if (eq == g * ek && oq == g * ok)
            continue;
        char desc[256];
        axes_desc(ctx, axes, desc, sizeof desc);
        char msg[1024];
        snprintf(msg, sizeof msg,
                 "%s: attention of '%s' splits %lld query heads and %lld key/value heads over %s "
                 "(size %d) into blocks that do not line up: block %d holds query heads [%lld, %lld), "
                 "but key/value heads [%lld, %lld), whose groups are query heads [%lld, %lld) (SPEC 4: "
                 "torch.chunk splits each head dim separately); compute the queries in the grouped "
                 "layout [B, Hkv, G, T, E] with the key/value heads sharded (nn.gqa_heads), or use a "
                 "group size that divides %lld",
                 at, name ? name : "?", (long long)h, (long long)hkv, desc, n, b, (long long)oq,
                 (long long)(oq + eq), (long long)ok, (long long)(ok + ek), (long long)(g * ok),
                 (long long)(g * (ok + ek)), (long long)hkv);
        /* the sizes and the mesh are the same on every rank: all fail here */
        rt_fail_all(ctx, msg);
    }
}

/* torch.chunk's split (SPEC 4): block r of k is [r*c, min(n, (r+1)*c))
 * with c = ceil(n/k), clamped to n (the last blocks smaller, possibly
 * empty) */
int64_t rt_chunk(int64_t n, int k, int r, int64_t *off)
{
    int64_t c = k > 0 ? (n + k - 1) / k : n;
    int64_t lo = (int64_t)r * c < n ? (int64_t)r * c : n;
    int64_t hi = lo + c < n ? lo + c : n;
    if (off)
        *off = lo;
    return hi - lo;
}

int64_t rt_shard_block(rt_ctx *ctx, int64_t n, rt_axes axes, int b, int64_t *off)
{
    int coord[RT_MAX_AXES];
    for (int i = axes.n - 1; i >= 0; i--) {
        int k = ctx->sizes[axes.idx[i]];
        coord[i] = b % k;
        b /= k;
    }
    int64_t o = 0, ext = n;
    for (int i = 0; i < axes.n; i++) { /* nested, major to minor */
        int64_t sub;
        ext = rt_chunk(ext, ctx->sizes[axes.idx[i]], coord[i], &sub);
        o += sub;
    }
    if (off)
        *off = o;
    return ext;
}

int64_t rt_shard_extent(rt_ctx *ctx, int64_t n, rt_axes axes)
{
    if (axes.n == 0)
        return n;
    return rt_shard_block(ctx, n, axes, rt_group_rank(ctx, axes), NULL);
}

int64_t rt_shard_offset(rt_ctx *ctx, int64_t n, rt_axes axes)
{
    int64_t off = 0;
    if (axes.n > 0)
        rt_shard_block(ctx, n, axes, rt_group_rank(ctx, axes), &off);
    return off;
}

rt_blocks rt_blocks_of(rt_ctx *ctx, rt_axes axes, int64_t n)
{
    rt_blocks b = {.n = rt_group_size(ctx, axes)};
    b.ext = malloc(2 * (size_t)b.n * sizeof *b.ext);
    RT_CHECK(ctx, b.ext != NULL, "out of memory");
    b.off = b.ext + b.n;
    for (int k = 0; k < b.n; k++)
        b.ext[k] = rt_shard_block(ctx, n, axes, k, &b.off[k]);
    return b;
}

void rt_blocks_free(rt_blocks *b)
{
    free(b->ext);
    b->ext = b->off = NULL;
}

bool rt_shard_even(rt_ctx *ctx, int64_t n, rt_axes axes)
{
    return axes.n == 0 || n % rt_group_size(ctx, axes) == 0;
}

rt_layout rt_layout_full(int ndim, const int64_t *shape)
{
    rt_layout l = {.ndim = ndim};
    for (int d = 0; d < ndim; d++)
        l.global[d] = l.local[d] = shape[d];
    return l;
}

rt_layout rt_layout_of(rt_ctx *ctx, const char *name, int ndim, const int64_t *global,
                       const rt_axes *dim_axes)
{
    (void)name;
    rt_layout l = rt_layout_full(ndim, global);
    for (int d = 0; dim_axes && d < ndim; d++) {
        if (dim_axes[d].n == 0)
            continue;
        l.local[d] = rt_shard_block(ctx, global[d], dim_axes[d], rt_group_rank(ctx, dim_axes[d]),
                                    &l.offset[d]);
    }
    return l;
}
