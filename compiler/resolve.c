/* resolve.c: name resolution.  Loads imports, declares every module-level
 * name, then walks each function binding names to Symbols.  Scopes are a
 * hash map from interned name to its current Symbol plus an undo log, so a
 * lookup is O(1) however long a function is.  Every unknown or duplicate
 * name is reported; resolution goes on after an error. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "resolve.h"

/* ops.def's columns, one array each */
const char *const builtin_name[BI_COUNT] = {
#define OP(id, name, cls, named, lo, hi, rule, lowers, flags, dflt) [BI_##id] = name,
#include "ops.def"
#undef OP
};
const char *const builtin_named_args[BI_COUNT] = {
#define OP(id, name, cls, named, lo, hi, rule, lowers, flags, dflt) [BI_##id] = named,
#include "ops.def"
#undef OP
};
const OpClass builtin_class[BI_COUNT] = {
#define OP(id, name, cls, named, lo, hi, rule, lowers, flags, dflt) [BI_##id] = cls,
#include "ops.def"
#undef OP
};
const signed char builtin_min_args[BI_COUNT] = {
#define OP(id, name, cls, named, lo, hi, rule, lowers, flags, dflt) [BI_##id] = lo,
#include "ops.def"
#undef OP
};
const signed char builtin_max_args[BI_COUNT] = {
#define OP(id, name, cls, named, lo, hi, rule, lowers, flags, dflt) [BI_##id] = hi,
#include "ops.def"
#undef OP
};
const unsigned builtin_flags[BI_COUNT] = {
#define OP(id, name, cls, named, lo, hi, rule, lowers, flags, dflt) [BI_##id] = flags,
#include "ops.def"
#undef OP
};
const double builtin_default[BI_COUNT] = {
#define OP(id, name, cls, named, lo, hi, rule, lowers, flags, dflt) [BI_##id] = dflt,
#include "ops.def"
#undef OP
};

/* ---- the name map with an undo log ---- */

typedef struct Binding_ {
  Name name;
  Symbol *sym;
} Slot;

typedef struct Resolver {
  Compiler *c;
  Mesh *mesh;
  Module *mod;
  FnDecl *fn;
  Slot *slots;          /* open addressing, keyed by the Name pointer */
  size_t cap, count;
  Slot *undo;           /* (name, previous symbol) for each bind */
  size_t nundo, capundo;
  int depth;            /* block depth; 0 is module level */
  int lm_level;         /* local_map nesting */
  bool signature;       /* unknown size names become shape variables */
  int parse_errors;     /* errors reported while parsing modules */
  Symbol *builtins[BI_COUNT];
} Resolver;

static size_t name_hash(Name n) { return ((uintptr_t)n >> 4) * 0x9E3779B97F4A7C15ull; }

static Slot *map_slot(Resolver *r, Name n) {
  size_t i = name_hash(n) & (r->cap - 1);
  while (r->slots[i].name && r->slots[i].name != n)
    i = (i + 1) & (r->cap - 1);
  return &r->slots[i];
}

static void map_grow(Resolver *r) {
  Slot *old = r->slots;
  size_t oldcap = r->cap;
  r->cap = oldcap ? oldcap * 2 : 256;
  r->slots = calloc(r->cap, sizeof(Slot));
  if (!r->slots)
    diag_fatal(r->c, "out of memory");
  for (size_t i = 0; i < oldcap; i++)
    if (old[i].name)
      *map_slot(r, old[i].name) = old[i];
  free(old);
}

static Symbol *lookup(Resolver *r, Name n) {
  if (!r->cap)
    return NULL;
  return map_slot(r, n)->sym;
}

/* Binds n to sym until the current scope is left. */
static void bind(Resolver *r, Name n, Symbol *sym) {
  if ((r->count + 1) * 2 > r->cap)
    map_grow(r);
  Slot *s = map_slot(r, n);
  if (!s->name) {
    s->name = n;
    r->count++;
  }
  if (r->nundo == r->capundo) {
    r->capundo = r->capundo ? r->capundo * 2 : 256;
    Slot *u = realloc(r->undo, r->capundo * sizeof(Slot));
    if (!u)
      diag_fatal(r->c, "out of memory");
    r->undo = u;
  }
  r->undo[r->nundo++] = (Slot){n, s->sym};
  s->sym = sym;
}

static size_t scope_enter(Resolver *r) {
  r->depth++;
  return r->nundo;
}

static void scope_leave(Resolver *r, size_t mark) {
  while (r->nundo > mark) {
    Slot u = r->undo[--r->nundo];
    map_slot(r, u.name)->sym = u.sym;
  }
  r->depth--;
}

static Symbol *new_symbol(Resolver *r, SymKind kind, Name name, Span sp) {
  Symbol *s = arena_alloc(&r->c->arena, sizeof(Symbol));
  s->kind = kind;
  s->name = name;
  s->span = sp;
  s->fn = r->fn;
  s->module = r->mod;
  s->index = r->depth; /* for locals: the block depth it was bound at */
  s->lm_level = r->lm_level;
  return s;
}

/* ---- messages ---- */

/* The kind with its article, for "'x' is a constant" / "an axis parameter". */
static const char *a_kind(SymKind k) {
  return k == SYM_AXIS_PARAM ? "an axis parameter" : k == SYM_MODULE ? "a module" :
         k == SYM_AXIS ? "a mesh axis" : k == SYM_CONST ? "a constant" :
         k == SYM_FN ? "a function" : k == SYM_BUILTIN ? "a built-in function" :
         k == SYM_PARAM ? "a parameter" : k == SYM_LOOP ? "a loop index" :
         k == SYM_SHAPEVAR ? "a shape variable" : k == SYM_STRUCT ? "a struct" : "a variable";
}

/* Optimal string alignment distance: edits, with a swap of two neighbours
 * counted as one (`rleu` is one step from `relu`). */
