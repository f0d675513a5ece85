/* check_record.c: records (SPEC 13).  A struct's declared type, building a
 * record with named fields, reading a field, checking a record against a
 * declared struct, and ops applied field by field (+ - * /, unary -, the
 * elementwise built-ins, collectives and casts, r[i], zeros_like): each
 * such op is checked once per leaf tensor by the ordinary rules, on a copy
 * of the expression whose operands are that leaf (EX_LEAF), and the copies
 * are kept (Expr.map) for the lowering, which turns a record into its
 * leaves.  Errors name the field path (`m.attn.wo`). */
#include <string.h>

#include "check.h"

/* ---- declared types ---- */

/* A struct's declared type: each field's written type (axes a field's type
 * does not name are LT_NONE there), or NULL after an error. */
Type *record_written(Checker *k, StructDecl *st) {
  Type *r = type_new(k->c, TY_RECORD);
  r->st = st;
  r->nelems = st->nfields;
  r->elems = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(st->nfields + 1));
  r->fields = arena_alloc(&k->c->arena, sizeof(Name) * (size_t)(st->nfields + 1));
  int i = 0;
  for (StructField *f = st->fields; f; f = f->next, i++) {
    bool named[MAX_MESH_AXES];
    r->fields[i] = f->name;
    r->elems[i] = check_written_type(k, f->type, named);
    if (!r->elems[i])
      return NULL;
  }
  return r;
}

Type *check_written_type(Checker *k, TypeExpr *te, bool named[MAX_MESH_AXES]) {
  if (!te->struct_name)
    return check_type_expr(k, te, named);
  memset(named, 0, sizeof(bool) * MAX_MESH_AXES);
  if (!te->sym || te->sym->kind != SYM_STRUCT)
    return NULL;
  return record_written(k, te->sym->st);
}

/* The axes a written tensor type names: those it gives a letter. */
static void named_of(Checker *k, const Type *want, bool named[MAX_MESH_AXES]) {
  memset(named, 0, sizeof(bool) * MAX_MESH_AXES);
  for (int a = 0; a < k->naxes; a++)
    named[a] = want->lt[a] != LT_NONE;
}

/* "a Model", "an Attn": a struct's name with its article. */
static const char *a_struct(Checker *k, const char *name) {
  bool vowel = name[0] && strchr("AEIOUaeiou", name[0]);
  return arena_sprintf(&k->c->arena, "%s %s", vowel ? "an" : "a", name);
}

static const char *struct_text(Checker *k, const Type *t) {
  return t->st ? a_struct(k, t->st->name) : "an anonymous";
}

/* The fields of a record type, for help lines: "wqkv, wo". */
static const char *field_list(Checker *k, const Type *t) {
  StrBuf sb;
  sb_init(&sb, &k->c->arena);
  for (int i = 0; i < t->nelems; i++)
    sb_printf(&sb, "%s%s", i ? ", " : "", t->fields[i]);
  return sb.len ? sb.data : "(none)";
}

static bool fits_rec(Checker *k, Span sp, const Type *want, const Type *actual, const char *what, const char *xtext,
                     const char *path, Expr *fix_at) {
  if (want->kind != TY_RECORD) {
    bool named[MAX_MESH_AXES];
    named_of(k, want, named);
    const char *w = *path ? arena_sprintf(&k->c->arena, "%s, field '%s'", what, path) : what;
    const char *x = *path ? arena_sprintf(&k->c->arena, "%s.%s", xtext ? xtext : "x", path) : xtext;
    return check_fits(k, sp, want, named, actual, w, x, *path ? NULL : fix_at);
  }
  if (actual->kind == TY_ERROR)
    return true;
  const char *w = *path ? arena_sprintf(&k->c->arena, "%s, field '%s'", what, path) : what;
  if (actual->kind != TY_RECORD) {
    check_error(k, sp, "%s: expected %s record, got %s", w, a_struct(k, want->st->name), ck_type(k, actual));
    help(k->c, "build one with %s(%s)", want->st->name,
         arena_sprintf(&k->c->arena, "%s=...%s", want->nelems ? want->fields[0] : "", want->nelems > 1 ? ", ..." : ""));
    return false;
  }
  if (actual->st != want->st) {
    if (!actual->st) {
      check_error(k, sp, "%s: expected %s record, got an anonymous record (r[i] of a record gives one)", w,
                  a_struct(k, want->st->name));
      help(k->c, "leave the parameter's type out to take it as it is: fn f(..., p)");
    } else {
      check_error(k, sp, "%s: expected %s record, got %s record", w, a_struct(k, want->st->name),
                  a_struct(k, actual->st->name));
      note_at(k->c, (Span){0, 0, 0}, "structs are nominal: records of two structs are different types, even with the same fields");
    }
    return false;
  }
  for (int i = 0; i < want->nelems; i++) {
    const char *p = *path ? arena_sprintf(&k->c->arena, "%s.%s", path, want->fields[i]) : want->fields[i];
    if (!fits_rec(k, sp, want->elems[i], actual->elems[i], what, xtext, p, NULL))
      return false;
  }
  return true;
}

