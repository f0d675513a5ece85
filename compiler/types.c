/* types.c: sizes, tensor types, their equality, duals and canonical
 * printing (SPEC section 4: dims with @axis, then the remaining axes in mesh
 * order in braces). */
#include <stdlib.h>
#include <string.h>

#include "types.h"

long long size_gcd(long long a, long long b) {
  if (a < 0)
    a = -a;
  if (b < 0)
    b = -b;
  while (b) {
    long long t = a % b;
    a = b;
    b = t;
  }
  return a ? a : 1;
}

static Size normalize(Size s) {
  long long g = size_gcd(s.num, s.den);
  s.num /= g;
  s.den /= g;
  if (s.den < 0) {
    s.num = -s.num;
    s.den = -s.den;
  }
  /* merge factors of one axis, drop zero exponents, sort by axis */
  int n = 0;
  for (int i = 0; i < s.nf; i++) {
    int j;
    for (j = 0; j < n && s.f[j].axis != s.f[i].axis; j++)
      ;
    if (j == n)
      s.f[n++] = s.f[i];
    else
      s.f[j].exp += s.f[i].exp;
  }
  int m = 0;
  for (int i = 0; i < n; i++)
    if (s.f[i].exp != 0)
      s.f[m++] = s.f[i];
  s.nf = m;
  for (int i = 1; i < s.nf; i++)
    for (int j = i; j > 0 && s.f[j - 1].axis > s.f[j].axis; j--) {
      __typeof__(s.f[0]) t = s.f[j];
      s.f[j] = s.f[j - 1];
      s.f[j - 1] = t;
    }
  return s;
}

Size size_int(long long v) { return (Size){.num = v, .den = 1}; }

Size size_symbol(Compiler *c, const char *name) {
  ARENA_RESERVE(&c->arena, c->size_syms, c->nsize_syms, c->capsize_syms, 16);
  c->size_syms[c->nsize_syms] = name;
  return size_axis(SIZE_SYM0 + c->nsize_syms++);
}

bool size_has_symbol(Size a) {
  for (int i = 0; i < a.nf; i++)
    if (a.f[i].axis >= SIZE_SYM0)
      return true;
  return false;
}

bool type_has_symbol(const Type *t) {
  if (t->kind == TY_RECORD || t->kind == TY_TUPLE) {
    for (int i = 0; i < t->nelems; i++)
      if (type_has_symbol(t->elems[i]))
        return true;
    return false;
  }
  for (int d = 0; t->kind == TY_TENSOR && d < t->ndim; d++)
    if (size_has_symbol(t->shape[d]))
      return true;
  return false;
}

Size size_axis(int axis) {
  Size s = size_int(1);
  s.nf = 1;
  s.f[0].axis = axis;
  s.f[0].exp = 1;
  return s;
}

Size size_mul(Size a, Size b) {
  if (a.unknown || b.unknown || a.nf + b.nf > MAX_FACTORS)
    return (Size){.unknown = true, .den = 1};
  Size s = a;
  s.num = a.num * b.num;
  s.den = a.den * b.den;
  for (int i = 0; i < b.nf; i++)
    s.f[s.nf++] = b.f[i];
  return normalize(s);
}

Size size_div(Size a, Size b) {
  if (b.num == 0)
    return (Size){.unknown = true, .den = 1};
  Size inv = b;
  inv.num = b.den;
  inv.den = b.num;
  for (int i = 0; i < inv.nf; i++)
    inv.f[i].exp = -inv.f[i].exp;
  return size_mul(a, normalize(inv));
}

bool size_eq(Size a, Size b) {
  if (a.unknown || b.unknown)
    return true; /* already reported; do not cascade */
  if (a.num != b.num || a.den != b.den || a.nf != b.nf)
    return false;
  for (int i = 0; i < a.nf; i++)
    if (a.f[i].axis != b.f[i].axis || a.f[i].exp != b.f[i].exp)
      return false;
  return true;
}

bool size_is_int(Size a, long long *v) {
  if (a.unknown || a.nf || a.den != 1)
    return false;
  *v = a.num;
  return true;
}

/* A size as text, each mesh axis size written prefix + name ("n_dp" in a
 * comm report, "dp" in types): "16/dp", "4*tp". */
static const char *size_factor_name(Compiler *c, const Mesh *m, int axis) {
  return axis >= SIZE_SYM0 ? c->size_syms[axis - SIZE_SYM0] : m->axes[axis].name;
}

