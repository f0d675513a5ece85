/* check_local.c: the local SPMD type checker (SPEC sections 4, 5, 9, 10).
 * Every op combines its operands' local SPMD types axis by axis with the
 * rules of its class (combine() below is the single place they live);
 * shapes are checked symbolically; functions are checked per call site.
 * In global code each op's check then calls its shard rule, shard_<op>()
 * in shardprop.c (partition specs, SPEC 7).  Collectives and casts are in
 * check_collectives.c. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "redistribute.h"
#include "shardprop.h"

/* The types of host values and statements: shared, never mutated (types
 * are copied with type_clone before any change), so that a long program
 * does not allocate one per literal. */
static Type *host_type(TypeKind kind) {
  static Type host[TY_RECORD + 1];
  host[kind].kind = kind;
  return &host[kind];
}

/* ---- messages ---- */

/* Reports an error and, inside a function instance, the call chain that
 * led to it (the same body may be fine for one caller and not another). */
static void vcheck_error(Checker *k, const char *rule, Span sp, const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *msg = arena_alloc(&k->c->arena, (size_t)(n < 0 ? 0 : n) + 1);
  vsnprintf(msg, (size_t)(n < 0 ? 0 : n) + 1, fmt, again);
  va_end(again);
  if (k->field_path) /* an op on records: the field it failed for */
    msg = arena_sprintf(&k->c->arena, "in field '%s': %s", k->field_path, msg);
  /* found in a library function checked for the user's arguments: reported
   * at the user's call, with the library's line as the first note */
  Span lib_sp = {0, 0, 0};
  Inst *u = check_user_call(k);
  if (u && sp.file != 0 && sp.file != u->call.file) {
    lib_sp = sp;
    sp = u->call;
    msg = arena_sprintf(&k->c->arena, "in this call of '%s%s%s': %s", u->fn->module->name,
                        u->fn->module->name ? "." : "", u->fn->name, msg);
  }
  k->nfailed++;
  /* The same body is checked once per instance: report each error once.
   * A library call is reported once: its first error. */
  uint64_t h = 1469598103934665603ull;
  for (const char *p = lib_sp.file ? "library call" : msg; *p; p++)
    h = (h ^ (unsigned char)*p) * 1099511628211ull;
  for (size_t i = 0; i < k->nseen; i++)
    if (k->seen[i].file == sp.file && k->seen[i].begin == sp.begin && k->seen[i].hash == h) {
      check_flush_chain(k);
      k->c->suppress = true; /* drop the notes and help that follow */
      return;
    }
  if (k->nseen == k->capseen) {
    k->capseen = k->capseen ? 2 * k->capseen : 64;
    void *p = realloc(k->seen, k->capseen * sizeof *k->seen);
    if (!p)
      diag_fatal(k->c, "out of memory");
    k->seen = p;
  }
  k->seen[k->nseen].file = sp.file;
  k->seen[k->nseen].begin = sp.begin;
  k->seen[k->nseen++].hash = h;
  check_flush_chain(k);
  diag_report(k->c, rule ? rule : diag_rule_id(k->c, __FILE__, fmt), fmt, sp, msg);
  k->chain = k->inst;
  if (lib_sp.file) {
    note_at(k->c, lib_sp, "found here, in '%s' checked with the types of this call's arguments", k->inst->fn->name);
    k->chain = u->parent; /* the chain goes on above the user's call */
  }
}

/* Inside a function of another module (a library) checked for a call from
 * the main module's code: that call's instance; else NULL. */
Inst *check_user_call(Checker *k) {
  for (Inst *i = k->inst; i && i->parent; i = i->parent)
    if (i->call.file && i->fn->module != k->c->main && i->parent->fn && i->parent->fn->module == k->c->main)
      return i;
  return NULL;
}

void check_error(Checker *k, Span sp, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vcheck_error(k, NULL, sp, fmt, ap);
  va_end(ap);
}

/* check_error for a message with no words of its own in fmt ("%s"). */
void check_error_rule(Checker *k, const char *rule, Span sp, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vcheck_error(k, rule, sp, fmt, ap);
  va_end(ap);
}

/* Notes the call chain of the last error (after its own notes and help):
 * the same body may be fine for one caller and not another. */
void check_flush_chain(Checker *k) {
  for (Inst *i = k->chain; i && i->parent; i = i->parent)
    if (i->call.file)
      note_at(k->c, i->call, "in this call of '%s'", i->fn->name);
  k->chain = NULL;
}

/* A type in a message.  A record is abbreviated to its struct's name (or
 * its field names, for the anonymous record of r[i]): written out, a
 * model's record is hundreds of characters; ck_type_vs names the field
 * where two records differ. */
const char *ck_type(Checker *k, const Type *t) {
  if (t->kind != TY_RECORD)
    return type_str(k->c, k->mesh, t);
  if (t->st)
    return t->st->name;
  StrBuf sb;
  sb_init(&sb, &k->c->arena);
  sb_puts(&sb, "a record {");
  for (int i = 0; i < t->nelems; i++)
    sb_printf(&sb, "%s%s", i ? ", " : "", t->fields[i]);
  sb_putc(&sb, '}');
  return sb.data;
}

/* t in a message that compares it with `other`: for two records with the
 * same fields, the struct and the first field where they differ. */
const char *ck_type_vs(Checker *k, const Type *t, const Type *other) {
  if (t->kind != TY_RECORD || other->kind != TY_RECORD || !type_same_struct(t, other))
    return ck_type(k, t);
  int n = type_nleaves(t);
  if (n != type_nleaves(other))
    return ck_type(k, t);
  for (int i = 0; i < n; i++)
    if (!type_same(type_leaf(t, i), type_leaf(other, i), k->naxes))
      return arena_sprintf(&k->c->arena, "%s (field '%s': %s)", ck_type(k, t), type_leaf_path(k->c, t, i, "."),
                           ck_type(k, type_leaf(t, i)));
  return ck_type(k, t);
}

/* The source text of an expression, for help lines that show a fix. */
static const char *src(Checker *k, Expr *e) {
  if (e->kind == EX_LEAF && e->str) /* a field of a record operand: m.attn.wo */
    return e->str;
  SourceFile *f = source_file(k->c, e->span.file);
  size_t n = e->span.end - e->span.begin;
  if (e->span.file == 0)
    return arena_sprintf(&k->c->arena, "%s", "x");
  if (n > 60) {
    /* too long to repeat: an abbreviation that names the expression and
     * cannot be read as a variable of the program (a call keeps its callee:
     * part2(...)) */
    if (e->kind == EX_CALL && e->lhs->span.file && e->lhs->span.end - e->lhs->span.begin <= 40)
      return arena_sprintf(&k->c->arena, "%.*s(...)", (int)(e->lhs->span.end - e->lhs->span.begin),
                           f->text + e->lhs->span.begin);
    size_t cut = 30;
    while (cut > 0 && (f->text[e->span.begin + cut] & 0xC0) == 0x80) /* not inside a UTF-8 sequence */
      cut--;
    return arena_sprintf(&k->c->arena, "%.*s ...", (int)cut, f->text + e->span.begin);
  }
  return arena_strndup(&k->c->arena, f->text + e->span.begin, n);
}

const char *src_text(Checker *k, Expr *e) { return src(k, e); }

/* Whether src(k, e) is e's own text (not the "x" standing for a long one),
 * so that code built from it can replace source text as a fix. */
bool src_exact(Checker *k, Expr *e) {
  (void)k;
  return e->span.file != 0 && e->span.end - e->span.begin <= 60;
}

/* A help line whose code replaces expression e (help_fix), when the code
 * was built from e's exact text; else a plain help line. */