static int edit_distance(const char *a, const char *b) {
  int la = (int)strlen(a), lb = (int)strlen(b);
  if (la > 32 || lb > 32)
    return 99;
  int d[33][33];
  for (int i = 0; i <= la; i++)
    d[i][0] = i;
  for (int j = 0; j <= lb; j++)
    d[0][j] = j;
  for (int i = 1; i <= la; i++)
    for (int j = 1; j <= lb; j++) {
      int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < best)
        best = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < best)
        best = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
        best = d[i - 2][j - 2] + 1;
      d[i][j] = best;
    }
  return d[la][lb];
}

/* The visible name closest to n that `accept` allows, if any is close. */
static Name suggest(Resolver *r, Name n, bool (*accept)(Symbol *)) {
  Name best = NULL;
  int best_d = (int)strlen(n) / 3 + 1;
  if (best_d > 3)
    best_d = 3;
  for (size_t i = 0; i < r->cap; i++) {
    Slot *s = &r->slots[i];
    if (!s->name || !s->sym || (accept && !accept(s->sym)))
      continue;
    int d = edit_distance(n, s->name);
    if (d < best_d || (d == best_d && best && strcmp(s->name, best) < 0)) {
      best_d = d;
      best = s->name;
    }
  }
  return best;
}

static bool is_axis_sym(Symbol *s) { return s->kind == SYM_AXIS || s->kind == SYM_AXIS_PARAM; }

static const char *mesh_axis_list(Resolver *r) {
  StrBuf sb;
  sb_init(&sb, &r->c->arena);
  for (int i = 0; i < r->mesh->naxes; i++)
    sb_printf(&sb, "%s%s", i ? ", " : "", r->mesh->axes[i].name);
  return sb.data;
}

/* "did you mean 'best'?", as a fix replacing the misspelt name at sp when
 * sp is exactly that name. */
static void help_spelling(Resolver *r, Span sp, Name wrong, Name best) {
  SourceFile *f = source_file(r->c, sp.file);
  size_t n = strlen(wrong);
  bool exact = sp.file && sp.end - sp.begin == n && memcmp(f->text + sp.begin, wrong, n) == 0;
  help_fix(r->c, sp, exact ? best : NULL, "did you mean '%s'?", best);
}

/* PyTorch, JAX and NumPy names with what to write here (foreign_names.def). */
static const struct {
  const char *name, *rename, *help;
} foreign_names[] = {
#define FOREIGN(name, rename, help) {name, rename, help},
#include "foreign_names.def"
#undef FOREIGN
};

/* The help for n when it is another library's name: true if given.  The fix
 * replaces `at` (the name, or `torch.name`) when the built-in takes the same
 * arguments. */
static bool help_foreign(Resolver *r, const char *n, Span at) {
  for (size_t i = 0; i < sizeof foreign_names / sizeof *foreign_names; i++)
    if (strcmp(n, foreign_names[i].name) == 0) {
      help_fix(r->c, at, *foreign_names[i].rename ? foreign_names[i].rename : NULL, "%s", foreign_names[i].help);
      return true;
    }
  return false;
}

static void report_undefined(Resolver *r, Name n, Span sp) {
  error_at(r->c, sp, "undefined name '%s'", n);
  if (help_foreign(r, n, sp))
    return;
  Name s = suggest(r, n, NULL);
  if (s)
    help_spelling(r, sp, n, s);
}

/* Module prefixes of other libraries: torch.matmul, jnp.einsum, F.softmax. */
static const char *const foreign_modules[] = {"torch", "F", "functional", "jnp", "np", "numpy",
                                              "lax", "dist", "tf"};

/* `torch.cat(...)`, `jax.lax.psum(...)`: the built-ins have no module; the
 * help names the built-in (or what to write instead) without the prefix.
 * True when e was such a name and is reported. */
static bool report_foreign_member(Resolver *r, Expr *e) {
  Expr *root = e;
  while (root->kind == EX_FIELD)
    root = root->lhs;
  if (root->kind != EX_NAME || lookup(r, root->name))
    return false;
  bool known = false;
  for (size_t i = 0; i < sizeof foreign_modules / sizeof *foreign_modules; i++)
    known |= strcmp(root->name, foreign_modules[i]) == 0;
  if (!known)
    return false;
  error_at(r->c, root->span, "undefined name '%s'", root->name);
  const char *prefix = arena_strndup(&r->c->arena, source_file(r->c, e->span.file)->text + e->span.begin,
                                     e->span.end - e->span.begin - strlen(e->name));
  Symbol *b = lookup(r, e->name);
  if (b && b->kind == SYM_BUILTIN)
    help_fix(r->c, e->span, e->name, "the built-ins have no module prefix: %s(...) without '%s'", e->name, prefix);
  else if (!help_foreign(r, e->name, e->span))
    help(r->c, "the built-ins have no module prefix, and '%s' is none of them (docs/ops.md lists them)", e->name);
  return true;
}

/* PyTorch's and JAX's fused attention: their arguments and layouts differ
 * from attention()'s, so the help rewrites the whole call (a fix replacing
 * it) rather than the name.  PyTorch: scaled_dot_product_attention(query,
 * key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa), the same
 * [B, H, T, E] layout, is_causal=False by default; JAX:
 * dot_product_attention(query, key, value, bias, mask, *, scale, is_causal,
 * ...), [B, T, N, H].  An argument attention() has no counterpart of
 * (a mask, a bias, dropout) leaves the help without a fix. */
static void resolve_expr(Resolver *r, Expr *e);

static const char *span_text(Resolver *r, Span sp) {
  return arena_strndup(&r->c->arena, source_file(r->c, sp.file)->text + sp.begin, sp.end - sp.begin);
}

static bool text_is(const char *t, const char *const *set) {
  for (; *set; set++)
    if (strcmp(t, *set) == 0)
      return true;
  return false;
}

