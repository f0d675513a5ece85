/* lexer.h: the state shared by the re2c lexer (lexer.re) and the Bison
 * parser (parser.y).  The lexer reads a whole file from memory; the parser
 * owns one Lexer for the duration of parse_file(). */
#ifndef SPMDC_LEXER_H
#define SPMDC_LEXER_H

#include "ast.h"

enum { MAX_BRACKETS = 256 };

typedef struct Lexer {
  Compiler *c;
  int file;
  const char *start;       /* the whole text */
  const char *cur, *lim;   /* cursor and end (text[len] is a NUL sentinel) */
  const char *tok;         /* start of the current token */
  Module *module;          /* the result */
  Item *items_tail;        /* its last item, for appending */
  Span prev, last;         /* the last two tokens returned */
  /* Open brackets, to tell the user which one a missing closer belongs to. */
  struct {
    char ch;
    bool type;             /* a '{' of axis types: closed by TYPE_RBRACE */
    Span span;
  } open[MAX_BRACKETS];
  int nopen;
  Span unmatched;          /* the last closer that matched no open bracket */
  /* The innermost bracket that the last closer closed implicitly (`[` in
   * `f([1)`), and that closer: the syntax error there names it. */
  struct {
    char ch;
    Span span;
  } skipped;
  Span skipped_by;
  Span last_error;         /* to drop a second syntax error at one place */
  /* After a declaration keyword inside open brackets the lexer returns the
   * missing closers (innermost first) before the keyword itself, so that the
   * parser recovers at the declaration instead of deep inside it. */
  bool closing;
} Lexer;

#endif