void help_wrap(Checker *k, Expr *e, const char *code, const char *msg) {
  help_fix(k->c, e->span, src_exact(k, e) ? code : NULL, "%s", msg);
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

/* ---- arguments ---- */

Arg *call_arg(Expr *call, int pos) {
  for (Arg *a = call->args; a; a = a->next)
    if (!a->name && pos-- == 0)
      return a;
  return NULL;
}

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
static bool check_named_args(Checker *k, Expr *call, Builtin op) {
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

static bool want_args(Checker *k, Expr *call, Builtin op, int lo, int hi) {
  int n = count_positional(call);
  if (n >= lo && n <= hi)
    return true;
  if (lo == hi)
    check_error(k, call->span, "%s() takes %d argument%s, got %d", builtin_name[op], lo, lo == 1 ? "" : "s", n);
  else
    check_error(k, call->span, "%s() takes %d to %d arguments, got %d", builtin_name[op], lo, hi, n);
  return false;
}

/* A host integer argument (dims, sizes, seeds). */
static bool host_int(Checker *k, Expr *e, long long *v) {
  if (e->kind == EX_INT) {
    *v = e->ival;
    return true;
  }
  if (e->kind == EX_UNARY && e->op == OP_NEG && e->lhs->kind == EX_INT) {
    *v = -e->lhs->ival;
    return true;
  }
  if ((e->kind == EX_NAME || e->kind == EX_FIELD) && e->sym && e->sym->kind == SYM_CONST &&
      e->sym->evaluated && !e->sym->is_float) {
    *v = e->sym->ival;
    return true;
  }
  check_error(k, e->span, "expected an integer constant here");
  return false;
}

bool named_int(Checker *k, Expr *call, const char *name, long long *v, bool *given) {
  Arg *a = call_named(k, call, name);
  *given = a != NULL;
  return !a || host_int(k, a->value, v);
}

/* A dim argument, negative counting from the end as in PyTorch. */
static bool norm_dim(Checker *k, Span sp, long long d, int ndim, int *out) {
  if (d < -ndim || d >= ndim || ndim == 0) {
    check_error(k, sp, "dim %lld is out of range for a tensor with %d dim%s", d, ndim, ndim == 1 ? "" : "s");
    return false;
  }
  *out = (int)(d < 0 ? d + ndim : d);
  return true;
}

bool check_norm_dim(Checker *k, Span sp, long long d, int ndim, int *out) { return norm_dim(k, sp, d, ndim, out); }

/* ---- written types ---- */

static bool size_of(Checker *k, Expr *e, Size *out) {
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

static int axis_of(AxisRef *a) {
  Symbol *s = a->sym;
  if (!s)
    return -1;
  if (s->kind == SYM_AXIS)
    return s->index;
  if (s->kind == SYM_AXIS_PARAM && s->info)
    return *(int *)s->info;
  return -1;
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

/* Converts a written type.  named[a] is set for the axes the type names;
 * the others are left LT_NONE.  Returns NULL after reporting an error. */
static Type *type_from(Checker *k, TypeExpr *te, bool named[MAX_MESH_AXES]) {
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
      if (!norm_dim(k, e->span, e->lt.sdim, t->ndim, &dim))
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

Type *check_type_expr(Checker *k, TypeExpr *te, bool named[MAX_MESH_AXES]) { return type_from(k, te, named); }

/* A type that makes a value must determine every mesh axis. */
static bool determines_all(Checker *k, Span sp, const bool named[MAX_MESH_AXES], const char *what) {
  for (int a = 0; a < k->naxes; a++)
    if (!named[a]) {
      check_error(k, sp, "%s does not say what it is on mesh axis '%s'", what, axis_name(k, a));
      help(k->c, "name every axis, e.g. {%s: R} (or {*: R} for all the others)", axis_name(k, a));
      return false;
    }
  return true;
}

/* Whether `actual` fits `want` on the axes `want` names (and in shape). */
static LTypeKind base_kind(LType lt) { return lt.kind == LT_S ? LT_V : lt.kind; }

/* fits(), with the source text of the value for the help line; a help
 * whose code replaces the value is a fix of fix_at (NULL: no fix). */
static bool fits_x(Checker *k, Span sp, const Type *want, const bool named[MAX_MESH_AXES], const Type *actual,
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
      if (have.kind == LT_NONE || need.kind == LT_NONE)
        help(k->c, "give the value a type on '%s'", axis_name(k, a));
      else if (have.kind == LT_R && need.kind == LT_I)
        help(k->c, "make it I where it is reduced (all_reduce(..., %s, src=P, dst=I) rather than dst=R); if the copies are "
             "meant as they are: reinterpret(%s, %s, src=R, dst=I, expert=true)", axis_name(k, a), xtext ? xtext : "x",
             axis_name(k, a));
      else {
        const char *code = transition_fix(k, xtext ? xtext : "x", axis_name(k, a), have, need);
        const char *msg =
            arena_sprintf(&k->c->arena, "to get %s on '%s': %s", lt_name(base_kind(need)), axis_name(k, a), code);
        if (fix_at)
          help_wrap(k, fix_at, code, msg);
        else
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

bool check_fits(Checker *k, Span sp, const Type *want, const bool named[MAX_MESH_AXES], const Type *actual,
                const char *what, const char *xtext, Expr *fix_at) {
  return fits_x(k, sp, want, named, actual, what, xtext, fix_at);
}

static Symbol *gradient_in(Expr *e);
static void mark_gradients(Checker *k, Stmt *s, Type *t);
static Expr *final_return(Stmt *block);

/* ---- the local SPMD rules, axis by axis (SPEC section 5) ---- */

/* note: the operands and their types, after a rule was broken. */
void note_operands(Checker *k, const Operand *ops, int n) {
  StrBuf sb;
  sb_init(&sb, &k->c->arena);
  for (int i = 0; i < n; i++) {
    bool dup = false;
    for (int j = 0; j < i; j++)
      dup |= ops[j].e->span.begin == ops[i].e->span.begin ||
             (src_exact(k, ops[j].e) && src_exact(k, ops[i].e) && strcmp(src(k, ops[j].e), src(k, ops[i].e)) == 0);
    if (ops[i].t->kind == TY_TENSOR && !ops[i].t->literal && !dup)
      sb_printf(&sb, "%s'%s' is %s", sb.len ? ", " : "", src(k, ops[i].e), ck_type(k, ops[i].t));
  }
  if (sb.len)
    note_at(k->c, (Span){0, 0, 0}, "%s", sb.data);
}

/* Where the pending sum (P on axis a) that expression e holds was made: an
 * out_partial_axes=, a collective or cast to P, a parameter declared P, a
 * function's declared result.  Followed through variables, the operands of
 * linear ops and the returns of called functions (their last return), as
 * far as each step is P on a; *what says what is there. */
static Span p_origin(Checker *k, Expr *e, int a, int depth, const char **what) {
  Span none = {0, 0, 0};
  if (!e || depth > 64 || !e->ty || e->ty->kind != TY_TENSOR || e->ty->lt[a] != LT_P)
    return none;
  const char *ax = axis_name(k, a);
  switch (e->kind) {
  case EX_NAME:
    if (!e->sym)
      return none;
    if (e->sym->def)
      return p_origin(k, e->sym->def, a, depth + 1, what);
    if (e->sym->kind == SYM_PARAM && depth > 0) { /* (the operand itself: its type is noted already) */
      *what = arena_sprintf(&k->c->arena, "'%s' is a parameter that is P on '%s'", e->sym->name, ax);
      return e->sym->span;
    }
    return none;
  case EX_UNARY:
    return p_origin(k, e->lhs, a, depth + 1, what);
  case EX_BINARY: {
    Span s = p_origin(k, e->lhs, a, depth + 1, what);
    return s.file ? s : p_origin(k, e->rhs, a, depth + 1, what);
  }
  case EX_INDEX:
    return p_origin(k, e->lhs, a, depth + 1, what);
  case EX_CALL: {
    Symbol *f = e->lhs->sym;
    if (!f)
      return none;
    if (f->kind == SYM_FN) {
      Expr *ret = final_return(f->fn->body);
      Span s = ret ? p_origin(k, ret, a, depth + 1, what) : none;
      if (s.file)
        return s;
      *what = arena_sprintf(&k->c->arena, "'%s' returns a value that is P on '%s'", f->name, ax);
      return f->fn->ret ? f->fn->ret->span : f->fn->name_span;
    }
    if (f->kind != SYM_BUILTIN)
      return none;
    /* an operand already P on a: the sum was made further back */
    for (Arg *arg = e->args; arg; arg = arg->next)
      if (!arg->name) {
        Span s = p_origin(k, arg->value, a, depth + 1, what);
        if (s.file)
          return s;
      }
    for (Arg *arg = e->args; arg; arg = arg->next)
      if (arg->name && strcmp(arg->name, "out_partial_axes") == 0) {
        *what = arena_sprintf(&k->c->arena, "the pending sum on '%s' is made here: out_partial_axes declares %s's "
                              "result P", ax, builtin_name[f->index]);
        return arg->span;
      }
    if (builtin_class[f->index] == OPC_COLLECTIVE) {
      *what = arena_sprintf(&k->c->arena, "the pending sum on '%s' is made here, by %s(..., dst=P)", ax,
                            builtin_name[f->index]);
      return e->span;
    }
    return none;
  }
  default: return none;
  }
}

/* note: where the P operand's pending sum on axis a was made, if known. */
void note_p_origin(Checker *k, Expr *pe, int a) {
  const char *what = NULL;
  Span s = p_origin(k, pe, a, 0, &what);
  if (s.file && what)
    note_at(k->c, s, "%s", what);
}

/* ---- errors in a library function, explained at the user's call ---- */

/* The parameter of the function being checked whose value (leaf j of it,
 * when j >= 0) expression e passes on, P on axis a; or NULL. */
static Symbol *param_source(Expr *e, int j, int a, int depth) {
  if (!e || depth > 64 || !e->ty)
    return NULL;
  const Type *t = j >= 0 && e->ty->kind == TY_RECORD ? type_leaf(e->ty, j) : e->ty;
  if (t->kind != TY_TENSOR || t->lt[a] != LT_P)
    return NULL;
  switch (e->kind) {
  case EX_NAME:
    if (e->sym && e->sym->kind == SYM_PARAM)
      return e->sym;
    return e->sym && e->sym->def ? param_source(e->sym->def, j, a, depth + 1) : NULL;
  case EX_LEAF: return param_source(e->lhs, e->ival, a, depth + 1);
  case EX_UNARY: return param_source(e->lhs, j, a, depth + 1);
  case EX_BINARY: {
    Symbol *s = param_source(e->lhs, j, a, depth + 1);
    return s ? s : param_source(e->rhs, j, a, depth + 1);
  }
  case EX_CALL:
    if (e->lhs->sym && e->lhs->sym->kind == SYM_BUILTIN)
      for (Arg *arg = e->args; arg; arg = arg->next)
        if (!arg->name) {
          Symbol *s = param_source(arg->value, j, a, depth + 1);
          if (s)
            return s;
        }
    return NULL;
  default: return NULL;
  }
}

/* The declaration of field `path` ("blocks.attn_norm") of struct st, and
 * the struct that declares it (*owner). */
static StructField *field_decl(StructDecl *st, const char *path, StructDecl **owner) {
  while (st && *path) {
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    StructField *f = st->fields;
    while (f && !(strlen(f->name) == n && strncmp(f->name, path, n) == 0))
      f = f->next;
    *owner = st;
    if (!f || !dot)
      return f;
    st = f->type && f->type->sym && f->type->sym->kind == SYM_STRUCT ? f->type->sym->st : NULL;
    path = dot + 1;
  }
  return NULL;
}

/* A P operand pe (on axis a) of an error inside a library function checked
 * for the user's call: the user's argument it came from, the gradient it
 * is, the struct field (or parameter) declared where the P comes from, and
 * the fix there instead of an edit of the library.  False when it cannot
 * be traced (the caller then gives its own help). */
static bool explain_at_user(Checker *k, Expr *pe, int a) {
  Inst *u = check_user_call(k);
  if (!u || u != k->inst || !u->call_expr)
    return false;
  int j = pe->kind == EX_LEAF ? pe->ival : -1;
  Expr *rec = pe->kind == EX_LEAF ? pe->lhs : pe;
  Symbol *ps = param_source(rec, j, a, 0);
  if (!ps)
    return false;
  int idx = 0;
  Param *p = u->fn->params;
  while (p && p->name->sym != ps)
    p = p->next, idx++;
  Arg *arg = p ? call_arg(u->call_expr, idx) : NULL;
  if (!arg || !arg->value->ty)
    return false;
  Expr *ua = arg->value;
  const char *ax = axis_name(k, a);
  const char *path = j >= 0 && ua->ty->kind == TY_RECORD ? type_leaf_path(k->c, ua->ty, j, ".") : NULL;
  const char *what = path ? arena_sprintf(&k->c->arena, "%s.%s", src(k, ua), path) : src(k, ua);
  note_at(k->c, ua->span, "'%s' is P on '%s': it is this call's argument '%s' of '%s'", what, ax, p->name->name,
          u->fn->name);
  Symbol *g = gradient_in(ua);
  if (!g || !g->grad_of) {
    const char *code = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=R)", what, ax);
    help(k->c, "reduce it before the call: %s", code);
    return true;
  }
  const char *wname = path ? arena_sprintf(&k->c->arena, "%s.%s", g->grad_of->name, path) : g->grad_of->name;
  note_at(k->c, (Span){0, 0, 0},
          "'%s' is the gradient of '%s', and '%s' is R on '%s': its gradient is a pending sum (P), so the "
          "all-reduce of the gradient is missing", g->name, g->grad_of->name, wname, ax);
  /* where the parameter's R was declared: a struct field, or the parameter */
  const Type *pt = g->grad_of->info;
  StructDecl *owner = NULL;
  StructField *f = path && pt && pt->kind == TY_RECORD && pt->st ? field_decl(pt->st, path, &owner) : NULL;
  TypeExpr *te = f ? f->type : NULL;
  if (f)
    note_at(k->c, f->span, "field '%s' of %s is declared R on '%s' here", f->name, owner->name, ax);
  AxisEntry *en = NULL;
  for (AxisEntry *e = te ? te->entries : NULL; e; e = e->next)
    if (e->axis && e->axis->sym && e->axis->sym->kind == SYM_AXIS && e->axis->sym->index == a && e->lt.kind == LT_R)
      en = e;
  const char *decl = arena_sprintf(&k->c->arena, "%s: I", ax);
  const char *shown = decl;
  if (en) { /* the field's declaration as it would read */
    const char *text = source_file(k->c, f->span.file)->text;
    shown = arena_sprintf(&k->c->arena, "%.*s%s%.*s", (int)(en->span.begin - f->span.begin), text + f->span.begin,
                          decl, (int)(f->span.end - en->span.end), text + en->span.end);
  }
  const char *msg = arena_sprintf(&k->c->arena,
                                  "declare it I on '%s', `%s`, and use convert(%s, %s, src=I, dst=R) where the loss "
                                  "uses it: its backward then all-reduces the gradient",
                                  ax, shown, wname, ax);
  if (en)
    help_fix(k->c, en->span, decl, "%s", msg);
  else
    help(k->c, "%s", msg);
  return true;
}

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
        check_error(k, ops[i].e->span, "the type of '%s' on mesh axis '%s' is not known", src(k, ops[i].e),
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
        const char *code = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=I)", src(k, ops[bad].e),
                                         axis_name(k, a));
        if (!explain_at_user(k, ops[bad].e, a))
          help_wrap(k, ops[bad].e, code, arena_sprintf(&k->c->arena, "reduce the pending sum to I first: %s", code));
        return false;
      }
      for (int i = 0; i < n; i++)
        if (!ops[i].t->literal && ops[i].t->kind == TY_TENSOR && ops[i].t->lt[a] == LT_I) {
          const char *code = arena_sprintf(&k->c->arena, "convert(%s, %s, src=I, dst=R)", src(k, ops[i].e),
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
    const char *fix = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=R)", src(k, pe), axis_name(k, a));
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
                  src(k, pe), axis_name(k, a));
      note_at(k->c, (Span){0, 0, 0}, "f(a) + f(b) is not f(a + b): the sum must happen first");
      note_operands(k, ops, n);
      note_p_origin(k, pe, a);
      if (!explain_at_user(k, pe, a))
        help_wrap(k, pe, fix, arena_sprintf(&k->c->arena, "reduce it first: %s", fix));
      return false;
    case RULE_LINEAR:
      if (nr || nlit) {
        Expr *other = ops[first_other].e;
        check_error(k, sp, "%s adds %s (%s) to a P value on mesh axis '%s'", opname, src(k, other),
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
        const char *dfix = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=R)", src(k, ops[d].e),
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

static Type *as_tensor(Checker *k, Expr *e, Type *t);
Type *check_as_tensor(Checker *k, Expr *e, Type *t) { return as_tensor(k, e, t); }

static Type *as_tensor(Checker *k, Expr *e, Type *t) {
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
Type *broadcast(Checker *k, Span sp, const char *opname, Operand *ops, int n, Type *r) {
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
        help(k->c, "convert one: astype(%s, %s)", src(k, ops[i].e), dtype_name(r->dtype));
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

/* ---- built-ins ---- */

static Type *arg_tensor(Checker *k, Expr *call, int pos) {
  Arg *a = call_arg(call, pos);
  return a ? as_tensor(k, a->value, check_expr(k, a->value)) : type_error();
}

/* Whether t is a host number (an int or a float, not a bool). */
static bool host_number(const Type *t) { return t->kind == TY_INT || t->kind == TY_FLOAT; }

static Type *check_unary(Checker *k, Expr *call, Builtin op) {
  Arg *a = call_arg(call, 0);
  Type *t = a ? check_expr(k, a->value) : type_error();
  if (host_number(t))
    return host_type(TY_FLOAT); /* on a host number: a host number (cos(pi * t)) */
  t = a ? as_tensor(k, a->value, t) : t;
  if (t->kind == TY_ERROR)
    return t;
  Operand o = {a->value, t};
  Rule rule = builtin_class[op] == OPC_LINEAR ? RULE_LINEAR : RULE_NONLINEAR;
  return elementwise(k, call->span, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]), rule, &o, 1);
}

static Type *check_binary_builtin(Checker *k, Expr *call, Builtin op) {
  Type *h[2] = {check_expr(k, call_arg(call, 0)->value), check_expr(k, call_arg(call, 1)->value)};
  if (host_number(h[0]) && host_number(h[1])) /* pow(0.9, step), max(a, b) on host numbers */
    return host_type(op != BI_POW && h[0]->kind == TY_INT && h[1]->kind == TY_INT ? TY_INT : TY_FLOAT);
  Operand o[2];
  for (int i = 0; i < 2; i++) {
    o[i].e = call_arg(call, i)->value;
    o[i].t = as_tensor(k, o[i].e, h[i]);
  }
  return elementwise(k, call->span, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]), RULE_NONLINEAR, o, 2);
}

/* sum, mean, amax, cumsum, softmax, log_softmax: over `dim=` (or all). */
static Type *check_reduction(Checker *k, Expr *call, Builtin op) {
  Type *t = arg_tensor(k, call, 0);
  if (t->kind == TY_ERROR)
    return t;
  Operand o = {call_arg(call, 0)->value, t};
  Rule rule = builtin_class[op] == OPC_LINEAR ? RULE_LINEAR : RULE_NONLINEAR;
  Type *r = elementwise(k, call->span, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]), rule, &o, 1);
  if (r->kind == TY_ERROR)
    return r;
  r = type_clone(k->c, r);
  long long dimv = 0, keep = 0;
  bool has_dim, has_keep;
  if (!named_int(k, call, "dim", &dimv, &has_dim))
    return type_error();
  Arg *ka = call_named(k, call, "keepdim");
  has_keep = ka && ka->value->kind == EX_BOOL;
  keep = has_keep && ka->value->ival;
  bool keeps_shape = builtin_flags[op] & OPF_KEEPS_SHAPE;
  if (keeps_shape && !has_dim) {
    if (r->ndim == 0)
      return r;
    dimv = -1;
    has_dim = true;
  }
  bool contracted[MAX_MESH_AXES] = {0};
  int lo = 0, hi = r->ndim;
  if (has_dim) {
    int d;
    if (!norm_dim(k, call_named(k, call, "dim") ? call_named(k, call, "dim")->value->span : call->span, dimv, r->ndim, &d))
      return type_error();
    lo = d;
    hi = d + 1;
  }
  if (!shard_reduction(k, call, op, o.e, r, lo, hi, has_dim, contracted))
    return type_error();
  if (keeps_shape)
    return r;
  Type *res = type_clone(k->c, r);
  res->ndim = 0;
  for (int d = 0; d < r->ndim; d++) {
    if (d >= lo && d < hi) {
      if (keep)
        res->shape[res->ndim++] = size_int(1);
      continue;
    }
    res->shape[res->ndim++] = r->shape[d];
  }
  shard_reduction_result(r, res, lo, hi, keep);
  if (op == BI_SUM || op == BI_MEAN) {
    if (!apply_out_partial(k, call, res, contracted))
      return type_error();
  }
  return res;
}

static Type *check_matmul(Checker *k, Expr *call, Expr *ea, Expr *eb, const char *opname) {
  Type *a = as_tensor(k, ea, check_expr(k, ea));
  Type *b = as_tensor(k, eb, check_expr(k, eb));
  if (a->kind == TY_ERROR || b->kind == TY_ERROR)
    return type_error();
  if (a->ndim < 1 || b->ndim < 1) {
    check_error(k, call->span, "%s needs tensors of at least 1 dim, got %s and %s", opname, ck_type(k, a), ck_type(k, b));
    return type_error();
  }
  if (a->dtype != b->dtype) {
    check_error(k, call->span, "%s needs operands of one dtype, got %s and %s", opname, dtype_name(a->dtype),
                dtype_name(b->dtype));
    help(k->c, "convert one: astype(%s, %s)", src(k, eb), dtype_name(a->dtype));
    return type_error();
  }
  int ka = a->ndim - 1, kb = b->ndim >= 2 ? b->ndim - 2 : 0;
  if (!size_eq(a->shape[ka], b->shape[kb])) {
    check_error(k, call->span, "%s: the contracted dims differ: %s has %s, %s has %s", opname, src(k, ea),
                size_str(k->c, k->mesh, a->shape[ka]), src(k, eb), size_str(k->c, k->mesh, b->shape[kb]));
    note_at(k->c, (Span){0, 0, 0}, "%s is %s", src(k, ea), ck_type(k, a));
    note_at(k->c, (Span){0, 0, 0}, "%s is %s", src(k, eb), ck_type(k, b));
    return type_error();
  }
  Operand o[2] = {{ea, a}, {eb, b}};
  if (!shard_matmul_contracted(k, opname, call->span, o, ka, kb))
    return type_error();
  Type *r = type_new(k->c, TY_TENSOR);
  r->dtype = a->dtype;
  r->local = check_all_local(k);
  if (!combine(k, RULE_MULTILINEAR, opname, call->span, o, 2, r->lt))
    return type_error();
  /* batch dims broadcast (NumPy); then m from a, n from b */
  int ba = a->ndim - 2 > 0 ? a->ndim - 2 : 0, bb = b->ndim - 2 > 0 ? b->ndim - 2 : 0;
  int nb = ba > bb ? ba : bb;
  for (int d = 0; d < nb; d++) {
    int da = d - (nb - ba), db = d - (nb - bb);
    long long one;
    bool a1 = da < 0 || (size_is_int(a->shape[da], &one) && one == 1);
    bool b1 = db < 0 || (size_is_int(b->shape[db], &one) && one == 1);
    if (!a1 && !b1 && !size_eq(a->shape[da], b->shape[db])) {
      check_error(k, call->span, "%s: batch dims differ: %s and %s", opname, size_str(k->c, k->mesh, a->shape[da]),
                  size_str(k->c, k->mesh, b->shape[db]));
      note_operands(k, o, 2);
      return type_error();
    }
    int owner = !a1 || b1 ? 0 : 1, od = owner ? db : da;
    if (od < 0) {
      owner = 1 - owner;
      od = owner ? db : da;
    }
    r->shape[r->ndim] = o[owner].t->shape[od];
    if (!shard_matmul_batch(k, opname, call->span, o, r, d, da, db, owner, od, !a1 && !b1))
      return type_error();
    r->ndim++;
  }
  if (a->ndim >= 2)
    r->shape[r->ndim++] = a->shape[a->ndim - 2];
  if (b->ndim >= 2)
    r->shape[r->ndim++] = b->shape[b->ndim - 1];
  bool contracted[MAX_MESH_AXES] = {0};
  if (!shard_matmul(k, opname, call->span, o, r, contracted))
    return type_error();
  if (!apply_out_partial(k, call, r, contracted))
    return type_error();
  return r;
}

Type *check_creation(Checker *k, Expr *call, Builtin op) {
  int tpos = op == BI_LOAD ? 1 : 0;
  Arg *ta = call_arg(call, tpos);
  if ((!ta || ta->value->kind != EX_TYPE) && op == BI_LOAD) {
    check_error(k, ta ? ta->value->span : call->span, "load() needs a tensor type or a struct's name second");
    help(k->c, "load(\"w.npy\", f32[4, 8]{*: I}), or for a checkpoint directory load(\"ckpt/step_100\", Model)");
    return type_error();
  }
  if (!ta || ta->value->kind != EX_TYPE) {
    check_error(k, ta ? ta->value->span : call->span, "%s() needs a tensor type as argument %d, as in %s",
                builtin_name[op], tpos + 1,
                op == BI_IOTA ? "iota(i32[4, 8]{*: R}, dim=0)" : "zeros(f32[4, 8]{*: R})");
    return type_error();
  }
  bool named[MAX_MESH_AXES];
  Type *t = type_from(k, ta->value->type, named);
  if (!t || !determines_all(k, ta->value->span, named, arena_sprintf(&k->c->arena, "the type given to %s()", builtin_name[op])))
    return type_error();
  /* P: every rank's copy would be a term of the sum.  zeros() is the one
   * exception: a zero pending sum is the usual accumulator. */
  if (op != BI_ZEROS)
    for (int a = 0; a < k->naxes; a++)
      if (t->lt[a] == LT_P) {
        check_error(k, ta->value->span, "%s() cannot make a P value (on mesh axis '%s')", builtin_name[op], axis_name(k, a));
        note_at(k->c, (Span){0, 0, 0}, "each rank would hold the whole value, and the pending sum would count it once per rank");
        Type *rt = type_clone(k->c, t);
        for (int b = 0; b < k->naxes; b++)
          if (rt->lt[b] == LT_P)
            rt->lt[b] = LT_R;
        SourceFile *f = source_file(k->c, call->span.file);
        Span ts = ta->value->span;
        help(k->c, "make it R, then convert: convert(%.*s%s%.*s, %s, src=R, dst=P)", (int)(ts.begin - call->span.begin),
             f->text + call->span.begin, ck_type(k, rt), (int)(call->span.end - ts.end), f->text + ts.end, axis_name(k, a));
        return type_error();
      }
  if (op == BI_LOAD)
    check_io_path(k, call, op);
  if (op == BI_FULL) {
    Arg *v = call_arg(call, 1);
    Type *vt = v ? check_expr(k, v->value) : type_error();
    if (!is_scalar_like(vt) && vt->kind != TY_ERROR)
      check_error(k, v ? v->value->span : call->span, "full() takes a number as its value");
  }
  for (Arg *a = call->args; a; a = a->next)
    if (a->name) {
      Type *at = check_expr(k, a->value);
      if (!is_scalar_like(at) && at->kind != TY_ERROR)
        check_error(k, a->value->span, "'%s=' takes a number", a->name);
    }
  return t;
}

static Type *check_print(Checker *k, Expr *call, Builtin op) {
  (void)op;
  for (Arg *a = call->args; a; a = a->next) {
    Type *t = check_expr(k, a->value);
    if (t->kind == TY_RECORD) {
      check_error(k, a->value->span, "print() shows tensors and numbers, not the record '%s'", src(k, a->value));
      help(k->c, "print its fields: print(%s.%s)", src(k, a->value), t->nelems ? t->fields[0] : "f");
      continue;
    }
    if (t->kind != TY_TENSOR || t->literal)
      continue;
    for (int x = 0; x < k->naxes; x++)
      if (t->lt[x] != LT_R && t->lt[x] != LT_I) {
        check_error(k, a->value->span, "print() shows one value, but '%s' is %s on mesh axis '%s'", src(k, a->value),
                    lt_name(t->lt[x]), axis_name(k, x));
        note_at(k->c, (Span){0, 0, 0}, "'%s' is %s; rank 0 prints, so only R and I values (the same on every rank) can be shown",
                src(k, a->value), ck_type(k, t));
        const char *code = t->lt[x] == LT_P
                               ? arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=R)", src(k, a->value),
                                               axis_name(k, x))
                               : transition_fix(k, src(k, a->value), axis_name(k, x), ltype_on(t, x), (LType){LT_R, 0});
        help_wrap(k, a->value, code,
                  arena_sprintf(&k->c->arena, "%s it first: %s", t->lt[x] == LT_P ? "reduce" : "gather", code));
        break;
      }
  }
  return host_type(TY_VOID);
}

