/* Linear algebra: batched matmul with PyTorch broadcasting and its
 * gradients, and einsum (one or two operands) lowered to permutes, sums and
 * one batched gemm. A weight without batch dims is multiplied with all of
 * the other operand's rows in a single gemm. Every gemm is the target's
 * rt_gemm (on the CPU, gemm.c: OpenBLAS or oneDNN for f32 as chosen for this
 * machine, OpenBLAS for f64, oneDNN for bf16; cuda/gemm.cu: cuBLASLt), so
 * this file is shared by both targets. */
#include <string.h>

#include "rt_graph.h"
#include "rt_internal.h"

/* a view of x with another shape (same data, same numel); never freed */
static rt_tensor view(const rt_tensor *x, int ndim, const int64_t *shape)
{
    rt_tensor v = *x;
    v.ndim = ndim;
    memcpy(v.shape, shape, (size_t)ndim * sizeof *shape);
    return v;
}

/* [..., m, k] (or [..., k, m] when ta) times [..., k, n] (or [..., n, k]) */
static rt_tensor *bmm(rt_ctx *ctx, const rt_tensor *a, bool ta, const rt_tensor *b, bool tb)
{
    rt_check_float(ctx, a, "matmul");
    RT_CHECK(ctx, a->dtype == b->dtype, "matmul: dtypes differ (%s and %s)",
             rt_dtype_name(a->dtype), rt_dtype_name(b->dtype));
    int an = a->ndim, bn = b->ndim;
    int64_t m = a->shape[an - (ta ? 1 : 2)], k = a->shape[an - (ta ? 2 : 1)];
    int64_t kb = b->shape[bn - (tb ? 1 : 2)], n = b->shape[bn - (tb ? 2 : 1)];
    char sa[256], sb[256];
    rt_shape_str(sa, sizeof sa, an, a->shape);
    rt_shape_str(sb, sizeof sb, bn, b->shape);
    RT_CHECK(ctx, k == kb, "matmul: shapes %s and %s do not match (inner sizes %lld, %lld)", sa,
             sb, (long long)k, (long long)kb);
    /* batch dims broadcast like elementwise ops */
    rt_tensor ab = view(a, an - 2, a->shape), bb = view(b, bn - 2, b->shape);
    int nb = ab.ndim > bb.ndim ? ab.ndim : bb.ndim;
    int64_t shape[RT_MAX_DIMS], astr[RT_MAX_DIMS], bstr[RT_MAX_DIMS];
    int64_t sa_ = 1, sb_ = 1;
    for (int d = nb - 1; d >= 0; d--) {
        int da = d - (nb - ab.ndim), db = d - (nb - bb.ndim);
        int64_t x = da >= 0 ? ab.shape[da] : 1, y = db >= 0 ? bb.shape[db] : 1;
        RT_CHECK(ctx, x == y || x == 1 || y == 1, "matmul: batch dims of %s and %s do not broadcast",
                 sa, sb);
        shape[d] = x == 1 ? y : x;
        astr[d] = x == 1 ? 0 : sa_;
        bstr[d] = y == 1 ? 0 : sb_;
        sa_ *= x;
        sb_ *= y;
    }
    shape[nb] = m;
    shape[nb + 1] = n;
    RT_CHECK(ctx, nb + 2 <= RT_MAX_DIMS, "matmul: too many dims");
    rt_tensor *c = rt_empty(ctx, a->dtype, nb + 2, shape);
    int64_t batch = rt_numel_of(nb, shape), esz = (int64_t)rt_dtype_size(a->dtype);
    if (sb_ == 1 && !ta && sa_ == batch) { /* shared weight: one gemm over all rows */
        rt_gemm(ctx, a->dtype, false, tb, batch * m, n, k, a->data, b->data, c->data, 0.0);
        return c;
    }
    /* each operand either walks its batch dims in order or is the same for
     * every entry: one strided batch (one library call on a GPU) */
    bool a_all = true, a_none = true, b_all = true, b_none = true;
    int64_t run = 1;
    for (int d = nb - 1; d >= 0; d--) {
        a_all &= shape[d] == 1 || astr[d] == run;
        a_none &= shape[d] == 1 || astr[d] == 0;
        b_all &= shape[d] == 1 || bstr[d] == run;
        b_none &= shape[d] == 1 || bstr[d] == 0;
        run *= shape[d];
    }
    if ((a_all || a_none) && (b_all || b_none)) {
        rt_gemm_strided(ctx, a->dtype, ta, tb, m, n, k, a->data, a_all ? m * k : 0, b->data,
                        b_all ? k * n : 0, c->data, m * n, batch);
        return c;
    }
    int64_t idx[RT_MAX_DIMS] = {0}, oa = 0, ob = 0;
    for (int64_t i = 0; i < batch; i++) {
        rt_gemm(ctx, a->dtype, ta, tb, m, n, k, (const char *)a->data + oa * m * k * esz,
                (const char *)b->data + ob * k * n * esz, (char *)c->data + i * m * n * esz, 0.0);
        for (int d = nb - 1; d >= 0; d--) {
            oa += astr[d];
            ob += bstr[d];
            if (++idx[d] < shape[d])
                break;
            oa -= astr[d] * shape[d];
            ob -= bstr[d] * shape[d];
            idx[d] = 0;
        }
    }
    return c;
}