bool check_fits_any(Checker *k, Span sp, const Type *want, const bool named[MAX_MESH_AXES], const Type *actual,
                    const char *what, const char *xtext, Expr *fix_at) {
  if (want->kind != TY_RECORD)
    return check_fits(k, sp, want, named, actual, what, xtext, fix_at);
  return fits_rec(k, sp, want, actual, what, xtext, "", NULL);
}

/* The type a value takes where it meets a written type it fits: its own,
 * except that a literal takes the written type (R on the axes left open). */
Type *check_bound_type(Checker *k, const Type *want, const bool named[MAX_MESH_AXES], Type *actual) {
  if (actual->kind == TY_RECORD || want->kind == TY_RECORD)
    return actual;
  if (actual->kind == TY_TENSOR && actual->literal) {
    Type *t = type_clone(k->c, want);
    for (int a = 0; a < k->naxes; a++)
      if (!named[a])
        t->lt[a] = LT_R;
    return t;
  }
  return actual;
}

/* ---- building and reading ---- */

static StructField *struct_field(StructDecl *st, Name name) {
  for (StructField *f = st->fields; f; f = f->next)
    if (f->name == name)
      return f;
  return NULL;
}

/* The closest field name to `name`, if one is close. */
static Name close_field(const Type *t, Name name) {
  Name best = NULL;
  size_t n = strlen(name);
  for (int i = 0; i < t->nelems; i++) {
    const char *f = t->fields[i];
    size_t m = strlen(f), common = 0;
    while (common < n && common < m && f[common] == name[common])
      common++;
    if ((common * 2 >= n && common * 2 >= m) || (n == m && n > 2 && strncmp(f, name, n - 1) == 0))
      best = f;
  }
  return best;
}

