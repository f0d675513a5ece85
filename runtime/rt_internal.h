/* Internal to libspmdrt: the rt_ctx layout and helpers shared between the
 * runtime's files. Generated code never includes this header.
 * The ctx owns everything reachable from it (groups, pool lists, events). */
#ifndef RT_INTERNAL_H
#define RT_INTERNAL_H

#include <mpi.h>
#include <sys/types.h>
#include <stdio.h>

#include "spmdrt.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RT_NCLASS 176   /* pool size classes */
#define RT_NAME_MAX 32
#define RT_AT_CALLS 16  /* calls whose lines an error names (rt_call_begin) */

/* A communicator for an axis tuple (flattened, in the tuple's order). */
typedef struct rt_group {
    rt_axes axes;
    MPI_Comm comm;
    int size;
    int rank;
} rt_group;

typedef struct rt_freelist {
    void **items;
    int n, cap;
} rt_freelist;

typedef enum {
    RT_COLL_ALL_REDUCE,
    RT_COLL_ALL_GATHER,
    RT_COLL_REDUCE_SCATTER,
    RT_COLL_ALL_TO_ALL,
    RT_COLL_PPERMUTE,
    RT_NCOLL
} rt_coll_kind;

typedef struct rt_coll_stat {
    double count, bytes;
    double seconds;  /* blocked in the call (blocking) or in its start and wait */
    double inflight; /* non-blocking: from the start to the end of the wait */
} rt_coll_stat;

/* --profile: a trace region's totals (one per name) */
typedef struct rt_region {
    const char *name;
    double calls, incl, self;
    double self_ops;            /* device operations while innermost (rt_count_op) */
    double kind[RT_NKINDS + 1]; /* self time per kernel kind; [RT_NKINDS]: allocation */
    double *durs;               /* every call's inclusive time, for the median */
    int ndurs, cap_durs;
    bool step;                  /* opened by rt_step_begin: a training step */
    long *faults;               /* a step region's minor page faults per call (whole process) */
    int nfaults, cap_faults;
    double *ops;                /* a step region's device operations per call, RT_NOPS each */
    double *syncs;              /* and host synchronisations per call */
    int nops, cap_ops;
} rt_region;

/* --profile's count of device operations and host synchronisations
 * (docs/runtime.md, "Device operations and host synchronisations"): the
 * CUDA target counts at its launch, GEMM, copy, collective and wait points
 * (runtime/cuda, the same code in the real and the simulation build); the
 * CPU target counts its runtime calls (each outermost kernel span) and its
 * blocking waits for non-blocking collectives. */
typedef enum { RT_OP_KERNEL, RT_OP_GEMM, RT_OP_COPY, RT_OP_COLL, RT_NOPS } rt_op_kind;

/* --profile: totals per kernel kind, allocation, regions */
typedef struct rt_prof {
    double kind_s[RT_NKINDS], kind_calls[RT_NKINDS], kind_faults[RT_NKINDS];
    double alloc_s, alloc_calls, alloc_fresh, alloc_fresh_bytes;
    double reuse_calls, reuse_hits; /* rt_reuse: results asked for, written in place */
    double views;        /* rt_view: results sharing their operand's storage (no copy) */
    long faults_start, faults_end;
    int kdepth; /* open kernels: only the outermost is recorded */
    double ops[RT_NOPS]; /* device operations so far, by kind (rt_count_op) */
    const char *op_name; /* the kernel span counted as one (the CPU target), for SPMD_PROFILE_OPS */
    double syncs;        /* host synchronisations so far (rt_count_sync) */
    bool counts_launches; /* the target counts its own operations (CUDA), not kernel spans */
    /* the target's device timer (the CUDA target; NULL: kernels timed on
     * the host): dev_begin at the start of each outermost kernel span,
     * dev_end at its end with its kind and the innermost open region's
     * index (-1: none), or kind -1 (not timed on the device: dropped);
     * true when the span's time comes from the device instead, added by
     * rt_prof_device_time when dev_flush (or the target itself, at a
     * synchronisation) reads the queued spans */
    void (*dev_begin)(rt_ctx *ctx);
    bool (*dev_end)(rt_ctx *ctx, int kind, int region);
    void (*dev_flush)(rt_ctx *ctx);
    rt_region *regions;
    int nregions, cap_regions;
} rt_prof;

typedef struct rt_event {
    const char *name;   /* static string */
    const char *cat;    /* "compute" "comm" "user" */
    double t0, dur;     /* microseconds since the ctx's start */
    double bytes;
} rt_event;

/* reduce_scatter: MPI_Reduce_scatter_block, MPI_Allreduce + local slice, or
 * chosen by input size (allreduce from RT_RS_ALLREDUCE_MIN bytes; measured
 * with bench/bench_collectives, see docs/runtime.md) */
typedef enum { RT_RS_AUTO, RT_RS_ALLREDUCE, RT_RS_MPI } rt_rs_algo;
#define RT_RS_ALLREDUCE_MIN ((size_t)4 << 20)
/* the mmap threshold of the runtime's malloc policy (mesh.c) */
#define RT_MMAP_THRESHOLD ((size_t)4 << 20)

