/* check.c: the type checker's driver (SPEC sections 4-7, 9, 10): the
 * recursion over expressions, statements and functions, function
 * instances (checked per call site, memoised), local_map blocks and the
 * program.  A built-in call goes to its rule, found by the op's name in
 * ops.def's rule column (check_<family>.c); the rules' shared helpers are
 * in check_rules.c, the messages in check_diag.c (DESIGN.md, "Types"). */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "redistribute.h"
#include "shardprop.h"

/* ---- built-ins ---- */

static Type *check_builtin_kind(Checker *k, Expr *call, Builtin op);

static Type *check_builtin(Checker *k, Expr *call, Builtin op) {
  if (!check_named_args(k, call, op))
    return type_error();
  Arg *a0 = builtin_flags[op] & OPF_RECORDS ? call_arg(call, 0) : NULL;
  if (a0) { /* look at the first argument: a record? */
    Type *t = check_expr(k, a0->value);
    if (t->kind == TY_RECORD) {
      if (builtin_class[op] == OPC_COLLECTIVE && call_arg(call, 1) && call_arg(call, 1)->value->kind == EX_TYPE) {
        check_error(k, call->span, "redistribute(x, T) takes a tensor; '%s' is a record", src_text(k, a0->value));
        help(k->c, "redistribute each field to its type, or use redistribute(x, axes, src=, dst=) on the record");
        return type_error();
      }
      return record_map(k, call, (Expr **[]){&a0->value}, 1, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]));
    }
  }
  Expr *outer = k->pre;
  if (a0)
    k->pre = a0->value; /* checked: the rule below takes its type as it is */
  Type *r = check_builtin_kind(k, call, op);
  k->pre = outer;
  return r;
}

/* ops.def's rule column: the checker function of each built-in. */
typedef Type *BuiltinRule(Checker *k, Expr *call, Builtin op);
static BuiltinRule *const builtin_rule[BI_COUNT] = {
#define OP(id, name, cls, named, lo, hi, rule, lowers, flags, dflt) [BI_##id] = rule,
#include "ops.def"
#undef OP
};

/* ops.def's arity columns, then the op's rule. */
static Type *check_builtin_kind(Checker *k, Expr *call, Builtin op) {
  if (builtin_min_args[op] >= 0 && !want_args(k, call, op, builtin_min_args[op], builtin_max_args[op]))
    return type_error();
  return builtin_rule[op](k, call, op);
}

/* ---- local semantics (SPEC 7, per mesh axis) ---- */

static unsigned local_mask(const Checker *k) {
  unsigned m = 0;
  for (int a = 0; a < k->naxes; a++)
    m |= check_axis_local(k, a) ? 1u << a : 0;
  return m;
}

/* Enters a local context on the axes `over` (added to those already local);
 * *saved keeps what leave_local() restores. */
typedef struct LocalSave {
  bool axis[MAX_MESH_AXES];
  int depth;
} LocalSave;

static void enter_local(Checker *k, const bool over[MAX_MESH_AXES], LocalSave *saved) {
  memcpy(saved->axis, k->local_axis, sizeof saved->axis);
  saved->depth = k->local_depth;
  if (k->local_depth == 0)
    memset(k->local_axis, 0, sizeof k->local_axis);
  for (int a = 0; a < k->naxes; a++)
    k->local_axis[a] |= over[a];
  k->local_depth++;
}

static void leave_local(Checker *k, const LocalSave *saved) {
  memcpy(k->local_axis, saved->axis, sizeof k->local_axis);
  k->local_depth = saved->depth;
}

/* ---- user functions: checked per call site ---- */

static void check_block(Checker *k, Stmt *block);
static void check_fn_body(Checker *k, FnDecl *fn);
static void dump_binding(Checker *k, Binding *b, Type *t);

static Instance *new_instance(Checker *k, FnDecl *fn, int nargs, Type **args) {
  Instance *in = arena_alloc(&k->c->arena, sizeof(Instance));
  in->fn = fn;
  in->nargs = nargs;
  in->args = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(nargs ? nargs : 1));
  if (nargs)
    memcpy(in->args, args, sizeof(Type *) * (size_t)nargs);
  for (Instance *o = k->instances; o; o = o->next)
    in->id += o->fn == fn;
  Instance **tail = &k->instances;
  while (*tail)
    tail = &(*tail)->next;
  *tail = in;
  return in;
}

/* Checks an instance's body; on success, hands it to the lowering while
 * its expressions carry this instance's types. */
static void run_instance(Checker *k, Instance *self, Inst *inst) {
  Instance *saved = k->current;
  k->current = self;
  int before = k->c->nerrors, failed_before = k->nfailed;
  check_fn_body(k, self->fn);
  /* an error reported before (by another instance of the same body) is not
   * counted in nerrors again, but this instance has it too */
  self->ok = k->c->nerrors == before && k->nfailed == failed_before &&
             (!self->fn->ret || (inst->ret && inst->ret->kind != TY_ERROR));
  /* without `-> RET`, the type of what the body returns (SPEC 13) */
  self->ret = self->fn->ret || (inst->returned && inst->ret && inst->ret->kind != TY_VOID) ? inst->ret : NULL;
  if (self->ret && self->ret->kind == TY_ERROR)
    self->ok = false;
  if (self->ok && k->lower && !k->symbolic)
    k->lower(k, self, k->lower_arg);
  k->current = saved;
}

static const char *lt_text_of(Checker *k, const Type *t, int a) {
  LType l = ltype_on(t, a);
  return l.kind == LT_S ? arena_sprintf(&k->c->arena, "S(%d)", l.sdim) : lt_name(l.kind);
}

/* The result of a local fn returned where some axes are global: it must not
 * vary on them (a V there has no layout in global code). */
static bool local_result_ok(Checker *k, Expr *call, FnDecl *fn, const Type *ret, const bool was_local[MAX_MESH_AXES]) {
  int n = type_nleaves(ret);
  for (int i = 0; i < n; i++) {
    const Type *t = type_leaf(ret, i);
    for (int a = 0; a < k->naxes && t->kind == TY_TENSOR; a++)
      if (!was_local[a] && t->lt[a] == LT_V) {
        check_error(k, call->span, "'%s' is a local fn returning a V value on mesh axis '%s', which is global here",
                    fn->name, axis_name(k, a));
        note_at(k->c, (Span){0, 0, 0}, "the result is %s; in global code a V value needs a layout", ck_type(k, t));
        help(k->c, "take '%s' local as well: local_map (...) over (..., %s) { ... }", axis_name(k, a), axis_name(k, a));
        return false;
      }
  }
  return true;
}

static bool is_axis_param(const Param *p) { return p->type && p->type->is_axis; }

/* The type a parameter takes from its argument: the argument's, as a
 * non-literal; a tensor that is not sharded, seen from a local fn, is a
 * local block (records: each field). */
static Type *param_type(Checker *k, Type *arg) {
  if (arg->kind == TY_RECORD) {
    Type *r = type_clone(k->c, arg);
    r->elems = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(arg->nelems + 1));
    for (int i = 0; i < arg->nelems; i++)
      r->elems[i] = param_type(k, arg->elems[i]);
    return r;
  }
  if (arg->kind != TY_TENSOR)
    return arg;
  Type *bound = type_clone(k->c, arg);
  bound->literal = false;
  if (check_all_local(k) && !bound->local) { /* a block seen from a local fn */
    bool any = false;
    for (int d = 0; d < bound->ndim; d++)
      any |= bound->spec[d][0] >= 0;
    bound->local = !any;
  }
  return bound;
}

/* The language has no dtype variables, so a library writes a function once
 * per dtype: NAME for f32 and NAME_bf16, NAME_f64 (stdlib/jax.spmd, nn.spmd's
 * _bf16 layers).  When an argument of dtype `have` meets a parameter of
 * another dtype and fn's module has the form for `have`, a help line with the
 * call rewritten to it. */
static void help_dtype_form(Checker *k, Expr *call, FnDecl *fn, DType have) {
  const char *name = fn->name;
  size_t n = strlen(name);
  static const char *const sufs[] = {"_bf16", "_f64", "_f32"};
  for (int i = 0; i < 3; i++) {
    size_t m = strlen(sufs[i]);
    if (n > m && strcmp(name + n - m, sufs[i]) == 0) {
      n -= m;
      break;
    }
  }
  const char *cands[2] = {arena_sprintf(&k->c->arena, "%.*s_%s", (int)n, name, dtype_name(have)),
                          have == DT_F32 ? arena_sprintf(&k->c->arena, "%.*s", (int)n, name) : NULL};
  for (int i = 0; i < 2; i++) {
    if (!cands[i] || strcmp(cands[i], name) == 0)
      continue;
    Symbol *s = module_lookup(fn->module, intern_cstr(k->c, cands[i]));
    if (!s || s->kind != SYM_FN)
      continue;
    const char *callee = src_text(k, call->lhs), *text = src_text(k, call);
    size_t cl = strlen(callee), fl = strlen(name);
    if (cl < fl || strncmp(text, callee, cl) != 0) { /* not the source text: name the form only */
      help(k->c, "for %s values call '%s'", dtype_name(have), cands[i]);
      return;
    }
    help_fix(k->c, call->span, arena_sprintf(&k->c->arena, "%.*s%s%s", (int)(cl - fl), callee, cands[i], text + cl),
             "for %s values call its %s form: %.*s%s%s", dtype_name(have), dtype_name(have), (int)(cl - fl), callee,
             cands[i], text + cl);
    return;
  }
}