/* The struct an expression names (`Model`, `nn.Model`), if it names one. */
static StructDecl *struct_named(Expr *e) {
  if ((e->kind == EX_NAME || e->kind == EX_FIELD) && e->sym && e->sym->kind == SYM_STRUCT)
    return e->sym->st;
  return NULL;
}

static Type *check_assert_type(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Arg *x = call_arg(call, 0), *ta = call_arg(call, 1);
  StructDecl *st = ta ? struct_named(ta->value) : NULL;
  if (!x || !ta || (ta->value->kind != EX_TYPE && !st)) {
    check_error(k, call->span, "assert_type(x, T) takes a value and a type (a tensor type or a struct's name)");
    return type_error();
  }
  Type *t = check_expr(k, x->value);
  bool named[MAX_MESH_AXES] = {0};
  Type *want = st ? record_written(k, st) : type_from(k, ta->value->type, named);
  if (want)
    check_fits_any(k, call->span, want, named, t, "assert_type", src(k, x->value), NULL);
  return host_type(TY_VOID);
}

/* zeros_like(x), ones_like(x): a tensor of x's type (a record: field by
 * field, see check_builtin), which no gradient flows through. */
static Type *check_like(Checker *k, Expr *call, Builtin op) {
  Arg *a = call_arg(call, 0);
  Type *t = check_expr(k, a->value);
  if (t->kind == TY_ERROR)
    return t;
  if (t->kind != TY_TENSOR || t->literal) {
    check_error(k, a->value->span, "%s() takes a tensor or a record, not %s", builtin_name[op], ck_type(k, t));
    help(k->c, "for a number, write it as a type: zeros(f32{*: R})");
    return type_error();
  }
  if (op == BI_ZEROS_LIKE)
    return t;
  /* ones are the same on every rank: where x is a pending sum (P), ones of
   * its type would sum to the axis size, so the ones are R there */
  Type *r = type_clone(k->c, t);
  for (int a = 0; a < k->naxes; a++)
    if (r->lt[a] == LT_P)
      r->lt[a] = LT_R;
  return r;
}