static bool report_foreign_attention(Resolver *r, Expr *call) {
  static const char *const torch_pos[] = {"query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale",
                                          "enable_gqa"};
  static const char *const jax_pos[] = {"query", "key", "value", "bias", "mask"};
  Expr *f = call->lhs;
  if (f->kind != EX_NAME && f->kind != EX_FIELD)
    return false;
  bool torch = strcmp(f->name, "scaled_dot_product_attention") == 0;
  if (!torch && strcmp(f->name, "dot_product_attention") != 0)
    return false;
  Expr *root = f;
  while (root->kind == EX_FIELD)
    root = root->lhs;
  if (root->kind != EX_NAME)
    return false;
  Symbol *rs = lookup(r, root->name);
  if (f->kind == EX_NAME) {
    if (rs)
      return false;
    error_at(r->c, f->span, "undefined name '%s'", f->name);
  } else if (!rs) {
    bool known = strcmp(root->name, "jax") == 0;
    for (size_t i = 0; i < sizeof foreign_modules / sizeof *foreign_modules; i++)
      known |= strcmp(root->name, foreign_modules[i]) == 0;
    if (!known)
      return false;
    error_at(r->c, root->span, "undefined name '%s'", root->name);
  } else {
    /* `import jax;` then jax.nn.dot_product_attention: jax has no nn */
    Expr *first = f;
    while (first->lhs != root)
      first = first->lhs;
    if (rs->kind != SYM_MODULE || module_lookup(rs->module, first->name))
      return false;
    error_at(r->c, first->span, "module '%s' has no function, constant or struct '%s'", rs->name, first->name);
  }
  /* the arguments by their Python names */
  const char *const *pos = torch ? torch_pos : jax_pos;
  int npos = torch ? (int)(sizeof torch_pos / sizeof *torch_pos) : (int)(sizeof jax_pos / sizeof *jax_pos);
  const char *qkv[3] = {NULL, NULL, NULL}, *causal = "false", *scale = NULL, *blocker = NULL;
  int i = 0;
  for (Arg *a = call->args; a; a = a->next) {
    const char *name = a->name ? a->name : i < npos ? pos[i] : "";
    if (!a->name)
      i++;
    const char *t = span_text(r, a->value->span);
    if (strcmp(name, "query") == 0 || strcmp(name, "key") == 0 || strcmp(name, "value") == 0) {
      resolve_expr(r, a->value);
      qkv[name[0] == 'q' ? 0 : name[0] == 'k' ? 1 : 2] = t;
    } else if (strcmp(name, "is_causal") == 0) {
      if (text_is(t, (const char *const[]){"True", "true", NULL}))
        causal = "true";
      else if (!text_is(t, (const char *const[]){"False", "false", NULL}))
        blocker = blocker ? blocker : "is_causal= that is not True or False";
    } else if (strcmp(name, "scale") == 0) {
      if (strcmp(t, "None") != 0) {
        resolve_expr(r, a->value);
        scale = t;
      }
    } else if (strcmp(name, "enable_gqa") == 0 || strcmp(name, "implementation") == 0) {
      ; /* grouped-query heads need no switch here; one implementation */
    } else if (strcmp(name, "dropout_p") == 0) {
      if (!text_is(t, (const char *const[]){"0", "0.0", "0.", NULL}))
        blocker = blocker ? blocker : "dropout_p=";
    } else if (strcmp(t, "None") != 0 || !*name) {
      blocker = blocker ? blocker : *name ? arena_sprintf(&r->c->arena, "%s=", name) : "that many arguments";
    }
  }
  if (!qkv[0] || !qkv[1] || !qkv[2]) {
    help(r->c, "the built-in is attention(q, k, v, causal=true) (or causal=false): docs/ops.md, attention");
    return true;
  }
  StrBuf sb;
  sb_init(&sb, &r->c->arena);
  if (torch)
    sb_printf(&sb, "attention(%s, %s, %s, causal=%s", qkv[0], qkv[1], qkv[2], causal);
  else
    sb_printf(&sb, "permute(attention(permute(%s, [0, 2, 1, 3]), permute(%s, [0, 2, 1, 3]), permute(%s, [0, 2, 1, 3]), "
              "causal=%s", qkv[0], qkv[1], qkv[2], causal);
  if (scale)
    sb_printf(&sb, ", scale=%s", scale);
  sb_puts(&sb, torch ? ")" : "), [0, 2, 1, 3])");
  const char *layout = torch ? "the same [B, H, T, E] layout" : "attention() takes [B, N, T, H], JAX [B, T, N, H]";
  const char *lib = torch ? "PyTorch" : "JAX";
  if (blocker) {
    help(r->c, "attention() has no %s (only causal= and scale=): write it out with einsum, softmax (where(mask, scores, "
         "-1e9) for a mask; dropout) and einsum, or leave it out: %s (%s)", blocker, sb.data, layout);
    return true;
  }
  help_fix(r->c, call->span, sb.data,
           "rewrite the call as %s: %s; causal= is required (%s's is_causal defaults to False), and with more keys "
           "than queries the causal mask is aligned bottom-right (%s's top-left)", sb.data, layout, lib, lib);
  return true;
}

/* ---- mesh axes ---- */

static void resolve_axis(Resolver *r, AxisRef *a) {
  Symbol *s = lookup(r, a->name);
  if (s && is_axis_sym(s)) {
    a->sym = s;
    return;
  }
  if (s)
    error_at(r->c, a->span, "'%s' is %s, not a mesh axis", a->name, a_kind(s->kind));
  else
    error_at(r->c, a->span, "unknown mesh axis '%s'", a->name);
  Name best = suggest(r, a->name, is_axis_sym);
  if (best)
    help_spelling(r, a->span, a->name, best);
  else if (r->mesh->naxes && (!r->mod || r->mod->scope_has_mesh))
    help(r->c, "the mesh axes are: %s", mesh_axis_list(r));
  else if (!r->mesh->declared)
    help(r->c, "declare the mesh first: mesh (%s);", a->name);
  else
    help(r->c, "a module without a mesh names axes through parameters: `%s: axis`", a->name);
}

/* An axis argument written as an expression: `tp` or `(dp, tp)`. */
static void resolve_axis_expr(Resolver *r, Expr *e) {
  if (e->kind == EX_NAME) {
    AxisRef a = {.span = e->span, .name = e->name};
    resolve_axis(r, &a);
    e->sym = a.sym;
  } else if (e->kind == EX_TUPLE) {
    for (Expr *x = e->elems; x; x = x->next)
      resolve_axis_expr(r, x);
  } else {
    error_at(r->c, e->span, "expected a mesh axis or a tuple of mesh axes such as (dp, tp)");
  }
}

