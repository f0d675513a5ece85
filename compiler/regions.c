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