static Type *check_misc(Checker *k, Expr *call, Builtin op) {
  Type *x = arg_tensor(k, call, 0);
  if (x->kind == TY_ERROR)
    return x;
  Operand o = {call_arg(call, 0)->value, x};
  Type *r = elementwise(k, call->span, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]), RULE_LINEAR, &o, 1);
  if (r->kind == TY_ERROR)
    return r;
  r = type_clone(k->c, r);
  switch (op) {
  case BI_DETACH: return r;
  case BI_ASTYPE: {
    Arg *d = call_arg(call, 1);
    if (!d || d->value->kind != EX_TYPE || d->value->type->has_dims) {
      check_error(k, d ? d->value->span : call->span, "astype(x, dtype) takes a dtype: f32, f64, i32 or bf16");
      return type_error();
    }
    r->dtype = d->value->type->dtype;
    if (r->dtype == DT_I32 && x->dtype != DT_I32)
      for (int a = 0; a < k->naxes; a++)
        if (x->lt[a] == LT_P) { /* truncating each term is not truncating the sum */
          Expr *xe = call_arg(call, 0)->value;
          check_error(k, call->span, "astype() to i32 is not linear, but '%s' is P (a pending sum) on mesh axis '%s'",
                      src(k, xe), axis_name(k, a));
          note_at(k->c, (Span){0, 0, 0}, "rounding each rank's term is not rounding the sum: the sum must happen first");
          note_p_origin(k, xe, a);
          const char *fix = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=R)", src(k, xe), axis_name(k, a));
          help_wrap(k, xe, fix, arena_sprintf(&k->c->arena, "reduce it first: %s", fix));
          return type_error();
        }
    return r;
  }
  case BI_TRANSPOSE: {
    long long d0, d1;
    int a, b;
    if (!call_arg(call, 1) || !call_arg(call, 2) || !host_int(k, call_arg(call, 1)->value, &d0) ||
        !host_int(k, call_arg(call, 2)->value, &d1) || !norm_dim(k, call->span, d0, r->ndim, &a) ||
        !norm_dim(k, call->span, d1, r->ndim, &b))
      return type_error();
    Size s = r->shape[a];
    r->shape[a] = r->shape[b];
    r->shape[b] = s;
    shard_transpose(r, a, b);
    return r;
  }
  case BI_PERMUTE: {
    Arg *p = call_arg(call, 1);
    if (!p || p->value->kind != EX_LIST) {
      check_error(k, call->span, "permute(x, [dims]) takes a list of dims");
      return type_error();
    }
    Type *res = type_clone(k->c, r);
    int i = 0, perm[MAX_DIMS];
    bool seen[MAX_DIMS] = {0};
    for (Expr *e = p->value->elems; e; e = e->next, i++) {
      long long v;
      int d;
      if (i >= r->ndim || !host_int(k, e, &v) || !norm_dim(k, e->span, v, r->ndim, &d) || seen[d]) {
        check_error(k, p->value->span, "permute needs each of the %d dims exactly once", r->ndim);
        return type_error();
      }
      seen[d] = true;
      perm[i] = d;
      res->shape[i] = r->shape[d];
    }
    if (i != r->ndim) {
      check_error(k, p->value->span, "permute needs each of the %d dims exactly once", r->ndim);
      return type_error();
    }
    shard_permute(r, res, perm);
    return res;
  }
  case BI_RESHAPE:
  case BI_EXPAND: {
    Arg *p = call_arg(call, 1);
    if (!p || p->value->kind != EX_LIST) {
      check_error(k, call->span, "%s(x, [sizes]) takes a list of sizes", builtin_name[op]);
      return type_error();
    }
    Type *res = type_clone(k->c, r);
    res->ndim = 0;
    for (Expr *e = p->value->elems; e; e = e->next) {
      if (res->ndim == MAX_DIMS || !size_of(k, e, &res->shape[res->ndim]))
        return type_error();
      res->ndim++;
    }
    if (op == BI_EXPAND) {
      int shift = res->ndim - r->ndim;
      for (int d = 0; d < r->ndim && shift >= 0; d++) {
        long long one;
        if (!(size_is_int(r->shape[d], &one) && one == 1) && !size_eq(r->shape[d], res->shape[d + shift])) {
          check_error(k, call->span, "expand() can only grow dims of size 1, but dim %d is %s and the new size is %s", d,
                      size_str(k->c, k->mesh, r->shape[d]), size_str(k->c, k->mesh, res->shape[d + shift]));
          help(k->c, "keep the size of dim %d: %s", d, size_str(k->c, k->mesh, r->shape[d]));
          return type_error();
        }
      }
      if (shift < 0) {
        check_error(k, call->span, "expand() cannot drop dims: %s has %d, the new shape %d", src(k, call_arg(call, 0)->value),
                    r->ndim, res->ndim);
        help(k->c, "list every dim, adding leading ones if needed");
        return type_error();
      }
      shard_expand(r, res);
      return res;
    }
    Size before = size_int(1), after = size_int(1);
    for (int d = 0; d < r->ndim; d++)
      before = size_mul(before, r->shape[d]);
    for (int d = 0; d < res->ndim; d++)
      after = size_mul(after, res->shape[d]);
    if (!size_eq(before, after)) {
      check_error(k, call->span, "reshape() cannot change the number of elements: %s has %s, the new shape %s",
                  src(k, call_arg(call, 0)->value), size_str(k->c, k->mesh, before), size_str(k->c, k->mesh, after));
      note_at(k->c, (Span){0, 0, 0}, "'%s' is %s", src(k, call_arg(call, 0)->value), ck_type(k, r));
      help(k->c, "give sizes whose product is %s", size_str(k->c, k->mesh, before));
      return type_error();
    }
    if (!shard_reshape(k, call, r, res))
      return type_error();
    return res;
  }
  case BI_SLICE: {
    long long dv = 0, st = 0, en = 0;
    bool hd, hs, he;
    int d;
    if (!named_int(k, call, "dim", &dv, &hd) || !named_int(k, call, "start", &st, &hs) ||
        !named_int(k, call, "end", &en, &he) || !norm_dim(k, call->span, dv, r->ndim, &d))
      return type_error();
    if (!shard_slice(k, call, r, d))
      return type_error();
    long long full;
    if (!hs)
      st = 0;
    if (!he) {
      if (!size_is_int(r->shape[d], &full)) {
        k->value_dependent |= size_has_symbol(r->shape[d]);
        check_error(k, call->span, "slice() needs end= on a dim of symbolic size");
        return type_error();
      }
      en = full;
    }
    if (en <= st || st < 0) {
      check_error(k, call->span, "slice() needs 0 <= start < end");
      return type_error();
    }
    r->shape[d] = size_int(en - st);
    return r;
  }
  default: return r;
  }
}

