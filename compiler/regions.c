/* regions.c: which units of main's loop bodies may run inside a captured
 * region (regions.h).  A unit is device work (tensor ops, calls of functions
 * whose every instruction is device work or host arithmetic), host work
 * (host arithmetic, host var reads and writes, calls of host-only
 * functions: hoisted before the region, so they run every iteration), or a
 * stop: something that reads device memory on the host, waits for it, or
 * has an effect outside the device, whose result a replayed graph could not
 * reproduce. */
#include <string.h>

#include "regions.h"

typedef struct FnMemo {
  IrFn *f;
  int state; /* 0: not seen, 1: being looked at (recursion), 2: done */
  bool ok, host_only;
  const char *why;
  Span where;
  int ops;
  struct FnMemo *next;
} FnMemo;

static FnMemo *memo_list;
static Compiler *memo_owner;

static FnMemo *memo_of(Compiler *c, IrFn *f) {
  if (memo_owner != c) { /* a new compilation (the tests run several in one process) */
    memo_list = NULL;
    memo_owner = c;
  }
  for (FnMemo *m = memo_list; m; m = m->next)
    if (m->f == f)
      return m;
  FnMemo *m = arena_alloc(&c->arena, sizeof *m);
  memset(m, 0, sizeof *m);
  m->f = f;
  m->next = memo_list;
  memo_list = m;
  return m;
}

static bool is_host_value(const IrFn *f, int v) { return v >= 0 && ir_is_host(f->values[v].type); }

/* a host effect or a host read of device memory: what it is, else NULL */
static const char *host_effect(const IrInst *in) {
  switch (in->op) {
  case IR_PRINT: return "`print` (a host effect: reads its tensors on the host)";
  case IR_ITEM: return "`item` (reads device memory on the host)";
  case IR_HOST_ITEM: return "a comparison of tensor values used as a host bool (reads device memory on the host)";
  case IR_SAVE: return "`save` (a host effect: writes files from device memory)";
  case IR_LOAD: return "`load` (a host effect: reads a file)";
  case IR_EXISTS: return "`exists` (a host effect: looks at the file system)";
  case IR_TOKEN_BATCH: return "`token_batch` (a host effect: reads a file)";
  case IR_HOST_WALL_TIME: return "`wall_time` (a host effect: reads the clock)";
  default: return NULL;
  }
}

static void scan_fn(Compiler *c, IrFn *f, FnMemo *m);

/* instructions of a callee (any depth): may they be captured? */
static bool scan_block(Compiler *c, IrFn *f, IrBlock *b, FnMemo *m) {
  for (IrInst *in = b->head; in; in = in->next) {
    const char *e = host_effect(in);
    if (e) {
      m->why = e;
      m->where = in->span;
      return false;
    }
    if (!ir_has(in->op, IRF_PURE_HOST) && in->op != IR_VAR_GET && in->op != IR_VAR_SET && in->op != IR_RETURN &&
        in->op != IR_FOR && in->op != IR_IF && in->op != IR_CALL && in->op != IR_VJP_CALL && in->op != IR_FREE &&
        in->op != IR_PUSH && in->op != IR_POP)
      m->host_only = false, m->ops++;
    if (in->op == IR_VAR_GET || in->op == IR_VAR_SET) {
      int v = in->op == IR_VAR_GET ? in->dst[0] : in->args[0];
      if (!is_host_value(f, v))
        m->host_only = false;
    }
    if (in->op == IR_CALL || in->op == IR_VJP_CALL) {
      IrFn *callees[2] = {in->callee, NULL};
      if (in->op == IR_VJP_CALL)
        callees[0] = in->callee->vjp_fwd, callees[1] = in->callee->vjp_bwd;
      for (int k = 0; k < 2; k++) {
        if (!callees[k])
          continue;
        FnMemo *cm = memo_of(c, callees[k]);
        scan_fn(c, callees[k], cm);
        if (!cm->ok) {
          m->why = cm->why;
          m->where = cm->where;
          return false;
        }
        m->ops += cm->ops;
        m->host_only &= cm->host_only;
      }
      if (in->op == IR_VJP_CALL)
        m->host_only = false;
    }
    if ((in->body.head && !scan_block(c, f, &in->body, m)) || (in->els.head && !scan_block(c, f, &in->els, m)))
      return false;
  }
  return true;
}

static void scan_fn(Compiler *c, IrFn *f, FnMemo *m) {
  if (m->state == 2)
    return;
  if (m->state == 1) { /* recursion: what is known so far holds for the cycle */
    return;
  }
  m->state = 1;
  m->ok = true;
  m->host_only = true;
  if (f->vjp_fwd) { /* a value_and_grad wrapper */
    FnMemo *a = memo_of(c, f->vjp_fwd), *b = memo_of(c, f->vjp_bwd);
    scan_fn(c, f->vjp_fwd, a);
    scan_fn(c, f->vjp_bwd, b);
    m->ok = a->ok && b->ok;
    m->why = !a->ok ? a->why : b->why;
    m->where = !a->ok ? a->where : b->where;
    m->ops = a->ops + b->ops + 1;
    m->host_only = false;
  } else
    m->ok = scan_block(c, f, &f->body, m);
  m->state = 2;
}

