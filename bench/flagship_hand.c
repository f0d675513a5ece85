/* flagship_hand: examples/mlp_tp.spmd written by hand in C + MPI + CBLAS,
 * the baseline the generated program is measured against (bench/flagship.sh).
 *
 * The same computation on the same mesh (dp, tp), ranks laid out row-major
 * (rank = i_dp * n_tp + i_tp): a two-layer MLP, data parallel on dp, Megatron
 * tensor parallel on tp (W1 column-parallel, W2 row-parallel), trained with
 * SGD on a mean squared error. Per rank and step:
 *
 *   a  = x @ w1                [B/dp, H/tp]
 *   h  = gelu(a)               (erf form)
 *   y  = h @ w2                [B/dp, D], a partial sum over tp
 *   y  = allreduce_tp(y)
 *   err = y - t;  loss_local = sum(err^2) / (B*D)   (a partial sum over dp)
 *   dy = 2 * err / (B*D)
 *   dh = dy @ w2^T;  dw2 = h^T @ dy;  da = dh * gelu'(a);  dw1 = x^T @ da
 *   dw1, dw2 = allreduce_dp(dw1), allreduce_dp(dw2)
 *   w1 -= lr * dw1;  w2 -= lr * dw2
 *
 * and every `--every` steps rank 0 prints `step S loss L`, L = allreduce_dp
 * of loss_local. libspmdrt is used only to start MPI, to draw the initial
 * values with its counter-based RNG, so they are bit-identical to the
 * generated program's (kept in the buffers it drew them into), and with
 * --time to report the start-up the same way as the generated program's
 * --profile (rt_step_begin marks each step); the training step is plain C:
 * our own communicators, cblas_sgemm (or with --dnnl oneDNN matmul
 * primitives, as the runtime calls them when it chose oneDNN for f32 on
 * this machine: runtime/gemm.c), a fused gelu, buffers allocated once.
 *
 *   mpirun -np 4 flagship_hand [--B 16] [--D 32] [--H 64] [--steps 50]
 *          [--lr 0.05] [--dp N] [--tp M] [--every 10] [--time]
 */
#include <cblas.h>
#include <dnnl.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hand_common.h"

typedef struct {
    long B, D, H, steps, every;
    double lr;
    int dp, tp; /* 0: not given */
    int time;
    int dnnl; /* GEMMs through oneDNN matmul primitives */
} options;

static const char usage[] =
    "usage: flagship_hand [--B N] [--D N] [--H N] [--steps N] [--lr X] [--dp N] [--tp N]\n"
    "                     [--every N] [--time] [--dnnl]\n"
    "  defaults: the constants of examples/mlp_tp.spmd (B=16 D=32 H=64 steps=50 lr=0.05),\n"
    "  mesh (dp, tp: 2): tp=2 and dp inferred from the world size; dp*tp must equal it.\n"
    "  --every N prints the loss every N steps (10); --time reports the training time,\n"
    "  the median (min-max) of the steps on rank 0, the page faults per step after the\n"
    "  first (as a generated program's --profile) and the start-up (the runtime's\n"
    "  `start-up:` line, as a generated program's --profile), on stderr.\n"
    "  --dnnl runs the GEMMs on oneDNN (matmul primitives, one thread) instead of OpenBLAS.\n";

static void parse_args(int argc, char **argv, options *o)
{
    *o = (options){.B = 16, .D = 32, .H = 64, .steps = 50, .every = 10, .lr = 0.05};
    const hand_opt opts[] = {
        {"B", HAND_LONG, 1, &o->B},         {"D", HAND_LONG, 1, &o->D},
        {"H", HAND_LONG, 1, &o->H},         {"steps", HAND_LONG, 0, &o->steps},
        {"every", HAND_LONG, 1, &o->every}, {"lr", HAND_DOUBLE, 0, &o->lr},
        {"dp", HAND_INT, 1, &o->dp},        {"tp", HAND_INT, 1, &o->tp},
        {"time", HAND_FLAG, 0, &o->time},   {"dnnl", HAND_FLAG, 0, &o->dnnl},
        {NULL, HAND_FLAG, 0, NULL},
    };
    hand_parse_args(argc, argv, "flagship_hand", usage, opts);
}