static Type *check_concat(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Arg *p = call_arg(call, 0);
  /* a tuple, or a list as PyTorch's torch.cat([a, b], dim=d) takes it */
  if (!p || (p->value->kind != EX_TUPLE && p->value->kind != EX_LIST) || !p->value->elems) {
    check_error(k, call->span, "concat((a, b, ...), dim=d) takes a tuple or a list of tensors");
    return type_error();
  }
  int n = 0;
  for (Expr *e = p->value->elems; e; e = e->next)
    n++;
  Operand *ops = arena_alloc(&k->c->arena, sizeof(Operand) * (size_t)n);
  n = 0;
  for (Expr *e = p->value->elems; e; e = e->next, n++) {
    ops[n].e = e;
    ops[n].t = as_tensor(k, e, check_expr(k, e));
    if (ops[n].t->kind == TY_ERROR)
      return type_error();
  }
  long long dv = 0;
  bool hd;
  int d;
  if (!named_int(k, call, "dim", &dv, &hd) || !norm_dim(k, call->span, dv, ops[0].t->ndim, &d))
    return type_error();
  Type *r = type_clone(k->c, ops[0].t);
  if (!combine(k, RULE_LINEAR, "concat()", call->span, ops, n, r->lt))
    return type_error();
  Size total = ops[0].t->shape[d];
  for (int i = 1; i < n; i++) {
    const Type *t = ops[i].t;
    if (t->ndim != r->ndim || t->dtype != r->dtype) {
      check_error(k, ops[i].e->span, "concat(): %s does not match %s", ck_type(k, t), ck_type(k, ops[0].t));
      return type_error();
    }
    for (int j = 0; j < t->ndim; j++)
      if (j != d && !size_eq(t->shape[j], r->shape[j])) {
        check_error(k, ops[i].e->span, "concat(): dim %d differs: %s vs %s", j, ck_type(k, t), ck_type(k, ops[0].t));
        return type_error();
      }
    long long x, y;
    if (size_is_int(total, &x) && size_is_int(t->shape[d], &y))
      total = size_int(x + y);
    else if (size_eq(total, t->shape[d]))
      total = size_mul(total, size_int(2));
    else {
      k->value_dependent |= size_has_symbol(total) || size_has_symbol(t->shape[d]);
      total = (Size){.unknown = true, .den = 1};
    }
  }
  if (!shard_concat(k, call, ops, n, d))
    return type_error();
  r->shape[d] = total;
  return r;
}

