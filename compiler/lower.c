/* lower.c: from the checked AST to the IR, one IrFn per function instance.
 * The checker calls lower_instance() right after it checks an instance's
 * body, while every expression of that body carries the instance's types
 * (Expr.ty) and every call its callee's instance (Expr.inst).  Lowering
 * decides nothing about types: it only spells out values and operations.
 * Records are lowered away here: a record is its leaf tensors (depth
 * first), as parameters, results, variables and call arguments, each named
 * after its field path (m_attn_wo), so the IR and the C know no records. */
#include <math.h>
#include <string.h>

#include "ir.h"
#include "redistribute.h"
#include "transitions.h"

typedef struct Lower {
  Compiler *c;
  Checker *k;
  IrProgram *prog;
  IrFn *f;
  IrBlock *b;
  /* symbol -> value ids (or var slots), one per leaf: an open-addressing map */
  struct { Symbol *sym; int *ids; int n; bool is_var; } *map;
  size_t cap, count;
  /* the lowered operands of the record ops being lowered, for EX_LEAF */
  struct { Expr *e; int *ids; int n; } *memo;
  int nmemo, capmemo;
  bool failed;
  int lm_depth;         /* inside local_map blocks */
  /* A function that returns from inside an `if`: results go through var
   * slots, `done` records that a return happened, and the statements after
   * an `if` that may return run under `if (!done)`. */
  bool slots;
  int *ret_slots;
  int nret_slots;
  int done;
} Lower;

/* Binds s to its n leaves' value ids (or var slots). */
static void bind_leaves(Lower *L, Symbol *s, int *ids, int n, bool is_var) {
  if ((L->count + 1) * 2 > L->cap) {
    size_t oldcap = L->cap;
    __typeof__(L->map) old = L->map;
    L->cap = oldcap ? oldcap * 2 : 64;
    L->map = arena_alloc(&L->c->arena, sizeof(*L->map) * L->cap);
    L->count = 0;
    for (size_t i = 0; i < oldcap; i++)
      if (old[i].sym)
        bind_leaves(L, old[i].sym, old[i].ids, old[i].n, old[i].is_var);
  }
  size_t i = ((uintptr_t)s >> 4) & (L->cap - 1);
  while (L->map[i].sym && L->map[i].sym != s)
    i = (i + 1) & (L->cap - 1);
  if (!L->map[i].sym)
    L->count++;
  L->map[i].sym = s;
  L->map[i].ids = ids;
  L->map[i].n = n;
  L->map[i].is_var = is_var;
}

static void bind(Lower *L, Symbol *s, int id, bool is_var) {
  int *ids = arena_alloc(&L->c->arena, sizeof(int));
  *ids = id;
  bind_leaves(L, s, ids, 1, is_var);
}

static bool lookup_leaves(Lower *L, Symbol *s, int **ids, int *n, bool *is_var) {
  if (!L->cap)
    return false;
  size_t i = ((uintptr_t)s >> 4) & (L->cap - 1);
  while (L->map[i].sym && L->map[i].sym != s)
    i = (i + 1) & (L->cap - 1);
  if (!L->map[i].sym)
    return false;
  *ids = L->map[i].ids;
  *n = L->map[i].n;
  *is_var = L->map[i].is_var;
  return true;
}

static bool lookup(Lower *L, Symbol *s, int *id, bool *is_var) {
  int *ids, n;
  if (!lookup_leaves(L, s, &ids, &n, is_var) || n < 1)
    return false;
  *id = ids[0];
  return true;
}

/* The name of leaf i of a value of type t named `base`: base_attn_wo. */
static Name leaf_name(Lower *L, Name base, const Type *t, int i) {
  if (t->kind != TY_RECORD && t->kind != TY_TUPLE)
    return base;
  const char *path = type_leaf_path(L->c, t, i, "_");
  return intern_cstr(L->c, base ? arena_sprintf(&L->c->arena, "%s_%s", base, path) : path);
}

static void unsupported(Lower *L, Span sp, const char *what) {
  error_at(L->c, sp, "%s is not supported by the code generator yet", what);
  L->failed = true;
}

static int value(Lower *L, Type *t, Name hint) { return ir_value(L->c, L->f, t, hint); }

static IrInst *emit(Lower *L, IrOp op, Span sp) { return ir_emit(L->c, L->b, op, sp); }

static int emit1(Lower *L, IrOp op, Span sp, Type *t, int nargs, const int *args) {
  IrInst *in = emit(L, op, sp);
  ir_set_args(L->c, in, nargs, args);
  in->dst[0] = value(L, t, NULL);
  in->ndst = 1;
  return in->dst[0];
}

static int lower_expr(Lower *L, Expr *e);
static int *lower_leaves(Lower *L, Expr *e, int *n);
static IrInst *lower_call_inst(Lower *L, Expr *call, bool results);
static int to_tensor(Lower *L, int v, Type *want, Span sp);

static Type *host_type(Lower *L, TypeKind kind) { return type_new(L->c, kind); }

static int host_const(Lower *L, Span sp, TypeKind kind, long long iv, double fv) {
  IrInst *in = emit(L, IR_HOST_CONST, sp);
  in->t = host_type(L, kind);
  IR_I(in, VALUE) = iv;
  in->f = fv;
  in->dst[0] = value(L, in->t, NULL);
  in->ndst = 1;
  return in->dst[0];
}

static long long int_arg(Expr *e) {
  long long v = 0;
  bool symbolic = false;
  return const_int_expr(e, &v, &symbolic) ? v : 0;
}

static int norm_dim(long long d, int ndim) { return (int)(d < 0 ? d + ndim : d); }

/* ops.def's lowers column: the IR instruction a built-in becomes, and for
 * an elementwise one its unary or binary op (IR_COUNT, UN_COUNT,
 * BIN_COUNT: none, lowered by code of its own). */
typedef struct {
  IrOp ir;
  IrUnary un;
  IrBinary bin;
} Lowering;
static const Lowering builtin_lowering[BI_COUNT] = {
#define IR(op) {IR_##op, UN_COUNT, BIN_COUNT}
#define UN(op) {IR_UNARY, UN_##op, BIN_COUNT}
#define BIN(op) {IR_BINARY, UN_COUNT, BIN_##op}
#define OWN {IR_COUNT, UN_COUNT, BIN_COUNT}
#define OP(id, name, cls, named, lo, hi, rule, lowers, flags, dflt) [BI_##id] = lowers,
#include "ops.def"
#undef OP
#undef IR
#undef UN
#undef BIN
#undef OWN
};

/* ops.def's lowers column as an IR op (transitions.h: the collectives'
 * table finds a transition's instruction by it) */
IrOp transition_ir_op(Builtin op) { return builtin_lowering[op].ir; }

/* The elementwise op of an operator on tensors (BIN_COUNT: none). */
static IrBinary binary_op(OpKind op) {
  switch (op) {
  case OP_ADD: return BIN_ADD;
  case OP_SUB: return BIN_SUB;
  case OP_MUL: return BIN_MUL;
  case OP_DIV: return BIN_DIV;
  case OP_LT: return BIN_LT;
  case OP_LE: return BIN_LE;
  case OP_GT: return BIN_GT;
  case OP_GE: return BIN_GE;
  case OP_EQ: return BIN_EQ;
  case OP_NE: return BIN_NE;
  default: return BIN_COUNT;
  }
}