/* ---- types ---- */

static void resolve_expr(Resolver *r, Expr *e);

static void resolve_size(Resolver *r, Expr *e, bool rest) {
  if (e->kind == EX_BINARY) {
    resolve_size(r, e->lhs, false);
    resolve_size(r, e->rhs, false);
    return;
  }
  if (e->kind != EX_NAME)
    return;
  Symbol *s = lookup(r, e->name);
  if (s && (s->kind == SYM_CONST || is_axis_sym(s) || s->kind == SYM_SHAPEVAR)) {
    if (rest != (s->kind == SYM_SHAPEVAR && s->is_rest)) {
      if (rest)
        error_at(r->c, e->span, "'..%s' needs a shape variable, but '%s' is %s", e->name,
                 e->name, a_kind(s->kind));
      else
        error_at(r->c, e->span, "'%s' stands for several dims; write it as '..%s'", e->name,
                 e->name);
    }
    e->sym = s;
    return;
  }
  if (!s && r->signature) {
    s = new_symbol(r, SYM_SHAPEVAR, e->name, e->span);
    s->is_rest = rest;
    bind(r, e->name, s);
    e->sym = s;
    return;
  }
  if (s) {
    error_at(r->c, e->span, "'%s' is %s; a size must be a constant, a mesh axis or a shape variable",
             e->name, a_kind(s->kind));
    return;
  }
  error_at(r->c, e->span, "unknown size '%s'", e->name);
  if (r->fn)
    help(r->c, "sizes in a function body are constants, mesh axes, or names bound by the signature of '%s'",
         r->fn->name);
  else
    help(r->c, "declare it: const %s = ...;", e->name);
}

static bool is_struct_sym(Symbol *s) { return s->kind == SYM_STRUCT; }

/* A struct's name used as a type: `Model` or `nn.Model`. */
static void resolve_struct_name(Resolver *r, TypeExpr *t) {
  Symbol *s;
  if (t->struct_module) {
    Symbol *m = lookup(r, t->struct_module);
    if (!m || m->kind != SYM_MODULE) {
      if (m)
        error_at(r->c, t->span, "'%s' is %s, not a module", t->struct_module, a_kind(m->kind));
      else
        error_at(r->c, t->span, "unknown module '%s'", t->struct_module);
      return;
    }
    s = module_lookup(m->module, t->struct_name);
    if (!s || s->kind != SYM_STRUCT) {
      error_at(r->c, t->span, "module '%s' has no struct '%s'", t->struct_module, t->struct_name);
      return;
    }
  } else {
    s = lookup(r, t->struct_name);
    if (!s || s->kind != SYM_STRUCT) {
      if (s)
        error_at(r->c, t->span, "'%s' is %s, not a type", t->struct_name, a_kind(s->kind));
      else
        error_at(r->c, t->span, "unknown type '%s'", t->struct_name);
      Name best = suggest(r, t->struct_name, is_struct_sym);
      if (best)
        help(r->c, "did you mean '%s'?", best);
      else
        help(r->c, "a type is a tensor type such as f32[4, 8]{dp: R}, or the name of a struct");
      return;
    }
  }
  t->sym = s;
}

static void resolve_type(Resolver *r, TypeExpr *t) {
  if (t->is_axis)
    return;
  if (t->struct_name) {
    resolve_struct_name(r, t);
    return;
  }
  for (Dim *d = t->dims; d; d = d->next) {
    resolve_size(r, d->size, d->rest);
    for (AxisRef *a = d->axes; a; a = a->next)
      resolve_axis(r, a);
  }
  for (AxisEntry *e = t->entries; e; e = e->next)
    if (e->axis)
      resolve_axis(r, e->axis);
}

/* ---- expressions ---- */

static bool call_takes_axes(Expr *call) {
  Symbol *s = call->lhs->sym;
  return s && s->kind == SYM_BUILTIN && builtin_class[s->index] == OPC_COLLECTIVE;
}

static bool calls_builtin(Expr *call) { return call->lhs->sym && call->lhs->sym->kind == SYM_BUILTIN; }

static void resolve_call(Resolver *r, Expr *e) {
  if (report_foreign_attention(r, e))
    return;
  resolve_expr(r, e->lhs);
  int pos = 0;
  for (Arg *a = e->args; a; a = a->next) {
    if (a->name) {
      if (calls_builtin(e) && (a->name == intern_cstr(r->c, "out_partial_axes") ||
                               (a->name == intern_cstr(r->c, "axes") && call_takes_axes(e))))
        resolve_axis_expr(r, a->value);
      else if (calls_builtin(e) && a->name == intern_cstr(r->c, "op") && a->value->kind == EX_NAME)
        ; /* op=sum|avg|max|min: a keyword, checked by the type checker */
      else
        resolve_expr(r, a->value);
      continue;
    }
    if (pos++ == 1 && call_takes_axes(e) && a->value->kind != EX_TYPE)
      resolve_axis_expr(r, a->value);
    else
      resolve_expr(r, a->value);
  }
}

/* `module.name` names a member of an imported module (e->sym); any other
 * `x.name` reads a field of a record, which the checker resolves. */
static void resolve_field(Resolver *r, Expr *e) {
  Symbol *m = e->lhs->kind == EX_NAME ? lookup(r, e->lhs->name) : NULL;
  if (!m || m->kind != SYM_MODULE) {
    if (!m && report_foreign_member(r, e))
      return;
    resolve_expr(r, e->lhs);
    return;
  }
  e->lhs->sym = m;
  Symbol *s = module_lookup(m->module, e->name);
  if (!s || (s->kind != SYM_FN && s->kind != SYM_CONST && s->kind != SYM_STRUCT)) {
    error_at(r->c, e->span, "module '%s' has no function, constant or struct '%s'", m->name, e->name);
    return;
  }
  e->sym = s;
}

static void resolve_block(Resolver *r, Stmt *block);

