/* The CUDA target's fused attention (rt_attention, rt_attention_bwd; the
 * semantics are spmdrt.h's and the CPU's runtime/kernels_attention.c, the
 * argument checks checks.c's), FlashAttention-2 style, on rt_launch_tiles
 * (dev.h: a block of threads, shared-memory tiles, phases between barriers;
 * the simulation build runs the same phases in order on the host):
 *   forward   a block per (batch, query head, tile of B query rows): q's
 *             tile stays in shared memory while the key/value tiles of B
 *             keys go by, up to the tile's causal limit (bottom-right
 *             aligned) and kv_len; an online softmax (each row's running
 *             max and sum, the output rows rescaled when the max grows);
 *             the output and each row's log-sum-exp written at the end
 *   backward  D = rowsum(dout * out) (a thread per row); dk, dv by a block
 *             per (batch, key/value head, tile of B keys) over the group's
 *             query heads and their query tiles in order; dq by a block per
 *             (batch, query head, tile of B query rows) over the key tiles
 *             in order. Each recomputes p from q, k and the log-sum-exp
 * Grouped-query heads read their key/value head without a copy; q's grouped
 * layout [B, Hkv, G, T, E] is the same memory as [B, Hkv * G, T, E].  The
 * memory is O(T x E) per head: shared-memory tiles, D (a value per row), no
 * T x S buffer.  f32 and bf16 compute in float (bf16 read exactly, each
 * result rounded once), f64 in double; every product-sum of f32 and f64 is
 * an explicit fma chain in index order (the build has --fmad=false) and no
 * atomics (bf16's: tensor-core tiles, below): each
 * element of the output, dq, dk and dv is one thread's, so its bits depend
 * on the inputs and the tile size B only (the same on every run, grid and
 * build; the GPU and the simulation differ only where their exp and log
 * round differently). B: 64, halved until a kernel's tiles fit RT_TILE_SMEM
 * (attn_tile), the same in both builds; a head size too large for B = 1 (in
 * the thousands) runs the reference kernels below (a thread per row, in
 * double).  bf16 computes its tile products on tensor cores (mma.h,
 * rt_mma_tiles: mma.sync m16n8k16 with f32 accumulation; in the simulation
 * the same fragments and an emulated MMA), p and ds rounded to bf16 as
 * their operands; the rest is f32's code, and the GPU's bf16 bits may
 * differ from the simulation's in the last bits of f32 sums. */
#include <math.h>
#include <string.h>

#include "dev.h"
#include "mma.h"

/* ---- exp and log of our own: the GPU's math library and the host's round
 * differently, these are the same operations (IEEE +, *, /, fma, rint,
 * ldexp, frexp) in both builds, so the same bits. exp: x = n ln2 + r with
 * |r| <= ln2 / 2 (ln2 in two parts), e^r by its Taylor polynomial (degree 7
 * in float, 13 in double: truncation below half an ulp), times 2^n. log:
 * x = 2^k f with f in [sqrt(1/2), sqrt(2)), log f = 2 atanh(s), s = (f - 1)
 * / (f + 1), by its odd series, plus k ln2. Both within a few ulps. */
RT_DEV_INLINE float attn_exp(float x)
{
    if (!(x > -104.0f))
        return x != x ? x : 0.0f; /* NaN; e^x below the least subnormal */
    if (x > 88.72283935546875f)
        return INFINITY;
    float n = rintf(x * 1.44269504088896341f);
    float r = fmaf(n, -1.4286067653e-06f, fmaf(n, -6.9314575195e-01f, x));
    float p = 1.0f / 5040;
    p = fmaf(p, r, 1.0f / 720);
    p = fmaf(p, r, 1.0f / 120);
    p = fmaf(p, r, 1.0f / 24);
    p = fmaf(p, r, 1.0f / 6);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    return ldexpf(p, (int)n);
}
RT_DEV_INLINE double attn_exp(double x)
{
    if (!(x > -746.0))
        return x != x ? x : 0.0;
    if (x > 709.782712893383973096)
        return INFINITY;
    double n = rint(x * 1.44269504088896338700);
    double r = fma(n, -1.90821492927058770002e-10, fma(n, -6.93147180369123816490e-01, x));
    double p = 1.0 / 6227020800.0, f = 6227020800.0; /* 1/13!, then 1/12!, ... 1/1!, 1/0! */
    for (int k = 13; k >= 1; k--) {
        f /= k; /* k-1 factorial: exact in double */
        p = fma(p, r, 1.0 / f);
    }
    return ldexp(p, (int)n);
}
RT_DEV_INLINE float attn_log(float x)
{
    if (x != x || x < 0)
        return NAN;
    if (x == 0)
        return -INFINITY;
    if (x == INFINITY)
        return x;
    int k;
    float f = frexpf(x, &k);
    if (f < 0.70710678118654752f) {
        f *= 2;
        k--;
    }
    float s = (f - 1) / (f + 1), s2 = s * s, p = 1.0f / 11;
    p = fmaf(p, s2, 1.0f / 9);
    p = fmaf(p, s2, 1.0f / 7);
    p = fmaf(p, s2, 1.0f / 5);
    p = fmaf(p, s2, 1.0f / 3);
    p = fmaf(p, s2, 1.0f);
    return fmaf((float)k, 6.9314575195e-01f, fmaf((float)k, 1.4286067653e-06f, 2 * s * p));
}
RT_DEV_INLINE double attn_log(double x)
{
    if (x != x || x < 0)
        return NAN;
    if (x == 0)
        return -INFINITY;
    if (x == INFINITY)
        return x;
    int k;
    double f = frexp(x, &k);
    if (f < 0.70710678118654752440) {
        f *= 2;
        k--;
    }
    double s = (f - 1) / (f + 1), s2 = s * s, p = 1.0 / 23;
    for (int i = 21; i >= 1; i -= 2)
        p = fma(p, s2, 1.0 / i);
    return fma((double)k, 6.93147180369123816490e-01, fma((double)k, 1.90821492927058770002e-10, 2 * s * p));
}

