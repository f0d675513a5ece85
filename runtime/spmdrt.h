/* libspmdrt: the runtime that spmdc-generated C links against: tensors, the
 * device mesh and its communicators, collectives, local kernels, counter-based
 * RNG, .npy I/O, errors, trace and profile.
 * Ownership: every function returning rt_tensor * returns a new reference the
 * caller owns and must release with rt_free; tensor arguments are borrowed
 * (never freed, never kept). Out-parameters (rt_tensor **) are owned too.
 * The rt_ctx owns the mesh, communicators, buffer pool and trace buffers. */
#ifndef SPMDRT_H
#define SPMDRT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus /* the CUDA target's runtime is compiled as CUDA C++ */
extern "C" {
#endif

#define RT_MAX_DIMS 8
#define RT_MAX_AXES 8
#define RT_STACK (-1) /* "dim" argument of a collective: V (stack) form */

typedef struct rt_ctx rt_ctx;

/* ---------------------------------------------------------------- tensors */

/* RT_BF16 is bfloat16 stored as uint16_t (the high half of an f32): kernels
 * compute in f32 (or wider) and round each result to bf16, as PyTorch on CPU. */
typedef enum { RT_F32, RT_F64, RT_I32, RT_BF16 } rt_dtype;

/* bf16 <-> f32. Rounding is to nearest, ties to even; NaN stays NaN (0x7fc0,
 * as c10::BFloat16); inf and overflow to inf as in IEEE. Inline so that
 * generated code (fused elementwise loops) rounds exactly as the kernels do. */
typedef union rt_f32_bits_ {
    float f;
    uint32_t u;
} rt_f32_bits_;
static inline float rt_bf16_to_f32(uint16_t h)
{
    rt_f32_bits_ b = {.u = (uint32_t)h << 16};
    return b.f;
}
static inline uint16_t rt_f32_to_bf16(float f)
{
    rt_f32_bits_ b = {.f = f};
    uint32_t r = (b.u + 0x7fffu + ((b.u >> 16) & 1u)) >> 16;
    return (b.u & 0x7fffffffu) > 0x7f800000u ? (uint16_t)0x7fc0 : (uint16_t)r;
}
/* f rounded to the nearest bf16, as an f32 */
static inline float rt_bf16_round(float f) { return rt_bf16_to_f32(rt_f32_to_bf16(f)); }

/* Generated fused elementwise loops (docs/codegen.md) run over blocks of
 * RT_FUSED_BLOCK elements whose iterations are independent: each reads its
 * own elements before it writes them, even where a result takes an
 * operand's buffer. RT_INDEPENDENT tells the C compiler so (no overlap
 * checks between the buffers), and the constant trip count lets GCC's -O2
 * vectorise the loop. */
#define RT_FUSED_BLOCK 16
#if defined(__clang__)
#define RT_INDEPENDENT _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define RT_INDEPENDENT _Pragma("GCC ivdep")
#else
#define RT_INDEPENDENT
#endif

/* A tensor's memory: a buffer of the pool, shared by the tensor that made
 * it and every view of it (rt_reshape, rt_index, rt_slice of a contiguous
 * block). refs counts the references to all of them together, so a buffer
 * is written in place only while one reference to one tensor over it
 * exists (rt_writable): never while a view of it, or the tensor a view
 * was made of, is alive. The memory accounting (memory.c) counts a
 * storage once, whatever views it has. Fields are the runtime's. */
typedef struct rt_storage {
    void *base;   /* the pooled buffer */
    size_t cap;   /* its bytes (the pool's size class) */
    int refs;     /* references to every tensor over it (the sum of their refs) */
    /* memory accounting (memory.c): the bytes requested, what holds it */
    size_t mem_bytes;
    int mem_tape;      /* references on the autodiff tape */
    int mem_slot;      /* the var slot of main holding it (rt_mem_hold), or -1 */
    int mem_comp;      /* the rt_mem_comp it is counted in */
} rt_storage;

/* A dense, contiguous, row-major tensor: numel elements from data, in its
 * storage (data is st->base, or inside it for a view). Fields are
 * read-only for callers; data may be written by whoever holds the only
 * reference to the storage (rt_writable). */
typedef struct rt_tensor {
    rt_dtype dtype;
    int ndim;
    int64_t shape[RT_MAX_DIMS];
    int64_t numel;
    void *data;
    int refs;        /* references to this tensor: rt_retain / rt_free */
    bool view;       /* made by rt_view: st belongs to the tensor it views */
    rt_storage *st;  /* its memory, shared with its views */
} rt_tensor;

/* whether x's data may be written in place: the caller's reference is the
 * only one to x's storage (no other reference to x, no live view of it or
 * base it views) */
static inline bool rt_writable(const rt_tensor *x) { return x->st->refs == 1; }

size_t rt_dtype_size(rt_dtype dt);
const char *rt_dtype_name(rt_dtype dt); /* "f32" "f64" "i32" "bf16" */

rt_tensor *rt_empty(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape);
rt_tensor *rt_zeros(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape);
rt_tensor *rt_full(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape, double v);
rt_tensor *rt_scalar(rt_ctx *ctx, rt_dtype dt, double v);          /* 0-d */
rt_tensor *rt_from_data(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape,
                        const void *data);                          /* copies */
rt_tensor *rt_copy(rt_ctx *ctx, const rt_tensor *x);
/* Host memory in and out, on any target (a GPU's tensors are copied):
 * a new tensor holding data, and x's elements into data. */
rt_tensor *rt_from_host(rt_ctx *ctx, rt_dtype dt, int ndim, const int64_t *shape, const void *data);
void rt_to_host(rt_ctx *ctx, const rt_tensor *x, void *data);
rt_tensor *rt_retain(rt_tensor *x); /* new reference to the same tensor */
/* A view of x: ndim/shape over x's elements from element offset off on (a
 * contiguous block of x: off + numel(shape) <= x->numel), sharing x's
 * storage; no data move. The view keeps the storage alive after x is
 * released, and neither is rt_writable while the other is alive. */
rt_tensor *rt_view(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape, int64_t off);
/* The result buffer of an elementwise op whose operand x dies at it: x
 * itself (a new reference) when the caller's is the only reference to its
 * storage (rt_writable: no other reference, no live view), so the op
 * writes in place; otherwise a new tensor of x's dtype and shape. */
rt_tensor *rt_reuse(rt_ctx *ctx, rt_tensor *x);
void rt_free(rt_ctx *ctx, rt_tensor *x); /* NULL is allowed */
/* Hands x's buffer (64-byte aligned, from aligned_alloc: release it with
 * free()) to the caller and frees x, whose storage's only reference the
 * caller's must be (a view's elements are copied to a new buffer). For C
 * code that keeps a runtime result as a plain array. */
void *rt_take_data(rt_ctx *ctx, rt_tensor *x);
double rt_get(const rt_tensor *x, int64_t i);        /* flat index, as double */
void rt_set(rt_tensor *x, int64_t i, double v);
double rt_item(rt_ctx *ctx, const rt_tensor *x);     /* the value of a 1-element tensor */
void rt_print(rt_ctx *ctx, const char *label, const rt_tensor *x); /* rank 0 only */
/* "f32 (4, 4) [1, 0, ...]": dtype, shape and the first 64 values, without a
 * newline, on any rank (print() of a tensor with other arguments). */
void rt_print_values(const rt_tensor *x);

/* Memory accounting: every live tensor's bytes as requested (numel times
 * the dtype's size, not the pool's size class) are counted in one
 * component; --profile prints the high-water marks (docs/memory.md), which
 * `spmdc --memory-report` predicts. A tensor is a parameter or optimizer
 * state while a var slot of main holds it (the generated code says which,
 * rt_mem_hold), else a residual while the autodiff tape holds it
 * (rt_mem_tape), else a temporary. */
typedef enum { RT_MEM_TEMP, RT_MEM_PARAM, RT_MEM_OPT, RT_MEM_RESID, RT_MEM_NCOMP } rt_mem_comp;
/* var slot `slot` (any number >= 0) of component comp (RT_MEM_PARAM or
 * RT_MEM_OPT) holds t from now on; what it held before is no longer counted
 * there. t NULL: the slot holds nothing. */
void rt_mem_hold(rt_ctx *ctx, int slot, rt_tensor *t, rt_mem_comp comp);
/* the tape took (delta 1) or gave back (-1) a reference to t */
void rt_mem_tape(rt_ctx *ctx, rt_tensor *t, int delta);
typedef struct rt_mem_stats {
    int64_t live[RT_MEM_NCOMP];    /* now */
    int64_t peak[RT_MEM_NCOMP];    /* each component's own high-water mark */
    int64_t peak_total;            /* the high-water mark of the sum */
    int64_t at_peak[RT_MEM_NCOMP]; /* the components when the sum peaked */
} rt_mem_stats;
rt_mem_stats rt_mem_get(const rt_ctx *ctx);
const char *rt_mem_comp_name(rt_mem_comp c); /* "params" "optimizer state" ... */

/* Buffer pool (size classes, 4 per power of two): raw memory for callers
 * that need scratch space; rt_empty uses it for every tensor. */
void *rt_pool_alloc(rt_ctx *ctx, size_t bytes, size_t *cap);
void rt_pool_release(rt_ctx *ctx, void *p, size_t cap);

/* ------------------------------------------------------------ context, mesh */

/* Start MPI and build the mesh. names/sizes are the declared axes in rank
 * layout order (size -1 or 0: omitted, inferred from the world size).
 * Consumes --mesh a=n,..., --trace FILE.json and --profile from argv. */
rt_ctx *rt_init(int *argc, char ***argv, int naxes, const char *const *names,
                const int *sizes);
/* For a library a host loads (spmdc --shared, docs/python.md): MPI_Init
 * only if nobody has initialised MPI yet (mpi4py, say), and then
 * rt_finalize finalises it (never an MPI it did not initialise); the world
 * is MPI_COMM_WORLD. No argv; mesh is "a=n,..." as --mesh (NULL: none).
 * The malloc policy is left alone. hook (may be NULL) is set before the
 * mesh is checked, so a bad mesh reaches it. */
typedef void (*rt_error_hook)(void *user, const char *msg); /* may longjmp */
rt_ctx *rt_init_lib(int naxes, const char *const *names, const int *sizes, const char *mesh,
                    rt_error_hook hook, void *user);
/* Whether rt_init sets the runtime's malloc policy (the default: mmap
 * threshold fixed at 4 MiB, trim threshold at 8 MiB, each unless its glibc
 * tunable MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ is set; see
 * docs/runtime.md "Page faults"). Process-wide; call before rt_init. The
 * hand-written baselines (bench/hand_common.h) turn it off and run on
 * glibc's defaults. */
void rt_set_malloc_policy(bool on);
/* Writes the trace, prints the profile, frees everything, MPI_Finalize
 * (when rt_init or rt_init_lib initialised MPI). Returns 0 (the program's
 * exit status). */
int rt_finalize(rt_ctx *ctx);
/* A context without MPI (one rank, no mesh): for kernels and unit tests. */
rt_ctx *rt_ctx_serial(void);
void rt_ctx_free_serial(rt_ctx *ctx);

typedef struct rt_axes {
    int n;                 /* number of axes; 0 = none (not sharded) */
    int idx[RT_MAX_AXES];  /* mesh axis indices, major to minor */
} rt_axes;
#define RT_AXES(...) ((rt_axes){ .n = (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), \
                                 .idx = {__VA_ARGS__} })
