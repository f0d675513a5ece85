/* autodiff.c: reverse-mode differentiation of the IR (SPEC section 9).
 * For each value_and_grad/grad call of f with respect to a set of its
 * parameters, this pass generates, once per (f, set):
 *   f_fwd: f's body that also pushes on a tape the residuals its backward
 *          needs (only for instructions on a path from a wrt parameter);
 *   f_bwd: the backward, walking f's body in reverse, popping residuals and
 *          applying each instruction's backward rule (bwd_rule() below: the
 *          one place where each op's backward is defined, following the
 *          seed's forward/backward table for collectives and casts);
 *   f_vjp: runs f_fwd, seeds the cotangent 1.0, runs f_bwd.
 * Loops run backwards in the backward; ifs take the branch the forward took;
 * calls differentiate their callee the same way.
 * A call under remat() (SPEC 15) runs f_remat in the forward: f_fwd's
 * instructions (the same kernels, so the same bits) without the pushes, and
 * only the call's arguments go on the tape; the backward pops them, runs
 * f_fwd on them (which pushes f's residuals) and f_bwd right after. */
#include <string.h>

#include "ir.h"
#include "schedule.h"
#include "transitions.h"

/* Which parameters of a function are differentiated: one byte per
 * parameter (1: yes), so any number of parameters can be. */
typedef const char *Mask;

typedef struct Variant {
  IrFn *f;
  Mask mask;            /* f->nparams bytes */
  int ordinal;          /* variants of f made before this one */
  IrFn *fwd, *bwd, *vjp;
  IrFn *remat;          /* f_fwd without pushes, made when a remat() call needs it */
  struct Rev *rev;      /* the activity analysis, kept to build remat */
  struct Variant *next;
} Variant;

typedef struct AD {
  Compiler *c;
  IrProgram *p;
  Variant *variants;
  IrFn *new_fns;        /* generated functions, added to the program at the end */
} AD;

/* Per variant being built. */
typedef struct Rev Rev;
struct Rev {
  AD *ad;
  IrFn *f;              /* the forward function (its values) */
  IrFn *b;              /* the backward function being built */
  char *active;         /* per forward value */
  char *active_var;     /* per forward var slot */
  IrBlock **def_block;  /* per forward value: the block defining it */
  char *needs_slot;     /* per forward value: used in a block nested below its own */
  int *adj;             /* per forward value: its adjoint in b so far (-1: zero) */
  struct Contribution **pending; /* per forward value: contributions not yet summed */
  int *slot;            /* per forward value: adjoint var slot in b (-1: none) */
  int *adj_var;         /* per forward var slot: adjoint var slot in b */
  IrBlock *out;         /* where b's instructions go */
  IrFn *fwd;            /* the forward being built (owns its extra values) */
  bool reported;        /* an error about this function was given */
};

static Variant *variant(AD *ad, IrFn *f, Mask mask);
static IrFn *remat_fn(AD *ad, Variant *v, Span at);
static int res_lookup(const int *f, const int *b, int n, int v);

/* ---- which instructions are differentiable, and with respect to what ---- */

/* Whether argument i of `in` carries a gradient: irops.def's diff column,
 * except where an operand decides (comparisons have none, nor all_reduce
 * with op=max or op=min, nor detach). */
static bool diff_arg(IrFn *f, IrInst *in, int i) {
  Type *t = f->values[in->args[i]].type;
  if (t->kind != TY_TENSOR || t->dtype == DT_I32 || !ir_arg_in(ir_op_info[in->op].diff, i))
    return false;
  switch (in->op) {
  case IR_BINARY: case IR_BINARY_SCALAR: return !ir_binary_is_comparison(in->binop);
  case IR_ALL_REDUCE: return IR_I(in, REDUCE) == RED_SUM || IR_I(in, REDUCE) == RED_AVG;
  case IR_COPY: return IR_I(in, DETACH) == 0; /* detach stops gradients */
  default: return true;
  }
}

/* Instructions that stop gradients by design (IRF_STOPS_GRAD: host values,
 * effects, control flow, where's condition, take_along_dim's indices, the
 * type of zeros_like; here: detach and comparisons); any other that takes an
 * active value without a backward rule is an error, never a silent zero. */
static bool stops_gradient(IrInst *in) {
  switch (in->op) {
  case IR_COPY: return IR_I(in, DETACH) == 1; /* detach */
  case IR_BINARY: case IR_BINARY_SCALAR: return ir_binary_is_comparison(in->binop);
  default: return ir_has(in->op, IRF_STOPS_GRAD);
  }
}

static bool mark_active(Rev *r, IrBlock *b) {
  bool changed = false;
  for (IrInst *in = b->head; in; in = in->next) {
    if (in->op == IR_FOR || in->op == IR_IF) {
      changed |= mark_active(r, &in->body);
      changed |= mark_active(r, &in->els);
      continue;
    }
    bool any = false;
    for (int i = 0; i < in->nargs; i++) {
      any |= r->active[in->args[i]] && diff_arg(r->f, in, i);
      if (r->active[in->args[i]] && !diff_arg(r->f, in, i) && !stops_gradient(in) && in->ndst &&
          r->f->values[in->args[i]].type->kind == TY_TENSOR && !r->reported) {
        r->reported = true;
        error_at(r->ad->c, in->span, "%s has no gradient, but a value it uses needs one here",
                 in->op == IR_ALL_REDUCE ? "all_reduce with op=max or op=min" : ir_op_name[in->op]);
        help(r->ad->c, "stop the gradient explicitly with detach(x) if that is meant");
      }
    }
    if (in->op == IR_VAR_GET)
      any = r->active_var[IR_I(in, SLOT)];
    if (!any)
      continue;
    if (in->op == IR_VAR_SET && !r->active_var[IR_I(in, SLOT)]) {
      r->active_var[IR_I(in, SLOT)] = 1;
      changed = true;
    }
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] >= 0 && !r->active[in->dst[d]] && r->f->values[in->dst[d]].type->kind == TY_TENSOR) {
        r->active[in->dst[d]] = 1;
        changed = true;
      }
  }
  return changed;
}

static bool inst_active(Rev *r, IrInst *in) {
  if (in->op == IR_FOR || in->op == IR_IF) {
    for (IrInst *x = in->body.head; x; x = x->next)
      if (inst_active(r, x))
        return true;
    for (IrInst *x = in->els.head; x; x = x->next)
      if (inst_active(r, x))
        return true;
    return false;
  }
  if (in->op == IR_VAR_GET)
    return r->active_var[IR_I(in, SLOT)];
  for (int i = 0; i < in->nargs; i++)
    if (r->active[in->args[i]] && diff_arg(r->f, in, i))
      return true;
  return false;
}

static void find_blocks(Rev *r, IrBlock *b, int depth, int *depth_of_block_val) {
  for (IrInst *in = b->head; in; in = in->next) {
    for (int i = 0; i < in->nargs; i++) {
      int v = in->args[i];
      if (depth_of_block_val[v] >= 0 && depth_of_block_val[v] < depth)
        r->needs_slot[v] = 1;
    }
    if (in->op == IR_FOR && in->ndst)
      depth_of_block_val[in->dst[0]] = depth + 1, r->def_block[in->dst[0]] = &in->body;
    if (in->op == IR_FOR || in->op == IR_IF) {
      find_blocks(r, &in->body, depth + 1, depth_of_block_val);
      find_blocks(r, &in->els, depth + 1, depth_of_block_val);
    }
    for (int d = 0; d < in->ndst; d++)
      if (in->dst[d] >= 0 && in->op != IR_FOR) {
        depth_of_block_val[in->dst[d]] = depth;
        r->def_block[in->dst[d]] = b;
      }
  }
}

/* ---- building the backward ---- */

static int bval(Rev *r, Type *t) { return ir_value(r->ad->c, r->b, t, NULL); }

static IrInst *bemit(Rev *r, IrOp op, Span sp, int nargs, const int *args) {
  IrInst *in = ir_emit(r->ad->c, r->out, op, sp);
  ir_set_args(r->ad->c, in, nargs, args);
  return in;
}