static void resolve_local_map(Resolver *r, Expr *e) {
  for (AxisRef *a = e->lm_over; a; a = a->next)
    resolve_axis(r, a);
  for (AxisRef *v = e->lm_vars; v; v = v->next) /* the boundary's types, outside the block */
    if (v->type)
      resolve_type(r, v->type);
  if (e->lm_ret)
    resolve_type(r, e->lm_ret);
  size_t mark = scope_enter(r);
  for (AxisRef *v = e->lm_vars; v; v = v->next) {
    Symbol *s = lookup(r, v->name);
    if (!s || (s->kind != SYM_PARAM && s->kind != SYM_LET && s->kind != SYM_VAR)) {
      if (s)
        error_at(r->c, v->span, "local_map takes variables, but '%s' is %s", v->name,
                 a_kind(s->kind));
      else
        report_undefined(r, v->name, v->span);
      continue;
    }
    for (AxisRef *w = e->lm_vars; w != v; w = w->next)
      if (w->name == v->name)
        error_at(r->c, v->span, "'%s' is listed twice", v->name);
    v->sym = s;
  }
  r->lm_level++;
  for (AxisRef *v = e->lm_vars; v; v = v->next) {
    if (!v->sym)
      continue;
    Symbol *s = new_symbol(r, SYM_LET, v->name, v->span);
    s->outer = v->sym;
    bind(r, v->name, s);
  }
  resolve_block(r, e->body);
  r->lm_level--;
  scope_leave(r, mark);
}

static void resolve_expr(Resolver *r, Expr *e) {
  switch (e->kind) {
  case EX_INT:
  case EX_FLOAT:
  case EX_STRING:
  case EX_BOOL:
  case EX_ERROR:
  case EX_LEAF:
    return;
  case EX_NAME: {
    Symbol *s = lookup(r, e->name);
    if (!s)
      report_undefined(r, e->name, e->span);
    e->sym = s;
    return;
  }
  case EX_LTYPE:
    if (e->lhs)
      resolve_expr(r, e->lhs);
    return;
  case EX_TYPE: resolve_type(r, e->type); return;
  case EX_UNARY: resolve_expr(r, e->lhs); return;
  case EX_BINARY:
  case EX_INDEX:
    resolve_expr(r, e->lhs);
    resolve_expr(r, e->rhs);
    return;
  case EX_CALL: resolve_call(r, e); return;
  case EX_FIELD: resolve_field(r, e); return;
  case EX_TUPLE:
  case EX_LIST:
    for (Expr *x = e->elems; x; x = x->next)
      resolve_expr(r, x);
    return;
  case EX_LOCAL_MAP: resolve_local_map(r, e); return;
  }
}

/* ---- statements ---- */

static void bind_targets(Resolver *r, Binding *targets, SymKind kind) {
  for (Binding *b = targets; b; b = b->next) {
    for (Binding *p = targets; p != b; p = p->next)
      if (p->name == b->name) {
        error_at(r->c, b->span, "'%s' is bound twice in one statement", b->name);
        note_at(r->c, p->span, "first bound here");
      }
    Symbol *old = lookup(r, b->name);
    /* a local may shadow a built-in function (`let full = ...`), not an axis */
    if (old && (old->kind == SYM_AXIS || old->kind == SYM_AXIS_PARAM)) {
      error_at(r->c, b->span, "'%s' is %s and cannot be used as a variable name", b->name,
               a_kind(old->kind));
      continue;
    }
    b->sym = new_symbol(r, kind, b->name, b->span);
    bind(r, b->name, b->sym);
  }
}

/* One variable assigned by `x = e;` or `a, b = e;`. */
static void resolve_assign_target(Resolver *r, Binding *b) {
  Symbol *sym = lookup(r, b->name);
  b->sym = sym;
  if (!sym) {
    report_undefined(r, b->name, b->span);
  } else if (sym->kind != SYM_VAR) {
    error_at(r->c, b->span, "cannot assign to '%s': it is %s%s", b->name,
             a_kind(sym->kind), sym->kind == SYM_LET ? " declared with 'let'" : "");
    if (sym->kind == SYM_LET && sym->span.file) {
      note_at(r->c, sym->span, "'%s' is declared here", b->name);
      help(r->c, "declare it with 'var' to make it assignable: var %s = ...;", b->name);
    }
  } else if (sym->lm_level < r->lm_level) {
    error_at(r->c, b->span, "cannot assign to '%s' inside local_map: it belongs to the enclosing code",
             b->name);
    help(r->c, "return the new value from the local_map block instead");
  }
}

static void resolve_stmt(Resolver *r, Stmt *s) {
  switch (s->kind) {
  case ST_LET:
  case ST_VAR:
    resolve_expr(r, s->value);
    if (s->type)
      resolve_type(r, s->type);
    bind_targets(r, s->targets, s->kind == ST_LET ? SYM_LET : SYM_VAR);
    if (s->kind == ST_LET && s->targets && !s->targets->next && s->targets->sym)
      s->targets->sym->def = s->value;
    return;
  case ST_ASSIGN:
    resolve_expr(r, s->value);
    for (Binding *b = s->targets; b; b = b->next) {
      for (Binding *p = s->targets; p != b; p = p->next)
        if (p->name == b->name) {
          error_at(r->c, b->span, "'%s' is assigned twice in one statement", b->name);
          note_at(r->c, p->span, "first assigned here");
        }
      resolve_assign_target(r, b);
    }
    return;
  case ST_RETURN:
    for (Expr *e = s->value; e; e = e->next)
      resolve_expr(r, e);
    return;
  case ST_EXPR: resolve_expr(r, s->value); return;
  case ST_FOR: {
    resolve_expr(r, s->lo);
    resolve_expr(r, s->hi);
    size_t mark = scope_enter(r);
    bind_targets(r, s->targets, SYM_LOOP);
    resolve_block(r, s->then);
    scope_leave(r, mark);
    return;
  }
  case ST_IF:
    resolve_expr(r, s->cond);
    resolve_block(r, s->then);
    if (s->els)
      resolve_block(r, s->els);
    return;
  case ST_BLOCK: resolve_block(r, s); return;
  }
}