/* 1-D operands as matrices: a [k] -> [1, k], b [k] -> [k, 1] */
static rt_tensor as_matrix(const rt_tensor *x, bool left)
{
    if (x->ndim != 1)
        return *x;
    int64_t s[2] = {left ? 1 : x->shape[0], left ? x->shape[0] : 1};
    return view(x, 2, s);
}

/* drops the size-1 dims that 1-D operands added */
static void squeeze_result(rt_tensor *y, bool drop_m, bool drop_n)
{
    int nd = y->ndim; /* [..., m, n] */
    if (drop_m && !drop_n)
        y->shape[nd - 2] = y->shape[nd - 1];
    y->ndim -= (int)drop_m + (int)drop_n;
}

rt_tensor *rt_matmul(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b)
{
    RT_CHECK(ctx, a->ndim >= 1 && b->ndim >= 1, "matmul: operands must have at least 1 dim");
    RT_KERNEL(ctx, RT_K_MATMUL, "matmul");
    rt_tensor av = as_matrix(a, true), bv = as_matrix(b, false);
    rt_tensor *y = bmm(ctx, &av, false, &bv, false);
    squeeze_result(y, a->ndim == 1, b->ndim == 1);
    return y;
}

/* the result's gradient with the 1-D operands' dims put back */
static rt_tensor dy_as_matrix(const rt_tensor *dy, bool a1, bool b1)
{
    int64_t s[RT_MAX_DIMS];
    int n = 0;
    memcpy(s, dy->shape, (size_t)dy->ndim * sizeof *s);
    n = dy->ndim;
    if (a1) {
        int at = b1 ? n : n - 1;
        memmove(s + at + 1, s + at, (size_t)(n - at) * sizeof *s);
        s[at] = 1;
        n++;
    }
    if (b1)
        s[n++] = 1;
    return view(dy, n, s);
}

static rt_tensor *reduce_to(rt_ctx *ctx, rt_tensor *g, const rt_tensor *like, const rt_tensor *orig)
{
    rt_tensor *r = rt_sum_to_shape(ctx, g, like->ndim, like->shape);
    rt_free(ctx, g);
    r->ndim = orig->ndim; /* same numel: restore a 1-D operand's shape */
    memcpy(r->shape, orig->shape, sizeof r->shape);
    return r;
}

void rt_matmul_bwd(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, const rt_tensor *dy,
                   rt_tensor **da, rt_tensor **db)
{
    RT_KERNEL(ctx, RT_K_MATMUL, "matmul_bwd");
    rt_tensor av = as_matrix(a, true), bv = as_matrix(b, false);
    rt_tensor g = dy_as_matrix(dy, a->ndim == 1, b->ndim == 1);
    if (da)
        *da = reduce_to(ctx, bmm(ctx, &g, false, &bv, true), &av, a);
    if (db && bv.ndim == 2 && g.ndim >= 2 && av.ndim == g.ndim) { /* weight: one gemm */
        int64_t rows = g.numel / g.shape[g.ndim - 1], k = bv.shape[0], n = bv.shape[1];
        rt_tensor *r = rt_empty(ctx, b->dtype, 2, bv.shape);
        rt_gemm(ctx, b->dtype, true, false, k, n, rows, av.data, g.data, r->data, 0.0);
        r->ndim = b->ndim;
        memcpy(r->shape, b->shape, sizeof r->shape);
        *db = r;
    } else if (db) {
        *db = reduce_to(ctx, bmm(ctx, &av, true, &g, false), &bv, b);
    }
}

