/* test_front.c: unit tests of the front end (lexer, parser, spans, names)
 * run in-process on text held in memory. */
#define _POSIX_C_SOURCE 200809L
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "ast.h"

typedef struct Fixture {
  Compiler c;
  char *diag;
  size_t diag_len;
  Module *m;
} Fixture;

static void parse_text(Fixture *f, const char *text) {
  compiler_init(&f->c);
  f->c.err = open_memstream(&f->diag, &f->diag_len);
  int file = source_add(&f->c, "t.spmd", text, strlen(text));
  f->m = parse_file(&f->c, file, intern_cstr(&f->c, "t"));
  fflush(f->c.err);
}

static void done(Fixture *f) {
  fclose(f->c.err);
  free(f->diag);
  compiler_free(&f->c);
}

Test(front, interned_names_are_pointer_equal) {
  Fixture f;
  parse_text(&f, "");
  cr_assert_eq(intern_cstr(&f.c, "dp"), intern(&f.c, "dpx", 2));
  cr_assert_neq(intern_cstr(&f.c, "dp"), intern_cstr(&f.c, "tp"));
  done(&f);
}

Test(front, function_with_typed_signature) {
  Fixture f;
  parse_text(&f, "mesh (dp, tp: 2);\n"
                 "fn f(x: f32[B@(dp, tp), 16]{tp: R, *: I}) -> f32 { return sum(x); }\n");
  cr_assert_eq(f.c.nerrors, 0, "%s", f.diag);
  Item *mesh = f.m->items;
  cr_assert_eq(mesh->kind, IT_MESH);
  cr_assert_str_eq(mesh->axes->next->name, "tp");
  cr_assert_eq(mesh->axes->next->size->ival, 2);
  FnDecl *fn = mesh->next->fn;
  TypeExpr *t = fn->params->type;
  cr_assert_eq(t->dtype, DT_F32);
  cr_assert_str_eq(t->dims->axes->next->name, "tp");
  cr_assert_null(t->entries->next->axis, "'*' entry has no axis");
  cr_assert_eq(t->entries->lt.kind, LT_R);
  cr_assert_str_eq(ast_type_str(&f.c, t), "f32[B@(dp, tp), 16]{tp: R, *: I}");
  done(&f);
}

Test(front, precedence_follows_c_with_matmul_like_times) {
  Fixture f;
  parse_text(&f, "const X = 1 + 2 * 3 @ 4 < 5 && !6 == 7;");
  cr_assert_eq(f.c.nerrors, 0, "%s", f.diag);
  Expr *e = f.m->items->value;
  cr_assert_eq(e->op, OP_AND);
  cr_assert_eq(e->lhs->op, OP_LT);
  cr_assert_eq(e->lhs->lhs->op, OP_ADD);
  cr_assert_eq(e->lhs->lhs->rhs->op, OP_MATMUL, "'@' is left-associative with '*'");
  cr_assert_eq(e->lhs->lhs->rhs->lhs->op, OP_MUL);
  cr_assert_eq(e->rhs->op, OP_EQ);
  cr_assert_eq(e->rhs->lhs->op, OP_NOT);
  done(&f);
}

Test(front, spans_give_line_and_column) {
  Fixture f;
  parse_text(&f, "const A = 1;\n  const B = A * 2;\n");
  Item *b = f.m->items->next;
  int line, col;
  source_position(&f.c, b->name_span, &line, &col);
  cr_assert_eq(line, 2);
  cr_assert_eq(col, 9);
  source_position(&f.c, b->value->span, &line, &col);
  cr_assert_eq(col, 13);
  cr_assert_eq(b->value->span.end - b->value->span.begin, 5, "span covers 'A * 2'");
  done(&f);
}

Test(front, type_braces_after_return_type_are_entries) {
  Fixture f;
  parse_text(&f, "fn f() -> f32[4] {tp: P} { return 1; }\nfn g() -> f32[4] { return 1; }\n");
  cr_assert_eq(f.c.nerrors, 0, "%s", f.diag);
  cr_assert_eq(f.m->items->fn->ret->entries->lt.kind, LT_P);
  cr_assert_null(f.m->items->next->fn->ret->entries);
  cr_assert_eq(f.m->items->next->fn->body->body->kind, ST_RETURN);
  done(&f);
}

Test(front, recovers_and_reports_every_error) {
  Fixture f;
  parse_text(&f, "fn f() {\n  let a = 1 +;\n  let b = (2;\n  let c = 3;\n}\nconst = 4;\nfn g() { return 1 }\n");
  cr_assert_eq(f.c.nerrors, 4, "got %d errors:\n%s", f.c.nerrors, f.diag);
  cr_assert(strstr(f.diag, "t.spmd:2:14: error: expected an expression after '+', found ';'"), "%s", f.diag);
  cr_assert(strstr(f.diag, "t.spmd:6:7: error: expected a name after 'const', found '='"), "%s", f.diag);
  done(&f);
}