/* a op b for tensors and host values, in any mix. */
static int lower_arith(Lower *L, Span sp, Type *rt, IrBinary op, OpKind hostop, Expr *a, Expr *b) {
  int va = lower_expr(L, a), vb = lower_expr(L, b);
  bool ha = ir_is_host(a->ty), hb = ir_is_host(b->ty);
  if (ha && hb) {
    IrInst *in = emit(L, IR_HOST_BINARY, sp);
    ir_set_args(L->c, in, 2, (int[]){va, vb});
    IR_I(in, HOST_OP) = hostop;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  if (ha || hb) {
    IrInst *in = emit(L, IR_BINARY_SCALAR, sp);
    ir_set_args(L->c, in, 2, ha ? (int[]){vb, va} : (int[]){va, vb});
    in->binop = op;
    IR_I(in, SCALAR_LEFT) = ha;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  IrInst *in = emit(L, IR_BINARY, sp);
  ir_set_args(L->c, in, 2, (int[]){va, vb});
  in->binop = op;
  in->dst[0] = value(L, rt, NULL);
  in->ndst = 1;
  return in->dst[0];
}

static Expr *pos_arg(Expr *call, int i) {
  Arg *a = call_arg(call, i);
  return a ? a->value : NULL;
}

static Expr *named(Lower *L, Expr *call, const char *name) {
  Arg *a = call_named(L->k, call, name);
  return a ? a->value : NULL;
}

static double num_arg(Expr *e, double dflt) {
  if (!e)
    return dflt;
  if (e->kind == EX_FLOAT)
    return e->fval;
  if (e->kind == EX_INT)
    return (double)e->ival;
  if (e->kind == EX_UNARY)
    return -num_arg(e->lhs, -dflt);
  if (e->sym && e->sym->kind == SYM_CONST)
    return e->sym->is_float ? e->sym->fval : (double)e->sym->ival;
  return dflt;
}

/* Whether num_arg() knows e's value: a literal, a negated one, a constant. */
static bool is_number(Expr *e) {
  if (e->kind == EX_FLOAT || e->kind == EX_INT)
    return true;
  if (e->kind == EX_UNARY)
    return is_number(e->lhs);
  return e->sym && e->sym->kind == SYM_CONST;
}

static IrLType ltype_ir(LType lt) { return lt.kind == LT_R ? LTY_R : lt.kind == LT_I ? LTY_I : lt.kind == LT_P ? LTY_P : LTY_V; }

static int sdim_of(Expr *e, int ndim) {
  if (!e || e->kind != EX_LTYPE || e->lt.kind != LT_S)
    return IR_STACK;
  return norm_dim(int_arg(e->lhs), ndim);
}

static void set_axes(IrInst *in, Type *axes) {
  in->naxes = axes->naxes;
  memcpy(in->axes, axes->axes, sizeof in->axes);
}

/* dtype= and bwd_dtype= of a collective or cast (bwd_dtype defaults to dtype) */
static void set_wire(Lower *L, Expr *call, IrInst *in) {
  Expr *w = named(L, call, "dtype"), *b = named(L, call, "bwd_dtype");
  in->wire = w && w->kind == EX_TYPE ? w->type->dtype : DT_NONE;
  in->bwd_wire = b && b->kind == EX_TYPE ? b->type->dtype : in->wire;
}

/* The planned steps (redistribute.c) from `from` to `to` of the value v,
 * each one IR collective or convert; `s` marks them for --comm-report.
 * redistribute(x, T) (its dtype=, bwd_dtype= from `call`), and the `x: T`
 * and `-> T` of local_map (call NULL). */
static int lower_plan(Lower *L, int v, Type *from, Type *to, Span sp, Expr *call, const char *what, const char *label) {
  RsPlan plan;
  if (!rs_plan(L->c, L->k->mesh, from, to, true, &plan, NULL, NULL, NULL)) {
    unsupported(L, sp, what);
    return -1;
  }
  const char *note = rs_plan_note(L->c, L->k->mesh, from, to);
  if (label) /* --comm-report's note says where the plan comes from */
    note = note ? arena_sprintf(&L->c->arena, "%s; %s", label, note) : label;
  static const IrOp irops[] = {[RS_ALL_REDUCE] = IR_ALL_REDUCE, [RS_ALL_GATHER] = IR_ALL_GATHER,
                               [RS_REDUCE_SCATTER] = IR_REDUCE_SCATTER, [RS_ALL_TO_ALL] = IR_ALL_TO_ALL,
                               [RS_CONVERT] = IR_CONVERT};
  if (plan.nsteps == 0) {
    IrInst *in = emit(L, IR_COPY, sp);
    ir_set_args(L->c, in, 1, &v);
    in->redistribute = true;
    in->s = note;
    in->dst[0] = value(L, to, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  for (int i = 0; i < plan.nsteps; i++) {
    RsStep *st = &plan.steps[i];
    IrInst *in = emit(L, irops[st->op], sp);
    ir_set_args(L->c, in, 1, &v);
    in->naxes = st->naxes;
    memcpy(in->axes, st->axes, sizeof in->axes);
    in->redistribute = true;
    in->s = i == 0 ? note : NULL;
    if (call)
      set_wire(L, call, in);
    switch (st->op) {
    case RS_ALL_REDUCE: IR_I(in, REDUCE) = RED_SUM; break;
    case RS_ALL_GATHER: IR_I(in, DIM) = st->src_dim; break;
    case RS_REDUCE_SCATTER: IR_I(in, DIM) = st->dst_dim; break;
    case RS_ALL_TO_ALL:
      IR_I(in, SRC_DIM) = st->src_dim;
      IR_I(in, DST_DIM) = st->dst_dim;
      break;
    case RS_CONVERT:
      IR_I(in, SRC) = ltype_ir((LType){st->src, 0});
      IR_I(in, DST) = ltype_ir((LType){st->dst, 0});
      IR_I(in, DIM) = st->dst_dim >= 0 ? st->dst_dim : st->src_dim;
      break;
    }
    in->dst[0] = v = value(L, i + 1 == plan.nsteps ? to : st->out, NULL);
    in->ndst = 1;
  }
  return v;
}

static int lower_collective(Lower *L, Expr *call, Builtin op) {
  Expr *x = pos_arg(call, 0), *axes = pos_arg(call, 1);
  if (axes->kind == EX_TYPE) /* redistribute(x, T) */
    return lower_plan(L, lower_expr(L, x), x->ty, call->ty, call->span, call, "this redistribute(x, T)", NULL);
  int vx = lower_expr(L, x);
  if (op == BI_PPERMUTE) {
    IrInst *in = emit(L, IR_PPERMUTE, call->span);
    ir_set_args(L->c, in, 1, &vx);
    set_axes(in, axes->ty);
    IR_I(in, SHIFT) = int_arg(named(L, call, "shift"));
    in->dst[0] = value(L, call->ty, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  Expr *src = named(L, call, "src"), *dst = named(L, call, "dst");
  LType ls = src ? src->ty->ltv : (LType){LT_P, 0}, ld = dst->ty->ltv;
  int nd = x->ty->ndim;
  IrOp irop = builtin_lowering[op].ir;
  if (op == BI_REDISTRIBUTE) { /* redistribute(x, a, src, dst): the one collective that does it */
    const Transition *t =
        transition_redistribute(ls.kind == LT_S ? LT_V : ls.kind, ld.kind == LT_S ? LT_V : ld.kind);
    irop = t ? builtin_lowering[t->op].ir : IR_CONVERT;
  }
  IrInst *in = emit(L, irop, call->span);
  ir_set_args(L->c, in, 1, &vx);
  set_axes(in, axes->ty);
  set_wire(L, call, in);
  Expr *o = named(L, call, "op");
  const char *on = o && o->kind == EX_NAME ? o->name : "sum";
  IrReduceOp red = !strcmp(on, "avg") ? RED_AVG : !strcmp(on, "max") ? RED_MAX : !strcmp(on, "min") ? RED_MIN : RED_SUM;
  switch (irop) {
  case IR_ALL_REDUCE: IR_I(in, REDUCE) = red; break;
  case IR_ALL_GATHER: IR_I(in, DIM) = sdim_of(src, nd); break;
  case IR_REDUCE_SCATTER:
    IR_I(in, DIM) = sdim_of(dst, nd);
    IR_I(in, REDUCE) = red;
    break;
  case IR_ALL_TO_ALL:
    IR_I(in, SRC_DIM) = sdim_of(src, nd);
    IR_I(in, DST_DIM) = sdim_of(dst, nd);
    break;
  case IR_CONVERT:
  case IR_REINTERPRET:
    IR_I(in, SRC) = ltype_ir(ls);
    IR_I(in, DST) = ltype_ir(ld);
    IR_I(in, DIM) = ld.kind == LT_S ? sdim_of(dst, nd) : ls.kind == LT_S ? sdim_of(src, nd) : IR_STACK;
    break;
  default: break;
  }
  in->dst[0] = value(L, call->ty, NULL);
  in->ndst = 1;
  return in->dst[0];
}

/* cross_entropy's reduction= */
static IrCeReduction ce_reduction(Expr *e) {
  if (!e || e->kind != EX_STRING || !strcmp(e->str, "mean"))
    return CE_MEAN;
  return !strcmp(e->str, "sum") ? CE_SUM : CE_NONE;
}

/* A value where a tensor of the result's dtype is wanted: a host number
 * (a literal operand of where) becomes a 0-d tensor. */
static int scalar_like(Lower *L, Expr *e, const Type *like) {
  int v = lower_expr(L, e);
  if (!ir_is_host(e->ty))
    return v;
  Type *t = type_clone(L->c, like);
  t->ndim = 0;
  return to_tensor(L, v, t, e->span);
}

/* The host values and the mask and selection ops of SPEC 13. */
static int lower_select(Lower *L, Expr *call, Builtin op) {
  Span sp = call->span;
  Type *rt = call->ty;
  Expr *x = pos_arg(call, 0);
  IrInst *in;
  switch (op) {
  case BI_ITEM: {
    int v = lower_expr(L, x);
    return emit1(L, IR_ITEM, sp, rt, 1, &v);
  }
  case BI_AXIS_SIZE: /* the run-time size of the axis, as a size */
    in = emit(L, IR_HOST_SIZE, sp);
    in->size = size_int(1);
    for (int i = 0; i < x->ty->naxes; i++)
      in->size = size_mul(in->size, size_axis(x->ty->axes[i]));
    break;
  case BI_WALL_TIME:
    in = emit(L, IR_HOST_WALL_TIME, sp);
    break;
  case BI_AXIS_INDEX:
    in = emit(L, IR_AXIS_INDEX, sp);
    set_axes(in, x->ty);
    break;
  case BI_SHARD_OFFSET:
  case BI_SHARD_EXTENT: { /* the torch.chunk split of a host size: a host int (this rank's), as an i32 scalar */
    int n = lower_expr(L, x);
    in = emit(L, IR_SHARD_RANGE, sp);
    ir_set_args(L->c, in, 1, &n);
    set_axes(in, pos_arg(call, 1)->ty);
    IR_I(in, EXTENT) = op == BI_SHARD_EXTENT;
    in->dst[0] = value(L, host_type(L, TY_INT), NULL);
    in->ndst = 1;
    return to_tensor(L, in->dst[0], rt, sp);
  }
  case BI_IOTA:
    in = emit(L, IR_IOTA, sp);
    in->t = rt;
    IR_I(in, DIM) = norm_dim(int_arg(named(L, call, "dim")), rt->ndim);
    break;
  case BI_WHERE: {
    int args[3] = {lower_expr(L, x), scalar_like(L, pos_arg(call, 1), rt), scalar_like(L, pos_arg(call, 2), rt)};
    return emit1(L, IR_WHERE, sp, rt, 3, args);
  }
  case BI_TAKE_ALONG_DIM: {
    int args[2] = {lower_expr(L, x), lower_expr(L, pos_arg(call, 1))};
    in = emit(L, IR_TAKE_ALONG_DIM, sp);
    ir_set_args(L->c, in, 2, args);
    IR_I(in, DIM) = norm_dim(int_arg(named(L, call, "dim")), x->ty->ndim);
    break;
  }
  case BI_DROPOUT: {
    Expr *p = named(L, call, "p");
    int args[3] = {lower_expr(L, x), lower_expr(L, named(L, call, "seed")),
                   p ? lower_expr(L, p) : host_const(L, sp, TY_FLOAT, 0, 0.5)};
    in = emit(L, IR_DROPOUT, sp);
    ir_set_args(L->c, in, 3, args);
    in->t = x->ty;
    /* the axes where x varies without a layout: each rank's own mask */
    for (int a = 0; a < L->k->naxes; a++)
      if (x->ty->lt[a] == LT_V && !type_spec_has(x->ty, a, NULL))
        in->axes[in->naxes++] = a;
    break;
  }
  default: unsupported(L, sp, builtin_name[op]); return -1;
  }
  in->dst[0] = value(L, rt, NULL);
  in->ndst = 1;
  return in->dst[0];
}

/* The positional arguments' values, in a new array of *n. */
static int *lower_args(Lower *L, Expr *call, int *n) {
  int count = 0;
  for (Arg *a = call->args; a; a = a->next)
    count += !a->name;
  int *out = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(count + 1));
  *n = 0;
  for (Arg *a = call->args; a; a = a->next)
    if (!a->name)
      out[(*n)++] = lower_expr(L, a->value);
  return out;
}

/* ---- a whole record at once (check_record.c has the rules) ---- */

/* global_norm(x, squared=): the leaves placed alike (the same letter on
 * every axis once V is read as P) form a group, in the order of its first
 * field; each group's squares are summed on each rank by one multi-tensor
 * sum_squares over its leaves in field order (each leaf's squares summed in
 * order, the leaves' sums added in field order: a 0-d value P on the axes
 * where the leaves are V), each group all-reduced over its P axes (one
 * all-reduce per group) and reinterpreted R -> I where the result is I, the
 * groups added in order, then sqrt unless squared=true.  sum_squares has
 * its own backward rule (2 x dy); the rest are existing IR ops. */
static int lower_global_norm(Lower *L, Expr *call) {
  Span sp = call->span;
  Type *rt = call->ty;
  Expr *x = pos_arg(call, 0), *sq = named(L, call, "squared");
  int naxes = L->k->naxes, n;
  int *leaves = lower_leaves(L, x, &n);
  int *gsum = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(n + 1)), ng = 0;
  int *group = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(n + 1));
  Type **gty = arena_alloc(&L->c->arena, sizeof(Type *) * (size_t)(n + 1));
  for (int j = 0; j < n; j++) {
    Type *ft = type_leaf(x->ty, j);
    Type *st = type_scalar(L->c, rt->dtype, naxes, LT_R);
    st->local = rt->local;
    for (int a = 0; a < naxes; a++)
      st->lt[a] = ft->lt[a] == LT_V ? LT_P : ft->lt[a];
    int g = 0;
    while (g < ng && memcmp(gty[g]->lt, st->lt, sizeof st->lt) != 0)
      g++;
    if (g == ng)
      gty[ng++] = st;
    group[j] = g;
  }
  int *args = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(n + 1));
  for (int g = 0; g < ng; g++) {
    int na = 0;
    for (int j = 0; j < n; j++)
      if (group[j] == g)
        args[na++] = leaves[j];
    gsum[g] = emit1(L, IR_SUM_SQUARES, sp, gty[g], na, args);
  }
  int total = -1;
  for (int g = 0; g < ng; g++) {
    int v = gsum[g];
    Type *cur = gty[g];
    for (int pass = 0; pass < 2; pass++) { /* all_reduce the P axes, then reinterpret R -> I */
      LTypeKind from = pass == 0 ? LT_P : LT_R;
      Type *next = type_clone(L->c, cur);
      IrInst *in = NULL;
      for (int a = 0; a < naxes; a++)
        if (cur->lt[a] == from && (pass == 0 || rt->lt[a] == LT_I)) {
          if (!in)
            in = emit(L, pass == 0 ? IR_ALL_REDUCE : IR_REINTERPRET, sp);
          in->axes[in->naxes++] = a;
          next->lt[a] = LT_I;
        }
      if (!in)
        continue;
      ir_set_args(L->c, in, 1, &v);
      if (pass == 0) {
        IR_I(in, REDUCE) = RED_SUM;
      } else {
        IR_I(in, SRC) = LTY_R;
        IR_I(in, DST) = LTY_I;
        IR_I(in, DIM) = IR_STACK;
      }
      in->dst[0] = v = value(L, next, NULL);
      in->ndst = 1;
      cur = next;
    }
    total = total < 0 ? v : emit1(L, IR_BINARY, sp, rt, 2, (int[]){total, v});
    if (g > 0)
      L->b->tail->binop = BIN_ADD;
  }
  if (sq && sq->kind == EX_BOOL && sq->ival)
    return total;
  IrInst *in = emit(L, IR_UNARY, sp);
  ir_set_args(L->c, in, 1, &total);
  in->unop = UN_SQRT;
  in->dst[0] = value(L, rt, NULL);
  in->ndst = 1;
  return in->dst[0];
}

/* scale_by(x, s): each leaf times s, where s is first reinterpreted I -> R
 * on the axes where s is I and the leaf is not (the checker's rule). */
static int *lower_scale_by(Lower *L, Expr *call, int *n) {
  Span sp = call->span;
  Expr *x = pos_arg(call, 0), *se = pos_arg(call, 1);
  int naxes = L->k->naxes;
  int *leaves = lower_leaves(L, x, n);
  int s = lower_expr(L, se);
  int *out = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(*n + 1));
  /* one reinterpretation of s per placement, all before the products (the
   * leaves that share one read the same value, and their loops are
   * consecutive: one multi-tensor launch on the CUDA target) */
  int *done = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(*n + 1));
  for (int j = 0; j < *n; j++) {
    Type *ft = type_leaf(x->ty, j), *su = type_clone(L->c, se->ty);
    done[j] = -1;
    for (int a = 0; a < naxes; a++)
      if (se->ty->lt[a] == LT_I && ft->lt[a] != LT_I)
        su->lt[a] = LT_R;
    for (int i = 0; i < j && done[j] < 0; i++)
      if (done[i] >= 0 && memcmp(L->f->values[done[i]].type->lt, su->lt, sizeof su->lt) == 0)
        done[j] = done[i];
    IrInst *in = NULL;
    for (int a = 0; a < naxes && done[j] < 0; a++)
      if (se->ty->lt[a] == LT_I && ft->lt[a] != LT_I) {
        if (!in)
          in = emit(L, IR_REINTERPRET, sp);
        in->axes[in->naxes++] = a;
      }
    int sv = done[j] >= 0 ? done[j] : s;
    if (in) {
      ir_set_args(L->c, in, 1, &s);
      IR_I(in, SRC) = LTY_I;
      IR_I(in, DST) = LTY_R;
      IR_I(in, DIM) = IR_STACK;
      in->dst[0] = sv = done[j] = value(L, su, NULL);
      in->ndst = 1;
    }
    out[j] = sv;
  }
  for (int j = 0; j < *n; j++) { /* the products after the reinterpretations: consecutive loops */
    out[j] = emit1(L, IR_BINARY, sp, type_leaf(call->ty, j), 2, (int[]){leaves[j], out[j]});
    L->b->tail->binop = BIN_MUL;
  }
  return out;
}

