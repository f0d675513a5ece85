/* check_rules.c: the helpers the built-in rules share (SPEC sections 4, 5,
 * 7): which axes are local here, a call's arguments, written types and
 * whether a value fits one, combine() (the single place the per-axis
 * R/I/V/P rules of an op's class live), broadcasting and elementwise ops,
 * out_partial_axes=.  Below the rule files, above check_diag.c and
 * shardprop.c; it calls back into the expression checker only for an
 * argument (check_expr). */
#include <string.h>

#include "check.h"
#include "shardprop.h"

/* The types of host values and statements: shared, never mutated (types
 * are copied with type_clone before any change), so that a long program
 * does not allocate one per literal. */
Type *check_host_type(TypeKind kind) {
  static Type host[TY_RECORD + 1];
  host[kind].kind = kind;
  return &host[kind];
}

/* ---- which axes are local here (SPEC 7, per mesh axis) ---- */

bool check_axis_local(const Checker *k, int a) { return k->local_depth > 0 && k->local_axis[a]; }

bool check_all_local(const Checker *k) {
  if (k->local_depth == 0)
    return false;
  for (int a = 0; a < k->naxes; a++)
    if (!k->local_axis[a])
      return false;
  return true;
}

/* ---- arguments ---- */

Arg *call_named(Checker *k, Expr *call, const char *name) {
  Name n = intern_cstr(k->c, name);
  for (Arg *a = call->args; a; a = a->next)
    if (a->name == n)
      return a;
  return NULL;
}

static int count_positional(Expr *call) {
  int n = 0;
  for (Arg *a = call->args; a; a = a->next)
    n += !a->name;
  return n;
}

/* Named arguments must be ones the built-in takes, each at most once. */
bool check_named_args(Checker *k, Expr *call, Builtin op) {
  bool ok = true;
  const char *allowed = builtin_named_args[op];
  for (Arg *a = call->args; a; a = a->next) {
    if (!a->name)
      continue;
    size_t n = strlen(a->name);
    const char *p = allowed;
    bool found = false;
    while (*p && !found) {
      const char *comma = strchr(p, ',');
      size_t len = comma ? (size_t)(comma - p) : strlen(p);
      found = len == n && strncmp(p, a->name, n) == 0;
      p = comma ? comma + 1 : p + len;
    }
    for (Arg *b = call->args; b != a && found; b = b->next)
      if (b->name == a->name) {
        check_error(k, a->name_span, "'%s=' is given twice", a->name);
        ok = false;
      }
    if (!found) {
      if (*allowed)
        check_error(k, a->name_span, "%s() has no argument '%s'", builtin_name[op], a->name);
      else
        check_error(k, a->name_span, "%s() takes no named arguments", builtin_name[op]);
      if (*allowed)
        help(k->c, "the named arguments of %s() are: %s", builtin_name[op], allowed);
      ok = false;
    }
  }
  return ok;
}

bool want_args(Checker *k, Expr *call, Builtin op, int lo, int hi) {
  int n = count_positional(call);
  if (n >= lo && n <= hi)
    return true;
  if (lo == hi)
    check_error(k, call->span, "%s() takes %d argument%s, got %d", builtin_name[op], lo, lo == 1 ? "" : "s", n);
  else
    check_error(k, call->span, "%s() takes %d to %d arguments, got %d", builtin_name[op], lo, hi, n);
  return false;
}

/* The value of an integer expression known when the program is compiled:
 * integers, constants, the sizes of the instance being checked (or
 * lowered), + - * / % on them and the immutable `let`s bound to such an
 * expression (`let half = HD / 2;`). *symbolic is set when a size that is
 * still a symbol was needed (a function checked on its own, SPEC 3). */