void omp_set_num_threads(int n); /* libgomp, which libdnnl is built with */

/* --dnnl: each of the step's GEMMs is a oneDNN matmul primitive, created at
 * its first call (strided descriptors for the transposes), as the runtime
 * does it (runtime/matmul_dnnl.c) */
typedef struct hand_mm {
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c;
} hand_mm;
enum { MM_H, MM_Y, MM_DH, MM_DW2, MM_DW1, NMM };
static struct {
    bool on;
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    hand_mm mm[NMM];
} dnnl;

static void dnnl_ok(dnnl_status_t st, const char *what)
{
    if (st != dnnl_success) {
        fprintf(stderr, "flagship_hand: oneDNN %s failed (status %d)\n", what, (int)st);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

/* [rows, cols] row-major, or stored transposed when t */
static dnnl_memory_desc_t matrix_md(long rows, long cols, bool t)
{
    dnnl_memory_desc_t md;
    dnnl_dims_t dims = {rows, cols}, strides = {t ? 1 : cols, t ? rows : 1};
    dnnl_ok(dnnl_memory_desc_init_by_strides(&md, 2, dims, dnnl_f32, strides), "memory desc");
    return md;
}

static void mm_create(hand_mm *m, bool ta, bool tb, long M, long N, long K)
{
    dnnl_memory_desc_t a = matrix_md(M, K, ta), b = matrix_md(K, N, tb), c = matrix_md(M, N, false);
    dnnl_matmul_desc_t d;
    dnnl_primitive_desc_t pd;
    dnnl_ok(dnnl_matmul_desc_init(&d, &a, &b, NULL, &c), "matmul desc");
    dnnl_ok(dnnl_primitive_desc_create(&pd, &d, NULL, dnnl.engine, NULL), "primitive desc");
    dnnl_ok(dnnl_primitive_create(&m->prim, pd), "primitive");
    dnnl_ok(dnnl_primitive_desc_destroy(pd), "primitive desc destroy");
    dnnl_ok(dnnl_memory_create(&m->a, &a, dnnl.engine, DNNL_MEMORY_NONE), "memory");
    dnnl_ok(dnnl_memory_create(&m->b, &b, dnnl.engine, DNNL_MEMORY_NONE), "memory");
    dnnl_ok(dnnl_memory_create(&m->c, &c, dnnl.engine, DNNL_MEMORY_NONE), "memory");
}

/* row-major C[M,N] = op(A) op(B), contiguous operands, on OpenBLAS or oneDNN
 * (which: the primitive of this call site) */
static void sgemm(int which, bool ta, bool tb, long M, long N, long K, const float *A,
                  const float *B, float *C)
{
    if (dnnl.on) {
        hand_mm *m = &dnnl.mm[which];
        if (!m->prim)
            mm_create(m, ta, tb, M, N, K);
        dnnl_ok(dnnl_memory_set_data_handle(m->a, (void *)A), "set handle");
        dnnl_ok(dnnl_memory_set_data_handle(m->b, (void *)B), "set handle");
        dnnl_ok(dnnl_memory_set_data_handle(m->c, C), "set handle");
        dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, m->a}, {DNNL_ARG_WEIGHTS, m->b}, {DNNL_ARG_DST, m->c}};
        dnnl_ok(dnnl_primitive_execute(m->prim, dnnl.stream, 3, args), "execute");
        dnnl_ok(dnnl_stream_wait(dnnl.stream), "stream wait");
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                (int)M, (int)N, (int)K, 1.0f, A, (int)(ta ? M : K), B, (int)(tb ? K : N), 0.0f, C,
                (int)N);
}

static void dnnl_start(void)
{
    dnnl.on = true;
    omp_set_num_threads(1); /* one oneDNN thread per rank, like OpenBLAS */
    dnnl_ok(dnnl_engine_create(&dnnl.engine, dnnl_cpu, 0), "engine");
    dnnl_ok(dnnl_stream_create(&dnnl.stream, dnnl.engine, dnnl_stream_default_flags), "stream");
}