/* a [..., k] @ b [k, n...] + bias's backward (spmdrt.h): b and dy seen as
 * [k, N] and [rows, N]; da's GEMM is rt_matmul_bwd's (one over all rows),
 * db's carries dbias where the target's GEMM has the epilogue
 * (rt_gemm_bgrad).  acc (rt_matmul_bwd_bias_acc): da is added to it. */
static rt_tensor *matmul_bwd_bias(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, const rt_tensor *dy,
                                  rt_tensor *acc, rt_tensor **da, rt_tensor **db, rt_tensor **dbias)
{
    rt_check_float(ctx, a, "matmul");
    int lead = a->ndim - 1, nn = b->ndim - 1;
    RT_CHECK(ctx, a->ndim >= 2 && b->ndim >= 2 && a->dtype == b->dtype && dy->dtype == a->dtype &&
                      dy->ndim == lead + nn && a->shape[lead] == b->shape[0],
             "matmul_bwd_bias: needs [..., k], [k, n...] and [..., n...] of one dtype");
    for (int d = 0; d < dy->ndim; d++)
        RT_CHECK(ctx, dy->shape[d] == (d < lead ? a->shape[d] : b->shape[1 + d - lead]),
                 "matmul_bwd_bias: gradient shape differs from the result");
    int64_t k = b->shape[0], n = rt_numel_of(nn, b->shape + 1), rows = rt_numel_of(lead, a->shape);
    int64_t bs[2] = {k, n}, gs[2] = {rows, n}, as[2] = {rows, k};
    rt_tensor bv = view(b, 2, bs), g = view(dy, 2, gs), av = view(a, 2, as);
    rt_tensor *sum = NULL;
    if (acc) {
        RT_CHECK(ctx, acc->dtype == a->dtype && acc->ndim == a->ndim &&
                          memcmp(acc->shape, a->shape, sizeof(int64_t) * (size_t)a->ndim) == 0,
                 "matmul_bwd_bias_acc: the accumulator must have a's dtype and shape");
        /* the target's GEMM adds to C (beta 1: the f32 result added to C,
         * rounded once), into acc's buffer where the caller's reference is
         * its only one, else into a copy: the same bits either way */
        sum = rt_writable(acc) || rt_graph_capture_writable(ctx, acc) ? rt_retain(acc) : rt_copy(ctx, acc);
        if (!rt_gemm_acc(ctx, a->dtype, rows, k, n, g.data, bv.data, sum->data)) {
            /* elsewhere (the CPU: OpenBLAS's beta 1 adds k-block by
             * k-block) the GEMM, then the add: the same sum */
            rt_free(ctx, sum);
            rt_tensor *r = bmm(ctx, &g, false, &bv, true);
            r->ndim = a->ndim;
            memcpy(r->shape, a->shape, sizeof r->shape);
            sum = rt_binary(ctx, RT_ADD, acc, r);
            rt_free(ctx, r);
        }
        rt_free(ctx, acc);
    } else if (da) {
        rt_tensor *r = bmm(ctx, &g, false, &bv, true); /* [rows, k] */
        r->ndim = a->ndim;
        memcpy(r->shape, a->shape, sizeof r->shape);
        *da = r;
    }
    rt_tensor *bias = NULL;
    if (db) {
        rt_tensor *r = rt_empty(ctx, b->dtype, b->ndim, b->shape);
        if (dbias)
            bias = rt_empty(ctx, b->dtype, nn, b->shape + 1);
        if (!bias || k == 0 || n == 0 || rows == 0 ||
            !rt_gemm_bgrad(ctx, b->dtype, k, n, rows, av.data, g.data, r->data, bias->data)) {
            rt_free(ctx, bias);
            bias = NULL;
            rt_gemm(ctx, b->dtype, true, false, k, n, rows, av.data, g.data, r->data, 0.0);
        }
        *db = r;
    }
    if (dbias)
        *dbias = bias ? bias : rt_sum_to_shape(ctx, dy, nn, b->shape + 1);
    return sum;
}

void rt_matmul_bwd_bias(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, const rt_tensor *dy,
                        rt_tensor **da, rt_tensor **db, rt_tensor **dbias)
{
    RT_KERNEL(ctx, RT_K_MATMUL, "matmul_bwd_bias");
    (void)matmul_bwd_bias(ctx, a, b, dy, NULL, da, db, dbias);
}