/* Norms: nonlinear over the last dim (layer_norm, rms_norm); weights
 * combine like the input.  (cross_entropy is in check_select.c.) */
static Type *check_nn(Checker *k, Expr *call, Builtin op) {
  Operand ops[3];
  int n = 0;
  for (Arg *a = call->args; a && n < 3; a = a->next)
    if (!a->name) {
      ops[n].e = a->value;
      ops[n].t = as_tensor(k, a->value, check_expr(k, a->value));
      if (ops[n].t->kind == TY_ERROR)
        return type_error();
      n++;
    }
  const Type *x = ops[0].t;
  if (x->ndim < 1) {
    check_error(k, call->span, "%s() needs at least one dim", builtin_name[op]);
    return type_error();
  }
  if (!shard_norm(k, call, op, &ops[0]))
    return type_error();
  return elementwise(k, call->span, arena_sprintf(&k->c->arena, "%s()", builtin_name[op]), RULE_NONLINEAR, ops, n);
}

static Type *check_embedding(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Arg *ia = call_arg(call, 0), *wa = call_arg(call, 1);
  Type *ids = arg_tensor(k, call, 0), *w = arg_tensor(k, call, 1);
  if (ids->kind == TY_ERROR || w->kind == TY_ERROR)
    return type_error();
  if (ids->dtype != DT_I32 || w->ndim != 2) {
    check_error(k, call->span, "embedding(ids, table) takes i32 ids and a [V, D] table, got %s and %s", ck_type(k, ids),
                ck_type(k, w));
    return type_error();
  }
  Operand o[2] = {{ia->value, ids}, {wa->value, w}};
  for (int a = 0; a < k->naxes; a++)
    if (ids->lt[a] == LT_P) { /* a row is looked up by the whole id, not by each rank's term of it */
      check_error(k, call->span, "embedding()'s ids '%s' are P (a pending sum) on mesh axis '%s'", src(k, ia->value),
                  axis_name(k, a));
      note_at(k->c, (Span){0, 0, 0}, "the rows looked up depend on the summed ids, not on each rank's term");
      note_p_origin(k, ia->value, a);
      const char *fix = arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=R)", src(k, ia->value), axis_name(k, a));
      help_wrap(k, ia->value, fix, arena_sprintf(&k->c->arena, "reduce them first: %s", fix));
      return type_error();
    }
  Type *r = type_clone(k->c, ids);
  r->dtype = w->dtype;
  if (!combine(k, RULE_MULTILINEAR, "embedding()", call->span, o, 2, r->lt))
    return type_error();
  r->shape[r->ndim++] = w->shape[1];
  bool contracted[MAX_MESH_AXES] = {0};
  if (!shard_embedding(k, call->span, o, r, contracted))
    return type_error();
  if (!apply_out_partial(k, call, r, contracted))
    return type_error();
  return r;
}

/* einsum("bf,fd->bd", a, b): labels give the shapes; contracted labels that
 * are sharded need out_partial_axes, as for matmul. */