/* ---- the reference kernels: a thread per query row (forward, dq) or key
 * row (dk, dv), in double */

/* The keys query row i sees: j <= last (causal: aligned bottom-right). */
RT_DEV_INLINE int64_t attn_last(bool causal, int64_t i, int64_t t, int64_t s)
{
    int64_t l = causal ? i + s - t : s - 1;
    return l < s - 1 ? l : s - 1;
}

/* Where an operand's logical row r ((b * h + head) * t + i) lies, in rows
 * of its width: head-major [B, H, T, E] (r itself) or token-major (tm:
 * [B, T, H, E], spmdrt.h's RT_ATTN_*); q, out, dout, dq have the query
 * heads and rows, k, v, dk, dv the key/value heads and keys. */
struct attn_map {
    int64_t h, t;
    bool tm;
};
RT_DEV_INLINE int64_t attn_row(attn_map m, int64_t r)
{
    return m.tm ? (r / (m.h * m.t) * m.t + r % m.t) * m.h + r / m.t % m.h : r;
}
/* the operands' maps from the layout bits */
struct attn_maps {
    attn_map q, k, v, o;
};
static attn_maps attn_maps_of(const rt_attn_dims &d, unsigned layout)
{
    return attn_maps{{d.h, d.t, (layout & RT_ATTN_Q) != 0}, {d.hkv, d.s, (layout & RT_ATTN_K) != 0},
                     {d.hkv, d.s, (layout & RT_ATTN_V) != 0}, {d.h, d.t, (layout & RT_ATTN_OUT) != 0}};
}

/* q_r . k_j * scale */
RT_DEV_INLINE double attn_score(const void *Q, const void *K, rt_dtype dt, int64_t qo, int64_t ko, int64_t e,
                                double scale)
{
    double s = 0;
    for (int64_t x = 0; x < e; x++)
        s += rt_ld(Q, dt, qo + x) * rt_ld(K, dt, ko + x);
    return s * scale;
}

static void ref_fwd(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v, bool causal,
                    double scale, rt_attn_dims d, attn_maps mp, rt_tensor *o, rt_tensor *L)
{
    int64_t rows = d.b * d.h * d.t, na = rows * d.ev;
    rt_tensor *acc = rt_empty(ctx, RT_F64, 1, &na);
    const void *Q = q->data, *K = k->data, *V = v->data;
    void *O = o->data, *LS = L ? L->data : NULL;
    double *A = (double *)acc->data;
    rt_dtype dt = q->dtype, lt = L ? L->dtype : RT_F32;
    rt_launch(ctx, rows, [=] RT_HD(int64_t r) {
        int64_t b = r / (d.h * d.t), h = r / d.t % d.h, i = r % d.t, kv = b * d.hkv + h / d.g;
        int64_t last = attn_last(causal, i, d.t, d.sn), qo = attn_row(mp.q, r) * d.e, oo = attn_row(mp.o, r) * d.ev;
        double m = -INFINITY, l = 0;
        for (int64_t j = 0; j <= last; j++) {
            double sc = attn_score(Q, K, dt, qo, attn_row(mp.k, kv * d.s + j) * d.e, d.e, scale);
            m = sc > m ? sc : m;
        }
        for (int64_t x = 0; x < d.ev; x++)
            A[r * d.ev + x] = 0;
        for (int64_t j = 0; j <= last; j++) {
            double p = attn_exp(attn_score(Q, K, dt, qo, attn_row(mp.k, kv * d.s + j) * d.e, d.e, scale) - m);
            l += p;
            for (int64_t x = 0; x < d.ev; x++)
                A[r * d.ev + x] += p * rt_ld(V, dt, attn_row(mp.v, kv * d.s + j) * d.ev + x);
        }
        for (int64_t x = 0; x < d.ev; x++)
            rt_st(O, dt, oo + x, l > 0 ? A[r * d.ev + x] / l : 0.0);
        if (LS)
            rt_st(LS, lt, r, l > 0 ? m + attn_log(l) : -INFINITY);
    });
    rt_free(ctx, acc);
}