static int lower_builtin(Lower *L, Expr *call, Builtin op) {
  Span sp = call->span;
  Type *rt = call->ty;
  int *args, n;
  IrUnary u = builtin_lowering[op].un;
  if (u != UN_COUNT) {
    int x = lower_expr(L, pos_arg(call, 0));
    IrInst *in = emit(L, ir_is_host(rt) ? IR_HOST_MATH : IR_UNARY, sp);  /* a host number: exp(0.5) */
    ir_set_args(L->c, in, 1, &x);
    in->unop = u;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  switch (op) {
  case BI_GLOBAL_NORM: return lower_global_norm(L, call);
  case BI_SCALE_BY: {
    int k, *v = lower_scale_by(L, call, &k);
    return k ? v[0] : -1;
  }
  case BI_POW:
  case BI_MAX:
  case BI_MIN:
    if (ir_is_host(rt)) { /* pow(0.9, step) on host numbers */
      int ab[2] = {lower_expr(L, pos_arg(call, 0)), lower_expr(L, pos_arg(call, 1))};
      IrInst *in = emit(L, IR_HOST_MATH, sp);
      ir_set_args(L->c, in, 2, ab);
      in->binop = builtin_lowering[op].bin;
      in->dst[0] = value(L, rt, NULL);
      in->ndst = 1;
      return in->dst[0];
    }
    return lower_arith(L, sp, rt, builtin_lowering[op].bin, OP_ADD, pos_arg(call, 0), pos_arg(call, 1));
  case BI_SUM:
  case BI_MEAN:
  case BI_AMAX:
  case BI_ARGMAX:
  case BI_ARGMIN:
  case BI_CUMSUM:
  case BI_SOFTMAX:
  case BI_LOG_SOFTMAX: {
    Expr *x = pos_arg(call, 0);
    int v = lower_expr(L, x);
    Expr *d = named(L, call, "dim"), *kd = named(L, call, "keepdim");
    int nd = x->ty->ndim, dim = d ? norm_dim(int_arg(d), nd) : builtin_flags[op] & OPF_KEEPS_SHAPE ? nd - 1 : IR_ALL_DIMS;
    /* a mean over sharded dims (global code, out_partial_axes=): each rank's
     * sum over the global count, whatever its block's size (SPEC 4) */
    Size count = size_int(1);
    bool sharded = false;
    for (int i = 0; op == BI_MEAN && !x->ty->local && i < nd; i++)
      if (dim == IR_ALL_DIMS || dim == i) {
        sharded |= x->ty->spec[i][0] >= 0;
        count = size_mul(count, x->ty->shape[i]);
      }
    IrInst *in = emit(L, sharded ? IR_SUM : builtin_lowering[op].ir, sp);
    ir_set_args(L->c, in, 1, &v);
    IR_I(in, DIM) = dim;
    if (ir_declares(in->op, IRO_KEEPDIM))
      IR_I(in, KEEPDIM) = kd && kd->kind == EX_BOOL && kd->ival;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    if (!sharded)
      return in->dst[0];
    IrInst *n = emit(L, IR_HOST_SIZE, sp);
    n->size = count;
    n->dst[0] = value(L, host_type(L, TY_INT), NULL);
    n->ndst = 1;
    IrInst *q = emit(L, IR_BINARY_SCALAR, sp);
    ir_set_args(L->c, q, 2, (int[]){in->dst[0], n->dst[0]});
    q->binop = BIN_DIV;
    q->dst[0] = value(L, rt, NULL);
    q->ndst = 1;
    return q->dst[0];
  }
  case BI_LAYER_NORM:
  case BI_RMS_NORM: {
    args = lower_args(L, call, &n);
    IrInst *in = emit(L, builtin_lowering[op].ir, sp);
    ir_set_args(L->c, in, n, args);
    in->f = num_arg(named(L, call, "eps"), builtin_default[op]);
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_ATTENTION: { /* out, and each row's log-sum-exp (kept for the backward) */
    args = lower_args(L, call, &n);
    Expr *ca = named(L, call, "causal"), *sc = named(L, call, "scale"), *kl = named(L, call, "kv_len");
    int a4[4] = {args[0], args[1], args[2], kl ? lower_expr(L, kl) : -1};
    IrInst *in = emit(L, IR_ATTENTION, sp);
    ir_set_args(L->c, in, kl ? 4 : 3, a4);
    const Type *q = pos_arg(call, 0)->ty;
    long long e = 1;
    size_is_int(q->shape[q->ndim - 1], &e);
    IR_I(in, CAUSAL) = ca && ca->kind == EX_BOOL && ca->ival;
    in->f = sc ? num_arg(sc, 0) : 1.0 / sqrt((double)e);
    Type *lse = type_clone(L->c, rt);
    lse->ndim--;
    lse->dtype = q->dtype == DT_F64 ? DT_F64 : DT_F32;
    ir_reserve_dst(L->c, in, 2);
    in->dst[0] = value(L, rt, NULL);
    in->dst[1] = value(L, lse, NULL);
    in->ndst = 2;
    return in->dst[0];
  }
  case BI_CROSS_ENTROPY: {
    args = lower_args(L, call, &n);
    const Type *x = pos_arg(call, 0)->ty;
    int cd = x->ndim - 1;
    bool vp = x->spec[cd][0] >= 0; /* the classes split: vocabulary parallel */
    IrInst *in = emit(L, vp ? IR_CROSS_ENTROPY_VP : IR_CROSS_ENTROPY, sp);
    ir_set_args(L->c, in, 2, args);
    IR_I(in, CE_REDUCTION) = ce_reduction(named(L, call, "reduction"));
    if (!vp) {
      in->dst[0] = value(L, rt, NULL);
      in->ndst = 1;
      return in->dst[0];
    }
    /* the all-reduces' axes; each row's log-sum-exp, f64, R on them */
    Type *lse = type_clone(L->c, x);
    lse->ndim--;
    lse->dtype = DT_F64;
    for (int j = 0; j < MAX_MESH_AXES && x->spec[cd][j] >= 0; j++) {
      in->axes[in->naxes++] = x->spec[cd][j];
      lse->lt[x->spec[cd][j]] = LT_R;
    }
    ir_reserve_dst(L->c, in, 2);
    in->dst[0] = value(L, rt, NULL);
    in->dst[1] = value(L, lse, NULL);
    in->ndst = 2;
    return in->dst[0];
  }
  case BI_ITEM:
  case BI_AXIS_SIZE:
  case BI_WALL_TIME:
  case BI_AXIS_INDEX:
  case BI_SHARD_OFFSET:
  case BI_SHARD_EXTENT:
  case BI_IOTA:
  case BI_WHERE:
  case BI_TAKE_ALONG_DIM:
  case BI_DROPOUT: return lower_select(L, call, op);
  case BI_EMBEDDING:
  case BI_MATMUL:
    args = lower_args(L, call, &n);
    return emit1(L, builtin_lowering[op].ir, sp, rt, 2, args);
  case BI_EINSUM: {
    n = 0;
    for (Arg *a = call->args->next; a; a = a->next)
      n += !a->name;
    args = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(n + 1));
    n = 0;
    for (Arg *a = call->args->next; a; a = a->next) /* after the subscripts */
      if (!a->name)
        args[n++] = lower_expr(L, a->value);
    IrInst *in = emit(L, IR_EINSUM, sp);
    ir_set_args(L->c, in, n, args);
    in->s = pos_arg(call, 0)->str;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_TRANSPOSE: {
    Expr *x = pos_arg(call, 0);
    int v = lower_expr(L, x);
    IrInst *in = emit(L, IR_TRANSPOSE, sp);
    ir_set_args(L->c, in, 1, &v);
    IR_I(in, DIM0) = norm_dim(int_arg(pos_arg(call, 1)), x->ty->ndim);
    IR_I(in, DIM1) = norm_dim(int_arg(pos_arg(call, 2)), x->ty->ndim);
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_PERMUTE: {
    Expr *x = pos_arg(call, 0);
    int v = lower_expr(L, x);
    IrInst *in = emit(L, IR_PERMUTE, sp);
    ir_set_args(L->c, in, 1, &v);
    int i = 0;
    for (Expr *d = pos_arg(call, 1)->elems; d && i < 7; d = d->next)
      IR_PERM(in, i++) = norm_dim(int_arg(d), x->ty->ndim);
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_RESHAPE:
  case BI_EXPAND: {
    int v = lower_expr(L, pos_arg(call, 0));
    IrInst *in = emit(L, op == BI_RESHAPE ? IR_RESHAPE : IR_EXPAND, sp);
    ir_set_args(L->c, in, 1, &v);
    in->t = rt;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_CONCAT: {
    n = 0;
    for (Expr *x = pos_arg(call, 0)->elems; x; x = x->next)
      n++;
    args = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(n + 1));
    n = 0;
    for (Expr *x = pos_arg(call, 0)->elems; x; x = x->next)
      args[n++] = lower_expr(L, x);
    IrInst *in = emit(L, IR_CONCAT, sp);
    ir_set_args(L->c, in, n, args);
    IR_I(in, DIM) = norm_dim(int_arg(named(L, call, "dim")), rt->ndim);
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_SLICE: {
    Expr *x = pos_arg(call, 0);
    int v = lower_expr(L, x);
    IrInst *in = emit(L, IR_SLICE, sp);
    ir_set_args(L->c, in, 1, &v);
    int d = norm_dim(int_arg(named(L, call, "dim")), x->ty->ndim);
    IR_I(in, DIM) = d;
    IR_I(in, START) = named(L, call, "start") ? int_arg(named(L, call, "start")) : 0;
    long long full = 0;
    size_is_int(x->ty->shape[d], &full);
    IR_I(in, END) = named(L, call, "end") ? int_arg(named(L, call, "end")) : full;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_ASTYPE: {
    int v = lower_expr(L, pos_arg(call, 0));
    IrInst *in = emit(L, IR_ASTYPE, sp);
    ir_set_args(L->c, in, 1, &v);
    IR_I(in, DTYPE) = rt->dtype;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_DETACH: {
    int v = lower_expr(L, pos_arg(call, 0));
    IrInst *in = emit(L, IR_COPY, sp);
    ir_set_args(L->c, in, 1, &v);
    IR_I(in, DETACH) = 1; /* no gradient flows through */
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_ZEROS_LIKE:
  case BI_ONES_LIKE: {
    int v = lower_expr(L, pos_arg(call, 0));
    return emit1(L, op == BI_ZEROS_LIKE ? IR_ZEROS_LIKE : IR_ONES_LIKE, sp, rt, 1, &v);
  }
  case BI_ZEROS:
  case BI_ONES:
  case BI_FULL: {
    Expr *fv = op == BI_FULL ? pos_arg(call, 1) : NULL;
    int v = fv && !is_number(fv) ? lower_expr(L, fv) : -1; /* full(T, step + 1): a host value */
    IrInst *in = emit(L, IR_FILL, sp);
    if (v >= 0)
      ir_set_args(L->c, in, 1, &v);
    in->t = rt;
    in->f = op == BI_ZEROS ? 0.0 : op == BI_ONES ? 1.0 : num_arg(fv, 0.0);
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_RANDN:
  case BI_UNIFORM: {
    /* seed, std, mean (randn) or seed, lo, hi (uniform): host values, so
     * any host expression (seed=1000 + step) */
    const char *p1 = op == BI_RANDN ? "std" : "lo", *p2 = op == BI_RANDN ? "mean" : "hi";
    Expr *se = named(L, call, "seed"), *e1 = named(L, call, p1), *e2 = named(L, call, p2);
    int args[3] = {se ? lower_expr(L, se) : host_const(L, sp, TY_INT, 0, 0),
                   e1 ? lower_expr(L, e1) : host_const(L, sp, TY_FLOAT, 0, op == BI_RANDN ? 1.0 : 0.0),
                   e2 ? lower_expr(L, e2) : host_const(L, sp, TY_FLOAT, 0, op == BI_RANDN ? 0.0 : 1.0)};
    IrInst *in = emit(L, op == BI_RANDN ? IR_RANDN : IR_UNIFORM, sp);
    ir_set_args(L->c, in, 3, args);
    in->t = rt;
    if (op == BI_RANDN)
      IR_I(in, MEAN_GIVEN) = e2 != NULL;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_TOPK: {
    Expr *x = pos_arg(call, 0), *d = named(L, call, "dim");
    int v = lower_expr(L, x);
    IrInst *in = emit(L, IR_TOPK, sp);
    ir_set_args(L->c, in, 1, &v);
    IR_I(in, DIM) = d ? norm_dim(int_arg(d), x->ty->ndim) : x->ty->ndim - 1;
    long long kv = 0;
    size_is_int(rt->shape[IR_I(in, DIM)], &kv); /* the checker made it an integer */
    IR_I(in, K) = kv;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_CATEGORICAL: {
    Expr *se = named(L, call, "seed"), *te = named(L, call, "temperature"), *ke = named(L, call, "top_k");
    int args[4] = {lower_expr(L, pos_arg(call, 0)), lower_expr(L, se),
                   te ? lower_expr(L, te) : host_const(L, sp, TY_FLOAT, 0, 1.0),
                   ke ? lower_expr(L, ke) : host_const(L, sp, TY_INT, 0, 0)};
    IrInst *in = emit(L, IR_CATEGORICAL, sp);
    ir_set_args(L->c, in, 4, args);
    in->t = rt;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_TOKEN_BATCH: {
    Expr *se = named(L, call, "seed"), *ve = named(L, call, "vocab");
    int args[2] = {lower_expr(L, se), ve ? lower_expr(L, ve) : host_const(L, sp, TY_INT, 0, 0)};
    IrInst *in = emit(L, IR_TOKEN_BATCH, sp);
    ir_set_args(L->c, in, 2, args);
    in->t = rt;
    in->s = pos_arg(call, 0)->str;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_LOAD: {
    IrInst *in = emit(L, IR_LOAD, sp);
    in->t = rt;
    in->s = pos_arg(call, 0)->str;
    in->dst[0] = value(L, rt, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_SAVE: {
    Expr *x = pos_arg(call, 1);
    Type *xt = x->ty;
    if (xt->kind == TY_RECORD) { /* a checkpoint directory: one file per field path */
      int n, *ids = lower_leaves(L, x, &n);
      IrInst *in = emit(L, IR_SAVE, sp);
      ir_set_args(L->c, in, n, ids);
      in->s = pos_arg(call, 0)->str;
      in->t = xt;
      in->strs = arena_alloc(&L->c->arena, sizeof(char *) * (size_t)(n + 1));
      for (int j = 0; j < n; j++)
        in->strs[j] = type_leaf_path(L->c, xt, j, ".");
      Expr *map = named(L, call, "map"); /* strs[n]: a .safetensors file's name map, or NULL */
      in->strs[n] = map ? map->str : NULL;
      return -1;
    }
    int v = lower_expr(L, x);
    IrInst *in = emit(L, IR_SAVE, sp);
    ir_set_args(L->c, in, 1, &v);
    in->s = pos_arg(call, 0)->str;
    in->t = xt;
    return -1;
  }
  case BI_EXISTS: {
    IrInst *in = emit(L, IR_EXISTS, sp);
    in->s = pos_arg(call, 0)->str;
    in->dst[0] = value(L, host_type(L, TY_BOOL), NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case BI_PRINT: {
    int n = 0;
    for (Arg *a = call->args; a; a = a->next)
      n++;
    const char **strs = arena_alloc(&L->c->arena, sizeof(char *) * (size_t)(n ? n : 1));
    int *vals = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(n ? n : 1));
    int i = 0;
    for (Arg *a = call->args; a; a = a->next, i++) {
      if (a->value->kind == EX_STRING) {
        strs[i] = a->value->str;
        vals[i] = -1;
      } else {
        vals[i] = lower_expr(L, a->value);
      }
    }
    IrInst *in = emit(L, IR_PRINT, sp);
    in->strs = strs;
    /* only real values are operands; PRINT keeps the mix in strs/i order */
    int nv = 0;
    for (int j = 0; j < n; j++)
      if (vals[j] >= 0)
        vals[nv++] = vals[j];
    ir_set_args(L->c, in, nv, vals);
    IR_I(in, NITEMS) = n;
    return -1;
  }
  case BI_ASSERT_TYPE: return -1;
  case BI_VALUE_AND_GRAD:
  case BI_GRAD: {
    /* the callee's parameters are its arguments' leaves; wrt= marks all
     * the leaves of each named argument, and each gradient is as many */
    Expr *fc = pos_arg(call, 0);
    IrInst *cin = lower_call_inst(L, fc, false);
    if (!cin)
      return -1;
    Expr *wrt = named(L, call, "wrt");
    char *mask = arena_alloc(&L->c->arena, (size_t)cin->nargs + 1);
    int j = 0, i = 0;
    Param *p = fc->lhs->sym->fn->params;
    for (Arg *a = fc->args; a; a = a->next, p = p ? p->next : NULL, i++) {
      if (p && p->type && p->type->is_axis)
        continue;
      int nl = type_nleaves(fc->inst->args[i]);
      for (Expr *w = wrt->kind == EX_TUPLE ? wrt->elems : wrt; w; w = wrt->kind == EX_TUPLE ? w->next : NULL)
        if (a->value->kind == EX_NAME && a->value->sym == w->sym)
          memset(mask + j, 1, (size_t)nl);
      j += nl;
    }
    cin->op = IR_VJP_CALL;
    cin->span = sp;
    cin->wrt = mask;
    IR_I(cin, VALUE_WANTED) = op == BI_VALUE_AND_GRAD;
    for (int i = 0, nl = type_nleaves(rt); i < nl; i++)
      ir_add_dst(L->c, cin, value(L, type_leaf(rt, i), NULL));
    return cin->dst[0];
  }
  case BI_REMAT: { /* the call, marked: autodiff recomputes it (SPEC 15) */
    IrInst *cin = lower_call_inst(L, pos_arg(call, 0), true);
    if (!cin)
      return -1;
    IR_I(cin, REMAT) = 1;
    return cin->ndst ? cin->dst[0] : -1;
  }
  default:
    if (builtin_class[op] == OPC_COLLECTIVE)
      return lower_collective(L, call, op);
    unsupported(L, sp, builtin_name[op]);
    return -1;
  }
}

/* A call of a user fn: its arguments' leaves in, its result's leaves out
 * (unless !results: the caller gives it its own). */
static IrInst *lower_call_inst(Lower *L, Expr *call, bool results) {
  Symbol *s = call->lhs->sym;
  IrFn *callee = call->inst ? call->inst->ir : NULL;
  if (!callee) {
    unsupported(L, call->span, "this call");
    return NULL;
  }
  int nargs = 0, n = 0, i = 0;
  for (Arg *a = call->args; a; a = a->next)
    nargs += type_nleaves(call->inst->args[i++]);
  int *args = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(nargs + 1));
  i = 0;
  Param *p = s->fn->params;
  for (Arg *a = call->args; a; a = a->next, p = p ? p->next : NULL, i++) {
    if (p && p->type && p->type->is_axis)
      continue;
    int nl, *ids = lower_leaves(L, a->value, &nl);
    for (int j = 0; j < nl; j++)
      args[n++] = to_tensor(L, ids[j], type_leaf(call->inst->args[i], j), a->value->span);
  }
  IrInst *in = emit(L, IR_CALL, call->span);
  ir_set_args(L->c, in, n, args);
  in->callee = callee;
  Type *rt = call->ty;
  if (results && rt->kind != TY_VOID && rt->kind != TY_ERROR)
    for (int i = 0, nl = type_nleaves(rt); i < nl; i++)
      ir_add_dst(L->c, in, value(L, type_leaf(rt, i), NULL));
  return in;
}

static int lower_call(Lower *L, Expr *call) {
  Symbol *s = call->lhs->sym;
  if (s->kind == SYM_BUILTIN)
    return lower_builtin(L, call, (Builtin)s->index);
  IrInst *in = lower_call_inst(L, call, true);
  return in && in->ndst ? in->dst[0] : -1;
}

static void lower_block(Lower *L, Stmt *block);

/* A host number where a tensor is wanted (a literal passed to a tensor
 * parameter, returned, or stored in a tensor variable) becomes a 0-d tensor. */
static int to_tensor(Lower *L, int v, Type *want, Span sp) {
  if (v < 0 || !want || want->kind != TY_TENSOR || !ir_is_host(L->f->values[v].type))
    return v;
  Type *t = type_clone(L->c, want);
  t->literal = false;
  IrInst *in = emit(L, IR_SCALAR, sp);
  ir_set_args(L->c, in, 1, &v);
  in->dst[0] = value(L, t, NULL);
  in->ndst = 1;
  return in->dst[0];
}

static int lower_expr(Lower *L, Expr *e) {
  Type *t = e->ty;
  if (t && t->kind == TY_RECORD) { /* (only where a record's value is unused) */
    int n;
    int *ids = lower_leaves(L, e, &n);
    return n ? ids[0] : -1;
  }
  switch (e->kind) {
  case EX_LEAF:
    for (int i = L->nmemo - 1; i >= 0; i--)
      if (L->memo[i].e == e->lhs)
        return L->memo[i].ids[e->ival < 0 ? 0 : e->ival];
    break;
  case EX_INT: return host_const(L, e->span, TY_INT, e->ival, (double)e->ival);
  case EX_FLOAT: return host_const(L, e->span, TY_FLOAT, 0, e->fval);
  case EX_BOOL: return host_const(L, e->span, TY_BOOL, e->ival, 0);
  case EX_NAME:
  case EX_FIELD: {
    Symbol *s = e->sym;
    if (!s && e->kind == EX_FIELD) { /* a record's tensor field */
      int n, *ids = lower_leaves(L, e, &n);
      return n ? ids[0] : -1;
    }
    if (!s)
      break;
    if (s->kind == SYM_CONST)
      return host_const(L, e->span, s->is_float ? TY_FLOAT : TY_INT, s->ival, s->is_float ? s->fval : (double)s->ival);
    if (s->kind == SYM_SHAPEVAR && s->info && !s->is_rest) {
      IrInst *in = emit(L, IR_HOST_SIZE, e->span);
      in->size = *(Size *)s->info;
      in->dst[0] = value(L, host_type(L, TY_INT), NULL);
      in->ndst = 1;
      return in->dst[0];
    }
    int id;
    bool is_var;
    Symbol *key = s->outer ? s->outer : s;
    while (key->outer)
      key = key->outer;
    if (!lookup(L, key, &id, &is_var))
      break;
    if (!is_var)
      return id;
    IrInst *in = emit(L, IR_VAR_GET, e->span);
    IR_I(in, SLOT) = id;
    in->dst[0] = value(L, L->f->vars[id].type, s->name);
    in->ndst = 1;
    return in->dst[0];
  }
  case EX_UNARY: {
    int x = lower_expr(L, e->lhs);
    if (ir_is_host(e->lhs->ty)) {
      IrInst *in = emit(L, e->op == OP_NOT ? IR_HOST_NOT : IR_HOST_NEG, e->span);
      ir_set_args(L->c, in, 1, &x);
      in->dst[0] = value(L, t, NULL);
      in->ndst = 1;
      return in->dst[0];
    }
    IrInst *in = emit(L, IR_UNARY, e->span);
    ir_set_args(L->c, in, 1, &x);
    in->unop = UN_NEG;
    in->dst[0] = value(L, t, NULL);
    in->ndst = 1;
    return in->dst[0];
  }
  case EX_BINARY:
    if (e->op == OP_MATMUL) {
      int args[2] = {lower_expr(L, e->lhs), lower_expr(L, e->rhs)};
      return emit1(L, IR_MATMUL, e->span, t, 2, args);
    }
    if (e->op == OP_AND || e->op == OP_OR || e->op == OP_MOD)
      return lower_arith(L, e->span, t, BIN_COUNT, e->op, e->lhs, e->rhs);
    return lower_arith(L, e->span, t, binary_op(e->op), e->op, e->lhs, e->rhs);
  case EX_CALL: return lower_call(L, e);
  case EX_INDEX: {
    int args[2] = {lower_expr(L, e->lhs), lower_expr(L, e->rhs)};
    return emit1(L, IR_INDEX, e->span, t, 2, args);
  }
  case EX_LOCAL_MAP: {
    /* the local tensors are the global ones' blocks: the body runs as is,
     * after the `x: T` redistributions (x bound to its new value inside,
     * as it was after) and before the `-> T` one */
    int nv = 0;
    for (AxisRef *v = e->lm_vars; v; v = v->next)
      nv++;
    struct { Symbol *key; int *ids, n; bool is_var, had; } *saved = arena_alloc(&L->c->arena, sizeof *saved * (size_t)(nv + 1));
    nv = 0;
    for (AxisRef *v = e->lm_vars; v; v = v->next) {
      if (!v->ty || !v->sym)
        continue;
      Symbol *key = v->sym;
      while (key->outer)
        key = key->outer;
      Expr *name = ast_expr(L->c, EX_NAME, v->span); /* the variable outside the block */
      name->name = v->name;
      name->sym = v->sym;
      name->ty = v->sym->info;
      int x = lower_expr(L, name);
      int y = lower_plan(L, x, v->sym->info, v->ty, v->type->span, NULL, "this local_map (x: T)",
                         arena_sprintf(&L->c->arena, "at local_map's boundary, '%s' into the block", v->name));
      if (y < 0)
        return host_const(L, e->span, TY_INT, 0, 0);
      saved[nv].key = key;
      saved[nv].had = lookup_leaves(L, key, &saved[nv].ids, &saved[nv].n, &saved[nv].is_var);
      nv++;
      bind(L, key, y, false);
    }
    Type *out = e->lm_out ? e->lm_out : t;
    int result = -1;
    L->lm_depth++;
    for (Stmt *s = e->body->body; s; s = s->next) {
      if (s->kind == ST_RETURN) {
        result = to_tensor(L, lower_expr(L, s->value), out, s->span);
        break;
      }
      lower_block(L, s);
    }
    L->lm_depth--;
    for (int i = nv - 1; i >= 0; i--)
      if (saved[i].had)
        bind_leaves(L, saved[i].key, saved[i].ids, saved[i].n, saved[i].is_var);
    if (result < 0)
      break;
    IrInst *in = emit(L, IR_COPY, e->span);
    ir_set_args(L->c, in, 1, &result);
    in->dst[0] = value(L, out, NULL);
    in->ndst = 1;
    if (out != t && e->lm_ret)
      return lower_plan(L, in->dst[0], out, t, e->lm_ret->span, NULL, "this local_map's -> T",
                        "at local_map's boundary, the result to the binding's type");
    return in->dst[0];
  }
  default: break;
  }
  unsupported(L, e->span, "this expression");
  return host_const(L, e->span, TY_INT, 0, 0);
}

/* ---- records: each is its leaves ---- */

static void memo_push(Lower *L, Expr *e, int *ids, int n) {
  ARENA_RESERVE(&L->c->arena, L->memo, L->nmemo, L->capmemo, 8);
  L->memo[L->nmemo].e = e;
  L->memo[L->nmemo].ids = ids;
  L->memo[L->nmemo++].n = n;
}

/* The leaves of e's value (one id for a tensor or host value), in a new
 * array of *n: a record's fields depth first, a tuple's parts in order. */
static int *lower_leaves(Lower *L, Expr *e, int *n) {
  Type *t = e->ty;
  *n = 0;
  if (!t || (t->kind != TY_RECORD && t->kind != TY_TUPLE && !(e->kind == EX_FIELD && !e->sym))) {
    int *one = arena_alloc(&L->c->arena, sizeof(int));
    *one = lower_expr(L, e);
    *n = *one >= 0 ? 1 : 0;
    return one;
  }
  int nl = type_nleaves(t);
  int *ids = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(nl + 1));
  if (e->map && t->kind == TY_RECORD) {
    /* an op field by field: each operand once, then the op on each leaf */
    int mark = L->nmemo;
    for (int i = 0; i < e->map->nops; i++) {
      int k;
      int *ops = lower_leaves(L, e->map->ops[i], &k);
      memo_push(L, e->map->ops[i], ops, k);
    }
    for (int i = 0; i < e->map->nleaf && i < nl; i++)
      ids[(*n)++] = lower_expr(L, e->map->leaf[i]);
    L->nmemo = mark;
    return ids;
  }
  switch (e->kind) {
  case EX_NAME:
  case EX_FIELD:
    if (e->kind == EX_FIELD && !e->sym) { /* r.f: a slice of r's leaves */
      int k, *all = lower_leaves(L, e->lhs, &k);
      Type *rt = e->lhs->ty;
      int f = type_field(rt, e->name), off = 0;
      for (int i = 0; i < f; i++)
        off += type_nleaves(rt->elems[i]);
      for (int i = 0; i < nl && off + i < k; i++)
        ids[(*n)++] = all[off + i];
      return ids;
    }
    if (e->sym) {
      Symbol *key = e->sym;
      while (key->outer)
        key = key->outer;
      int *got, k;
      bool is_var;
      if (lookup_leaves(L, key, &got, &k, &is_var)) {
        for (int i = 0; i < k && i < nl; i++) {
          if (!is_var) {
            ids[(*n)++] = got[i];
            continue;
          }
          IrInst *in = emit(L, IR_VAR_GET, e->span);
          IR_I(in, SLOT) = got[i];
          in->dst[0] = ids[(*n)++] = value(L, L->f->vars[got[i]].type, L->f->vars[got[i]].name);
          in->ndst = 1;
        }
        return ids;
      }
    }
    break;
  case EX_CALL: {
    Symbol *s = e->lhs->sym;
    if (s && s->kind == SYM_STRUCT) { /* Name(f=..., g=...): the fields in order */
      StructDecl *st = s->st;
      for (StructField *f = st->fields; f; f = f->next)
        for (Arg *a = e->args; a; a = a->next)
          if (a->name == f->name) {
            int k, *v = lower_leaves(L, a->value, &k);
            int fi = type_field(t, f->name), off = 0;
            for (int i = 0; i < fi; i++)
              off += type_nleaves(t->elems[i]);
            for (int i = 0; i < k; i++) {
              int id = to_tensor(L, v[i], type_leaf(t, off + i), a->value->span);
              if (id >= 0 && !L->f->values[id].hint) /* a runtime error names the field */
                L->f->values[id].hint = leaf_name(L, f->name, t->elems[fi], i);
              ids[(*n)++] = id;
            }
          }
      return ids;
    }
    if (s && s->kind == SYM_BUILTIN && s->index == BI_LOAD) { /* load(dir, Struct): a file per field */
      for (int j = 0; j < nl; j++) {
        IrInst *in = emit(L, IR_LOAD, e->span);
        in->t = type_leaf(t, j);
        in->s = pos_arg(e, 0)->str;
        in->strs = arena_alloc(&L->c->arena, 2 * sizeof(char *));
        in->strs[0] = type_leaf_path(L->c, t, j, ".");
        Expr *map = named(L, e, "map"); /* strs[1]: a .safetensors file's name map, or NULL */
        in->strs[1] = map ? map->str : NULL;
        in->dst[0] = ids[(*n)++] = value(L, in->t, NULL);
        in->ndst = 1;
      }
      return ids;
    }
    if (s && s->kind == SYM_FN) {
      IrInst *in = lower_call_inst(L, e, true);
      for (int i = 0; in && i < in->ndst; i++)
        ids[(*n)++] = in->dst[i];
      return ids;
    }
    if (s && s->kind == SYM_BUILTIN && s->index == BI_SCALE_BY) { /* a record scaled field by field */
      int k, *v = lower_scale_by(L, e, &k);
      for (int i = 0; i < k && i < nl; i++)
        ids[(*n)++] = v[i];
      return ids;
    }
    if (s && s->kind == SYM_BUILTIN && (s->index == BI_VALUE_AND_GRAD || s->index == BI_GRAD || s->index == BI_REMAT)) {
      lower_builtin(L, e, (Builtin)s->index);
      IrInst *in = L->b->tail;
      for (int i = 0; in && i < in->ndst; i++)
        ids[(*n)++] = in->dst[i];
      return ids;
    }
    break;
  }
  case EX_LEAF:
    for (int i = L->nmemo - 1; i >= 0; i--)
      if (L->memo[i].e == e->lhs) {
        for (int j = 0; j < L->memo[i].n && j < nl; j++)
          ids[(*n)++] = L->memo[i].ids[j];
        return ids;
      }
    break;
  default: break;
  }
  unsupported(L, e->span, "this record expression");
  return ids;
}

/* Binds the targets of `let a, b = e` to e's leaves, split by their types. */
static void bind_targets(Lower *L, Binding *targets, int *ids, int n, Type *t, Span sp) {
  int off = 0, i = 0;
  for (Binding *b = targets; b; b = b->next, i++) {
    Type *bt = targets->next && t->kind == TY_TUPLE ? (i < t->nelems ? t->elems[i] : type_error()) : t;
    int nl = type_nleaves(bt);
    if (off + nl > n)
      return;
    int *mine = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(nl + 1));
    for (int j = 0; j < nl; j++) {
      int v = to_tensor(L, ids[off + j], b->sym ? type_leaf(b->sym->info, j) : NULL, sp);
      mine[j] = v;
      if (v >= 0 && !L->f->values[v].hint)
        L->f->values[v].hint = leaf_name(L, b->name, bt, j);
    }
    if (b->sym)
      bind_leaves(L, b->sym, mine, nl, false);
    off += nl;
  }
}

/* Stores value leaves ids into the var slots of `slots`. */
static void set_vars(Lower *L, const int *slots, const int *ids, int n, Span sp) {
  for (int i = 0; i < n; i++) {
    int v = to_tensor(L, ids[i], L->f->vars[slots[i]].type, sp);
    IrInst *in = emit(L, IR_VAR_SET, sp);
    ir_set_args(L->c, in, 1, &v);
    IR_I(in, SLOT) = slots[i];
  }
}

static void lower_stmt(Lower *L, Stmt *s) {
  switch (s->kind) {
  case ST_LET: {
    int n, *ids = lower_leaves(L, s->value, &n);
    bind_targets(L, s->targets, ids, n, s->value->ty, s->value->span);
    return;
  }
  case ST_VAR: {
    Binding *b = s->targets;
    int n, *ids = lower_leaves(L, s->value, &n);
    Type *vt = b->sym && b->sym->info ? b->sym->info : s->value->ty;
    int *slots = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
      int v = to_tensor(L, ids[i], type_leaf(vt, i), s->value->span);
      Name name = leaf_name(L, b->name, vt, i);
      slots[i] = ir_var(L->c, L->f, L->f->values[v].type, name);
      IrInst *in = emit(L, IR_VAR_SET, s->span);
      ir_set_args(L->c, in, 1, &v);
      IR_I(in, SLOT) = slots[i];
      if (!L->f->values[v].hint)
        L->f->values[v].hint = name;
    }
    bind_leaves(L, b->sym, slots, n, true);
    return;
  }
  case ST_ASSIGN: {
    int n, *ids = lower_leaves(L, s->value, &n), off = 0;
    for (Binding *b = s->targets; b; b = b->next) {
      int *slots, k;
      bool is_var;
      if (!b->sym || !lookup_leaves(L, b->sym, &slots, &k, &is_var) || !is_var || off + k > n) {
        unsupported(L, s->span, "this assignment");
        return;
      }
      set_vars(L, slots, ids + off, k, s->value->span);
      off += k;
    }
    return;
  }
  case ST_RETURN: {
    int n = 0;
    for (Expr *e = s->value; e; e = e->next)
      n += type_nleaves(e->ty);
    int *vals = arena_alloc(&L->c->arena, sizeof(int) * (size_t)(n + 1));
    n = 0;
    for (Expr *e = s->value; e; e = e->next) {
      int k, *ids = lower_leaves(L, e, &k);
      for (int j = 0; j < k; j++, n++) {
        vals[n] = ids[j];
        if (L->lm_depth == 0 && n < L->f->nret)
          vals[n] = to_tensor(L, vals[n], L->f->ret_types[n], e->span);
      }
    }
    if (L->slots) {
      for (int r = 0; r < n && r < L->nret_slots; r++) {
        IrInst *in = emit(L, IR_VAR_SET, s->span);
        ir_set_args(L->c, in, 1, &vals[r]);
        IR_I(in, SLOT) = L->ret_slots[r];
      }
      int t = host_const(L, s->span, TY_BOOL, 1, 0);
      IrInst *in = emit(L, IR_VAR_SET, s->span);
      ir_set_args(L->c, in, 1, &t);
      IR_I(in, SLOT) = L->done;
      return;
    }
    IrInst *in = emit(L, IR_RETURN, s->span);
    ir_set_args(L->c, in, n, vals);
    return;
  }
  case ST_EXPR: lower_expr(L, s->value); return;
  case ST_FOR: {
    int lo = lower_expr(L, s->lo), hi = lower_expr(L, s->hi);
    IrInst *in = emit(L, IR_FOR, s->span);
    ir_set_args(L->c, in, 2, (int[]){lo, hi});
    in->dst[0] = value(L, host_type(L, TY_INT), s->targets->name);
    in->ndst = 1;
    bind(L, s->targets->sym, in->dst[0], false);
    IrBlock *saved = L->b;
    L->b = &in->body;
    lower_block(L, s->then);
    L->b = saved;
    return;
  }
  case ST_IF: {
    int cond = lower_expr(L, s->cond);
    if (!ir_is_host(s->cond->ty)) {
      IrInst *it = emit(L, IR_HOST_ITEM, s->cond->span);
      ir_set_args(L->c, it, 1, &cond);
      it->dst[0] = cond = value(L, host_type(L, TY_BOOL), NULL);
      it->ndst = 1;
    }
    IrInst *in = emit(L, IR_IF, s->span);
    ir_set_args(L->c, in, 1, &cond);
    IrBlock *saved = L->b;
    L->b = &in->body;
    lower_block(L, s->then);
    if (s->els) {
      L->b = &in->els;
      lower_block(L, s->els);
    }
    L->b = saved;
    return;
  }
  case ST_BLOCK: lower_block(L, s); return;
  }
}

/* Whether running s may return from the function. */
static bool may_return(Stmt *s) {
  if (s->kind == ST_RETURN)
    return true;
  if (s->kind != ST_IF)
    return false;
  for (Stmt *t = s->then->body; t; t = t->next)
    if (may_return(t))
      return true;
  if (s->els && s->els->kind == ST_IF)
    return may_return(s->els);
  for (Stmt *t = s->els ? s->els->body : NULL; t; t = t->next)
    if (may_return(t))
      return true;
  return false;
}

/* Lowers statements from s on; after one that may return, the rest runs
 * only if it did not. */
static void lower_stmts(Lower *L, Stmt *s) {
  for (; s; s = s->next) {
    lower_stmt(L, s);
    if (!L->slots || !s->next || !may_return(s))
      continue;
    IrInst *g = emit(L, IR_VAR_GET, s->span);
    IR_I(g, SLOT) = L->done;
    g->dst[0] = value(L, host_type(L, TY_BOOL), NULL);
    g->ndst = 1;
    IrInst *not = emit(L, IR_HOST_NOT, s->span);
    ir_set_args(L->c, not, 1, &g->dst[0]);
    not->dst[0] = value(L, host_type(L, TY_BOOL), NULL);
    not->ndst = 1;
    IrInst *br = emit(L, IR_IF, s->next->span);
    ir_set_args(L->c, br, 1, &not->dst[0]);
    IrBlock *saved = L->b;
    L->b = &br->body;
    lower_stmts(L, s->next);
    L->b = saved;
    return;
  }
}

static void lower_block(Lower *L, Stmt *block) {
  if (block->kind != ST_BLOCK)
    lower_stmt(L, block);
  else
    lower_stmts(L, block->body);
}

/* Whether a return appears anywhere but in tail position; *in_loop is set
 * when one is inside a loop. */
static bool early_return(Stmt *s, bool tail, bool *in_loop) {
  bool any = false;
  for (; s; s = s->next) {
    bool t = tail && !s->next;
    if (s->kind == ST_RETURN && !t)
      any = true;
    if (s->kind == ST_FOR && early_return(s->then->body, false, in_loop))
      any = *in_loop = true;
    if (s->kind == ST_IF) {
      any |= early_return(s->then->body, t, in_loop);
      if (s->els)
        any |= early_return(s->els->kind == ST_IF ? s->els : s->els->body, t, in_loop);
    }
  }
  return any;
}

static void lower_instance(Checker *k, Instance *inst, void *arg) {
  IrProgram *prog = arg;
  Compiler *c = k->c;
  FnDecl *fn = inst->fn;
  bool is_main = strcmp(fn->name, "main") == 0 && fn->module == c->main && !fn->params;
  const char *cname = arena_sprintf(&c->arena, "%s%s_%d", fn->module == c->main ? "" : arena_sprintf(&c->arena, "%s_", fn->module->name),
                                    fn->name, inst->id);
  IrFn *f = ir_fn_new(c, cname);
  f->inst = inst;
  f->fn = fn;
  f->span = fn->span;
  f->is_main = is_main;
  Lower L = {.c = c, .k = k, .prog = prog, .f = f, .b = &f->body};
  int i = 0, np = 0;
  for (Param *p = fn->params; p; p = p->next, i++)
    if (!(p->type && p->type->is_axis))
      np += type_nleaves(inst->args[i]);
  f->params = arena_alloc(&c->arena, sizeof(int) * (size_t)(np ? np : 1));
  i = 0;
  for (Param *p = fn->params; p; p = p->next, i++) {
    if (p->type && p->type->is_axis)
      continue;
    int nl = type_nleaves(inst->args[i]);
    int *ids = arena_alloc(&c->arena, sizeof(int) * (size_t)(nl + 1));
    for (int j = 0; j < nl; j++) {
      ids[j] = ir_value(c, f, type_leaf(inst->args[i], j), leaf_name(&L, p->name->name, inst->args[i], j));
      f->params[f->nparams++] = ids[j];
    }
    bind_leaves(&L, p->name->sym, ids, nl, false);
  }
  if (inst->ret) {
    f->nret = type_nleaves(inst->ret);
    f->ret_types = arena_alloc(&c->arena, sizeof(Type *) * (size_t)(f->nret + 1));
    for (int r = 0; r < f->nret; r++)
      f->ret_types[r] = type_leaf(inst->ret, r);
  }
  bool in_loop = false, early = early_return(fn->body->body, true, &in_loop);
  if (in_loop) /* (the checker ensures every path ends in a return) */
    unsupported(&L, fn->span, "a return inside a loop");
  Stmt *last = fn->body->body;
  while (last && last->next)
    last = last->next;
  if (early || (inst->ret && last && last->kind == ST_IF)) {
    L.slots = true;
    L.ret_slots = arena_alloc(&c->arena, sizeof(int) * (size_t)(f->nret + 1));
    for (int r = 0; r < f->nret; r++)
      L.ret_slots[r] = ir_var(c, f, f->ret_types[r], intern_cstr(c, "result"));
    L.nret_slots = f->nret;
    L.done = ir_var(c, f, host_type(&L, TY_BOOL), intern_cstr(c, "returned"));
    int no = host_const(&L, fn->span, TY_BOOL, 0, 0);
    IrInst *in = ir_emit(c, &f->body, IR_VAR_SET, fn->span);
    ir_set_args(c, in, 1, &no);
    IR_I(in, SLOT) = L.done;
  }
  lower_block(&L, fn->body);
  if (L.slots && L.nret_slots) {
    int *vals = arena_alloc(&c->arena, sizeof(int) * (size_t)L.nret_slots);
    for (int r = 0; r < L.nret_slots; r++) {
      IrInst *g = ir_emit(c, &f->body, IR_VAR_GET, last->span);
      IR_I(g, SLOT) = L.ret_slots[r];
      g->dst[0] = vals[r] = ir_value(c, f, f->ret_types[r], NULL);
      g->ndst = 1;
    }
    IrInst *ret = ir_emit(c, &f->body, IR_RETURN, last->span);
    ir_set_args(c, ret, L.nret_slots, vals);
  }
  inst->ir = f;
  IrFn **tail = &prog->fns;
  while (*tail)
    tail = &(*tail)->next;
  *tail = f;
  if (is_main)
    prog->main = f;
  if (!L.failed)
    ir_verify(c, f);
}

bool lower_program(Compiler *c, Mesh *mesh, IrProgram *out) {
  memset(out, 0, sizeof *out);
  out->mesh = mesh;
  int before = c->nerrors;
  check_and_lower(c, mesh, lower_instance, out, NULL);
  return c->nerrors == before;
}
