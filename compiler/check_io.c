/* check_io.c: the typing rules of save, load and exists (SPEC 10, 13).
 * The path is a string literal, written first.  save(path, x) writes the
 * global tensor, so x must have a global meaning on every axis (R, I or a
 * layout; never P, never a V without a layout); save(dir, record) writes one
 * .npy per field path under the same rule, field by field.  load(path, T)
 * and load(dir, Struct) make values, so their types must determine every
 * mesh axis (the creation rule), every field of a struct included; the
 * error is reported at the load.  exists(path) is a host boolean. */
#include <string.h>

#include "check.h"

bool check_io_path(Checker *k, Expr *call, Builtin op) {
  Arg *p = call_arg(call, 0);
  if (p && p->value->kind == EX_STRING)
    return true;
  Span sp = p ? p->value->span : call->span;
  check_error(k, sp, "%s() takes a path as a string literal first", builtin_name[op]);
  help(k->c, "%s", op == BI_SAVE ? "save(\"w.npy\", w) or, for a record, save(\"ckpt/step_100\", model)"
                   : op == BI_LOAD ? "load(\"w.npy\", f32[4, 8]{*: I}) or, for a record, load(\"ckpt/step_100\", Model)"
                                   : "exists(\"ckpt/step_100\")");
  return false;
}

/* map="file" (a .safetensors file's name map, docs/weights.md): a string
 * literal, and only where the path is a .safetensors file; such a file
 * holds a record (`is_record`), never a lone tensor. */
bool check_io_safetensors(Checker *k, Expr *call, Builtin op, bool is_record) {
  Arg *p = call_arg(call, 0), *m = call_named(k, call, "map");
  bool st = p && p->value->kind == EX_STRING && path_is_safetensors(p->value->str);
  if (m && m->value->kind != EX_STRING) {
    check_error(k, m->value->span, "map= names the name map's file: a string literal");
    help(k->c, "%s", op == BI_SAVE ? "save(\"model.safetensors\", p, map=\"gpt2.map\")"
                                   : "load(\"model.safetensors\", Model, map=\"gpt2.map\")");
    return false;
  }
  if (m && !st) {
    check_error(k, m->value->span, "map= is for .safetensors files, but '%s' is not one",
                p && p->value->kind == EX_STRING ? p->value->str : "?");
    note_at(k->c, (Span){0, 0, 0}, "a .npy file or a checkpoint directory names its fields by their paths");
    return false;
  }
  if (st && !is_record) {
    check_error(k, call->span, "%s() of a .safetensors file %s a record, not a tensor", builtin_name[op],
                op == BI_SAVE ? "writes" : "makes");
    help(k->c, "%s", op == BI_SAVE ? "put the tensor in a struct, or save it as .npy"
                                   : "name a struct: load(\"model.safetensors\", Model, map=\"model.map\"), or load a .npy");
    return false;
  }
  return true;
}

/* ---- save ---- */

/* One tensor that save() writes (a whole value, or field `path` of a
 * record value v): it must mean a global tensor on every axis. */
static bool savable(Checker *k, Expr *call, Expr *v, const Type *t, const char *path) {
  const char *file = call_arg(call, 0)->value->str;
  for (int a = 0; a < k->naxes; a++) {
    bool p = t->lt[a] == LT_P;
    if (!p && !(t->lt[a] == LT_V && !type_spec_has(t, a, NULL)))
      continue;
    const char *ax = axis_name(k, a);
    if (path)
      check_error(k, v->span, "save() writes global tensors, but field '%s' of this record is %s on mesh axis '%s'", path,
                  lt_name(t->lt[a]), ax);
    else
      check_error(k, v->span, "save() writes the global tensor, but this value is %s on mesh axis '%s'",
                  lt_name(t->lt[a]), ax);
    if (p)
      note_at(k->c, (Span){0, 0, 0}, "a P value is a pending sum: each rank holds one term, not the value");
    else
      note_at(k->c, (Span){0, 0, 0}, "a V value without a layout differs on each rank, so it is no global tensor");
    const char *x = path && v->kind != EX_NAME && v->kind != EX_FIELD ? "r" : src_text(k, v);
    if (path) { /* the fix is the field's, or the whole record's when every field is so */
      help(k->c, "%s it first: %s(%s.%s, %s, src=%s, dst=R), or the record's when every field is %s on '%s'",
           p ? "reduce" : "gather", p ? "all_reduce" : "all_gather", x, path, ax, lt_name(t->lt[a]), lt_name(t->lt[a]),
           ax);
    } else {
      const char *code = arena_sprintf(&k->c->arena, "%s(%s, %s, src=%s, dst=R)", p ? "all_reduce" : "all_gather", x, ax,
                                       p ? "P" : "V");
      help_wrap(k, v, code,
                arena_sprintf(&k->c->arena, "%s it first: save(\"%s\", %s)%s", p ? "reduce" : "gather", file, code,
                              p ? "" : ", or save it outside local code"));
    }
    return false;
  }
  return true;
}

