/* The CUDA target's fused attention (rt_attention, rt_attention_bwd; the
 * semantics are spmdrt.h's, the argument checks checks.c's): one thread per
 * query row for the forward and dq, one per key row for dk and dv, each in
 * double and each sum in a fixed order (no atomics: the same bits on every
 * run).  With kv_len only the first d.sn keys of a head are read (the
 * others' dk, dv are 0).  The scores are recomputed where needed, never stored: memory is
 * O(rows x head size).  This is the reference the simulation build runs in
 * CI; it does not use tensor cores (a FlashAttention-2 style tiled kernel
 * is the GPU fast path still to come, measured on a lent GPU). */
#include <math.h>
#include <string.h>

#include "dev.h"

extern "C" {

/* The keys query row i sees: j <= last (causal: aligned bottom-right). */
RT_DEV_INLINE int64_t attn_last(bool causal, int64_t i, int64_t t, int64_t s)
{
    int64_t l = causal ? i + s - t : s - 1;
    return l < s - 1 ? l : s - 1;
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

rt_tensor *rt_attention(rt_ctx *ctx, const rt_tensor *q, const rt_tensor *k, const rt_tensor *v,
                        bool causal, double scale, int64_t kv_len, rt_tensor **lse)
{
    rt_attn_dims d;
    rt_attention_check(ctx, q, k, v, NULL, NULL, NULL, kv_len, &d);
    RT_KERNEL(ctx, RT_K_NN, "attention");
    ctx->tgt->op = "attention";
    rt_tensor *L, *o = rt_attention_outputs(ctx, q, &d, lse != NULL, &L);
    int64_t rows = d.b * d.h * d.t, na = rows * d.ev;
    rt_tensor *acc = rt_empty(ctx, RT_F64, 1, &na);
    const void *Q = q->data, *K = k->data, *V = v->data;
    void *O = o->data, *LS = L ? L->data : NULL;
    double *A = (double *)acc->data;
    rt_dtype dt = q->dtype, lt = L ? L->dtype : RT_F32;
    rt_launch(ctx, rows, [=] RT_HD(int64_t r) {
        int64_t b = r / (d.h * d.t), h = r / d.t % d.h, i = r % d.t, kv = b * d.hkv + h / d.g;
        int64_t last = attn_last(causal, i, d.t, d.sn);
        double m = -INFINITY, l = 0;
        for (int64_t j = 0; j <= last; j++) {
            double sc = attn_score(Q, K, dt, r * d.e, (kv * d.s + j) * d.e, d.e, scale);
            m = sc > m ? sc : m;
        }
        for (int64_t x = 0; x < d.ev; x++)
            A[r * d.ev + x] = 0;
        for (int64_t j = 0; j <= last; j++) {
            double p = exp(attn_score(Q, K, dt, r * d.e, (kv * d.s + j) * d.e, d.e, scale) - m);
            l += p;
            for (int64_t x = 0; x < d.ev; x++)
                A[r * d.ev + x] += p * rt_ld(V, dt, (kv * d.s + j) * d.ev + x);
        }
        for (int64_t x = 0; x < d.ev; x++)
            rt_st(O, dt, r * d.ev + x, l > 0 ? A[r * d.ev + x] / l : 0.0);
        if (LS)
            rt_st(LS, lt, r, l > 0 ? m + log(l) : -INFINITY);
    });
    rt_free(ctx, acc);
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
    ctx->tgt->op = "attention_bwd";
    int64_t rows = d.b * d.h * d.t, krows = d.b * d.hkv * d.s;
    rt_tensor *DQ = rt_empty(ctx, q->dtype, q->ndim, q->shape), *DK = rt_empty(ctx, k->dtype, k->ndim, k->shape),
              *DV = rt_empty(ctx, v->dtype, v->ndim, v->shape);
    rt_tensor *drow = rt_empty(ctx, RT_F64, 1, &rows);
    const void *Q = q->data, *K = k->data, *V = v->data, *O = out->data, *LS = lse->data, *DO = dout->data;
    void *dQ = DQ->data, *dK = DK->data, *dV = DV->data;
    double *D = (double *)drow->data;
    rt_dtype dt = q->dtype, lt = lse->dtype;
    /* D_r = dout_r . out_r */
    rt_launch(ctx, rows, [=] RT_HD(int64_t r) {
        double s = 0;
        for (int64_t x = 0; x < d.ev; x++)
            s += rt_ld(DO, dt, r * d.ev + x) * rt_ld(O, dt, r * d.ev + x);
        D[r] = s;
    });
    /* dq_r = sum_j ds_rj k_j, ds = p (dout_r . v_j - D_r) scale; one
     * element of dq at a time, its sum over j in order */
    rt_launch(ctx, rows * d.e, [=] RT_HD(int64_t t) {
        int64_t r = t / d.e, x = t % d.e;
        int64_t b = r / (d.h * d.t), h = r / d.t % d.h, i = r % d.t, kv = b * d.hkv + h / d.g;
        int64_t last = attn_last(causal, i, d.t, d.sn);
        double lr = rt_ld(LS, lt, r), g = 0;
        for (int64_t j = 0; j <= last && lr != -INFINITY; j++) {
            double p = exp(attn_score(Q, K, dt, r * d.e, (kv * d.s + j) * d.e, d.e, scale) - lr);
            double dp = 0;
            for (int64_t y = 0; y < d.ev; y++)
                dp += rt_ld(DO, dt, r * d.ev + y) * rt_ld(V, dt, (kv * d.s + j) * d.ev + y);
            g += p * (dp - D[r]) * scale * rt_ld(K, dt, (kv * d.s + j) * d.e + x);
        }
        rt_st(dQ, dt, t, g);
    });
    /* dk_j, dv_j: one element of each at a time, over the group's query
     * heads, then their rows, in order */
    int64_t nk = krows * (d.e > d.ev ? d.e : d.ev);
    rt_launch(ctx, nk, [=] RT_HD(int64_t t) {
        int64_t w = d.e > d.ev ? d.e : d.ev, kr = t / w, x = t % w;
        int64_t kv = kr / d.s, j = kr % d.s, b = kv / d.hkv, kh = kv % d.hkv;
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
                double p = exp(attn_score(Q, K, dt, r * d.e, kr * d.e, d.e, scale) - lr);
                if (x < d.ev)
                    gv += p * rt_ld(DO, dt, r * d.ev + x);
                if (x < d.e) {
                    double dp = 0;
                    for (int64_t y = 0; y < d.ev; y++)
                        dp += rt_ld(DO, dt, r * d.ev + y) * rt_ld(V, dt, kr * d.ev + y);
                    gk += p * (dp - D[r]) * scale * rt_ld(Q, dt, r * d.e + x);
                }
            }
        }
        if (x < d.e)
            rt_st(dK, dt, kr * d.e + x, gk);
        if (x < d.ev)
            rt_st(dV, dt, kr * d.ev + x, gv);
    });
    rt_free(ctx, drow);
    rt_hand_over(ctx, DQ, dq);
    rt_hand_over(ctx, DK, dk);
    rt_hand_over(ctx, DV, dv);
}

} /* extern "C" */