/* Name(field=value, ...): every field once, by name, in any order. */
Type *check_struct_new(Checker *k, Expr *call, StructDecl *st) {
  Type *want = record_written(k, st);
  bool ok = want != NULL, positional = false;
  for (Arg *a = call->args; a; a = a->next) {
    Type *t = check_expr(k, a->value);
    ok &= t->kind != TY_ERROR;
    if (!a->name) {
      check_error(k, a->value->span, "%s record is built with its fields named: %s(%s=...)", a_struct(k, st->name),
                  st->name, st->fields ? st->fields->name : "field");
      help(k->c, "name each field: %s(%s)", st->name, want ? field_list(k, want) : "...");
      ok = false;
      positional = true;
      continue;
    }
    if (!struct_field(st, a->name)) {
      check_error(k, a->name_span, "struct '%s' has no field '%s'", st->name, a->name);
      Name best = want ? close_field(want, a->name) : NULL;
      if (best)
        help(k->c, "did you mean '%s'?", best);
      else if (want)
        help(k->c, "the fields of %s are: %s", st->name, field_list(k, want));
      ok = false;
      continue;
    }
    for (Arg *b = call->args; b != a; b = b->next)
      if (b->name == a->name) {
        check_error(k, a->name_span, "field '%s' is given twice", a->name);
        note_at(k->c, b->name_span, "first given here");
        ok = false;
        break;
      }
  }
  if (!want)
    return type_error();
  Type *r = type_clone(k->c, want);
  r->elems = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(want->nelems + 1));
  int i = 0;
  for (StructField *f = st->fields; f; f = f->next, i++) {
    Arg *given = NULL;
    for (Arg *a = call->args; a && !given; a = a->next)
      if (a->name == f->name)
        given = a;
    if (!given) {
      if (positional) /* reported as such already */
        continue;
      check_error(k, call->span, "%s(...) leaves out field '%s'", st->name, f->name);
      help(k->c, "give every field once: %s(%s)", st->name, field_list(k, want));
      ok = false;
      continue;
    }
    Type *t = given->value->ty;
    if (!ok || t->kind == TY_ERROR)
      continue;
    bool named[MAX_MESH_AXES];
    Type *fw = want->elems[i];
    if (fw->kind == TY_TENSOR)
      named_of(k, fw, named);
    else
      memset(named, 0, sizeof named);
    if (fw->kind == TY_TENSOR && fw->ndim == 0 && (t->kind == TY_INT || t->kind == TY_FLOAT))
      t = check_as_tensor(k, given->value, t); /* a number for a scalar field */
    if (!check_fits_any(k, given->value->span, fw, named, t,
                        arena_sprintf(&k->c->arena, "field '%s' of %s", f->name, st->name),
                        src_text(k, given->value), given->value)) {
      ok = false;
      continue;
    }
    r->elems[i] = check_bound_type(k, fw, named, t);
  }
  return ok ? r : type_error();
}

/* r.name */
Type *check_field(Checker *k, Expr *e) {
  Type *t = check_expr(k, e->lhs);
  if (t->kind == TY_ERROR)
    return t;
  if (t->kind != TY_RECORD) {
    check_error(k, e->span, "'%s' is %s, not a record: '.%s' reads a field of a record", src_text(k, e->lhs),
                ck_type(k, t), e->name);
    return type_error();
  }
  int f = type_field(t, e->name);
  if (f < 0) {
    if (t->st)
      check_error(k, e->span, "struct '%s' has no field '%s'", t->st->name, e->name);
    else
      check_error(k, e->span, "this record has no field '%s'", e->name);
    Name best = close_field(t, e->name);
    if (best)
      help(k->c, "did you mean '%s'?", best);
    else
      help(k->c, "the fields are: %s", field_list(k, t));
    return type_error();
  }
  return t->elems[f];
}

/* ---- ops field by field ---- */

/* Whether an operand may stand beside records: it then broadcasts to every
 * field (a literal, a host number, a constant, a 0-d tensor). */
static bool broadcasts(const Type *t) {
  return t->kind == TY_INT || t->kind == TY_FLOAT || (t->kind == TY_TENSOR && (t->literal || t->ndim == 0));
}

/* A record shaped like `shape` whose leaves are `leaves` from *i on; the
 * anonymous form drops the structs' names (r[i]). */
static Type *rebuild(Checker *k, const Type *shape, Type **leaves, int *i, bool anonymous) {
  if (shape->kind != TY_RECORD)
    return leaves[(*i)++];
  Type *r = type_clone(k->c, shape);
  if (anonymous)
    r->st = NULL;
  r->elems = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(shape->nelems + 1));
  for (int f = 0; f < shape->nelems; f++)
    r->elems[f] = rebuild(k, shape->elems[f], leaves, i, anonymous);
  return r;
}

/* The text of leaf j of operand e for messages: m.attn.wo, (a + b).wo. */
static const char *leaf_text(Checker *k, Expr *e, const Type *t, int j) {
  const char *base = src_text(k, e);
  if (t->kind != TY_RECORD)
    return base;
  bool simple = e->kind == EX_NAME || e->kind == EX_FIELD || e->kind == EX_INDEX || e->kind == EX_CALL ||
                e->kind == EX_LEAF;
  return arena_sprintf(&k->c->arena, simple ? "%s.%s" : "(%s).%s", base, type_leaf_path(k->c, t, j, "."));
}

