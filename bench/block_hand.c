/* block_hand: examples/block_sp.spmd written by hand in C + MPI + CBLAS, the
 * baseline the generated program is measured against (bench/flagship.sh
 * --model block).
 *
 * The same computation on the same mesh (dp, tp), ranks row-major
 * (rank = i_dp * n_tp + i_tp): L pre-norm MLP blocks x + W2 gelu(W1 ln(x, g)),
 * data parallel on dp, Megatron tensor parallel with sequence parallelism on
 * tp, an MSE loss and Adam with bias correction. Activations are
 * [B/dp, SEQ/tp, D] per rank (R = B/dp * SEQ/tp rows of D). Per block l:
 *
 *   n   = layer_norm(x, g[l])          own rows, written into our slot of W
 *   W   = allgather_tp(n)              [tp * R, D]: the gathered rows
 *   h   = gelu(W @ w1[l])              [tp * R, H/tp] (erf form; gelu' kept)
 *   y   = h @ w2[l]                    [tp * R, D], a partial sum over tp
 *   x  += reduce_scatter_tp(y)         own rows
 *
 * The gathered rows stay in rank-block order ([tp][B/dp][SEQ/tp]) instead of
 * the sequence order the .spmd's all_gather(S(1)) produces: the matmuls treat
 * rows independently and the weight gradients sum over all of them, so no
 * pack/unpack copy is needed around the collectives (only the summation
 * order inside the weight-gradient gemms differs, at f32 rounding level).
 *
 * Loss: err = x_L - t, loss = sum(err^2) / (B*SEQ*D) (a partial sum on both
 * axes), dx_L = 2 * (err / (B*SEQ*D)). Backward per block, l = L-1 .. 0:
 *
 *   dY = allgather_tp(dx);  dh = dY @ w2^T;  dw2 = h^T @ dY
 *   da = dh * gelu'(a);     dW = da @ w1^T;  dw1 = W^T @ da
 *   dn = reduce_scatter_tp(dW);  dx += layer_norm_bwd(x_l, g, dn);  dg += sum dn*xhat
 *
 * then one allreduce over dp of all the matrices' gradients (dw1s, dw2s are
 * contiguous) and one over the world (dp and tp) of dg, and Adam in place:
 *   m = 0.9 m + 0.1 g;  v = 0.999 v + 0.001 g g;
 *   w = w - lr (m / (1 - 0.9^t)) / (sqrt(v / (1 - 0.999^t)) + 1e-8)
 * in f32 with the .spmd's constants rounded to f32 and its order of
 * operations. layer_norm (biased variance, eps = 1e-5, weight, no bias) and
 * its backward compute row by row in double exactly as runtime/kernels_nn.c;
 * gelu and gelu' use the same float expressions as runtime/kernels.c.
 *
 * Rank 0 prints `step S loss L` at every `--every`-th step and the last one,
 * L = allreduce over the world of the local loss. libspmdrt is used only to
 * start MPI and to draw the initial values (rt_randn on rt_layout_of blocks),
 * so both programs start from bit-identical values.
 *
 *   mpirun -np 4 block_hand [--B 4] [--SEQ 16] [--D 32] [--H 128] [--L 2]
 *          [--steps 60] [--lr 0.003] [--dp N] [--tp M] [--every 10] [--time]
 */
#include <cblas.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hand_common.h"

typedef struct {
    long B, SEQ, D, H, L, steps, every;
    double lr;
    int dp, tp; /* 0: not given */
    int time;
} options;

static const char usage[] =
    "usage: block_hand [--B N] [--SEQ N] [--D N] [--H N] [--L N] [--steps N] [--lr X]\n"
    "                  [--dp N] [--tp N] [--every N] [--time]\n"
    "  defaults: the constants of examples/block_sp.spmd (B=4 SEQ=16 D=32 H=128 L=2\n"
    "  steps=60 lr=0.003); mesh (dp, tp: 2): tp=2 and dp inferred from the world size.\n"
    "  --every N prints the loss every N steps and at the last step (10); --time reports\n"
    "  the training time on stderr.\n";