Type *check_save(Checker *k, Expr *call, Builtin op) {
  (void)op;
  Type *none = type_new(k->c, TY_VOID);
  if (!check_io_path(k, call, BI_SAVE))
    return none;
  Expr *v = call_arg(call, 1)->value;
  Type *t = check_expr(k, v);
  if (t->kind != TY_ERROR && !check_io_safetensors(k, call, BI_SAVE, t->kind == TY_RECORD))
    return none;
  if (t->kind == TY_RECORD) { /* a checkpoint directory (or a .safetensors file): every field */
    for (int j = 0, n = type_nleaves(t); j < n; j++)
      if (!savable(k, call, v, type_leaf(t, j), type_leaf_path(k->c, t, j, ".")))
        break;
    return none;
  }
  if (t->kind == TY_ERROR)
    return none;
  t = check_as_tensor(k, v, t);
  if (t->kind == TY_TENSOR && t->literal) {
    check_error(k, v->span, "save() writes a tensor, but this is a host value");
    help(k->c, "make it a tensor: save(\"%s\", full(f32{*: R}, v))", call_arg(call, 0)->value->str);
    return none;
  }
  if (t->kind == TY_TENSOR)
    savable(k, call, v, t, NULL);
  return none;
}

/* ---- load of a struct ---- */

/* The declaration of the field at `path` ("attn.wo") in struct st. */
static StructField *field_at(StructDecl *st, const char *path) {
  for (StructField *f = st->fields; f; f = f->next) {
    size_t n = strlen(f->name);
    if (strncmp(path, f->name, n) != 0)
      continue;
    if (path[n] == 0)
      return f;
    if (path[n] == '.' && f->type->sym && f->type->sym->kind == SYM_STRUCT)
      return field_at(f->type->sym->st, path + n + 1);
  }
  return NULL;
}

/* load("dir", Struct): a record of the struct's declared field types, each
 * of which must say what it is on every mesh axis and not be P. */
Type *check_load_record(Checker *k, Expr *call, StructDecl *st) {
  if (check_io_path(k, call, BI_LOAD))
    check_io_safetensors(k, call, BI_LOAD, true);
  Expr *ta = call_arg(call, 1)->value;
  Type *t = record_written(k, st);
  if (!t)
    return type_error();
  bool ok = true;
  for (int j = 0, n = type_nleaves(t); j < n; j++) {
    Type *f = type_leaf(t, j);
    const char *path = type_leaf_path(k->c, t, j, ".");
    for (int a = 0; a < k->naxes; a++) {
      if (f->lt[a] != LT_NONE && f->lt[a] != LT_P)
        continue;
      StructField *decl = field_at(st, path);
      const char *leaf = strrchr(path, '.') ? strrchr(path, '.') + 1 : path;
      if (f->lt[a] == LT_NONE) {
        check_error(k, ta->span, "load() makes %s record, but the type of field '%s' does not say what it is on mesh axis '%s'",
                    arena_sprintf(&k->c->arena, "%s %s", strchr("AEIOUaeiou", st->name[0]) ? "an" : "a", st->name),
                    path, axis_name(k, a));
        note_at(k->c, decl ? decl->span : (Span){0, 0, 0}, "'%s' is declared %s here; a loaded value must be complete",
                leaf, ck_type(k, f));
        help(k->c, "name the axis in the field's type, e.g. %s: ...{%s: I} (or {*: I} for all the others)", leaf,
             axis_name(k, a));
      } else {
        check_error(k, ta->span, "load() cannot make a P value, but field '%s' is P on mesh axis '%s'", path,
                    axis_name(k, a));
        note_at(k->c, decl ? decl->span : (Span){0, 0, 0}, "each rank would hold the whole value, and the pending sum "
                "would count it once per rank");
        help(k->c, "declare the field R or I on '%s' and convert after loading", axis_name(k, a));
      }
      ok = false;
      break;
    }
  }
  return ok ? t : type_error();
}

/* token_batch(path, i32[B, W]..., seed=s, vocab=V): a batch of windows of a
 * token file, made as a creation makes a value (every axis named, not P). */
Type *check_token_batch(Checker *k, Expr *call, Builtin op) {
  Type *t = check_creation(k, call, op);
  if (t->kind != TY_TENSOR)
    return t;
  if (t->dtype != DT_I32 || t->ndim != 2) {
    check_error(k, call_arg(call, 1)->value->span, "token_batch() makes an i32 batch [B, W], not %s", ck_type(k, t));
    help(k->c, "token_batch(\"train.bin\", i32[B@dp, T + 1]{tp: R}, seed=1000 + step)");
    return type_error();
  }
  if (!call_named(k, call, "seed")) {
    check_error(k, call->span, "token_batch() needs seed=, which draws the windows");
    help(k->c, "token_batch(\"train.bin\", T, seed=1000 + step): the same seed gives the same batch on every mesh");
    return type_error();
  }
  return t;
}

/* exists(path): a host bool, the same on every rank. */
Type *check_exists(Checker *k, Expr *call, Builtin op) {
  check_io_path(k, call, op);
  return check_host_type(TY_BOOL);
}