static void ref_bwd(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                    const rt_tensor *out, const rt_tensor *lse, const rt_tensor *dout, bool causal,
                    double scale, rt_attn_dims d, attn_maps mp, rt_tensor *DQ, rt_tensor *DK, rt_tensor *DV)
{
    int64_t rows = d.b * d.h * d.t, krows = d.b * d.hkv * d.s;
    rt_tensor *drow = rt_empty(ctx, RT_F64, 1, &rows);
    const void *Q = q->data, *K = k->data, *V = v->data, *O = out->data, *LS = lse->data, *DO = dout->data;
    void *dQ = DQ->data, *dK = DK->data, *dV = DV->data;
    double *D = (double *)drow->data;
    rt_dtype dt = q->dtype, lt = lse->dtype;
    /* D_r = dout_r . out_r */
    rt_launch(ctx, rows, [=] RT_HD(int64_t r) {
        double s = 0;
        int64_t oo = attn_row(mp.o, r) * d.ev;
        for (int64_t x = 0; x < d.ev; x++)
            s += rt_ld(DO, dt, oo + x) * rt_ld(O, dt, oo + x);
        D[r] = s;
    });
    /* dq_r = sum_j ds_rj k_j, ds = p (dout_r . v_j - D_r) scale; one
     * element of dq at a time, its sum over j in order */
    rt_launch(ctx, rows * d.e, [=] RT_HD(int64_t t) {
        int64_t r = t / d.e, x = t % d.e;
        int64_t b = r / (d.h * d.t), h = r / d.t % d.h, i = r % d.t, kv = b * d.hkv + h / d.g;
        int64_t last = attn_last(causal, i, d.t, d.sn), qo = attn_row(mp.q, r) * d.e, oo = attn_row(mp.o, r) * d.ev;
        double lr = rt_ld(LS, lt, r), g = 0;
        for (int64_t j = 0; j <= last && lr != -INFINITY; j++) {
            int64_t ko = attn_row(mp.k, kv * d.s + j) * d.e, vo = attn_row(mp.v, kv * d.s + j) * d.ev;
            double p = attn_exp(attn_score(Q, K, dt, qo, ko, d.e, scale) - lr);
            double dp = 0;
            for (int64_t y = 0; y < d.ev; y++)
                dp += rt_ld(DO, dt, oo + y) * rt_ld(V, dt, vo + y);
            g += p * (dp - D[r]) * scale * rt_ld(K, dt, ko + x);
        }
        rt_st(dQ, dt, qo + x, g);
    });
    /* dk_j, dv_j: one element of each at a time, over the group's query
     * heads, then their rows, in order */
    int64_t nk = krows * (d.e > d.ev ? d.e : d.ev);
    rt_launch(ctx, nk, [=] RT_HD(int64_t t) {
        int64_t w = d.e > d.ev ? d.e : d.ev, kr = t / w, x = t % w;
        int64_t kv = kr / d.s, j = kr % d.s, b = kv / d.hkv, kh = kv % d.hkv;
        int64_t ko = attn_row(mp.k, kr) * d.e, vo = attn_row(mp.v, kr) * d.ev;
        double gk = 0, gv = 0;
        for (int64_t g = 0; g < d.g; g++) {
            int64_t h = kh * d.g + g;
            for (int64_t i = 0; i < d.t; i++) {
                if (attn_last(causal, i, d.t, d.sn) < j)
                    continue;
                int64_t r = (b * d.h + h) * d.t + i;
                double lr = rt_ld(LS, lt, r);
                if (lr == -INFINITY)
                    continue;
                int64_t qo = attn_row(mp.q, r) * d.e, oo = attn_row(mp.o, r) * d.ev;
                double p = attn_exp(attn_score(Q, K, dt, qo, ko, d.e, scale) - lr);
                if (x < d.ev)
                    gv += p * rt_ld(DO, dt, oo + x);
                if (x < d.e) {
                    double dp = 0;
                    for (int64_t y = 0; y < d.ev; y++)
                        dp += rt_ld(DO, dt, oo + y) * rt_ld(V, dt, vo + y);
                    gk += p * (dp - D[r]) * scale * rt_ld(Q, dt, qo + x);
                }
            }
        }
        if (x < d.e)
            rt_st(dK, dt, ko + x, gk);
        if (x < d.ev)
            rt_st(dV, dt, vo + x, gv);
    });
    rt_free(ctx, drow);
}


/* ---- the tiled kernels (FlashAttention-2's structure). T is the compute
 * type: float for f32 and bf16 (bf16 read exactly as f32, each result
 * rounded once), double for f64. Every product-sum is an explicit fused
 * multiply-add chain in increasing index order (the build has --fmad=false:
 * nothing else is contracted), so an element's value depends only on the
 * inputs and the tile size, not on the threads or the grid. */
RT_DEV_INLINE float attn_fma(float a, float b, float c) { return fmaf(a, b, c); }
RT_DEV_INLINE double attn_fma(double a, double b, double c) { return fma(a, b, c); }

/* n terms a[i * as] * b[i * bs] from acc, in order */
template <class T> static RT_HD inline T attn_dot(const T *a, int64_t as, const T *b, int64_t bs, int64_t n, T acc)
{
    for (int64_t i = 0; i < n; i++)
        acc = attn_fma(a[i * as], b[i * bs], acc);
    return acc;
}

/* The rows and keys of a tile (B of each, B the kernel's: attn_tile) and
 * each kernel's shared memory in elements of T. The k and v tiles' rows are
 * padded to an odd length (attn_pad): the threads of a warp read the same
 * element of consecutive keys, which then fall in different banks. */