RegionKind region_kind(Compiler *c, IrFn *f, IrInst *in, const char **why, Span *where) {
  *why = NULL;
  *where = in->span;
  const char *e = host_effect(in);
  if (e) {
    *why = e;
    return RGN_STOP;
  }
  switch (in->op) {
  case IR_IF:
    *why = "a host `if` of the loop's body (a graph would keep one branch)";
    return RGN_STOP;
  case IR_FOR:
    *why = "a host `for` of the loop's body";
    return RGN_STOP;
  case IR_INDEX_ADD_SLOT:
  case IR_FREE:
  case IR_RETURN:
  case IR_PUSH:
  case IR_POP:
    *why = "bookkeeping of the host program";
    return RGN_STOP;
  case IR_VAR_GET: return is_host_value(f, in->dst[0]) ? RGN_HOST : RGN_DEVICE;
  case IR_VAR_SET: return is_host_value(f, in->args[0]) ? RGN_HOST : RGN_DEVICE;
  case IR_CALL:
  case IR_VJP_CALL: {
    IrFn *callee = in->op == IR_VJP_CALL ? in->callee : in->callee;
    FnMemo *m = memo_of(c, callee);
    scan_fn(c, callee, m);
    if (!m->ok) {
      *why = m->why;
      *where = m->where;
      return RGN_STOP;
    }
    bool host_args = true, host_results = true, any_host_result = false;
    for (int i = 0; i < in->nargs; i++)
      host_args &= is_host_value(f, in->args[i]);
    for (int i = 0; i < in->ndst; i++)
      if (in->dst[i] >= 0) {
        host_results &= is_host_value(f, in->dst[i]);
        any_host_result |= is_host_value(f, in->dst[i]);
      }
    if (m->host_only && host_args && host_results)
      return RGN_HOST;
    if (any_host_result) {
      *why = "a call whose host result comes from device work";
      return RGN_STOP;
    }
    return RGN_DEVICE;
  }
  default: return ir_has(in->op, IRF_PURE_HOST) ? RGN_HOST : RGN_DEVICE;
  }
}

int region_device_ops(Compiler *c, IrInst *in) {
  if (in->op == IR_CALL || in->op == IR_VJP_CALL) {
    FnMemo *m = memo_of(c, in->callee);
    scan_fn(c, in->callee, m);
    return m->ops;
  }
  if (ir_has(in->op, IRF_PURE_HOST) || in->op == IR_VAR_GET || in->op == IR_VAR_SET)
    return 0;
  return 1;
}

bool region_hoisted(Compiler *c, IrFn *f, IrInst *in) {
  const char *why;
  Span where;
  return region_kind(c, f, in, &why, &where) == RGN_HOST;
}

int region_slot_of(IrInst *in, int a) {
  switch (in->op) {
  case IR_BINARY_SCALAR: return a == 1 ? 'f' : 0;
  case IR_RANDN: return a == 0 ? 'i' : a == 2 && IR_I(in, MEAN_GIVEN) ? 'f' : 0;
  case IR_UNIFORM: return a == 0 ? 'i' : 0;
  case IR_DROPOUT: return a == 1 ? 'i' : 0;
  default: return 0;
  }
}

bool region_host_work(IrOp op) {
  if (ir_has(op, IRF_PURE_HOST))
    return true;
  switch (op) {
  case IR_VAR_GET:
  case IR_VAR_SET:
  case IR_FOR:
  case IR_IF:
  case IR_RETURN:
  case IR_PUSH:
  case IR_POP:
  case IR_CALL:
  case IR_VJP_CALL:
  case IR_FREE:
  case IR_COUNT: return true;
  default: return false;
  }
}

/* ---- region_scalar_reach: a taint of host values, per function (the
 * union over its calls), to a fixed point */
typedef struct Reach {
  IrFn *f;
  bool *val, *var, *ret;
  struct Reach *next;
} Reach;

typedef struct ReachAll {
  Compiler *c;
  Reach *list;
  bool changed, slot, guard;
} ReachAll;

static Reach *reach_of(ReachAll *R, IrFn *f) {
  for (Reach *r = R->list; r; r = r->next)
    if (r->f == f)
      return r;
  Reach *r = arena_alloc(&R->c->arena, sizeof *r);
  memset(r, 0, sizeof *r);
  r->f = f;
  r->val = arena_alloc(&R->c->arena, sizeof(bool) * (size_t)(f->nvalues + 1));
  r->var = arena_alloc(&R->c->arena, sizeof(bool) * (size_t)(f->nvars + 1));
  r->ret = arena_alloc(&R->c->arena, sizeof(bool) * (size_t)(f->nret + 1));
  memset(r->val, 0, sizeof(bool) * (size_t)(f->nvalues + 1));
  memset(r->var, 0, sizeof(bool) * (size_t)(f->nvars + 1));
  memset(r->ret, 0, sizeof(bool) * (size_t)(f->nret + 1));
  r->next = R->list;
  R->list = r;
  R->changed = true;
  return r;
}