/* A copy of e (a call: with its own argument list) where each operand
 * slot is replaced by leaf j of that operand. */
static Expr *leaf_copy(Checker *k, Expr *e, Expr **slots[], int n, int j) {
  Expr *c = arena_alloc(&k->c->arena, sizeof(Expr));
  *c = *e;
  c->map = NULL;
  c->ty = NULL;
  Arg *orig = e->args, **tail = &c->args;
  for (; orig; orig = orig->next) { /* the argument list: new nodes, same values */
    Arg *a = arena_alloc(&k->c->arena, sizeof(Arg));
    *a = *orig;
    a->next = NULL;
    *tail = a;
    tail = &a->next;
  }
  for (int i = 0; i < n; i++) {
    Expr *op = *slots[i];
    Expr *leaf = ast_expr(k->c, EX_LEAF, op->span);
    leaf->lhs = op;
    leaf->depth = op->depth;
    bool rec = op->ty->kind == TY_RECORD;
    leaf->ival = rec ? j : -1;
    leaf->ty = rec ? type_leaf(op->ty, j) : op->ty;
    leaf->str = leaf_text(k, op, op->ty, j);
    /* put it where the slot is in the copy */
    if (slots[i] == &e->lhs)
      c->lhs = leaf;
    else if (slots[i] == &e->rhs)
      c->rhs = leaf;
    else
      for (Arg *a = e->args, *b = c->args; a; a = a->next, b = b->next)
        if (slots[i] == &a->value)
          b->value = leaf;
  }
  return c;
}

Type *record_map(Checker *k, Expr *e, Expr **slots[], int n, const char *opname) {
  const Type *shape = NULL;
  Expr *first = NULL;
  for (int i = 0; i < n; i++) {
    Expr *op = *slots[i];
    if (op->ty->kind == TY_ERROR)
      return type_error();
    if (op->ty->kind != TY_RECORD)
      continue;
    if (!shape) {
      shape = op->ty;
      first = op;
    } else if (!type_same_struct(shape, op->ty)) {
      check_error(k, e->span, "%s needs records of one struct, but '%s' is %s record and '%s' %s record", opname,
                  src_text(k, first), struct_text(k, shape), src_text(k, op), struct_text(k, op->ty));
      note_at(k->c, (Span){0, 0, 0}, "records combine field by field only when their structs (or, for r[i], their field "
              "names) are the same");
      return type_error();
    }
  }
  for (int i = 0; i < n; i++) {
    Expr *op = *slots[i];
    if (op->ty->kind == TY_RECORD || broadcasts(op->ty) || (e->kind == EX_INDEX && slots[i] == &e->rhs))
      continue;
    check_error(k, e->span, "%s mixes the record '%s' with %s, which is not a scalar", opname, src_text(k, first),
                ck_type(k, op->ty));
    note_at(k->c, (Span){0, 0, 0}, "an op on records applies to every field; only numbers and 0-d tensors go with each field");
    help(k->c, "apply it to the field it is meant for, e.g. %s.%s", src_text(k, first), shape->nelems ? shape->fields[0] : "f");
    return type_error();
  }
  int nl = type_nleaves(shape);
  LeafMap *m = arena_alloc(&k->c->arena, sizeof(LeafMap));
  m->ops = arena_alloc(&k->c->arena, sizeof(Expr *) * (size_t)n);
  for (int i = 0; i < n; i++)
    m->ops[m->nops++] = *slots[i];
  m->leaf = arena_alloc(&k->c->arena, sizeof(Expr *) * (size_t)(nl + 1));
  Type **leaves = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(nl + 1));
  const char *saved = k->field_path;
  for (int j = 0; j < nl; j++) {
    Expr *c = leaf_copy(k, e, slots, n, j);
    k->field_path = leaf_text(k, first, shape, j);
    leaves[j] = check_expr(k, c);
    k->field_path = saved;
    if (leaves[j]->kind == TY_ERROR) /* one field's error is enough */
      return type_error();
    if (leaves[j]->kind == TY_RECORD || leaves[j]->kind == TY_TUPLE || leaves[j]->kind == TY_VOID) {
      check_error(k, e->span, "%s cannot be applied to the fields of a record", opname);
      return type_error();
    }
    m->leaf[m->nleaf++] = c;
  }
  e->map = m;
  int i = 0;
  return rebuild(k, shape, leaves, &i, e->kind == EX_INDEX);
}