bool const_int_expr(const Expr *e, long long *v, bool *symbolic) {
  for (int depth = 0; e && depth < 64; depth++) {
    switch (e->kind) {
    case EX_INT: *v = e->ival; return true;
    case EX_UNARY: {
      long long x;
      if (e->op != OP_NEG || !const_int_expr(e->lhs, &x, symbolic) || x == -__LONG_LONG_MAX__ - 1)
        return false;
      *v = -x;
      return true;
    }
    case EX_BINARY: {
      long long a, b;
      if (!const_int_expr(e->lhs, &a, symbolic) || !const_int_expr(e->rhs, &b, symbolic))
        return false;
      switch (e->op) {
      case OP_ADD: return !__builtin_add_overflow(a, b, v);
      case OP_SUB: return !__builtin_sub_overflow(a, b, v);
      case OP_MUL: return !__builtin_mul_overflow(a, b, v);
      case OP_DIV:
      case OP_MOD:
        if (b == 0 || (a == -__LONG_LONG_MAX__ - 1 && b == -1))
          return false;
        *v = e->op == OP_DIV ? a / b : a % b;
        return true;
      default: return false;
      }
    }
    case EX_NAME:
    case EX_FIELD: {
      const Symbol *s = e->sym;
      if (!s)
        return false;
      if (s->kind == SYM_CONST) {
        if (!s->evaluated || s->is_float)
          return false;
        *v = s->ival;
        return true;
      }
      if (s->kind == SYM_SHAPEVAR) {
        if (!s->info || s->is_rest)
          return false;
        if (size_is_int(*(const Size *)s->info, v))
          return true;
        *symbolic |= size_has_symbol(*(const Size *)s->info);
        return false;
      }
      if (s->kind == SYM_LET && s->def) {
        e = s->def;
        continue;
      }
      return false;
    }
    default: return false;
    }
  }
  return false;
}

/* A host integer argument (dims, sizes, seeds). */
bool host_int(Checker *k, Expr *e, long long *v) {
  bool symbolic = false;
  if (const_int_expr(e, v, &symbolic))
    return true;
  k->value_dependent |= symbolic;
  check_error(k, e->span, "expected an integer constant here");
  const Symbol *s = (e->kind == EX_NAME || e->kind == EX_FIELD) ? e->sym : NULL;
  if (s && s->kind == SYM_VAR)
    help(k->c, "'%s' is a var; a value known when the program is compiled is needed here: bind it with "
               "`let %s = ...;` to integers, constants and sizes",
         s->name, s->name);
  else if (s && s->kind == SYM_LET)
    help(k->c, "'%s' is only known when the program runs; a value known when it is compiled is needed here: "
               "integers, constants, sizes and + - * / %% on them (`let half = HD / 2;`)",
         s->name);
  else if (s && s->kind == SYM_LOOP)
    help(k->c, "a loop's variable is only known when the program runs; a value known when it is compiled is "
               "needed here");
  return false;
}

bool named_int(Checker *k, Expr *call, const char *name, long long *v, bool *given) {
  Arg *a = call_named(k, call, name);
  *given = a != NULL;
  return !a || host_int(k, a->value, v);
}

/* A dim argument, negative counting from the end as in PyTorch. */
bool check_norm_dim(Checker *k, Span sp, long long d, int ndim, int *out) {
  if (d < -ndim || d >= ndim || ndim == 0) {
    check_error(k, sp, "dim %lld is out of range for a tensor with %d dim%s", d, ndim, ndim == 1 ? "" : "s");
    return false;
  }
  *out = (int)(d < 0 ? d + ndim : d);
  return true;
}

Type *arg_tensor(Checker *k, Expr *call, int pos) {
  Arg *a = call_arg(call, pos);
  return a ? check_as_tensor(k, a->value, check_expr(k, a->value)) : type_error();
}

/* ---- written types ---- */

bool size_of(Checker *k, Expr *e, Size *out) {
  switch (e->kind) {
  case EX_INT: *out = size_int(e->ival); return true;
  case EX_NAME: {
    Symbol *s = e->sym;
    if (!s)
      return false;
    if (s->kind == SYM_CONST) {
      if (s->is_float) {
        check_error(k, e->span, "size '%s' is not an integer", s->name);
        return false;
      }
      *out = size_int(s->ival);
      return true;
    }
    if (s->kind == SYM_AXIS) {
      *out = size_axis(s->index);
      return true;
    }
    if (s->kind == SYM_AXIS_PARAM && s->info) {
      *out = size_axis(*(int *)s->info);
      return true;
    }
    if (s->kind == SYM_SHAPEVAR && s->info && !s->is_rest) {
      *out = *(Size *)s->info;
      return true;
    }
    check_error(k, e->span, "the size '%s' is not known here", e->name);
    return false;
  }
  case EX_BINARY: {
    Size a, b;
    if (!size_of(k, e->lhs, &a) || !size_of(k, e->rhs, &b))
      return false;
    long long x, y;
    switch (e->op) {
    case OP_MUL: *out = size_mul(a, b); return true;
    case OP_DIV: *out = size_div(a, b); return true;
    case OP_ADD:
    case OP_SUB:
      if (size_is_int(a, &x) && size_is_int(b, &y)) {
        *out = size_int(e->op == OP_ADD ? x + y : x - y);
        return true;
      }
      k->value_dependent |= size_has_symbol(a) || size_has_symbol(b);
      check_error(k, e->span, "sizes with mesh axes can be multiplied and divided, not added");
      return false;
    default: break;
    }
    break;
  }
  default: break;
  }
  check_error(k, e->span, "not a size");
  return false;
}