/* Binds the shape variables of a signature type from an argument's type.
 * Only bare names (`N`, `..Rest`) bind; compound sizes are then compared. */
static void bind_shapes(Checker *k, TypeExpr *te, const Type *actual) {
  if (te->is_axis || actual->kind != TY_TENSOR)
    return;
  int nwritten = 0;
  for (Dim *d = te->dims; d; d = d->next)
    nwritten += !d->rest;
  int rest = actual->ndim - nwritten, i = 0;
  for (Dim *d = te->dims; d; d = d->next) {
    Symbol *s = d->size->kind == EX_NAME ? d->size->sym : NULL;
    if (d->rest) {
      if (rest < 0)
        return;
      if (s && !s->info) {
        Type *seq = type_new(k->c, TY_TENSOR);
        seq->ndim = rest;
        for (int j = 0; j < rest; j++)
          seq->shape[j] = actual->shape[i + j];
        s->info = seq;
      }
      i += rest;
      continue;
    }
    if (i >= actual->ndim)
      return;
    if (s && s->kind == SYM_SHAPEVAR && !s->info) {
      Size *v = arena_alloc(&k->c->arena, sizeof(Size));
      *v = actual->shape[i];
      /* a signature writes global sizes; a sharded dim's size is global too */
      s->info = v;
    }
    i++;
  }
}

/* forget the shape variables of fn's signature (an earlier instance's) */
static void forget_shapes(FnDecl *fn) {
  for (Param *p = fn->params; p; p = p->next)
    for (Dim *d = p->type ? p->type->dims : NULL; d; d = d->next)
      if (d->size->kind == EX_NAME && d->size->sym && d->size->sym->kind == SYM_SHAPEVAR)
        d->size->sym->info = NULL;
  for (TypeExpr *t = fn->ret; t; t = t->next)
    for (Dim *d = t->dims; d; d = d->next)
      if (d->size->kind == EX_NAME && d->size->sym && d->size->sym->kind == SYM_SHAPEVAR)
        d->size->sym->info = NULL;
}

/* A trial binding of fn's parameters to args, nothing reported: how many
 * parameters take their argument; fits[i] for each. The shape variables
 * are left bound by args. */
static int trial_fit(Checker *k, FnDecl *fn, Type **args, Expr **argx, bool *fits) {
  Compiler *c = k->c;
  int nerrors = c->nerrors, nfailed = k->nfailed, nfit = 0, i = 0;
  size_t nseen = k->nseen;
  bool mute = c->mute, suppress = c->suppress, dependent = k->value_dependent;
  Inst *chain = k->chain;
  c->mute = true;
  forget_shapes(fn);
  for (Param *p = fn->params; p; p = p->next, i++)
    if (p->type && !p->type->is_axis)
      bind_shapes(k, p->type, args[i]);
  i = 0;
  for (Param *p = fn->params; p; p = p->next, i++) {
    fits[i] = true;
    if (p->type && !is_axis_param(p) && args[i]->kind != TY_AXES) {
      bool named[MAX_MESH_AXES];
      Inst *saved = k->inst;
      Type *want = check_written_type(k, p->type, named);
      fits[i] = want && check_fits_any(k, argx[i]->span, want, named, args[i], p->name->name, "", argx[i]);
      k->inst = saved;
    }
    nfit += fits[i];
  }
  c->mute = mute;
  c->suppress = suppress;
  c->nerrors = nerrors;
  k->nfailed = nfailed;
  k->nseen = nseen;
  k->value_dependent = dependent;
  k->chain = chain;
  return nfit;
}

/* Two arguments that fit their parameters only the other way round (`wk`
 * passed for `wq` and `wq` for `wk`): reported as a swap, once, instead of
 * an error on each and false ones on the arguments whose shapes they bind.
 * True when reported. */
static bool report_swapped_args(Checker *k, Expr *call, FnDecl *fn, Type **args, Expr **argx, int n) {
  if (n < 2 || n > 64)
    return false;
  bool fits[65], swapped[65];
  int nfit = trial_fit(k, fn, args, argx, fits);
  if (nfit == n)
    return false;
  Param *params[65];
  int np = 0;
  for (Param *p = fn->params; p && np < n; p = p->next)
    params[np++] = p;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      /* with shape variables the swapped pair may fit and the arguments
       * whose sizes they bound not: every pair is tried when there are few */
      if ((n > 16 && fits[i] && fits[j]) || is_axis_param(params[i]) || is_axis_param(params[j]) ||
          !params[i]->type || !params[j]->type || args[i]->kind != TY_TENSOR || args[j]->kind != TY_TENSOR ||
          type_same(args[i], args[j], k->naxes))
        continue;
      Type *t = args[i];
      Expr *x = argx[i];
      args[i] = args[j], argx[i] = argx[j], args[j] = t, argx[j] = x;
      bool all = trial_fit(k, fn, args, argx, swapped) == n;
      args[j] = args[i], argx[j] = argx[i], args[i] = t, argx[i] = x;
      if (!all)
        continue;
      const char *a = src_text(k, argx[i]), *b = src_text(k, argx[j]);
      check_error(k, call->span, "arguments %d and %d of '%s' fit its parameters '%s' and '%s' only the other way round",
                  i + 1, j + 1, fn->name, params[j]->name->name, params[i]->name->name);
      StrBuf sb;
      sb_init(&sb, &k->c->arena);
      sb_printf(&sb, "%s(", fn->name);
      for (int m = 0; m < n; m++)
        sb_printf(&sb, "%s%s", m ? ", " : "", src_text(k, argx[m == i ? j : m == j ? i : m]));
      sb_putc(&sb, ')');
      help_fix(k->c, call->span, sb.len <= 60 ? sb.data : NULL, "did you swap '%s' and '%s'? %s", a, b, sb.data);
      return true;
    }
  return false;
}

