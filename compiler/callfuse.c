/* callfuse.c: gradient sums folded into layer_norm's backward, across calls
 * (issue 26).  After autodiff, an adjoint with two contributions is summed
 * by an IR_ACCUM (a + b).  Where one of them is layer_norm's dx, the
 * runtime adds the other into dx as it stores it (rt_layer_norm_bwd_add:
 * dx = addend + dx, the same bits as the sum: an addition of two numbers
 * rounded to the dtype does not depend on their order), one pass instead of
 * a second one over the sum.  The rule, applied to every function after
 * autodiff:
 *
 *   s = accum(a, d)  (or accum(d, a)), where d is used by nothing else and
 *   is either
 *     - dx of a layer_norm_bwd in the same block (written in one function:
 *       x + f(layer_norm(x))), or
 *     - result j of a call in the same block whose callee returns, as its
 *       j-th result and nowhere else, dx of a layer_norm_bwd of its own
 *       body's top level (a backward of a function such as nn.layer_norm_tp,
 *       whose gradient of x is its layer_norm's dx: the residual block's
 *       x + f(nn.layer_norm_tp(x, ...)));
 *   and a, of d's shape and dtype, is defined before that instruction
 *   (a parameter, or an earlier instruction of the same block):
 *
 *   the layer_norm_bwd takes a as its addend and writes s; in the call's
 *   case a copy of the callee with one more parameter (the addend) is
 *   called instead, the original stays for its other callers.  The copy
 *   keeps the function's name, so --profile's regions and runtime errors'
 *   call chains read as before. */
#include <string.h>

#include "ir.h"
#include "schedule.h"

typedef struct Special {
  IrFn *g, *copy;
  int j;
  struct Special *next;
} Special;

typedef struct CallFuse {
  Compiler *c;
  IrProgram *p;
  Special *specials;
  IrFn *new_fns;
} CallFuse;

static void count_uses(const IrBlock *b, int *uses) {
  for (const IrInst *in = b->head; in; in = in->next) {
    for (int i = 0; i < in->nargs; i++)
      if (in->args[i] >= 0)
        uses[in->args[i]]++;
    count_uses(&in->body, uses);
    count_uses(&in->els, uses);
  }
}

static bool same_tensor_type(const Type *a, const Type *b) {
  return a->kind == TY_TENSOR && b->kind == TY_TENSOR && a->dtype == b->dtype && sched_same_shape(a, b);
}

/* A layer_norm_bwd without an addend whose dx is v, at b's top level. */
static IrInst *ln_bwd_of(const IrBlock *b, int v) {
  for (IrInst *in = b->head; in; in = in->next)
    if (in->op == IR_LAYER_NORM_BWD && in->nargs == 3 && in->ndst > 0 && in->dst[0] == v)
      return in;
  return NULL;
}

/* The layer_norm_bwd whose dx g returns as result j and uses nowhere else;
 * NULL if none. */
static IrInst *returned_ln_bwd(CallFuse *F, IrFn *g, int j) {
  IrInst *ret = g->body.tail;
  if (!ret || ret->op != IR_RETURN || j >= ret->nargs || ret->args[j] < 0)
    return NULL;
  int v = ret->args[j];
  IrInst *ln = ln_bwd_of(&g->body, v);
  if (!ln)
    return NULL;
  int *uses = arena_alloc(&F->c->arena, sizeof(int) * (size_t)(g->nvalues + 1));
  memset(uses, 0, sizeof(int) * (size_t)(g->nvalues + 1));
  count_uses(&g->body, uses);
  return uses[v] == 1 ? ln : NULL;
}

static IrBlock clone_block(Compiler *c, const IrBlock *b) {
  IrBlock out = {0};
  for (const IrInst *in = b->head; in; in = in->next) {
    IrInst *n = ir_clone_inst(c, in);
    n->body = clone_block(c, &in->body);
    n->els = clone_block(c, &in->els);
    if (out.tail)
      out.tail->next = n;
    else
      out.head = n;
    out.tail = n;
  }
  return out;
}

/* g with a last parameter, the addend of the layer_norm_bwd whose dx it
 * returns as result j; made once per (g, j). */
