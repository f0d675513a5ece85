/* check_diag.c: the checker's diagnostics, the layer every rule file sits
 * on: check_error() (with the call chain, once per error, a library
 * function's error moved to the user's call), types and source text as
 * messages write them, the notes after a broken R/I/V/P rule (the
 * operands, where a pending sum was made, a library call's P traced back
 * to the user's argument) and the call a help line suggests for a
 * transition.  It formats; it calls no rule. */
#include <stdlib.h>
#include <string.h>

#include "check.h"

/* ---- messages ---- */

/* Inside a function of another module (a library) checked for a call from
 * the main module's code: that call's instance; else NULL. */
static Inst *check_user_call(Checker *k) {
  for (Inst *i = k->inst; i && i->parent; i = i->parent)
    if (i->call.file && i->fn->module != k->c->main && i->parent->fn && i->parent->fn->module == k->c->main)
      return i;
  return NULL;
}

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
    if (k->inst == u)
      note_at(k->c, lib_sp, "found here, in '%s' checked with the types of this call's arguments", k->inst->fn->name);
    else /* reached through other library functions: name the way there */
      note_at(k->c, lib_sp, "found here, in '%s' (called by '%s') checked with the types of this call's arguments",
              k->inst->fn->name, k->inst->parent ? k->inst->parent->fn->name : u->fn->name);
    k->chain = u->parent; /* the chain goes on above the user's call */
  }
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
const char *src_text(Checker *k, Expr *e) {
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

/* Whether src_text(k, e) is e's own text (not the "x" standing for a long one),
 * so that code built from it can replace source text as a fix. */
bool src_exact(Checker *k, Expr *e) {
  (void)k;
  return e->span.file != 0 && e->span.end - e->span.begin <= 60;
}

/* A help line whose code replaces expression e (help_fix), when the code
 * was built from e's exact text; else a plain help line. */
/* After an error found in a library function checked for the user's call
 * u: the help names the call's arguments and the parameters they are
 * read as, not an edit of the library (which would make a wrong call
 * type-check: nn.rotary given [B, T, H, HD] for [..Bt, Sq, HD]). */
static void help_caller_args(Checker *k, Inst *u) {
  StrBuf sb;
  sb_init(&sb, &k->c->arena);
  Arg *a = u->call_expr->args;
  for (Param *p = u->fn->params; p && a; p = p->next, a = a->next) {
    const Type *t = a->value->ty;
    if (!p->type || p->type->is_axis || !t || t->kind != TY_TENSOR || t->literal || !p->type->span.file)
      continue;
    const char *text = source_file(k->c, p->type->span.file)->text + p->type->span.begin;
    sb_printf(&sb, "%s'%s' is %s for %s: %.*s", sb.len ? "; " : "", src_text(k, a->value), ck_type(k, t),
              p->name->name, (int)(p->type->span.end - p->type->span.begin), text);
    const char *sep = " (here ";
    for (Dim *d = p->type->dims; d; d = d->next) {
      Symbol *v = d->size && d->size->kind == EX_NAME ? d->size->sym : NULL;
      long long n;
      if (v && v->kind == SYM_SHAPEVAR && v->info && !v->is_rest && size_is_int(*(Size *)v->info, &n)) {
        sb_printf(&sb, "%s%s = %lld", sep, v->name, n);
        sep = ", ";
      }
    }
    if (sep[0] == ',')
      sb_putc(&sb, ')');
  }
  if (sb.len)
    help(k->c, "change this call's arguments, not '%s': are their dims laid out as it reads them? %s", u->fn->name,
         sb.data);
}

bool help_library_call(Checker *k, Span at) {
  Inst *u = check_user_call(k);
  if (!u || !u->call_expr || !at.file || at.file == u->call.file)
    return false;
  help_caller_args(k, u);
  return true;
}

void help_wrap(Checker *k, Expr *e, const char *code, const char *msg) {
  if (!help_library_call(k, e->span))
    help_fix(k->c, e->span, src_exact(k, e) ? code : NULL, "%s", msg);
}

/* ---- notes after a broken R/I/V/P rule ---- */

/* note: the operands and their types, after a rule was broken. */
void note_operands(Checker *k, const Operand *ops, int n) {
  StrBuf sb;
  sb_init(&sb, &k->c->arena);
  for (int i = 0; i < n; i++) {
    bool dup = false;
    for (int j = 0; j < i; j++)
      dup |= ops[j].e->span.begin == ops[i].e->span.begin ||
             (src_exact(k, ops[j].e) && src_exact(k, ops[i].e) && strcmp(src_text(k, ops[j].e), src_text(k, ops[i].e)) == 0);
    if (ops[i].t->kind == TY_TENSOR && !ops[i].t->literal && !dup)
      sb_printf(&sb, "%s'%s' is %s", sb.len ? ", " : "", src_text(k, ops[i].e), ck_type(k, ops[i].t));
  }
  if (sb.len)
    note_at(k->c, (Span){0, 0, 0}, "%s", sb.data);
}

/* The last statement of a block when it is a return of one value. */
Expr *final_return(Stmt *block) {
  Stmt *last = NULL;
  for (Stmt *s = block ? block->body : NULL; s; s = s->next)
    last = s;
  return last && last->kind == ST_RETURN && last->value && !last->value->next ? last->value : NULL;
}

/* The gradient variable an expression reads, if any. */
Symbol *gradient_in(Expr *e) {
  if (!e)
    return NULL;
  if (e->kind == EX_NAME && e->sym && e->sym->grad_of)
    return e->sym;
  Symbol *s = gradient_in(e->lhs);
  return s ? s : gradient_in(e->rhs);
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
bool explain_at_user(Checker *k, Expr *pe, int a) {
  Inst *u = check_user_call(k);
  if (!u || !u->call_expr)
    return false;
  int j = pe->kind == EX_LEAF ? pe->ival : -1;
  Expr *rec = pe->kind == EX_LEAF ? pe->lhs : pe;
  Symbol *ps = param_source(rec, j, a, 0);
  /* found in a function the user's call reached through others (adamw
   * calling adam_update): up the chain, each parameter to the argument its
   * caller passed, until a parameter of the user's call */
  for (Inst *cur = k->inst; ps && cur != u; cur = cur->parent) {
    if (!cur || !cur->call_expr || !cur->parent)
      return false;
    int i = 0;
    Param *q = cur->fn->params;
    while (q && q->name->sym != ps)
      q = q->next, i++;
    Arg *ca = q ? call_arg(cur->call_expr, i) : NULL;
    ps = ca ? param_source(ca->value, j, a, 0) : NULL;
  }
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
  const char *what = path ? arena_sprintf(&k->c->arena, "%s.%s", src_text(k, ua), path) : src_text(k, ua);
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

/* ---- transitions, as help lines write them ---- */

/* The text of a src=/dst= argument: S(d), or V for the stacked form. */
const char *ltype_text(Compiler *c, LType lt) {
  return lt.kind == LT_S ? arena_sprintf(&c->arena, "S(%d)", lt.sdim) : lt_name(lt.kind);
}

/* The call that does src -> dst on the value written `x` (the seed's
 * state-transition table, as source text for help lines).  A V side is
 * S(d) when its dim is known, the stacked form V otherwise. */
const char *transition_fix(Checker *k, const char *x, const char *ax, LType src, LType dst) {
  Compiler *c = k->c;
  LTypeKind s = ltype_base(src), d = ltype_base(dst);
  const char *fs = ltype_text(c, src), *fd = ltype_text(c, dst);
  if (d == LT_V && dst.kind != LT_S)
    fd = "S(0)";
#define T(a, b) (s == LT_##a && d == LT_##b)
  if (T(R, I))
    return arena_sprintf(&c->arena, "reinterpret(%s, %s, src=R, dst=I, expert=true)", x, ax);
  if (T(R, V) || T(I, V))
    return arena_sprintf(&c->arena, "convert(%s, %s, src=%s, dst=%s)", x, ax, lt_name(s), fd);
  if (T(R, P))
    return arena_sprintf(&c->arena, "convert(%s, %s, src=R, dst=P)", x, ax);
  if (T(I, R))
    return arena_sprintf(&c->arena, "convert(%s, %s, src=I, dst=R)", x, ax);
  if (T(I, P))
    return arena_sprintf(&c->arena, "convert(convert(%s, %s, src=I, dst=R), %s, src=R, dst=P)", x, ax, ax);
  if (T(V, R) || T(V, I))
    return arena_sprintf(&c->arena, "all_gather(%s, %s, src=%s, dst=%s)", x, ax, fs, lt_name(d));
  if (T(V, V))
    return arena_sprintf(&c->arena, "all_to_all(%s, %s, src=%s, dst=%s)", x, ax, fs,
                         dst.kind == LT_S ? fd : src.kind == LT_S && src.sdim == 0 ? "S(1)" : "S(0)");
  if (T(V, P))
    return arena_sprintf(&c->arena, "reinterpret(%s, %s, src=%s, dst=P)", x, ax, fs);
  if (T(P, R) || T(P, I))
    return arena_sprintf(&c->arena, "all_reduce(%s, %s, src=P, dst=%s)", x, ax, lt_name(d));
  if (T(P, V))
    return arena_sprintf(&c->arena, "reduce_scatter(%s, %s, src=P, dst=%s)", x, ax, fd);
#undef T
  return arena_sprintf(&c->arena, "%s", x);
}