static int bemit1(Rev *r, IrOp op, Span sp, Type *t, int nargs, const int *args) {
  IrInst *in = bemit(r, op, sp, nargs, args);
  in->dst[0] = bval(r, t);
  in->ndst = 1;
  return in->dst[0];
}

static Type *ftype(Rev *r, int v) { return r->f->values[v].type; }

/* ---- summing an adjoint's contributions where it is read (issue 26)
 * The contributions to a value's SSA adjoint (one per use of the value in
 * its block) are kept as they arrive and summed where the adjoint is read
 * (adjoint(): at the value's definition), in the order they arrived:
 * ((c1 + c2) + c3) ..., the same additions in the same order as summing
 * each on arrival, so the same bits; but consecutive, so that the
 * scheduler makes them one fused loop (attention's x, read by its three
 * projections: one 3-operand loop, not two adds with GEMMs between). */
typedef struct Contribution {
  int val;
  Span sp;
  struct Contribution *next;
} Contribution;

static void sum_contributions(Rev *r, int v) {
  Contribution *c = r->pending[v];
  r->pending[v] = NULL;
  for (; c; c = c->next)
    r->adj[v] = r->adj[v] < 0 ? c->val : bemit1(r, IR_ACCUM, c->sp, ftype(r, v), 2, (int[]){r->adj[v], c->val});
}

/* Adds contribution c (a b-value) to the adjoint of forward value v. */
static void contribute(Rev *r, IrBlock *here, int v, int c, Span sp) {
  if (c < 0)
    return;
  if (!r->b->values[c].hint && r->f->values[v].hint) /* name gradients d_x after x */
    r->b->values[c].hint = arena_sprintf(&r->ad->c->arena, "d_%s", r->f->values[v].hint);
  if (r->slot[v] >= 0 && r->def_block[v] != here) {
    IrInst *g = bemit(r, IR_VAR_GET, sp, 0, NULL);
    IR_I(g, SLOT) = r->slot[v];
    g->dst[0] = bval(r, ftype(r, v));
    g->ndst = 1;
    int sum = bemit1(r, IR_ACCUM, sp, ftype(r, v), 2, (int[]){g->dst[0], c});
    IrInst *s = bemit(r, IR_VAR_SET, sp, 1, &sum);
    IR_I(s, SLOT) = r->slot[v];
    return;
  }
  Contribution *n = arena_alloc(&r->ad->c->arena, sizeof(Contribution)), **pp = &r->pending[v];
  *n = (Contribution){c, sp, NULL};
  while (*pp)
    pp = &(*pp)->next;
  *pp = n;
}

/* The whole adjoint of v at its definition: the SSA part plus the slot. */
static int adjoint(Rev *r, int v, Span sp) {
  sum_contributions(r, v);
  if (r->slot[v] < 0)
    return r->adj[v];
  IrInst *g = bemit(r, IR_VAR_GET, sp, 0, NULL);
  IR_I(g, SLOT) = r->slot[v];
  g->dst[0] = bval(r, ftype(r, v));
  g->ndst = 1;
  if (r->adj[v] < 0)
    return g->dst[0];
  return bemit1(r, IR_ACCUM, sp, ftype(r, v), 2, (int[]){r->adj[v], g->dst[0]});
}

/* Which forward values the backward of `in` needs (pushed by f_fwd):
 * irops.def's residuals column (for unary, x stands for f'(x), which has
 * x's type; bf16: x itself; for dropout, the seed and p: the mask is
 * recomputed, never stored). */
/* Whether where's value operand i (1 or 2) is kept: only for its own
 * gradient (rt_where_bwd reads it for that gradient's shape alone), so
 * where(mask, x, 0.0) keeps no 0-d tensor for the 0.0 (and the CUDA
 * target makes none: sched_host_scalars). */
static bool where_keeps(Rev *r, IrInst *in, int i);

static bool where_keeps(Rev *r, IrInst *in, int i) { return r->active[in->args[i]] && diff_arg(r->f, in, i); }

static int residuals(Rev *r, IrInst *in, int *out) {
  int n = 0;
  const IrOpInfo *info = &ir_op_info[in->op];
  for (int d = 0; (info->flags & IRF_RES_RESULT) && d < in->ndst; d++)
    if (in->dst[d] >= 0)
      out[n++] = in->dst[d];
  for (int i = 0; i < in->nargs; i++)
    if (ir_arg_in(info->res, i) && (in->op != IR_WHERE || i == 0 || where_keeps(r, in, i)))
      out[n++] = in->args[i];
  return n;
}

/* A bf16 unary op keeps x and computes dy * f'(x) in f32 in the backward,
 * rounding once, as PyTorch does; keeping f'(x) would round it to bf16
 * first.  f32 and f64 keep f'(x), computed in the same pass as f(x). */
static bool unary_recomputes(Rev *r, IrInst *in) { return ftype(r, in->args[0])->dtype == DT_BF16; }

static IrInst *coll(Rev *r, IrOp op, IrInst *fwd, int dy, Type *t) {
  IrInst *in = bemit(r, op, fwd->span, 1, &dy);
  in->naxes = fwd->naxes;
  memcpy(in->axes, fwd->axes, sizeof in->axes);
  in->wire = fwd->bwd_wire; /* bwd_dtype= of the forward */
  in->bwd_wire = fwd->wire;
  in->dst[0] = bval(r, t);
  in->ndst = 1;
  return in;
}

/* v / n, n the number of ranks in the group of the collective `in` (the
 * backward of op=avg, whose terms each count 1/n); a value of type t. */
static int over_group_size(Rev *r, IrInst *in, int v, Type *t) {
  IrInst *n = bemit(r, IR_HOST_SIZE, in->span, 0, NULL);
  n->size = size_int(1);
  for (int i = 0; i < in->naxes; i++)
    n->size = size_mul(n->size, size_axis(in->axes[i]));
  n->dst[0] = bval(r, type_new(r->ad->c, TY_INT));
  n->ndst = 1;
  IrInst *b = bemit(r, IR_BINARY_SCALAR, in->span, 2, (int[]){v, n->dst[0]});
  b->binop = BIN_DIV;
  b->dst[0] = bval(r, t);
  b->ndst = 1;
  return b->dst[0];
}

/* The backward of a cast (reinterpret or convert) src -> dst: the seed's
 * table (collectives.def): an all-reduce, an all-gather, nothing, or a
 * cast of the cotangent back (local: no communication). */
static int cast_bwd(Rev *r, IrInst *in, int dy, Type *xt) {
  long long s = IR_I(in, SRC), d = IR_I(in, DST), dim = IR_I(in, DIM);
  const Transition *t = transition_of_ir(in->op, transition_ltype((IrLType)s), transition_ltype((IrLType)d));
  if (s == d || !t || t->bwd == IR_COPY)
    return bemit1(r, IR_COPY, in->span, xt, 1, &dy);
  IrInst *b = coll(r, t->bwd, in, dy, xt);
  if (t->bwd == IR_ALL_GATHER) {
    IR_I(b, DIM) = dim;
  } else if (t->bwd == IR_CONVERT || t->bwd == IR_REINTERPRET) {
    IR_I(b, SRC) = transition_ir_ltype(t->bwd_src);
    IR_I(b, DST) = transition_ir_ltype(t->bwd_dst);
    IR_I(b, DIM) = dim;
  }
  return b->dst[0];
}

static void reverse_block(Rev *r, IrBlock *fb);

/* b computes the gradient of in's first argument: give it its result. */
static void grad_of_first(Rev *r, IrBlock *here, IrInst *b, IrInst *in) {
  b->dst[0] = bval(r, ftype(r, in->args[0]));
  b->ndst = 1;
  contribute(r, here, in->args[0], b->dst[0], b->span);
}

/* b computes one gradient per argument of in, in order: give it a result
 * for each argument that needs one, and add those to the adjoints. */