/* r[i]: every field's leading dim, which must have one size. */
Type *check_record_index(Checker *k, Expr *e) {
  Type *r = e->lhs->ty, *it = e->rhs->ty;
  if (it->kind != TY_INT) {
    check_error(k, e->rhs->span, "an index must be a host integer, not %s", ck_type(k, it));
    return type_error();
  }
  int nl = type_nleaves(r);
  int lead = -1;
  for (int j = 0; j < nl; j++) {
    Type *t = type_leaf(r, j);
    if (t->kind != TY_TENSOR || t->ndim == 0) {
      check_error(k, e->span, "'%s' indexes the leading dim of every field, but '%s' is %s", src_text(k, e),
                  leaf_text(k, e->lhs, r, j), ck_type(k, t));
      help(k->c, "index a record whose fields are all stacked on a leading dim, e.g. f32[L, D, H]");
      return type_error();
    }
    if (lead >= 0 && !size_eq(type_leaf(r, lead)->shape[0], t->shape[0])) {
      check_error(k, e->span, "'%s' indexes the leading dim of every field, but '%s' has %s rows and '%s' has %s",
                  src_text(k, e), leaf_text(k, e->lhs, r, lead), size_str(k->c, k->mesh, type_leaf(r, lead)->shape[0]),
                  leaf_text(k, e->lhs, r, j), size_str(k->c, k->mesh, t->shape[0]));
      help(k->c, "stack every field on the same leading dim (the layer index)");
      return type_error();
    }
    if (lead < 0)
      lead = j;
  }
  return record_map(k, e, (Expr **[]){&e->lhs, &e->rhs}, 2, "indexing");
}

/* ---- a whole record at once: global_norm, scale_by ---- */

/* The operand of global_norm/scale_by: a tensor or a record of them, each
 * leaf a floating-point tensor of one dtype whose type is known on every
 * axis; *dt gets the dtype. */
static Type *norm_operand(Checker *k, Expr *call, Expr *x, const char *opname, DType *dt) {
  Type *t = check_expr(k, x);
  if (t->kind == TY_ERROR)
    return t;
  if ((t->kind != TY_TENSOR && t->kind != TY_RECORD) || (t->kind == TY_TENSOR && t->literal)) {
    check_error(k, x->span, "%s takes a tensor or a record of tensors, not %s", opname, ck_type(k, t));
    return type_error();
  }
  int nl = type_nleaves(t);
  if (nl == 0) {
    check_error(k, x->span, "%s of '%s', a record without fields", opname, src_text(k, x));
    return type_error();
  }
  *dt = DT_NONE;
  for (int j = 0; j < nl; j++) {
    const Type *f = type_leaf(t, j);
    const char *ft = leaf_text(k, x, t, j);
    if (f->kind != TY_TENSOR || (f->dtype != DT_F32 && f->dtype != DT_F64 && f->dtype != DT_BF16)) {
      check_error(k, call->span, "%s needs floating-point tensors, but '%s' is %s", opname, ft, ck_type(k, f));
      help(k->c, "apply it to a record of the floating-point fields only (a gradient record, for example)");
      return type_error();
    }
    if (*dt != DT_NONE && f->dtype != *dt) {
      check_error(k, call->span, "%s needs fields of one dtype, but '%s' is %s and '%s' %s", opname,
                  leaf_text(k, x, t, 0), dtype_name(*dt), ft, dtype_name(f->dtype));
      help(k->c, "convert the record first: astype(%s, %s)", src_text(k, x), dtype_name(*dt));
      return type_error();
    }
    *dt = f->dtype;
    for (int a = 0; a < k->naxes; a++)
      if (f->lt[a] == LT_NONE) {
        check_error(k, call->span, "the type of '%s' on mesh axis '%s' is not known", ft, axis_name(k, a));
        help(k->c, "name the axis in its type, e.g. {%s: I}", axis_name(k, a));
        return type_error();
      }
  }
  return t;
}