static void resolve_block(Resolver *r, Stmt *block) {
  if (block->kind != ST_BLOCK) { /* `else if` */
    resolve_stmt(r, block);
    return;
  }
  size_t mark = scope_enter(r);
  for (Stmt *s = block->body; s; s = s->next)
    resolve_stmt(r, s);
  scope_leave(r, mark);
}

/* ---- functions ---- */

static void resolve_fn(Resolver *r, FnDecl *fn) {
  r->fn = fn;
  size_t mark = scope_enter(r);
  /* Axis parameters first: any parameter's type may use them. */
  for (Param *p = fn->params; p; p = p->next) {
    for (Param *q = fn->params; q != p; q = q->next)
      if (q->name->name == p->name->name) {
        error_at(r->c, p->name->span, "duplicate parameter '%s'", p->name->name);
        note_at(r->c, q->name->span, "'%s' is first declared here", q->name->name);
      }
    if (!p->type || !p->type->is_axis)
      continue;
    Symbol *s = new_symbol(r, SYM_AXIS_PARAM, p->name->name, p->name->span);
    p->name->sym = s;
    bind(r, s->name, s);
  }
  r->signature = true;
  for (Param *p = fn->params; p; p = p->next)
    if (p->type)
      resolve_type(r, p->type);
  for (TypeExpr *t = fn->ret; t; t = t->next)
    resolve_type(r, t);
  r->signature = false;
  for (Param *p = fn->params; p; p = p->next) {
    if (p->type && p->type->is_axis)
      continue;
    Symbol *s = new_symbol(r, SYM_PARAM, p->name->name, p->name->span);
    Symbol *old = lookup(r, s->name);
    if (old && (old->kind == SYM_SHAPEVAR) && old->fn == fn)
      error_at(r->c, p->name->span, "'%s' is used as a size in this signature and cannot also name a parameter", s->name);
    p->name->sym = s;
    bind(r, s->name, s);
  }
  resolve_block(r, fn->body);
  scope_leave(r, mark);
  r->fn = NULL;
}

/* ---- structs ---- */

/* Field types are tensor types whose sizes are constants and mesh axes (no
 * shape variables), or other structs' names. */
static void resolve_struct(Resolver *r, StructDecl *st) {
  for (StructField *f = st->fields; f; f = f->next) {
    for (StructField *g = st->fields; g != f; g = g->next)
      if (g->name == f->name) {
        error_at(r->c, f->name_span, "struct '%s' has two fields named '%s'", st->name, f->name);
        note_at(r->c, g->name_span, "the first is declared here");
        break;
      }
    resolve_type(r, f->type);
  }
}

/* A struct that contains itself (directly or through others) would be
 * infinitely large.  `via` is the field being followed, for the message. */
static bool struct_cycle(Resolver *r, StructDecl *st, StructDecl *owner, StructField *via) {
  if (st->state == 2)
    return false;
  if (st->state == 1) {
    if (owner == st)
      error_at(r->c, via->span, "struct '%s' contains itself through field '%s'", st->name, via->name);
    else
      error_at(r->c, via->span, "struct '%s' contains itself through field '%s.%s'", st->name, owner->name, via->name);
    help(r->c, "a record cannot hold a record of its own struct");
    return true;
  }
  st->state = 1;
  bool cyc = false;
  for (StructField *f = st->fields; f && !cyc; f = f->next)
    if (f->type->sym && f->type->sym->kind == SYM_STRUCT)
      cyc = struct_cycle(r, f->type->sym->st, st, f);
  st->state = 2;
  return cyc;
}

/* ---- constants ---- */

static bool const_value(Resolver *r, Expr *e, bool *is_float, long long *iv, double *fv);

static bool eval_symbol(Resolver *r, Symbol *s, Span use) {
  if (s->evaluated)
    return true;
  if (s->eval_failed) /* reported once, where it failed */
    return false;
  if (s->evaluating) {
    error_at(r->c, use, "constant '%s' is defined in terms of itself", s->name);
    return false;
  }
  s->evaluating = true;
  Resolver sub = *r;
  bool ok = const_value(&sub, s->item->value, &s->is_float, &s->ival, &s->fval);
  s->evaluating = false;
  s->evaluated = ok;
  s->eval_failed = !ok;
  return ok;
}

/* l op r on constants: integers stay exact (an overflow is an error, not
 * undefined behaviour), floats follow C; division by zero is an error. */
static bool const_binary(Resolver *r, Expr *e, long long li, long long ri, double ld, double rd,
                         bool is_float, long long *iv, double *fv) {
  bool over = false;
  switch (e->op) {
  case OP_ADD: over = __builtin_add_overflow(li, ri, iv); *fv = ld + rd; break;
  case OP_SUB: over = __builtin_sub_overflow(li, ri, iv); *fv = ld - rd; break;
  case OP_MUL: over = __builtin_mul_overflow(li, ri, iv); *fv = ld * rd; break;
  case OP_DIV:
  case OP_MOD:
    if (e->op == OP_MOD && is_float) {
      error_at(r->c, e->span, "'%%' needs integer constants");
      return false;
    }
    if (is_float ? rd == 0.0 : ri == 0) {
      error_at(r->c, e->span, "division by zero in a constant");
      return false;
    }
    if (!is_float && li == -__LONG_LONG_MAX__ - 1 && ri == -1) {
      over = true;
      break;
    }
    *iv = is_float ? 0 : e->op == OP_MOD ? li % ri : li / ri;
    *fv = e->op == OP_DIV ? ld / rd : (double)*iv;
    break;
  default:
    error_at(r->c, e->span, "a constant must be a number or arithmetic (+ - * / %%) on numbers and other constants");
    return false;
  }
  if (over && !is_float) {
    error_at(r->c, e->span, "integer overflow in a constant");
    return false;
  }
  return true;
}