static Type *check_fn_call(Checker *k, Expr *call, FnDecl *fn) {
  for (Inst *i = k->inst; i; i = i->parent)
    if (i->fn == fn) {
      check_error(k, call->span, "'%s' calls itself; recursion is not supported", fn->name);
      help(k->c, "write the repetition as a for loop");
      return type_error();
    }
  if ((fn->flags & FN_LOCAL) && !k->local_depth) {
    check_error(k, call->span, "'%s' is a local fn; global code calls it through local_map", fn->name);
    help(k->c, "let y: T = local_map (x) over (axes) { return %s(x); };", fn->name);
    return type_error();
  }
  bool was_local[MAX_MESH_AXES];
  for (int a = 0; a < k->naxes; a++)
    was_local[a] = check_axis_local(k, a);
  /* Evaluate arguments in the caller, then bind the callee's parameters. */
  int nparams = 0;
  for (Param *p = fn->params; p; p = p->next)
    nparams++;
  int n = 0;
  for (Arg *a = call->args; a; a = a->next)
    n++;
  Type **args = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(n + 1));
  Expr **argx = arena_alloc(&k->c->arena, sizeof(Expr *) * (size_t)(n + 1));
  n = 0;
  for (Arg *a = call->args; a; a = a->next) {
    if (a->name) {
      check_error(k, a->name_span, "'%s' takes no named arguments", fn->name);
      return type_error();
    }
    argx[n] = a->value;
    args[n++] = NULL;
  }
  if (n != nparams) {
    check_error(k, call->span, "'%s' takes %d argument%s, got %d", fn->name, nparams, nparams == 1 ? "" : "s", n);
    return type_error();
  }
  int i = 0;
  for (Param *p = fn->params; p; p = p->next, i++) {
    if (is_axis_param(p)) {
      Type *t = check_expr(k, argx[i]);
      if (t->kind != TY_AXES || t->naxes != 1) {
        if (t->kind != TY_ERROR) {
          check_error(k, argx[i]->span, "parameter '%s' of '%s' takes one mesh axis", p->name->name, fn->name);
          help(k->c, "pass a mesh axis name, e.g. %s(..., tp)", fn->name);
        }
        return type_error();
      }
      args[i] = t;
    } else {
      args[i] = check_expr(k, argx[i]);
      if (args[i]->kind == TY_ERROR)
        return type_error();
      if (args[i]->kind == TY_TUPLE || args[i]->kind == TY_VOID || args[i]->kind == TY_STRING ||
          args[i]->kind == TY_AXES || args[i]->kind == TY_LTYPE || args[i]->kind == TY_DTYPE) {
        check_error(k, argx[i]->span, "argument '%s' of '%s' is %s, which is not a value a function takes",
                    p->name->name, fn->name, ck_type(k, args[i]));
        help(k->c, "pass a tensor, a record or a number");
        return type_error();
      }
      /* a number passed for a typed parameter is a scalar tensor; an untyped
       * one takes it as a host number (SPEC 13) */
      if (p->type && (args[i]->kind == TY_INT || args[i]->kind == TY_FLOAT))
        args[i] = check_as_tensor(k, argx[i], args[i]);
    }
  }
  /* A local fn runs local on every axis.  Where some axis is global (a
   * local_map over other axes), its arguments and result must not vary on
   * that axis: R, I and P values mean the same locally and globally, V
   * values do not (their layout would be lost). */
  if (fn->flags & FN_LOCAL)
    for (int j = 0; j < n; j++)
      for (int l = 0, nl = type_nleaves(args[j]); l < nl; l++)
      for (int a = 0; a < k->naxes && type_leaf(args[j], l)->kind == TY_TENSOR; a++)
        if (!was_local[a] && type_leaf(args[j], l)->lt[a] == LT_V) {
          const char *x = args[j]->kind == TY_RECORD
                              ? arena_sprintf(&k->c->arena, "%s.%s", src_text(k, argx[j]), type_leaf_path(k->c, args[j], l, "."))
                              : src_text(k, argx[j]);
          check_error(k, argx[j]->span, "'%s' is a local fn, but mesh axis '%s' is global here and '%s' is %s on it",
                      fn->name, axis_name(k, a), x, lt_text_of(k, type_leaf(args[j], l), a));
          note_at(k->c, (Span){0, 0, 0}, "a local fn sees per-rank blocks on every axis; a sharded value's layout on '%s' would be lost",
                  axis_name(k, a));
          help(k->c, "take '%s' local as well: local_map (...) over (..., %s) { ... }", axis_name(k, a), axis_name(k, a));
          return type_error();
        }
  unsigned mask = (fn->flags & FN_LOCAL) ? (k->naxes >= 32 ? ~0u : (1u << k->naxes) - 1) : local_mask(k);
  for (Instance *in = k->instances; in; in = in->next) {
    if (in->fn != fn || in->nargs != n || in->local_mask != mask)
      continue;
    bool same = true;
    for (int j = 0; j < n && same; j++)
      same = args[j]->kind == TY_AXES ? in->args[j]->kind == TY_AXES && in->args[j]->axes[0] == args[j]->axes[0]
                                      : type_same(in->args[j], args[j], k->naxes) &&
                                            in->args[j]->literal == args[j]->literal;
    if (same) {
      call->inst = in;
      if (!in->ok) {
        k->nfailed++; /* reported when `in` was checked; the caller fails too */
        return type_error();
      }
      return in->ret ? in->ret : check_host_type(TY_VOID);
    }
  }
  if (fn->symbolic_failed && !k->symbolic) {
    k->nfailed++; /* reported at the function, checked with symbolic shapes */
    return type_error();
  }
  Instance *self = new_instance(k, fn, n, args);
  self->local_mask = mask;
  call->inst = self;
  /* Bind: axis parameters, then shape variables, then parameter types. */
  Inst inst = {.fn = fn, .call = call->span, .call_expr = call, .parent = k->inst};
  i = 0;
  for (Param *p = fn->params; p; p = p->next, i++)
    if (is_axis_param(p)) {
      int *ax = arena_alloc(&k->c->arena, sizeof(int));
      *ax = args[i]->axes[0];
      p->name->sym->info = ax;
    }
  LocalSave saved_local;
  bool all_axes[MAX_MESH_AXES];
  memset(all_axes, 1, sizeof all_axes);
  enter_local(k, all_axes, &saved_local);
  if (!(fn->flags & FN_LOCAL)) /* a plain fn runs with its caller's axes */
    leave_local(k, &saved_local);
  if (report_swapped_args(k, call, fn, args, argx, n)) {
    leave_local(k, &saved_local);
    note_at(k->c, fn->span, "'%s' is declared here", fn->name);
    self->ok = false;
    return type_error();
  }
  /* forget shape variables of an earlier instance (or of the trial) */
  forget_shapes(fn);
  i = 0;
  for (Param *p = fn->params; p; p = p->next, i++)
    if (p->type && !p->type->is_axis)
      bind_shapes(k, p->type, args[i]);
  bool ok = true;
  DType dtype_miss = DT_NONE; /* an argument's dtype that its parameter does not have */
  i = 0;
  for (Param *p = fn->params; p; p = p->next, i++) {
    if (is_axis_param(p))
      continue;
    if (!p->type) { /* generic: the argument's type, whatever it is */
      p->name->sym->info = param_type(k, args[i]);
      continue;
    }
    bool named[MAX_MESH_AXES];
    Type *want = check_written_type(k, p->type, named);
    Inst *saved = k->inst;
    if (want && want->kind == TY_TENSOR && args[i]->kind == TY_TENSOR && !args[i]->literal &&
        want->dtype != args[i]->dtype && dtype_miss == DT_NONE)
      dtype_miss = args[i]->dtype;
    if (!want || !check_fits_any(k, argx[i]->span, want, named, args[i],
                                 arena_sprintf(&k->c->arena, "argument '%s' of '%s'", p->name->name, fn->name),
                                 src_text(k, argx[i]), argx[i])) {
      ok = false;
      k->inst = saved;
      continue;
    }
    Type *bound = param_type(k, args[i]);
    if (args[i]->literal) {
      bound = want;
      for (int a = 0; a < k->naxes; a++)
        if (!named[a])
          bound->lt[a] = LT_R;
    }
    p->name->sym->info = bound;
  }
  if (!ok) {
    leave_local(k, &saved_local);
    note_at(k->c, fn->span, "'%s' is declared here", fn->name);
    if (dtype_miss != DT_NONE)
      help_dtype_form(k, call, fn, dtype_miss);
    self->ok = false;
    return type_error();
  }
  k->inst = &inst;
  for (Param *p = fn->params; p && k->dump; p = p->next)
    if (!is_axis_param(p))
      dump_binding(k, p->name, p->name->sym->info);
  int saved_lm = k->lm_level;
  k->lm_level = 0;
  run_instance(k, self, &inst);
  check_flush_chain(k); /* the chain may point at `inst`, which ends here */
  k->lm_level = saved_lm;
  k->inst = inst.parent;
  leave_local(k, &saved_local);
  if (!self->ok)
    return type_error();
  if ((fn->flags & FN_LOCAL) && self->ret && !local_result_ok(k, call, fn, self->ret, was_local))
    return type_error();
  return self->ret ? self->ret : check_host_type(TY_VOID);
}

/* ---- expressions ---- */

static Type *check_binary(Checker *k, Expr *e) {
  Type *l = check_expr(k, e->lhs), *r = check_expr(k, e->rhs);
  if (l->kind == TY_ERROR || r->kind == TY_ERROR)
    return type_error();
  if (l->kind == TY_RECORD || r->kind == TY_RECORD) { /* field by field (SPEC 13) */
    const char *opname = arena_sprintf(&k->c->arena, "'%s'", op_spelling[e->op]);
    if (e->op != OP_ADD && e->op != OP_SUB && e->op != OP_MUL && e->op != OP_DIV) {
      check_error(k, e->span, "%s does not apply to records; only + - * / go field by field", opname);
      Expr *rec = l->kind == TY_RECORD ? e->lhs : e->rhs;
      Type *rt = l->kind == TY_RECORD ? l : r;
      help(k->c, "apply it to a field, e.g. %s.%s", src_text(k, rec), rt->nelems ? rt->fields[0] : "f");
      return type_error();
    }
    return record_map(k, e, (Expr **[]){&e->lhs, &e->rhs}, 2, opname);
  }
  bool host = (l->kind == TY_INT || l->kind == TY_FLOAT || l->kind == TY_BOOL) &&
              (r->kind == TY_INT || r->kind == TY_FLOAT || r->kind == TY_BOOL);
  if (host) {
    switch (e->op) {
    case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_EQ: case OP_NE: case OP_AND: case OP_OR:
      return check_host_type(TY_BOOL);
    case OP_MOD:
      if (l->kind != TY_INT || r->kind != TY_INT) {
        check_error(k, e->span, "'%%' needs host integers");
        return type_error();
      }
      return l;
    case OP_MATMUL:
      check_error(k, e->span, "'@' needs tensors");
      return type_error();
    default:
      return type_new(k->c, l->kind == TY_FLOAT || r->kind == TY_FLOAT ? TY_FLOAT : TY_INT);
    }
  }
  if (e->op == OP_MATMUL)
    return check_matmul(k, e, e->lhs, e->rhs, "'@'");
  if (e->op == OP_AND || e->op == OP_OR || e->op == OP_MOD) {
    check_error(k, e->span, "'%s' needs host values, not tensors", op_spelling[e->op]);
    return type_error();
  }
  Operand o[2] = {{e->lhs, check_as_tensor(k, e->lhs, l)}, {e->rhs, check_as_tensor(k, e->rhs, r)}};
  if (o[0].t->kind == TY_ERROR || o[1].t->kind == TY_ERROR)
    return type_error();
  Rule rule = e->op == OP_ADD || e->op == OP_SUB ? RULE_LINEAR
            : e->op == OP_MUL ? RULE_MULTILINEAR
            : e->op == OP_DIV ? RULE_DIVIDE : RULE_NONLINEAR;
  return elementwise(k, e->span, arena_sprintf(&k->c->arena, "'%s'", op_spelling[e->op]), rule, o, 2);
}

