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

/* a copy of g named cname, its body cloned, room for two more values and
 * one more parameter; not main, exported or emitted */
static IrFn *copy_fn(Compiler *c, IrFn *g, const char *cname) {
  IrFn *m = ir_fn_new(c, cname);
  *m = *g;
  m->cname = cname;
  m->values = arena_alloc(&c->arena, sizeof(IrValue) * (size_t)(g->nvalues + 2));
  memcpy(m->values, g->values, sizeof(IrValue) * (size_t)g->nvalues);
  m->capvalues = g->nvalues + 2;
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
  m->params = arena_alloc(&c->arena, sizeof(int) * (size_t)(g->nparams + 1));
  memcpy(m->params, g->params, sizeof(int) * (size_t)g->nparams);
  return m;
}

/* g with a last parameter, the addend of the layer_norm_bwd whose dx it
 * returns as result j; made once per (g, j). */
static IrFn *specialise(CallFuse *F, IrFn *g, int j) {
  for (Special *s = F->specials; s; s = s->next)
    if (s->g == g && s->j == j)
      return s->copy;
  Compiler *c = F->c;
  IrFn *m = copy_fn(c, g, arena_sprintf(&c->arena, "%s_add%d", g->cname, j));
  IrInst *ln = ln_bwd_of(&m->body, m->body.tail->args[j]);
  int addend = ir_value(c, m, m->values[ln->dst[0]].type, NULL);
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
      ir_unlink(b, prev, in);
      in = next;
      continue;
    }
    prev = in;
    in = in->next;
  }
}

/* ---- the forward: a residual's add into its callee's last add ----
 *
 * Before autodiff.  (1) dropout(x, seed, p) is x where p is the constant
 * 0.0 (a literal of the function, or a parameter that every call passes
 * 0.0 into: a training program's DROPOUT = 0.0 through loss, block and
 * nn.dropout_add); the runtime's dropout shares x then, no launch either
 * way.  (2) A call of a function whose body is one binary op of its
 * parameters (nn.dropout_add without its dropout) is that op.  (3)
 * z = op(x, y) (or op(y, x)), y result j of a call in the same block used
 * by nothing else, x a parameter or defined before the call, x, y and z of
 * one shape and dtype: the callee returns op(x', t) instead of t, where t
 * is its j-th result, made by a binary op of its top level and used
 * nowhere else (or, the same rule again, result k of a call of its own);
 * a copy of the callee with x' its last parameter, the original kept.
 * The copy computes what the caller did, in the same order (the same
 * bits), where the fused loop of its own last op takes it: the flagship's
 * x + (reduce_scatter(y) + b), one loop instead of two launches. */

typedef struct FwdSpecial {
  IrFn *g, *copy;
  int j;
  IrBinary op;
  bool left;
  struct FwdSpecial *next;
} FwdSpecial;

typedef struct CallSite {
  IrFn *caller;
  IrInst *in;
  struct CallSite *next;
} CallSite;

typedef struct Fwd {
  Compiler *c;
  IrProgram *p;
  CallSite **sites; /* per fn (by ordinal): its calls */
  IrFn **fns;
  int nfns;
  IrInst ***defs;   /* per fn: per value, its instruction */
  char **visiting;  /* per fn: per param, on the stack of param_zero */
  FwdSpecial *specials;
  IrFn *new_fns;
} Fwd;

static int fn_index(Fwd *F, const IrFn *f) {
  for (int i = 0; i < F->nfns; i++)
    if (F->fns[i] == f)
      return i;
  return -1;
}

static void collect(Fwd *F, IrFn *f, IrBlock *b, IrInst **defs) {
  for (IrInst *in = b->head; in; in = in->next) {
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] >= 0)
        defs[in->dst[d]] = in;
    if ((in->op == IR_CALL || in->op == IR_VJP_CALL) && in->callee) {
      int k = fn_index(F, in->callee);
      if (k >= 0) {
        CallSite *s = arena_alloc(&F->c->arena, sizeof(CallSite));
        *s = (CallSite){f, in, F->sites[k]};
        F->sites[k] = s;
      }
    }
    collect(F, f, &in->body, defs);
    collect(F, f, &in->els, defs);
  }
}