int axis_of(AxisRef *a) {
  Symbol *s = a->sym;
  if (!s)
    return -1;
  if (s->kind == SYM_AXIS)
    return s->index;
  if (s->kind == SYM_AXIS_PARAM && s->info)
    return *(int *)s->info;
  return -1;
}

/* Converts a written type.  named[a] is set for the axes the type names;
 * the others are left LT_NONE.  Returns NULL after reporting an error. */
Type *check_type_expr(Checker *k, TypeExpr *te, bool named[MAX_MESH_AXES]) {
  Type *t = type_new(k->c, TY_TENSOR);
  t->dtype = te->dtype;
  t->local = check_all_local(k);
  memset(named, 0, sizeof(bool) * MAX_MESH_AXES);
  bool ok = true;
  for (Dim *d = te->dims; d; d = d->next) {
    if (d->rest) {
      Symbol *s = d->size->sym;
      Type *seq = s ? s->info : NULL;
      if (!seq) {
        check_error(k, d->span, "the dims '..%s' are not known here", d->size->name);
        return NULL;
      }
      for (int j = 0; j < seq->ndim && t->ndim < MAX_DIMS; j++)
        t->shape[t->ndim++] = seq->shape[j];
      continue;
    }
    if (t->ndim == MAX_DIMS) {
      check_error(k, d->span, "a tensor has at most %d dims", MAX_DIMS);
      return NULL;
    }
    int dim = t->ndim++;
    ok &= size_of(k, d->size, &t->shape[dim]);
    int nk = 0;
    for (AxisRef *a = d->axes; a; a = a->next) {
      int ax = axis_of(a);
      if (ax < 0)
        return NULL;
      if (named[ax]) {
        check_error(k, a->span, "mesh axis '%s' appears twice in this type", a->name);
        return NULL;
      }
      named[ax] = true;
      t->lt[ax] = LT_V;
      if (!check_axis_local(k, ax)) {
        t->spec[dim][nk++] = (int8_t)ax;
      } else {
        /* a local axis: the per-rank block; it must lead the dim's axes */
        if (nk > 0) {
          check_error(k, a->span, "'%s' is local here, but it follows the global axis '%s' in this dim", a->name,
                      axis_name(k, t->spec[dim][nk - 1]));
          note_at(k->c, (Span){0, 0, 0}, "only the leading (major) axes of a dim can be taken local");
          help(k->c, "take '%s' local too, or list the local axes first", axis_name(k, t->spec[dim][nk - 1]));
          return NULL;
        }
        t->shape[dim] = size_div(t->shape[dim], size_axis(ax));
      }
    }
  }
  for (AxisEntry *e = te->entries; e; e = e->next) {
    if (!e->axis)
      continue;
    int ax = axis_of(e->axis);
    if (ax < 0)
      return NULL;
    if (named[ax]) {
      check_error(k, e->span, "mesh axis '%s' is given a type twice", e->axis->name);
      help(k->c, "a sharded axis (@%s) is V already; give each axis one type", e->axis->name);
      return NULL;
    }
    named[ax] = true;
    if (e->lt.kind == LT_S) {
      int dim;
      if (!check_norm_dim(k, e->span, e->lt.sdim, t->ndim, &dim))
        return NULL;
      if (t->spec[dim][0] >= 0) {
        check_error(k, e->span, "S(%d) is ambiguous: dim %d is already sharded", e->lt.sdim, dim);
        help(k->c, "write the order of the axes in the dims, as in [N@(%s, %s)]",
             axis_name(k, t->spec[dim][0]), e->axis->name);
        return NULL;
      }
      t->lt[ax] = LT_V;
      if (!check_axis_local(k, ax))
        t->spec[dim][0] = (int8_t)ax; /* on a local axis S(i) documents a V: the size is the block's */
    } else {
      t->lt[ax] = e->lt.kind;
    }
  }
  for (AxisEntry *e = te->entries; e; e = e->next) {
    if (e->axis)
      continue;
    for (int a = 0; a < k->naxes; a++)
      if (!named[a]) {
        named[a] = true;
        t->lt[a] = e->lt.kind == LT_S ? LT_V : e->lt.kind;
      }
  }
  return ok ? t : NULL;
}