/* How many local_map blocks of the current function enclose this point. */
static int s_lm_level(Checker *k) { return k->lm_level; }

static Type *check_name(Checker *k, Expr *e, Symbol *s) {
  if (!s)
    return type_error();
  switch (s->kind) {
  case SYM_CONST:
    return type_new(k->c, s->is_float ? TY_FLOAT : TY_INT);
  case SYM_LOOP:
    return check_host_type(TY_INT);
  case SYM_SHAPEVAR: {
    Size *v = s->info;
    long long x;
    if (!s->is_rest && v && size_is_int(*v, &x))
      return check_host_type(TY_INT);
    return check_host_type(TY_INT);
  }
  case SYM_AXIS:
  case SYM_AXIS_PARAM: {
    Type *t = type_new(k->c, TY_AXES);
    t->naxes = 1;
    t->axes[0] = s->kind == SYM_AXIS ? s->index : (s->info ? *(int *)s->info : 0);
    return t;
  }
  case SYM_PARAM:
  case SYM_LET:
  case SYM_VAR:
    if (s->outer) { /* a variable rebound by local_map: its local type */
      for (int i = k->nlm - 1; i >= 0; i--)
        if (k->lm[i].outer == s->outer)
          return k->lm[i].type;
      return type_error();
    }
    if (!s->info)
      return type_error();
    if (s->lm_level < s_lm_level(k) && (((Type *)s->info)->kind == TY_TENSOR || ((Type *)s->info)->kind == TY_RECORD)) {
      check_error(k, e->span, "'%s' is used inside local_map but not passed to it", s->name);
      help(k->c, "add it to the list: local_map (..., %s)", s->name);
      return type_error();
    }
    return s->info;
  case SYM_FN:
  case SYM_MODULE:
  case SYM_BUILTIN:
    check_error(k, e->span, "'%s' is a %s; call it", s->name, s->kind == SYM_MODULE ? "module" : "function");
    return type_error();
  case SYM_STRUCT:
    check_error(k, e->span, "'%s' is a struct, not a value", s->name);
    help(k->c, "build a record with named fields: %s(%s=...)", s->name, s->st->fields ? s->st->fields->name : "field");
    return type_error();
  }
  return type_error();
}

/* The global type of a local_map's result: `want` (declared; `wl` is it
 * seen locally), checked against what the block returned (SPEC 7: S(i) on
 * a local axis is a local V whose size times the axis size is the global
 * dim; on the other axes the types are the same).  Axes `want` leaves open
 * take the block's type, except a V on a local axis, whose layout only the
 * declaration can give. */
static Type *local_map_result(Checker *k, Expr *e, const Type *want, const bool named[MAX_MESH_AXES], const Type *wl,
                              const Type *got, const bool over[MAX_MESH_AXES]) {
  const char *why = NULL, *fix = NULL;
  if (got->dtype != wl->dtype)
    why = arena_sprintf(&k->c->arena, "the block returns %s, the declared type is %s", dtype_name(got->dtype),
                        dtype_name(wl->dtype));
  else if (got->ndim != wl->ndim)
    why = arena_sprintf(&k->c->arena, "the block returns %d dim%s, the declared type has %d", got->ndim,
                        got->ndim == 1 ? "" : "s", wl->ndim);
  for (int a = 0; !why && a < k->naxes; a++) {
    LType g = ltype_on(got, a), w = ltype_on(wl, a);
    if (!named[a]) {
      if (over[a] && got->lt[a] == LT_V) {
        why = arena_sprintf(&k->c->arena, "the block is V on '%s', and the declared type does not say which dim it shards",
                            axis_name(k, a));
        fix = arena_sprintf(&k->c->arena, "declare the layout: @%s on the dim whose blocks the ranks hold", axis_name(k, a));
      }
      continue;
    }
    if (g.kind == w.kind && g.sdim == w.sdim)
      continue;
    bool sharded = type_spec_has(want, a, NULL);
    why = arena_sprintf(&k->c->arena, "on '%s' the block is %s, but the declared type is %s", axis_name(k, a),
                        lt_text_of(k, got, a), over[a] && sharded ? "S(i) there (a V block)" : lt_text_of(k, wl, a));
    if (over[a] && got->lt[a] == LT_V && !sharded)
      fix = arena_sprintf(&k->c->arena, "a V result on '%s' is declared as S(i): write @%s on the dim it splits",
                          axis_name(k, a), axis_name(k, a));
    else if (over[a] && got->lt[a] == LT_V && (w.kind == LT_R || w.kind == LT_I))
      fix = arena_sprintf(&k->c->arena, "gather the blocks in the block: return all_gather(y, %s, src=S(i), dst=%s); "
                          "with i the dim they split", axis_name(k, a), lt_name(w.kind));
    else if (over[a] && g.kind != LT_NONE && w.kind != LT_NONE)
      fix = arena_sprintf(&k->c->arena, "end the block with the conversion to %s: return %s;", lt_name(w.kind),
                          transition_fix(k, "y", axis_name(k, a), g.kind == LT_V ? (LType){LT_V, 0} : g,
                                         w.kind == LT_V ? (LType){LT_S, 0} : w));
  }
  for (int d = 0; !why && d < wl->ndim; d++) {
    if (size_eq(got->shape[d], wl->shape[d]))
      continue;
    int a = -1;
    for (int j = 0; j < MAX_MESH_AXES && want->spec[d][j] >= 0 && a < 0; j++)
      if (over[want->spec[d][j]])
        a = want->spec[d][j];
    if (a >= 0)
      why = arena_sprintf(&k->c->arena, "dim %d: the block's %s is not the declared %s divided by the size of '%s'", d,
                          size_str(k->c, k->mesh, got->shape[d]), size_str(k->c, k->mesh, want->shape[d]), axis_name(k, a));
    else
      why = arena_sprintf(&k->c->arena, "dim %d: the block's size is %s, the declared %s", d,
                          size_str(k->c, k->mesh, got->shape[d]), size_str(k->c, k->mesh, wl->shape[d]));
  }
  if (why) {
    check_error(k, e->span, "the local_map block returns %s, but the declared type is %s (locally %s)", ck_type(k, got),
                ck_type(k, want), ck_type(k, wl));
    note_at(k->c, (Span){0, 0, 0}, "%s", why);
    help(k->c, "%s", fix ? fix : "declare the type the block returns: on each local axis a V result is S(i) of a dim i "
                                 "that is the axis size times larger");
    return type_error();
  }
  Type *r = type_clone(k->c, want);
  for (int a = 0; a < k->naxes; a++) {
    int d;
    if (named[a])
      continue;
    r->lt[a] = got->lt[a];
    if (!over[a] && type_spec_has(got, a, &d))
      type_spec_add(r, d, a);
  }
  return r;
}

/* The local type of `t` on the axes `over` (SPEC 7): each dim's leading
 * axes that are taken local leave the partition spec and divide the size.
 * Reports on `sp` when a local axis follows a global one in a dim. */
static Type *localize(Checker *k, Span sp, const Type *t, const bool over[MAX_MESH_AXES], const char *what) {
  if (t->kind == TY_RECORD) { /* each field */
    Type *r = type_clone(k->c, t);
    r->elems = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(t->nelems + 1));
    for (int i = 0; i < t->nelems; i++) {
      r->elems[i] = localize(k, sp, t->elems[i], over, arena_sprintf(&k->c->arena, "%s.%s", what, t->fields[i]));
      if (!r->elems[i])
        return NULL;
      if (r->elems[i]->kind == TY_TENSOR)
        r->elems[i]->local = check_all_local(k);
    }
    return r;
  }
  Type *lt = type_clone(k->c, t);
  for (int d = 0; lt->kind == TY_TENSOR && d < lt->ndim; d++) {
    int8_t keep[MAX_MESH_AXES];
    memset(keep, -1, sizeof keep);
    int nk = 0;
    for (int j = 0; j < MAX_MESH_AXES && t->spec[d][j] >= 0; j++) {
      int ax = t->spec[d][j];
      if (!over[ax]) {
        keep[nk++] = (int8_t)ax;
        continue;
      }
      if (nk > 0) {
        check_error(k, sp, "local_map over '%s': dim %d of %s is sharded on %s, and only its leading axes can be taken local",
                    axis_name(k, ax), d, what, dim_axes_text(k, t, d));
        note_at(k->c, (Span){0, 0, 0}, "with '%s' global, the blocks a rank sees on '%s' are not one block of the dim",
                axis_name(k, keep[0]), axis_name(k, ax));
        help(k->c, "take the axes before it local too: over (%s, ...), or reorder the dim's axes first with redistribute",
             axis_name(k, keep[0]));
        return NULL;
      }
      lt->shape[d] = size_div(lt->shape[d], size_axis(ax));
    }
    memcpy(lt->spec[d], keep, sizeof keep);
  }
  return lt;
}