static void parse_args(int argc, char **argv, options *o)
{
    *o = (options){.B = 4, .SEQ = 16, .D = 32, .H = 128, .L = 2, .steps = 60, .every = 10,
                   .lr = 0.003};
    const hand_opt opts[] = {
        {"B", HAND_LONG, 1, &o->B},         {"SEQ", HAND_LONG, 1, &o->SEQ},
        {"D", HAND_LONG, 1, &o->D},         {"H", HAND_LONG, 1, &o->H},
        {"L", HAND_LONG, 1, &o->L},         {"steps", HAND_LONG, 0, &o->steps},
        {"every", HAND_LONG, 1, &o->every}, {"lr", HAND_DOUBLE, 0, &o->lr},
        {"dp", HAND_INT, 1, &o->dp},        {"tp", HAND_INT, 1, &o->tp},
        {"time", HAND_FLAG, 0, &o->time},   {NULL, HAND_FLAG, 0, NULL},
    };
    hand_parse_args(argc, argv, "block_hand", usage, opts);
}

/* reduce_scatter over tp of buf ([n_tp * blk] floats) into our block: below
 * 4 MiB MPI_Reduce_scatter_block into out, from 4 MiB an in-place allreduce
 * (faster there with OpenMPI, see README.md) and our block of buf. Returns
 * the block. */
typedef struct tp_group {
    rt_ctx *ctx;
    MPI_Comm comm;
    int n, i;
} tp_group;

#define RS_ALLREDUCE_MIN ((size_t)4 << 20)

static const float *reduce_scatter_tp(const tp_group *g, float *buf, float *out, long blk)
{
    if (g->n == 1)
        return buf;
    if ((size_t)(g->n * blk) * sizeof(float) >= RS_ALLREDUCE_MIN) {
        RT_CALL_MPI(g->ctx, MPI_Allreduce(MPI_IN_PLACE, buf, (int)(g->n * blk), MPI_FLOAT,
                                          MPI_SUM, g->comm));
        return buf + g->i * blk;
    }
    RT_CALL_MPI(g->ctx, MPI_Reduce_scatter_block(buf, out, (int)blk, MPI_FLOAT, MPI_SUM, g->comm));
    return out;
}

/* ---- layer_norm over the last dim, as runtime/kernels_nn.c: per row in
 * double, mean, biased variance (two passes), rstd = 1/sqrt(var + eps). */

#define LN_EPS 1e-5

/* y = (x - mean) * rstd * g for rows of d; keeps mean and rstd per row */
static void ln_forward(const float *x, const float *g, float *y, double *mean, double *rstd,
                       long rows, long d)
{
    for (long r = 0; r < rows; r++) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        double m = 0, v = 0;
        for (long j = 0; j < d; j++)
            m += (double)xr[j];
        m /= (double)d;
        for (long j = 0; j < d; j++)
            v += ((double)xr[j] - m) * ((double)xr[j] - m);
        double rs = 1.0 / sqrt(v / (double)d + LN_EPS);
        for (long j = 0; j < d; j++)
            yr[j] = (float)(((double)xr[j] - m) * rs * (double)g[j]);
        mean[r] = m;
        rstd[r] = rs;
    }
}

/* dx += rstd * (gy - mean(gy) - xhat * mean(gy * xhat)), gy = dy * g;
 * dg = sum over rows of dy * xhat (accumulated in double in acc, then f32).
 * xh, gy: scratch of d doubles. */