enum { ATTN_FWD, ATTN_DKDV, ATTN_DQ };
RT_DEV_INLINE int64_t attn_pad(int64_t n) { return n | 1; }
static int64_t attn_smem_elems(int kind, int64_t B, int64_t e, int64_t ev)
{
    int64_t kv = B * attn_pad(e) + B * attn_pad(ev);
    switch (kind) {
    case ATTN_FWD: /* q, k, v, the scores, the output rows; max, sum, rescale */
        return B * e + kv + B * ev + B * B + 3 * B;
    case ATTN_DKDV: /* k, v, dk, dv, q, dout; p, ds; lse, D */
        return kv + B * e * 2 + B * ev * 2 + 2 * B * B + 2 * B;
    default: /* q, dq, k, dout, v; ds; lse, D */
        return kv + B * e * 2 + B * ev + B * B + 2 * B;
    }
}
/* the largest tile of 64, 32, ..., 1 rows whose shared memory fits
 * RT_TILE_SMEM; 0: none (a head size of thousands: the reference kernels) */
static int64_t attn_tile(int kind, int64_t e, int64_t ev, size_t esz)
{
    for (int64_t B = 64; B >= 1; B /= 2)
        if ((size_t)attn_smem_elems(kind, B, e, ev) * esz <= RT_TILE_SMEM)
            return B;
    return 0;
}

/* ds_rc = p (dout_r . v_c - D_r) scale and p_rc = exp(q_r . k_c scale - lse_r)
 * for row rr of a query tile and key c of a key tile: 0 where masked (past
 * the causal limit lim = last key - j0, past the kv_len keys nvalid of the
 * tile, or a row that sees no key) */
template <class T>
static RT_HD inline void attn_pds(const T *sQ, const T *sK, const T *sdO, const T *sV, const T *sL, const T *sD,
                                  int64_t rr, int64_t c, int64_t lim, int64_t nvalid, int64_t e, int64_t ev,
                                  int64_t ke, int64_t kve, T scale, T *p, T *ds)
{
    T lr = sL[rr];
    if (c > lim || c >= nvalid || lr == (T)-INFINITY) {
        *p = 0;
        *ds = 0;
        return;
    }
    T pv = attn_exp(attn_dot(sQ + rr * e, 1, sK + c * ke, 1, e, (T)0) * scale - lr);
    T dp = attn_dot(sdO + rr * ev, 1, sV + c * kve, 1, ev, (T)0);
    *p = pv;
    *ds = pv * (dp - sD[rr]) * scale;
}

/* the tensor-core path's p and ds (attn_pds's, from the score s = q_r . k_c
 * and dp = dout_r . v_c computed by rt_mma_tiles): p_rc = exp(s scale -
 * lse_r), 0 where masked; ds_rc = p (dp - D_r) scale */
RT_DEV_INLINE float attn_p(float s, float scale, float lr, int64_t c, int64_t lim, int64_t nvalid)
{
    if (c > lim || c >= nvalid || lr == -INFINITY)
        return 0;
    return attn_exp(s * scale - lr);
}
RT_DEV_INLINE float attn_ds(float p, float dp, float D, float scale)
{
    return p == 0 ? 0.0f : p * (dp - D) * scale;
}

/* the forward: a block per (batch, query head, tile of B query rows). MMA
 * (bf16): the tile products q k^T and p v by rt_mma_tiles (mma.h: tensor
 * cores in the real build, their emulation in the simulation), p rounded to
 * bf16 as their operand (each row's sum, hence the log-sum-exp, from the
 * unrounded p); everything else the same code as f32's. (MMA is tested by
 * a plain if: nvcc does not let an extended lambda first capture a variable
 * inside if constexpr; the branch not taken is dead code.) */