/* local_map (vars) over (axes) { body }: the listed variables take their
 * local types on the listed axes, which switch to local semantics inside
 * (the others stay global); the block's result must be the declared
 * global type seen locally on those axes. */
static Type *check_local_map(Checker *k, Expr *e, TypeExpr *want_te) {
  bool over[MAX_MESH_AXES] = {0};
  int lm_mark = k->nlm;
  if (e->lm_has_over) {
    for (AxisRef *a = e->lm_over; a; a = a->next) {
      int ax = axis_of(a);
      if (ax < 0)
        return type_error();
      if (over[ax]) {
        check_error(k, e->span, "local_map over (...) lists mesh axis '%s' twice", a->name);
        help(k->c, "list each axis once");
        return type_error();
      }
      if (check_axis_local(k, ax)) {
        check_error(k, e->span, "local_map over '%s', which is local here already", a->name);
        help(k->c, "drop '%s' from the list: inside this block it is local anyway", a->name);
        return type_error();
      }
      over[ax] = true;
    }
  } else {
    for (int a = 0; a < k->naxes; a++)
      over[a] = !check_axis_local(k, a);
  }
  /* the block's result is `-> T`'s type, else the binding's (redistributed
   * from `-> T` to the binding's after the block when both are written) */
  TypeExpr *out_te = e->lm_ret ? e->lm_ret : want_te;
  if (!out_te) {
    check_error(k, e->span, "local_map needs the global type of its result");
    help(k->c, "annotate the binding: let y: f32[...]{...} = local_map (...) { ... }; or write it after the axes: "
         "local_map (...) over (...) -> f32[...]{...} { ... }");
    return type_error();
  }
  if (out_te->struct_name) {
    check_error(k, e->span, "a local_map block returns a tensor, not a %s record", out_te->struct_name);
    help(k->c, "map each field: let w: T = local_map (r) { return f(r.w); };");
    return type_error();
  }
  bool named[MAX_MESH_AXES];
  Type *want = check_type_expr(k, out_te, named);
  if (!want)
    return type_error();
  /* `x: T`: x is redistributed to T at the boundary (JAX shard_map's
   * in_specs), planned as redistribute(x, T) is; T is a global type */
  for (AxisRef *v = e->lm_vars; v; v = v->next) {
    v->ty = NULL;
    if (!v->type || !v->sym || !v->sym->info)
      continue;
    Type *x = v->sym->info;
    if (x->kind != TY_TENSOR) {
      if (x->kind != TY_ERROR) {
        check_error(k, v->type->span, "local_map (%s: T) redistributes a tensor; '%s' is %s", v->name, v->name,
                    ck_type(k, x));
        help(k->c, "list the record without a type, and redistribute its fields inside the block where needed");
      }
      return type_error();
    }
    RsPlan plan;
    Type *t = redistribute_target(k, v->type->span, v->name, x, v->type,
                                  arena_sprintf(&k->c->arena, "local_map (%s: T)", v->name), &plan);
    if (t->kind == TY_ERROR)
      return t;
    v->ty = t;
  }
  /* the declared type seen locally: checked before the body */
  Type *wl = localize(k, e->span, want, over, "the declared type");
  if (!wl)
    return type_error();
  /* rebind the variables with local shapes on the `over` axes */
  LocalSave saved_axes;
  enter_local(k, over, &saved_axes);
  bool all = check_all_local(k);
  wl->local = all;
  for (AxisRef *v = e->lm_vars; v; v = v->next) {
    if (!v->sym || !v->sym->info)
      continue;
    Type *lt = localize(k, e->span, v->ty ? v->ty : v->sym->info, over, arena_sprintf(&k->c->arena, "'%s'", v->name));
    if (!lt) {
      leave_local(k, &saved_axes);
      k->nlm = lm_mark;
      return type_error();
    }
    if (lt->kind == TY_TENSOR)
      lt->local = all;
    ARENA_RESERVE(&k->c->arena, k->lm, k->nlm, k->caplm, 16);
    k->lm[k->nlm++] = (LocalBinding){v->sym, lt};
  }
  k->lm_level++;
  Inst inst = {.fn = k->inst ? k->inst->fn : NULL, .call = (Span){0, 0, 0}, .parent = k->inst};
  Inst *saved = k->inst;
  k->inst = &inst;
  check_block(k, e->body);
  check_flush_chain(k); /* the chain may point at `inst`, which ends here */
  k->inst = saved;
  leave_local(k, &saved_axes);
  k->nlm = lm_mark;
  k->lm_level--;
  if (!inst.returned) {
    check_error(k, e->span, "the local_map block must end with return");
    return type_error();
  }
  Type *got = inst.ret;
  if (got->kind != TY_TENSOR) {
    if (got->kind != TY_ERROR)
      check_error(k, e->span, "the local_map block returns %s; it must return one tensor", ck_type(k, got));
    return type_error();
  }
  Type *out = local_map_result(k, e, want, named, wl, got, over);
  e->lm_out = out;
  if (out->kind == TY_ERROR || !e->lm_ret || !want_te)
    return out;
  /* `-> T` and the binding's type: redistributed at the boundary (JAX
   * shard_map's out_specs, then the binding's layout) */
  if (want_te->struct_name) {
    check_error(k, e->span, "a local_map block returns a tensor, not a %s record", want_te->struct_name);
    return type_error();
  }
  RsPlan plan;
  return redistribute_target(k, e->span, "the local_map's result", out, want_te, "local_map's result (-> T)", &plan);
}

static Type *check_expr_kind(Checker *k, Expr *e);

Type *check_expr(Checker *k, Expr *e) {
  if (e == k->pre && e->ty) { /* checked just before (check_builtin) */
    k->pre = NULL;
    return e->ty;
  }
  e->map = NULL;
  Type *t = check_expr_kind(k, e);
  e->ty = t;
  return t;
}

static Type *check_expr_kind(Checker *k, Expr *e) {
  switch (e->kind) {
  case EX_ERROR: return type_error();
  case EX_INT: return check_host_type(TY_INT);
  case EX_FLOAT: return check_host_type(TY_FLOAT);
  case EX_BOOL: return check_host_type(TY_BOOL);
  case EX_STRING: return check_host_type(TY_STRING);
  case EX_NAME: return check_name(k, e, e->sym);
  case EX_FIELD: return e->sym ? check_name(k, e, e->sym) : check_field(k, e);
  case EX_LEAF: return e->ty ? e->ty : type_error();
  case EX_LTYPE: {
    Type *t = type_new(k->c, TY_LTYPE);
    t->ltv = e->lt;
    if (e->lt.kind == LT_S) {
      long long v;
      if (!host_int(k, e->lhs, &v))
        return type_error();
      t->ltv.sdim = (int)v;
    }
    return t;
  }
  case EX_TYPE: {
    Type *t = type_new(k->c, TY_DTYPE);
    return t;
  }
  case EX_UNARY: {
    Type *x = check_expr(k, e->lhs);
    if (x->kind == TY_ERROR)
      return x;
    if (e->op == OP_NOT) {
      if (x->kind != TY_BOOL && x->kind != TY_INT)
        check_error(k, e->span, "'!' needs a host boolean");
      return check_host_type(TY_BOOL);
    }
    if (x->kind == TY_INT || x->kind == TY_FLOAT)
      return x;
    if (x->kind == TY_RECORD)
      return record_map(k, e, (Expr **[]){&e->lhs}, 1, "unary '-'");
    Operand o = {e->lhs, check_as_tensor(k, e->lhs, x)};
    return elementwise(k, e->span, "unary '-'", RULE_LINEAR, &o, 1);
  }
  case EX_BINARY: return check_binary(k, e);
  case EX_CALL: {
    Symbol *s = e->lhs->sym;
    if (!s) { /* `v.f(...)` on a value, `(e)(...)`: the resolver binds only names and module members */
      check_error(k, e->lhs->span, "'%s' cannot be called: only functions, built-ins and structs can", src_text(k, e->lhs));
      return type_error();
    }
    if (s->kind == SYM_BUILTIN)
      return check_builtin(k, e, (Builtin)s->index);
    if (s->kind == SYM_FN)
      return check_fn_call(k, e, s->fn);
    if (s->kind == SYM_STRUCT)
      return check_struct_new(k, e, s->st);
    check_error(k, e->lhs->span, "'%s' is not a function", s->name);
    return type_error();
  }
  case EX_INDEX: {
    Type *x = check_expr(k, e->lhs);
    Type *i = check_expr(k, e->rhs);
    if (x->kind == TY_ERROR || i->kind == TY_ERROR)
      return type_error();
    if (x->kind == TY_RECORD) /* every field's leading dim */
      return check_record_index(k, e);
    if (x->kind != TY_TENSOR || x->ndim == 0) {
      check_error(k, e->span, "only tensors with dims can be indexed, not %s", ck_type(k, x));
      return type_error();
    }
    if (i->kind != TY_INT) {
      check_error(k, e->rhs->span, "an index must be a host integer, not %s", ck_type(k, i));
      return type_error();
    }
    Type *r = type_clone(k->c, x);
    r->ndim--;
    for (int d = 0; d < r->ndim; d++)
      r->shape[d] = x->shape[d + 1];
    if (!shard_index(k, e, x, r))
      return type_error();
    return r;
  }
  case EX_TUPLE: {
    /* a tuple of mesh axes, or several values */
    Type *t = type_new(k->c, TY_AXES);
    for (Expr *x = e->elems; x; x = x->next) {
      Type *xt = check_expr(k, x);
      if (xt->kind != TY_AXES) {
        if (xt->kind != TY_ERROR)
          check_error(k, x->span, "a tuple here holds mesh axes, not %s", ck_type(k, xt));
        return type_error();
      }
      for (int j = 0; j < t->naxes; j++)
        if (t->axes[j] == xt->axes[0]) {
          check_error(k, x->span, "mesh axis '%s' is listed twice", axis_name(k, xt->axes[0]));
          return type_error();
        }
      if (t->naxes < MAX_MESH_AXES)
        t->axes[t->naxes++] = xt->axes[0];
    }
    return t;
  }
  case EX_LIST:
    check_error(k, e->span, "a list [...] is only an argument of permute, reshape or expand");
    return type_error();
  case EX_LOCAL_MAP: return check_local_map(k, e, NULL);
  }
  return type_error();
}