/* global_norm(x, squared=false): the L2 norm (or, squared=true, its square)
 * of a tensor or of all the fields of a record together, a 0-d tensor of
 * their dtype (torch.nn.utils.clip_grad_norm_'s total norm).  Each field's
 * reduction follows from its type, axis by axis (SPEC 5's letters):
 *   V (sharded or varying): each rank holds a different part, so the
 *       squares are summed on each rank and then over the axis (one
 *       all-reduce for all such fields);
 *   I or R: every rank holds all of it, so its squares count once;
 *   P: rejected; the squares of the terms of a pending sum are not the
 *       square of the sum.
 * The result is I on an axis where some field is V or I (the squares of
 * fields R there are reinterpreted R -> I, whose backward is
 * convert(I -> P), the gradient of an R value), and R where every field is
 * R (a norm of replicated values is replicated, as any op on them).  It is
 * differentiable: the lowering builds it from square, sum, all_reduce and
 * reinterpret, whose backward rules apply. */
Type *check_global_norm(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Expr *x = call_arg(call, 0)->value;
  DType dt;
  Type *t = norm_operand(k, call, x, "global_norm()", &dt);
  if (t->kind == TY_ERROR)
    return t;
  Arg *sq = call_named(k, call, "squared");
  if (sq && sq->value->kind != EX_BOOL) {
    check_error(k, sq->value->span, "squared= takes true or false");
    return type_error();
  }
  Type *r = type_scalar(k->c, dt, k->naxes, LT_R);
  r->local = check_all_local(k);
  int nl = type_nleaves(t);
  for (int a = 0; a < k->naxes; a++) {
    bool all_r = true;
    for (int j = 0; j < nl; j++) {
      const Type *f = type_leaf(t, j);
      if (f->lt[a] == LT_P) {
        const char *ft = leaf_text(k, x, t, j);
        check_error(k, call->span, "global_norm() of '%s', which is P (a pending sum) on mesh axis '%s'", ft,
                    axis_name(k, a));
        note_at(k->c, (Span){0, 0, 0}, "'%s' is %s: the squares of the terms of a pending sum are not the square of "
                "the sum", ft, ck_type(k, f));
        help(k->c, "reduce '%s' first (all_reduce(..., %s, src=P, dst=I)), or keep its parameter I on '%s' and convert "
             "it I -> R inside the loss, so that its gradient arrives reduced", ft, axis_name(k, a), axis_name(k, a));
        return type_error();
      }
      all_r &= f->lt[a] == LT_R;
    }
    r->lt[a] = all_r ? LT_R : LT_I;
  }
  return r;
}

/* scale_by(x, s): x * s for a tensor x or every field of a record x, where
 * s is a 0-d tensor R or I on every axis (a clipping factor computed from
 * global_norm).  Where s is I and a field is not (R, V, P), s is used as R
 * there: reinterpret(s, I -> R), free forward, whose backward all-reduces
 * the gradient of s, as writing the cast by hand would; otherwise each
 * field times s follows the multilinear rule. */