/* What tensor.c tells the asynchronous layer (collectives in flight:
 * overlap.c on the CPU target): RT_ASYNC_ALLOC, a tensor is being allocated
 * (between kernels: requests in flight may advance); RT_ASYNC_SETTLE, t's
 * buffer is about to be released or handed out (whatever still writes it
 * must finish first). */
typedef enum { RT_ASYNC_ALLOC, RT_ASYNC_SETTLE } rt_async_event;
typedef void (*rt_async_hook)(rt_ctx *ctx, rt_async_event ev, rt_tensor *t);

struct rt_ctx {
    bool mpi;           /* false for rt_ctx_serial */
    bool own_mpi;       /* rt_init or rt_init_lib called MPI_Init: rt_finalize finalises */
    int rank, world;
    int naxes;
    char names[RT_MAX_AXES][RT_NAME_MAX];
    int sizes[RT_MAX_AXES];
    int coords[RT_MAX_AXES];
    rt_group *groups;
    int ngroups, groups_cap;

    rt_freelist pool[RT_NCLASS];
    size_t pool_cached, pool_limit;
    struct rt_graphs *graphs; /* graph regions (graph.c), NULL until the first */

    rt_error_hook hook;
    void *hook_user;

    double t_start;      /* seconds, monotonic clock */
    double t_proc;       /* the process's start on the same clock (0: unknown) */
    double t_first_step; /* the first rt_step_begin (0: none yet) */
    char *trace_path;
    rt_event *events;
    int nevents, events_cap;
    const char *open_names[64]; /* rt_trace_begin stack */
    double open_t0[64];
    double open_child[64];      /* inclusive time of the regions nested in it */
    long open_faults0[64];      /* the process's minor faults when a step region opened */
    double open_ops0[64][RT_NOPS + 1]; /* and its device operations and host syncs so far */
    int open_region[64];        /* index in prof.regions (--profile) */
    int nopen;
    bool profile;
    rt_prof prof;
    rt_coll_stat stats[RT_NCOLL];
    rt_rs_algo rs_algo;
    /* wait for collectives by testing and sleeping instead of spinning:
     * more ranks than cores on this node, or SPMD_WAIT=sleep (collectives.c) */
    bool wait_sleep;
    size_t rs_allreduce_min;
    /* all-reduces and reduce-scatters from this many bytes go round the
     * runtime's ring (ring.c; SPMD_RING_MIN_KB, default RT_MMAP_THRESHOLD) */
    size_t ring_min;
    char *ring_scratch; /* 2 * RT_RING_CHUNK, allocated and touched at first use */

    MPI_Op bf16_ops[4];     /* rt_bf16_mpi_op (comm.c), created on first use */
    bool bf16_ops_made;
    struct rt_target *tgt;  /* the target's own state (rt_cpu.h; the CUDA runtime's) */
    rt_async_hook async;    /* collectives in flight, or NULL (overlap.c) */
    const char *at_loc;     /* rt_at: the .spmd line being run (static), or NULL */
    const char *at_calls[RT_AT_CALLS]; /* rt_call_begin: the lines of the calls being run */
    int at_depth;           /* calls being run (may exceed RT_AT_CALLS: those are not kept) */
    rt_mem_stats mem;        /* memory.c: live tensor bytes per component */
    int mem_off;             /* > 0: tensors made now are not counted (rt_scratch) */
    rt_storage **mem_slots;  /* what each var slot of main holds (rt_mem_hold) */
    int nmem_slots;
};

/* memory.c: a storage of bytes is born (counted as a temporary) and dies */
void rt_mem_born(rt_ctx *ctx, rt_storage *st, size_t bytes);
void rt_mem_dies(rt_ctx *ctx, rt_storage *st);
/* tensor.c: x (rt_writable, not a view) is freed and its buffer, from the
 * target's rt_mem_alloc, is the caller's (rt_take_data) */
void *rt_release_buffer(rt_ctx *ctx, rt_tensor *x);
/* --profile's memory lines (collective) */
void rt_mem_print(rt_ctx *ctx);
void rt_mem_free_all(rt_ctx *ctx);
/* a 1-d tensor of n elements for the runtime's own use (scratch of a
 * collective, a bucket of the overlap): not counted in the memory
 * accounting, which counts the program's tensors */
rt_tensor *rt_scratch_tensor(rt_ctx *ctx, rt_dtype dt, int64_t n);
/* the high-water marks start again from what is live now */
void rt_mem_reset_peaks(rt_ctx *ctx);

/* error.c: every rank calls it with the same message (a failure they agreed
 * on): each prints it, then all stop together. */
__attribute__((noreturn)) void rt_fail_all(rt_ctx *ctx, const char *msg);

/* checkpoint.c's collective file plumbing, shared with safetensors.c and
 * tokens.c. Messages are at most RT_IO_MSG bytes. */
#define RT_IO_MSG 1024
mode_t rt_io_umask(void);
/* a malloc'd formatted string (the caller frees it); out of memory stops */
char *rt_io_fmt(rt_ctx *ctx, const char *f, ...) __attribute__((format(printf, 2, 3)));
/* every rank learns rank 0's verdict (msg[0] == 0: success); on failure
 * every rank reports it and stops */