static Type *check_einsum(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Arg *fa = call_arg(call, 0);
  if (!fa || fa->value->kind != EX_STRING) {
    check_error(k, call->span, "einsum() takes a subscripts string first, as in einsum(\"bf,fd->bd\", a, b)");
    return type_error();
  }
  const char *spec = fa->value->str;
  const char *arrow = strstr(spec, "->");
  Operand ops[4];
  int n = 0;
  for (Arg *a = fa->next; a; a = a->next)
    if (!a->name) {
      if (n == 4) {
        check_error(k, a->value->span, "einsum() takes at most 4 operands");
        return type_error();
      }
      ops[n].e = a->value;
      ops[n].t = as_tensor(k, a->value, check_expr(k, a->value));
      if (ops[n].t->kind == TY_ERROR)
        return type_error();
      n++;
    }
  if (!arrow) {
    check_error(k, fa->value->span, "einsum subscripts need '->' and the output labels");
    return type_error();
  }
  for (int i = 1; i < n; i++)
    if (!ops[i].t->literal && !ops[0].t->literal && ops[i].t->dtype != ops[0].t->dtype) {
      check_error(k, call->span, "einsum() needs operands of one dtype, got %s and %s", dtype_name(ops[0].t->dtype),
                  dtype_name(ops[i].t->dtype));
      help(k->c, "convert one: astype(%s, %s)", src(k, ops[i].e), dtype_name(ops[0].t->dtype));
      return type_error();
    }
  Size lsize[128];
  bool lset[128] = {0}, in_out[128] = {0};
  int lop[128], ldim[128]; /* where a label was first seen */
  const char *p = spec;
  for (int i = 0; i < n; i++) {
    int d = 0;
    for (; *p && *p != ',' && p < arrow; p++) {
      unsigned char ch = (unsigned char)*p;
      if (ch == ' ')
        continue;
      if (ch >= 128 || !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) || d >= ops[i].t->ndim) {
        check_error(k, fa->value->span, "einsum operand %d: subscripts do not match %s", i + 1, ck_type(k, ops[i].t));
        return type_error();
      }
      if (lset[ch] && !size_eq(lsize[ch], ops[i].t->shape[d])) {
        check_error(k, fa->value->span, "einsum label '%c' is %s in operand %d but %s in operand %d", ch,
                    size_str(k->c, k->mesh, lsize[ch]), lop[ch] + 1, size_str(k->c, k->mesh, ops[i].t->shape[d]), i + 1);
        return type_error();
      }
      if (lset[ch] && !shard_einsum_label(k, call->span, ch, &ops[lop[ch]], ldim[ch], &ops[i], d))
        return type_error();
      if (!lset[ch]) {
        lop[ch] = i;
        ldim[ch] = d;
      }
      lset[ch] = true;
      lsize[ch] = ops[i].t->shape[d];
      d++;
    }
    if (d != ops[i].t->ndim) {
      check_error(k, fa->value->span, "einsum operand %d has %d dims but %d labels", i + 1, ops[i].t->ndim, d);
      return type_error();
    }
    if (*p == ',')
      p++;
  }
  Type *r = type_new(k->c, TY_TENSOR);
  r->dtype = ops[0].t->dtype;
  r->local = check_all_local(k);
  if (!combine(k, RULE_MULTILINEAR, "einsum()", call->span, ops, n, r->lt))
    return type_error();
  for (p = arrow + 2; *p; p++) {
    unsigned char ch = (unsigned char)*p;
    if (ch == ' ')
      continue;
    if (ch >= 128 || !lset[ch] || r->ndim == MAX_DIMS) {
      check_error(k, fa->value->span, "einsum output label '%c' is not in any operand", *p);
      return type_error();
    }
    if (in_out[ch]) {
      check_error(k, fa->value->span, "einsum output label '%c' appears twice", *p);
      return type_error();
    }
    in_out[ch] = true;
    r->shape[r->ndim] = lsize[ch];
    if (!shard_einsum_output(k, call->span, spec, arrow, ops, n, r, ch, &ops[lop[ch]], ldim[ch]))
      return type_error();
    r->ndim++;
  }
  bool contracted[MAX_MESH_AXES] = {0};
  shard_einsum_contracted(ops, lset, in_out, lop, ldim, contracted);
  if (!apply_out_partial(k, call, r, contracted))
    return type_error();
  return r;
}

static Type *check_autodiff(Checker *k, Expr *call, Builtin op);
static Type *check_remat(Checker *k, Expr *call, Builtin op);
static Type *check_fn_call(Checker *k, Expr *call, FnDecl *fn);

static Type *check_builtin_kind(Checker *k, Expr *call, Builtin op);