static void grads_per_arg(Rev *r, IrBlock *here, IrInst *b, IrInst *in, int n) {
  ir_reserve_dst(r->ad->c, b, n);
  b->ndst = n;
  for (int i = 0; i < n; i++)
    b->dst[i] = i < in->nargs && r->active[in->args[i]] && diff_arg(r->f, in, i) ? bval(r, ftype(r, in->args[i])) : -1;
  for (int i = 0; i < n && i < in->nargs; i++)
    contribute(r, here, in->args[i], b->dst[i], b->span);
}

/* Emits the backward of one active instruction, given the adjoint dy of
 * its (first) result and its residuals (forward id -> backward id). */
static void bwd_rule(Rev *r, IrInst *in, IrBlock *here, int dy, const int *res_f, const int *res_b, int nres) {
  Compiler *c = r->ad->c;
  Span sp = in->span;
#define RES(fv) res_lookup(res_f, res_b, nres, (fv))
  int a0 = in->nargs > 0 ? in->args[0] : -1;
  bool want0 = in->nargs > 0 && r->active[a0] && diff_arg(r->f, in, 0);
  bool want1 = in->nargs > 1 && r->active[in->args[1]] && diff_arg(r->f, in, 1);
  switch (in->op) {
  case IR_UNARY: { /* dx = dy * f'(x), with f'(x) kept by the forward */
    if (unary_recomputes(r, in)) { /* bf16: dx = f'(x) * dy from x, in f32, rounded once */
      IrInst *b = bemit(r, IR_UNARY_BWD, sp, 2, (int[]){RES(a0), dy});
      b->unop = in->unop;
      grad_of_first(r, here, b, in);
      return;
    }
    IrInst *b = bemit(r, IR_BINARY, sp, 2, (int[]){dy, RES(a0)});
    b->binop = BIN_MUL;
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_BINARY:
  case IR_BINARY_SCALAR: {
    int a = RES(in->args[0]), bb = RES(in->args[1]);
    if (in->op == IR_BINARY_SCALAR) { /* make the host scalar a 0-d tensor */
      Type *st = type_scalar(c, ftype(r, a0)->dtype, 0, LT_R);
      bb = bemit1(r, IR_SCALAR, sp, st, 1, &bb);
      if (IR_I(in, SCALAR_LEFT)) {
        int t = a;
        a = bb;
        bb = t;
      }
    }
    IrInst *b = bemit(r, IR_BINARY_BWD, sp, 3, (int[]){a, bb, dy});
    b->binop = in->binop;
    b->ndst = 2;
    bool left_tensor = in->op == IR_BINARY || !IR_I(in, SCALAR_LEFT);
    bool want_a = in->op == IR_BINARY ? want0 : (left_tensor && want0);
    bool want_b = in->op == IR_BINARY ? want1 : (!left_tensor && want0);
    b->dst[0] = want_a ? bval(r, ftype(r, in->args[0])) : -1;
    b->dst[1] = want_b ? bval(r, ftype(r, in->op == IR_BINARY ? in->args[1] : in->args[0])) : -1;
    if (in->op == IR_BINARY) {
      contribute(r, here, in->args[0], b->dst[0], sp);
      contribute(r, here, in->args[1], b->dst[1], sp);
    } else {
      contribute(r, here, in->args[0], left_tensor ? b->dst[0] : b->dst[1], sp);
    }
    return;
  }
  case IR_MATMUL: {
    grads_per_arg(r, here, bemit(r, IR_MATMUL_BWD, sp, 3, (int[]){RES(in->args[0]), RES(in->args[1]), dy}), in, 2);
    return;
  }
  case IR_EINSUM: {
    int *args = arena_alloc(&c->arena, sizeof(int) * (size_t)(in->nargs + 1)), n = 0;
    for (int i = 0; i < in->nargs; i++)
      args[n++] = RES(in->args[i]);
    args[n++] = dy;
    IrInst *b = bemit(r, IR_EINSUM_BWD, sp, n, args);
    b->s = in->s;
    grads_per_arg(r, here, b, in, in->nargs);
    return;
  }
  case IR_SUM:
  case IR_MEAN:
  case IR_AMAX: {
    IrInst *b = bemit(r, IR_REDUCE_BWD, sp, 2, (int[]){RES(a0), dy});
    IR_I(b, FWD_OP) = in->op;
    IR_I(b, DIM) = IR_I(in, DIM);
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_SUM_SQUARES: { /* dx = 2 x dy for each x, in one multi-tensor operation */
    int *args = arena_alloc(&c->arena, sizeof(int) * (size_t)(in->nargs + 1)), n = 0;
    args[n++] = dy;
    for (int i = 0; i < in->nargs; i++)
      args[n++] = RES(in->args[i]);
    grads_per_arg(r, here, bemit(r, IR_SUM_SQUARES_BWD, sp, n, args), in, in->nargs);
    return;
  }
  case IR_CUMSUM: {
    IrInst *b = bemit(r, IR_CUMSUM_BWD, sp, 1, &dy);
    IR_I(b, DIM) = IR_I(in, DIM);
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_SOFTMAX:
  case IR_LOG_SOFTMAX: {
    IrInst *b = bemit(r, in->op == IR_SOFTMAX ? IR_SOFTMAX_BWD : IR_LOG_SOFTMAX_BWD, sp, 2, (int[]){RES(in->dst[0]), dy});
    IR_I(b, DIM) = IR_I(in, DIM);
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_LAYER_NORM:
  case IR_RMS_NORM: {
    int args[3] = {RES(a0), in->nargs > 1 ? RES(in->args[1]) : RES(a0), dy};
    IrInst *b = bemit(r, in->op == IR_LAYER_NORM ? IR_LAYER_NORM_BWD : IR_RMS_NORM_BWD, sp, 3, args);
    IR_I(b, HAS_WEIGHT) = in->nargs > 1;
    b->f = in->f;
    grads_per_arg(r, here, b, in, in->op == IR_LAYER_NORM ? 3 : 2);
    return;
  }
  case IR_ATTENTION: { /* dq, dk, dv from q, k, v, the output and each row's log-sum-exp */
    int args[7] = {RES(a0), RES(in->args[1]), RES(in->args[2]), RES(in->dst[0]), RES(in->dst[1]), dy,
                   in->nargs > 3 ? RES(in->args[3]) : -1};
    IrInst *b = bemit(r, IR_ATTENTION_BWD, sp, in->nargs > 3 ? 7 : 6, args);
    IR_I(b, CAUSAL) = IR_I(in, CAUSAL);
    IR_I(b, LAYOUT) = IR_I(in, LAYOUT); /* the gradients in their primals' layouts */
    b->f = in->f;
    grads_per_arg(r, here, b, in, 3);
    return;
  }
  case IR_CROSS_ENTROPY: {
    IrInst *b = bemit(r, IR_CROSS_ENTROPY_BWD, sp, 3, (int[]){RES(a0), RES(in->args[1]), dy});
    IR_I(b, CE_REDUCTION) = IR_I(in, CE_REDUCTION);
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_CROSS_ENTROPY_VP: { /* the loss is R on the axes: its cotangent (P) is all-reduced over them first */
    IrInst *ar = coll(r, IR_ALL_REDUCE, in, dy, ftype(r, in->dst[0]));
    IR_I(ar, REDUCE) = RED_SUM;
    int args[4] = {RES(a0), RES(in->args[1]), RES(in->dst[1]), ar->dst[0]};
    IrInst *b = bemit(r, IR_CROSS_ENTROPY_VP_BWD, sp, 4, args);
    IR_I(b, CE_REDUCTION) = IR_I(in, CE_REDUCTION);
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_WHERE: { /* the gradient goes to the selected operand; dy stands in for an operand not kept (not read) */
    int ka = where_keeps(r, in, 1) ? RES(in->args[1]) : dy, kb = where_keeps(r, in, 2) ? RES(in->args[2]) : dy;
    IrInst *b = bemit(r, IR_WHERE_BWD, sp, 4, (int[]){RES(a0), ka, kb, dy});
    ir_reserve_dst(r->ad->c, b, 2);
    b->ndst = 2;
    for (int i = 0; i < 2; i++) {
      int x = in->args[1 + i];
      b->dst[i] = r->active[x] && diff_arg(r->f, in, 1 + i) ? bval(r, ftype(r, x)) : -1;
      contribute(r, here, x, b->dst[i], sp);
    }
    return;
  }
  case IR_TAKE_ALONG_DIM: {
    IrInst *b = bemit(r, IR_TAKE_ALONG_DIM_BWD, sp, 3, (int[]){RES(in->args[1]), dy, RES(a0)});
    IR_I(b, DIM) = IR_I(in, DIM);
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_DROPOUT: { /* linear: the same mask on the cotangent */
    IrInst *b = bemit(r, IR_DROPOUT, sp, 3, (int[]){dy, RES(in->args[1]), RES(in->args[2])});
    b->t = in->t;
    b->naxes = in->naxes;
    memcpy(b->axes, in->axes, sizeof b->axes);
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_EMBEDDING: {
    int v = bemit1(r, IR_EMBEDDING_BWD, sp, ftype(r, in->args[1]), 3, (int[]){RES(a0), dy, RES(in->args[1])});
    contribute(r, here, in->args[1], v, sp);
    return;
  }
  case IR_TRANSPOSE: {
    IrInst *b = bemit(r, IR_TRANSPOSE, sp, 1, &dy);
    IR_I(b, DIM0) = IR_I(in, DIM0);
    IR_I(b, DIM1) = IR_I(in, DIM1);
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_PERMUTE: {
    IrInst *b = bemit(r, IR_PERMUTE, sp, 1, &dy);
    for (int i = 0; i < ftype(r, a0)->ndim; i++)
      IR_PERM(b, IR_PERM(in, i)) = i;
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_RESHAPE: {
    IrInst *b = bemit(r, IR_RESHAPE, sp, 1, &dy);
    b->t = ftype(r, a0);
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_EXPAND:
    contribute(r, here, a0, bemit1(r, IR_SUM_TO_SHAPE, sp, ftype(r, a0), 2, (int[]){dy, RES(a0)}), sp);
    return;
  case IR_SLICE: {
    IrInst *b = bemit(r, IR_SLICE_BWD, sp, 2, (int[]){dy, RES(a0)});
    IR_I(b, DIM) = IR_I(in, DIM);
    IR_I(b, START) = IR_I(in, START);
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_CONCAT: {
    int *args = arena_alloc(&c->arena, sizeof(int) * (size_t)(in->nargs + 1)), n = 0;
    args[n++] = dy;
    for (int i = 0; i < in->nargs; i++)
      args[n++] = RES(in->args[i]);
    IrInst *b = bemit(r, IR_CONCAT_BWD, sp, n, args);
    IR_I(b, DIM) = IR_I(in, DIM);
    grads_per_arg(r, here, b, in, in->nargs);
    return;
  }
  case IR_INDEX:
    if (r->slot[a0] >= 0 && r->def_block[a0] != here) {
      /* a stacked parameter walked by a loop: add into its row, in place */
      IrInst *b = bemit(r, IR_INDEX_ADD_SLOT, sp, 2, (int[]){dy, RES(in->args[1])});
      IR_I(b, SLOT) = r->slot[a0];
      return;
    }
    contribute(r, here, a0, bemit1(r, IR_INDEX_BWD, sp, ftype(r, a0), 3, (int[]){dy, RES(a0), RES(in->args[1])}), sp);
    return;
  case IR_ASTYPE: {
    IrInst *b = bemit(r, IR_ASTYPE, sp, 1, &dy);
    IR_I(b, DTYPE) = ftype(r, a0)->dtype;
    grad_of_first(r, here, b, in);
    return;
  }
  case IR_COPY: contribute(r, here, a0, bemit1(r, IR_COPY, sp, ftype(r, a0), 1, &dy), sp); return;
  case IR_ALL_REDUCE: {
    /* to R: the cotangent (P) is all-reduced; to I: a no-op (I -> R) */
    const Transition *t = transition_of_ir(IR_ALL_REDUCE, LT_P, ftype(r, in->dst[0])->lt[in->axes[0]]);
    int v;
    if (t && t->bwd == IR_ALL_REDUCE) {
      IrInst *b = coll(r, IR_ALL_REDUCE, in, dy, ftype(r, a0));
      IR_I(b, REDUCE) = IR_I(in, REDUCE);
      v = b->dst[0];
    } else {
      v = bemit1(r, IR_COPY, sp, ftype(r, a0), 1, &dy);
      if (IR_I(in, REDUCE) == RED_AVG) /* avg: each term's share is 1/n of the cotangent */
        v = over_group_size(r, in, v, ftype(r, a0));
    }
    contribute(r, here, a0, v, sp);
    return;
  }
  case IR_ALL_GATHER: { /* to R: a reduce-scatter; to I: convert(I -> V) */
    const Transition *t = transition_of_ir(IR_ALL_GATHER, LT_V, ftype(r, in->dst[0])->lt[in->axes[0]]);
    IrInst *b;
    if (t && t->bwd == IR_REDUCE_SCATTER) {
      b = coll(r, IR_REDUCE_SCATTER, in, dy, ftype(r, a0));
      IR_I(b, DIM) = IR_I(in, DIM);
    } else {
      t = transition(BI_ALL_GATHER, LT_V, LT_I);
      b = coll(r, t->bwd, in, dy, ftype(r, a0));
      IR_I(b, SRC) = transition_ir_ltype(t->bwd_src);
      IR_I(b, DST) = transition_ir_ltype(t->bwd_dst);
      IR_I(b, DIM) = IR_I(in, DIM);
    }
    contribute(r, here, a0, b->dst[0], sp);
    return;
  }
  case IR_REDUCE_SCATTER: { /* an all-gather; op=avg: each term's share is 1/n of it */
    IrInst *b = coll(r, transition(BI_REDUCE_SCATTER, LT_P, LT_V)->bwd, in, dy, ftype(r, a0));
    IR_I(b, DIM) = IR_I(in, DIM);
    contribute(r, here, a0, IR_I(in, REDUCE) == RED_AVG ? over_group_size(r, in, b->dst[0], ftype(r, a0)) : b->dst[0], sp);
    return;
  }
  case IR_ALL_TO_ALL: {
    IrInst *b = coll(r, transition(BI_ALL_TO_ALL, LT_V, LT_V)->bwd, in, dy, ftype(r, a0));
    IR_I(b, SRC_DIM) = IR_I(in, DST_DIM);
    IR_I(b, DST_DIM) = IR_I(in, SRC_DIM);
    contribute(r, here, a0, b->dst[0], sp);
    return;
  }
  case IR_PPERMUTE: { /* the blocks go back: shift -K */
    IrInst *b = coll(r, IR_PPERMUTE, in, dy, ftype(r, a0));
    IR_I(b, SHIFT) = -IR_I(in, SHIFT);
    contribute(r, here, a0, b->dst[0], sp);
    return;
  }
  case IR_CONVERT:
  case IR_REINTERPRET: contribute(r, here, a0, cast_bwd(r, in, dy, ftype(r, a0)), sp); return;
  default:
    error_at(c, sp, "internal error: no backward for IR %s", ir_op_name[in->op]);
    return;
  }
#undef RES
}

static int res_lookup(const int *f, const int *b, int n, int v) {
  for (int i = n - 1; i >= 0; i--)
    if (f[i] == v)
      return b[i];
  return -1;
}

static void init_slots(Rev *r, IrBlock *fb, Span sp) {
  for (IrInst *in = fb->head; in; in = in->next)
    for (int d = 0; d < in->ndst; d++) {
      int v = in->dst[d];
      if (v < 0 || !r->active[v] || !r->needs_slot[v] || in->op == IR_FOR)
        continue;
      if (r->slot[v] < 0)
        r->slot[v] = ir_var(r->ad->c, r->b, ftype(r, v), r->f->values[v].hint ? r->f->values[v].hint : "adj");
      IrInst *z = bemit(r, IR_FILL, sp, 0, NULL);
      z->t = ftype(r, v);
      z->dst[0] = bval(r, ftype(r, v));
      z->ndst = 1;
      IrInst *s = bemit(r, IR_VAR_SET, sp, 1, &z->dst[0]);
      IR_I(s, SLOT) = r->slot[v];
    }
}

/* ---- one operation per layer for the stacked gradients (issue 26)
 * A layer's backward adds the gradient of each field of the stacked
 * weights into its row of the field's accumulator (INDEX_ADD_SLOT), each
 * where that gradient is ready, between the waits of the gradients'
 * all-reduces.  Each add moves down to the next add of the same row (the
 * same index value) into another accumulator, past instructions that do
 * not touch its accumulator's var, so that a layer's adds are consecutive
 * and the emitters make them one multi-tensor call (emit_c.c: at the last
 * of them, whose gradients are all ready there; their waits come later,
 * which only lengthens the overlap).  Each accumulator sees the same adds
 * in the same order: the same bits.
 * Likewise the zero fills that initialise the accumulators (FILL then
 * VAR_SET, for each var): the fills move up to the first, one operation
 * (rt_zero_multi). */
static bool touches_slot(const IrInst *in, int slot, int v) {
  if ((in->op == IR_VAR_GET || in->op == IR_VAR_SET || in->op == IR_INDEX_ADD_SLOT) && IR_I((IrInst *)in, SLOT) == slot)
    return true;
  if (in->op == IR_FREE || in->op == IR_RETURN)
    for (int a = 0; a < in->nargs; a++)
      if (in->args[a] == v)
        return true;
  for (const IrInst *x = in->body.head; x; x = x->next)
    if (touches_slot(x, slot, v))
      return true;
  for (const IrInst *x = in->els.head; x; x = x->next)
    if (touches_slot(x, slot, v))
      return true;
  return false;
}

static void insert_before(IrBlock *b, IrInst *at, IrInst *in) {
  IrInst **pp = &b->head;
  while (*pp != at)
    pp = &(*pp)->next;
  in->next = at;
  *pp = in;
}

static void group_layer_adds(IrFn *f, IrBlock *b) {
  for (IrInst *in = b->head; in; in = in->next) {
    group_layer_adds(f, &in->body);
    group_layer_adds(f, &in->els);
  }
  /* from the last add up: each joins the group of the next add of its row */
  int n = 0;
  for (IrInst *in = b->head; in; in = in->next)
    n += in->op == IR_INDEX_ADD_SLOT;
  while (n > 0) {
    IrInst *x = NULL, *prev = NULL, *p = NULL;
    int k = 0;
    for (IrInst *in = b->head; in; p = in, in = in->next)
      if (in->op == IR_INDEX_ADD_SLOT && ++k == n) {
        x = in;
        prev = p;
        break;
      }
    n--;
    int slot = (int)IR_I(x, SLOT);
    IrInst *to = NULL;
    for (IrInst *y = x->next; y; y = y->next) {
      if (y->op == IR_INDEX_ADD_SLOT && sched_same_index(f, y->args[1], x->args[1]) && IR_I(y, SLOT) != slot) {
        to = y;
        break;
      }
      if (touches_slot(y, slot, x->args[0]))
        break;
    }
    if (!to || to == x->next)
      continue;
    ir_unlink(b, prev, x);
    insert_before(b, to, x);
  }
}

static void group_fills(IrFn *f, IrBlock *b) {
  for (IrInst *in = b->head; in; in = in->next) {
    group_fills(f, &in->body);
    group_fills(f, &in->els);
  }
  /* runs of (zero FILL z; VAR_SET z) pairs: the fills first, then the sets */
  IrInst *before = NULL;
  for (IrInst *in = b->head; in;) {
    IrInst *z = in, *fills = NULL, *ftail = NULL, *sets = NULL, *stail = NULL, *end = in;
    int pairs = 0;
    while (z && z->next && sched_zero_fill(f, z) && z->next->op == IR_VAR_SET && z->next->args[0] == z->dst[0]) {
      IrInst *s = z->next, *nx = s->next;
      if (ftail)
        ftail->next = z;
      else
        fills = z;
      ftail = z;
      if (stail)
        stail->next = s;
      else
        sets = s;
      stail = s;
      pairs++;
      z = nx;
    }
    if (pairs < 2) {
      before = end;
      in = end->next;
      continue;
    }
    ftail->next = sets;
    stail->next = z;
    if (before)
      before->next = fills;
    else
      b->head = fills;
    if (!z)
      b->tail = stail;
    before = stail;
    in = z;
  }
}

/* ---- an accumulator's first contribution is its value (issue 26)
 * The backward zeroes an adjoint var where the forward assigned its var
 * (and a function's adjoint vars at its start), then adds the
 * contributions that arrive: FILL z; VAR_SET s z; ...; g = VAR_GET s;
 * ACCUM(g, d); VAR_SET s. Where nothing touches the var between the zero
 * and the first add, in one block, the var is set to d itself: an adjoint
 * is the sum of its contributions in the order they arrive, the sum of one
 * contribution being that contribution (as SSA adjoints already are,
 * contribute()), never 0.0 + d, which would turn a contribution's -0.0
 * into +0.0 (DESIGN.md, "Autodiff"). +0.0 is an adjoint only where no
 * contribution arrives. A zeroed var that nothing reads before the end of
 * a backward's body is not zeroed at all (`var x = ...`'s adjoint after its
 * declaration's backward). Two device operations fewer per iteration of a
 * loop over layers (the flagship: the fill and the add of x's gradient). */
static IrInst *next_touch(IrInst *from, int slot) {
  for (IrInst *y = from; y; y = y->next)
    if (touches_slot(y, slot, -1))
      return y;
  return NULL;
}

static IrInst *remove_inst(IrBlock *b, IrInst *in) {
  IrInst *prev = NULL;
  for (IrInst *x = b->head; x != in; x = x->next)
    prev = x;
  IrInst *next = in->next;
  ir_unlink(b, prev, in);
  return next;
}

static void first_contribution_sets(IrFn *f, IrBlock *b, const int *nuses) {
  for (IrInst *in = b->head; in; in = in->next) {
    first_contribution_sets(f, &in->body, nuses);
    first_contribution_sets(f, &in->els, nuses);
  }
  for (IrInst *z = b->head; z;) {
    IrInst *s = z->next;
    if (!s || !sched_zero_fill(f, z) || s->op != IR_VAR_SET || s->args[0] != z->dst[0] || nuses[z->dst[0]] != 1) {
      z = z->next;
      continue;
    }
    int slot = (int)IR_I(s, SLOT);
    IrInst *g = next_touch(s->next, slot);
    if (!g && b == &f->body) { /* never read again: no zero needed */
      remove_inst(b, z);
      z = remove_inst(b, s);
      continue;
    }
    IrInst *a = g && g->op == IR_VAR_GET && nuses[g->dst[0]] == 1 ? g->next : NULL;
    while (a && !(a->op == IR_ACCUM && (a->args[0] == g->dst[0] || a->args[1] == g->dst[0])) && !touches_slot(a, slot, -1))
      a = a->next;
    bool adds_g = a && a->op == IR_ACCUM && (a->args[0] == g->dst[0] || a->args[1] == g->dst[0]);
    IrInst *set = adds_g && nuses[a->dst[0]] == 1 ? next_touch(a->next, slot) : NULL;
    int d = set ? a->args[a->args[0] == g->dst[0] ? 1 : 0] : -1;
    if (!set || set->op != IR_VAR_SET || set->args[0] != a->dst[0] ||
        !sched_same_shape(f->values[d].type, f->values[a->dst[0]].type)) { /* d is the var's value as it is */
      z = z->next;
      continue;
    }
    set->args[0] = d;
    remove_inst(b, g);
    remove_inst(b, a);
    remove_inst(b, z);
    z = remove_inst(b, s);
  }
}

/* The backward of a call: the callee's own backward, on the tape. */
/* The mask of a call's arguments that carry a gradient here. */
static Mask call_mask(Rev *r, IrInst *in) {
  char *mask = arena_alloc(&r->ad->c->arena, (size_t)in->nargs + 1);
  for (int i = 0; i < in->nargs; i++)
    mask[i] = r->active[in->args[i]] && diff_arg(r->f, in, i);
  return mask;
}

static void call_bwd(Rev *r, IrInst *in, IrBlock *here) {
  Mask mask = call_mask(r, in);
  Variant *v = variant(r->ad, in->callee, mask);
  if (IR_I(in, REMAT)) { /* remat: the arguments off the tape, the callee's forward again */
    IrInst *pop = bemit(r, IR_POP, in->span, 0, NULL);
    ir_reserve_dst(r->ad->c, pop, in->nargs);
    pop->ndst = in->nargs;
    IrInst *fwd = bemit(r, IR_CALL, in->span, 0, NULL);
    fwd->callee = v->fwd;
    ir_set_args(r->ad->c, fwd, in->nargs, pop->dst);
    for (int i = 0; i < in->nargs; i++) {
      pop->dst[i] = fwd->args[i] = bval(r, ftype(r, in->args[i]));
      r->b->values[pop->dst[i]].hint = r->f->values[in->args[i]].hint;
      r->b->values[pop->dst[i]].tape_of = in->args[i] + 1;
    }
    for (int d = 0; d < in->ndst; d++) /* the results again: not used, freed at once */
      ir_add_dst(r->ad->c, fwd, bval(r, ftype(r, in->dst[d])));
  }
  int *dys = arena_alloc(&r->ad->c->arena, sizeof(int) * (size_t)(in->ndst + 1)), n = 0;
  for (int d = 0; d < in->ndst; d++) {
    int a = in->dst[d] >= 0 && r->active[in->dst[d]] ? adjoint(r, in->dst[d], in->span) : -1;
    if (a < 0) {
      IrInst *z = bemit(r, IR_FILL, in->span, 0, NULL);
      z->t = ftype(r, in->dst[d]);
      z->dst[0] = a = bval(r, z->t);
      z->ndst = 1;
    }
    dys[n++] = a;
  }
  IrInst *b = bemit(r, IR_CALL, in->span, n, dys);
  b->callee = v->bwd;
  for (int i = 0; i < in->nargs; i++)
    if (mask[i])
      ir_add_dst(r->ad->c, b, bval(r, ftype(r, in->args[i])));
  int k = 0;
  for (int i = 0; i < in->nargs; i++)
    if (mask[i])
      contribute(r, here, in->args[i], b->dst[k++], in->span);
}

static void reverse_inst(Rev *r, IrInst *in, IrBlock *fb) {
  Compiler *c = r->ad->c;
  Span sp = in->span;
  if (in->op == IR_FOR) {
    IrInst *pop = bemit(r, IR_POP, sp, 0, NULL);
    pop->ndst = 2;
    pop->dst[0] = bval(r, type_new(c, TY_INT));
    pop->dst[1] = bval(r, type_new(c, TY_INT));
    r->b->values[pop->dst[0]].tape_of = in->args[0] + 1;
    r->b->values[pop->dst[1]].tape_of = in->args[1] + 1;
    IrInst *loop = bemit(r, IR_FOR, sp, 2, pop->dst);
    IR_I(loop, BACKWARDS) = 1; /* runs backwards */
    loop->dst[0] = bval(r, type_new(c, TY_INT));
    loop->ndst = 1;
    IrBlock *saved = r->out;
    r->out = &loop->body;
    reverse_block(r, &in->body);
    r->out = saved;
    return;
  }
  if (in->op == IR_IF) {
    IrInst *pop = bemit(r, IR_POP, sp, 0, NULL);
    pop->ndst = 1;
    pop->dst[0] = bval(r, type_new(c, TY_BOOL));
    r->b->values[pop->dst[0]].tape_of = in->args[0] + 1;
    IrInst *br = bemit(r, IR_IF, sp, 1, pop->dst);
    IrBlock *saved = r->out;
    r->out = &br->body;
    reverse_block(r, &in->body);
    r->out = &br->els;
    reverse_block(r, &in->els);
    r->out = saved;
    return;
  }
  if (in->op == IR_VAR_GET) {
    int a = adjoint(r, in->dst[0], sp);
    if (a < 0)
      return;
    int slot = r->adj_var[IR_I(in, SLOT)];
    IrInst *g = bemit(r, IR_VAR_GET, sp, 0, NULL);
    IR_I(g, SLOT) = slot;
    g->dst[0] = bval(r, ftype(r, in->dst[0]));
    g->ndst = 1;
    int sum = bemit1(r, IR_ACCUM, sp, ftype(r, in->dst[0]), 2, (int[]){g->dst[0], a});
    IrInst *s = bemit(r, IR_VAR_SET, sp, 1, &sum);
    IR_I(s, SLOT) = slot;
    return;
  }
  if (in->op == IR_VAR_SET) {
    int v = in->args[0];
    int slot = r->adj_var[IR_I(in, SLOT)];
    IrInst *g = bemit(r, IR_VAR_GET, sp, 0, NULL);
    IR_I(g, SLOT) = slot;
    g->dst[0] = bval(r, ftype(r, v));
    g->ndst = 1;
    contribute(r, fb, v, g->dst[0], sp);
    IrInst *z = bemit(r, IR_FILL, sp, 0, NULL);
    z->t = ftype(r, v);
    z->dst[0] = bval(r, z->t);
    z->ndst = 1;
    IrInst *s = bemit(r, IR_VAR_SET, sp, 1, &z->dst[0]);
    IR_I(s, SLOT) = slot;
    return;
  }
  if (in->op == IR_RETURN)
    return; /* seeded by the caller of reverse_block */
  if (in->op == IR_CALL) {
    call_bwd(r, in, fb);
    return;
  }
  /* residuals come off the tape in reverse order */
  int *res_f = arena_alloc(&c->arena, sizeof(int) * (size_t)(in->nargs + in->ndst + 1));
  int *res_b = arena_alloc(&c->arena, sizeof(int) * (size_t)(in->nargs + in->ndst + 1));
  int nres = residuals(r, in, res_f);
  if (nres) {
    IrInst *pop = bemit(r, IR_POP, sp, 0, NULL);
    ir_reserve_dst(c, pop, nres);
    pop->ndst = nres;
    for (int i = 0; i < nres; i++) {
      pop->dst[i] = res_b[i] = bval(r, ftype(r, res_f[i]));
      r->b->values[res_b[i]].hint = r->f->values[res_f[i]].hint;
      r->b->values[res_b[i]].tape_of = res_f[i] + 1;
    }
  }
  int dy = in->ndst ? adjoint(r, in->dst[0], sp) : -1;
  if (dy < 0) {
    /* no cotangent reached this result: its inputs get nothing from it */
    return;
  }
  bwd_rule(r, in, fb, dy, res_f, res_b, nres);
}

static void reverse_block(Rev *r, IrBlock *fb) {
  init_slots(r, fb, fb->head ? fb->head->span : r->f->span);
  int n = 0;
  for (IrInst *in = fb->head; in; in = in->next)
    n++;
  IrInst **list = arena_alloc(&r->ad->c->arena, sizeof(IrInst *) * (size_t)(n ? n : 1));
  n = 0;
  for (IrInst *in = fb->head; in; in = in->next)
    list[n++] = in;
  for (int i = n - 1; i >= 0; i--)
    if (inst_active(r, list[i]))
      reverse_inst(r, list[i], fb);
}

/* ---- the forward with pushes ---- */

/* keep: push what the backward needs (f_fwd); otherwise the same
 * instructions without a tape (f_remat). */
static IrBlock clone_with_pushes(Rev *r, IrBlock *src, bool keep) {
  Compiler *c = r->ad->c;
  IrBlock out = {0};
  for (IrInst *in = src->head; in; in = in->next) {
    IrInst *n = ir_clone_inst(c, in);
    if (out.tail)
      out.tail->next = n;
    else
      out.head = n;
    out.tail = n;
    bool active = inst_active(r, in);
    if (in->op == IR_FOR || in->op == IR_IF) {
      n->body = clone_with_pushes(r, &in->body, keep);
      n->els = clone_with_pushes(r, &in->els, keep);
      if (!active || !keep)
        continue;
      IrInst *p = ir_emit(c, &out, IR_PUSH, in->span);
      if (in->op == IR_FOR)
        ir_set_args(c, p, 2, in->args);
      else
        ir_set_args(c, p, 1, in->args);
      continue;
    }
    if (!active)
      continue;
    if (in->op == IR_CALL) {
      Variant *v = variant(r->ad, in->callee, call_mask(r, in));
      n->callee = keep && !IR_I(in, REMAT) ? v->fwd : remat_fn(r->ad, v, in->span);
      if (keep && IR_I(in, REMAT)) { /* remat: keep the arguments only */
        IrInst *p = ir_emit(c, &out, IR_PUSH, in->span);
        ir_set_args(c, p, in->nargs, in->args);
      }
      continue;
    }
    int *res = arena_alloc(&c->arena, sizeof(int) * (size_t)(in->nargs + in->ndst + 1));
    int nres = residuals(r, in, res);
    if (in->op == IR_UNARY && !unary_recomputes(r, in)) { /* compute f'(x) with f(x) and keep it */
      n->op = IR_UNARY_GRAD;
      n->dst[1] = ir_value(c, r->fwd, ftype(r, in->args[0]), NULL);
      n->ndst = 2;
      res[0] = n->dst[1];
    }
    if (nres && keep) {
      IrInst *p = ir_emit(c, &out, IR_PUSH, in->span);
      ir_set_args(c, p, nres, res);
    }
  }
  return out;
}

/* What a recomputed forward may not do: an effect would happen twice, a
 * clock read would differ. */
static IrInst *not_recomputable(IrBlock *b) {
  for (IrInst *in = b->head; in; in = in->next) {
    if (ir_has(in->op, IRF_EFFECT))
      return in;
    IrInst *x = not_recomputable(&in->body);
    if (!x)
      x = not_recomputable(&in->els);
    if (!x && in->op == IR_CALL && in->callee)
      x = not_recomputable(&in->callee->body);
    if (x)
      return x;
  }
  return NULL;
}

/* f_remat: f_fwd's instructions without the pushes, for the forward of a
 * remat() call; made once per variant, when first needed. */
static IrFn *remat_fn(AD *ad, Variant *v, Span at) {
  if (v->remat)
    return v->remat;
  Compiler *c = ad->c;
  IrFn *f = v->f;
  IrInst *bad = not_recomputable(&f->body);
  if (bad) {
    /* the built-in's name where it differs from the IR op's */
    const char *what = bad->op == IR_HOST_WALL_TIME ? "wall_time" : ir_op_name[bad->op];
    error_at(c, at, "remat() cannot recompute '%s': it calls %s(), which the backward would run again",
             f->fn ? f->fn->name : f->cname, what);
    note_at(c, bad->span, "%s() is here", what);
    help(c, "move %s() out of the function, or call it without remat()", what);
  }
  IrFn *m = v->remat = ir_fn_new(c, arena_sprintf(&c->arena, "%s_remat%s", f->cname, v->fwd->cname + strlen(f->cname) + 4));
  const char *cname = m->cname;
  *m = *f;
  m->cname = cname;
  m->values = arena_alloc(&c->arena, sizeof(IrValue) * (size_t)(f->nvalues + 1));
  memcpy(m->values, f->values, sizeof(IrValue) * (size_t)f->nvalues);
  m->capvalues = f->nvalues + 1;
  m->role = IRFN_PLAIN;
  m->is_main = false;
  m->vjp_fwd = m->vjp_bwd = m->exp_fwd = m->exp_bwd = NULL;
  m->exported = false;
  m->exp_mask = NULL;
  m->emitted = false;
  m->next = NULL;
  IrFn *saved = v->rev->fwd;
  v->rev->fwd = m;
  m->body = clone_with_pushes(v->rev, &f->body, false);
  v->rev->fwd = saved;
  IrFn **tail = &ad->new_fns;
  while (*tail)
    tail = &(*tail)->next;
  *tail = m;
  return m;
}

/* The suffix of a variant's C names: the mask as a number (bit i for
 * parameter i) while it fits, else the variant's ordinal. */
static const char *variant_suffix(Compiler *c, IrFn *f, Mask mask, int ordinal) {
  if (f->nparams > 62)
    return arena_sprintf(&c->arena, "v%d", ordinal);
  long long bits = 0;
  for (int i = 0; i < f->nparams; i++)
    bits |= (long long)(mask[i] != 0) << i;
  return arena_sprintf(&c->arena, "%lld", bits);
}

static Variant *variant(AD *ad, IrFn *f, Mask mask) {
  int ordinal = 0;
  for (Variant *v = ad->variants; v; v = v->next) {
    if (v->f != f)
      continue;
    if (memcmp(v->mask, mask, (size_t)f->nparams) == 0)
      return v;
    ordinal++;
  }
  Compiler *c = ad->c;
  Variant *v = arena_alloc(&c->arena, sizeof(Variant));
  v->f = f;
  char *own = arena_alloc(&c->arena, (size_t)f->nparams + 1);
  memcpy(own, mask, (size_t)f->nparams);
  v->mask = mask = own;
  v->ordinal = ordinal;
  v->next = ad->variants;
  ad->variants = v;
  const char *suffix = variant_suffix(c, f, mask, ordinal);
  Rev r = {.ad = ad, .f = f};
  size_t nv = (size_t)f->nvalues + 1;
  r.active = arena_alloc(&c->arena, nv);
  r.active_var = arena_alloc(&c->arena, (size_t)f->nvars + 1);
  r.def_block = arena_alloc(&c->arena, sizeof(IrBlock *) * nv);
  r.needs_slot = arena_alloc(&c->arena, nv);
  r.adj = arena_alloc(&c->arena, sizeof(int) * nv);
  r.pending = arena_alloc(&c->arena, sizeof(Contribution *) * nv);
  r.slot = arena_alloc(&c->arena, sizeof(int) * nv);
  r.adj_var = arena_alloc(&c->arena, sizeof(int) * ((size_t)f->nvars + 1));
  int *depth = arena_alloc(&c->arena, sizeof(int) * nv);
  for (size_t i = 0; i < nv; i++) {
    r.adj[i] = r.slot[i] = -1;
    depth[i] = -1;
  }
  for (int i = 0; i < f->nparams; i++) {
    depth[f->params[i]] = 0;
    r.def_block[f->params[i]] = &f->body;
    if (mask[i])
      r.active[f->params[i]] = 1;
  }
  while (mark_active(&r, &f->body))
    ;
  find_blocks(&r, &f->body, 0, depth);

  /* the forward: f's values, f's body with pushes */
  v->fwd = ir_fn_new(c, arena_sprintf(&c->arena, "%s_fwd%s", f->cname, suffix));
  *v->fwd = *f;
  /* the forward adds values of its own (f'(x) of unary ops): own the array */
  v->fwd->values = arena_alloc(&c->arena, sizeof(IrValue) * (size_t)(f->nvalues + 1));
  memcpy(v->fwd->values, f->values, sizeof(IrValue) * (size_t)f->nvalues);
  v->fwd->capvalues = f->nvalues + 1;
  v->fwd->cname = arena_sprintf(&c->arena, "%s_fwd%s", f->cname, suffix);
  v->fwd->role = IRFN_FORWARD;
  v->fwd->is_main = false;
  v->fwd->next = NULL;

  /* the backward: cotangents of the results in, gradients of the masked
   * parameters out */
  IrFn *b = v->bwd = ir_fn_new(c, arena_sprintf(&c->arena, "%s_bwd%s", f->cname, suffix));
  b->role = IRFN_BACKWARD;
  b->tape_fwd = v->fwd;
  b->span = f->span;
  b->fn = f->fn;
  r.b = b;
  r.out = &b->body;
  b->params = arena_alloc(&c->arena, sizeof(int) * (size_t)(f->nret + 1));
  for (int i = 0; i < f->nret; i++)
    b->params[b->nparams++] = ir_value(c, b, f->ret_types[i], "dy");
  int ngrad = 0;
  for (int i = 0; i < f->nparams; i++)
    ngrad += mask[i] != 0;
  b->nret = ngrad;
  b->ret_types = arena_alloc(&c->arena, sizeof(Type *) * (size_t)(ngrad + 1));
  for (int i = 0, k = 0; i < f->nparams; i++)
    if (mask[i])
      b->ret_types[k++] = type_dual(c, f->values[f->params[i]].type, ad->p->mesh->naxes);
  for (int s = 0; s < f->nvars; s++) {
    r.adj_var[s] = ir_var(c, b, f->vars[s].type, f->vars[s].name);
    IrInst *z = bemit(&r, IR_FILL, f->span, 0, NULL);
    z->t = f->vars[s].type;
    z->dst[0] = bval(&r, z->t);
    z->ndst = 1;
    IrInst *set = bemit(&r, IR_VAR_SET, f->span, 1, &z->dst[0]);
    IR_I(set, SLOT) = r.adj_var[s];
  }
  /* parameters used inside loops accumulate in slots */
  for (int i = 0; i < f->nparams; i++) {
    int p = f->params[i];
    if (!r.active[p] || !r.needs_slot[p])
      continue;
    r.slot[p] = ir_var(c, b, ftype(&r, p), f->values[p].hint);
    IrInst *z = bemit(&r, IR_FILL, f->span, 0, NULL);
    z->t = ftype(&r, p);
    z->dst[0] = bval(&r, z->t);
    z->ndst = 1;
    IrInst *set = bemit(&r, IR_VAR_SET, f->span, 1, &z->dst[0]);
    IR_I(set, SLOT) = r.slot[p];
  }
  /* seed: the results' cotangents */
  IrInst *ret = f->body.tail && f->body.tail->op == IR_RETURN ? f->body.tail : NULL;
  for (int i = 0; ret && i < ret->nargs && i < b->nparams; i++)
    if (r.active[ret->args[i]])
      contribute(&r, &f->body, ret->args[i], b->params[i], ret->span);
  r.fwd = v->fwd;
  v->rev = arena_alloc(&c->arena, sizeof(Rev));
  v->fwd->body = clone_with_pushes(&r, &f->body, true);
  reverse_block(&r, &f->body);
  *v->rev = r;
  IrInst *bret = bemit(&r, IR_RETURN, f->span, 0, NULL);
  int *grads = arena_alloc(&c->arena, sizeof(int) * (size_t)(ngrad + 1));
  for (int i = 0, k = 0; i < f->nparams; i++) {
    if (!mask[i])
      continue;
    int p = f->params[i];
    int g = r.active[p] ? adjoint(&r, p, f->span) : -1;
    if (g < 0) {
      IrInst *z = bemit(&r, IR_FILL, f->span, 0, NULL);
      z->t = ftype(&r, p);
      z->dst[0] = g = bval(&r, z->t);
      z->ndst = 1;
    }
    grads[k++] = g;
  }
  /* the RETURN must come last: move it */
  IrInst **pp = &b->body.head;
  while (*pp != bret)
    pp = &(*pp)->next;
  *pp = bret->next;
  if (b->body.tail == bret) {
    IrInst *t = b->body.head;
    while (t && t->next)
      t = t->next;
    b->body.tail = t;
  }
  bret->next = NULL;
  ir_set_args(c, bret, ngrad, grads);
  if (b->body.tail)
    b->body.tail->next = bret;
  else
    b->body.head = bret;
  b->body.tail = bret;
  int *nuses = arena_alloc(&c->arena, sizeof(int) * ((size_t)b->nvalues + 1));
  sched_count_uses(&b->body, nuses);
  first_contribution_sets(b, &b->body, nuses);
  group_layer_adds(b, &b->body);
  group_fills(b, &b->body);

  /* the wrapper value_and_grad calls: only for a scalar result (a callee
   * with several results, a record's leaves say, is differentiated only
   * through its fwd/bwd pair) */
  IrFn **tail = &ad->new_fns;
  while (*tail)
    tail = &(*tail)->next;
  *tail = v->fwd;
  v->fwd->next = b;
  b->next = NULL;
  if (f->nret != 1)
    return v;
  IrFn *w = v->vjp = ir_fn_new(c, arena_sprintf(&c->arena, "%s_vjp%s", f->cname, suffix));
  w->span = f->span;
  w->fn = f->fn;
  w->vjp_fwd = v->fwd;
  w->vjp_bwd = b;
  w->vjp_ngrads = ngrad;
  w->values = f->values;
  w->nvalues = f->nvalues;
  w->params = f->params;
  w->nparams = f->nparams;
  w->nret = 1 + ngrad;
  w->ret_types = arena_alloc(&c->arena, sizeof(Type *) * (size_t)(ngrad + 1));
  w->ret_types[0] = f->ret_types[0];
  for (int i = 0; i < ngrad; i++)
    w->ret_types[1 + i] = b->ret_types[i];

  /* callees first: fwd, bwd, then the wrapper */
  b->next = w;
  w->next = NULL;
  return v;
}

static void rewrite_calls(AD *ad, IrBlock *b) {
  for (IrInst *in = b->head; in; in = in->next) {
    rewrite_calls(ad, &in->body);
    rewrite_calls(ad, &in->els);
    if (in->op != IR_VJP_CALL || !in->callee)
      continue;
    Variant *v = variant(ad, in->callee, in->wrt);
    in->callee = v->vjp;
    if (!IR_I(in, VALUE_WANTED)) { /* grad(): no value wanted */
      ir_reserve_dst(ad->c, in, in->ndst + 1);
      for (int d = in->ndst; d > 0; d--)
        in->dst[d] = in->dst[d - 1];
      in->dst[0] = -1;
      in->ndst++;
    }
  }
}

void ad_differentiate(Compiler *c, IrProgram *p) {
  AD ad = {.c = c, .p = p};
  callfuse_forward(c, p); /* residual adds into their callees' last ops */
  for (IrFn *f = p->fns; f; f = f->next)
    rewrite_calls(&ad, &f->body);
  /* an export fn gets C entry points; with a single float result and a
   * float parameter also NAME_vjp: its gradient for every float parameter
   * (a tuple or record result, a training step's, has no vjp; nor has an
   * integer result or a function of integers only) */
  for (IrFn *f = p->fns; f; f = f->next) {
    if (!f->fn || !(f->fn->flags & FN_EXPORT) || f->vjp_fwd || ir_uses_tape(f) || f->inst->id != 0)
      continue;
    if (f->nret != 1) {
      f->exported = true;
      continue;
    }
    char *mask = arena_alloc(&c->arena, (size_t)f->nparams + 1);
    bool any = false;
    for (int i = 0; i < f->nparams; i++)
      any |= mask[i] = f->values[f->params[i]].type->dtype != DT_I32;
    if (!any || f->ret_types[0]->dtype == DT_I32) {
      f->exported = true;
      continue;
    }
    Variant *v = variant(&ad, f, mask);
    f->exp_fwd = v->fwd;
    f->exp_bwd = v->bwd;
    f->exp_mask = mask;
    f->exported = true; /* after variant(), whose copies of f are not exported */
  }
  if (!ad.new_fns) {
    callfuse(c, p);
    return;
  }
  /* generated functions go before the first user of any of them: simplest,
   * before everything that is not their dependency.  C needs only
   * declarations, which emit_c writes first, so order is free. */
  IrFn **tail = &p->fns;
  while (*tail)
    tail = &(*tail)->next;
  *tail = ad.new_fns;
  for (IrFn *f = ad.new_fns; f; f = f->next) /* the generated functions are IR like any other */
    ir_verify(c, f);
  callfuse(c, p); /* gradient sums into layer_norm's backward, across calls */
}