void rt_io_verdict(rt_ctx *ctx, char *msg);
/* any rank may have an error (msg != NULL): every rank reports the lowest
 * such rank's message and stops */
void rt_io_agree(rt_ctx *ctx, const char *msg);
char *rt_io_bcast_string(rt_ctx *ctx, const char *s); /* rank 0's, malloc'd */
void rt_io_check(rt_ctx *ctx, int rc, const char *what, const char *call, const char *file);
/* the one rank writing this rank's block (the lowest holding it) */
bool rt_io_is_writer(rt_ctx *ctx, const char *what, const rt_layout *l);
bool rt_io_make_dirs(const char *what, const char *path, char *err);
char *rt_io_parent_of(rt_ctx *ctx, const char *path);
bool rt_io_fsync_dir(const char *what, const char *dir, char *err);
void rt_io_check_visible(rt_ctx *ctx, const char *what, const char *file, bool write);

/* npy.c: the .npy format and POSIX block I/O (contexts without MPI). Errors
 * are returned as a message in err (size errn), never raised. */
const char *rt_npy_descr(rt_dtype dt);
/* a version 1.0 header for a C-order array, padded to a multiple of 64 bytes */
size_t rt_npy_header(char *buf, size_t cap, rt_dtype dt, int ndim, const int64_t *shape);
/* opens path and checks magic, version, dtype, fortran_order, shape and
 * length; *data_off: where the data starts; *open_errno: errno of a failed open */
bool rt_npy_check_file(const char *path, rt_dtype dt, int ndim, const int64_t *shape,
                       int64_t *data_off, int *open_errno, char *err, size_t errn);
bool rt_npy_read_posix(const char *path, int64_t data_off, const rt_layout *l, rt_tensor *t,
                       char *err, size_t errn);
bool rt_npy_write_posix(const char *what, const char *file, const rt_tensor *x, char *err,
                        size_t errn);

/* trace.c */
double rt_now(void); /* seconds */
void rt_trace_record(rt_ctx *ctx, const char *name, const char *cat, double t0,
                     double dur, double bytes);
void rt_trace_finish(rt_ctx *ctx);
void rt_trace_free(rt_ctx *ctx);

/* profile.c */
bool rt_measuring(const rt_ctx *ctx); /* --profile or --trace */
/* a collective measured by span s (begun before it): blocked time, bytes */
void rt_coll_record(rt_ctx *ctx, rt_coll_kind kind, rt_kspan *s, double bytes);
const char *rt_coll_name(rt_coll_kind kind);
/* part of a non-blocking all_reduce (its start or wait): blocked time */
void rt_coll_record_part(rt_ctx *ctx, const char *name, rt_kspan *s, double bytes);
void rt_alloc_record(rt_ctx *ctx, double t0, bool fresh, size_t bytes);
void rt_region_enter(rt_ctx *ctx, int level, const char *name);
void rt_region_leave(rt_ctx *ctx, int level, double incl);
/* marks the region open at level as a training step (its page faults per call) */
void rt_region_step(rt_ctx *ctx, int level);
/* one device operation of a kind / one host synchronisation (--profile) */
void rt_count_op_region(rt_ctx *ctx, rt_op_kind k);
static inline void rt_count_op(rt_ctx *ctx, rt_op_kind k)
{
    ctx->prof.ops[k] += 1;
    rt_count_op_region(ctx, k);
}
/* profile.c: seconds of device time of a kernel span of kind in region (an
 * index of prof.regions, or -1) */
void rt_prof_device_time(rt_ctx *ctx, int kind, int region, double seconds);
static inline void rt_count_sync(rt_ctx *ctx) { ctx->prof.syncs += 1; }
void rt_profile_start(rt_ctx *ctx);
double rt_process_start(void); /* the process's start on rt_now()'s clock; 0: unknown */
void rt_profile_print(rt_ctx *ctx);
void rt_profile_free(rt_ctx *ctx);
/* A kernel measured from here to the end of the enclosing block:
 *   RT_KERNEL(ctx, RT_K_NN, "softmax"); */
typedef struct rt_kscope {
    rt_ctx *ctx;
    rt_kspan s;
    rt_kind kind;
    const char *name;
} rt_kscope;
void rt_kscope_end_(rt_kscope *k);
#define RT_KERNEL(ctx, kind, name)                                          \
    __attribute__((cleanup(rt_kscope_end_), unused)) rt_kscope rt_kscope_ = { \
        (ctx), rt_kernel_begin(ctx), (kind), (name)}

/* comm.c: the MPI plumbing both targets' collectives use (bf16 through its
 * own MPI_Op) */
MPI_Datatype rt_mpi_type(rt_dtype dt);
MPI_Op rt_mpi_op(rt_ctx *ctx, rt_reduce_op op, rt_dtype dt);
/* n as MPI's int count of a collective, or "collective of N elements
 * exceeds MPI's int count" */
int rt_mpi_count(rt_ctx *ctx, int64_t n);
/* MPI_Allreduce, or started and waited for with rt_mpi_wait (SPMD_WAIT);
 * from ctx->ring_min bytes rt_ring_allreduce */