/* A type that makes a value must determine every mesh axis. */
bool determines_all(Checker *k, Span sp, const bool named[MAX_MESH_AXES], const char *what) {
  for (int a = 0; a < k->naxes; a++)
    if (!named[a]) {
      check_error(k, sp, "%s does not say what it is on mesh axis '%s'", what, axis_name(k, a));
      help(k->c, "name every axis, e.g. {%s: R} (or {*: R} for all the others)", axis_name(k, a));
      return false;
    }
  return true;
}

/* Whether `actual` fits `want` on the axes `want` names (and in shape). */

/* fits(), with the source text of the value for the help line; a help
 * whose code replaces the value is a fix of fix_at (NULL: no fix). */
bool check_fits(Checker *k, Span sp, const Type *want, const bool named[MAX_MESH_AXES], const Type *actual,
                   const char *what, const char *xtext, Expr *fix_at) {
  if (actual->kind == TY_ERROR)
    return true;
  if (actual->kind != TY_TENSOR) {
    check_error(k, sp, "%s: expected a tensor %s, got %s", what, ck_type(k, want), ck_type(k, actual));
    return false;
  }
  bool shape_ok = want->dtype == actual->dtype && want->ndim == actual->ndim;
  for (int d = 0; shape_ok && d < want->ndim; d++)
    shape_ok = size_eq(want->shape[d], actual->shape[d]);
  if (!shape_ok && !(actual->literal && actual->ndim == 0 && want->ndim == 0)) {
    check_error(k, sp, "%s: expected %s, got %s", what, ck_type(k, want), ck_type(k, actual));
    return false;
  }
  for (int a = 0; a < k->naxes; a++) {
    if (!named[a] || actual->literal)
      continue;
    int wd = -1, ad = -1;
    bool ws = type_spec_has(want, a, &wd), as = type_spec_has(actual, a, &ad);
    if (want->lt[a] != actual->lt[a] || ws != as || wd != ad) {
      check_error(k, sp, "%s: on mesh axis '%s' expected %s, got %s", what, axis_name(k, a),
                  ws ? arena_sprintf(&k->c->arena, "S(%d)", wd) : lt_name(want->lt[a]),
                  as ? arena_sprintf(&k->c->arena, "S(%d)", ad) : lt_name(actual->lt[a]));
      note_at(k->c, (Span){0, 0, 0}, "expected %s", ck_type(k, want));
      note_at(k->c, (Span){0, 0, 0}, "     got %s", ck_type(k, actual));
      LType have = ltype_on(actual, a), need = ltype_on(want, a);
      if (want->local && need.kind == LT_V)
        need.kind = LT_S, need.sdim = 0;
      long long one = 0;
      if (ws && size_is_int(want->shape[wd], &one) && one == 1) { /* no layout change makes this fit */
        note_at(k->c, (Span){0, 0, 0}, "dim %d of the expected type has size 1: one row cannot be split over '%s'", wd,
                axis_name(k, a));
        help(k->c, "a dim split over '%s' needs a size that is a multiple of the ranks on '%s': for a batch in "
                   "microbatches, each must hold a multiple of them (fewer microbatches: at most B / %s)",
             axis_name(k, a), axis_name(k, a), axis_name(k, a));
      } else if (have.kind == LT_NONE || need.kind == LT_NONE)
        help(k->c, "give the value a type on '%s'", axis_name(k, a));
      else if (have.kind == LT_R && need.kind == LT_I)
        help(k->c, "make it I where it is reduced (all_reduce(..., %s, src=P, dst=I) rather than dst=R); if the copies are "
             "meant as they are: reinterpret(%s, %s, src=R, dst=I, expert=true)", axis_name(k, a), xtext ? xtext : "x",
             axis_name(k, a));
      else {
        const char *code = transition_fix(k, xtext ? xtext : "x", axis_name(k, a), have, need);
        const char *msg =
            arena_sprintf(&k->c->arena, "to get %s on '%s': %s", lt_name(ltype_base(need)), axis_name(k, a), code);
        if (fix_at)
          help_wrap(k, fix_at, code, msg);
        else if (!help_library_call(k, sp))
          help(k->c, "%s", msg);
      }
      return false;
    }
  }
  /* a dim sharded on several named axes: their order (major to minor) */
  for (int d = 0; d < want->ndim && !actual->literal; d++) {
    int8_t w[MAX_MESH_AXES], g[MAX_MESH_AXES];
    int nw = 0, ng = 0;
    for (int j = 0; j < MAX_MESH_AXES && want->spec[d][j] >= 0; j++)
      if (named[want->spec[d][j]])
        w[nw++] = want->spec[d][j];
    for (int j = 0; j < MAX_MESH_AXES && actual->spec[d][j] >= 0; j++)
      if (named[actual->spec[d][j]])
        g[ng++] = actual->spec[d][j];
    if (nw == ng && memcmp(w, g, (size_t)nw) == 0)
      continue;
    check_error(k, sp, "%s: dim %d is sharded on %s, expected %s", what, d, dim_axes_text(k, actual, d),
                dim_axes_text(k, want, d));
    note_at(k->c, (Span){0, 0, 0}, "the axes of a dim are major to minor: another order is another block on each rank");
    note_at(k->c, (Span){0, 0, 0}, "expected %s", ck_type(k, want));
    note_at(k->c, (Span){0, 0, 0}, "     got %s", ck_type(k, actual));
    const char *code = arena_sprintf(&k->c->arena, "redistribute(%s, %s)", xtext ? xtext : "x", ck_type(k, want));
    if (fix_at)
      help_wrap(k, fix_at, code, arena_sprintf(&k->c->arena, "reorder them: %s", code));
    else
      help(k->c, "reorder them: %s", code);
    return false;
  }
  return true;
}