#define RT_NO_AXES ((rt_axes){ .n = 0 })

int rt_rank(const rt_ctx *ctx);
int rt_world_size(const rt_ctx *ctx);
int rt_naxes(const rt_ctx *ctx);
const char *rt_axis_name(const rt_ctx *ctx, int axis);
int rt_axis_size(const rt_ctx *ctx, int axis);
int rt_axis_index(const rt_ctx *ctx, int axis);    /* this rank's coordinate */
int rt_axis_lookup(rt_ctx *ctx, const char *name); /* fails if unknown */
rt_axes rt_axes_parse(rt_ctx *ctx, const char *names); /* "dp" or "tp,dp" */
/* The flattened group of a tuple: size, this rank's block index
 * (i_a0 * n_a1 + i_a1 ... in the given order), world rank of member k. */
int rt_group_size(rt_ctx *ctx, rt_axes axes);
int rt_group_rank(rt_ctx *ctx, rt_axes axes);
int rt_group_member(rt_ctx *ctx, rt_axes axes, int k);

/* Local block of a global tensor sharded per dim over axis tuples. */
typedef struct rt_layout {
    int ndim;
    int64_t global[RT_MAX_DIMS];
    int64_t offset[RT_MAX_DIMS];
    int64_t local[RT_MAX_DIMS];
} rt_layout;
/* dim_axes[d] lists the axes sharding dim d (n == 0: not sharded); NULL:
 * nothing sharded. A dim the axes do not divide splits as torch.chunk does
 * (SPEC 4, "Uneven shards"): over a group of k, block r is [r*c, min(n,
 * (r+1)*c)) with c = ceil(n/k), clamped (the last blocks smaller, possibly
 * empty); over several axes the split is nested, major to minor (n = 5 on
 * (2, 2): 2, 1, 1, 1). name is the tensor's, for messages. */
rt_layout rt_layout_of(rt_ctx *ctx, const char *name, int ndim, const int64_t *global,
                       const rt_axes *dim_axes);
/* Fails with "tensor 'x' dim 0 (size 10) is not divisible by axis 'dp'
 * (size 4)" naming the tensor: for what needs equal blocks. */
void rt_check_divisible(rt_ctx *ctx, const char *name, int dim, int64_t size, rt_axes axes);
/* x is this rank's block of layout l (local_map's result): fails naming
 * `what`, `at` (the source line) and the dim otherwise. */
void rt_check_blocks(rt_ctx *ctx, const rt_tensor *x, const rt_layout *l, const char *what,
                     const char *at);
/* What needs equal blocks (a global reinterpret from S(i)): fails naming
 * the tensor, `at` (the source line) and `what` when the axes do not divide
 * dim's size. */
void rt_check_even_at(rt_ctx *ctx, const char *name, const char *at, const char *what, int dim,
                      int64_t size, rt_axes axes);
/* A reshape that merges the sharded dim `dim` (from rows) into a dim of
 * `to` rows or splits it needs equal blocks: fails naming the tensor and
 * `at` (the source line) when the group does not divide both. */
void rt_check_reshape_even(rt_ctx *ctx, const char *name, const char *at, int dim, int64_t from,
                           int64_t to, rt_axes axes);