int rt_coll_allreduce(rt_ctx *ctx, const void *in, void *out, int n, MPI_Datatype t, MPI_Op op,
                      rt_group *g);
/* MPI reductions of bf16 (sent as MPI_UINT16_T): user-defined ops that add
 * (or compare) in f32 and round each partial result to bf16 */
MPI_Op rt_bf16_mpi_op(rt_ctx *ctx, rt_reduce_op op);
void rt_bf16_mpi_free(rt_ctx *ctx);

/* ring.c (communication, host memory): all-reduce (in may be MPI_IN_PLACE)
 * and reduce-scatter (n elements in, block g->rank of n / size out) of n
 * elements over g's communicator in point-to-point pieces of at most
 * RT_RING_CHUNK bytes, through no memory mapped per call; deterministic,
 * and on groups of 2 the same bits as MPI's */
#define RT_RING_CHUNK ((size_t)1 << 20)
bool rt_ring_applies(const rt_ctx *ctx, const rt_group *g, size_t bytes);
void rt_ring_allreduce(rt_ctx *ctx, rt_group *g, const void *in, void *out, int64_t n,
                       MPI_Datatype t, MPI_Op op);
void rt_ring_reduce_scatter(rt_ctx *ctx, rt_group *g, const void *in, void *out, int64_t n,
                            MPI_Datatype t, MPI_Op op);
/* the same with the given per-rank block lengths, contiguous in rank order
 * (a reduce-scatter's uneven split) */
void rt_ring_reduce_scatterv(rt_ctx *ctx, rt_group *g, const void *in, void *out,
                             const int64_t *counts, MPI_Datatype t, MPI_Op op);
void rt_ring_free(rt_ctx *ctx);

/* mesh.c */
rt_group *rt_group_get(rt_ctx *ctx, rt_axes axes);
/* Every member's block of a dim of extent n split over axes (torch.chunk,
 * nested: rt_shard_block), in the group's order: ext[k] rows from off[k].
 * Allocated: rt_blocks_free. */
typedef struct rt_blocks {
    int n;
    int64_t *ext, *off;
} rt_blocks;
rt_blocks rt_blocks_of(rt_ctx *ctx, rt_axes axes, int64_t n);
void rt_blocks_free(rt_blocks *b);
/* composite.c: x's dim, blocks b of it, each padded with zeros to c rows
 * and concatenated (n * c rows); and back (y's dim: n blocks of c rows,
 * block k's first b->ext[k] kept) */
rt_tensor *rt_pad_blocks(rt_ctx *ctx, const rt_tensor *x, int dim, const rt_blocks *b, int64_t c);
rt_tensor *rt_unpad_blocks(rt_ctx *ctx, const rt_tensor *y, int dim, const rt_blocks *b, int64_t c);
void rt_mesh_free(rt_ctx *ctx);
void rt_mesh_setup(rt_ctx *ctx, int naxes, const char *const *names, const int *sizes,
                   const char *mesh_arg);

/* pool.c */
void rt_pool_free_all(rt_ctx *ctx);

/* tensor.c: shape helpers */
int64_t rt_numel_of(int ndim, const int64_t *shape);
int rt_norm_dim(rt_ctx *ctx, int dim, int ndim, const char *what);
bool rt_same_shape(const rt_tensor *a, const rt_tensor *b);
void rt_shape_str(char *buf, size_t n, int ndim, const int64_t *shape);
/* view a dim as [outer, d, inner] */
void rt_split_dims(const rt_tensor *x, int dim, int64_t *outer, int64_t *d, int64_t *inner);
void rt_check_dtype(rt_ctx *ctx, const rt_tensor *x, rt_dtype dt, const char *what);
void rt_check_float(rt_ctx *ctx, const rt_tensor *x, const char *what);

/* checks.c: each op's argument checks, for every target (one message each,
 * whichever target runs the op), and the shapes they work out */
typedef struct rt_bshape {
    int ndim;
    int64_t shape[RT_MAX_DIMS];
} rt_bshape;
/* b becomes the NumPy broadcast of b and x (from {0}: x's shape), or
 * "WHAT: shapes B and X do not broadcast" */
void rt_broadcast_add(rt_ctx *ctx, rt_bshape *b, const rt_tensor *x, const char *what);
/* element strides of x read at the broadcast shape [ndim] (0 along the
 * dims x broadcasts) */
void rt_broadcast_strides(const rt_tensor *x, int ndim, const int64_t *shape, int64_t *str);
/* a binary op's operands broadcast: the shape, and each operand's element
 * strides at it */
typedef struct rt_bcast {
    int ndim;
    int64_t shape[RT_MAX_DIMS];
    int64_t sa[RT_MAX_DIMS], sb[RT_MAX_DIMS]; /* 0 along the dims it broadcasts */
} rt_bcast;
rt_bcast rt_binary_broadcast(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, const char *what);
/* unary_bwd: a known op, x a float, dy of x's shape and dtype */
void rt_unary_bwd_check(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, const rt_tensor *dy);
/* binary: a known op, one dtype, no i32 div or pow */
void rt_binary_check(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b);
/* randn, uniform: a float dtype, the block inside the global shape */
void rt_random_check(rt_ctx *ctx, rt_dtype dt, const rt_layout *l);
/* dropout: p in [0, 1), l describes x (a float) */
void rt_dropout_check(rt_ctx *ctx, const rt_tensor *x, double p, const rt_layout *l);
/* where: the values' dtypes agree; the shape of the three broadcast */
rt_bshape rt_where_check(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *a, const rt_tensor *b);
/* where(c, x, 0) (first) or where(c, 0, x): the 0 a 0-d zero of x's dtype;
 * the CUDA target's is one launch (no device scalar made for the 0) */