static bool const_value(Resolver *r, Expr *e, bool *is_float, long long *iv, double *fv) {
  *is_float = false;
  *iv = 0;
  *fv = 0;
  switch (e->kind) {
  case EX_INT: *iv = e->ival; *fv = (double)e->ival; return true;
  case EX_FLOAT: *is_float = true; *fv = e->fval; return true;
  case EX_NAME:
  case EX_FIELD: {
    Symbol *s = e->sym;
    if (!s)
      return false;
    if (s->kind != SYM_CONST) {
      error_at(r->c, e->span, "'%s' is %s, not a constant", s->name, a_kind(s->kind));
      return false;
    }
    if (!eval_symbol(r, s, e->span))
      return false;
    *is_float = s->is_float;
    *iv = s->ival;
    *fv = s->fval;
    return true;
  }
  case EX_UNARY:
    if (e->op != OP_NEG)
      break;
    if (!const_value(r, e->lhs, is_float, iv, fv))
      return false;
    if (*iv == -__LONG_LONG_MAX__ - 1 && !*is_float) {
      error_at(r->c, e->span, "integer overflow in a constant");
      return false;
    }
    *iv = -*iv;
    *fv = -*fv;
    return true;
  case EX_BINARY: {
    bool lf, rf;
    long long li, ri;
    double ld, rd;
    if (!const_value(r, e->lhs, &lf, &li, &ld) || !const_value(r, e->rhs, &rf, &ri, &rd))
      return false;
    *is_float = lf || rf;
    return const_binary(r, e, li, ri, ld, rd, *is_float, iv, fv);
  }
  default: break;
  }
  error_at(r->c, e->span, "a constant must be a number or arithmetic (+ - * / %%) on numbers and other constants");
  return false;
}

/* ---- modules ---- */

Symbol *module_lookup(Module *m, Name name) {
  for (Symbol *s = m->scope; s; s = s->next)
    if (s->name == name)
      return s;
  return NULL;
}

static void declare(Resolver *r, Module *m, Symbol *s) {
  Symbol *old = NULL;
  for (Symbol *t = m->scope; t && !old; t = t->next)
    if (t->name == s->name)
      old = t;
  if (old) {
    error_at(r->c, s->span, "'%s' is already defined as %s", s->name, a_kind(old->kind));
    note_at(r->c, old->span, "'%s' is first defined here", s->name);
    return;
  }
  if (s->kind != SYM_AXIS && s->kind != SYM_MODULE) {
    for (int i = 0; i < BI_COUNT; i++)
      if (builtin_name[i] == s->name || strcmp(builtin_name[i], s->name) == 0) {
        error_at(r->c, s->span, "'%s' is the name of a built-in function", s->name);
        help(r->c, "choose another name, such as my_%s", s->name);
        return;
      }
  }
  s->next = m->scope;
  m->scope = s;
}

static const char *dir_of(Arena *a, const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? arena_strndup(a, path, (size_t)(slash - path)) : ".";
}

static Module *load_module(Resolver *r, const char *path, Name name, bool *missing);

static Module *find_module(Resolver *r, Item *imp, Module *from) {
  Compiler *c = r->c;
  const char *dirs[130];
  int nd = 0;
  dirs[nd++] = dir_of(&c->arena, source_file(c, (uint32_t)from->file)->path);
  for (int i = 0; i < c->ninclude && nd < 128; i++)
    dirs[nd++] = c->include_dirs[i];
  if (c->stdlib_dir)
    dirs[nd++] = c->stdlib_dir;
  for (int i = 0; i < nd; i++) {
    const char *path = arena_sprintf(&c->arena, "%s/%s.spmd", dirs[i], imp->name);
    for (Module *m = c->modules; m; m = m->next)
      if (strcmp(source_file(c, (uint32_t)m->file)->path, path) == 0)
        return m;
    bool missing;
    Module *m = load_module(r, path, imp->name, &missing);
    if (m || !missing)
      return m;
  }
  error_at(c, imp->name_span, "cannot find module '%s'", imp->name);
  StrBuf sb;
  sb_init(&sb, &c->arena);
  for (int i = 0; i < nd; i++)
    sb_printf(&sb, "%s%s", i ? ", " : "", dirs[i]);
  note_at(c, (Span){0, 0, 0}, "looked for %s.spmd in: %s", imp->name, sb.data);
  help(c, "add the directory that holds %s.spmd with -I DIR", imp->name);
  return NULL;
}

static Module *load_module(Resolver *r, const char *path, Name name, bool *missing) {
  Compiler *c = r->c;
  *missing = false;
  int file = source_load(c, path);
  if (!file) {
    *missing = errno == ENOENT || errno == ENOTDIR;
    if (!*missing)
      error_at(c, (Span){0, 0, 0}, "cannot read '%s': %s", path, strerror(errno));
    return NULL;
  }
  int before = c->nerrors;
  Module *m = parse_file(c, file, name);
  r->parse_errors += c->nerrors - before;
  /* append, keeping the main module first */
  Module **tail = &c->modules;
  while (*tail)
    tail = &(*tail)->next;
  *tail = m;
  return m;
}

static void declare_mesh(Resolver *r, Module *m, Item *it, bool is_main) {
  Mesh *mesh = r->mesh;
  if (m->scope_has_mesh) {
    error_at(r->c, it->span, "a module declares at most one mesh");
    return;
  }
  m->scope_has_mesh = true;
  int i = 0;
  for (MeshAxisDecl *a = it->axes; a; a = a->next, i++) {
    bool twice = false;
    for (MeshAxisDecl *b = it->axes; b != a && !twice; b = b->next)
      if (b->name == a->name) {
        error_at(r->c, a->span, "mesh axis '%s' is declared twice", a->name);
        note_at(r->c, b->span, "first declared here");
        twice = true;
      }
    if (i >= MAX_MESH_AXES) {
      error_at(r->c, a->span, "a mesh has at most %d axes", MAX_MESH_AXES);
      break;
    }
    if (is_main) {
      mesh->axes[i] = (MeshAxis){a->name, a->span, 0};
    } else if (i >= mesh->naxes || mesh->axes[i].name != a->name) {
      error_at(r->c, it->span, "module '%s' declares a mesh that differs from the program's", m->name);
      note_at(r->c, mesh->span, "the program's mesh is declared here");
      help(r->c, "declare the same mesh axes in the same order, or take axes as parameters (`ax: axis`)");
      return;
    }
    Symbol *s = arena_alloc(&r->c->arena, sizeof(Symbol));
    s->kind = SYM_AXIS;
    s->name = a->name;
    s->span = a->span;
    s->index = i;
    s->module = m;
    if (!twice)
      declare(r, m, s);
  }
  if (is_main) {
    mesh->naxes = i < MAX_MESH_AXES ? i : MAX_MESH_AXES;
    mesh->span = it->span;
    mesh->declared = true;
  }
}

