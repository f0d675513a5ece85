/* attention_layout.c: the attention op reads and writes the token-major
 * layout where the program permutes to and from it.  The op's type is
 * SPEC's (q [B, H, T, E], k, v [B, Hkv, S, E], the output q's shape with Ev
 * last); projections produce [B, T, H, E] (einsum "btd,dhe->bthe" is one
 * GEMM with no permute) and the output projection reads it, so programs
 * (stdlib's attention_heads, JAX-style code) write
 *   attention(permute(q, [0, 2, 1, 3]), ...) and permute(attention(...), [0, 2, 1, 3]).
 * The runtime's kernels take each of q, k, v and the output in either
 * layout (rt_attention_l: RT_ATTN_* bits, the same bits as the permuted
 * call), so this peephole, run on each lowered function before autodiff:
 *   - an operand permute(X, P) with P moving the token dim 1 next to the
 *     last ([0, 2, 1, 3]; a grouped q [B, T, Hkv, G, E]: [0, 2, 3, 1, 4])
 *     whose result has no other use: attention reads X (its LAYOUT bit);
 *   - an output used only by permute(o, P^-1) ([0, 2, 1, 3]; grouped
 *     [0, 3, 1, 2, 4]): attention writes that permute's result;
 * the permutes are removed.  The attention instruction's values are then
 * the token-major tensors; autodiff's rule gives attention_bwd the same
 * LAYOUT (the gradients have their primals' layouts: dq X's, dout the
 * output's), so the backward has no permute either.  The SPEC typing of
 * the op is untouched: this runs after checking, on the IR. */
#include "ir.h"

/* the perm of a permute taking a token-major operand of rank n to the
 * head-major form (to_heads) or back */
static bool token_perm(IrInst *p, int n, bool to_heads) {
  if (p->op != IR_PERMUTE || n < 4)
    return false;
  for (int i = 0; i < n; i++) {
    int want;
    if (to_heads) /* [0, 2, .., n-2, 1, n-1] */
      want = i == 0 ? 0 : i == n - 1 ? n - 1 : i == n - 2 ? 1 : i + 1;
    else /* [0, n-2, 1, .., n-3, n-1] */
      want = i == 0 ? 0 : i == n - 1 ? n - 1 : i == 1 ? n - 2 : i - 1;
    if (IR_PERM(p, i) != want)
      return false;
  }
  return true;
}

typedef struct {
  IrFn *f;
  int *uses;         /* per value: its uses as an argument */
  IrInst **def;      /* per value: the instruction defining it (NULL: a parameter or none) */
  IrBlock **where;   /* per value: def's block */
} Pass;

static void scan(Pass *P, IrBlock *b) {
  for (IrInst *in = b->head; in; in = in->next) {
    for (int i = 0; i < in->nargs; i++)
      if (in->args[i] >= 0)
        P->uses[in->args[i]]++;
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] >= 0) {
        P->def[in->dst[d]] = in;
        P->where[in->dst[d]] = b;
      }
    scan(P, &in->body);
    scan(P, &in->els);
  }
}

static void unlink_inst(IrBlock *b, IrInst *x) {
  IrInst **pp = &b->head, *prev = NULL;
  while (*pp && *pp != x)
    prev = *pp, pp = &(*pp)->next;
  if (!*pp)
    return;
  *pp = x->next;
  if (b->tail == x)
    b->tail = prev;
}

/* the rank of value v, 0 if not a tensor */
static int rank(IrFn *f, int v) {
  const Type *t = f->values[v].type;
  return t && t->kind == TY_TENSOR ? t->ndim : 0;
}

/* the only instruction using v, if v has one use (in block b) */
static IrInst *sole_user(Pass *P, IrBlock *b, int v) {
  if (P->uses[v] != 1)
    return NULL;
  for (IrInst *in = b->head; in; in = in->next)
    for (int i = 0; i < in->nargs; i++)
      if (in->args[i] == v)
        return in;
  return NULL;
}

static void rewrite(Pass *P, IrBlock *b) {
  for (IrInst *in = b->head; in; in = in->next) {
    rewrite(P, &in->body);
    rewrite(P, &in->els);
    if (in->op != IR_ATTENTION)
      continue;
    long long layout = IR_I(in, LAYOUT);
    for (int i = 0; i < 3; i++) { /* q, k, v */
      int a = in->args[i];
      IrInst *p = a >= 0 ? P->def[a] : NULL;
      if (!p || P->where[a] != b || P->uses[a] != 1 || !token_perm(p, rank(P->f, a), true))
        continue;
      in->args[i] = p->args[0];
      P->uses[a] = 0;
      layout |= 1 << i; /* RT_ATTN_Q, _K, _V */
      unlink_inst(b, p);
    }
    int o = in->dst[0];
    IrInst *p = o >= 0 ? sole_user(P, b, o) : NULL;
    if (p && token_perm(p, rank(P->f, o), false) && p->dst[0] >= 0) {
      in->dst[0] = p->dst[0];
      P->def[p->dst[0]] = in;
      layout |= 8; /* RT_ATTN_OUT */
      unlink_inst(b, p);
    }
    IR_I(in, LAYOUT) = layout;
  }
}

void attention_layouts(Compiler *c, IrProgram *prog) {
  for (IrFn *f = prog->fns; f; f = f->next) {
    Pass P = {f, arena_alloc(&c->arena, sizeof(int) * (size_t)(f->nvalues + 1)),
              arena_alloc(&c->arena, sizeof(IrInst *) * (size_t)(f->nvalues + 1)),
              arena_alloc(&c->arena, sizeof(IrBlock *) * (size_t)(f->nvalues + 1))};
    for (int v = 0; v < f->nvalues; v++)
      P.uses[v] = 0, P.def[v] = NULL, P.where[v] = NULL;
    scan(&P, &f->body);
    rewrite(&P, &f->body);
  }
}
