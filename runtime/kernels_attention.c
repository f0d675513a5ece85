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

/* A slab of n elements at element offset off of x, as the compute type:
 * x's own memory (f32, f64), or staged into buf (bf16 -> f32). */
static const void *slab(const rt_tensor *x, int64_t off, int64_t n, float *buf)
{
    if (x->dtype != RT_BF16)
        return (const char *)x->data + (size_t)off * rt_dtype_size(x->dtype);
    rt_bf16_to_f32_n(buf, (const uint16_t *)x->data + off, n);
    return buf;
}

/* the compute type's slab of x to write (bf16: buf, stored by unstage) */
static void *out_slab(rt_tensor *x, int64_t off, float *buf)
{
    return x->dtype == RT_BF16 ? (void *)buf : (char *)x->data + (size_t)off * rt_dtype_size(x->dtype);
}

static void unstage(rt_tensor *x, int64_t off, int64_t n, const float *buf)
{
    if (x->dtype == RT_BF16)
        rt_bf16_from_f32_n((uint16_t *)x->data + off, buf, n);
}

static rt_tensor *scratch(rt_ctx *ctx, rt_dtype ct, int64_t n) { return rt_scratch_tensor(ctx, ct, n ? n : 1); }

rt_tensor *rt_attention(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                        bool causal, double scale, int64_t kv_len, rt_tensor **lse)
{
    rt_attn_dims d;
    rt_attention_check(ctx, q, k, v, NULL, NULL, NULL, kv_len, &d);
    RT_KERNEL(ctx, RT_K_NN, "attention");
    rt_tensor *L, *o = rt_attention_outputs(ctx, q, &d, lse != NULL, &L);
    rt_dtype ct = q->dtype == RT_F64 ? RT_F64 : RT_F32;
    bool bf = q->dtype == RT_BF16;
    /* scratch: a score tile, the output rows of a query tile, the running
     * max and sum; for bf16 the staged q, k, v and output slabs */
    rt_tensor *sc = scratch(ctx, ct, BR * BC), *acc = scratch(ctx, ct, BR * d.ev), *ml = scratch(ctx, ct, 2 * BR);
    rt_tensor *st = bf ? scratch(ctx, RT_F32, d.t * d.e + d.s * d.e + d.s * d.ev + d.t * d.ev) : NULL;
    float *sq = st ? (float *)st->data : NULL, *sk = sq ? sq + d.t * d.e : NULL, *sv = sk ? sk + d.s * d.e : NULL,
          *so = sv ? sv + d.s * d.ev : NULL;
    for (int64_t b = 0; b < d.b; b++)
        for (int64_t kh = 0; kh < d.hkv; kh++) {
            int64_t kv = b * d.hkv + kh;
            const void *K = slab(k, kv * d.s * d.e, d.s * d.e, sk), *V = slab(v, kv * d.s * d.ev, d.s * d.ev, sv);
            for (int64_t g = 0; g < d.g; g++) {
                int64_t row = (b * d.h + kh * d.g + g) * d.t; /* the head's first row */
                const void *Q = slab(q, row * d.e, d.t * d.e, sq);
                void *O = out_slab(o, row * d.ev, so);
                if (ct == RT_F64)
                    fwd_f64(ctx, Q, K, V, d.t, d.sn, d.e, d.ev, causal, scale, O,
                            L ? (double *)L->data + row : NULL, sc->data, acc->data, ml->data,
                            (double *)ml->data + BR);
                else
                    fwd_f32(ctx, Q, K, V, d.t, d.sn, d.e, d.ev, causal, (float)scale, O,
                            L ? (float *)L->data + row : NULL, sc->data, acc->data, ml->data,
                            (float *)ml->data + BR);
                unstage(o, row * d.ev, d.t * d.ev, so);
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
    rt_attn_dims d;
    rt_attention_check(ctx, q, k, v, out, lse, dout, kv_len, &d);
    RT_KERNEL(ctx, RT_K_NN, "attention_bwd");
    rt_dtype ct = q->dtype == RT_F64 ? RT_F64 : RT_F32;
    bool bf = q->dtype == RT_BF16;
    size_t csz = rt_dtype_size(ct);
    rt_tensor *DQ = rt_empty(ctx, q->dtype, q->ndim, q->shape);
    rt_tensor *DK = rt_zeros(ctx, k->dtype, k->ndim, k->shape), *DV = rt_zeros(ctx, v->dtype, v->ndim, v->shape);
    rt_tensor *p = scratch(ctx, ct, BR * BC), *dp = scratch(ctx, ct, BR * BC), *drow = scratch(ctx, ct, d.t);
    /* bf16: q, k, v, out, dout staged, dq, dk, dv summed in f32 */
    rt_tensor *st = bf ? scratch(ctx, RT_F32, 2 * d.t * d.e + 3 * d.s * d.e + 3 * d.s * d.ev + 2 * d.t * d.ev) : NULL;
    float *sq = st ? (float *)st->data : NULL, *sdq = sq ? sq + d.t * d.e : NULL, *sk = sdq ? sdq + d.t * d.e : NULL,
          *sdk = sk ? sk + d.s * d.e : NULL, *sv = sdk ? sdk + d.s * d.e : NULL, *sdv = sv ? sv + d.s * d.ev : NULL,
          *so = sdv ? sdv + d.s * d.ev : NULL, *sdo = so ? so + d.t * d.ev : NULL;
    for (int64_t b = 0; b < d.b; b++)
        for (int64_t kh = 0; kh < d.hkv; kh++) {
            int64_t kv = b * d.hkv + kh;
            const void *K = slab(k, kv * d.s * d.e, d.s * d.e, sk), *V = slab(v, kv * d.s * d.ev, d.s * d.ev, sv);
            void *dK = out_slab(DK, kv * d.s * d.e, sdk), *dV = out_slab(DV, kv * d.s * d.ev, sdv);
            if (bf) {
                memset(sdk, 0, sizeof(float) * (size_t)(d.s * d.e));
                memset(sdv, 0, sizeof(float) * (size_t)(d.s * d.ev));
            }
            for (int64_t g = 0; g < d.g; g++) {
                int64_t row = (b * d.h + kh * d.g + g) * d.t;
                const void *Q = slab(q, row * d.e, d.t * d.e, sq), *O = slab(out, row * d.ev, d.t * d.ev, so);
                const void *dO = slab(dout, row * d.ev, d.t * d.ev, sdo);
                const void *Lse = (const char *)lse->data + (size_t)row * csz;
                void *dQ = out_slab(DQ, row * d.e, sdq);
                if (ct == RT_F64)
                    bwd_f64(ctx, Q, K, V, O, Lse, dO, d.t, d.sn, d.e, d.ev, causal, scale, dQ, dK, dV, p->data,
                            dp->data, drow->data);
                else
                    bwd_f32(ctx, Q, K, V, O, Lse, dO, d.t, d.sn, d.e, d.ev, causal, (float)scale, dQ, dK, dV,
                            p->data, dp->data, drow->data);
                unstage(DQ, row * d.e, d.t * d.e, sdq);
            }
            unstage(DK, kv * d.s * d.e, d.s * d.e, sdk);
            unstage(DV, kv * d.s * d.ev, d.s * d.ev, sdv);
        }
    rt_free(ctx, p);
    rt_free(ctx, dp);
    rt_free(ctx, drow);
    rt_free(ctx, st);
    rt_hand_over(ctx, DQ, dq);
    rt_hand_over(ctx, DK, dk);
    rt_hand_over(ctx, DV, dv);
}