rt_tensor *rt_where_zero(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *x, bool first);
/* take_along_dim of x [xndim: xshape] (what: the op's name for *dim, which
 * is normalised): i32 indices of x's rank; the result's shape (x and idx
 * broadcast outside dim, idx's size along it) */
rt_bshape rt_take_along_dim_check(rt_ctx *ctx, int xndim, const int64_t *xshape,
                                  const rt_tensor *idx, int *dim, const char *what);
/* the same for the backward, and dy has the result's size */
rt_bshape rt_take_along_dim_bwd_check(rt_ctx *ctx, const rt_tensor *idx, const rt_tensor *dy,
                                      int ndim, const int64_t *x_shape, int *dim);
/* Walks take_along_dim's result bs in order: visit(user, i, xoff) with xoff
 * the flat offset in x of result element i (its index read from idx, on the
 * host, and checked against dim's size: "index J is out of range ...") */
typedef void (*rt_gather_visit)(void *user, int64_t i, int64_t xoff);
/* the message of index j out of range for dim of size (the walk's) */
__attribute__((noreturn)) void rt_take_along_dim_index_fail(rt_ctx *ctx, int32_t j, int dim,
                                                            int64_t size);
void rt_take_along_dim_walk(rt_ctx *ctx, int xndim, const int64_t *xshape, const rt_tensor *idx,
                            int dim, const rt_bshape *bs, rt_gather_visit visit, void *user);
/* a reduction over one dim (the target's rt_reduce_dim) */
typedef enum { RT_REDUCE_SUM, RT_REDUCE_MEAN, RT_REDUCE_MAX } rt_reduce_kind;
/* *dim normalised, amax over an empty dim refused; the result's shape */
void rt_reduce_check(rt_ctx *ctx, const rt_tensor *x, int *dim, bool keepdim, rt_reduce_kind k,
                     const char *what, int *ndim, int64_t *shape);
/* shape [ndim] can receive g's sum; false: it is g's own shape (nothing to do) */
bool rt_sum_to_shape_check(rt_ctx *ctx, const rt_tensor *g, int ndim, const int64_t *shape);
/* softmax, log_softmax (b NULL) and their backwards (a = y, b = dy): a
 * float, b like a; *dim normalised */
void rt_softmax_check(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, int *dim,
                      const char *what);
/* layer_norm, rms_norm over the last dim (dy: the backward's gradient, or
 * NULL): weight and bias [d] of x's dtype; x as rows [rows, d] */
void rt_norm_check(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, const rt_tensor *b,
                   const rt_tensor *dy, const char *what, int64_t *rows, int64_t *d);
/* attention's operands (rt_attention): q, k, v of one float dtype and
 * matching shapes; with out, lse and dout (the backward's, or NULL) of the
 * forward's shapes.  The sizes of the heads loop, the same on both targets. */
typedef struct rt_attn_dims {
    int64_t b, h, hkv, g, t, s, e, ev; /* h = hkv * g query heads */
    int64_t sn;                        /* the keys read: kv_len, or s */
} rt_attn_dims;
void rt_attention_check(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                        const rt_tensor *out, const rt_tensor *lse, const rt_tensor *dout,
                        int64_t kv_len, rt_attn_dims *d);
/* x's header with the shape of its head-major form when token-major (tm:
 * [B, T, H.., E] read as [B, H.., T, E]), else x's; the data is x's */
rt_tensor rt_attn_logical(const rt_tensor *x, bool tm);
/* x (fresh, head-major shape) given its token-major shape when tm */
void rt_attn_to_tokens(rt_tensor *x, bool tm);
/* the element row of logical row r ((b * h + head) * t + i) of an operand
 * of h heads and t rows per head, token-major (tm) or not */
static inline int64_t rt_attn_row(int64_t r, int64_t h, int64_t t, bool tm)
{
    return tm ? (r / (h * t) * t + r % t) * h + r / t % h : r;
}
/* the log-sum-exp's dtype for q's */
rt_dtype rt_attention_lse_dtype(rt_dtype q);
/* attention's output (q's shape with Ev last) and, if wanted, its
 * log-sum-exp (else *lse = NULL), both uninitialised */
rt_tensor *rt_attention_outputs(rt_ctx *ctx, const rt_tensor *q, const rt_attn_dims *d, bool want_lse,
                                rt_tensor **lse);
/* *out = t, the caller's reference; with out NULL (not wanted) t is freed */
void rt_hand_over(rt_ctx *ctx, rt_tensor *t, rt_tensor **out);
/* cross_entropy's ignored target (PyTorch's ignore_index) */
#define RT_IGNORE_INDEX (-100)
/* logits [..., C] and i32 targets [...] */
void rt_cross_entropy_check(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets);
/* each target in range or ignored, read on the host (rt_host_view); returns
 * how many rows are not ignored */