/* ---- the local SPMD rules, axis by axis (SPEC section 5) ---- */

/* The result type on each axis of an op of rule `rule` over `ops`, or false
 * after reporting why not.  Scalar literals and host numbers adopt the
 * others' types, except next to P in a linear op (affine: the literal would
 * be summed once per rank). */
bool combine(Checker *k, Rule rule, const char *opname, Span sp, Operand *ops, int n,
                    LTypeKind out[MAX_MESH_AXES]) {
  for (int a = 0; a < k->naxes; a++) {
    int np = 0, nr = 0, ni = 0, nv = 0, nlit = 0, first_p = -1, first_other = -1;
    for (int i = 0; i < n; i++) {
      const Type *t = ops[i].t;
      if (t->literal || t->kind != TY_TENSOR) {
        nlit++;
        if (first_other < 0)
          first_other = i;
        continue;
      }
      switch (t->lt[a]) {
      case LT_P: np++; if (first_p < 0) first_p = i; break;
      case LT_R: nr++; break;
      case LT_I: ni++; break;
      case LT_V: nv++; break;
      default:
        check_error(k, ops[i].e->span, "the type of '%s' on mesh axis '%s' is not known", src_text(k, ops[i].e),
                    axis_name(k, a));
        help(k->c, "name the axis in its type, e.g. {%s: R}", axis_name(k, a));
        return false;
      }
      if (t->lt[a] != LT_P && first_other < 0)
        first_other = i;
    }
    int ntensor = np + nr + ni + nv;
    out[a] = ntensor == 0 ? LT_R : LT_NONE;
    if (ntensor == 0)
      continue;
    if (ni && ni != ntensor) {
      int bad = -1;
      for (int i = 0; i < n && bad < 0; i++)
        if (!ops[i].t->literal && ops[i].t->kind == TY_TENSOR && ops[i].t->lt[a] != LT_I)
          bad = i;
      check_error(k, sp, "%s mixes I with %s on mesh axis '%s'", opname, lt_name(ops[bad].t->lt[a]),
                  axis_name(k, a));
      note_at(k->c, (Span){0, 0, 0}, "an I value's gradient must be the same on every rank, so it combines only with I values");
      note_operands(k, ops, n);
      if (ops[bad].t->lt[a] == LT_P)
        note_p_origin(k, ops[bad].e, a);
      if (ops[bad].t->lt[a] == LT_P && rule != RULE_MULTILINEAR) {
        const char *code = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=I)", src_text(k, ops[bad].e),
                                         axis_name(k, a));
        if (!explain_at_user(k, ops[bad].e, a))
          help_wrap(k, ops[bad].e, code, arena_sprintf(&k->c->arena, "reduce the pending sum to I first: %s", code));
        return false;
      }
      for (int i = 0; i < n; i++)
        if (!ops[i].t->literal && ops[i].t->kind == TY_TENSOR && ops[i].t->lt[a] == LT_I) {
          const char *code = arena_sprintf(&k->c->arena, "convert(%s, %s, src=I, dst=R)", src_text(k, ops[i].e),
                                           axis_name(k, a));
          help_wrap(k, ops[i].e, code,
                    arena_sprintf(&k->c->arena, "use the I value as R where it is computed with: %s", code));
          break;
        }
      return false;
    }
    if (np == 0) {
      out[a] = ni ? LT_I : nv ? LT_V : LT_R;
      continue;
    }
    Expr *pe = ops[first_p].e;
    const char *fix = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=R)", src_text(k, pe), axis_name(k, a));
    if (nv) {
      check_error(k, sp, "%s mixes P with V on mesh axis '%s'", opname, axis_name(k, a));
      note_at(k->c, (Span){0, 0, 0}, "a pending sum (P) cannot meet a value that differs per rank (V)");
      note_operands(k, ops, n);
      note_p_origin(k, pe, a);
      if (!explain_at_user(k, pe, a))
        help_wrap(k, pe, fix, arena_sprintf(&k->c->arena, "reduce the partial operand first: %s", fix));
      return false;
    }
    switch (rule) {
    case RULE_NONLINEAR:
      check_error(k, sp, "%s is not linear, but '%s' is P (a pending sum) on mesh axis '%s'", opname,
                  src_text(k, pe), axis_name(k, a));
      note_at(k->c, (Span){0, 0, 0}, "f(a) + f(b) is not f(a + b): the sum must happen first");
      note_operands(k, ops, n);
      note_p_origin(k, pe, a);
      if (!explain_at_user(k, pe, a))
        help_wrap(k, pe, fix, arena_sprintf(&k->c->arena, "reduce it first: %s", fix));
      return false;
    case RULE_LINEAR:
      if (nr || nlit) {
        Expr *other = ops[first_other].e;
        check_error(k, sp, "%s adds %s (%s) to a P value on mesh axis '%s'", opname, src_text(k, other),
                    nr && !(ops[first_other].t->literal || ops[first_other].t->kind != TY_TENSOR) ? "R" : "a literal",
                    axis_name(k, a));
        note_at(k->c, (Span){0, 0, 0}, "the other term would be counted once per rank when the pending sum is done");
        note_operands(k, ops, n);
        note_p_origin(k, pe, a);
        Symbol *g = gradient_in(pe);
        if (g && g->grad_of) {
          note_at(k->c, (Span){0, 0, 0},
                  "'%s' is the gradient of '%s', which is R on '%s': its gradient is a pending sum (P), "
                  "so the all-reduce of the gradient is missing",
                  g->name, g->grad_of->name, axis_name(k, a));
          help_wrap(k, pe, fix,
                    arena_sprintf(&k->c->arena,
                                  "reduce the P operand first: %s (or keep '%s' I on '%s' and use convert(%s, %s, "
                                  "src=I, dst=R) inside the loss: the backward then all-reduces its gradient)",
                                  fix, g->grad_of->name, axis_name(k, a), g->grad_of->name, axis_name(k, a)));
        } else if (!explain_at_user(k, pe, a)) {
          help_wrap(k, pe, fix, arena_sprintf(&k->c->arena, "reduce the P operand first: %s", fix));
        }
        return false;
      }
      out[a] = LT_P;
      continue;
    case RULE_MULTILINEAR:
    case RULE_DIVIDE: {
      bool p_divisor = false;
      for (int i = 1; i < n; i++)
        p_divisor |= ops[i].t->kind == TY_TENSOR && !ops[i].t->literal && ops[i].t->lt[a] == LT_P;
      if (rule == RULE_DIVIDE && (first_p != 0 || p_divisor)) {
        check_error(k, sp, "division by a P value (a pending sum) on mesh axis '%s'", axis_name(k, a));
        note_at(k->c, (Span){0, 0, 0}, "x / (a1 + a2) is not x/a1 + x/a2: only the numerator may be a pending sum");
        note_operands(k, ops, n);
        int d = 1; /* the divisor that is P */
        while (d < n - 1 && !(ops[d].t->kind == TY_TENSOR && !ops[d].t->literal && ops[d].t->lt[a] == LT_P))
          d++;
        note_p_origin(k, ops[d].e, a);
        const char *dfix = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=R)", src_text(k, ops[d].e),
                                         axis_name(k, a));
        if (!explain_at_user(k, ops[d].e, a))
          help_wrap(k, ops[d].e, dfix, arena_sprintf(&k->c->arena, "reduce the divisor first: %s", dfix));
        return false;
      }
      if (np > 1) {
        check_error(k, sp, "%s has multiple factors that are P on mesh axis '%s'", opname, axis_name(k, a));
        note_at(k->c, (Span){0, 0, 0}, "(a1 + a2) * (b1 + b2) is not a1*b1 + a2*b2: only one factor may be a pending sum");
        note_operands(k, ops, n);
        for (int i = 0; i < n; i++)
          if (ops[i].t->kind == TY_TENSOR && !ops[i].t->literal && ops[i].t->lt[a] == LT_P)
            note_p_origin(k, ops[i].e, a);
        if (!explain_at_user(k, pe, a))
          help_wrap(k, pe, fix, arena_sprintf(&k->c->arena, "reduce one factor first: %s", fix));
        return false;
      }
      out[a] = LT_P;
      continue;
    }
    }
  }
  return true;
}