static Type *check_builtin(Checker *k, Expr *call, Builtin op) {
  if (!check_named_args(k, call, op))
    return type_error();
  Arg *a0 = builtin_flags[op] & OPF_RECORDS ? call_arg(call, 0) : NULL;
  if (a0) { /* look at the first argument: a record? */
    Type *t = check_expr(k, a0->value);
    if (t->kind == TY_RECORD) {
      if (builtin_class[op] == OPC_COLLECTIVE && call_arg(call, 1) && call_arg(call, 1)->value->kind == EX_TYPE) {
        check_error(k, call->span, "redistribute(x, T) takes a tensor; '%s' is a record", src(k, a0->value));
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

/* matmul(a, b): the rule that `@` shares. */
static Type *check_matmul_call(Checker *k, Expr *call, Builtin op) {
  (void)op;
  return check_matmul(k, call, call_arg(call, 0)->value, call_arg(call, 1)->value, "matmul()");
}

/* load(path, T): a tensor (check_creation), or a checkpoint directory
 * when T names a struct (check_io.c). */
static Type *check_load(Checker *k, Expr *call, Builtin op) {
  StructDecl *st = struct_named(call_arg(call, 1)->value);
  return st ? check_load_record(k, call, st) : check_creation(k, call, op);
}

/* exists(path): a host bool, the same on every rank. */
static Type *check_exists(Checker *k, Expr *call, Builtin op) {
  check_io_path(k, call, op);
  return host_type(TY_BOOL);
}

/* wall_time(): seconds since the start, rank 0's clock. */
static Type *check_wall_time(Checker *k, Expr *call, Builtin op) {
  (void)k, (void)call, (void)op;
  return host_type(TY_FLOAT);
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
    const char *callee = src(k, call->lhs), *text = src(k, call);
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
        args[i] = as_tensor(k, argx[i], args[i]);
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
                              ? arena_sprintf(&k->c->arena, "%s.%s", src(k, argx[j]), type_leaf_path(k->c, args[j], l, "."))
                              : src(k, argx[j]);
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
      return in->ret ? in->ret : host_type(TY_VOID);
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
  /* forget shape variables of an earlier instance */
  for (Param *p = fn->params; p; p = p->next)
    for (Dim *d = p->type ? p->type->dims : NULL; d; d = d->next)
      if (d->size->kind == EX_NAME && d->size->sym && d->size->sym->kind == SYM_SHAPEVAR)
        d->size->sym->info = NULL;
  for (TypeExpr *t = fn->ret; t; t = t->next)
    for (Dim *d = t->dims; d; d = d->next)
      if (d->size->kind == EX_NAME && d->size->sym && d->size->sym->kind == SYM_SHAPEVAR)
        d->size->sym->info = NULL;
  LocalSave saved_local;
  bool all_axes[MAX_MESH_AXES];
  memset(all_axes, 1, sizeof all_axes);
  enter_local(k, all_axes, &saved_local);
  if (!(fn->flags & FN_LOCAL)) /* a plain fn runs with its caller's axes */
    leave_local(k, &saved_local);
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
                                 src(k, argx[i]), argx[i])) {
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
  return self->ret ? self->ret : host_type(TY_VOID);
}

/* The last statement of a block when it is a return of one value. */
static Expr *final_return(Stmt *block) {
  Stmt *last = NULL;
  for (Stmt *s = block ? block->body : NULL; s; s = s->next)
    last = s;
  return last && last->kind == ST_RETURN && last->value && !last->value->next ? last->value : NULL;
}

/* help for a loss that is R on axis a, fitted to how the loss was made: an
 * all_reduce to R becomes one to I; any other R value is made P by keeping
 * one rank's copy, convert(l, a, src=R, dst=P), the form the tutorial uses
 * (R -> I would need expert=true). */
static void loss_r_help(Checker *k, FnDecl *fn, const Type *v, int a) {
  Expr *l = fn ? final_return(fn->body) : NULL;
  const char *ax = axis_name(k, a);
  /* the convert fixes every axis where the loss is R at once: (dp, tp) */
  int nr = 0;
  StrBuf rs;
  sb_init(&rs, &k->c->arena);
  for (int b = 0; b < k->naxes; b++)
    if (v->lt[b] == LT_R)
      sb_printf(&rs, "%s%s", nr++ ? ", " : "", axis_name(k, b));
  const char *rax = nr > 1 ? arena_sprintf(&k->c->arena, "(%s)", rs.data) : ax;
  if (l && l->kind == EX_CALL && l->lhs->sym && l->lhs->sym->kind == SYM_BUILTIN &&
      l->lhs->sym->index == BI_ALL_REDUCE && call_arg(l, 0) && call_arg(l, 1)) {
    Arg *dst = call_named(k, l, "dst");
    const Type *ax_t = call_arg(l, 1)->value->ty;
    bool on_a = false;
    for (int i = 0; ax_t && ax_t->kind == TY_AXES && i < ax_t->naxes; i++)
      on_a |= ax_t->axes[i] == a;
    if (dst && on_a) {
      note_at(k->c, l->span, "the loss is made R here, the same on every rank of '%s'", ax);
      help_fix(k->c, dst->span, "dst=I", "reduce it to I instead, whose gradient is counted once%s: dst=I",
               fn->ret ? arena_sprintf(&k->c->arena, " (and declare the result I on %s)", ax) : "");
      return;
    }
  }
  if (l) {
    note_at(k->c, l->span, "'%s' returns an R value here: every rank of '%s' holds the whole loss", fn->name, ax);
    const char *code = arena_sprintf(&k->c->arena, "convert(%s, %s, src=R, dst=P)", src(k, l), rax);
    help_wrap(k, l, code,
              arena_sprintf(&k->c->arena, "keep one rank's copy as the only term of a pending sum%s: return %s;",
                            fn->ret ? arena_sprintf(&k->c->arena, " (and declare the result P on %s)", rs.data) : "",
                            code));
    return;
  }
  help(k->c, "return the loss as P, one rank's copy the only term: return convert(l, %s, src=R, dst=P);", rax);
}

/* remat(f(args)) (SPEC 15): a call of a user function whose forward the
 * backward runs again instead of keeping its residuals.  Its type is the
 * call's; what cannot be recomputed (a function with effects) is reported
 * by autodiff.c, which sees the instructions. */
static Type *check_remat(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Expr *fc = call_arg(call, 0)->value;
  if (fc->kind != EX_CALL || !fc->lhs->sym || fc->lhs->sym->kind != SYM_FN) {
    bool builtin = fc->kind == EX_CALL && fc->lhs->sym && fc->lhs->sym->kind == SYM_BUILTIN;
    if (builtin)
      check_error(k, fc->span, "remat() takes a call of a user function; %s() is a built-in",
                  builtin_name[fc->lhs->sym->index]);
    else
      check_error(k, fc->span, "remat() takes a call of a function, as in remat(block(x, w)); '%s' is not a call",
                  src(k, fc));
    help(k->c, "put the computation to recompute in a fn and wrap a call of it: remat(f(...))");
    return type_error();
  }
  Type *t = check_expr(k, fc);
  if (t->kind == TY_VOID) {
    check_error(k, fc->span, "remat() recomputes a result, but '%s' returns nothing", fc->lhs->sym->name);
    help(k->c, "call it without remat(): %s", src(k, fc));
    return type_error();
  }
  return t;
}

/* value_and_grad(f(args), wrt=(a, b)) and grad(...): the value's type is
 * f's result; each gradient has the dual type of its argument. */
static Type *check_autodiff(Checker *k, Expr *call, Builtin op) {
  Arg *fa = call_arg(call, 0);
  Arg *wrt = call_named(k, call, "wrt");
  if (!fa || fa->value->kind != EX_CALL || !fa->value->lhs->sym || fa->value->lhs->sym->kind == SYM_BUILTIN ||
      (fa->value->lhs->sym->kind != SYM_FN)) {
    check_error(k, fa ? fa->value->span : call->span, "%s() takes a call of a function, as in %s(loss(x, w), wrt=w)",
                builtin_name[op], builtin_name[op]);
    help(k->c, "wrap the expression in a fn returning the scalar loss, and differentiate a call of it");
    return type_error();
  }
  if (!wrt) {
    check_error(k, call->span, "%s() needs wrt=: the arguments to differentiate with respect to", builtin_name[op]);
    help(k->c, "name them: %s(%s, wrt=...)", builtin_name[op], src(k, fa->value));
    return type_error();
  }
  Type *v = check_expr(k, fa->value);
  if (v->kind == TY_ERROR)
    return v;
  if (v->kind != TY_TENSOR || v->ndim != 0) {
    check_error(k, fa->value->span, "%s() differentiates a scalar, but '%s' returns %s", builtin_name[op],
                fa->value->lhs->sym->name, ck_type(k, v));
    help(k->c, "return a scalar loss, e.g. sum(y, out_partial_axes=...) / N");
    return type_error();
  }
  for (int a = 0; a < k->naxes; a++)
    if (v->lt[a] == LT_R) {
      check_error(k, fa->value->span, "the loss is R on mesh axis '%s': its gradient would be counted once per rank",
                  axis_name(k, a));
      loss_r_help(k, fa->value->lhs->sym->fn, v, a);
      return type_error();
    }
  Expr *list = wrt->value->kind == EX_TUPLE ? wrt->value->elems : wrt->value;
  int nw = 0;
  for (Expr *w = list; w; w = wrt->value->kind == EX_TUPLE ? w->next : NULL)
    nw++;
  Type *res = type_new(k->c, TY_TUPLE);
  res->elems = arena_alloc(&k->c->arena, sizeof(Type *) * (size_t)(nw + 2));
  if (op == BI_VALUE_AND_GRAD)
    res->elems[res->nelems++] = v;
  for (Expr *w = list; w; w = wrt->value->kind == EX_TUPLE ? w->next : NULL) {
    bool passed = false;
    for (Arg *a = fa->value->args; a; a = a->next)
      passed |= a->value->kind == EX_NAME && w->kind == EX_NAME && a->value->sym == w->sym && w->sym;
    if (!passed) {
      check_error(k, w->span, "wrt= names '%s', which is not an argument of the call", src(k, w));
      help(k->c, "pass it to the function and name it: %s(f(..., %s), wrt=%s)", builtin_name[op], src(k, w), src(k, w));
      return type_error();
    }
    Type *t = check_expr(k, w);
    if (t->kind == TY_ERROR)
      return t;
    /* a tensor, or a record all of whose fields are float tensors: its
     * gradient is a record of the same struct with the dual types */
    for (int l = 0, nl = type_nleaves(t); l < nl; l++) {
      Type *leaf = type_leaf(t, l);
      if (t->kind == TY_TUPLE || leaf->kind != TY_TENSOR || leaf->dtype == DT_I32) {
        if (t->kind == TY_RECORD)
          check_error(k, w->span, "cannot differentiate with respect to '%s': field '%s' is %s", src(k, w),
                      type_leaf_path(k->c, t, l, "."), ck_type(k, leaf));
        else
          check_error(k, w->span, "cannot differentiate with respect to '%s' (%s)", src(k, w), ck_type(k, t));
        help(k->c, "differentiate with respect to float tensors, or records of them, only");
        return type_error();
      }
    }
    res->elems[res->nelems++] = type_dual(k->c, t, k->naxes);
  }
  if (res->nelems == 1)
    return res->elems[0];
  return res;
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
      help(k->c, "apply it to a field, e.g. %s.%s", src(k, rec), rt->nelems ? rt->fields[0] : "f");
      return type_error();
    }
    return record_map(k, e, (Expr **[]){&e->lhs, &e->rhs}, 2, opname);
  }
  bool host = (l->kind == TY_INT || l->kind == TY_FLOAT || l->kind == TY_BOOL) &&
              (r->kind == TY_INT || r->kind == TY_FLOAT || r->kind == TY_BOOL);
  if (host) {
    switch (e->op) {
    case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_EQ: case OP_NE: case OP_AND: case OP_OR:
      return host_type(TY_BOOL);
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
  Operand o[2] = {{e->lhs, as_tensor(k, e->lhs, l)}, {e->rhs, as_tensor(k, e->rhs, r)}};
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
    return host_type(TY_INT);
  case SYM_SHAPEVAR: {
    Size *v = s->info;
    long long x;
    if (!s->is_rest && v && size_is_int(*v, &x))
      return host_type(TY_INT);
    return host_type(TY_INT);
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
  Type *want = type_from(k, out_te, named);
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
    if (k->nlm == k->caplm) {
      int cap = k->caplm ? 2 * k->caplm : 16;
      LocalBinding *m = arena_alloc(&k->c->arena, sizeof(LocalBinding) * (size_t)cap);
      if (k->nlm)
        memcpy(m, k->lm, sizeof(LocalBinding) * (size_t)k->nlm);
      k->lm = m;
      k->caplm = cap;
    }
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
  case EX_INT: return host_type(TY_INT);
  case EX_FLOAT: return host_type(TY_FLOAT);
  case EX_BOOL: return host_type(TY_BOOL);
  case EX_STRING: return host_type(TY_STRING);
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
      return host_type(TY_BOOL);
    }
    if (x->kind == TY_INT || x->kind == TY_FLOAT)
      return x;
    if (x->kind == TY_RECORD)
      return record_map(k, e, (Expr **[]){&e->lhs}, 1, "unary '-'");
    Operand o = {e->lhs, as_tensor(k, e->lhs, x)};
    return elementwise(k, e->span, "unary '-'", RULE_LINEAR, &o, 1);
  }
  case EX_BINARY: return check_binary(k, e);
  case EX_CALL: {
    Symbol *s = e->lhs->sym;
    if (!s) { /* `v.f(...)` on a value, `(e)(...)`: the resolver binds only names and module members */
      check_error(k, e->lhs->span, "'%s' cannot be called: only functions, built-ins and structs can", src(k, e->lhs));
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
      help(k->c, "make it the same on every rank first, e.g. all_reduce(%s, %s, src=%s, dst=I)", src(k, x), axis_name(k, a),
           lt_name(t->lt[a]));
      return;
    }
}

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
      t = as_tensor(k, s->value, t); /* a host number becomes a scalar tensor of the annotated type */
    if (want && !check_fits_any(k, s->value->span, want, named, t, arena_sprintf(&k->c->arena, "'%s'", s->targets->name),
                                src(k, s->value), s->value))
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

/* The gradient variable an expression reads, if any. */
static Symbol *gradient_in(Expr *e) {
  if (!e)
    return NULL;
  if (e->kind == EX_NAME && e->sym && e->sym->grad_of)
    return e->sym;
  Symbol *s = gradient_in(e->lhs);
  return s ? s : gradient_in(e->rhs);
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
  const char *name = b->name, *xs = part ? "x" : src(k, x); /* x: the part of a tuple */
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
      help(k->c, "assign one variable per part: %s, ... = %s;", s->targets->name, src(k, s->value));
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
                                 rx ? src(k, rx) : NULL, rx && (n == 1 || s->value->next) ? rx : NULL)) {
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
        help(k->c, "a 0-d i32 tensor that is R or I on every axis becomes a host integer with item(%s)", src(k, b));
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
bool check_always_returns(Stmt *block) {
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
