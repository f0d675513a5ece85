/* Fused attention on the CPU (rt_attention, rt_attention_bwd): per head,
 * tiles of BR query rows against tiles of BC keys, the scores of a tile
 * pair one GEMM (rt_gemm: OpenBLAS or oneDNN) into a BR x BC scratch, an
 * online softmax (each row's running max and sum, the output rescaled when
 * the max grows), then a GEMM of the probabilities with the values.  The
 * memory is O(T x E) per head: the scores are never kept, only each row's
 * log-sum-exp, from which the backward recomputes a tile's probabilities
 * (FlashAttention-2's backward: key tiles outer, query tiles inner).  Every
 * sum runs in a fixed order (no atomics, no threads): the same bits on
 * every run and mesh.  f32 and bf16 compute in float (bf16 staged through
 * f32 and rounded once), f64 in double.  With kv_len the kernels see the
 * first kv_len keys of each head only (a cache's written positions; the
 * others' dk, dv stay 0).  Argument checks: checks.c. */
#include <math.h>
#include <string.h>

#include "rt_cpu.h"

enum { BR = 64, BC = 64 }; /* query and key rows per tile */

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* The last key query row i sees (causal: aligned bottom-right). */
static int64_t last_key(bool causal, int64_t i, int64_t t, int64_t s) { return causal ? i + s - t : s - 1; }

/* ATTN(T, SUF, DT, EXP, LOG): the kernels over slabs of T (contiguous rows):
 * fwd_SUF: one head's output and log-sum-exp; bwd_SUF: one head's
 * contribution to dq (overwritten), dk and dv (added to). */