Test(front, deep_chains_are_errors_not_crashes) {
  Fixture f;
  size_t n = 5000;
  char *text = malloc(n * 4 + 64);
  char *p = text + sprintf(text, "const X = 1");
  for (size_t i = 0; i < n; i++)
    p += sprintf(p, " + 1");
  strcpy(p, ";");
  parse_text(&f, text);
  cr_assert_eq(f.c.nerrors, 1, "%s", f.diag);
  cr_assert(strstr(f.diag, "nested too deeply"));
  free(text);
  done(&f);
}

Test(front, string_escapes_are_decoded) {
  Fixture f;
  parse_text(&f, "const STR = \"a\\\"b\\\\c\\nd\";");
  cr_assert_eq(f.c.nerrors, 0, "%s", f.diag);
  Expr *e = f.m->items->value;
  cr_assert_eq(e->kind, EX_STRING);
  cr_assert_eq(e->slen, 7);
  cr_assert_eq(memcmp(e->str, "a\"b\\c\nd", 7), 0);
  done(&f);
}

/* A '}' missing before a declaration: the lexer closes the block, so the
 * next function is parsed (and its own error found). */
Test(front, declaration_keyword_closes_open_blocks) {
  Fixture f;
  parse_text(&f, "fn f() {\n  let x = (1 +\nfn g() { let y = ; }\nconst A = 1;\n");
  cr_assert_eq(f.c.nerrors, 2, "%s", f.diag);
  cr_assert(strstr(f.diag, "t.spmd:3:1: error: expected ')' before keyword 'fn'"), "%s", f.diag);
  cr_assert(strstr(f.diag, "t.spmd:3:18: error: expected an expression after '='"), "%s", f.diag);
  Item *g = f.m->items->next;
  cr_assert(g && g->kind == IT_FN && strcmp(g->fn->name, "g") == 0, "g is parsed");
  cr_assert(g->next && g->next->kind == IT_CONST, "and so is the const after it");
  done(&f);
}

/* Recovery at '}' must not stop inside the braces of a type. */
Test(front, type_braces_do_not_end_recovery) {
  Fixture f;
  parse_text(&f, "fn f(x: f32[4]{tp: Q}) { let y = 1; }\nconst A = 1;\n");
  cr_assert_eq(f.c.nerrors, 1, "%s", f.diag);
  cr_assert_eq(f.m->items->kind, IT_CONST, "the broken fn is skipped, the const is kept");
  done(&f);
}

Test(front, reserved_words_are_reported_where_names_are_declared) {
  Fixture f;
  parse_text(&f, "fn f() { let fn = 1; var R = 2; }\n");
  cr_assert_eq(f.c.nerrors, 2, "%s", f.diag);
  cr_assert(strstr(f.diag, "error: 'fn' is a reserved word and cannot be used as a name"), "%s", f.diag);
  cr_assert(strstr(f.diag, "error: 'R' is a type letter and cannot be used as a name"), "%s", f.diag);
  done(&f);
}

Test(front, numbers_and_ranges_lex_apart) {
  Fixture f;
  parse_text(&f, "fn f() { for i in 0..4 { let a = x.0; } }\nconst B = 1.5e3;\n");
  cr_assert_eq(f.c.nerrors, 1, "only x.0 is wrong: %s", f.diag);
  cr_assert(strstr(f.diag, "expected a name after '.', found number 0"), "%s", f.diag);
  cr_assert_eq(f.m->items->next->value->fval, 1500.0);
  done(&f);
}

Test(front, byte_order_mark_and_utf8_are_handled) {
  Fixture f;
  parse_text(&f, "\xef\xbb\xbf" "const A = 1;\nconst B\xc3\xa9 = 2;\n");
  cr_assert_eq(f.c.nerrors, 1, "%s", f.diag);
  cr_assert(strstr(f.diag, "t.spmd:2:8: error: unexpected character U+00E9"), "%s", f.diag);
  cr_assert_eq(f.m->items->kind, IT_CONST);
  done(&f);
}

Test(front, error_at_end_of_file_names_the_open_bracket) {
  Fixture f;
  parse_text(&f, "fn f() {\n  if true {\n    let x = 1;\n");
  cr_assert_eq(f.c.nerrors, 1, "%s", f.diag);
  cr_assert(strstr(f.diag, "t.spmd:3:14: error: expected '}' at end of file"), "%s", f.diag);
  cr_assert(strstr(f.diag, "t.spmd:2:11: note: to close this '{'"), "%s", f.diag);
  done(&f);
}