/* ---- statements ---- */

static void dump_binding(Checker *k, Binding *b, Type *t) {
  if (!k->dump || !b->sym || t->kind == TY_ERROR)
    return;
  int line, col;
  source_position(k->c, b->span, &line, &col);
  StrBuf chain;
  sb_init(&chain, &k->c->arena);
  for (Inst *i = k->inst; i && i->fn; i = i->parent) {
    bool lm = i->call.file == 0 && i->parent && i->parent->fn == i->fn; /* a local_map block */
    sb_printf(&chain, "%s%s", chain.len ? " <- " : "", lm ? "local_map" : i->fn->name);
  }
  /* files of the installed library print as <stdlib>/NAME, so that the
   * output does not depend on where spmdc is installed */
  const char *path = source_file(k->c, b->span.file)->path;
  const char *lib = k->c->stdlib_dir;
  size_t n = lib ? strlen(lib) : 0;
  if (n && strncmp(path, lib, n) == 0 && path[n] == '/')
    path = arena_sprintf(&k->c->arena, "<stdlib>%s", path + n);
  fprintf(k->dump, "%s:%d:%d: %s: %s  [%s]\n", path, line, col, b->name, type_str(k->c, k->mesh, t),
          chain.len ? chain.data : "-");
}

/* Whether a condition is the same on every rank (SPEC section 3). */
static void check_condition(Checker *k, Expr *e, const char *what) {
  Type *t = check_expr(k, e);
  if (t->kind == TY_ERROR || t->kind == TY_BOOL || t->kind == TY_INT)
    return;
  if (t->kind != TY_TENSOR || t->ndim != 0) {
    check_error(k, e->span, "%s must be a host boolean or a scalar comparison, not %s", what, ck_type(k, t));
    help(k->c, "compare a scalar that is the same on every rank, e.g. if sum(x) > 0.0 with x R or I");
    return;
  }
  for (int a = 0; a < k->naxes; a++)
    if (t->lt[a] == LT_V || t->lt[a] == LT_P) {
      check_error(k, e->span, "%s is %s on mesh axis '%s': ranks could take different paths and deadlock in a collective",
                  what, lt_name(t->lt[a]), axis_name(k, a));
      Expr *x = e;
      if (e->kind == EX_BINARY && e->lhs->ty && e->lhs->ty->kind == TY_TENSOR && e->lhs->ty->lt[a] == t->lt[a])
        x = e->lhs;
      else if (e->kind == EX_BINARY && e->rhs->ty && e->rhs->ty->kind == TY_TENSOR && e->rhs->ty->lt[a] == t->lt[a])
        x = e->rhs;
      help(k->c, "make it the same on every rank first, e.g. all_reduce(%s, %s, src=%s, dst=I)", src_text(k, x), axis_name(k, a),
           lt_name(t->lt[a]));
      return;
    }
}

static void mark_gradients(Checker *k, Stmt *s, Type *t);

static void bind_value(Checker *k, Stmt *s) {
  Type *t;
  if (s->value->kind == EX_LOCAL_MAP)
    t = s->value->ty = check_local_map(k, s->value, s->type);
  else
    t = check_expr(k, s->value);
  int ntargets = 0;
  for (Binding *b = s->targets; b; b = b->next)
    ntargets++;
  if (t->kind == TY_TUPLE) {
    if (ntargets != t->nelems) {
      check_error(k, s->span, "the value has %d parts, but %d name%s bound", t->nelems, ntargets,
                  ntargets == 1 ? " is" : "s are");
      help(k->c, "bind one name per part: let %s;", t->nelems == 2 ? "a, b = ..." : "a, b, ... = ...");
      t = type_error();
    }
  } else if (ntargets != 1 && t->kind != TY_ERROR) {
    check_error(k, s->span, "one value, but %d names are bound", ntargets);
    help(k->c, "bind one name: let %s = ...;", s->targets->name);
    t = type_error();
  }
  if (t->kind == TY_VOID) {
    check_error(k, s->value->span, "this call has no value");
    t = type_error();
  }
  if (s->type && t->kind != TY_ERROR && t->kind != TY_TUPLE && s->value->kind != EX_LOCAL_MAP) {
    bool named[MAX_MESH_AXES];
    Type *want = check_written_type(k, s->type, named);
    if (want && want->kind == TY_TENSOR && want->ndim == 0 && (t->kind == TY_INT || t->kind == TY_FLOAT))
      t = check_as_tensor(k, s->value, t); /* a host number becomes a scalar tensor of the annotated type */
    if (want && !check_fits_any(k, s->value->span, want, named, t, arena_sprintf(&k->c->arena, "'%s'", s->targets->name),
                                src_text(k, s->value), s->value))
      t = type_error();
    else if (want)
      t = check_bound_type(k, want, named, t); /* a literal takes the annotated type */
  }
  int i = 0;
  for (Binding *b = s->targets; b; b = b->next, i++) {
    Type *bt = t->kind == TY_TUPLE ? t->elems[i] : t;
    if (bt->kind == TY_TENSOR && bt->literal && b->sym) {
      bt = type_clone(k->c, bt);
    }
    if (b->sym)
      b->sym->info = bt;
    dump_binding(k, b, bt);
  }
  mark_gradients(k, s, t);
}

/* Remembers which bindings of `let l, g1, g2 = value_and_grad(f(...),
 * wrt=(w1, w2))` are gradients and of what, so that an update missing its
 * all-reduce can be explained in those terms. */
static void mark_gradients(Checker *k, Stmt *s, Type *t) {
  Expr *v = s->value;
  Symbol *fs = v->kind == EX_CALL ? v->lhs->sym : NULL;
  if (!fs || fs->kind != SYM_BUILTIN || (fs->index != BI_VALUE_AND_GRAD && fs->index != BI_GRAD) ||
      t->kind == TY_ERROR)
    return;
  Arg *wrt = call_named(k, v, "wrt");
  if (!wrt)
    return;
  Expr *w = wrt->value->kind == EX_TUPLE ? wrt->value->elems : wrt->value;
  Binding *b = s->targets;
  if (fs->index == BI_VALUE_AND_GRAD && b)
    b = b->next; /* the value */
  for (; b && w; b = b->next, w = wrt->value->kind == EX_TUPLE ? w->next : NULL)
    if (b->sym && w->kind == EX_NAME)
      b->sym->grad_of = w->sym;
}

/* One variable of an assignment takes the value `t` of `x`: a var keeps its
 * type exactly (every field of a record). */
