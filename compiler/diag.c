/* diag.c: diagnostics in the GNU format, `file:line:col: error: message`,
 * followed by the source line, a caret under the span, and note:/help:
 * lines.  Errors are counted, never fatal: phases report and go on. */
#include <stdlib.h>
#include <string.h>

#include "spmdc.h"

#define C_BOLD "\033[1m"
#define C_RED "\033[1;31m"
#define C_CYAN "\033[1;36m"
#define C_GREEN "\033[1;32m"
#define C_MAGENTA "\033[1;35m"
#define C_RESET "\033[0m"

enum { SNIPPET_MAX = 160 }; /* columns of a source line shown at most */

static const char *level_name[] = {"error", "warning", "note", "help"};
static const char *level_color[] = {C_RED, C_MAGENTA, C_CYAN, C_GREEN};

static void put_color(Compiler *c, const char *code) {
  if (c->color)
    fputs(code, c->err);
}

/* Prints the line holding sp.begin and a caret line under the span (to the
 * end of that line when the span continues further).  Control bytes print as
 * '?' so that binary input cannot garble a terminal. */
static void print_snippet(Compiler *c, Span sp, int line, int col) {
  SourceFile *f = source_file(c, sp.file);
  size_t start = f->lines[line - 1];
  size_t stop = start;
  while (stop < f->len && f->text[stop] != '\n')
    stop++;
  if (stop > start && f->text[stop - 1] == '\r')
    stop--;
  size_t caret = start + (size_t)col - 1;
  size_t caret_end = sp.end > caret ? sp.end : caret + 1;
  if (caret_end > stop)
    caret_end = stop > caret ? stop : caret + 1;
  size_t from = start, to = stop;
  bool cut_left = false, cut_right = false;
  if (caret - start > SNIPPET_MAX / 2) {
    from = caret - SNIPPET_MAX / 4;
    cut_left = true;
  }
  if (to - from > SNIPPET_MAX) {
    to = from + SNIPPET_MAX;
    cut_right = true;
    if (caret_end > to)
      caret_end = to > caret ? to : caret + 1;
  }
  fprintf(c->err, "%5d | %s", line, cut_left ? "..." : "");
  for (size_t i = from; i < to; i++) {
    unsigned char ch = (unsigned char)f->text[i];
    fputc(ch == '\t' || (ch >= 0x20 && ch != 0x7f) ? ch : '?', c->err);
  }
  fprintf(c->err, "%s\n      | %s", cut_right ? "..." : "", cut_left ? "   " : "");
  for (size_t i = from; i < caret; i++)
    fputc(f->text[i] == '\t' ? '\t' : ' ', c->err);
  put_color(c, C_GREEN);
  fputc('^', c->err);
  for (size_t i = caret + 1; i < caret_end; i++)
    fputc('~', c->err);
  put_color(c, C_RESET);
  fputc('\n', c->err);
}

static void emit(Compiler *c, DiagLevel level, Span sp, const char *fmt, va_list ap) {
  int line = 0, col = 0;
  if (sp.file)
    source_position(c, sp, &line, &col);
  put_color(c, C_BOLD);
  if (line > 0)
    fprintf(c->err, "%s:%d:%d: ", source_file(c, sp.file)->path, line, col);
  put_color(c, level_color[level]);
  fprintf(c->err, "%s: ", level_name[level]);
  put_color(c, C_RESET);
  vfprintf(c->err, fmt, ap);
  fputc('\n', c->err);
  if (line > 0)
    print_snippet(c, sp, line, col);
}

void verror_at(Compiler *c, Span sp, const char *fmt, va_list ap) {
  c->nerrors++;
  c->suppress = c->max_errors > 0 && c->nerrors > c->max_errors;
  if (c->suppress) {
    if (!c->too_many)
      fprintf(c->err, "spmdc: too many errors (%d), stopping here\n", c->max_errors);
    c->too_many = true;
    return;
  }
  emit(c, DIAG_ERROR, sp, fmt, ap);
}

void error_at(Compiler *c, Span sp, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  verror_at(c, sp, fmt, ap);
  va_end(ap);
}

void note_at(Compiler *c, Span sp, const char *fmt, ...) {
  if (c->suppress)
    return;
  va_list ap;
  va_start(ap, fmt);
  emit(c, DIAG_NOTE, sp, fmt, ap);
  va_end(ap);
}

void help(Compiler *c, const char *fmt, ...) {
  if (c->suppress)
    return;
  va_list ap;
  va_start(ap, fmt);
  emit(c, DIAG_HELP, (Span){0, 0, 0}, fmt, ap);
  va_end(ap);
}

void diag_fatal(Compiler *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("spmdc: error: ", c->err);
  vfprintf(c->err, fmt, ap);
  fputc('\n', c->err);
  va_end(ap);
  exit(1);
}