int64_t rt_cross_entropy_check_targets(rt_ctx *ctx, const rt_tensor *logits,
                                       const rt_tensor *targets);
/* after rt_cross_entropy_check: dy has the loss's size */
void rt_cross_entropy_bwd_check(rt_ctx *ctx, const rt_tensor *targets, const rt_tensor *dy,
                                rt_ce_reduction red);
/* the same check for `classes` classes (the vocabulary-parallel loss: the
 * global count); returns the rows not ignored */
int64_t rt_cross_entropy_check_targets_n(rt_ctx *ctx, const rt_tensor *targets, int64_t classes);
/* rt_cross_entropy_vp(_bwd)'s operands: rt_cross_entropy_check's, a layout
 * whose last dim's block is the logits' (offset + local within global), lse
 * (or NULL) f64 with a value per row; the block's first class and the
 * global number of classes */
void rt_cross_entropy_vp_check(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                               const rt_layout *l, const rt_tensor *lse, int64_t *first,
                               int64_t *classes);
/* The vocabulary-parallel cross-entropy's kernels, one per target
 * (kernels_nn.c, cuda/nn.cu; rt_cross_entropy_vp in composite.c runs them
 * around its all-reduces).  rows: the targets' count; c: the logits' last
 * dim (this rank's classes), first: the first one's global id.
 *   rowmax: each row's maximum over this rank's classes, f64 [rows] (-inf
 *     when it holds none);
 *   rowsums: f64 [rows, 2]: sum(exp(logit - m[r])) over this rank's
 *     classes, and the target's logit where this rank holds it (else 0);
 *   finish: from the all-reduced m and sums, the loss (dtype dt, reduced
 *     as red) and, when lse is not NULL, each row's m + log(sum), f64;
 *     checks the targets against `classes` (the CPU's message);
 *   grad: d logits = dy_r * (exp(logit - lse[r]) - onehot), row by row,
 *     into dx (the logits' shape and dtype; may be the logits: each row is
 *     read before it is written). */
rt_tensor *rt_ce_vp_rowmax(rt_ctx *ctx, const rt_tensor *logits);
rt_tensor *rt_ce_vp_rowsums(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                            const rt_tensor *m, int64_t first);
/* rowmax and rowsums (first 0) where one rank holds every class (a
 * group of one: the all-reduces between are the identity), the same
 * numbers; the CUDA target's in one launch */
void rt_ce_vp_rowstats(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets, rt_tensor **m,
                       rt_tensor **sums);
rt_tensor *rt_ce_vp_finish(rt_ctx *ctx, const rt_tensor *targets, const rt_tensor *m,
                           const rt_tensor *sums, int64_t classes, rt_ce_reduction red,
                           rt_dtype dt, rt_tensor **lse);
void rt_ce_vp_grad(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                   const rt_tensor *lse, const rt_tensor *dy, rt_ce_reduction red, int64_t first,
                   int64_t classes, rt_tensor *dx);
/* embedding: a table [V, D] and i32 ids; the backward: i32 ids, dy float
 * [..., D] with a row per id */
void rt_embedding_check(rt_ctx *ctx, const rt_tensor *table, const rt_tensor *ids);
void rt_embedding_bwd_check(rt_ctx *ctx, const rt_tensor *ids, const rt_tensor *dy);
/* the ids each in [0, vocab), read on the host: returns them there
 * (rt_host_view's) */
const int32_t *rt_embedding_check_ids(rt_ctx *ctx, const rt_tensor *ids, int64_t vocab);
/* The messages of a bad target and a bad id, found on the host (at "") or
 * by a device's check (at: " (file.spmd:LINE)", the op's line) */
__attribute__((noreturn)) void rt_cross_entropy_target_fail(rt_ctx *ctx, const char *at,
                                                            int64_t t, int64_t row,
                                                            int64_t classes);
__attribute__((noreturn)) void rt_embedding_id_fail(rt_ctx *ctx, const char *at, int64_t id,
                                                    int64_t pos, int64_t vocab);

/* collectives and convert over a group of n ranks, dim RT_STACK (the V
 * form) or i (S(i)): dim in range (returned); dim's size split in n
 * blocks (returns a block's size); the V form's leading dim of n; avg of a
 * float; reduce_scatter's op sum or avg (of a float); all_to_all's dims
 * both V or both S(i) */
int rt_coll_check_dim(rt_ctx *ctx, const rt_tensor *x, int dim, const char *what);
int64_t rt_coll_split(rt_ctx *ctx, const rt_tensor *x, int dim, int n, const char *what);
/* x's dim has the `want` rows the split of extent over n ranks gives this one */
void rt_coll_check_block(rt_ctx *ctx, const rt_tensor *x, int dim, int64_t want, int64_t extent, int n,
                         const char *what);