/* attention's grouped-query heads, q [B, H, T, E] and k, v [B, Hkv, S, E]
 * with the heads sharded on axes: each rank's query heads must be its
 * key/value heads' groups (torch.chunk splits H and Hkv separately, SPEC
 * 4): fails on every rank naming the tensor and `at` (the source line)
 * otherwise. */
void rt_check_gqa_blocks(rt_ctx *ctx, const char *name, const char *at, int64_t h, int64_t hkv,
                         rt_axes axes);
/* torch.chunk of n into k blocks: block r's extent (and offset in *off,
 * unless NULL) */
int64_t rt_chunk(int64_t n, int k, int r, int64_t *off);
/* The nested split of n over an axis tuple: block b's (b the flattened
 * index in the tuple's group, major to minor) extent and *off; this rank's
 * extent and offset (axes.n == 0: n and 0); whether every block is equal */
int64_t rt_shard_block(rt_ctx *ctx, int64_t n, rt_axes axes, int b, int64_t *off);
int64_t rt_shard_extent(rt_ctx *ctx, int64_t n, rt_axes axes);
int64_t rt_shard_offset(rt_ctx *ctx, int64_t n, rt_axes axes);
bool rt_shard_even(rt_ctx *ctx, int64_t n, rt_axes axes);

/* ------------------------------------------------------------- collectives */

typedef enum { RT_RED_SUM, RT_RED_AVG, RT_RED_MAX, RT_RED_MIN } rt_reduce_op;
typedef enum { RT_R, RT_I, RT_V, RT_P } rt_ltype;

/* dim: RT_STACK for the V (stack) form, i >= 0 for S(i). */
rt_tensor *rt_all_reduce(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_reduce_op op);
/* The same for an x that dies at it (the caller frees x right after): when
 * the caller's reference is x's only one, reduces in x's buffer
 * (MPI_IN_PLACE) and returns x (a new reference), like rt_reuse; otherwise
 * rt_all_reduce. Generated code calls it for operands freed after it. */
rt_tensor *rt_all_reduce_reuse(rt_ctx *ctx, rt_tensor *x, rt_axes axes, rt_reduce_op op);
rt_tensor *rt_all_gather(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int dim);
/* op: RT_RED_SUM, or RT_RED_AVG (the sum times 1/group size, as rt_all_reduce) */
rt_tensor *rt_reduce_scatter(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int dim,
                             rt_reduce_op op);
rt_tensor *rt_all_to_all(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int src_dim,
                         int dst_dim);
/* ppermute (SPEC 15): each rank's block goes to the rank `shift` steps
 * further along the group (cyclically, negative goes back); MPI_Sendrecv.
 * A shift that is a multiple of the group size returns a new reference. */
rt_tensor *rt_ppermute(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int64_t shift);
/* Local, no communication: R/I->V or S(i) (own block), R/I->P (kept on block
 * 0, zeros elsewhere), V/S(i)->P (own block placed in zeros), R<->I (copy). */
rt_tensor *rt_convert(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_ltype src,
                      rt_ltype dst, int dim);
/* Uneven shards (SPEC 4): the forms whose result has a dim the group's
 * blocks concatenate into take that dim's extent, this rank's (the same on
 * every member of the group): all_gather's dim, all_to_all's src_dim,
 * convert S(i)->P's dim. The blocks are the torch.chunk split of it over
 * the axes (rt_shard_block), equal when the group size divides it; RT_EVEN:
 * the operand's extent times the group size (every block equal). The other
 * forms need no extent: reduce_scatter and convert R->S(i) split the
 * operand's dim, all_to_all's dst_dim is whole in the operand. Generated
 * code calls these; rt_all_gather, rt_all_to_all and rt_convert are the
 * RT_EVEN forms. */
#define RT_EVEN ((int64_t)-1)
rt_tensor *rt_all_gather_to(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int dim,
                            int64_t extent);
rt_tensor *rt_all_to_all_to(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, int src_dim,
                            int dst_dim, int64_t extent);
rt_tensor *rt_convert_to(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_ltype src,
                         rt_ltype dst, int dim, int64_t extent);
rt_tensor *rt_reinterpret(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_ltype src,
                          rt_ltype dst); /* no-op: returns a new reference */
void rt_barrier(rt_ctx *ctx);

/* Non-blocking all_reduce: the result's data are valid after rt_wait(ctx,
 * result) (rt_free waits too); small inputs share one MPI_Iallreduce per
 * bucket (docs/runtime.md "Overlap"). rt_wait is a no-op for a tensor that
 * is not pending. rt_flush starts the buckets still open. */
rt_tensor *rt_all_reduce_start(rt_ctx *ctx, const rt_tensor *x, rt_axes axes, rt_reduce_op op);
/* ... and for an x that dies at it: in x's buffer, as rt_all_reduce_reuse */
rt_tensor *rt_all_reduce_start_reuse(rt_ctx *ctx, rt_tensor *x, rt_axes axes, rt_reduce_op op);
void rt_wait(rt_ctx *ctx, const rt_tensor *t);
void rt_flush(rt_ctx *ctx);
void rt_wait_all(rt_ctx *ctx);
bool rt_pending(const rt_ctx *ctx, const rt_tensor *t);

/* --------------------------------------------------------- shape kernels */

/* reshape, index and slice along a dim whose outer dims are all 1 (a
 * contiguous block) return views of x (rt_view: no copy); the CUDA target
 * copies an index or slice whose block does not start 256-byte aligned
 * (the GEMM library's alignment). A slice across outer dims copies. */
rt_tensor *rt_reshape(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape);
rt_tensor *rt_transpose(rt_ctx *ctx, const rt_tensor *x, int d0, int d1);
rt_tensor *rt_permute(rt_ctx *ctx, const rt_tensor *x, const int *perm);
rt_tensor *rt_concat(rt_ctx *ctx, int n, const rt_tensor *const *xs, int dim);
rt_tensor *rt_slice(rt_ctx *ctx, const rt_tensor *x, int dim, int64_t start, int64_t end);
rt_tensor *rt_expand(rt_ctx *ctx, const rt_tensor *x, int ndim, const int64_t *shape);
rt_tensor *rt_astype(rt_ctx *ctx, const rt_tensor *x, rt_dtype dt);
rt_tensor *rt_index(rt_ctx *ctx, const rt_tensor *x, int64_t i); /* x[i] on dim 0 */
/* backward of slice/index: dy placed into zeros of the input's shape */
rt_tensor *rt_slice_bwd(rt_ctx *ctx, const rt_tensor *dy, int ndim, const int64_t *in_shape,
                        int dim, int64_t start);
rt_tensor *rt_index_bwd(rt_ctx *ctx, const rt_tensor *dy, int ndim, const int64_t *in_shape,
                        int64_t i);
/* in place (acc must be rt_writable): acc += x, acc[i] += x (dim 0) */
void rt_add_(rt_ctx *ctx, rt_tensor *acc, const rt_tensor *x);
void rt_index_add_(rt_ctx *ctx, rt_tensor *acc, int64_t i, const rt_tensor *x);
/* acc[i] += x, consuming acc: in place when acc is not shared (rt_writable),
 * on a copy otherwise.  Returns the result (a reference the caller owns). */