rt_tensor *rt_matmul_bwd_bias_acc(rt_ctx *ctx, const rt_tensor *a, const rt_tensor *b, const rt_tensor *dy,
                                  rt_tensor *acc, rt_tensor **db, rt_tensor **dbias)
{
    RT_KERNEL(ctx, RT_K_MATMUL, "matmul_bwd_bias_acc");
    RT_CHECK(ctx, acc != NULL, "matmul_bwd_bias_acc: no accumulator");
    return matmul_bwd_bias(ctx, a, b, dy, acc, NULL, db, dbias);
}

/* ---- einsum */

typedef struct eqn {
    int n;
    char in[2][RT_MAX_DIMS + 1];
    char out[RT_MAX_DIMS + 1];
} eqn;

static bool has(const char *s, char c)
{
    return c && strchr(s, c) != NULL;
}

static void parse_labels(rt_ctx *ctx, const char *eq, const char *p, size_t len, char *dst)
{
    RT_CHECK(ctx, len <= RT_MAX_DIMS, "einsum '%s': too many labels", eq);
    for (size_t i = 0; i < len; i++) {
        char c = p[i];
        RT_CHECK(ctx, (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'),
                 "einsum '%s': bad label '%c' (letters only)", eq, c);
        RT_CHECK(ctx, !memchr(p, c, i), "einsum '%s': label '%c' repeated in one operand", eq, c);
        dst[i] = c;
    }
    dst[len] = 0;
}

static eqn parse_eq(rt_ctx *ctx, const char *eq, int n)
{
    char s[128];
    size_t k = 0;
    for (const char *p = eq; *p && k + 1 < sizeof s; p++)
        if (*p != ' ')
            s[k++] = *p;
    s[k] = 0;
    eqn e = {.n = 0};
    char *arrow = strstr(s, "->");
    size_t lhs = arrow ? (size_t)(arrow - s) : strlen(s);
    const char *p = s;
    while (p <= s + lhs) {
        size_t len = strcspn(p, ",-");
        if (p + len > s + lhs)
            len = (size_t)(s + lhs - p);
        RT_CHECK(ctx, e.n < 2, "einsum '%s': at most two operands are supported", eq);
        parse_labels(ctx, eq, p, len, e.in[e.n++]);
        p += len + 1;
    }
    RT_CHECK(ctx, e.n == n, "einsum '%s': %d operands in the equation, %d given", eq, e.n, n);
    if (arrow) {
        parse_labels(ctx, eq, arrow + 2, strlen(arrow + 2), e.out);
    } else { /* implicit: labels used once, alphabetical */
        int m = 0;
        for (char c = 'A'; c <= 'z'; c++)
            if ((has(e.in[0], c) + (n > 1 && has(e.in[1], c))) == 1)
                e.out[m++] = c;
        e.out[m] = 0;
    }
    for (const char *o = e.out; *o; o++)
        RT_CHECK(ctx, has(e.in[0], *o) || (n > 1 && has(e.in[1], *o)),
                 "einsum '%s': output label '%c' is in no operand", eq, *o);
    return e;
}

/* sums x over its labels not in keep; updates labels */
static rt_tensor *sum_labels(rt_ctx *ctx, const rt_tensor *x, char *labels, const char *keep1,
                             const char *keep2)
{
    rt_tensor *cur = rt_retain((rt_tensor *)x);
    for (int d = (int)strlen(labels) - 1; d >= 0; d--) {
        if (has(keep1, labels[d]) || has(keep2, labels[d]))
            continue;
        rt_tensor *s = rt_sum(ctx, cur, d, false);
        rt_free(ctx, cur);
        cur = s;
        memmove(labels + d, labels + d + 1, strlen(labels + d));
    }
    return cur;
}

/* permutes x (labels from) into the label order to */
static rt_tensor *permute_labels(rt_ctx *ctx, const rt_tensor *x, const char *from, const char *to)
{
    int perm[RT_MAX_DIMS], n = (int)strlen(to);
    bool identity = true;
    for (int i = 0; i < n; i++) {
        perm[i] = (int)(strchr(from, to[i]) - from);
        identity = identity && perm[i] == i;
    }
    return identity ? rt_retain((rt_tensor *)x) : rt_permute(ctx, x, perm);
}

static int64_t label_size(const rt_tensor *x, const char *labels, char c)
{
    return x->shape[strchr(labels, c) - labels];
}

static rt_tensor *einsum2(rt_ctx *ctx, const char *eq, const eqn *e, const rt_tensor *a,
                          const rt_tensor *b)
{
    char la[RT_MAX_DIMS + 1], lb[RT_MAX_DIMS + 1];
    strcpy(la, e->in[0]);
    strcpy(lb, e->in[1]);
    /* the operands summed and permuted for the GEMM are the kernel's scratch,
     * not counted as tensors (docs/memory.md: --memory-report cannot see them) */
    ctx->mem_off++;
    rt_tensor *A = sum_labels(ctx, a, la, e->out, lb), *B = sum_labels(ctx, b, lb, e->out, la);
    char batch[RT_MAX_DIMS + 1] = "", fa[RT_MAX_DIMS + 1] = "", fb[RT_MAX_DIMS + 1] = "",
         con[RT_MAX_DIMS + 1] = "";
    int nbt = 0, nfa = 0, nfb = 0, ncon = 0;
    int64_t bt = 1, M = 1, N = 1, K = 1, shape[RT_MAX_DIMS];
    for (const char *o = e->out; *o; o++) {
        if (has(la, *o) && has(lb, *o))
            batch[nbt++] = *o;
        else if (has(la, *o))
            fa[nfa++] = *o;
        else
            fb[nfb++] = *o;
    }
    for (const char *c = la; *c; c++)
        if (has(lb, *c) && !has(e->out, *c))
            con[ncon++] = *c;
    for (const char *c = la; *c; c++)
        RT_CHECK(ctx, !has(lb, *c) || label_size(A, la, *c) == label_size(B, lb, *c),
                 "einsum '%s': label '%c' has size %lld and %lld", eq, *c,
                 (long long)label_size(A, la, *c), (long long)label_size(B, lb, *c));
    char pa[3 * RT_MAX_DIMS + 1], pb[3 * RT_MAX_DIMS + 1]; /* batch, free and contracted labels */
    snprintf(pa, sizeof pa, "%s%s%s", batch, fa, con);
    snprintf(pb, sizeof pb, "%s%s%s", batch, con, fb);
    int nd = 0;
    for (int i = 0; i < nbt; i++) bt *= shape[nd++] = label_size(A, la, batch[i]);
    for (int i = 0; i < nfa; i++) M *= shape[nd++] = label_size(A, la, fa[i]);
    for (int i = 0; i < nfb; i++) N *= shape[nd++] = label_size(B, lb, fb[i]);
    for (int i = 0; i < ncon; i++) K *= label_size(A, la, con[i]);
    /* an operand whose labels are its GEMM order's two blocks swapped
     * (batch, contracted, free for a: "dbt" read as [bt, d]^T) is read
     * transposed by the GEMM instead of permuted; a result wanted as
     * batch, fb, fa is computed as B^T A^T */
    char ta_l[3 * RT_MAX_DIMS + 1], tb_l[3 * RT_MAX_DIMS + 1], sw[3 * RT_MAX_DIMS + 1];
    snprintf(ta_l, sizeof ta_l, "%s%s%s", batch, con, fa);
    snprintf(tb_l, sizeof tb_l, "%s%s%s", batch, fb, con);
    snprintf(sw, sizeof sw, "%s%s%s", batch, fb, fa);
    bool ta = strcmp(la, pa) != 0 && strcmp(la, ta_l) == 0, tb = strcmp(lb, pb) != 0 && strcmp(lb, tb_l) == 0;
    bool swap = nfa && nfb && strcmp(e->out, sw) == 0;
    rt_tensor *PA = ta ? rt_retain(A) : permute_labels(ctx, A, la, pa);
    rt_tensor *PB = tb ? rt_retain(B) : permute_labels(ctx, B, lb, pb);
    ctx->mem_off--;
    rt_tensor A3 = view(PA, 3, ta ? (int64_t[]){bt, K, M} : (int64_t[]){bt, M, K});
    rt_tensor B3 = view(PB, 3, tb ? (int64_t[]){bt, N, K} : (int64_t[]){bt, K, N});
    char lc[3 * RT_MAX_DIMS + 1];
    if (swap) { /* [bt, N, M]: [batch..., fb..., fa...] */
        int nb0 = nbt;
        for (int i = 0; i < nfb; i++)
            shape[nb0 + i] = label_size(B, lb, fb[i]);
        for (int i = 0; i < nfa; i++)
            shape[nb0 + nfb + i] = label_size(A, la, fa[i]);
        snprintf(lc, sizeof lc, "%s", sw);
    } else {
        snprintf(lc, sizeof lc, "%s%s%s", batch, fa, fb);
    }
    bool scratch = strcmp(lc, e->out) != 0; /* the GEMM's result permuted: scratch too */
    ctx->mem_off += scratch;
    rt_tensor *C = swap ? bmm(ctx, &B3, !tb, &A3, !ta) : bmm(ctx, &A3, ta, &B3, tb);
    ctx->mem_off -= scratch;
    C->ndim = nd; /* [bt, M, N] seen as [batch..., fa..., fb...] */
    memcpy(C->shape, shape, (size_t)nd * sizeof *shape);
    rt_tensor *y = permute_labels(ctx, C, lc, e->out);
    rt_free(ctx, A); rt_free(ctx, B); rt_free(ctx, PA); rt_free(ctx, PB); rt_free(ctx, C);
    return y;
}

rt_tensor *rt_einsum(rt_ctx *ctx, const char *eq, int n, const rt_tensor *const *xs)
{
    RT_KERNEL(ctx, RT_K_MATMUL, "einsum");
    eqn e = parse_eq(ctx, eq, n);
    for (int i = 0; i < n; i++)
        RT_CHECK(ctx, (int)strlen(e.in[i]) == xs[i]->ndim,
                 "einsum '%s': operand %d has %d dims, the equation gives %d labels", eq, i,
                 xs[i]->ndim, (int)strlen(e.in[i]));
    rt_tensor *y;
    if (n == 1) {
        char l[RT_MAX_DIMS + 1];
        strcpy(l, e.in[0]);
        rt_tensor *s = sum_labels(ctx, xs[0], l, e.out, "");
        y = permute_labels(ctx, s, l, e.out);
        rt_free(ctx, s);
        if (y == xs[0]) { /* a fresh tensor, never the argument itself */
            rt_free(ctx, y);
            y = rt_copy(ctx, xs[0]);
        }
    } else {
        y = einsum2(ctx, eq, &e, xs[0], xs[1]);
    }
    return y;
}

/* gradient of operand i: einsum(dy, other -> labels it shares), then broadcast
 * over the labels it summed away alone */
static rt_tensor *einsum_grad(rt_ctx *ctx, const eqn *e, int i, const rt_tensor *const *xs,
                              const rt_tensor *dy)
{
    const char *li = e->in[i], *lo = e->n == 2 ? e->in[1 - i] : "";
    char kept[RT_MAX_DIMS + 1], eq[64];
    int nk = 0;
    int64_t shape[RT_MAX_DIMS];
    for (const char *c = li; *c; c++) {
        shape[c - li] = has(e->out, *c) || has(lo, *c) ? xs[i]->shape[c - li] : 1;
        if (has(e->out, *c) || has(lo, *c))
            kept[nk++] = *c;
    }
    kept[nk] = 0;
    rt_tensor *g;
    if (e->n == 2) {
        snprintf(eq, sizeof eq, "%s,%s->%s", e->out, lo, kept);
        g = rt_einsum(ctx, eq, 2, (const rt_tensor *[]){dy, xs[1 - i]});
    } else {
        snprintf(eq, sizeof eq, "%s->%s", e->out, kept);
        g = rt_einsum(ctx, eq, 1, (const rt_tensor *[]){dy});
    }
    if (nk == xs[i]->ndim)
        return g;
    rt_tensor gv = view(g, xs[i]->ndim, shape);
    rt_tensor *r = rt_expand(ctx, &gv, xs[i]->ndim, xs[i]->shape);
    rt_free(ctx, g);
    return r;
}

void rt_einsum_bwd(rt_ctx *ctx, const char *eq, int n, const rt_tensor *const *xs,
                   const rt_tensor *dy, rt_tensor **dxs)
{
    RT_KERNEL(ctx, RT_K_MATMUL, "einsum_bwd");
    eqn e = parse_eq(ctx, eq, n);
    for (int i = 0; i < n; i++)
        dxs[i] = einsum_grad(ctx, &e, i, xs, dy);
}
