/* ast.c: constructors for expression nodes and the --dump-ast printer.
 * The dump is stable text used by golden tests: one node per line for
 * declarations and statements, expressions as one-line S-expressions. */
#include <stdlib.h>
#include <string.h>

#include "ast.h"

const char *const op_spelling[OP_COUNT] = {
#define X(op, s) [op] = s,
    BINARY_OPS(X)
#undef X
};

Expr *ast_expr(Compiler *c, ExprKind kind, Span sp) {
  Expr *e = arena_alloc(&c->arena, sizeof(Expr));
  e->kind = kind;
  e->span = sp;
  e->depth = 1;
  return e;
}

/* The depth of a node is bounded so that no later, recursive phase can run
 * out of stack on a long chain such as a+a+...+a or f(x)(x)...(x). */
Expr *ast_bound(Compiler *c, Expr *e) {
  if (e->depth <= MAX_EXPR_DEPTH)
    return e;
  if (e->depth == MAX_EXPR_DEPTH + 1)
    error_at(c, e->span, "expression is nested too deeply (more than %d levels)", MAX_EXPR_DEPTH);
  Expr *err = ast_expr(c, EX_ERROR, e->span);
  err->depth = MAX_EXPR_DEPTH + 2;
  return err;
}

Expr *ast_binary(Compiler *c, OpKind op, Expr *l, Expr *r, Span sp) {
  Expr *e = ast_expr(c, EX_BINARY, sp);
  e->op = op;
  e->lhs = l;
  e->rhs = r;
  e->depth = 1 + (l->depth > r->depth ? l->depth : r->depth);
  return ast_bound(c, e);
}

Expr *ast_unary(Compiler *c, OpKind op, Expr *x, Span sp) {
  Expr *e = ast_expr(c, EX_UNARY, sp);
  e->op = op;
  e->lhs = x;
  e->depth = 1 + x->depth;
  return ast_bound(c, e);
}

/* The positional argument pos (0, 1, ...) of a call, or NULL. */
Arg *call_arg(Expr *call, int pos) {
  for (Arg *a = call->args; a; a = a->next)
    if (!a->name && pos-- == 0)
      return a;
  return NULL;
}

const char *dtype_name(DType dt) {
  switch (dt) {
  case DT_F32: return "f32";
  case DT_F64: return "f64";
  case DT_I32: return "i32";
  case DT_BF16: return "bf16";
  default: return "?";
  }
}

const char *ast_ltype_str(LType lt) {
  static const char *const names[] = {"?", "R", "I", "V", "P"};
  static _Thread_local char buf[24];
  if (lt.kind != LT_S)
    return names[lt.kind];
  snprintf(buf, sizeof buf, "S(%d)", lt.sdim);
  return buf;
}

/* ---- printing written types ---- */

static void size_str(StrBuf *sb, Expr *e, int parent_prec) {
  if (e->kind == EX_INT) {
    sb_printf(sb, "%lld", e->ival);
  } else if (e->kind == EX_NAME) {
    sb_puts(sb, e->name);
  } else if (e->kind == EX_BINARY) {
    int prec = e->op == OP_MUL || e->op == OP_DIV ? 2 : 1;
    if (prec < parent_prec)
      sb_putc(sb, '(');
    size_str(sb, e->lhs, prec);
    sb_puts(sb, op_spelling[e->op]);
    size_str(sb, e->rhs, prec + 1);
    if (prec < parent_prec)
      sb_putc(sb, ')');
  } else {
    sb_putc(sb, '?');
  }
}

static void axes_str(StrBuf *sb, AxisRef *a) {
  if (a && a->next)
    sb_putc(sb, '(');
  for (; a; a = a->next)
    sb_printf(sb, "%s%s", a->name, a->next ? ", " : "");
}

const char *ast_type_str(Compiler *c, TypeExpr *t) {
  StrBuf sb;
  sb_init(&sb, &c->arena);
  if (t->is_axis) {
    sb_puts(&sb, "axis");
    return sb.data;
  }
  if (t->struct_name) {
    if (t->struct_module)
      sb_printf(&sb, "%s.", t->struct_module);
    sb_puts(&sb, t->struct_name);
    return sb.data;
  }
  sb_puts(&sb, dtype_name(t->dtype));
  if (t->has_dims) {
    sb_putc(&sb, '[');
    for (Dim *d = t->dims; d; d = d->next) {
      if (d->rest)
        sb_puts(&sb, "..");
      size_str(&sb, d->size, 0);
      if (d->axes) {
        sb_putc(&sb, '@');
        axes_str(&sb, d->axes);
        if (d->axes->next)
          sb_putc(&sb, ')');
      }
      if (d->next)
        sb_puts(&sb, ", ");
    }
    sb_putc(&sb, ']');
  }
  if (t->entries) {
    sb_putc(&sb, '{');
    for (AxisEntry *e = t->entries; e; e = e->next)
      sb_printf(&sb, "%s: %s%s", e->axis ? e->axis->name : "*", ast_ltype_str(e->lt),
                e->next ? ", " : "");
    sb_putc(&sb, '}');
  }
  return sb.data;
}