/* ---- shapes ---- */

bool is_scalar_like(const Type *t) {
  return t->kind == TY_INT || t->kind == TY_FLOAT || (t->kind == TY_TENSOR && t->literal);
}

Type *check_as_tensor(Checker *k, Expr *e, Type *t) {
  if (t->kind == TY_TENSOR || t->kind == TY_ERROR)
    return t;
  if (t->kind == TY_INT || t->kind == TY_FLOAT || t->kind == TY_BOOL) {
    if (!k->literal_scalar) { /* one shared, never-mutated scalar literal type */
      k->literal_scalar = type_scalar(k->c, DT_NONE, k->naxes, LT_R);
      k->literal_scalar->literal = true;
    }
    return k->literal_scalar;
  }
  check_error(k, e->span, "expected a tensor, got %s", ck_type(k, t));
  return type_error();
}

/* NumPy broadcasting of operand shapes and dtypes; the result's partition
 * spec is shard_broadcast()'s (shardprop.c).  The result is built in *r
 * (caller's storage, so that elementwise ops allocate only a type that is
 * new). */
static Type *broadcast(Checker *k, Span sp, const char *opname, Operand *ops, int n, Type *r) {
  memset(r, 0, sizeof *r);
  memset(r->spec, -1, sizeof r->spec);
  r->kind = TY_TENSOR;
  r->local = check_all_local(k);
  r->literal = true;
  for (int i = 0; i < n; i++) {
    const Type *t = ops[i].t;
    if (!t->literal) {
      if (r->dtype != DT_NONE && t->dtype != DT_NONE && t->dtype != r->dtype) {
        check_error(k, sp, "%s needs operands of one dtype, got %s and %s", opname, dtype_name(r->dtype),
                    dtype_name(t->dtype));
        help(k->c, "convert one: astype(%s, %s)", src_text(k, ops[i].e), dtype_name(r->dtype));
        return type_error();
      }
      r->dtype = t->dtype;
      r->literal = false;
    }
    if (t->ndim > r->ndim)
      r->ndim = t->ndim;
  }
  if (r->dtype == DT_NONE)
    for (int i = 0; i < n; i++)
      if (ops[i].t->kind == TY_TENSOR && ops[i].t->dtype != DT_NONE)
        r->dtype = ops[i].t->dtype;
  for (int rd = 0; rd < r->ndim; rd++) {
    /* the reference: the operand whose size gives the result's */
    int first, ref = shard_broadcast_ref(ops, n, r->ndim, rd, &first);
    const Type *rt = ops[ref >= 0 ? ref : first].t;
    r->shape[rd] = rt->shape[rd - (r->ndim - rt->ndim)];
    if (ref < 0)
      continue;
    for (int i = 0; i < n; i++) {
      const Type *t = ops[i].t;
      int d = rd - (r->ndim - t->ndim);
      long long one;
      bool bcast = d < 0 || (size_is_int(t->shape[d], &one) && one == 1);
      if (i == ref || t->literal)
        continue;
      if (!bcast && !size_eq(r->shape[rd], t->shape[d])) {
        check_error(k, sp, "%s: shapes do not broadcast: dim %d is %s in one operand and %s in another", opname, rd,
                    size_str(k->c, k->mesh, r->shape[rd]), size_str(k->c, k->mesh, t->shape[d]));
        note_operands(k, ops, n);
        return type_error();
      }
    }
  }
  return r;
}