static void dnnl_stop(void)
{
    if (!dnnl.on)
        return;
    for (int i = 0; i < NMM; i++)
        if (dnnl.mm[i].prim) {
            dnnl_memory_destroy(dnnl.mm[i].a);
            dnnl_memory_destroy(dnnl.mm[i].b);
            dnnl_memory_destroy(dnnl.mm[i].c);
            dnnl_primitive_destroy(dnnl.mm[i].prim);
        }
    dnnl_stream_destroy(dnnl.stream);
    dnnl_engine_destroy(dnnl.engine);
}

/* this rank's block of randn(f32[rows(@ra), cols(@ca)], seed, std) */
static float *init_randn(rt_ctx *ctx, const char *name, long rows, long cols, int row_axis,
                         int col_axis, uint64_t seed, double std)
{
    int64_t g[2] = {rows, cols};
    int axis[2] = {row_axis, col_axis};
    return hand_randn(ctx, name, 2, g, axis, seed, std, NULL);
}

int main(int argc, char **argv)
{
    options o;
    parse_args(argc, argv, &o);
    if (o.dnnl)
        dnnl_start();

    /* mesh (dp, tp: 2), our own communicators (hand_common.h) */
    hand_mesh mesh = hand_mesh_init(&argc, &argv, o.dp, o.tp);
    rt_ctx *ctx = mesh.ctx;
    const int rank = mesh.rank, n_dp = mesh.n_dp, n_tp = mesh.n_tp;
    MPI_Comm dp_comm = mesh.dp_comm, tp_comm = mesh.tp_comm;
    RT_CHECK(ctx, o.B % n_dp == 0, "B=%ld is not divisible by dp=%d", o.B, n_dp);
    RT_CHECK(ctx, o.H % n_tp == 0, "H=%ld is not divisible by tp=%d", o.H, n_tp);

    const long B = o.B, D = o.D, H = o.H;
    const long Bl = B / n_dp, Hl = H / n_tp;
    const float lr = (float)o.lr;

    /* x: f32[B@dp, D]; t = tanh(f32[B@dp, D]); w1: f32[D, H@tp]; w2: f32[H@tp, D] */
    float *x = init_randn(ctx, "x", B, D, 0, -1, 1, 1.0);
    float *t = init_randn(ctx, "t", B, D, 0, -1, 2, 1.0);
    for (long i = 0; i < Bl * D; i++)
        t[i] = (float)tanh((double)t[i]);
    float *w1 = init_randn(ctx, "w1", D, H, -1, 1, 3, 0.1);
    float *w2 = init_randn(ctx, "w2", H, D, 1, -1, 4, 0.1);

    float *h = hand_alloc_f32(ctx, Bl * Hl);   /* a, then gelu(a) */
    float *gd = hand_alloc_f32(ctx, Bl * Hl);  /* gelu'(a) */
    float *y = hand_alloc_f32(ctx, Bl * D);    /* y, then dy */
    float *dh = hand_alloc_f32(ctx, Bl * Hl);  /* dh, then da */
    float *dw1 = hand_alloc_f32(ctx, D * Hl);
    float *dw2 = hand_alloc_f32(ctx, Hl * D);

    const float inv_sqrt2 = 0.70710678118654752f;
    const float inv_sqrt2pi = 0.39894228040143268f;
    const double inv_n = 1.0 / ((double)B * (double)D);
    const float dscale = (float)(2.0 * inv_n);

    double *step_s = calloc((size_t)(o.steps > 0 ? o.steps : 1), sizeof *step_s);
    double *step_f = calloc((size_t)(o.steps > 0 ? o.steps : 1), sizeof *step_f);
    RT_CHECK(ctx, step_s != NULL && step_f != NULL, "out of memory");
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    for (long step = 0; step < o.steps; step++) {
        double ts = now_s();
        long fs = minor_faults_self();
        rt_step_begin(ctx, "step"); /* the first ends start-up (rt_startup) */
        /* forward: a = x @ w1, h = gelu(a), gd = gelu'(a) */
        sgemm(MM_H, false, false, Bl, Hl, D, x, w1, h);
        for (long i = 0; i < Bl * Hl; i++) {
            float a = h[i];
            float cdf = 0.5f * (1.0f + erff(a * inv_sqrt2));
            gd[i] = cdf + a * inv_sqrt2pi * expf(-0.5f * a * a);
            h[i] = a * cdf;
        }
        /* y = h @ w2, summed over tp */
        sgemm(MM_Y, false, false, Bl, D, Hl, h, w2, y);
        if (n_tp > 1)
            RT_CALL_MPI(ctx, MPI_Allreduce(MPI_IN_PLACE, y, (int)(Bl * D), MPI_FLOAT, MPI_SUM,
                                           tp_comm));
        /* loss and dy = 2 * err / (B*D), in place */
        double sq = 0.0;
        for (long i = 0; i < Bl * D; i++) {
            float err = y[i] - t[i];
            sq += (double)err * (double)err;
            y[i] = dscale * err;
        }
        /* backward */
        sgemm(MM_DH, false, true, Bl, Hl, D, y, w2, dh);      /* dh = dy @ w2^T */
        sgemm(MM_DW2, true, false, Hl, D, Bl, h, y, dw2);     /* dw2 = h^T @ dy */
        for (long i = 0; i < Bl * Hl; i++)
            dh[i] *= gd[i];                                             /* da */
        sgemm(MM_DW1, true, false, D, Hl, Bl, x, dh, dw1);    /* dw1 = x^T @ da */
        if (n_dp > 1) {
            RT_CALL_MPI(ctx, MPI_Allreduce(MPI_IN_PLACE, dw1, (int)(D * Hl), MPI_FLOAT, MPI_SUM,
                                           dp_comm));
            RT_CALL_MPI(ctx, MPI_Allreduce(MPI_IN_PLACE, dw2, (int)(Hl * D), MPI_FLOAT, MPI_SUM,
                                           dp_comm));
        }
        /* SGD */
        for (long i = 0; i < D * Hl; i++)
            w1[i] -= lr * dw1[i];
        for (long i = 0; i < Hl * D; i++)
            w2[i] -= lr * dw2[i];

        if (step % o.every == 0) {
            float loss = (float)(sq * inv_n);
            if (n_dp > 1)
                RT_CALL_MPI(ctx, MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_FLOAT, MPI_SUM,
                                               dp_comm));
            if (rank == 0) {
                printf("step %ld loss %.6g\n", step, (double)loss);
                fflush(stdout);
            }
        }
        step_s[step] = now_s() - ts;
        step_f[step] = (double)(minor_faults_self() - fs);
        rt_trace_end(ctx);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double elapsed = now_s() - t0;
    if (o.time && rank == 0)
        fprintf(stderr, "flagship_hand: %ld steps in %.3f s (%.3f ms/step), B=%ld D=%ld H=%ld "
                "dp=%d tp=%d\n", o.steps, elapsed, o.steps ? 1e3 * elapsed / (double)o.steps : 0.0,
                B, D, H, n_dp, n_tp);
    if (o.time && rank == 0 && o.steps > 0) { /* each step's time on rank 0, as the others report it */
        double lo = step_s[0], hi = step_s[0];
        for (long s = 0; s < o.steps; s++) {
            lo = step_s[s] < lo ? step_s[s] : lo;
            hi = step_s[s] > hi ? step_s[s] : hi;
        }
        fprintf(stderr, "flagship_hand: step median %.3f ms [%.3f-%.3f] over %ld steps\n",
                1e3 * median(step_s, (int)o.steps), 1e3 * lo, 1e3 * hi, o.steps);
    }
    if (o.time && o.steps > 1) { /* as --profile: the median after the first, max over ranks */
        double mine = median(step_f + 1, (int)o.steps - 1), lo = step_f[1], hi = step_f[o.steps - 1];
        double sum = 0, mx = 0;
        RT_CALL_MPI(ctx, MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD));
        RT_CALL_MPI(ctx, MPI_Reduce(&mine, &mx, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
        if (rank == 0)
            fprintf(stderr, "page faults per training step after the first (step): median %.0f per rank "
                            "(max over ranks %.0f; rank 0's %ld steps: %.0f-%.0f; whole process, minor "
                            "faults)\n", sum / (n_dp * n_tp), mx, o.steps - 1, lo, hi);
    }
    free(step_s);
    free(step_f);
    if (o.time) /* collective: the maxima over ranks, as the generated programs' --profile */
        rt_startup_print(ctx);

    free(x); free(t); free(w1); free(w2);
    free(h); free(gd); free(y); free(dh); free(dw1); free(dw2);
    dnnl_stop();
    return hand_mesh_finalize(&mesh);
}