rt_tensor *rt_index_add(rt_ctx *ctx, rt_tensor *acc, int64_t i, const rt_tensor *x);
/* accs[k][i] += xs[k] for k < n, as one operation (one kernel per 32
 * tensors on the CUDA target): in place, the accs distinct storages, each
 * rt_writable; the stacked layer gradients of a backward (issue 26) */
void rt_index_add_multi_(rt_ctx *ctx, int n, rt_tensor *const *accs, int64_t i,
                         const rt_tensor *const *xs);
/* the same consuming each accs[k] (rt_index_add): a shared one is copied
 * first, and accs[k] is replaced by the result the caller owns */
void rt_index_add_multi(rt_ctx *ctx, int n, rt_tensor **accs, int64_t i, const rt_tensor *const *xs);
/* xs[k] = 0 for k < n (each rt_writable), as one
 * operation: the zero fills of a backward's accumulators (issue 26) */
void rt_zero_multi(rt_ctx *ctx, int n, rt_tensor *const *xs);

/* ---------------------------------------------------- elementwise kernels */

/* X(NAME, name, vec, f(x), df/dx given x and y = f(x)).  vec: VEC when
 * vmath_isa.h has vector kernels for it (f, f' and both, f32 and f64; the
 * template's NAME_fd_S function), SCALAR when only the scalar loop runs.
 * (The compiler's own columns of these ops, the spelling inside a fused loop
 * and the GEMM epilogues, are schedule.c's unary_codegen.) */
#define RT_UNARY_OPS(X)                                                       \
    X(EXP, exp, VEC, exp(x), y)                                               \
    X(LOG, log, VEC, log(x), 1.0 / x)                                         \
    X(SQRT, sqrt, SCALAR, sqrt(x), 0.5 / y)                                   \
    X(RSQRT, rsqrt, SCALAR, 1.0 / sqrt(x), -0.5 * y * y * y)                  \
    X(TANH, tanh, VEC, tanh(x), 1.0 - y * y)                                  \
    X(SIGMOID, sigmoid, VEC, rt_sigmoid_(x), y * (1.0 - y))                   \
    X(RELU, relu, SCALAR, (x > 0 ? x : 0.0), (x > 0 ? 1.0 : 0.0))             \
    X(GELU, gelu, VEC, rt_gelu_(x), rt_gelu_d_(x))                            \
    X(GELU_TANH, gelu_tanh, VEC, rt_gelu_tanh_(x), rt_gelu_tanh_d_(x))        \
    X(SILU, silu, VEC, x * rt_sigmoid_(x), rt_silu_d_(x))                     \
    X(ABS, abs, SCALAR, fabs(x), (x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0)))        \
    X(SQUARE, square, SCALAR, x * x, 2.0 * x)                                 \
    X(SIN, sin, VEC, sin(x), cos(x))                                          \
    X(COS, cos, VEC, cos(x), -sin(x))                                         \
    X(NEG, neg, SCALAR, -x, -1.0)

/* X(NAME, name, kind, f(a, b), df/da, df/db).  kind: ARITH, or CMP for a
 * comparison (1 or 0; no gradient flows through it: autodiff stops there,
 * the compiler's ir_binary_is_comparison) */
#define RT_BINARY_OPS(X)                                                      \
    X(ADD, add, ARITH, a + b, 1.0, 1.0)                                       \
    X(SUB, sub, ARITH, a - b, 1.0, -1.0)                                      \
    X(MUL, mul, ARITH, a * b, b, a)                                           \
    X(DIV, div, ARITH, a / b, 1.0 / b, -a / (b * b))                          \
    X(POW, pow, ARITH, pow(a, b), b * pow(a, b - 1.0), rt_pow_db_(a, b))      \
    X(MAX, max, ARITH, (a >= b ? a : b), (a > b ? 1.0 : a == b ? 0.5 : 0.0),  \
      (b > a ? 1.0 : a == b ? 0.5 : 0.0))                                     \
    X(MIN, min, ARITH, (a <= b ? a : b), (a < b ? 1.0 : a == b ? 0.5 : 0.0),  \
      (b < a ? 1.0 : a == b ? 0.5 : 0.0))                                     \
    X(EQ, eq, CMP, (double)(a == b), 0.0, 0.0)                                \
    X(NE, ne, CMP, (double)(a != b), 0.0, 0.0)                                \
    X(LT, lt, CMP, (double)(a < b), 0.0, 0.0)                                 \
    X(LE, le, CMP, (double)(a <= b), 0.0, 0.0)                                \
    X(GT, gt, CMP, (double)(a > b), 0.0, 0.0)                                 \
    X(GE, ge, CMP, (double)(a >= b), 0.0, 0.0)

#define RT_ENUM_UNARY_(NAME, name, vec, f, d) RT_##NAME,
#define RT_ENUM_BINARY_(NAME, name, kind, f, da, db) RT_##NAME,
typedef enum { RT_UNARY_OPS(RT_ENUM_UNARY_) RT_NUNARY } rt_unary_op;
typedef enum { RT_BINARY_OPS(RT_ENUM_BINARY_) RT_NBINARY } rt_binary_op;
#undef RT_ENUM_UNARY_
#undef RT_ENUM_BINARY_

const char *rt_unary_name(rt_unary_op op);
const char *rt_binary_name(rt_binary_op op);
/* the same functions on a host number (host.c): exp(0.5), pow(0.9, step) */
double rt_host_unary(rt_unary_op op, double x);
double rt_host_binary(rt_binary_op op, double a, double b);
/* seconds since rt_init on rank 0's clock, the same on every rank (a
 * broadcast: every rank must call it, as with a collective) */
double rt_wall_time(rt_ctx *ctx);
rt_tensor *rt_unary(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x);
/* rt_unary's kernel on one element (spmdrt_kernels.h RT_FUSED_UNARY) */
float rt_unary_elem_f32(rt_unary_op op, float x);
double rt_unary_elem_f64(rt_unary_op op, double x);
rt_tensor *rt_unary_bwd(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, const rt_tensor *dy);
/* y = f(x) and dydx = f'(x) in one pass (a forward that keeps what its
 * backward needs: dx = dy * dydx) */
void rt_unary_with_grad(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, rt_tensor **y,
                        rt_tensor **dydx);
rt_tensor *rt_scale(rt_ctx *ctx, const rt_tensor *x, double s); /* x * s */
/* NumPy broadcasting; both operands have the same dtype */
rt_tensor *rt_binary(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b);
/* a op s (scalar_left false) or s op a (true) */
rt_tensor *rt_binary_scalar(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, double s,
                            bool scalar_left);
/* da, db (either may be NULL when not wanted), each reduced to its operand's shape */
void rt_binary_bwd(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b,
                   const rt_tensor *dy, rt_tensor **da, rt_tensor **db);
/* The gradient of x / s for a host number s (x f32 or f64): dy * (1 / s)
 * in f64, rounded once, with s first rounded to dy's dtype: the bits of
 * rt_binary_bwd(RT_DIV, x, rt_scalar(dtype, s), dy, &dx, NULL) without
 * the device scalar (the CUDA target's loss mean, issue 26). */
rt_tensor *rt_div_scalar_grad_h(rt_ctx *ctx, const rt_tensor *dy, double s);
/* sum a broadcast gradient down to shape (leading dims dropped, size-1 dims kept) */
rt_tensor *rt_sum_to_shape(rt_ctx *ctx, const rt_tensor *g, int ndim, const int64_t *shape);