template <class T, bool MMA>
static void tiled_fwd(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v, bool causal,
                      double scale_d, rt_attn_dims d, attn_maps mp, int64_t B, rt_tensor *o, rt_tensor *L)
{
    const void *Q = q->data, *K = k->data, *V = v->data;
    void *O = o->data, *LS = L ? L->data : NULL;
    rt_dtype dt = q->dtype, lt = L ? L->dtype : RT_F32;
    T scale = (T)scale_d;
    int64_t nqt = (d.t + B - 1) / B, e = d.e, ev = d.ev, ke = attn_pad(e), kve = attn_pad(ev);
    size_t smem = (size_t)attn_smem_elems(ATTN_FWD, B, e, ev) * sizeof(T);
    rt_launch_tiles(ctx, d.b * d.h * nqt, smem, [=] RT_HD(rt_block & blk, int64_t bi) {
        T *sQ = (T *)blk.smem, *sK = sQ + B * e, *sV = sK + B * ke, *sS = sV + B * kve, *sA = sS + B * B;
        T *sM = sA + B * ev, *sL = sM + B, *sAl = sL + B;
        int64_t bh = bi / nqt, i0 = bi % nqt * B, br = d.t - i0 < B ? d.t - i0 : B;
        int64_t kv = bh / d.h * d.hkv + bh % d.h / d.g, row0 = bh * d.t + i0;
        int64_t hi = attn_last(causal, i0 + br - 1, d.t, d.sn) + 1; /* keys any row of the tile sees */
        blk.par(br * e, [&](int64_t i) { sQ[i] = (T)rt_ld(Q, dt, attn_row(mp.q, row0 + i / e) * e + i % e); });
        blk.par(br * ev, [&](int64_t i) { sA[i] = 0; });
        blk.par(br, [&](int64_t r) {
            sM[r] = (T)-INFINITY;
            sL[r] = 0;
        });
        for (int64_t j0 = 0; j0 < hi; j0 += B) {
            int64_t bc = hi - j0 < B ? hi - j0 : B, krow0 = kv * d.s + j0;
            blk.par(bc * e, [&](int64_t i) {
                sK[i / e * ke + i % e] = (T)rt_ld(K, dt, attn_row(mp.k, krow0 + i / e) * e + i % e);
            });
            blk.par(bc * ev, [&](int64_t i) {
                sV[i / ev * kve + i % ev] = (T)rt_ld(V, dt, attn_row(mp.v, krow0 + i / ev) * ev + i % ev);
            });
            /* the scores, -inf past a row's causal limit */
            if (MMA)
                rt_mma_tiles(
                    blk, br, bc, e, [&](int64_t r, int64_t x) { return sQ[r * e + x]; },
                    [&](int64_t x, int64_t c) { return sK[c * ke + x]; }, [&](int64_t, int64_t) { return 0.0f; },
                    [&](int64_t r, int64_t c, float s) {
                        sS[r * bc + c] = c <= attn_last(causal, i0 + r, d.t, d.sn) - j0 ? s * scale : (T)-INFINITY;
                    });
            else
                blk.par(br * bc, [&](int64_t i) {
                    int64_t r = i / bc, c = i % bc;
                    sS[i] = c <= attn_last(causal, i0 + r, d.t, d.sn) - j0
                                ? attn_dot(sQ + r * e, 1, sK + c * ke, 1, e, (T)0) * scale
                                : (T)-INFINITY;
                });
            /* each row's online softmax: the new max, the probabilities
             * (in place), the sum, the old terms' rescale */
            blk.par(br, [&](int64_t r) {
                T *row = sS + r * bc, mx = sM[r];
                for (int64_t c = 0; c < bc; c++)
                    mx = row[c] > mx ? row[c] : mx;
                if (mx == (T)-INFINITY) { /* no key seen yet: nothing to add */
                    for (int64_t c = 0; c < bc; c++)
                        row[c] = 0;
                    sAl[r] = 1;
                    return;
                }
                T alpha = attn_exp(sM[r] - mx), sum = 0;
                for (int64_t c = 0; c < bc; c++) {
                    row[c] = attn_exp(row[c] - mx);
                    sum += row[c];
                }
                sL[r] = sL[r] * alpha + sum;
                sM[r] = mx;
                sAl[r] = alpha;
            });
            /* the output rows: rescaled, plus p v */
            if (MMA)
                rt_mma_tiles(
                    blk, br, ev, bc, [&](int64_t r, int64_t c) { return sS[r * bc + c]; },
                    [&](int64_t c, int64_t x) { return sV[c * kve + x]; },
                    [&](int64_t r, int64_t x) { return sA[r * ev + x] * sAl[r]; },
                    [&](int64_t r, int64_t x, float o) { sA[r * ev + x] = o; });
            else
                blk.par(br * ev, [&](int64_t i) {
                    int64_t r = i / ev, x = i % ev;
                    sA[i] = attn_dot(sS + r * bc, 1, sV + x, kve, bc, sA[i] * sAl[r]);
                });
        }
        blk.par(br * ev, [&](int64_t i) {
            T l = sL[i / ev], inv = l > 0 ? 1 / l : 0;
            rt_st(O, dt, attn_row(mp.o, row0 + i / ev) * ev + i % ev, sA[i] * inv);
        });
        if (LS)
            blk.par(br, [&](int64_t r) {
                rt_st(LS, lt, row0 + r, sL[r] > 0 ? sM[r] + attn_log(sL[r]) : (T)-INFINITY);
            });
    });
}

/* the backward: D = rowsum(dout * out); then dk, dv by a block per (batch,
 * key/value head, tile of B keys) over the group's query heads and their
 * query tiles in order; then dq by a block per (batch, query head, tile of B
 * query rows) over the key tiles in order. No atomics: every element of dq,
 * dk and dv is one thread's fused multiply-add chain (MMA, bf16: one lane's
 * accumulators, the tile products q k^T, dout v^T, p^T dout, ds^T q and ds k
 * by rt_mma_tiles, p and ds rounded to bf16 as their operands; ds from the
 * unrounded p). */