static void assign_one(Checker *k, Binding *b, Type *t, Expr *x, bool part) {
  if (!b->sym || b->sym->kind != SYM_VAR || t->kind == TY_ERROR)
    return;
  Type *was = b->sym->info;
  if (!was || was->kind == TY_ERROR)
    return;
  if ((is_scalar_like(t) || (t->kind == TY_TENSOR && t->literal)) && was->kind == TY_TENSOR && was->ndim == 0)
    return; /* a number takes the scalar variable's type */
  if (was->kind == TY_FLOAT && t->kind == TY_INT)
    return;
  if (was->kind == TY_INT && t->kind == TY_FLOAT) {
    check_error(k, x->span, "assigning a host float to '%s', which is a host integer", b->name);
    help(k->c, "declare it as a float: var %s = 0.0;", b->name);
    return;
  }
  if (type_same(was, t, k->naxes))
    return;
  const char *name = b->name, *xs = part ? "x" : src_text(k, x); /* x: the part of a tuple */
  if (was->kind == TY_RECORD && type_same_struct(was, t)) {
    /* name the first field that differs, and compare that field */
    for (int l = 0, nl = type_nleaves(was); l < nl; l++)
      if (!type_same(type_leaf(was, l), type_leaf(t, l), k->naxes)) {
        const char *path = type_leaf_path(k->c, was, l, ".");
        name = arena_sprintf(&k->c->arena, "%s.%s", b->name, path);
        xs = arena_sprintf(&k->c->arena, "%s.%s", x->kind == EX_NAME || x->kind == EX_FIELD ? xs :
                           arena_sprintf(&k->c->arena, "(%s)", xs), path);
        was = type_leaf(was, l);
        t = type_leaf(t, l);
        break;
      }
  }
  check_error(k, x->span, "assigning %s to '%s', which is %s", ck_type_vs(k, t, was), name, ck_type_vs(k, was, t));
  note_at(k->c, (Span){0, 0, 0}, "a var keeps its type: every assignment must give exactly the same type");
  bool helped = false;
  for (int a = 0; a < k->naxes && t->kind == TY_TENSOR && was->kind == TY_TENSOR && !helped; a++) {
    LType have = ltype_on(t, a), need = ltype_on(was, a);
    if (have.kind == need.kind && have.sdim == need.sdim)
      continue;
    if (was->local && need.kind == LT_V)
      need = (LType){LT_S, 0};
    help(k->c, "on '%s' the new value is %s and '%s' is %s: %s = %s;", axis_name(k, a), lt_name(t->lt[a]), name,
         lt_name(was->lt[a]), name, transition_fix(k, xs, axis_name(k, a), have, need));
    helped = true;
  }
  if (!helped)
    help(k->c, "declare a new name for a value of another type: let %s2 = %s;", b->name, xs);
}

/* x = e;  a, b = e; (a tuple, one part per variable) */
static void check_assign(Checker *k, Stmt *s) {
  Type *t = check_expr(k, s->value);
  if (t->kind == TY_ERROR)
    return;
  int n = 0;
  for (Binding *b = s->targets; b; b = b->next)
    n++;
  if (n == 1) {
    if (t->kind == TY_TUPLE) {
      check_error(k, s->value->span, "the value has %d parts, but one variable is assigned", t->nelems);
      help(k->c, "assign one variable per part: %s, ... = %s;", s->targets->name, src_text(k, s->value));
      return;
    }
    assign_one(k, s->targets, t, s->value, false);
    return;
  }
  if (t->kind != TY_TUPLE || t->nelems != n) {
    int parts = t->kind == TY_TUPLE ? t->nelems : 1;
    check_error(k, s->value->span, "%d variables are assigned, but the value has %d part%s", n, parts,
                parts == 1 ? "" : "s");
    help(k->c, "assign one variable per part of the value");
    return;
  }
  int i = 0;
  for (Binding *b = s->targets; b; b = b->next, i++)
    assign_one(k, b, t->elems[i], s->value, true);
}

static void check_return(Checker *k, Stmt *s) {
  Inst *inst = k->inst;
  int n = 0;
  for (Expr *e = s->value; e; e = e->next)
    n++;
  Type *t;
  if (n == 1) {
    t = check_expr(k, s->value);
  } else {
    t = type_new(k->c, TY_TUPLE);
    t->elems = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(n ? n : 1));
    for (Expr *e = s->value; e; e = e->next)
      t->elems[t->nelems++] = check_expr(k, e);
    if (n == 0)
      t->kind = TY_VOID;
  }
  if (inst->returned) {
    if (inst->ret && t->kind != TY_ERROR && inst->ret->kind != TY_ERROR && !type_same(inst->ret, t, k->naxes)) {
      check_error(k, s->span, "this returns %s, but an earlier return gave %s", ck_type(k, t), ck_type(k, inst->ret));
      help(k->c, "every return of a function must give the same type");
    }
    return;
  }
  inst->returned = true;
  inst->ret = t;
  /* local_map blocks (no fn of their own at this level) are checked by the caller */
  FnDecl *fn = inst->fn;
  if (!fn || k->lm_level > 0) /* a local_map block: its caller checks the result */
    return;
  if (!fn->ret) {
    /* no `-> RET`: the function's result is what it returns (SPEC 13),
     * except for export fns, whose C signature is fixed */
    if (n > 0 && (fn->flags & FN_EXPORT))
      check_error(k, s->span, "export fn '%s' declares no result, but returns a value", fn->name);
    return;
  }
  int nret = 0;
  for (TypeExpr *r = fn->ret; r; r = r->next)
    nret++;
  if (nret != n) {
    check_error(k, s->span, "'%s' returns %d value%s, but this returns %d", fn->name, nret, nret == 1 ? "" : "s", n);
    inst->ret = type_error();
    return;
  }
  int i = 0;
  Expr *rx = s->value;
  for (TypeExpr *r = fn->ret; r; r = r->next, i++, rx = rx ? rx->next : NULL) {
    Type *got = n == 1 ? t : t->elems[i];
    bool named[MAX_MESH_AXES];
    Type *want = check_written_type(k, r, named);
    if (!want || !check_fits_any(k, s->span, want, named, got, arena_sprintf(&k->c->arena, "the result of '%s'", fn->name),
                                 rx ? src_text(k, rx) : NULL, rx && (n == 1 || s->value->next) ? rx : NULL)) {
      inst->ret = type_error();
      return;
    }
    if (got->kind == TY_TENSOR && got->literal) {
      Type *w = type_clone(k->c, want);
      for (int a = 0; a < k->naxes; a++)
        if (!named[a])
          w->lt[a] = LT_R;
      if (n == 1)
        inst->ret = w;
      else
        t->elems[i] = w;
    }
  }
}

static void check_stmt_kind(Checker *k, Stmt *s);

static void check_stmt(Checker *k, Stmt *s) {
  check_stmt_kind(k, s);
  check_flush_chain(k);
}

static void check_stmt_kind(Checker *k, Stmt *s) {
  switch (s->kind) {
  case ST_LET:
  case ST_VAR: bind_value(k, s); return;
  case ST_ASSIGN: check_assign(k, s); return;
  case ST_RETURN: check_return(k, s); return;
  case ST_EXPR: {
    Type *t = check_expr(k, s->value);
    (void)t;
    return;
  }
  case ST_FOR: {
    for (int i = 0; i < 2; i++) {
      Expr *b = i ? s->hi : s->lo;
      Type *t = check_expr(k, b);
      if (t->kind != TY_INT && t->kind != TY_ERROR)
        check_error(k, b->span, "a loop bound must be a host integer, not %s", ck_type(k, t));
      if (t->kind == TY_TENSOR && t->ndim == 0 && t->dtype == DT_I32 && !t->literal)
        help(k->c, "a 0-d i32 tensor that is R or I on every axis becomes a host integer with item(%s)", src_text(k, b));
      else if (t->kind != TY_INT && t->kind != TY_ERROR)
        help(k->c, "loop over a constant or a host integer expression, e.g. for i in 0..N");
    }
    check_block(k, s->then);
    return;
  }
  case ST_IF:
    check_condition(k, s->cond, "the condition");
    check_block(k, s->then);
    if (s->els)
      check_block(k, s->els);
    return;
  case ST_BLOCK: check_block(k, s); return;
  }
}

static void check_block(Checker *k, Stmt *block) {
  if (block->kind != ST_BLOCK) {
    check_stmt(k, block);
    return;
  }
  for (Stmt *s = block->body; s; s = s->next)
    check_stmt(k, s);
}

/* Whether every path through a block ends in a return: its last statement
 * is one, or an if/else whose branches both end so (loops do not count:
 * they may run zero times). */
static bool check_always_returns(Stmt *block) {
  if (block->kind == ST_IF)
    return block->els && check_always_returns(block->then) && check_always_returns(block->els);
  Stmt *last = NULL;
  for (Stmt *s = block->body; s; s = s->next)
    last = s;
  return last && (last->kind == ST_RETURN || (last->kind == ST_IF && check_always_returns(last)));
}

static void check_fn_body(Checker *k, FnDecl *fn) {
  check_block(k, fn->body);
  if (fn->ret && !k->inst->returned) {
    check_error(k, fn->name_span, "'%s' must end with a return", fn->name);
    help(k->c, "end the body with: return ...;");
  } else if ((fn->ret || (k->inst->ret && k->inst->ret->kind != TY_VOID)) && !check_always_returns(fn->body)) {
    check_error(k, fn->name_span, "'%s' can reach its end without returning a value", fn->name);
    help(k->c, "return on every path: give the last `if` an `else` that returns, or end the body with: return ...;");
  }
  check_flush_chain(k);
}