static bool param_zero(Fwd *F, int fi, int i);

/* Whether host value v of fns[fi] is the constant 0 wherever it runs. */
static bool value_zero(Fwd *F, int fi, int v) {
  IrFn *f = F->fns[fi];
  if (v < 0 || v >= f->nvalues)
    return false;
  IrInst *d = F->defs[fi][v];
  if (d)
    return d->op == IR_HOST_CONST && f->values[v].type->kind == TY_FLOAT && d->f == 0;
  for (int i = 0; i < f->nparams; i++)
    if (f->params[i] == v)
      return param_zero(F, fi, i);
  return false;
}

/* Whether every call of fns[fi] passes 0 as parameter i (main and export
 * fns are called from outside: never). */
static bool param_zero(Fwd *F, int fi, int i) {
  IrFn *f = F->fns[fi];
  if (f->is_main || (f->fn && (f->fn->flags & FN_EXPORT)) || !F->sites[fi] || F->visiting[fi][i])
    return false;
  F->visiting[fi][i] = 1;
  bool zero = true;
  for (CallSite *s = F->sites[fi]; zero && s; s = s->next)
    zero = i < s->in->nargs && value_zero(F, fn_index(F, s->caller), s->in->args[i]);
  F->visiting[fi][i] = 0;
  return zero;
}

static void replace_uses(IrBlock *b, int from, int to) {
  for (IrInst *in = b->head; in; in = in->next) {
    for (int i = 0; i < in->nargs; i++)
      if (in->args[i] == from)
        in->args[i] = to;
    replace_uses(&in->body, from, to);
    replace_uses(&in->els, from, to);
  }
}

/* (1): dropouts with p = 0 of fns[fi] (in b) become their x */
static void fold_dropouts(Fwd *F, int fi, IrFn *f, IrBlock *b) {
  IrInst *prev = NULL;
  for (IrInst *in = b->head; in;) {
    fold_dropouts(F, fi, f, &in->body);
    fold_dropouts(F, fi, f, &in->els);
    IrInst *next = in->next;
    if (in->op == IR_DROPOUT && in->nargs == 3 && in->ndst == 1 && in->dst[0] >= 0 &&
        value_zero(F, fi, in->args[2]) && f->values[in->dst[0]].type->dtype == f->values[in->args[0]].type->dtype) {
      replace_uses(&f->body, in->dst[0], in->args[0]);
      ir_unlink(b, prev, in);
    } else {
      prev = in;
    }
    in = next;
  }
}

static int param_index(const IrFn *f, int v) {
  for (int i = 0; i < f->nparams; i++)
    if (f->params[i] == v)
      return i;
  return -1;
}

/* (2): g's body is `t = binary(p_a, p_b); return t` (tensor parameters) */
static IrInst *single_binary(const IrFn *g) {
  IrInst *op = g->body.head;
  if (!op || op->op != IR_BINARY || op->nargs != 2 || op->ndst != 1 || !op->next || op->next->op != IR_RETURN ||
      op->next->next || op->next->nargs != 1 || op->next->args[0] != op->dst[0])
    return NULL;
  for (int i = 0; i < 2; i++)
    if (param_index(g, op->args[i]) < 0)
      return NULL;
  return op;
}