Type *check_scale_by(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Expr *x = call_arg(call, 0)->value, *se = call_arg(call, 1)->value;
  DType dt;
  Type *t = norm_operand(k, call, x, "scale_by()", &dt);
  if (t->kind == TY_ERROR)
    return t;
  Type *s = check_expr(k, se);
  if (s->kind == TY_ERROR)
    return s;
  if (s->kind != TY_TENSOR || s->literal || s->ndim != 0 || s->dtype != dt) {
    check_error(k, se->span, "scale_by() scales by a 0-d %s tensor, not %s", dtype_name(dt), ck_type(k, s));
    help(k->c, "for a number, multiply directly: %s * 0.5", src_text(k, x));
    return type_error();
  }
  for (int a = 0; a < k->naxes; a++)
    if (s->lt[a] != LT_R && s->lt[a] != LT_I) {
      check_error(k, se->span, "scale_by() needs a factor that is R or I on every axis, but '%s' is %s on mesh axis '%s'",
                  src_text(k, se), s->lt[a] == LT_NONE ? "not known" : lt_name(s->lt[a]), axis_name(k, a));
      help(k->c, "%s", s->lt[a] == LT_P ? arena_sprintf(&k->c->arena, "reduce it first: all_reduce(%s, %s, src=P, dst=I)",
                                                          src_text(k, se), axis_name(k, a))
                                        : "compute the factor from values the same on every rank (global_norm gives I)");
      return type_error();
    }
  int nl = type_nleaves(t);
  Type **leaves = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(nl + 1));
  for (int j = 0; j < nl; j++) {
    const Type *f = type_leaf(t, j);
    Type *su = type_clone(k->c, s);
    for (int a = 0; a < k->naxes; a++)
      if (s->lt[a] == LT_I && f->lt[a] != LT_I)
        su->lt[a] = LT_R;
    Operand ops[2] = {{x, f}, {se, su}};
    Type *r = type_clone(k->c, f);
    const char *saved = k->field_path;
    if (t->kind == TY_RECORD)
      k->field_path = leaf_text(k, x, t, j);
    bool ok = combine(k, RULE_MULTILINEAR, "scale_by()", call->span, ops, 2, r->lt);
    k->field_path = saved;
    if (!ok)
      return type_error();
    leaves[j] = r;
  }
  int i = 0;
  return rebuild(k, t, leaves, &i, false);
}

/* ---- some fields at once: scale_fields ---- */

/* Does path (a field's place in the record: "blocks.ln1_g") match one of
 * the '|'-separated globs of pats ('*' any characters, '.' included)?
 * hits[g] counts the matches of glob g. */
static bool path_matches(const char *path, const char *pats, int *hits) {
  bool any = false;
  int g = 0;
  for (const char *p = pats;; g++) {
    const char *end = strchr(p, '|');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    /* glob p[0..len) against path, '*' by backtracking to the last star */
    const char *s = path, *star = NULL, *after = NULL;
    size_t i = 0;
    while (*s) {
      if (i < len && p[i] == '*') {
        star = p + i++;
        after = s;
      } else if (i < len && p[i] == *s) {
        i++;
        s++;
      } else if (star) {
        i = (size_t)(star - p) + 1;
        s = ++after;
      } else {
        break;
      }
    }
    while (i < len && p[i] == '*')
      i++;
    if (!*s && i == len) {
      hits[g]++;
      any = true;
    }
    if (!end)
      break;
    p = end + 1;
  }
  return any;
}

/* scale_fields(x, s, only="globs") or scale_fields(x, s, skip="globs"):
 * the record x with the fields whose paths match (only=) or do not match
 * (skip=) one of the globs times s, a number or a 0-d tensor, and the other
 * fields as they are (the same values: no op, so their bits are x's).  The
 * optimizers' parameter groups: weight decay on the matrices only,
 *   let decayed = scale_fields(p, 1.0 - lr * wd, skip="*_b|*ln*");
 * Each glob must match a field (a misspelt name would otherwise silently
 * leave every field in the other group); the multiplications follow the
 * multilinear rule field by field, as x * s does. */