/* ------------------------------------------------------------ reductions */

rt_tensor *rt_sum(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim);
rt_tensor *rt_mean(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim);
rt_tensor *rt_amax(rt_ctx *ctx, const rt_tensor *x, int dim, bool keepdim);
/* sampling.c (docs/weights.md, "Sampling"): the index of the largest
 * (smallest) along dim as i32, the first on ties, NaN the largest; the k
 * largest values along dim, largest first; and a class per row of the last
 * dim of logits (laid out as l: the noise is keyed by global indices),
 * drawn from softmax(logits / temperature) over its top_k largest (0: all)
 * by the Gumbel-max trick; temperature <= 0: the largest (greedy). */
rt_tensor *rt_argmax(rt_ctx *ctx, const rt_tensor *x, int64_t dim, bool keepdim);
rt_tensor *rt_argmin(rt_ctx *ctx, const rt_tensor *x, int64_t dim, bool keepdim);
rt_tensor *rt_topk(rt_ctx *ctx, const rt_tensor *x, int64_t k, int64_t dim);
rt_tensor *rt_categorical(rt_ctx *ctx, const rt_tensor *logits, const rt_layout *l, uint64_t seed,
                          double temperature, int64_t top_k);
rt_tensor *rt_sum_all(rt_ctx *ctx, const rt_tensor *x);  /* 0-d */
rt_tensor *rt_mean_all(rt_ctx *ctx, const rt_tensor *x);
rt_tensor *rt_amax_all(rt_ctx *ctx, const rt_tensor *x);
rt_tensor *rt_cumsum(rt_ctx *ctx, const rt_tensor *x, int dim);
/* global_norm's multi-tensor reduction: the sum of the squares of every
 * element of the n tensors xs (floating point, one dtype), a 0-d tensor of
 * their dtype, in one operation: each tensor's squares (rounded to its
 * dtype) summed in order in double (the CUDA target: in rt_sum_all's fixed
 * chunks and tree) and rounded, those sums added in the order of xs, each
 * addition rounded: the bits of rt_sum_all of each rt_unary(SQUARE) added
 * with rt_binary(ADD) in order, on either target. Its backward: dxs[j] =
 * 2 * xs[j] * dy for each j with want[j] (else NULL), in one operation. */
rt_tensor *rt_sum_squares(rt_ctx *ctx, int n, const rt_tensor *const *xs);
/* Several global_norm sums at once (its placement groups): ys[g] is
 * rt_sum_squares of group g's counts[g] tensors, the groups' tensors one
 * after another in xs; the same bits, one operation (on the CUDA target
 * the launches of one sum). */
void rt_sum_squares_multi(rt_ctx *ctx, int ngroups, const int *counts, const rt_tensor *const *xs,
                          rt_tensor **ys);
void rt_sum_squares_bwd(rt_ctx *ctx, int n, const rt_tensor *const *xs, const rt_tensor *dy,
                        const bool *want, rt_tensor **dxs);
/* backward: dim = RT_ALL for the *_all forms */
#define RT_ALL (-1000)
rt_tensor *rt_sum_bwd(rt_ctx *ctx, const rt_tensor *x, int dim, const rt_tensor *dy);
rt_tensor *rt_mean_bwd(rt_ctx *ctx, const rt_tensor *x, int dim, const rt_tensor *dy);
rt_tensor *rt_amax_bwd(rt_ctx *ctx, const rt_tensor *x, int dim, const rt_tensor *dy);
rt_tensor *rt_cumsum_bwd(rt_ctx *ctx, const rt_tensor *dy, int dim);

/* ------------------------------------------------------- linear algebra */

/* PyTorch matmul: [..., m, k] @ [..., k, n], batch dims broadcast, 1-D ok */
rt_tensor *rt_matmul(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b);
void rt_matmul_bwd(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, const rt_tensor *dy,
                   rt_tensor **da, rt_tensor **db);
/* bf16: act(a @ b + bias) as one oneDNN GEMM with the bias and the
 * activation fused as post-ops (the CUDA runtime: cuBLASLt's epilogue).
 * a [..., m, k], b [k, n], bias [n] or NULL, act RT_GELU, RT_GELU_TANH,
 * RT_RELU or -1 (none).  f32 (the CUDA target's code, whose schedule fuses
 * it): the same bits as rt_matmul, rt_binary and rt_unary in turn. */
rt_tensor *rt_matmul_bias_act(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b,
                              const rt_tensor *bias, int act);
/* The backward of a [..., k] @ b [k, n...] + bias [n...] (a matmul, or an
 * einsum of that form: "btd,dhe->bthe") from the sum's gradient dy
 * [..., n...]: da = dy b^T, db = a^T dy and dbias = dy summed over its
 * leading dims, which are the dW GEMM's K: on the CUDA target one GEMM with
 * cuBLASLt's bias-gradient epilogue where it has one (elsewhere the GEMM
 * and rt_sum_to_shape).  Any of da, db, dbias may be NULL. */
void rt_matmul_bwd_bias(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, const rt_tensor *dy,
                        rt_tensor **da, rt_tensor **db, rt_tensor **dbias);
/* The same with a's gradient added to acc (a's dtype and shape; the
 * caller's reference is consumed): returns acc + dy b^T, each element the
 * GEMM's result added to acc's, rounded once (rt_binary's add of the
 * GEMM's result).  On the CUDA target the dX GEMM itself adds it
 * (cuBLASLt's beta = 1), in acc's buffer where the caller's reference is
 * its only one (else in a copy); elsewhere the GEMM and an add.  The
 * compiler's summed gradients (sched_gemm_accumulate: x's gradient from
 * attention's three projections). */
rt_tensor *rt_matmul_bwd_bias_acc(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, const rt_tensor *dy,
                                  rt_tensor *acc, rt_tensor **db, rt_tensor **dbias);
/* The library f32 GEMMs run on (runtime/gemm.c). rt_init chooses it for the
 * machine: rank 0 times a few GEMMs through both and takes oneDNN only when
 * it is clearly faster, then broadcasts the choice, so every rank uses the
 * same one; SPMD_GEMM=openblas|dnnl|auto overrides. f64 GEMMs always run on
 * OpenBLAS, bf16 on oneDNN. A serial ctx chooses at its first f32 GEMM. */
typedef enum { RT_GEMM_OPENBLAS, RT_GEMM_DNNL } rt_gemm_lib;
rt_gemm_lib rt_gemm_f32_lib(rt_ctx *ctx);
/* for tests and benchmarks: every rank must set the same library */
void rt_set_gemm_f32_lib(rt_ctx *ctx, rt_gemm_lib lib);
const char *rt_gemm_lib_name(rt_gemm_lib lib);
/* einsum with one or two operands, letters only, no repeated label in one operand */
rt_tensor *rt_einsum(rt_ctx *ctx, const char *eq, int n, const rt_tensor *const *xs);
void rt_einsum_bwd(rt_ctx *ctx, const char *eq, int n, const rt_tensor *const *xs,
                   const rt_tensor *dy, rt_tensor **dxs);

/* ---------------------------------------------------------- nn kernels */