static void inline_binaries(Compiler *c, IrBlock *b) {
  for (IrInst *in = b->head; in; in = in->next) {
    inline_binaries(c, &in->body);
    inline_binaries(c, &in->els);
    IrInst *op = in->op == IR_CALL && in->callee && !IR_I(in, REMAT) && in->ndst == 1 ? single_binary(in->callee) : NULL;
    if (!op || in->dst[0] < 0)
      continue;
    int args[2] = {in->args[param_index(in->callee, op->args[0])], in->args[param_index(in->callee, op->args[1])]};
    int dst = in->dst[0];
    in->op = IR_BINARY;
    in->binop = op->binop;
    in->callee = NULL;
    memset(in->imm, 0, sizeof in->imm);
    ir_set_args(c, in, 2, args);
    in->dst[0] = dst;
    in->ndst = 1;
  }
}

static int *uses_of(Compiler *c, const IrFn *f) {
  int *uses = arena_alloc(&c->arena, sizeof(int) * (size_t)(f->nvalues + 1));
  memset(uses, 0, sizeof(int) * (size_t)(f->nvalues + 1));
  count_uses(&f->body, uses);
  return uses;
}

static IrInst *top_def(const IrBlock *b, int v, int *j) {
  for (IrInst *in = b->head; in; in = in->next)
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] == v) {
        *j = d;
        return in;
      }
  return NULL;
}

/* Whether g's j-th result can take the addend (3); depth bounds the chain. */
static bool can_take(Compiler *c, IrFn *g, int j, int depth) {
  IrInst *ret = g->body.tail;
  if (depth > 8 || g->is_main || ir_uses_tape(g) || (g->fn && (g->fn->flags & FN_EXPORT)) || !ret ||
      ret->op != IR_RETURN || j >= ret->nargs || ret->args[j] < 0)
    return false;
  int v = ret->args[j], k = 0;
  int *uses = uses_of(c, g);
  IrInst *d = top_def(&g->body, v, &k);
  if (!d || uses[v] != 1)
    return false;
  if (d->op == IR_BINARY && d->ndst == 1 && !ir_binary_is_comparison(d->binop))
    return true;
  return d->op == IR_CALL && d->callee && !IR_I(d, REMAT) && can_take(c, d->callee, k, depth + 1);
}

/* g whose j-th result is op(x', t) (left: x' on the left), x' its last
 * parameter; can_take(g, j) holds. */
static IrFn *take_addend(Fwd *F, IrFn *g, int j, IrBinary op, bool left) {
  for (FwdSpecial *s = F->specials; s; s = s->next)
    if (s->g == g && s->j == j && s->op == op && s->left == left)
      return s->copy;
  Compiler *c = F->c;
  IrFn *m = copy_fn(c, g, arena_sprintf(&c->arena, "%s_%s%d", g->cname, left ? "addl" : "addr", j));
  IrInst *ret = m->body.tail;
  int v = ret->args[j], k = 0;
  Type *t = m->values[v].type;
  int x = ir_value(c, m, t, NULL);
  m->params[m->nparams++] = x;
  IrInst *d = top_def(&m->body, v, &k);
  if (d->op == IR_CALL) { /* the callee's own result takes it */
    d->callee = take_addend(F, d->callee, k, op, left);
    int *args = arena_alloc(&c->arena, sizeof(int) * (size_t)(d->nargs + 1));
    memcpy(args, d->args, sizeof(int) * (size_t)d->nargs);
    args[d->nargs] = x;
    ir_set_args(c, d, d->nargs + 1, args);
  } else { /* z = op(x', t) before the return */
    IrInst *z = ir_clone_inst(c, d);
    z->op = IR_BINARY;
    z->binop = op;
    memset(z->imm, 0, sizeof z->imm);
    z->span = ret->span;
    int args[2] = {left ? x : v, left ? v : x};
    ir_set_args(c, z, 2, args);
    z->dst[0] = ir_value(c, m, t, NULL);
    z->ndst = 1;
    IrInst *prev = m->body.head;
    while (prev->next != ret)
      prev = prev->next;
    prev->next = z;
    z->next = ret;
    ret->args[j] = z->dst[0];
  }
  FwdSpecial *s = arena_alloc(&c->arena, sizeof(FwdSpecial));
  *s = (FwdSpecial){g, m, j, op, left, F->specials};
  F->specials = s;
  IrFn **tail = &F->new_fns;
  while (*tail)
    tail = &(*tail)->next;
  *tail = m;
  return m;
}