/* ---- --dump-ast ---- */

typedef struct Dumper {
  Compiler *c;
  FILE *out;
  StrBuf sb;
  int indent;  /* of the statement being printed, for local_map bodies */
} Dumper;

static void dump_expr(Dumper *d, Expr *e);

static void dump_args(Dumper *d, Arg *a) {
  for (; a; a = a->next) {
    sb_putc(&d->sb, ' ');
    if (a->name)
      sb_printf(&d->sb, "%s=", a->name);
    dump_expr(d, a->value);
  }
}

static void dump_string(StrBuf *sb, const char *s, size_t n) {
  sb_putc(sb, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\')
      sb_printf(sb, "\\%c", ch);
    else if (ch == '\n')
      sb_puts(sb, "\\n");
    else if (ch < 0x20 || ch == 0x7f)
      sb_printf(sb, "\\x%02x", ch);
    else
      sb_putc(sb, (char)ch);
  }
  sb_putc(sb, '"');
}

static void dump_list(Dumper *d, const char *tag, Expr *elems) {
  sb_printf(&d->sb, "(%s", tag);
  for (Expr *x = elems; x; x = x->next) {
    sb_putc(&d->sb, ' ');
    dump_expr(d, x);
  }
  sb_putc(&d->sb, ')');
}

static void dump_stmts(Dumper *d, Stmt *s, int indent);

static void dump_expr(Dumper *d, Expr *e) {
  StrBuf *sb = &d->sb;
  switch (e->kind) {
  case EX_INT: sb_printf(sb, "%lld", e->ival); break;
  case EX_FLOAT: {
    char buf[32];
    for (int prec = 15; prec <= 17; prec++) { /* the shortest text that reads back exactly */
      snprintf(buf, sizeof buf, "%.*g", prec, e->fval);
      if (strtod(buf, NULL) == e->fval)
        break;
    }
    sb_printf(sb, "%s%s", buf, strpbrk(buf, ".eEni") ? "" : ".0");
    break;
  }
  case EX_STRING: dump_string(sb, e->str, e->slen); break;
  case EX_BOOL: sb_puts(sb, e->ival ? "true" : "false"); break;
  case EX_NAME: sb_puts(sb, e->name); break;
  case EX_LTYPE:
    if (e->lt.kind == LT_S) {
      sb_puts(sb, "(S ");
      dump_expr(d, e->lhs);
      sb_putc(sb, ')');
    } else {
      sb_puts(sb, ast_ltype_str(e->lt));
    }
    break;
  case EX_TYPE: sb_printf(sb, "(type %s)", ast_type_str(d->c, e->type)); break;
  case EX_UNARY:
  case EX_BINARY:
    sb_printf(sb, "(%s ", op_spelling[e->op]);
    dump_expr(d, e->lhs);
    if (e->rhs) {
      sb_putc(sb, ' ');
      dump_expr(d, e->rhs);
    }
    sb_putc(sb, ')');
    break;
  case EX_CALL:
    sb_puts(sb, "(call ");
    dump_expr(d, e->lhs);
    dump_args(d, e->args);
    sb_putc(sb, ')');
    break;
  case EX_INDEX:
    sb_puts(sb, "(index ");
    dump_expr(d, e->lhs);
    sb_putc(sb, ' ');
    dump_expr(d, e->rhs);
    sb_putc(sb, ')');
    break;
  case EX_FIELD:
    sb_puts(sb, "(. ");
    dump_expr(d, e->lhs);
    sb_printf(sb, " %s)", e->name);
    break;
  case EX_TUPLE: dump_list(d, "tuple", e->elems); break;
  case EX_LIST: dump_list(d, "list", e->elems); break;
  case EX_LOCAL_MAP: {
    sb_puts(sb, "(local_map (");
    for (AxisRef *v = e->lm_vars; v; v = v->next)
      sb_printf(sb, "%s%s%s%s", v->name, v->type ? ": " : "", v->type ? ast_type_str(d->c, v->type) : "",
                v->next ? " " : "");
    sb_puts(sb, ") over ");
    if (e->lm_has_over) {
      sb_putc(sb, '(');
      for (AxisRef *a = e->lm_over; a; a = a->next)
        sb_printf(sb, "%s%s", a->name, a->next ? " " : "");
      sb_putc(sb, ')');
    } else {
      sb_puts(sb, "*");
    }
    if (e->lm_ret)
      sb_printf(sb, " -> %s", ast_type_str(d->c, e->lm_ret));
    /* The body goes on the following lines, one level deeper than the
     * statement holding the local_map; the closing ')' lines up with it. */
    fputs(sb->data, d->out);
    sb->len = 0;
    sb->data[0] = '\0';
    fputc('\n', d->out);
    int indent = d->indent;
    dump_stmts(d, e->body->body, indent + 1);
    d->indent = indent;
    sb_printf(sb, "%*s)", indent * 2, "");
    break;
  }
  case EX_LEAF:
    dump_expr(d, e->lhs);
    if (e->ival >= 0)
      sb_printf(sb, ".#%lld", e->ival);
    break;
  case EX_ERROR: sb_puts(sb, "<error>"); break;
  }
}