rt_tensor *rt_softmax(rt_ctx *ctx, const rt_tensor *x, int dim);
rt_tensor *rt_log_softmax(rt_ctx *ctx, const rt_tensor *x, int dim);
rt_tensor *rt_softmax_bwd(rt_ctx *ctx, const rt_tensor *y, const rt_tensor *dy, int dim);
rt_tensor *rt_log_softmax_bwd(rt_ctx *ctx, const rt_tensor *y, const rt_tensor *dy, int dim);
/* over the last dim; w, b of shape [D] or NULL */
rt_tensor *rt_layer_norm(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w,
                         const rt_tensor *b, double eps);
void rt_layer_norm_bwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                       const rt_tensor *dy, rt_tensor **dx, rt_tensor **dw, rt_tensor **db);
/* the same with dx = addend + layer_norm's dx (addend: x's shape and dtype,
 * or NULL): bit for bit rt_binary(RT_ADD, addend, dx) after it, one pass
 * (the compiler's residual gradients, issue 26) */
void rt_layer_norm_bwd_add(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                           const rt_tensor *dy, const rt_tensor *addend, rt_tensor **dx, rt_tensor **dw,
                           rt_tensor **db);
rt_tensor *rt_rms_norm(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps);
void rt_rms_norm_bwd(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *w, double eps,
                     const rt_tensor *dy, rt_tensor **dx, rt_tensor **dw);
/* rt_cross_entropy_reduce(..., RT_CE_MEAN) */
rt_tensor *rt_cross_entropy(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets);
rt_tensor *rt_cross_entropy_bwd(rt_ctx *ctx, const rt_tensor *logits,
                                const rt_tensor *targets, const rt_tensor *dy);
/* logits [..., C] (class dim last), i32 targets [...] (-100 ignored), PyTorch's
 * numerics: RT_CE_MEAN (over kept rows, 0-d; NaN when none is kept), RT_CE_SUM
 * (0-d), RT_CE_NONE (the targets' shape, 0 where ignored). dy has the shape
 * of the result; the gradient is that of the logits. */
typedef enum { RT_CE_MEAN, RT_CE_SUM, RT_CE_NONE } rt_ce_reduction;
rt_tensor *rt_cross_entropy_reduce(rt_ctx *ctx, const rt_tensor *logits,
                                   const rt_tensor *targets, rt_ce_reduction red);
rt_tensor *rt_cross_entropy_reduce_bwd(rt_ctx *ctx, const rt_tensor *logits,
                                       const rt_tensor *targets, const rt_tensor *dy,
                                       rt_ce_reduction red);
/* The same with the classes split over `axes` (vocabulary parallel): this
 * rank holds classes [o, o + C) of the global last dim, o and C from l (the
 * logits' global layout: l->offset and l->local of the last dim, so any
 * block sizes work), the targets are global class ids, the same on every
 * rank of the group.  Each row's maximum and sum of exponentials (and the
 * target's logit, from the rank that holds it) are all-reduced over axes in
 * f64; every rank of the group gets the whole loss.  lse (when not NULL):
 * each row's log-sum-exp, f64 [rows], what the backward needs besides the
 * logits.  The backward gives this rank's block of the gradient from it,
 * row by row, without the softmax; its dy is the whole cotangent (the
 * caller all-reduces a pending one over axes first). */
rt_tensor *rt_cross_entropy_vp(rt_ctx *ctx, const rt_tensor *logits, const rt_tensor *targets,
                               rt_ce_reduction red, const rt_layout *l, rt_axes axes,
                               rt_tensor **lse);
rt_tensor *rt_cross_entropy_vp_bwd(rt_ctx *ctx, const rt_tensor *logits,
                                   const rt_tensor *targets, const rt_tensor *lse,
                                   const rt_tensor *dy, rt_ce_reduction red,
                                   const rt_layout *l);
/* ... for logits that die at it (the caller frees them right after): the
 * gradient in the logits' buffer when the caller's reference is its only
 * one (rt_reuse), row by row, so the backward makes nothing logits-sized */
rt_tensor *rt_cross_entropy_vp_bwd_reuse(rt_ctx *ctx, rt_tensor *logits,
                                         const rt_tensor *targets, const rt_tensor *lse,
                                         const rt_tensor *dy, rt_ce_reduction red,
                                         const rt_layout *l);
/* Fused attention: softmax(q k^T * scale) v per head, without the scores.
 * q [B, H, T, E] with k [B, Hkv, S, E], v [B, Hkv, S, Ev] (query head h
 * reads key/value head h / (H / Hkv)), or q [B, Hkv, G, T, E] (the same
 * memory order); out has q's shape with Ev last.  causal: query i sees keys
 * j <= i + S - T (aligned bottom-right, as decoding with a cache needs); a
 * row that sees no key gives 0.  f32, bf16 (f32 inside) or f64.  *lse
 * (unless lse is NULL): each row's log-sum-exp of its scaled scores, f32
 * (f64 for f64) of q's shape without its last dim, which the backward
 * reads instead of the scores.  Deterministic: a fixed order of every sum.
 * kv_len (-1: S): only the first kv_len keys are read (a cache of S
 * positions of which kv_len are written; causal: query i sees keys j <= i +
 * kv_len - T); the others get no gradient. */
rt_tensor *rt_attention(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                        bool causal, double scale, int64_t kv_len, rt_tensor **lse);
/* dq, dk, dv (NULL: not wanted) from the forward's q, k, v, out, lse and
 * dout, out's gradient */
void rt_attention_bwd(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                      const rt_tensor *out, const rt_tensor *lse, const rt_tensor *dout, bool causal,
                      double scale, int64_t kv_len, rt_tensor **dq, rt_tensor **dk, rt_tensor **dv);
/* The same with operands in the token-major layout: a bit of layout per
 * operand (RT_ATTN_*) says it is [B, T, H, E] ([B, T, Hkv, G, E] for a
 * grouped q; k, v [B, S, Hkv, E]), the memory of permute(x, [0, 2, 1, 3])
 * of the head-major operand, instead of [B, H, T, E]. RT_ATTN_OUT: the
 * output is written (forward) and read (backward) so; in the backward dout
 * has out's layout and dq, dk, dv q's, k's and v's. The log-sum-exp stays
 * [B, H, T]. The same arithmetic in the same order: the same bits as the
 * head-major call on the permuted operands. */
enum { RT_ATTN_Q = 1, RT_ATTN_K = 2, RT_ATTN_V = 4, RT_ATTN_OUT = 8 };
rt_tensor *rt_attention_l(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                          bool causal, double scale, int64_t kv_len, unsigned layout, rt_tensor **lse);
void rt_attention_bwd_l(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                        const rt_tensor *out, const rt_tensor *lse, const rt_tensor *dout, bool causal,
                        double scale, int64_t kv_len, unsigned layout, rt_tensor **dq, rt_tensor **dk,
                        rt_tensor **dv);
/* table [V, D], i32 ids [...] -> [..., D] */
rt_tensor *rt_embedding(rt_ctx *ctx, const rt_tensor *table, const rt_tensor *ids);
rt_tensor *rt_embedding_bwd(rt_ctx *ctx, const rt_tensor *ids, const rt_tensor *dy,
                            int64_t vocab);

/* ------------------------------------------------- masks and selection */

/* Each element's index along dim in the global tensor of layout l (the
 * block's offset plus the local index): iota(T, dim=d). */
rt_tensor *rt_iota(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, int dim);
/* where(c, a, b): a where c != 0, else b; NumPy broadcasting of all three;
 * c of any dtype, a and b of one dtype (the result's). */