template <class T, bool MMA>
static void tiled_bwd(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                      const rt_tensor *out, const rt_tensor *lse, const rt_tensor *dout, bool causal,
                      double scale_d, rt_attn_dims d, attn_maps mp, int64_t Bk, int64_t Bq, rt_tensor *DQ, rt_tensor *DK,
                      rt_tensor *DV)
{
    int64_t rows = d.b * d.h * d.t, e = d.e, ev = d.ev, ke = attn_pad(e), kve = attn_pad(ev);
    rt_tensor *drow = rt_empty(ctx, sizeof(T) == sizeof(double) ? RT_F64 : RT_F32, 1, &rows);
    const void *Q = q->data, *K = k->data, *V = v->data, *O = out->data, *LS = lse->data, *DO = dout->data;
    void *dQ = DQ->data, *dK = DK->data, *dV = DV->data;
    T *D = (T *)drow->data, scale = (T)scale_d;
    rt_dtype dt = q->dtype, lt = lse->dtype;
    rt_launch(ctx, rows, [=] RT_HD(int64_t r) {
        T s = 0;
        int64_t oo = attn_row(mp.o, r) * ev;
        for (int64_t x = 0; x < ev; x++)
            s = attn_fma((T)rt_ld(DO, dt, oo + x), (T)rt_ld(O, dt, oo + x), s);
        D[r] = s;
    });
    /* dk, dv: tiles over all S keys; those at kv_len and after get 0 */
    int64_t B = Bk, nkt = (d.s + B - 1) / B;
    size_t smem = (size_t)attn_smem_elems(ATTN_DKDV, B, e, ev) * sizeof(T);
    rt_launch_tiles(ctx, d.b * d.hkv * nkt, smem, [=] RT_HD(rt_block & blk, int64_t bi) {
        T *sK = (T *)blk.smem, *sV = sK + B * ke, *sdK = sV + B * kve, *sdV = sdK + B * e, *sQ = sdV + B * ev;
        T *sdO = sQ + B * e, *sP = sdO + B * ev, *sdS = sP + B * B, *sL = sdS + B * B, *sD = sL + B;
        int64_t kv = bi / nkt, j0 = bi % nkt * B, bc = d.s - j0 < B ? d.s - j0 : B, krow0 = kv * d.s + j0;
        int64_t nvalid = d.sn - j0 < 0 ? 0 : d.sn - j0; /* keys of the tile inside kv_len */
        int64_t b = kv / d.hkv, kh = kv % d.hkv;
        blk.par(bc * e, [&](int64_t i) {
            sK[i / e * ke + i % e] = (T)rt_ld(K, dt, attn_row(mp.k, krow0 + i / e) * e + i % e);
            sdK[i] = 0;
        });
        blk.par(bc * ev, [&](int64_t i) {
            sV[i / ev * kve + i % ev] = (T)rt_ld(V, dt, attn_row(mp.v, krow0 + i / ev) * ev + i % ev);
            sdV[i] = 0;
        });
        for (int64_t g = 0; g < d.g && nvalid > 0; g++)
            for (int64_t i0 = 0; i0 < d.t; i0 += B) {
                int64_t br = d.t - i0 < B ? d.t - i0 : B, row0 = ((b * d.h + kh * d.g + g) * d.t) + i0;
                if (attn_last(causal, i0 + br - 1, d.t, d.sn) < j0)
                    continue; /* no row of this tile sees these keys */
                blk.par(br * e, [&](int64_t i) { sQ[i] = (T)rt_ld(Q, dt, attn_row(mp.q, row0 + i / e) * e + i % e); });
                blk.par(br * ev, [&](int64_t i) {
                    sdO[i] = (T)rt_ld(DO, dt, attn_row(mp.o, row0 + i / ev) * ev + i % ev);
                });
                blk.par(br, [&](int64_t r) {
                    sL[r] = (T)rt_ld(LS, lt, row0 + r);
                    sD[r] = D[row0 + r];
                });
                if (MMA) {
                    /* p = exp(q k^T scale - lse), then ds = p (dout v^T - D) scale */
                    rt_mma_tiles(
                        blk, br, bc, e, [&](int64_t r, int64_t x) { return sQ[r * e + x]; },
                        [&](int64_t x, int64_t c) { return sK[c * ke + x]; }, [&](int64_t, int64_t) { return 0.0f; },
                        [&](int64_t r, int64_t c, float s) {
                            sP[r * bc + c] = attn_p(s, scale, sL[r], c, attn_last(causal, i0 + r, d.t, d.sn) - j0,
                                                    nvalid);
                        });
                    rt_mma_tiles(
                        blk, br, bc, ev, [&](int64_t r, int64_t y) { return sdO[r * ev + y]; },
                        [&](int64_t y, int64_t c) { return sV[c * kve + y]; }, [&](int64_t, int64_t) { return 0.0f; },
                        [&](int64_t r, int64_t c, float dp) {
                            sdS[r * bc + c] = attn_ds(sP[r * bc + c], dp, sD[r], scale);
                        });
                    /* dv_c += sum_r p_rc dout_r; dk_c += sum_r ds_rc q_r */
                    rt_mma_tiles(
                        blk, bc, ev, br, [&](int64_t c, int64_t r) { return sP[r * bc + c]; },
                        [&](int64_t r, int64_t x) { return sdO[r * ev + x]; },
                        [&](int64_t c, int64_t x) { return sdV[c * ev + x]; },
                        [&](int64_t c, int64_t x, float g) { sdV[c * ev + x] = g; });
                    rt_mma_tiles(
                        blk, bc, e, br, [&](int64_t c, int64_t r) { return sdS[r * bc + c]; },
                        [&](int64_t r, int64_t x) { return sQ[r * e + x]; },
                        [&](int64_t c, int64_t x) { return sdK[c * e + x]; },
                        [&](int64_t c, int64_t x, float g) { sdK[c * e + x] = g; });
                    continue;
                }
                blk.par(br * bc, [&](int64_t i) {
                    int64_t r = i / bc, c = i % bc;
                    attn_pds(sQ, sK, sdO, sV, sL, sD, r, c, attn_last(causal, i0 + r, d.t, d.sn) - j0, nvalid, e,
                             ev, ke, kve, scale, sP + i, sdS + i);
                });
                /* dk_c += sum_r ds_rc q_r; dv_c += sum_r p_rc dout_r */
                blk.par(bc * (e + ev), [&](int64_t i) {
                    if (i < bc * e) {
                        int64_t c = i / e, x = i % e;
                        sdK[i] = attn_dot(sdS + c, bc, sQ + x, e, br, sdK[i]);
                    } else {
                        int64_t c = (i - bc * e) / ev, x = (i - bc * e) % ev;
                        sdV[c * ev + x] = attn_dot(sP + c, bc, sdO + x, ev, br, sdV[c * ev + x]);
                    }
                });
            }
        blk.par(bc * e, [&](int64_t i) { rt_st(dK, dt, attn_row(mp.k, krow0 + i / e) * e + i % e, sdK[i]); });
        blk.par(bc * ev, [&](int64_t i) { rt_st(dV, dt, attn_row(mp.v, krow0 + i / ev) * ev + i % ev, sdV[i]); });
    });
    /* dq */
    B = Bq;
    int64_t nqt = (d.t + B - 1) / B;
    smem = (size_t)attn_smem_elems(ATTN_DQ, B, e, ev) * sizeof(T);
    rt_launch_tiles(ctx, d.b * d.h * nqt, smem, [=] RT_HD(rt_block & blk, int64_t bi) {
        T *sQ = (T *)blk.smem, *sdQ = sQ + B * e, *sK = sdQ + B * e, *sdO = sK + B * ke, *sV = sdO + B * ev;
        T *sdS = sV + B * kve, *sL = sdS + B * B, *sD = sL + B;
        int64_t bh = bi / nqt, i0 = bi % nqt * B, br = d.t - i0 < B ? d.t - i0 : B;
        int64_t kv = bh / d.h * d.hkv + bh % d.h / d.g, row0 = bh * d.t + i0;
        int64_t hi = attn_last(causal, i0 + br - 1, d.t, d.sn) + 1;
        blk.par(br * e, [&](int64_t i) {
            sQ[i] = (T)rt_ld(Q, dt, attn_row(mp.q, row0 + i / e) * e + i % e);
            sdQ[i] = 0;
        });
        blk.par(br * ev, [&](int64_t i) { sdO[i] = (T)rt_ld(DO, dt, attn_row(mp.o, row0 + i / ev) * ev + i % ev); });
        blk.par(br, [&](int64_t r) {
            sL[r] = (T)rt_ld(LS, lt, row0 + r);
            sD[r] = D[row0 + r];
        });
        for (int64_t j0 = 0; j0 < hi; j0 += B) {
            int64_t bc = hi - j0 < B ? hi - j0 : B, krow0 = kv * d.s + j0;
            blk.par(bc * e, [&](int64_t i) {
                sK[i / e * ke + i % e] = (T)rt_ld(K, dt, attn_row(mp.k, krow0 + i / e) * e + i % e);
            });
            blk.par(bc * ev, [&](int64_t i) {
                sV[i / ev * kve + i % ev] = (T)rt_ld(V, dt, attn_row(mp.v, krow0 + i / ev) * ev + i % ev);
            });
            if (MMA) {
                /* p into sdS, then ds in its place; dq_r += sum_c ds_rc k_c */
                rt_mma_tiles(
                    blk, br, bc, e, [&](int64_t r, int64_t x) { return sQ[r * e + x]; },
                    [&](int64_t x, int64_t c) { return sK[c * ke + x]; }, [&](int64_t, int64_t) { return 0.0f; },
                    [&](int64_t r, int64_t c, float s) {
                        sdS[r * bc + c] = attn_p(s, scale, sL[r], c, attn_last(causal, i0 + r, d.t, d.sn) - j0, bc);
                    });
                rt_mma_tiles(
                    blk, br, bc, ev, [&](int64_t r, int64_t y) { return sdO[r * ev + y]; },
                    [&](int64_t y, int64_t c) { return sV[c * kve + y]; }, [&](int64_t, int64_t) { return 0.0f; },
                    [&](int64_t r, int64_t c, float dp) {
                        sdS[r * bc + c] = attn_ds(sdS[r * bc + c], dp, sD[r], scale);
                    });
                rt_mma_tiles(
                    blk, br, e, bc, [&](int64_t r, int64_t c) { return sdS[r * bc + c]; },
                    [&](int64_t c, int64_t x) { return sK[c * ke + x]; },
                    [&](int64_t r, int64_t x) { return sdQ[r * e + x]; },
                    [&](int64_t r, int64_t x, float g) { sdQ[r * e + x] = g; });
                continue;
            }
            blk.par(br * bc, [&](int64_t i) {
                int64_t r = i / bc, c = i % bc;
                T p;
                attn_pds(sQ, sK, sdO, sV, sL, sD, r, c, attn_last(causal, i0 + r, d.t, d.sn) - j0, bc, e, ev,
                         ke, kve, scale, &p, sdS + i);
            });
            /* dq_r += sum_c ds_rc k_c */
            blk.par(br * e, [&](int64_t i) {
                int64_t r = i / e, x = i % e;
                sdQ[i] = attn_dot(sdS + r * bc, 1, sK + x, ke, bc, sdQ[i]);
            });
        }
        blk.par(br * e, [&](int64_t i) { rt_st(dQ, dt, attn_row(mp.q, row0 + i / e) * e + i % e, sdQ[i]); });
    });
    rt_free(ctx, drow);
}