void rt_coll_check_stack(rt_ctx *ctx, const rt_tensor *x, int n, const char *what);
/* comm.c: x has one element count on every rank of g (the stacked V forms) */
void rt_coll_check_same(rt_ctx *ctx, rt_group *g, const rt_tensor *x, const char *what);
void rt_all_reduce_check(rt_ctx *ctx, const rt_tensor *x, rt_reduce_op op);
void rt_reduce_scatter_check(rt_ctx *ctx, const rt_tensor *x, rt_reduce_op op);
/* all_gather's result shape over n ranks (dim RT_STACK: a new leading dim
 * of n, at most RT_MAX_DIMS in all); returns its ndim */
int rt_all_gather_shape(rt_ctx *ctx, const rt_tensor *x, int dim, int n, int64_t *shape);
/* all_to_all S(si) -> S(dj) over n ranks: the shape of the chunk sent to
 * each rank (dim dj split in n) and of the result (dim si n times the
 * chunk's); returns the chunk's size along dj */
int64_t rt_all_to_all_shapes(rt_ctx *ctx, const rt_tensor *x, int si, int dj, int n,
                             int64_t *chunk, int64_t *shape);
void rt_all_to_all_check(rt_ctx *ctx, const rt_tensor *x, int *src_dim, int *dst_dim);

/* shape ops: the row-major strides of shape; reshape's shape sh (a -1
 * inferred); permute's shape and x's strides read in its order; concat's
 * shape (*dim normalised); slice, slice_bwd (*dim normalised); expand's
 * strides of x read at shape (0 along broadcast dims); index; add_ and
 * index_add_ into an unshared accumulator */
void rt_contiguous_strides(int ndim, const int64_t *shape, int64_t *str);
void rt_reshape_check(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape, int64_t *sh);
void rt_permute_check(rt_ctx *ctx, const rt_tensor *x, const int *perm, int64_t *shape,
                      int64_t *sstr);
void rt_concat_check(rt_ctx *ctx, int n, const rt_tensor *const *xs, int *dim, int64_t *shape);
void rt_slice_check(rt_ctx *ctx, const rt_tensor *x, int *dim, int64_t start, int64_t end);
void rt_slice_bwd_check(rt_ctx *ctx, const rt_tensor *dy, int ndim, const int64_t *in_shape,
                        int *dim, int64_t start);
void rt_expand_check(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape,
                     int64_t *sstr);
void rt_index_check(rt_ctx *ctx, const rt_tensor *x, int64_t i);
/* rt_slice and rt_index into a new buffer, never a view: for the runtime's
 * own blocks of a tensor that would otherwise keep all of it alive (a
 * convert's own block, an uneven collective's unpadded result) */
rt_tensor *rt_slice_copy(rt_ctx *ctx, const rt_tensor *x, int dim, int64_t start, int64_t end);
rt_tensor *rt_index_copy(rt_ctx *ctx, const rt_tensor *x, int64_t i);
void rt_add_check(rt_ctx *ctx, const rt_tensor *acc, const rt_tensor *x);
void rt_index_add_check(rt_ctx *ctx, const rt_tensor *acc, int64_t i, const rt_tensor *x);
void rt_zero_multi_check(rt_ctx *ctx, int n, rt_tensor *const *xs);
void rt_index_add_multi_check(rt_ctx *ctx, int n, rt_tensor *const *accs, int64_t i,
                              const rt_tensor *const *xs);

/* host.c: the kernel names of the elementwise backwards in --trace and
 * --profile ("exp_bwd", "exp_with_grad", "mul_bwd") */
const char *rt_unary_bwd_name(rt_unary_op op);
const char *rt_unary_grad_name(rt_unary_op op);
const char *rt_binary_bwd_name(rt_binary_op op);

/* composite.c: rt_binary_bwd through gradients in f64: +, -, * of one shape
 * and dtype directly, a broadcast + or - as dy summed to each operand's
 * shape, x * s for a scalar s without its gradient as dy * s; otherwise the
 * target's rt_binary_grads on the operands and dy expanded to the result's
 * shape in f64, each gradient summed to its operand's shape
 * (rt_sum_to_shape) and rounded to its dtype once (every float dtype; the
 * CPU target's bf16 widens to f32 first) */
void rt_binary_bwd_f64(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b,
                       const rt_tensor *dy, rt_tensor **da, rt_tensor **db);
/* The target's kernel of x / s's gradient for x of dy's shape and a 0-d s
 * whose own gradient nobody wants (a host number): dx = dy * (1 / s) in
 * f64, rounded to dy's dtype (f32 or f64) once, the bits of
 * rt_binary_grads' path, in one launch instead of its converts */
rt_tensor *rt_div_scalar_grad(rt_ctx *ctx, const rt_tensor *dy, const rt_tensor *s);
/* The target's kernel of it, on f64 tensors of one shape: ga = dy * df/da,
 * gb = dy * df/db (the X-list's derivatives) */
void rt_binary_grads(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b,
                     const rt_tensor *dy, rt_tensor *ga, rt_tensor *gb);

/* The target's reduction of x over dim (rt_reduce_check'ed there), each
 * result reduced in order in double: what composite.c's sum, mean and amax
 * (over a dim or everything) run on */
rt_tensor *rt_reduce_dim(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim, rt_reduce_kind k,
                         const char *what);

/* The target's rt_sum_squares of f32 or f64 tensors (checked; bf16 is
 * composite.c's) and its backward (any float dtype): spmdrt.h */