/* Elementwise ops: broadcast shapes, combine types axis by axis, then the
 * layouts (shard_broadcast). */
Type *elementwise(Checker *k, Span sp, const char *opname, Rule rule, Operand *ops, int n) {
  for (int i = 0; i < n; i++)
    if (ops[i].t->kind == TY_ERROR)
      return type_error();
  /* shapes, then the local types, then the layouts (SPEC 7) */
  Type shape_only;
  Type *r = broadcast(k, sp, opname, ops, n, &shape_only);
  if (r->kind == TY_ERROR)
    return type_error();
  if (r->literal)
    return type_clone(k->c, r);
  if (!combine(k, rule, opname, sp, ops, n, r->lt))
    return type_error();
  if (!shard_broadcast(k, sp, opname, ops, n, r))
    return type_error();
  /* In global code a sharded dim of the result means V with a layout; a
   * broadcast operand that is R on that axis is fine (each rank uses its copy).
   * Types are immutable: an operand's type that equals the result serves. */
  for (int i = 0; i < n; i++)
    if (ops[i].t->kind == TY_TENSOR && !ops[i].t->literal && ops[i].t->local == r->local &&
        type_same(ops[i].t, r, k->naxes))
      return (Type *)ops[i].t;
  return type_clone(k->c, r);
}