extern "C" {

rt_tensor *rt_attention(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                        bool causal, double scale, int64_t kv_len, rt_tensor **lse)
{
    return rt_attention_l(ctx, q, k, v, causal, scale, kv_len, 0, lse);
}

rt_tensor *rt_attention_l(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                          bool causal, double scale, int64_t kv_len, unsigned layout, rt_tensor **lse)
{
    rt_attn_dims d;
    rt_tensor lq = rt_attn_logical(q, layout & RT_ATTN_Q), lk = rt_attn_logical(k, layout & RT_ATTN_K),
              lv = rt_attn_logical(v, layout & RT_ATTN_V);
    rt_attention_check(ctx, &lq, &lk, &lv, NULL, NULL, NULL, kv_len, &d);
    RT_KERNEL(ctx, RT_K_NN, "attention");
    ctx->tgt->op = "attention";
    rt_tensor *L, *o = rt_attention_outputs(ctx, &lq, &d, lse != NULL, &L);
    rt_attn_to_tokens(o, layout & RT_ATTN_OUT);
    attn_maps mp = attn_maps_of(d, layout);
    bool f64 = q->dtype == RT_F64;
    int64_t B = attn_tile(ATTN_FWD, d.e, d.ev, f64 ? sizeof(double) : sizeof(float));
    if (B == 0)
        ref_fwd(ctx, q, k, v, causal, scale, d, mp, o, L);
    else if (f64)
        tiled_fwd<double, false>(ctx, q, k, v, causal, scale, d, mp, B, o, L);
    else if (q->dtype == RT_BF16)
        tiled_fwd<float, true>(ctx, q, k, v, causal, scale, d, mp, B, o, L);
    else
        tiled_fwd<float, false>(ctx, q, k, v, causal, scale, d, mp, B, o, L);
    if (lse)
        *lse = L;
    return o;
}

void rt_attention_bwd(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                      const rt_tensor *out, const rt_tensor *lse, const rt_tensor *dout, bool causal,
                      double scale, int64_t kv_len, rt_tensor **dq, rt_tensor **dk, rt_tensor **dv)
{
    rt_attention_bwd_l(ctx, q, k, v, out, lse, dout, causal, scale, kv_len, 0, dq, dk, dv);
}

void rt_attention_bwd_l(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                        const rt_tensor *out, const rt_tensor *lse, const rt_tensor *dout, bool causal,
                        double scale, int64_t kv_len, unsigned layout, rt_tensor **dq, rt_tensor **dk,
                        rt_tensor **dv)
{
    rt_attn_dims d;
    bool to = layout & RT_ATTN_OUT;
    rt_tensor lq = rt_attn_logical(q, layout & RT_ATTN_Q), lk = rt_attn_logical(k, layout & RT_ATTN_K),
              lv = rt_attn_logical(v, layout & RT_ATTN_V), lo = rt_attn_logical(out, to),
              ldo = rt_attn_logical(dout, to);
    rt_attention_check(ctx, &lq, &lk, &lv, &lo, lse, &ldo, kv_len, &d);
    RT_KERNEL(ctx, RT_K_NN, "attention_bwd");
    ctx->tgt->op = "attention_bwd";
    rt_tensor *DQ = rt_empty(ctx, q->dtype, q->ndim, q->shape), *DK = rt_empty(ctx, k->dtype, k->ndim, k->shape),
              *DV = rt_empty(ctx, v->dtype, v->ndim, v->shape);
    attn_maps mp = attn_maps_of(d, layout);
    bool f64 = q->dtype == RT_F64;
    size_t esz = f64 ? sizeof(double) : sizeof(float);
    int64_t Bk = attn_tile(ATTN_DKDV, d.e, d.ev, esz), Bq = attn_tile(ATTN_DQ, d.e, d.ev, esz);
    if (Bk == 0 || Bq == 0)
        ref_bwd(ctx, q, k, v, out, lse, dout, causal, scale, d, mp, DQ, DK, DV);
    else if (f64)
        tiled_bwd<double, false>(ctx, q, k, v, out, lse, dout, causal, scale, d, mp, Bk, Bq, DQ, DK, DV);
    else if (q->dtype == RT_BF16)
        tiled_bwd<float, true>(ctx, q, k, v, out, lse, dout, causal, scale, d, mp, Bk, Bq, DQ, DK, DV);
    else
        tiled_bwd<float, false>(ctx, q, k, v, out, lse, dout, causal, scale, d, mp, Bk, Bq, DQ, DK, DV);
    rt_hand_over(ctx, DQ, dq);
    rt_hand_over(ctx, DK, dk);
    rt_hand_over(ctx, DV, dv);
}

} /* extern "C" */