Type *check_scale_fields(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Expr *x = call_arg(call, 0)->value, *se = call_arg(call, 1)->value;
  Type *t = check_expr(k, x);
  Type *st = check_expr(k, se);
  if (t->kind == TY_ERROR || st->kind == TY_ERROR)
    return type_error();
  if (t->kind != TY_RECORD) {
    check_error(k, x->span, "scale_fields() takes a record, not %s", ck_type(k, t));
    help(k->c, "for a tensor, multiply directly: %s * %s", src_text(k, x), src_text(k, se));
    return type_error();
  }
  if (!broadcasts(st)) {
    check_error(k, se->span, "scale_fields() scales by a number or a 0-d tensor, not %s", ck_type(k, st));
    return type_error();
  }
  Arg *only = call_named(k, call, "only"), *skip = call_named(k, call, "skip");
  if (!only == !skip) {
    check_error(k, call->span, "scale_fields() needs the fields to scale: only=\"...\" or skip=\"...\"%s",
                only ? ", not both" : "");
    help(k->c, "name them by their paths, '|'-separated globs: scale_fields(%s, %s, skip=\"*_b|*ln*\")",
         src_text(k, x), src_text(k, se));
    return type_error();
  }
  Arg *sel = only ? only : skip;
  if (sel->value->kind != EX_STRING || !sel->value->str[0]) {
    check_error(k, sel->value->span, "%s= takes a string of '|'-separated globs over field paths, as in \"*_b|blocks.ln*\"",
                only ? "only" : "skip");
    return type_error();
  }
  const char *pats = sel->value->str;
  int nglobs = 1;
  for (const char *c = pats; *c; c++)
    nglobs += *c == '|';
  int *hits = arena_alloc(&k->c->arena, sizeof(int) * (size_t)nglobs);
  memset(hits, 0, sizeof(int) * (size_t)nglobs);
  int nl = type_nleaves(t);
  bool *scaled = arena_alloc(&k->c->arena, sizeof(bool) * (size_t)(nl + 1));
  for (int j = 0; j < nl; j++)
    scaled[j] = path_matches(type_leaf_path(k->c, t, j, "."), pats, hits) == (only != NULL);
  const char *p = pats;
  for (int g = 0; g < nglobs; g++) {
    const char *end = strchr(p, '|');
    int len = end ? (int)(end - p) : (int)strlen(p);
    if (!hits[g]) {
      StrBuf sb;
      sb_init(&sb, &k->c->arena);
      for (int j = 0; j < nl; j++)
        sb_printf(&sb, "%s%s", j ? ", " : "", type_leaf_path(k->c, t, j, "."));
      check_error(k, sel->value->span, "'%.*s' in %s= matches no field of '%s'", len, p, only ? "only" : "skip",
                  src_text(k, x));
      note_at(k->c, (Span){0, 0, 0}, "'%s' is %s record; its fields are %s", src_text(k, x), struct_text(k, t), sb.data);
      help(k->c, "a glob matches a whole path: '*' stands for any characters (\"*_b\" for every bias, \"blocks.*\" "
           "for a sub-record's fields)");
      return type_error();
    }
    if (end)
      p = end + 1;
  }
  /* the result field by field: a scaled leaf is `leaf * s`, an other one
   * the leaf itself (lowered by the record map, as x * s would be) */
  LeafMap *m = arena_alloc(&k->c->arena, sizeof(LeafMap));
  m->ops = arena_alloc(&k->c->arena, sizeof(Expr *) * 2);
  m->ops[m->nops++] = x;
  m->ops[m->nops++] = se;
  m->leaf = arena_alloc(&k->c->arena, sizeof(Expr *) * (size_t)(nl + 1));
  Type **leaves = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(nl + 1));
  const char *saved = k->field_path;
  for (int j = 0; j < nl; j++) {
    Expr *leaf = ast_expr(k->c, EX_LEAF, x->span);
    leaf->lhs = x;
    leaf->depth = x->depth;
    leaf->ival = j;
    leaf->ty = type_leaf(t, j);
    leaf->str = leaf_text(k, x, t, j);
    Expr *c = leaf;
    if (scaled[j]) {
      Expr *sl = ast_expr(k->c, EX_LEAF, se->span);
      sl->lhs = se;
      sl->depth = se->depth;
      sl->ival = -1;
      sl->ty = st;
      sl->str = leaf_text(k, se, st, 0);
      c = ast_expr(k->c, EX_BINARY, call->span);
      c->op = OP_MUL;
      c->lhs = leaf;
      c->rhs = sl;
    }
    k->field_path = leaf->str;
    leaves[j] = check_expr(k, c);
    k->field_path = saved;
    if (leaves[j]->kind == TY_ERROR)
      return type_error();
    m->leaf[m->nleaf++] = c;
  }
  call->map = m;
  int i = 0;
  return rebuild(k, t, leaves, &i, false);
}