static void residual_adds(Fwd *F, IrFn *f, IrBlock *b) {
  int *uses = uses_of(F->c, f);
  IrInst *prev = NULL;
  for (IrInst *in = b->head; in;) {
    residual_adds(F, f, &in->body);
    residual_adds(F, f, &in->els);
    IrInst *next = in->next;
    bool done = false;
    for (int k = 0; !done && in->op == IR_BINARY && in->nargs == 2 && in->ndst == 1 && in->dst[0] >= 0 &&
                    !ir_binary_is_comparison(in->binop) && k < 2;
         k++) {
      int y = in->args[k], x = in->args[1 - k], j = 0;
      if (y < 0 || x < 0 || x == y || uses[y] != 1 || !same_tensor_type(f->values[y].type, f->values[x].type) ||
          !same_tensor_type(f->values[y].type, f->values[in->dst[0]].type))
        continue;
      IrInst *call = def_in(b, in, y, &j);
      if (!call || call->op != IR_CALL || !call->callee || IR_I(call, REMAT) || !defined_before(f, b, call, x) ||
          !can_take(F->c, call->callee, j, 0))
        continue;
      call->callee = take_addend(F, call->callee, j, in->binop, k == 1);
      int *args = arena_alloc(&F->c->arena, sizeof(int) * (size_t)(call->nargs + 1));
      memcpy(args, call->args, sizeof(int) * (size_t)call->nargs);
      args[call->nargs] = x;
      ir_set_args(F->c, call, call->nargs + 1, args);
      call->dst[j] = in->dst[0];
      ir_unlink(b, prev, in);
      done = true;
    }
    if (!done)
      prev = in;
    in = next;
  }
}

void callfuse_forward(Compiler *c, IrProgram *p) {
  Fwd F = {.c = c, .p = p};
  for (IrFn *f = p->fns; f; f = f->next)
    F.nfns++;
  F.fns = arena_alloc(&c->arena, sizeof(IrFn *) * (size_t)(F.nfns + 1));
  F.sites = arena_alloc(&c->arena, sizeof(CallSite *) * (size_t)(F.nfns + 1));
  F.defs = arena_alloc(&c->arena, sizeof(IrInst **) * (size_t)(F.nfns + 1));
  F.visiting = arena_alloc(&c->arena, sizeof(char *) * (size_t)(F.nfns + 1));
  int n = 0;
  for (IrFn *f = p->fns; f; f = f->next)
    F.fns[n++] = f;
  for (int i = 0; i < n; i++) {
    F.sites[i] = NULL;
    F.defs[i] = arena_alloc(&c->arena, sizeof(IrInst *) * (size_t)(F.fns[i]->nvalues + 1));
    memset(F.defs[i], 0, sizeof(IrInst *) * (size_t)(F.fns[i]->nvalues + 1));
    F.visiting[i] = arena_alloc(&c->arena, (size_t)F.fns[i]->nparams + 1);
    memset(F.visiting[i], 0, (size_t)F.fns[i]->nparams + 1);
  }
  for (int i = 0; i < n; i++)
    collect(&F, F.fns[i], &F.fns[i]->body, F.defs[i]);
  for (int i = 0; i < n; i++)
    fold_dropouts(&F, i, F.fns[i], &F.fns[i]->body);
  for (int i = 0; i < n; i++)
    inline_binaries(c, &F.fns[i]->body);
  for (int i = 0; i < n; i++)
    residual_adds(&F, F.fns[i], &F.fns[i]->body);
  if (!F.new_fns)
    return;
  IrFn **tail = &p->fns;
  while (*tail)
    tail = &(*tail)->next;
  *tail = F.new_fns;
  for (IrFn *f = F.new_fns; f; f = f->next)
    ir_verify(c, f);
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