rt_tensor *rt_where(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *a, const rt_tensor *b);
/* da = where(c, dy, 0), db = where(c, 0, dy), each summed to its operand's
 * shape (either may be NULL when not wanted) */
void rt_where_bwd(rt_ctx *ctx, const rt_tensor *c, const rt_tensor *a, const rt_tensor *b,
                  const rt_tensor *dy, rt_tensor **da, rt_tensor **db);
/* torch.take_along_dim(x, idx, dim): idx (i32, 0 <= idx < x.shape[dim]) has
 * x's number of dims; the other dims broadcast. */
rt_tensor *rt_take_along_dim(rt_ctx *ctx, const rt_tensor *x, const rt_tensor *idx, int dim);
/* its backward: dy scattered (added) into zeros of x's shape */
rt_tensor *rt_take_along_dim_bwd(rt_ctx *ctx, const rt_tensor *idx, const rt_tensor *dy,
                                 int ndim, const int64_t *x_shape, int dim);

/* --------------------------------------------------------------- random */

/* Philox4x32-10 keyed by seed, counter = global element index: the local
 * block of layout l is bit-identical on every mesh. */
rt_tensor *rt_randn(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, uint64_t seed, double std);
rt_tensor *rt_uniform(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, uint64_t seed,
                      double lo, double hi);
void rt_philox4x32(uint64_t seed, uint64_t counter, uint32_t stream, uint32_t out[4]);
/* dropout(x, p, seed): each element is zeroed with probability p (0 <= p < 1)
 * and the others scaled by 1/(1-p). The mask is Philox keyed by seed with the
 * element's global row-major index in layout l (l->local is x's shape) as the
 * counter, so it is the same on every mesh; the ranks along `stack` (axes
 * where x varies without a layout: local code) index a leading stack dim, so
 * their masks differ. Linear in x: its backward is rt_dropout of dy. */
rt_tensor *rt_dropout(rt_ctx *ctx, const rt_tensor *x, double p, int64_t seed,
                      const rt_layout *l, rt_axes stack);
/* the layout of an unsharded tensor */
rt_layout rt_layout_full(int ndim, const int64_t *shape);

/* ------------------------------------------------------- npy, checkpoints */

/* Every function here is collective over the world (rank 0 alone on a
 * serial context) and moves only this rank's block: files hold the GLOBAL
 * tensor as a NumPy .npy, written and read with MPI-IO subarray views. A
 * block held by several ranks (R or I on an axis) is written once. Errors
 * name the file and stop every rank. See docs/runtime.md. */

/* Reads this rank's block of l from path; dtype and global shape must match. */
rt_tensor *rt_load_npy(rt_ctx *ctx, const char *path, rt_dtype dt, const rt_layout *l);
/* Writes the global tensor whose block on this rank is x (laid out as l)
 * to path.tmp.XXXXXX, syncs it and renames it over path once every rank
 * has written. Creates missing parent directories. */
void rt_save_npy(rt_ctx *ctx, const char *path, const rt_tensor *x, const rt_layout *l);

/* A checkpoint directory: one NAME.npy per tensor. begin creates
 * dir.tmp.XXXXXX next to dir; write adds NAME.npy to it; commit (after
 * every rank has written everything) renames it to dir, atomically
 * replacing an old checkpoint there (a directory holding only .npy files;
 * anything else at dir is an error), and frees ck. A crash before the
 * commit leaves dir as it was. */
typedef struct rt_ckpt rt_ckpt;
rt_ckpt *rt_ckpt_begin(rt_ctx *ctx, const char *dir);
void rt_ckpt_write(rt_ctx *ctx, rt_ckpt *ck, const char *name, const rt_tensor *x,
                   const rt_layout *l);
void rt_ckpt_commit(rt_ctx *ctx, rt_ckpt *ck);
/* This rank's block of dir/NAME.npy; a missing file names the field. */
rt_tensor *rt_ckpt_read(rt_ctx *ctx, const char *dir, const char *name, rt_dtype dt,
                        const rt_layout *l);
/* A .safetensors file (docs/weights.md): records by tensor name through a
 * name map (map: its path, or NULL: a field's tensor is its path). read:
 * this rank's block of field `field`, converted to dt; the whole header is
 * checked first. save: begin, put every field (retained until the commit),
 * commit: checks the fields make every tensor exactly, writes
 * file.tmp.XXXXXX and renames it over file once every rank has written. */
rt_tensor *rt_st_read(rt_ctx *ctx, const char *file, const char *map, const char *field, rt_dtype dt,
                      const rt_layout *l);
typedef struct rt_st_save rt_st_save;
rt_st_save *rt_st_save_begin(rt_ctx *ctx, const char *file, const char *map);
void rt_st_save_put(rt_ctx *ctx, rt_st_save *s, const char *field, const rt_tensor *x, const rt_layout *l);
void rt_st_save_commit(rt_ctx *ctx, rt_st_save *s);
/* A [B, W] batch of windows of W tokens from a token file (nanoGPT's raw
 * uint16, or llm.c's .bin with its header), row b starting at
 * trunc(u_b * (n - W)), u_b = uniform(f64[B], seed)'s element b: the same
 * batch on every mesh. vocab > 0: a token >= vocab stops every rank. */
rt_tensor *rt_token_batch(rt_ctx *ctx, const char *path, uint64_t seed, int64_t vocab, const rt_layout *l);
/* Whether path exists (rank 0 looks; every rank gets its answer). */
bool rt_exists(rt_ctx *ctx, const char *path);

/* ----------------------------------------------------------- graph regions
 * A capturable region of a loop's body (spmdc --regions, docs/runtime.md
 * "Graph regions", graph.c): the CUDA target runs it eagerly once (its
 * warm-up: plans, communicators and buffers are made there, and anything in
 * it that waits for the device keeps the region eager), captures it as a
 * CUDA graph on the next iteration, then replays the graph. The generated
 * code:
 *     if (rt_region_begin(ctx, &r, "f.spmd:12-20", in, nin, dies, ndies, host, nhost, "step,lr", fill)) {
 *       ... the region's host code, run eagerly or captured ...
 *       rt_region_end(ctx, r, out, nout);
 *     } else {
 *       y = rt_region_out(ctx, r, 0); ...   (replayed: its results)
 *     }
 * in: the region's tensor inputs (the variables holding them); dies: the
 * variables whose reference the region's code releases; host: its host
 * scalars (rt_region_i, rt_region_f), whose names are host_names (commas).
 * fill (the CUDA target's generated code; may be NULL): the region's host
 * arithmetic alone, run from host before each replay: it calls rt_slot_f,
 * rt_slot_i and rt_guard in the order the region's code does, which gives
 * the replay its slot table's new values and the numbers to compare.
 * A replay copies each input into the buffer the graph reads (unless it is
 * that buffer), writes the slot table, releases dies (setting them NULL),
 * launches the graph and returns false; the results are then the graph's
 * buffers. It runs eagerly (returns true) when SPMD_GRAPHS=0, on the CPU
 * target, when a number taken by value (rt_guard; without fill: a host
 * scalar) differs from the captured one, or when a buffer the graph writes
 * is still held by the program: never a wrong result. */
