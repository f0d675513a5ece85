/* check_create.c: the typing rules of the built-ins that make values or
 * only look at them: zeros/ones/full/randn/uniform (and load of a tensor),
 * zeros_like/ones_like, print, assert_type.  A type that makes a value must
 * determine every mesh axis (determines_all). */
#include "check.h"

/* zeros/ones/full/randn/uniform/load/iota: the type argument, which must
 * name every axis and (but for zeros) not be P. */
Type *check_creation(Checker *k, Expr *call, Builtin op) {
  int tpos = op == BI_LOAD || op == BI_TOKEN_BATCH ? 1 : 0;
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
  Type *t = check_type_expr(k, ta->value->type, named);
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
  if (op == BI_LOAD || op == BI_TOKEN_BATCH)
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

/* The struct an expression names (`Model`, `nn.Model`), if it names one. */
static StructDecl *struct_named(Expr *e) {
  if ((e->kind == EX_NAME || e->kind == EX_FIELD) && e->sym && e->sym->kind == SYM_STRUCT)
    return e->sym->st;
  return NULL;
}

/* load(path, T): a tensor (check_creation), or a checkpoint directory
 * when T names a struct (check_io.c). */
Type *check_load(Checker *k, Expr *call, Builtin op) {
  StructDecl *st = struct_named(call_arg(call, 1)->value);
  Arg *path = call_arg(call, 0);
  if (!st && path && path->value->kind == EX_STRING && !check_io_safetensors(k, call, op, false))
    return type_error();
  return st ? check_load_record(k, call, st) : check_creation(k, call, op);
}

/* zeros_like(x), ones_like(x): a tensor of x's type (a record: field by
 * field, see check_builtin), which no gradient flows through. */
Type *check_like(Checker *k, Expr *call, Builtin op) {
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

Type *check_print(Checker *k, Expr *call, Builtin op) {
  (void)op;
  for (Arg *a = call->args; a; a = a->next) {
    Type *t = check_expr(k, a->value);
    if (t->kind == TY_RECORD) {
      check_error(k, a->value->span, "print() shows tensors and numbers, not the record '%s'", src_text(k, a->value));
      help(k->c, "print its fields: print(%s.%s)", src_text(k, a->value), t->nelems ? t->fields[0] : "f");
      continue;
    }
    if (t->kind != TY_TENSOR || t->literal)
      continue;
    for (int x = 0; x < k->naxes; x++)
      if (t->lt[x] != LT_R && t->lt[x] != LT_I) {
        check_error(k, a->value->span, "print() shows one value, but '%s' is %s on mesh axis '%s'", src_text(k, a->value),
                    lt_name(t->lt[x]), axis_name(k, x));
        note_at(k->c, (Span){0, 0, 0}, "'%s' is %s; rank 0 prints, so only R and I values (the same on every rank) can be shown",
                src_text(k, a->value), ck_type(k, t));
        const char *code = t->lt[x] == LT_P
                               ? arena_sprintf(&k->c->arena, "all_reduce(%s, %s, src=P, dst=R)", src_text(k, a->value),
                                               axis_name(k, x))
                               : transition_fix(k, src_text(k, a->value), axis_name(k, x), ltype_on(t, x), (LType){LT_R, 0});
        help_wrap(k, a->value, code,
                  arena_sprintf(&k->c->arena, "%s it first: %s", t->lt[x] == LT_P ? "reduce" : "gather", code));
        break;
      }
  }
  return check_host_type(TY_VOID);
}

Type *check_assert_type(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Arg *x = call_arg(call, 0), *ta = call_arg(call, 1);
  StructDecl *st = ta ? struct_named(ta->value) : NULL;
  if (!x || !ta || (ta->value->kind != EX_TYPE && !st)) {
    check_error(k, call->span, "assert_type(x, T) takes a value and a type (a tensor type or a struct's name)");
    return type_error();
  }
  Type *t = check_expr(k, x->value);
  bool named[MAX_MESH_AXES] = {0};
  Type *want = st ? record_written(k, st) : check_type_expr(k, ta->value->type, named);
  if (want)
    check_fits_any(k, call->span, want, named, t, "assert_type", src_text(k, x->value), NULL);
  return check_host_type(TY_VOID);
}