static void ln_backward(const float *x, const float *g, const double *mean, const double *rstd,
                        const float *dy, float *dx, float *dg, double *acc, double *xh,
                        double *gy, long rows, long d)
{
    memset(acc, 0, (size_t)d * sizeof *acc);
    for (long r = 0; r < rows; r++) {
        const float *xr = x + r * d, *dyr = dy + r * d;
        float *dxr = dx + r * d;
        double m = mean[r], rs = rstd[r], mg = 0, mgx = 0;
        for (long j = 0; j < d; j++) {
            xh[j] = ((double)xr[j] - m) * rs;
            gy[j] = (double)dyr[j] * (double)g[j];
            mg += gy[j];
            mgx += gy[j] * xh[j];
            acc[j] += (double)dyr[j] * xh[j];
        }
        mg /= (double)d;
        mgx /= (double)d;
        for (long j = 0; j < d; j++)
            dxr[j] += (float)(rs * (gy[j] - mg - xh[j] * mgx));
    }
    for (long j = 0; j < d; j++)
        dg[j] = (float)acc[j];
}

/* h = gelu(a) and gd = gelu'(a) in place of a, erf form, with runtime/kernels.c's
 * float expressions (erf evaluated once) */
static void gelu_fwd(float *h, float *gd, long n)
{
    const float c = (float)M_SQRT1_2, k = (float)(0.5 * M_2_SQRTPI * M_SQRT1_2);
    for (long i = 0; i < n; i++) {
        float a = h[i];
        float e = 1.0f + erff(a * c);
        gd[i] = 0.5f * e + a * expf(-0.5f * a * a) * k;
        h[i] = 0.5f * a * e;
    }
}

/* Adam in place, the .spmd's f32 order of operations; bc1 = 1 - 0.9^t,
 * bc2 = 1 - 0.999^t (rounded to f32 like the .spmd's scalars) */
static void adam(float *w, float *m, float *v, const float *g, long n, float lr, float bc1,
                 float bc2)
{
    for (long i = 0; i < n; i++) {
        m[i] = 0.9f * m[i] + 0.1f * g[i];
        v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
        w[i] = w[i] - lr * (m[i] / bc1) / (sqrtf(v[i] / bc2) + 1e-8f);
    }
}