typedef struct rt_graph_region rt_graph_region;
static inline uint64_t rt_region_i(int64_t v) { return (uint64_t)v; }
static inline uint64_t rt_region_f(double v)
{
    union { double d; uint64_t u; } b;
    b.d = v;
    return b.u;
}
static inline double rt_region_unf(uint64_t u)
{
    union { double d; uint64_t u; } b;
    b.u = u;
    return b.d;
}
typedef void (*rt_region_fill)(rt_ctx *ctx, const uint64_t *host);
bool rt_region_begin(rt_ctx *ctx, rt_graph_region **r, const char *label, rt_tensor **const *in, int nin,
                     rt_tensor **const *dies, int ndies, const uint64_t *host, int nhost,
                     const char *host_names, rt_region_fill fill);
/* A host number a device operation reads (the CUDA target's generated code
 * passes the step-dependent ones this way: random seeds, rt_binary_scalar's
 * scalar, the host numbers of fused kernels): v, or, when d is set, the
 * number at d, a slot of the region's device slot table, which each replay
 * refreshes with one copy from pinned host memory (the graph's first node)
 * before its kernels read it. rt_slot_f/rt_slot_i: {v, NULL} outside a
 * capture; during one, the region's next slot (v written to it); while a
 * region's fill runs, v is the next slot's value for the replay. */
typedef struct rt_hf { double v; const double *d; } rt_hf;
typedef struct rt_hi { int64_t v; const int64_t *d; } rt_hi;
rt_hf rt_slot_f(rt_ctx *ctx, double v);
rt_hi rt_slot_i(rt_ctx *ctx, int64_t v);
/* A host number a device operation of a region takes by value (what, its
 * name and line, for the note): recorded by the capture, compared by each
 * replay's fill (a difference: that iteration runs eagerly). */
void rt_guard(rt_ctx *ctx, uint64_t bits, const char *what);
/* by-value forms of the operations that take a slot (rt_binary_scalar,
 * rt_randn, rt_uniform, rt_dropout): the CPU target reads v */
rt_tensor *rt_binary_scalar_h(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, rt_hf s, bool scalar_left);
rt_tensor *rt_randn_h(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, rt_hi seed, double std);
rt_tensor *rt_uniform_h(rt_ctx *ctx, rt_dtype dt, const rt_layout *l, rt_hi seed, double lo, double hi);
rt_tensor *rt_dropout_h(rt_ctx *ctx, const rt_tensor *x, double p, rt_hi seed, const rt_layout *l, rt_axes stack);
void rt_region_end(rt_ctx *ctx, rt_graph_region *r, rt_tensor *const *out, int nout);
rt_tensor *rt_region_out(rt_ctx *ctx, rt_graph_region *r, int i); /* a new reference */

/* --------------------------------------------------------- trace, profile */

void rt_trace_begin(rt_ctx *ctx, const char *name);  /* user regions; nest */
void rt_trace_end(rt_ctx *ctx);
/* One iteration of a training loop (generated programs: each iteration of a
 * loop of main's body): rt_trace_begin's region, ended by rt_trace_end; the
 * first call ends start-up, measured or not (rt_startup). */
void rt_step_begin(rt_ctx *ctx, const char *name);
/* Start-up on this rank, seconds from the process's start (the kernel's
 * start time, /proc/self/stat: whole clock ticks, so up to a tick early) to
 * the end of rt_init (*ready: loading, MPI_Init, the mesh, rt_init's barrier)
 * and to the first rt_step_begin (*first_step; -1 before it). Both -1 when
 * the process's start time is unknown. */
void rt_startup(const rt_ctx *ctx, double *ready, double *first_step);
/* Collective: rank 0 prints on stderr the maxima over ranks of *ready,
 * *first_step and first_step - ready (the time after rt_init: initialising
 * the program's data), in ms, as
 *   start-up: R ms from the process's start to the end of rt_init (...),
 *   F ms to the first training step, I ms of them after rt_init (max over ranks)
 * (one line). --profile prints it; so does bench/flagship_hand --time. */
void rt_startup_print(rt_ctx *ctx);
bool rt_tracing(const rt_ctx *ctx);

/* What --profile attributes a kernel's time to (and --trace names). */
typedef enum {
    RT_K_MATMUL,      /* matmul, einsum and their backwards (gemm) */
    RT_K_ELEMENTWISE, /* unary and binary ops, where, their backwards, fused loops */
    RT_K_NN,          /* softmax, norms, cross entropy, embedding */
    RT_K_REDUCE,      /* sum, mean, amax, cumsum, sum_to_shape */
    RT_K_COPY,        /* shape ops, copies, fills, iota, take_along_dim, converts, accumulation */
    RT_K_RANDOM,      /* randn, uniform, dropout */
    RT_K_IO,          /* .npy load and save */
    RT_K_COLL,        /* collectives: the time a rank is blocked in them */
    RT_NKINDS
} rt_kind;
/* A kernel's measurement: rt_kernel_begin before, rt_kernel_end after (a
 * no-op unless --profile or --trace). Nested kernels count once, in the
 * outermost; allocation inside a kernel counts as allocation. */
typedef struct rt_kspan {
    double t0, alloc0;
    long faults0;
    bool on;
} rt_kspan;
rt_kspan rt_kernel_begin(rt_ctx *ctx);
void rt_kernel_end(rt_ctx *ctx, rt_kspan *s, rt_kind kind, const char *name);

/* --------------------------------------------------------------- errors */

/* Prints "spmd: error: [rank N] MSG" on stderr and stops every rank with a
 * non-zero status (MPI_Abort). Never returns unless a hook longjmps. */
#if defined(__GNUC__)
__attribute__((noreturn, format(printf, 2, 3)))
#endif
void rt_fail(rt_ctx *ctx, const char *fmt, ...);
/* For in-process tests and hosts (rt_error_hook, above): called with the
 * message before stopping. */
void rt_set_error_hook(rt_ctx *ctx, rt_error_hook hook, void *user);
void rt_fail_mpi(rt_ctx *ctx, int code, const char *call, const char *file, int line);

#define RT_CHECK(ctx, cond, ...)          \
    do {                                  \
        if (!(cond)) rt_fail((ctx), __VA_ARGS__); \
    } while (0)
/* call returns 0 on success, anything else is a failure (errno is reported) */
#define RT_CALL(ctx, call) rt_call_check_((ctx), (call), #call, __FILE__, __LINE__)
#define RT_CALL_MPI(ctx, call)                                        \
    do {                                                              \
        int rt_mpi_rc_ = (call);                                      \
        if (rt_mpi_rc_ != 0) rt_fail_mpi((ctx), rt_mpi_rc_, #call, __FILE__, __LINE__); \
    } while (0)
void rt_call_check_(rt_ctx *ctx, int rc, const char *call, const char *file, int line);
/* The .spmd line of the statement being run ("gpt.spmd:42", a static
 * string): a device error that surfaces later, at a synchronisation, names
 * the line recorded when its kernel was launched (the CUDA target). */
void rt_at(rt_ctx *ctx, const char *loc);
/* Around a call of a program's function: the call's line is kept, and an
 * error in the callee names it too ("nn.spmd:88 (called from gpt.spmd:120)");
 * rt_call_end restores it as the line being run. */
void rt_call_begin(rt_ctx *ctx, const char *loc);
void rt_call_end(rt_ctx *ctx);

#ifdef __cplusplus
}
#endif

#endif /* SPMDRT_H */