#define ATTN(T, SUF, DT, EXP, LOG)                                                                  \
    static void fwd_##SUF(rt_ctx *ctx, const T *q, const T *k, const T *v, int64_t t, int64_t s,  \
                          int64_t e, int64_t ev, bool causal, T scale, T *o, T *lse, T *sc,       \
                          T *acc, T *m, T *l)                                                     \
    {                                                                                             \
        for (int64_t i0 = 0; i0 < t; i0 += BR) {                                                  \
            int64_t br = min64(BR, t - i0);                                                       \
            int64_t hi = min64(s, last_key(causal, i0 + br - 1, t, s) + 1);                       \
            memset(acc, 0, sizeof(T) * (size_t)(br * ev));                                        \
            for (int64_t r = 0; r < br; r++) {                                                    \
                m[r] = -INFINITY;                                                                 \
                l[r] = 0;                                                                         \
            }                                                                                     \
            for (int64_t j0 = 0; j0 < hi; j0 += BC) {                                             \
                int64_t bc = min64(BC, hi - j0);                                                  \
                rt_gemm(ctx, DT, false, true, br, bc, e, q + i0 * e, k + j0 * e, sc, 0.0);        \
                for (int64_t r = 0; r < br; r++) {                                                \
                    T *row = sc + r * bc, mx = m[r];                                              \
                    int64_t lim = last_key(causal, i0 + r, t, s) - j0;                            \
                    for (int64_t c = 0; c < bc; c++) {                                            \
                        row[c] = c <= lim ? row[c] * scale : (T)-INFINITY;                        \
                        mx = row[c] > mx ? row[c] : mx;                                           \
                    }                                                                             \
                    if (mx == (T)-INFINITY) { /* no key seen yet: nothing to add */               \
                        memset(row, 0, sizeof(T) * (size_t)bc);                                   \
                        continue;                                                                 \
                    }                                                                             \
                    T alpha = EXP(m[r] - mx), sum = 0;                                            \
                    for (int64_t c = 0; c < bc; c++) {                                            \
                        row[c] = EXP(row[c] - mx);                                                \
                        sum += row[c];                                                            \
                    }                                                                             \
                    l[r] = l[r] * alpha + sum;                                                    \
                    m[r] = mx;                                                                    \
                    for (int64_t x = 0; x < ev; x++)                                              \
                        acc[r * ev + x] *= alpha;                                                 \
                }                                                                                 \
                rt_gemm(ctx, DT, false, false, br, ev, bc, sc, v + j0 * ev, acc, 1.0);            \
            }                                                                                     \
            for (int64_t r = 0; r < br; r++) {                                                    \
                T inv = l[r] > 0 ? 1 / l[r] : 0;                                                  \
                for (int64_t x = 0; x < ev; x++)                                                  \
                    o[(i0 + r) * ev + x] = acc[r * ev + x] * inv;                                 \
                if (lse)                                                                          \
                    lse[i0 + r] = l[r] > 0 ? m[r] + LOG(l[r]) : (T)-INFINITY;                     \
            }                                                                                     \
        }                                                                                         \
    }                                                                                             \
                                                                                                  \
    static void bwd_##SUF(rt_ctx *ctx, const T *q, const T *k, const T *v, const T *o,            \
                          const T *lse, const T *dout, int64_t t, int64_t s, int64_t e,          \
                          int64_t ev, bool causal, T scale, T *dq, T *dk, T *dv, T *p, T *dp,     \
                          T *drow)                                                                \
    {                                                                                             \
        for (int64_t i = 0; i < t; i++) { /* D_i = dout_i . o_i */                                \
            T d = 0;                                                                              \
            for (int64_t x = 0; x < ev; x++)                                                      \
                d += dout[i * ev + x] * o[i * ev + x];                                            \
            drow[i] = d;                                                                          \
        }                                                                                         \
        memset(dq, 0, sizeof(T) * (size_t)(t * e));                                               \
        for (int64_t j0 = 0; j0 < s; j0 += BC) {                                                  \
            int64_t bc = min64(BC, s - j0);                                                       \
            for (int64_t i0 = 0; i0 < t; i0 += BR) {                                              \
                int64_t br = min64(BR, t - i0);                                                   \
                if (last_key(causal, i0 + br - 1, t, s) < j0)                                     \
                    continue; /* no row of this tile sees these keys */                           \
                rt_gemm(ctx, DT, false, true, br, bc, e, q + i0 * e, k + j0 * e, p, 0.0);         \
                for (int64_t r = 0; r < br; r++) {                                                \
                    int64_t lim = last_key(causal, i0 + r, t, s) - j0;                            \
                    T lr = lse[i0 + r];                                                           \
                    for (int64_t c = 0; c < bc; c++)                                              \
                        p[r * bc + c] = c <= lim && lr != (T)-INFINITY                            \
                                            ? EXP(p[r * bc + c] * scale - lr)                     \
                                            : 0;                                                  \
                }                                                                                 \
                /* dv_j += p^T dout_i; dp = dout_i v_j^T */                                       \
                rt_gemm(ctx, DT, true, false, bc, ev, br, p, dout + i0 * ev, dv + j0 * ev, 1.0);  \
                rt_gemm(ctx, DT, false, true, br, bc, ev, dout + i0 * ev, v + j0 * ev, dp, 0.0);  \
                for (int64_t r = 0; r < br; r++)                                                  \
                    for (int64_t c = 0; c < bc; c++)                                              \
                        dp[r * bc + c] = p[r * bc + c] * (dp[r * bc + c] - drow[i0 + r]) * scale; \
                /* dq_i += ds k_j; dk_j += ds^T q_i */                                            \
                rt_gemm(ctx, DT, false, false, br, e, bc, dp, k + j0 * e, dq + i0 * e, 1.0);      \
                rt_gemm(ctx, DT, true, false, bc, e, br, dp, q + i0 * e, dk + j0 * e, 1.0);       \
            }                                                                                     \
        }                                                                                         \
    }

ATTN(float, f32, RT_F32, expf, logf)
ATTN(double, f64, RT_F64, exp, log)

/* Where one head's rows of an operand lie: h heads of t rows of w
 * elements, token-major (tm: [B, T, H, w]) or head-major ([B, H, T, w]).
 * A head-major f32 or f64 operand's head is its own memory; otherwise the
 * kernels see a contiguous copy in the compute type (bf16 staged through
 * f32), the same values in the same order, so the same bits. */
typedef struct {
    rt_tensor *x;
    int64_t h, t, w;
    bool tm;
} opnd;

static bool staged(const opnd *o) { return o->tm || o->x->dtype == RT_BF16; }

/* copies nrows rows from logical row r0 of o (into buf) or back (to o) */
static void move_rows(const opnd *o, int64_t r0, int64_t nrows, void *buf, bool to_x)
{
    size_t esz = rt_dtype_size(o->x->dtype), csz = o->x->dtype == RT_F64 ? sizeof(double) : sizeof(float);
    /* head-major rows are one run; token-major ones a run per row */
    int64_t run = o->tm ? 1 : nrows;
    for (int64_t i = 0; i < nrows; i += run) {
        int64_t off = rt_attn_row(r0 + i, o->h, o->t, o->tm) * o->w, n = run * o->w;
        char *c = (char *)buf + (size_t)(i * o->w) * csz, *m = (char *)o->x->data + (size_t)off * esz;
        if (o->x->dtype == RT_BF16) {
            if (to_x)
                rt_bf16_from_f32_n((uint16_t *)(void *)m, (const float *)(void *)c, n);
            else
                rt_bf16_to_f32_n((float *)(void *)c, (const uint16_t *)(void *)m, n);
        } else if (to_x) {
            memcpy(m, c, (size_t)n * esz);
        } else {
            memcpy(c, m, (size_t)n * esz);
        }
    }
}