static void mark(ReachAll *R, bool *b) {
  if (!*b) {
    *b = true;
    R->changed = true;
  }
}

static bool host_num(const IrFn *f, int v) {
  if (v < 0)
    return false;
  TypeKind k = f->values[v].type->kind;
  return k == TY_INT || k == TY_FLOAT || k == TY_BOOL;
}

static void reach_call(ReachAll *R, Reach *r, IrInst *in) {
  IrFn *g = in->callee;
  if (in->op == IR_VJP_CALL && g->vjp_fwd) { /* the forward takes the wrapper's arguments */
    reach_of(R, g->vjp_bwd);
    g = g->vjp_fwd;
  }
  bool any = false;
  for (int i = 0; i < in->nargs && i < g->nparams; i++)
    any |= r->val[in->args[i]] && host_num(r->f, in->args[i]);
  Reach *q = any ? reach_of(R, g) : NULL;
  for (Reach *x = R->list; x && !q; x = x->next)
    if (x->f == g)
      q = x;
  if (!q)
    return;
  for (int i = 0; i < in->nargs && i < g->nparams; i++)
    if (r->val[in->args[i]] && host_num(r->f, in->args[i]))
      mark(R, &q->val[g->params[i]]);
  if (in->op == IR_CALL)
    for (int i = 0; i < in->ndst && i < g->nret; i++)
      if (q->ret[i] && in->dst[i] >= 0)
        mark(R, &r->val[in->dst[i]]);
}

static void reach_block(ReachAll *R, Reach *r, IrBlock *b, IrInst **only, int a, int n) {
  IrFn *f = r->f;
  IrInst *in = only ? NULL : b->head;
  for (int k = a;; k++) {
    if (only) {
      if (k >= n)
        break;
      in = only[k];
    } else if (k > a) {
      in = in->next;
    }
    if (!in)
      break;
    bool any = false;
    for (int i = 0; i < in->nargs; i++)
      any |= in->args[i] >= 0 && r->val[in->args[i]] && host_num(f, in->args[i]);
    if (in->op == IR_POP)
      for (int i = 0; i < in->ndst; i++) {
        int d = in->dst[i], src = d >= 0 ? f->values[d].tape_of - 1 : -1;
        if (src < 0 || !f->tape_fwd)
          continue;
        Reach *q = NULL;
        for (Reach *x = R->list; x; x = x->next)
          if (x->f == f->tape_fwd)
            q = x;
        if (q && q->val[src])
          mark(R, &r->val[d]);
      }
    if (ir_has(in->op, IRF_PURE_HOST) && any)
      for (int i = 0; i < in->ndst; i++)
        if (in->dst[i] >= 0)
          mark(R, &r->val[in->dst[i]]);
    if (in->op == IR_VAR_SET && any)
      mark(R, &r->var[IR_I(in, SLOT)]);
    if (in->op == IR_VAR_GET && r->var[IR_I(in, SLOT)] && host_num(f, in->dst[0]))
      mark(R, &r->val[in->dst[0]]);
    if (in->op == IR_RETURN)
      for (int i = 0; i < in->nargs && i < f->nret; i++)
        if (r->val[in->args[i]] && host_num(f, in->args[i]))
          mark(R, &r->ret[i]);
    if ((in->op == IR_IF || in->op == IR_FOR) && any) {
      R->guard = true;
      if (in->op == IR_FOR)
        mark(R, &r->val[in->dst[0]]);
    }
    if (in->op == IR_CALL || in->op == IR_VJP_CALL)
      reach_call(R, r, in);
    if (!region_host_work(in->op) && any)
      for (int i = 0; i < in->nargs; i++)
        if (in->args[i] >= 0 && r->val[in->args[i]] && host_num(f, in->args[i])) {
          if (region_slot_of(in, i))
            R->slot = true;
          else
            R->guard = true;
        }
    if (in->body.head)
      reach_block(R, r, &in->body, NULL, 0, 0);
    if (in->els.head)
      reach_block(R, r, &in->els, NULL, 0, 0);
  }
}

void region_scalar_reach(Compiler *c, IrFn *main, IrInst **insts, int a, int b, int v, bool *slot, bool *guard) {
  ReachAll R = {c, NULL, true, false, false};
  Reach *m = reach_of(&R, main);
  m->val[v] = true;
  IrInst **only = arena_alloc(&c->arena, sizeof(IrInst *) * (size_t)(b - a + 1));
  int n = 0;
  for (int k = a; k < b; k++)
    if (!region_hoisted(c, main, insts[k]))
      only[n++] = insts[k];
  while (R.changed) {
    R.changed = false;
    for (Reach *r = R.list; r; r = r->next)
      if (r->f == main)
        reach_block(&R, r, NULL, only, 0, n);
      else
        reach_block(&R, r, &r->f->body, NULL, 0, 0);
  }
  *slot = R.slot;
  *guard = R.guard;
}