static IrFn *specialise(CallFuse *F, IrFn *g, int j) {
  for (Special *s = F->specials; s; s = s->next)
    if (s->g == g && s->j == j)
      return s->copy;
  Compiler *c = F->c;
  IrFn *m = ir_fn_new(c, arena_sprintf(&c->arena, "%s_add%d", g->cname, j));
  const char *cname = m->cname;
  *m = *g;
  m->cname = cname;
  m->values = arena_alloc(&c->arena, sizeof(IrValue) * (size_t)(g->nvalues + 1));
  memcpy(m->values, g->values, sizeof(IrValue) * (size_t)g->nvalues);
  m->capvalues = g->nvalues + 1;
  if (g->nvars) {
    m->vars = arena_alloc(&c->arena, sizeof(IrVar) * (size_t)g->nvars);
    memcpy(m->vars, g->vars, sizeof(IrVar) * (size_t)g->nvars);
    m->capvars = g->nvars;
  }
  m->is_main = false;
  m->vjp_fwd = m->vjp_bwd = m->exp_fwd = m->exp_bwd = NULL;
  m->exported = false;
  m->exp_mask = NULL;
  m->emitted = false;
  m->next = NULL;
  m->body = clone_block(c, &g->body);
  IrInst *ln = ln_bwd_of(&m->body, m->body.tail->args[j]);
  int addend = ir_value(c, m, m->values[ln->dst[0]].type, NULL);
  m->params = arena_alloc(&c->arena, sizeof(int) * (size_t)(g->nparams + 1));
  memcpy(m->params, g->params, sizeof(int) * (size_t)g->nparams);
  m->params[m->nparams++] = addend;
  int args[4] = {ln->args[0], ln->args[1], ln->args[2], addend};
  ir_set_args(c, ln, 4, args);
  Special *s = arena_alloc(&c->arena, sizeof(Special));
  *s = (Special){g, m, j, F->specials};
  F->specials = s;
  IrFn **tail = &F->new_fns;
  while (*tail)
    tail = &(*tail)->next;
  *tail = m;
  return m;
}

/* Whether a is defined before `at` in b (or is a parameter of f). */
static bool defined_before(const IrFn *f, const IrBlock *b, const IrInst *at, int a) {
  for (int i = 0; i < f->nparams; i++)
    if (f->params[i] == a)
      return true;
  for (const IrInst *in = b->head; in && in != at; in = in->next)
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] == a)
        return true;
  return false;
}

/* The instruction of b before acc that defines v (result *j), or NULL. */
static IrInst *def_in(const IrBlock *b, const IrInst *acc, int v, int *j) {
  for (IrInst *in = b->head; in && in != acc; in = in->next)
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] == v) {
        *j = d;
        return in;
      }
  return NULL;
}

static void fuse_block(CallFuse *F, IrFn *f, IrBlock *b, const int *uses) {
  IrInst *prev = NULL;
  for (IrInst *in = b->head; in;) {
    fuse_block(F, f, &in->body, uses);
    fuse_block(F, f, &in->els, uses);
    bool done = false;
    for (int k = 0; !done && in->op == IR_ACCUM && in->nargs == 2 && k < 2; k++) {
      int d = in->args[k], a = in->args[1 - k], j = 0;
      if (d < 0 || a < 0 || d == a || uses[d] != 1 || !same_tensor_type(f->values[d].type, f->values[a].type) ||
          !same_tensor_type(f->values[d].type, f->values[in->dst[0]].type))
        continue;
      IrInst *def = def_in(b, in, d, &j);
      if (!def || !defined_before(f, b, def, a))
        continue;
      if (def->op == IR_LAYER_NORM_BWD && def->nargs == 3 && j == 0) {
        int args[4] = {def->args[0], def->args[1], def->args[2], a};
        ir_set_args(F->c, def, 4, args);
      } else if (def->op == IR_CALL && def->callee && !IR_I(def, REMAT) && returned_ln_bwd(F, def->callee, j)) {
        def->callee = specialise(F, def->callee, j);
        int *args = arena_alloc(&F->c->arena, sizeof(int) * (size_t)(def->nargs + 1));
        memcpy(args, def->args, sizeof(int) * (size_t)def->nargs);
        args[def->nargs] = a;
        ir_set_args(F->c, def, def->nargs + 1, args);
      } else {
        continue;
      }
      def->dst[j] = in->dst[0]; /* the sum is its result; the accum goes */
      done = true;
    }
    if (done) {
      IrInst *next = in->next;
      if (prev)
        prev->next = next;
      else
        b->head = next;
      if (b->tail == in)
        b->tail = prev;
      in = next;
      continue;
    }
    prev = in;
    in = in->next;
  }
}

void callfuse(Compiler *c, IrProgram *p) {
  CallFuse F = {.c = c, .p = p};
  for (IrFn *f = p->fns; f; f = f->next) {
    int *uses = arena_alloc(&c->arena, sizeof(int) * (size_t)(f->nvalues + 1));
    memset(uses, 0, sizeof(int) * (size_t)(f->nvalues + 1));
    count_uses(&f->body, uses);
    fuse_block(&F, f, &f->body, uses);
  }
  if (!F.new_fns)
    return;
  IrFn **tail = &p->fns;
  while (*tail)
    tail = &(*tail)->next;
  *tail = F.new_fns;
  for (IrFn *f = F.new_fns; f; f = f->next)
    ir_verify(c, f);
}