/* ---- out_partial_axes (local: reinterpret V -> P after the op) ---- */

/* The local rule: only a V result can be declared a pending sum.  The
 * contracted[] axes are those of the op's sharded contracted dims, for the
 * shard rules (shard_out_partial_axis, shard_out_partial_complete). */
bool apply_out_partial(Checker *k, Expr *call, Type *r, const bool contracted[MAX_MESH_AXES]) {
  Arg *opa = call_named(k, call, "out_partial_axes");
  bool listed[MAX_MESH_AXES] = {0};
  if (opa) {
    Type *axes = check_expr(k, opa->value);
    if (axes->kind != TY_AXES)
      return false;
    for (int i = 0; i < axes->naxes; i++) {
      int a = axes->axes[i];
      listed[a] = true;
      if (r->lt[a] == LT_R || r->lt[a] == LT_I) {
        check_error(k, opa->value->span, "out_partial_axes names '%s', but the result is %s there",
                    axis_name(k, a), lt_name(r->lt[a]));
        note_at(k->c, (Span){0, 0, 0}, "only a result that varies per rank (V) can be declared a pending sum");
        if (r->lt[a] == LT_R)
          help(k->c, "drop '%s' from out_partial_axes; if a P value is needed, convert the result without changing it: "
               "convert(y, %s, src=R, dst=P)", axis_name(k, a), axis_name(k, a));
        else
          help(k->c, "drop '%s' from out_partial_axes", axis_name(k, a));
        return false;
      }
      if (!shard_out_partial_axis(k, opa->value->span, r, a, contracted))
        return false;
      if (r->lt[a] == LT_P) {
        check_error(k, opa->value->span, "out_partial_axes names '%s', but the result is already P there",
                    axis_name(k, a));
        note_at(k->c, (Span){0, 0, 0}, "one operand is P on '%s', so the result is a pending sum without being declared one",
                axis_name(k, a));
        help(k->c, "drop '%s' from out_partial_axes", axis_name(k, a));
        return false;
      }
      r->lt[a] = LT_P;
    }
  }
  return shard_out_partial_complete(k, call, contracted, listed);
}