static void declare_items(Resolver *r, Module *m) {
  bool is_main = m == r->c->main;
  for (Item *it = m->items; it; it = it->next) {
    if (it->kind == IT_MESH) {
      declare_mesh(r, m, it, is_main);
      continue;
    }
    Symbol *s = arena_alloc(&r->c->arena, sizeof(Symbol));
    s->item = it;
    s->module = m;
    switch (it->kind) {
    case IT_IMPORT: {
      s->kind = SYM_MODULE;
      s->name = it->name;
      s->span = it->name_span;
      s->module = find_module(r, it, m);
      if (!s->module)
        continue;
      break;
    }
    case IT_CONST:
      s->kind = SYM_CONST;
      s->name = it->name;
      s->span = it->name_span;
      for (Define *d = r->c->defines; d; d = d->next)
        if (strcmp(d->name, it->name) == 0) {
          it->value = d->expr;
          d->used = true;
        }
      break;
    case IT_FN:
      s->kind = SYM_FN;
      s->name = it->fn->name;
      s->span = it->fn->name_span;
      s->fn = it->fn;
      it->fn->module = m;
      break;
    case IT_STRUCT:
      s->kind = SYM_STRUCT;
      s->name = it->st->name;
      s->span = it->st->name_span;
      s->st = it->st;
      it->st->module = m;
      break;
    case IT_MESH: break;
    }
    declare(r, m, s);
  }
}

/* Makes the module's own names (and the built-ins) the visible ones. */
static void enter_module(Resolver *r, Module *m) {
  scope_leave(r, 0);
  r->depth = 0;
  for (int i = 0; i < BI_COUNT; i++)
    bind(r, r->builtins[i]->name, r->builtins[i]);
  for (Symbol *s = m->scope; s; s = s->next)
    bind(r, s->name, s);
  r->mod = m;
}

static void check_mesh_sizes(Resolver *r) {
  Module *m = r->c->main;
  int omitted = 0;
  for (Item *it = m->items; it; it = it->next) {
    if (it->kind != IT_MESH)
      continue;
    int i = 0;
    for (MeshAxisDecl *a = it->axes; a && i < r->mesh->naxes; a = a->next, i++) {
      if (!a->size) {
        if (++omitted == 2) {
          error_at(r->c, a->span, "at most one mesh axis size may be omitted");
          help(r->c, "give a size, as in `%s: 2`; the omitted one is inferred from the number of ranks", a->name);
        }
        continue;
      }
      bool f;
      long long iv;
      double fv;
      if (!const_value(r, a->size, &f, &iv, &fv))
        continue;
      if (f || iv < 1) {
        error_at(r->c, a->size->span, "mesh axis size must be a positive integer");
        continue;
      }
      r->mesh->axes[i].size = iv;
    }
    break;
  }
}

bool resolve_program(Compiler *c, const char *path, Mesh *mesh) {
  memset(mesh, 0, sizeof *mesh);
  int file = source_load(c, path);
  if (!file) {
    diag_tool_error(c, "cannot read '%s': %s", path, strerror(errno));
    c->nerrors++;
    return false;
  }
  return resolve_source(c, file, mesh);
}

bool resolve_source(Compiler *c, int file, Mesh *mesh) {
  int before = c->nerrors;
  Resolver rs = {.c = c, .mesh = mesh};
  Resolver *r = &rs;
  memset(mesh, 0, sizeof *mesh);
  for (int i = 0; i < BI_COUNT; i++) {
    Symbol *s = arena_alloc(&c->arena, sizeof(Symbol));
    s->kind = SYM_BUILTIN;
    s->name = intern_cstr(c, builtin_name[i]);
    s->index = i;
    r->builtins[i] = s;
  }
  const char *path = source_file(c, (uint32_t)file)->path;
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  const char *dot = strrchr(base, '.');
  c->main = c->modules = parse_file(c, file, intern(c, base, dot ? (size_t)(dot - base) : strlen(base)));
  r->parse_errors += c->nerrors - before;
  /* Declaring a module may load more modules; they are appended to the list. */
  for (Module *m = c->modules; m; m = m->next)
    declare_items(r, m);
  /* A statement that failed to parse leaves its names unbound: resolving
   * the rest would only report the consequences of the syntax errors. */
  if (r->parse_errors > 0) {
    free(r->slots);
    free(r->undo);
    return false;
  }
  /* Constants may refer to each other in any order and across modules:
   * resolve all of them before evaluating any. */
  for (Module *m = c->modules; m; m = m->next) {
    enter_module(r, m);
    for (Item *it = m->items; it; it = it->next)
      if (it->kind == IT_CONST)
        resolve_expr(r, it->value);
  }
  for (Module *m = c->modules; m; m = m->next) {
    enter_module(r, m);
    for (Item *it = m->items; it; it = it->next) {
      Symbol *s = it->kind == IT_CONST ? module_lookup(m, it->name) : NULL;
      if (s && s->kind == SYM_CONST && s->item == it)
        eval_symbol(r, s, it->span);
    }
    if (m == c->main)
      check_mesh_sizes(r);
    for (Item *it = m->items; it; it = it->next)
      if (it->kind == IT_STRUCT)
        resolve_struct(r, it->st);
  }
  for (Module *m = c->modules; m; m = m->next)
    for (Item *it = m->items; it; it = it->next)
      if (it->kind == IT_STRUCT)
        struct_cycle(r, it->st, NULL, NULL);
  for (Module *m = c->modules; m; m = m->next) {
    enter_module(r, m);
    for (Item *it = m->items; it; it = it->next)
      if (it->kind == IT_FN)
        resolve_fn(r, it->fn);
  }
  free(r->slots);
  free(r->undo);
  return c->nerrors == before;
}