const char *size_text(Compiler *c, const Mesh *m, Size s, const char *prefix) {
  if (s.unknown)
    return "?";
  StrBuf sb;
  sb_init(&sb, &c->arena);
  bool any = false, pos = false;
  for (int i = 0; i < s.nf; i++)
    pos |= s.f[i].exp > 0;
  if (s.num != 1 || !pos) {
    sb_printf(&sb, "%lld", s.num);
    any = true;
  }
  for (int i = 0; i < s.nf; i++)
    for (int k = 0; k < s.f[i].exp; k++) {
      sb_printf(&sb, "%s%s%s", any ? "*" : "", s.f[i].axis >= SIZE_SYM0 ? "" : prefix, size_factor_name(c, m, s.f[i].axis));
      any = true;
    }
  if (s.den != 1)
    sb_printf(&sb, "/%lld", s.den);
  for (int i = 0; i < s.nf; i++)
    for (int k = 0; k < -s.f[i].exp; k++)
      sb_printf(&sb, "/%s%s", s.f[i].axis >= SIZE_SYM0 ? "" : prefix, size_factor_name(c, m, s.f[i].axis));
  return sb.data;
}

const char *size_str(Compiler *c, const Mesh *m, Size s) { return size_text(c, m, s, ""); }

Type *type_new(Compiler *c, TypeKind kind) {
  Type *t = arena_alloc(&c->arena, sizeof(Type));
  t->kind = kind;
  memset(t->spec, -1, sizeof t->spec);
  return t;
}

Type *type_clone(Compiler *c, const Type *t) {
  Type *n = arena_alloc(&c->arena, sizeof(Type));
  *n = *t;
  return n;
}

Type *type_error(void) {
  static Type err = {.kind = TY_ERROR};
  return &err;
}

Type *type_scalar(Compiler *c, DType dt, int naxes, LTypeKind lt) {
  Type *t = type_new(c, TY_TENSOR);
  t->dtype = dt;
  for (int a = 0; a < naxes; a++)
    t->lt[a] = lt;
  return t;
}

bool type_spec_has(const Type *t, int axis, int *dim) {
  for (int d = 0; d < t->ndim; d++)
    for (int k = 0; k < MAX_MESH_AXES && t->spec[d][k] >= 0; k++)
      if (t->spec[d][k] == axis) {
        if (dim)
          *dim = d;
        return true;
      }
  return false;
}

/* The form a value of type t has on axis a, for src=: S(d) if the axis
 * shards a dim (global code), else its letter. */
LType ltype_on(const Type *t, int axis) {
  int d;
  if (!t->local && type_spec_has(t, axis, &d))
    return (LType){LT_S, d};
  return (LType){t->lt[axis], 0};
}

void type_spec_remove(Type *t, int axis) {
  for (int d = 0; d < t->ndim; d++) {
    int n = 0;
    for (int k = 0; k < MAX_MESH_AXES && t->spec[d][k] >= 0; k++)
      if (t->spec[d][k] != axis)
        t->spec[d][n++] = t->spec[d][k];
    for (; n < MAX_MESH_AXES; n++)
      t->spec[d][n] = -1;
  }
}

void type_spec_add(Type *t, int dim, int axis) {
  int k = 0;
  while (k < MAX_MESH_AXES && t->spec[dim][k] >= 0)
    k++;
  if (k < MAX_MESH_AXES)
    t->spec[dim][k] = (int8_t)axis;
}

bool type_same_struct(const Type *a, const Type *b) {
  if (a->kind != TY_RECORD || b->kind != TY_RECORD || a->st != b->st || a->nelems != b->nelems)
    return false;
  for (int i = 0; i < a->nelems; i++)
    if (a->fields[i] != b->fields[i])
      return false;
  return true;
}

bool type_same(const Type *a, const Type *b, int naxes) {
  if (a->kind != b->kind)
    return false;
  if (a->kind == TY_RECORD && !type_same_struct(a, b))
    return false;
  if (a->kind == TY_TUPLE || a->kind == TY_RECORD) {
    if (a->nelems != b->nelems)
      return false;
    for (int i = 0; i < a->nelems; i++)
      if (!type_same(a->elems[i], b->elems[i], naxes))
        return false;
    return true;
  }
  if (a->kind != TY_TENSOR)
    return true;
  if (a->dtype != b->dtype || a->ndim != b->ndim)
    return false;
  for (int d = 0; d < a->ndim; d++) {
    if (!size_eq(a->shape[d], b->shape[d]))
      return false;
    if (memcmp(a->spec[d], b->spec[d], sizeof a->spec[d]) != 0)
      return false;
  }
  for (int x = 0; x < naxes; x++)
    if (a->lt[x] != b->lt[x])
      return false;
  return true;
}

const char *lt_name(LTypeKind k) {
  static const char *const names[] = {"?", "R", "I", "V", "P", "S"};
  return names[k];
}

/* The type of a gradient: R and P swap, I and V stay (SPEC section 9). */
Type *type_dual(Compiler *c, const Type *t, int naxes) {
  Type *d = type_clone(c, t);
  if (t->kind == TY_RECORD) {
    d->elems = arena_alloc(&c->arena, sizeof(Type *) * (size_t)(t->nelems + 1));
    for (int i = 0; i < t->nelems; i++)
      d->elems[i] = type_dual(c, t->elems[i], naxes);
    return d;
  }
  for (int a = 0; a < naxes; a++)
    d->lt[a] = t->lt[a] == LT_R ? LT_P : t->lt[a] == LT_P ? LT_R : t->lt[a];
  d->literal = false;
  return d;
}