rt_tensor *rt_sum_squares_dev(rt_ctx *ctx, int n, const rt_tensor *const *xs);
void rt_sum_squares_multi_dev(rt_ctx *ctx, int ngroups, const int *counts, const rt_tensor *const *xs,
                             rt_tensor **ys); /* the groups of one dtype */
void rt_sum_squares_bwd_dev(rt_ctx *ctx, int n, const rt_tensor *const *xs, const rt_tensor *dy,
                            const bool *want, rt_tensor **dxs);
void rt_sum_squares_check(rt_ctx *ctx, int n, const rt_tensor *const *xs, const rt_tensor *dy);

/* The target: each library (the CPU's, the CUDA one) defines these. */
/* ctx_new: allocates ctx->tgt, the target's state */
void rt_target_new(rt_ctx *ctx);
/* rt_init, after the mesh (collective over the world) */
void rt_target_setup(rt_ctx *ctx);
/* frees ctx->tgt and everything it owns */
void rt_target_free(rt_ctx *ctx);
/* a tensor buffer of cap bytes (a pool size class) in the target's memory,
 * and its release (pool.c keeps released buffers for reuse) */
void *rt_mem_alloc(rt_ctx *ctx, size_t cap);
void rt_mem_free(rt_ctx *ctx, void *p, size_t cap);
/* The GEMM of every matmul and einsum (matmul.c), row-major, contiguous:
 * C[M,N] = op(A)[M,K] op(B)[K,N] + beta C, beta 0 or 1; op(X) = X^T when
 * ta / tb (A stored [K,M], B stored [N,K]); bf16 accumulates in f32. */
void rt_gemm(rt_ctx *ctx, rt_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
             const void *A, const void *B, void *C, double beta);
/* batch such GEMMs, entry i at A + i*sa, B + i*sb, C + i*sc (strides in
 * elements; 0: the same operand for every entry): the same as rt_gemm on
 * each entry, in one library call where the target has a batched GEMM */
void rt_gemm_strided(rt_ctx *ctx, rt_dtype dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                     const void *A, int64_t sa, const void *B, int64_t sb, void *C, int64_t sc,
                     int64_t batch);
/* rt_gemm(ta, !tb, beta 0) with the bias gradient of the GEMM's B operand
 * in the same call: C[M,N] = A^T B (A stored [K,M], B [K,N]) and
 * bias[N] = the sum of B's K rows (the CUDA target: one cuBLASLt GEMM with
 * its bias-gradient epilogue; the simulation emulates it in a fixed order).
 * false: the target has none for this GEMM (the CPU; a dtype or shape
 * cuBLASLt refuses): nothing written, the caller runs the GEMM and the sum
 * on their own.  M, N, K > 0. */
bool rt_gemm_bgrad(rt_ctx *ctx, rt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A,
                   const void *B, void *C, void *bias);
/* C[M,N] += A[M,K] B[N,K]^T as one GEMM whose epilogue adds its result to
 * C, rounded once (cuBLASLt's beta = 1; the simulation: the GEMM's f32
 * result, then the add).  false: the target has none that adds exactly so
 * (the CPU: OpenBLAS's beta = 1 adds block by block of K; bf16): nothing
 * written, the caller runs the GEMM and the add.  M, N > 0. */
bool rt_gemm_acc(rt_ctx *ctx, rt_dtype dt, int64_t M, int64_t N, int64_t K, const void *A, const void *B,
                 void *C);
/* the --profile line naming the GEMM library and how it was chosen */
void rt_gemm_describe(const rt_ctx *ctx, char *buf, size_t n);
/* files (checkpoint.c) move tensor data through host memory: x's data
 * readable by the host (x->data on the CPU; on a device a staged copy, valid
 * until the next staging), and a host buffer for t's data that
 * rt_host_commit then moves into t */
const void *rt_host_view(rt_ctx *ctx, const rt_tensor *x);
void *rt_host_buffer(rt_ctx *ctx, const rt_tensor *t);
void rt_host_commit(rt_ctx *ctx, rt_tensor *t, void *buf);
/* files hold bf16 as f32 (checkpoint.c): bf16 -> f32 (else a new reference
 * to x), and f32 -> bf16 consuming y (else y) */
rt_tensor *rt_bf16_widen(rt_ctx *ctx, const rt_tensor *x);
rt_tensor *rt_bf16_narrow(rt_ctx *ctx, rt_tensor *y);
/* the trace's label for this rank ("f32 GEMM: openblas"), or NULL */
const char *rt_target_label(const rt_ctx *ctx, char *buf, size_t n);

/* MPI_Wait, or with ctx->wait_sleep a loop of MPI_Test and short sleeps, so
 * that a rank waiting for others gives its core to the ranks still working
 * (an oversubscribed node); returns the MPI error code */
int rt_mpi_wait(rt_ctx *ctx, MPI_Request *req);
int rt_mpi_waitall(rt_ctx *ctx, int n, MPI_Request *reqs); /* the same for n requests */
/* decides ctx->wait_sleep once MPI is up (mesh.c) */
void rt_wait_setup(rt_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* RT_INTERNAL_H */
