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
 * of loss_local. libspmdrt is used only to start MPI and to draw the initial
 * values with its counter-based RNG, so they are bit-identical to the
 * generated program's; the training step is plain C: our own communicators,
 * cblas_sgemm, a fused gelu, buffers allocated once.
 *
 *   mpirun -np 4 flagship_hand [--B 16] [--D 32] [--H 64] [--steps 50]
 *          [--lr 0.05] [--dp N] [--tp M] [--every 10] [--time]
 */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "spmdrt.h"

typedef struct {
    long B, D, H, steps, every;
    double lr;
    int dp, tp; /* 0: not given */
    int time;
} options;

static const char usage[] =
    "usage: flagship_hand [--B N] [--D N] [--H N] [--steps N] [--lr X] [--dp N] [--tp N]\n"
    "                     [--every N] [--time]\n"
    "  defaults: the constants of examples/mlp_tp.spmd (B=16 D=32 H=64 steps=50 lr=0.05),\n"
    "  mesh (dp, tp: 2): tp=2 and dp inferred from the world size; dp*tp must equal it.\n"
    "  --every N prints the loss every N steps (10); --time reports the training time\n"
    "  on stderr.\n";

/* usage errors happen before MPI starts: print once (rank 0 of mpirun) */
static void usage_error(const char *fmt, const char *arg)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        r = getenv("PMI_RANK");
    if (!r || strcmp(r, "0") == 0) {
        fprintf(stderr, "flagship_hand: error: ");
        fprintf(stderr, fmt, arg);
        fprintf(stderr, "\n%s", usage);
    }
    exit(2);
}

static long parse_long(const char *name, const char *s, long min)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min)
        usage_error(min > 0 ? "--%s needs a positive integer" : "--%s needs an integer", name);
    return v;
}

static void parse_args(int argc, char **argv, options *o)
{
    *o = (options){.B = 16, .D = 32, .H = 64, .steps = 50, .every = 10, .lr = 0.05};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            exit(0);
        }
        if (strcmp(a, "--time") == 0) {
            o->time = 1;
            continue;
        }
        if (strncmp(a, "--", 2) != 0)
            usage_error("unexpected argument '%s'", a);
        char name[32];
        const char *val, *eq = strchr(a, '=');
        if (eq) { /* --B=16 */
            size_t n = (size_t)(eq - a - 2);
            if (n >= sizeof name)
                usage_error("unknown option '%s'", a);
            memcpy(name, a + 2, n);
            name[n] = '\0';
            val = eq + 1;
        } else {
            if (strlen(a + 2) >= sizeof name)
                usage_error("unknown option '%s'", a);
            strcpy(name, a + 2);
            if (i + 1 >= argc)
                usage_error("option '%s' needs a value", a);
            val = argv[++i];
        }
        if (strcmp(name, "B") == 0) o->B = parse_long(name, val, 1);
        else if (strcmp(name, "D") == 0) o->D = parse_long(name, val, 1);
        else if (strcmp(name, "H") == 0) o->H = parse_long(name, val, 1);
        else if (strcmp(name, "steps") == 0) o->steps = parse_long(name, val, 0);
        else if (strcmp(name, "every") == 0) o->every = parse_long(name, val, 1);
        else if (strcmp(name, "dp") == 0) o->dp = (int)parse_long(name, val, 1);
        else if (strcmp(name, "tp") == 0) o->tp = (int)parse_long(name, val, 1);
        else if (strcmp(name, "lr") == 0) {
            char *end;
            o->lr = strtod(val, &end);
            if (*val == '\0' || *end != '\0')
                usage_error("--%s needs a number", name);
        } else
            usage_error("unknown option '%s'", a);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* 64-byte aligned, pre-faulted */
static float *alloc_f32(rt_ctx *ctx, long n)
{
    size_t bytes = ((size_t)n * sizeof(float) + 63) & ~(size_t)63;
    float *p = aligned_alloc(64, bytes ? bytes : 64);
    RT_CHECK(ctx, p != NULL, "out of memory (%zu bytes)", bytes);
    memset(p, 0, bytes);
    return p;
}

/* this rank's block of randn(f32[rows(@ra), cols(@ca)], seed, std), copied out */
static float *init_randn(rt_ctx *ctx, const char *name, long rows, long cols, int row_axis,
                         int col_axis, uint64_t seed, double std)
{
    int64_t g[2] = {rows, cols};
    rt_axes spec[2] = {row_axis >= 0 ? RT_AXES(row_axis) : RT_NO_AXES,
                       col_axis >= 0 ? RT_AXES(col_axis) : RT_NO_AXES};
    rt_layout l = rt_layout_of(ctx, name, 2, g, spec);
    rt_tensor *t = rt_randn(ctx, RT_F32, &l, seed, std);
    float *p = alloc_f32(ctx, (long)t->numel);
    memcpy(p, t->data, (size_t)t->numel * sizeof(float));
    rt_free(ctx, t);
    return p;
}