const char *type_str(Compiler *c, const Mesh *m, const Type *t) {
  switch (t->kind) {
  case TY_ERROR: return "<error>";
  case TY_VOID: return "nothing";
  case TY_INT: return "a host integer";
  case TY_FLOAT: return "a host float";
  case TY_BOOL: return "a host boolean";
  case TY_STRING: return "a string";
  case TY_AXES: return "mesh axes";
  case TY_LTYPE: return "a local SPMD type";
  case TY_DTYPE: return "a type";
  case TY_TUPLE: {
    StrBuf sb;
    sb_init(&sb, &c->arena);
    sb_putc(&sb, '(');
    for (int i = 0; i < t->nelems; i++)
      sb_printf(&sb, "%s%s", i ? ", " : "", type_str(c, m, t->elems[i]));
    sb_putc(&sb, ')');
    return sb.data;
  }
  case TY_RECORD: {
    StrBuf sb;
    sb_init(&sb, &c->arena);
    sb_printf(&sb, "%s{", t->st ? t->st->name : "");
    for (int i = 0; i < t->nelems; i++)
      sb_printf(&sb, "%s%s: %s", i ? ", " : "", t->fields[i], type_str(c, m, t->elems[i]));
    sb_putc(&sb, '}');
    return sb.data;
  }
  case TY_TENSOR: break;
  }
  StrBuf sb;
  sb_init(&sb, &c->arena);
  sb_puts(&sb, dtype_name(t->dtype));
  if (t->ndim > 0) {
    sb_putc(&sb, '[');
    for (int d = 0; d < t->ndim; d++) {
      sb_printf(&sb, "%s%s", d ? ", " : "", size_str(c, m, t->shape[d]));
      if (!t->local && t->spec[d][0] >= 0) {
        bool multi = t->spec[d][1] >= 0;
        sb_puts(&sb, multi ? "@(" : "@");
        for (int k = 0; k < MAX_MESH_AXES && t->spec[d][k] >= 0; k++)
          sb_printf(&sb, "%s%s", k ? ", " : "", m->axes[t->spec[d][k]].name);
        if (multi)
          sb_putc(&sb, ')');
      }
    }
    sb_putc(&sb, ']');
  }
  bool open = false;
  for (int a = 0; a < m->naxes; a++) {
    int dim;
    bool sharded = type_spec_has(t, a, &dim);
    if (sharded && !t->local)
      continue;
    if (!sharded && t->lt[a] == LT_NONE)
      continue; /* a written type that leaves this axis open */
    sb_puts(&sb, open ? ", " : "{");
    open = true;
    if (sharded)
      sb_printf(&sb, "%s: S(%d)", m->axes[a].name, dim);
    else
      sb_printf(&sb, "%s: %s", m->axes[a].name, lt_name(t->lt[a]));
  }
  if (open)
    sb_putc(&sb, '}');
  return sb.data;
}

int type_nleaves(const Type *t) {
  if (t->kind != TY_RECORD && t->kind != TY_TUPLE)
    return 1;
  int n = 0;
  for (int i = 0; i < t->nelems; i++)
    n += type_nleaves(t->elems[i]);
  return n;
}

Type *type_leaf(const Type *t, int i) {
  while (t->kind == TY_RECORD || t->kind == TY_TUPLE) {
    int f = 0;
    while (f < t->nelems && i >= type_nleaves(t->elems[f]))
      i -= type_nleaves(t->elems[f++]);
    if (f == t->nelems)
      return type_error();
    t = t->elems[f];
  }
  return (Type *)t;
}

const char *type_leaf_path(Compiler *c, const Type *t, int i, const char *sep) {
  StrBuf sb;
  sb_init(&sb, &c->arena);
  while (t->kind == TY_RECORD || t->kind == TY_TUPLE) {
    int f = 0;
    while (f < t->nelems && i >= type_nleaves(t->elems[f]))
      i -= type_nleaves(t->elems[f++]);
    if (f == t->nelems)
      break;
    if (t->kind == TY_RECORD)
      sb_printf(&sb, "%s%s", sb.len ? sep : "", t->fields[f]);
    else
      sb_printf(&sb, "%s%d", sb.len ? sep : "", f);
    t = t->elems[f];
  }
  return sb.len ? sb.data : "";
}

int type_field(const Type *t, Name name) {
  if (t->kind != TY_RECORD)
    return -1;
  for (int i = 0; i < t->nelems; i++)
    if (t->fields[i] == name)
      return i;
  return -1;
}