static void flush_line(Dumper *d) {
  fputs(d->sb.data, d->out);
  fputc('\n', d->out);
  d->sb.len = 0;
  d->sb.data[0] = '\0';
}

static void dump_loc(Dumper *d, Span sp) {
  int line, col;
  source_position(d->c, sp, &line, &col);
  sb_printf(&d->sb, "  @%d:%d", line, col);
}

static void dump_stmts(Dumper *d, Stmt *s, int indent) {
  StrBuf *sb = &d->sb;
  for (; s; s = s->next) {
    d->indent = indent;
    sb_printf(sb, "%*s", indent * 2, "");
    switch (s->kind) {
    case ST_LET:
    case ST_VAR:
    case ST_ASSIGN:
      sb_puts(sb, s->kind == ST_LET ? "let" : s->kind == ST_VAR ? "var" : "assign");
      for (Binding *b = s->targets; b; b = b->next)
        sb_printf(sb, " %s", b->name);
      if (s->type)
        sb_printf(sb, ": %s", ast_type_str(d->c, s->type));
      sb_puts(sb, " = ");
      dump_expr(d, s->value);
      break;
    case ST_RETURN:
      sb_puts(sb, "return");
      for (Expr *e = s->value; e; e = e->next) {
        sb_putc(sb, ' ');
        dump_expr(d, e);
      }
      break;
    case ST_EXPR:
      sb_puts(sb, "expr ");
      dump_expr(d, s->value);
      break;
    case ST_FOR:
      sb_printf(sb, "for %s in ", s->targets->name);
      dump_expr(d, s->lo);
      sb_puts(sb, " .. ");
      dump_expr(d, s->hi);
      dump_loc(d, s->span);
      flush_line(d);
      dump_stmts(d, s->then->body, indent + 1);
      continue;
    case ST_IF:
      sb_puts(sb, "if ");
      dump_expr(d, s->cond);
      dump_loc(d, s->span);
      flush_line(d);
      dump_stmts(d, s->then->body, indent + 1);
      if (s->els) {
        sb_printf(sb, "%*selse", indent * 2, "");
        flush_line(d);
        dump_stmts(d, s->els->kind == ST_IF ? s->els : s->els->body, indent + 1);
      }
      continue;
    case ST_BLOCK:
      sb_puts(sb, "block");
      flush_line(d);
      dump_stmts(d, s->body, indent + 1);
      continue;
    }
    dump_loc(d, s->span);
    flush_line(d);
  }
}

static void dump_fn(Dumper *d, FnDecl *fn) {
  StrBuf *sb = &d->sb;
  sb_printf(sb, "  %sfn %s", fn->flags & FN_EXPORT ? (fn->flags & FN_LOCAL ? "export local " : "export ") : fn->flags & FN_LOCAL ? "local " : "", fn->name);
  dump_loc(d, fn->span);
  flush_line(d);
  for (Param *p = fn->params; p; p = p->next) {
    if (p->type)
      sb_printf(sb, "    param %s: %s", p->name->name, ast_type_str(d->c, p->type));
    else
      sb_printf(sb, "    param %s", p->name->name);
    flush_line(d);
  }
  if (fn->ret) {
    sb_puts(sb, "    returns ");
    if (fn->ret_tuple)
      sb_putc(sb, '(');
    for (TypeExpr *t = fn->ret; t; t = t->next)
      sb_printf(sb, "%s%s", ast_type_str(d->c, t), t->next ? ", " : "");
    if (fn->ret_tuple)
      sb_putc(sb, ')');
    flush_line(d);
  }
  dump_stmts(d, fn->body->body, 2);
}

void ast_dump_module(Compiler *c, Module *m, FILE *out) {
  Dumper d = {c, out, {0}, 0};
  sb_init(&d.sb, &c->arena);
  sb_printf(&d.sb, "module %s", m->name);
  flush_line(&d);
  for (Item *it = m->items; it; it = it->next) {
    switch (it->kind) {
    case IT_IMPORT:
      sb_printf(&d.sb, "  import %s", it->name);
      break;
    case IT_MESH:
      sb_puts(&d.sb, "  mesh (");
      for (MeshAxisDecl *a = it->axes; a; a = a->next) {
        sb_puts(&d.sb, a->name);
        if (a->size) {
          sb_puts(&d.sb, ": ");
          dump_expr(&d, a->size);
        }
        if (a->next)
          sb_puts(&d.sb, ", ");
      }
      sb_putc(&d.sb, ')');
      break;
    case IT_CONST:
      sb_printf(&d.sb, "  const %s = ", it->name);
      dump_expr(&d, it->value);
      break;
    case IT_FN:
      dump_fn(&d, it->fn);
      continue;
    case IT_STRUCT:
      sb_printf(&d.sb, "  struct %s", it->st->name);
      dump_loc(&d, it->span);
      flush_line(&d);
      for (StructField *f = it->st->fields; f; f = f->next) {
        sb_printf(&d.sb, "    field %s: %s", f->name, ast_type_str(c, f->type));
        flush_line(&d);
      }
      continue;
    }
    dump_loc(&d, it->span);
    flush_line(&d);
  }
}