/* ---- the program ---- */

/* Whether a size expression names a shape variable. */
static bool size_uses_var(Expr *e) {
  if (e->kind == EX_BINARY)
    return size_uses_var(e->lhs) || size_uses_var(e->rhs);
  return e->kind == EX_NAME && e->sym && e->sym->kind == SYM_SHAPEVAR;
}

/* A function whose signature names every mesh axis, with no axis
 * parameters, is checked on its own (SPEC section 3): with concrete sizes
 * as any instance, or with its shape variables as symbols (*vars is set
 * when it has some; `..Rest` is not checked on its own). */
static bool type_fully_typed_vars(Checker *k, TypeExpr *te, bool *vars) {
  if (!te || te->is_axis)
    return false;
  if (te->struct_name) { /* every field, through nested structs */
    if (!te->sym || te->sym->kind != SYM_STRUCT)
      return false;
    for (StructField *f = te->sym->st->fields; f; f = f->next)
      if (!type_fully_typed_vars(k, f->type, vars))
        return false;
    return true;
  }
  bool named[MAX_MESH_AXES] = {0};
  for (Dim *d = te->dims; d; d = d->next) {
      if (d->rest)
        return false;
      if (size_uses_var(d->size))
        *vars = true;
      for (AxisRef *a = d->axes; a; a = a->next)
        if (a->sym && a->sym->kind == SYM_AXIS)
          named[a->sym->index] = true;
  }
  for (AxisEntry *e = te->entries; e; e = e->next) {
    if (!e->axis)
      memset(named, 1, sizeof named); /* '*' names all the others */
    else if (e->axis->sym && e->axis->sym->kind == SYM_AXIS)
      named[e->axis->sym->index] = true;
  }
  for (int a = 0; a < k->naxes; a++)
    if (!named[a])
      return false;
  return true;
}

static bool type_fully_typed(Checker *k, TypeExpr *te) {
  bool vars = false;
  return type_fully_typed_vars(k, te, &vars) && !vars;
}

static bool fully_typed(Checker *k, FnDecl *fn) {
  for (Param *p = fn->params; p; p = p->next)
    if (!type_fully_typed(k, p->type))
      return false;
  return true;
}

/* Every parameter names every axis, and some size is a shape variable. */
static bool typed_with_vars(Checker *k, FnDecl *fn) {
  bool vars = false;
  for (Param *p = fn->params; p; p = p->next)
    if (!type_fully_typed_vars(k, p->type, &vars))
      return false;
  return vars;
}

/* Each shape variable of a signature's type: a symbol of its own name. */
static void bind_symbols(Checker *k, Expr *e) {
  if (e->kind == EX_BINARY) {
    bind_symbols(k, e->lhs);
    bind_symbols(k, e->rhs);
  } else if (e->kind == EX_NAME && e->sym && e->sym->kind == SYM_SHAPEVAR && !e->sym->is_rest && !e->sym->info) {
    Size *v = arena_alloc(&k->c->arena, sizeof(Size));
    *v = size_symbol(k->c, e->sym->name);
    e->sym->info = v;
  }
}

static void forget_var(Expr *e) {
  if (e->kind == EX_BINARY) {
    forget_var(e->lhs);
    forget_var(e->rhs);
  } else if (e->kind == EX_NAME && e->sym && e->sym->kind == SYM_SHAPEVAR) {
    e->sym->info = NULL;
  }
}

/* The shape variables of the types te (a list): forgotten, or bound to
 * symbols (each variable once, whatever its number of uses). */
static void symbols_of(Checker *k, TypeExpr *te, bool bind) {
  for (; te; te = te->next)
    for (Dim *d = te->dims; d; d = d->next) {
      if (bind)
        bind_symbols(k, d->size);
      else
        forget_var(d->size);
    }
}

static void fn_symbols(Checker *k, FnDecl *fn, bool bind) {
  for (Param *p = fn->params; p; p = p->next)
    symbols_of(k, p->type, bind);
  symbols_of(k, fn->ret, bind);
}

/* Drops the instances made after `last` (NULL: all): those of a check
 * with symbolic shapes, which are never lowered nor reused. */
static void drop_instances_after(Checker *k, Instance *last) {
  if (last)
    last->next = NULL;
  else
    k->instances = NULL;
}

static void check_standalone(Checker *k, FnDecl *fn) {
  Inst inst = {.fn = fn};
  k->inst = &inst;
  k->local_depth = (fn->flags & FN_LOCAL) ? 1 : 0;
  memset(k->local_axis, (fn->flags & FN_LOCAL) ? 1 : 0, sizeof k->local_axis);
  bool ok = true;
  int n = 0;
  for (Param *p = fn->params; p; p = p->next)
    n++;
  Type **args = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(n ? n : 1));
  int i = 0;
  for (Param *p = fn->params; p; p = p->next, i++) {
    bool named[MAX_MESH_AXES];
    Type *t = check_written_type(k, p->type, named);
    if (!t) {
      ok = false;
      continue;
    }
    if ((fn->flags & FN_EXPORT) && t->kind == TY_TENSOR)
      determines_all(k, p->span, named, arena_sprintf(&k->c->arena, "the type of export parameter '%s'", p->name->name));
    args[i] = p->name->sym->info = t;
    if (k->dump)
      dump_binding(k, p->name, t);
  }
  if (ok) {
    Instance *self = new_instance(k, fn, n, args);
    self->local_mask = local_mask(k);
    run_instance(k, self, &inst);
  }
  check_flush_chain(k); /* it may point at `inst`, which ends here */
  k->inst = NULL;
  k->local_depth = 0;
}

/* A function whose signature names every mesh axis but has shape
 * variables, checked on its own with the variables as symbols (SPEC 3): an
 * einsum label that is 4 in one operand and 2 in another is an error
 * whatever Bt is.  A trial check, muted, says whether there are errors and
 * whether any rule needed a symbol's value (a size added to another, a
 * slice to the end, a redistribute plan): then the errors wait for a call.
 * Otherwise the check runs again and reports them, at the function, once;
 * its calls are not checked again (symbolic_failed). */
static void check_symbolic(Checker *k, FnDecl *fn) {
  Compiler *c = k->c;
  Instance *last = k->instances;
  while (last && last->next)
    last = last->next;
  FILE *dump = k->dump;
  k->dump = NULL;
  k->symbolic = true;
  k->value_dependent = false;
  int nerrors = c->nerrors, nfailed = k->nfailed;
  size_t nseen = k->nseen;
  fn_symbols(k, fn, false);
  fn_symbols(k, fn, true);
  c->mute = true;
  check_standalone(k, fn);
  c->mute = false;
  c->suppress = false;
  bool failed = c->nerrors != nerrors || k->nfailed != nfailed;
  c->nerrors = nerrors;
  k->nfailed = nfailed;
  k->nseen = nseen;
  drop_instances_after(k, last);
  if (failed && !k->value_dependent) {
    fn_symbols(k, fn, false);
    fn_symbols(k, fn, true);
    check_standalone(k, fn);
    fn->symbolic_failed = c->nerrors != nerrors;
    drop_instances_after(k, last);
  }
  fn_symbols(k, fn, false);
  k->symbolic = false;
  k->dump = dump;
}

static bool check_all(Checker *k) {
  Compiler *c = k->c;
  int before = c->nerrors;
  for (Module *m = c->modules; m; m = m->next)
    for (Item *it = m->items; it; it = it->next) {
      if (it->kind != IT_FN)
        continue;
      FnDecl *fn = it->fn;
      if (fn->flags & FN_EXPORT && !fully_typed(k, fn)) {
        error_at(c, fn->name_span, "export fn '%s' needs a fully concrete signature", fn->name);
        help(c, "give every parameter a type with fixed sizes that names every mesh axis");
        continue;
      }
      if (fn->params == NULL || fully_typed(k, fn))
        check_standalone(k, fn);
      else if (typed_with_vars(k, fn))
        check_symbolic(k, fn);
    }
  check_flush_chain(k);
  free(k->seen);
  return c->nerrors == before;
}

bool check_and_lower(Compiler *c, Mesh *mesh, void (*lower)(Checker *, Instance *, void *), void *arg,
                     Instance **instances) {
  Checker k = {.c = c, .mesh = mesh, .naxes = mesh->naxes, .lower = lower, .lower_arg = arg};
  bool ok = check_all(&k);
  if (instances)
    *instances = k.instances;
  return ok;
}

bool check_program(Compiler *c, Mesh *mesh, FILE *dump_types) {
  Checker k = {.c = c, .mesh = mesh, .naxes = mesh->naxes, .dump = dump_types};
  return check_all(&k);
}