int main(int argc, char **argv)
{
    options o;
    parse_args(argc, argv, &o);

    hand_mesh mesh = hand_mesh_init(&argc, &argv, o.dp, o.tp);
    rt_ctx *ctx = mesh.ctx;
    const int rank = mesh.rank, n_dp = mesh.n_dp, n_tp = mesh.n_tp;
    const tp_group tp = {ctx, mesh.tp_comm, n_tp, mesh.i_tp};

    const long B = o.B, SEQ = o.SEQ, D = o.D, H = o.H, L = o.L;
    /* rt_layout_of below checks B % dp, SEQ % tp, H % tp and names the tensor */
    int64_t act_g[3] = {B, SEQ, D}, w1_g[3] = {L, D, H}, w2_g[3] = {L, H, D};
    const int act_ax[3] = {0, 1, -1}, w1_ax[3] = {-1, -1, 1}, w2_ax[3] = {-1, 1, -1};

    /* x, t = sin(randn) + x: f32[B@dp, SEQ@tp, D]; gs = ones [L, D];
     * w1s: f32[L, D, H@tp]; w2s: f32[L, H@tp, D] */
    long nact, nw1, nw2;
    float *x = hand_randn(ctx, "x", 3, act_g, act_ax, 1, 1.0, &nact);
    float *t = hand_randn(ctx, "t", 3, act_g, act_ax, 2, 1.0, NULL);
    for (long i = 0; i < nact; i++)
        t[i] = sinf(t[i]) + x[i];
    float *w1s = hand_randn(ctx, "w1s", 3, w1_g, w1_ax, 3, 0.1, &nw1);
    float *w2s = hand_randn(ctx, "w2s", 3, w2_g, w2_ax, 4, 0.1, &nw2);
    float *gs = hand_alloc_f32(ctx, L * D);
    for (long i = 0; i < L * D; i++)
        gs[i] = 1.0f;

    const long Hl = H / n_tp;
    const long R = nact / D;   /* own rows: B/dp * SEQ/tp */
    const long RF = R * n_tp;  /* gathered rows */
    const long nw = nw1 + nw2; /* = 2 * L * D * Hl */

    /* activations: acts[0] = x, acts[l + 1] = block l's output */
    float **acts = hand_alloc(ctx, (size_t)(L + 1) * sizeof *acts);
    acts[0] = x;
    for (long l = 1; l <= L; l++)
        acts[l] = hand_alloc_f32(ctx, R * D);
    /* saved per block for the backward */
    double *mean = hand_alloc(ctx, (size_t)(L * R) * sizeof(double));
    double *rstd = hand_alloc(ctx, (size_t)(L * R) * sizeof(double));
    float *whole = hand_alloc_f32(ctx, L * RF * D); /* gathered layer_norm outputs */
    float *hs = hand_alloc_f32(ctx, L * RF * Hl);   /* gelu(a) */
    float *gds = hand_alloc_f32(ctx, L * RF * Hl);  /* gelu'(a) */
    /* work buffers */
    float *ybuf = hand_alloc_f32(ctx, RF * D); /* y (forward), dW (backward) */
    float *rbuf = hand_alloc_f32(ctx, R * D);  /* reduce_scatter result */
    float *dx = hand_alloc_f32(ctx, R * D);    /* gradient of the current activation */
    float *dY = hand_alloc_f32(ctx, RF * D);   /* gathered dx */
    float *dh = hand_alloc_f32(ctx, RF * Hl);  /* dh, then da */
    double *acc = hand_alloc(ctx, (size_t)D * sizeof(double));
    double *xh = hand_alloc(ctx, (size_t)D * sizeof(double));
    double *gy = hand_alloc(ctx, (size_t)D * sizeof(double));
    /* gradients: dw1s and dw2s contiguous for one allreduce; Adam moments */
    float *dws = hand_alloc_f32(ctx, nw), *dw1s = dws, *dw2s = dws + nw1;
    float *dgs = hand_alloc_f32(ctx, L * D);
    float *m1 = hand_alloc_f32(ctx, nw1), *v1 = hand_alloc_f32(ctx, nw1);
    float *m2 = hand_alloc_f32(ctx, nw2), *v2 = hand_alloc_f32(ctx, nw2);
    float *mg = hand_alloc_f32(ctx, L * D), *vg = hand_alloc_f32(ctx, L * D);

    const double N = (double)B * (double)SEQ * (double)D;
    const float inv_n = (float)(1.0 / N); /* the gradient of sum(...) / N */
    const float lr = (float)o.lr;
    double c1 = 1.0, c2 = 1.0;
    const int iR = (int)(R * D);

    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    for (long step = 0; step < o.steps; step++) {
        /* ---- forward */
        for (long l = 0; l < L; l++) {
            const float *w1 = w1s + l * D * Hl, *w2 = w2s + l * Hl * D;
            float *W = whole + l * RF * D, *h = hs + l * RF * Hl, *gd = gds + l * RF * Hl;
            ln_forward(acts[l], gs + l * D, W + tp.i * R * D, mean + l * R, rstd + l * R, R, D);
            if (n_tp > 1)
                RT_CALL_MPI(ctx, MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, W, iR,
                                               MPI_FLOAT, tp.comm));
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)RF, (int)Hl, (int)D, 1.0f,
                        W, (int)D, w1, (int)Hl, 0.0f, h, (int)Hl);
            gelu_fwd(h, gd, RF * Hl);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)RF, (int)D, (int)Hl, 1.0f,
                        h, (int)Hl, w2, (int)D, 0.0f, ybuf, (int)D);
            const float *r = reduce_scatter_tp(&tp, ybuf, rbuf, R * D);
            const float *xin = acts[l];
            float *xout = acts[l + 1];
            for (long i = 0; i < R * D; i++)
                xout[i] = xin[i] + r[i];
        }
        /* ---- loss, and dx = 2 * (err / N) */
        double sq = 0.0;
        {
            const float *y = acts[L];
            for (long i = 0; i < R * D; i++) {
                float err = y[i] - t[i];
                sq += (double)(err * err);
                dx[i] = 2.0f * (inv_n * err);
            }
        }
        float loss = (float)sq / (float)N;
        /* ---- backward */
        for (long l = L - 1; l >= 0; l--) {
            const float *w1 = w1s + l * D * Hl, *w2 = w2s + l * Hl * D;
            const float *W = whole + l * RF * D, *h = hs + l * RF * Hl, *gd = gds + l * RF * Hl;
            float *dw1 = dw1s + l * D * Hl, *dw2 = dw2s + l * Hl * D;
            const float *G = dx;
            if (n_tp > 1) {
                RT_CALL_MPI(ctx, MPI_Allgather(dx, iR, MPI_FLOAT, dY, iR, MPI_FLOAT, tp.comm));
                G = dY;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)RF, (int)Hl, (int)D, 1.0f,
                        G, (int)D, w2, (int)D, 0.0f, dh, (int)Hl);     /* dh = dY @ w2^T */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Hl, (int)D, (int)RF, 1.0f,
                        h, (int)Hl, G, (int)D, 0.0f, dw2, (int)D);     /* dw2 = h^T @ dY */
            for (long i = 0; i < RF * Hl; i++)
                dh[i] *= gd[i];                                        /* da */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)RF, (int)D, (int)Hl, 1.0f,
                        dh, (int)Hl, w1, (int)Hl, 0.0f, ybuf, (int)D); /* dW = da @ w1^T */
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)D, (int)Hl, (int)RF, 1.0f,
                        W, (int)D, dh, (int)Hl, 0.0f, dw1, (int)Hl);   /* dw1 = W^T @ da */
            const float *dn = reduce_scatter_tp(&tp, ybuf, rbuf, R * D);
            ln_backward(acts[l], gs + l * D, mean + l * R, rstd + l * R, dn, dx, dgs + l * D,
                        acc, xh, gy, R, D);
        }
        if (n_dp > 1)
            RT_CALL_MPI(ctx, MPI_Allreduce(MPI_IN_PLACE, dws, (int)nw, MPI_FLOAT, MPI_SUM,
                                           mesh.dp_comm));
        if (n_dp * n_tp > 1)
            RT_CALL_MPI(ctx, MPI_Allreduce(MPI_IN_PLACE, dgs, (int)(L * D), MPI_FLOAT, MPI_SUM,
                                           MPI_COMM_WORLD));
        /* ---- Adam */
        c1 *= 0.9;
        c2 *= 0.999;
        const float bc1 = (float)(1.0 - c1), bc2 = (float)(1.0 - c2);
        adam(w1s, m1, v1, dw1s, nw1, lr, bc1, bc2);
        adam(w2s, m2, v2, dw2s, nw2, lr, bc1, bc2);
        adam(gs, mg, vg, dgs, L * D, lr, bc1, bc2);

        if (step % o.every == 0 || step == o.steps - 1) {
            if (n_dp * n_tp > 1)
                RT_CALL_MPI(ctx, MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_FLOAT, MPI_SUM,
                                               MPI_COMM_WORLD));
            if (rank == 0) {
                printf("step %ld loss %.6g\n", step, (double)loss);
                fflush(stdout);
            }
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double elapsed = now_s() - t0;
    if (o.time && rank == 0)
        fprintf(stderr, "block_hand: %ld steps in %.3f s (%.3f ms/step), B=%ld SEQ=%ld D=%ld "
                "H=%ld L=%ld dp=%d tp=%d\n", o.steps, elapsed,
                o.steps ? 1e3 * elapsed / (double)o.steps : 0.0, B, SEQ, D, H, L, n_dp, n_tp);

    for (long l = 0; l <= L; l++)
        free(acts[l]);
    free(acts);
    free(t); free(w1s); free(w2s); free(gs);
    free(mean); free(rstd); free(whole); free(hs); free(gds);
    free(ybuf); free(rbuf); free(dx); free(dY); free(dh); free(acc); free(xh); free(gy);
    free(dws); free(dgs); free(m1); free(v1); free(m2); free(v2); free(mg); free(vg);
    return hand_mesh_finalize(&mesh);
}