int main(int argc, char **argv)
{
    options o;
    parse_args(argc, argv, &o);

    /* mesh (dp, tp: 2): sizes from the flags, one omitted size inferred */
    static const char *const axis_names[] = {"dp", "tp"};
    int sizes[2] = {o.dp ? o.dp : -1, o.tp ? o.tp : (o.dp ? -1 : 2)};
    rt_ctx *ctx = rt_init(&argc, &argv, 2, axis_names, sizes);
    const int rank = rt_rank(ctx);
    const int n_dp = rt_axis_size(ctx, 0), n_tp = rt_axis_size(ctx, 1);
    const int i_dp = rank / n_tp, i_tp = rank % n_tp; /* row-major layout */
    RT_CHECK(ctx, i_dp == rt_axis_index(ctx, 0) && i_tp == rt_axis_index(ctx, 1),
             "rank layout differs from the runtime's");
    RT_CHECK(ctx, o.B % n_dp == 0, "B=%ld is not divisible by dp=%d", o.B, n_dp);
    RT_CHECK(ctx, o.H % n_tp == 0, "H=%ld is not divisible by tp=%d", o.H, n_tp);

    /* our own communicators: the dp group shares i_tp, the tp group shares i_dp */
    MPI_Comm dp_comm, tp_comm;
    RT_CALL_MPI(ctx, MPI_Comm_split(MPI_COMM_WORLD, i_tp, i_dp, &dp_comm));
    RT_CALL_MPI(ctx, MPI_Comm_split(MPI_COMM_WORLD, i_dp, i_tp, &tp_comm));

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

    float *h = alloc_f32(ctx, Bl * Hl);   /* a, then gelu(a) */
    float *gd = alloc_f32(ctx, Bl * Hl);  /* gelu'(a) */
    float *y = alloc_f32(ctx, Bl * D);    /* y, then dy */
    float *dh = alloc_f32(ctx, Bl * Hl);  /* dh, then da */
    float *dw1 = alloc_f32(ctx, D * Hl);
    float *dw2 = alloc_f32(ctx, Hl * D);

    const float inv_sqrt2 = 0.70710678118654752f;
    const float inv_sqrt2pi = 0.39894228040143268f;
    const double inv_n = 1.0 / ((double)B * (double)D);
    const float dscale = (float)(2.0 * inv_n);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    for (long step = 0; step < o.steps; step++) {
        /* forward: a = x @ w1, h = gelu(a), gd = gelu'(a) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Bl, (int)Hl, (int)D, 1.0f,
                    x, (int)D, w1, (int)Hl, 0.0f, h, (int)Hl);
        for (long i = 0; i < Bl * Hl; i++) {
            float a = h[i];
            float cdf = 0.5f * (1.0f + erff(a * inv_sqrt2));
            gd[i] = cdf + a * inv_sqrt2pi * expf(-0.5f * a * a);
            h[i] = a * cdf;
        }
        /* y = h @ w2, summed over tp */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Bl, (int)D, (int)Hl, 1.0f,
                    h, (int)Hl, w2, (int)D, 0.0f, y, (int)D);
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)Bl, (int)Hl, (int)D, 1.0f,
                    y, (int)D, w2, (int)D, 0.0f, dh, (int)Hl);          /* dh = dy @ w2^T */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Hl, (int)D, (int)Bl, 1.0f,
                    h, (int)Hl, y, (int)D, 0.0f, dw2, (int)D);          /* dw2 = h^T @ dy */
        for (long i = 0; i < Bl * Hl; i++)
            dh[i] *= gd[i];                                             /* da */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)D, (int)Hl, (int)Bl, 1.0f,
                    x, (int)D, dh, (int)Hl, 0.0f, dw1, (int)Hl);        /* dw1 = x^T @ da */
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
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double elapsed = now_s() - t0;
    if (o.time && rank == 0)
        fprintf(stderr, "flagship_hand: %ld steps in %.3f s (%.3f ms/step), B=%ld D=%ld H=%ld "
                "dp=%d tp=%d\n", o.steps, elapsed, o.steps ? 1e3 * elapsed / (double)o.steps : 0.0,
                B, D, H, n_dp, n_tp);

    free(x); free(t); free(w1); free(w2);
    free(h); free(gd); free(y); free(dh); free(dw1); free(dw2);
    MPI_Comm_free(&dp_comm);
    MPI_Comm_free(&tp_comm);
    return rt_finalize(ctx);
}