/* nrows rows of o from logical row r0, as the compute type: o's own
 * memory, or staged into buf */
static const void *slab(const opnd *o, int64_t r0, int64_t nrows, void *buf)
{
    if (!staged(o))
        return (const char *)o->x->data + (size_t)(r0 * o->w) * rt_dtype_size(o->x->dtype);
    move_rows(o, r0, nrows, buf, false);
    return buf;
}

/* the compute type's rows of o to write (staged: buf, stored by unstage) */
static void *out_slab(const opnd *o, int64_t r0, void *buf)
{
    return staged(o) ? buf : (char *)o->x->data + (size_t)(r0 * o->w) * rt_dtype_size(o->x->dtype);
}

static void unstage(const opnd *o, int64_t r0, int64_t nrows, void *buf)
{
    if (staged(o))
        move_rows(o, r0, nrows, buf, true);
}

static rt_tensor *scratch(rt_ctx *ctx, rt_dtype ct, int64_t n) { return rt_scratch_tensor(ctx, ct, n ? n : 1); }

/* the operands' places: q, out (and dout, dq) of d.h heads of d.t rows; k,
 * v (and dk, dv) of d.hkv heads of d.s rows */
static opnd op_q(const rt_tensor *x, const rt_attn_dims *d, int64_t w, bool tm)
{
    return (opnd){(rt_tensor *)x, d->h, d->t, w, tm};
}
static opnd op_kv(const rt_tensor *x, const rt_attn_dims *d, int64_t w, bool tm)
{
    return (opnd){(rt_tensor *)x, d->hkv, d->s, w, tm};
}

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
    rt_tensor *L, *o = rt_attention_outputs(ctx, &lq, &d, lse != NULL, &L);
    rt_attn_to_tokens(o, layout & RT_ATTN_OUT);
    rt_dtype ct = q->dtype == RT_F64 ? RT_F64 : RT_F32;
    opnd Oq = op_q(q, &d, d.e, layout & RT_ATTN_Q), Ok = op_kv(k, &d, d.e, layout & RT_ATTN_K),
         Ov = op_kv(v, &d, d.ev, layout & RT_ATTN_V), Oo = op_q(o, &d, d.ev, layout & RT_ATTN_OUT);
    /* scratch: a score tile, the output rows of a query tile, the running
     * max and sum; the staged q, k, v and output slabs */
    rt_tensor *sc = scratch(ctx, ct, BR * BC), *acc = scratch(ctx, ct, BR * d.ev), *ml = scratch(ctx, ct, 2 * BR);
    rt_tensor *st = scratch(ctx, ct, d.t * d.e + d.s * d.e + d.s * d.ev + d.t * d.ev);
    size_t csz = rt_dtype_size(ct);
    char *sq = st->data, *sk = sq + (size_t)(d.t * d.e) * csz, *sv = sk + (size_t)(d.s * d.e) * csz,
         *so = sv + (size_t)(d.s * d.ev) * csz;
    for (int64_t b = 0; b < d.b; b++)
        for (int64_t kh = 0; kh < d.hkv; kh++) {
            int64_t kv = b * d.hkv + kh;
            const void *K = slab(&Ok, kv * d.s, d.s, sk), *V = slab(&Ov, kv * d.s, d.s, sv);
            for (int64_t g = 0; g < d.g; g++) {
                int64_t row = (b * d.h + kh * d.g + g) * d.t; /* the head's first row */
                const void *Q = slab(&Oq, row, d.t, sq);
                void *O = out_slab(&Oo, row, so);
                if (ct == RT_F64)
                    fwd_f64(ctx, Q, K, V, d.t, d.sn, d.e, d.ev, causal, scale, O,
                            L ? (double *)L->data + row : NULL, sc->data, acc->data, ml->data,
                            (double *)ml->data + BR);
                else
                    fwd_f32(ctx, Q, K, V, d.t, d.sn, d.e, d.ev, causal, (float)scale, O,
                            L ? (float *)L->data + row : NULL, sc->data, acc->data, ml->data,
                            (float *)ml->data + BR);
                unstage(&Oo, row, d.t, so);
            }
        }
    rt_free(ctx, sc);
    rt_free(ctx, acc);
    rt_free(ctx, ml);
    rt_free(ctx, st);
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
    bool tq = layout & RT_ATTN_Q, tk = layout & RT_ATTN_K, tv = layout & RT_ATTN_V, to = layout & RT_ATTN_OUT;
    rt_tensor lq = rt_attn_logical(q, tq), lk = rt_attn_logical(k, tk), lv = rt_attn_logical(v, tv),
              lo = rt_attn_logical(out, to), ldo = rt_attn_logical(dout, to);
    rt_attention_check(ctx, &lq, &lk, &lv, &lo, lse, &ldo, kv_len, &d);
    RT_KERNEL(ctx, RT_K_NN, "attention_bwd");
    rt_dtype ct = q->dtype == RT_F64 ? RT_F64 : RT_F32;
    size_t csz = rt_dtype_size(ct);
    rt_tensor *DQ = rt_empty(ctx, q->dtype, q->ndim, q->shape);
    rt_tensor *DK = rt_zeros(ctx, k->dtype, k->ndim, k->shape), *DV = rt_zeros(ctx, v->dtype, v->ndim, v->shape);
    opnd Oq = op_q(q, &d, d.e, tq), Ok = op_kv(k, &d, d.e, tk), Ov = op_kv(v, &d, d.ev, tv),
         Oo = op_q(out, &d, d.ev, to), Odo = op_q(dout, &d, d.ev, to), Odq = op_q(DQ, &d, d.e, tq),
         Odk = op_kv(DK, &d, d.e, tk), Odv = op_kv(DV, &d, d.ev, tv);
    rt_tensor *p = scratch(ctx, ct, BR * BC), *dp = scratch(ctx, ct, BR * BC), *drow = scratch(ctx, ct, d.t);
    /* the staged q, k, v, out, dout; dq, dk, dv summed there */
    rt_tensor *st = scratch(ctx, ct, 2 * d.t * d.e + 3 * d.s * d.e + 3 * d.s * d.ev + 2 * d.t * d.ev);
    char *sq = st->data, *sdq = sq + (size_t)(d.t * d.e) * csz, *sk = sdq + (size_t)(d.t * d.e) * csz,
         *sdk = sk + (size_t)(d.s * d.e) * csz, *sv = sdk + (size_t)(d.s * d.e) * csz,
         *sdv = sv + (size_t)(d.s * d.ev) * csz, *so = sdv + (size_t)(d.s * d.ev) * csz,
         *sdo = so + (size_t)(d.t * d.ev) * csz;
    for (int64_t b = 0; b < d.b; b++)
        for (int64_t kh = 0; kh < d.hkv; kh++) {
            int64_t kv = b * d.hkv + kh;
            const void *K = slab(&Ok, kv * d.s, d.s, sk), *V = slab(&Ov, kv * d.s, d.s, sv);
            void *dK = out_slab(&Odk, kv * d.s, sdk), *dV = out_slab(&Odv, kv * d.s, sdv);
            if (staged(&Odk))
                memset(sdk, 0, csz * (size_t)(d.s * d.e));
            if (staged(&Odv))
                memset(sdv, 0, csz * (size_t)(d.s * d.ev));
            for (int64_t g = 0; g < d.g; g++) {
                int64_t row = (b * d.h + kh * d.g + g) * d.t;
                const void *Q = slab(&Oq, row, d.t, sq), *O = slab(&Oo, row, d.t, so);
                const void *dO = slab(&Odo, row, d.t, sdo);
                const void *Lse = (const char *)lse->data + (size_t)row * csz;
                void *dQ = out_slab(&Odq, row, sdq);
                if (ct == RT_F64)
                    bwd_f64(ctx, Q, K, V, O, Lse, dO, d.t, d.sn, d.e, d.ev, causal, scale, dQ, dK, dV, p->data,
                            dp->data, drow->data);
                else
                    bwd_f32(ctx, Q, K, V, O, Lse, dO, d.t, d.sn, d.e, d.ev, causal, (float)scale, dQ, dK, dV,
                            p->data, dp->data, drow->data);
                unstage(&Odq, row, d.t, sdq);
            }
            unstage(&Odk, kv * d.s, d.s, sdk);
            unstage(&Odv, kv * d.s, d.s, sdv);
        }
    rt_free(ctx, p);
    rt_free(ctx, dp);
    rt_free(ctx, drow);
    rt_free(ctx, st);
    rt_hand_over(ctx, DQ, dq);
    rt_hand_over(ctx, DK, dk);
    rt_hand_over(ctx, DV, dv);
}
