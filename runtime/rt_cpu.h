/* Internal to the CPU target of libspmdrt: its state in the rt_ctx
 * (ctx->tgt) and the helpers its kernels share. The core (rt_internal.h:
 * context, mesh, tensor handles, pool, errors, trace, profile, files) never
 * includes it; the CUDA runtime has its own. */
#ifndef RT_CPU_H
#define RT_CPU_H

#include "rt_internal.h"

/* overlap.c: non-blocking all_reduce; a request is one MPI_Iallreduce of a
 * large tensor (in -> buf, the result) or of a bucket (buf, in place) */
typedef struct rt_request {
    MPI_Request req;
    struct rt_group *group;
    rt_reduce_op op;
    rt_dtype dtype;
    rt_tensor *in;   /* retained input (large tensors) */
    rt_tensor *buf;  /* the result (borrowed) or the bucket (owned) */
    int64_t count;   /* elements reduced */
    int64_t at, piece; /* the piece in flight: elements [at, at + piece) */
    bool bucket, open, done; /* open: not started; done: MPI_Test said so (all pieces) */
    double t_start;
} rt_request;

/* a pending result: its request and offset in the bucket */
typedef struct rt_member {
    rt_tensor *out;
    int req;
    int64_t offset;
    rt_reduce_op op;
    int group_size;
} rt_member;

typedef struct rt_overlap {
    bool enabled;        /* SPMD_OVERLAP != 0 */
    size_t bucket_bytes; /* SPMD_BUCKET_KB */
    size_t piece_bytes;  /* SPMD_PIECE_KB: 0 = one MPI_Iallreduce per request */
    rt_request *reqs;
    int nreqs, cap_reqs;
    rt_member *members;
    int nmembers, cap_members;
} rt_overlap;

/* The CPU target's state (cpu.c creates and frees it) */
struct rt_target {
    uint16_t *bf16_fwd[RT_NUNARY]; /* bf16.c: f(x) for all 65536 bf16 x, built on first use */
    float *bf16_deriv[RT_NUNARY];  /* f'(x) as the f32 kernel computes it */
    struct rt_dnnl *dnnl;   /* matmul_dnnl.c: engine, stream, primitive cache */
    int gemm_f32;           /* gemm.c: an rt_gemm_lib; -1 until chosen */
    const char *gemm_how;   /* "auto", "SPMD_GEMM", "rank 0", ... (static) */
    double gemm_gflops[2];  /* auto, on rank 0: each library's speed in the timing */
    double gemm_cal_s;      /* and the time it took */
    const struct rt_vm_table *vm; /* vector kernels for this CPU, or NULL (vmath.h) */
    rt_overlap ov;          /* overlap.c */
};

void rt_scale_inplace(rt_tensor *y, double s); /* collectives.c: op=avg */

/* overlap.c: the non-blocking all_reduce; rt_overlap_setup installs the
 * async hook (ctx->async) */
void rt_overlap_setup(rt_ctx *ctx);
void rt_overlap_free(rt_ctx *ctx);
void rt_progress(rt_ctx *ctx); /* tests the requests in flight */

/* strided block copy: rows of `inner` elements, used by packers */
void rt_copy_block(void *dst, const void *src, size_t esz, int64_t outer, int64_t dst_stride,
                   int64_t src_stride, int64_t run);
/* row <-> double conversions */
void rt_load_f64(const rt_tensor *x, int64_t off, int64_t n, double *out);
void rt_store_f64(rt_tensor *x, int64_t off, int64_t n, const double *in);
double *rt_scratch(rt_ctx *ctx, int64_t n, size_t *cap);
/* Row groups: kernels that reduce each row of a [rows, d] view in order
 * (sums in double, maxima) run RT_LANES rows side by side, one per vector
 * lane: each row is still summed in its own order, as one row at a time
 * would be, so the results are the same bits, but RT_LANES independent
 * chains of additions run at once instead of one.  rt_load_rows_t reads
 * rows row0 .. row0 + n - 1 (n <= RT_LANES) as double, transposed:
 * out[j * RT_LANES + r] = x[row0 + r][j], lanes n .. RT_LANES - 1 zero;
 * rt_store_rows_t writes the first n lanes back, rounded to x's dtype. */
#define RT_LANES 8
/* A kernel compiled for AVX-512F, AVX2 and the baseline, chosen when the
 * library is loaded (GCC/clang target_clones): the same C, so the same
 * IEEE operations in the same order on each (no FMA contraction:
 * -ffp-contract=off), only wider vectors. */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(RT_NO_CLONES)
#define RT_WIDEST __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RT_WIDEST
#endif
/* The same for a function called from other files.  clang 14 emits the
 * dispatching ifunc of a target_clones function only in a file that calls
 * it, so other files' calls stay unresolved at link time: with clang such
 * functions are compiled once, for the baseline (the same bits: they only
 * convert and move values). */
#if defined(__clang__)
#define RT_WIDEST_EXTERN
#else
#define RT_WIDEST_EXTERN RT_WIDEST
#endif
void rt_load_rows_t(const rt_tensor *x, int64_t row0, int64_t n, int64_t d, double *out);
void rt_store_rows_t(rt_tensor *x, int64_t row0, int64_t n, int64_t d, const double *in);

/* bf16.c: bf16 conversions of n elements, and the bf16 forms of the
 * elementwise kernels (computed by the f32 kernels, each result rounded) */
void rt_bf16_from_f32_n(uint16_t *dst, const float *src, int64_t n);
void rt_bf16_to_f32_n(float *dst, const uint16_t *src, int64_t n);
void rt_bf16_add_n(uint16_t *acc, const uint16_t *x, int64_t n); /* acc += x, rounded */
void rt_bf16_scale_n(uint16_t *x, double s, int64_t n);          /* x *= s, rounded */
rt_tensor *rt_bf16_unary(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x);
rt_tensor *rt_bf16_unary_bwd(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, const rt_tensor *dy);
void rt_bf16_unary_with_grad(rt_ctx *ctx, rt_unary_op op, const rt_tensor *x, rt_tensor **y,
                             rt_tensor **dydx);
rt_tensor *rt_bf16_binary(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b);
rt_tensor *rt_bf16_binary_scalar(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, double s,
                                 bool scalar_left);
void rt_bf16_binary_bwd(rt_ctx *ctx, rt_binary_op op, const rt_tensor *a, const rt_tensor *b,
                        const rt_tensor *dy, rt_tensor **da, rt_tensor **db);
void rt_bf16_free(rt_ctx *ctx);

/* matmul_dnnl.c: GEMM through oneDNN's matmul primitive, primitives cached
 * per shape in the ctx. C[M,N] = op(A)[M,K] op(B)[K,N] (+ C if accumulate);
 * A, B bf16 (f32 accumulation; C bf16 or f32) or f32 (C f32). */
void rt_dnnl_gemm(rt_ctx *ctx, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A,
                  const void *B, rt_dtype ab_dt, void *C, rt_dtype c_dt, bool accumulate);
void rt_dnnl_free(rt_ctx *ctx);

/* gemm.c: rt_gemm (rt_internal.h) on the CPU: f32 on the library chosen
 * for this machine, f64 on OpenBLAS, bf16 on oneDNN. */
/* chooses the f32 library (SPMD_GEMM or a timing on rank 0) and broadcasts
 * it; collective over the world (rt_init) */
void rt_gemm_setup(rt_ctx *ctx);


#endif /* RT_CPU_H */
