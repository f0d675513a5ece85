/* diag.c: diagnostics in the GNU format, `file:line:col: error: message`,
 * followed by the source line, a caret under the span, and note:/help:
 * lines; or, with --diagnostics-format=sarif, the same collected by sarif.c.
 * Errors are counted, never fatal: phases report and go on.  Each error has
 * a rule id (diag_rule_id below). */
#include <ctype.h>
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

static void emit(Compiler *c, DiagLevel level, Span sp, const char *msg) {
  int line = 0, col = 0;
  if (sp.file)
    source_position(c, sp, &line, &col);
  put_color(c, C_BOLD);
  if (line > 0)
    fprintf(c->err, "%s:%d:%d: ", source_file(c, sp.file)->path, line, col);
  put_color(c, level_color[level]);
  fprintf(c->err, "%s: ", level_name[level]);
  put_color(c, C_RESET);
  fputs(msg, c->err);
  fputc('\n', c->err);
  if (line > 0)
    print_snippet(c, sp, line, col);
}

static char *vformat(Compiler *c, const char *fmt, va_list ap) {
  va_list again;
  va_copy(again, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  char *msg = arena_alloc(&c->arena, (size_t)(n < 0 ? 0 : n) + 1);
  vsnprintf(msg, (size_t)(n < 0 ? 0 : n) + 1, fmt, again);
  va_end(again);
  return msg;
}

/* ---- rule ids ----
 * An error's rule id is `phase/kind`.  The phase is the compiler file that
 * reports it (the table below; another file is a phase of its own name); the kind is the words of its format string: conversions
 * (%s, %d, ...) and punctuation dropped, lower case, '_' as '-', without
 * the filler words below, at most six, joined by '-'.  "undefined name
 * '%s'" in resolve.c is resolve/undefined-name.  scripts/diag_rules.py
 * computes the same ids from the sources for docs/diagnostics.md. */

static const struct {
  const char *file, *phase;
} phases[] = {
    {"lexer.re", "syntax"},         {"parser.y", "syntax"},        {"ast.c", "syntax"},
    {"resolve.c", "resolve"},       {"check.c", "type"},           {"check_diag.c", "type"},
    {"check_rules.c", "type"},      {"check_elementwise.c", "type"}, {"check_nn.c", "type"},
    {"check_create.c", "type"},     {"check_autodiff.c", "type"},  {"check_record.c", "type"},
    {"check_select.c", "type"},     {"check_io.c", "type"},        {"check_collectives.c", "type"},
    {"check_attention.c", "type"},
    {"shardprop.c", "type"},        {"redistribute.c", "type"},    {"types.c", "type"},
    {"lower.c", "lower"},           {"ir.c", "lower"},             {"autodiff.c", "autodiff"},
    {"emit_c.c", "codegen"},        {"main.c", "driver"},          {"source.c", "driver"},
};

static const char *const filler[] = {"a", "an", "the", "is", "are", "be", "of", "to", "in", "on",
                                     "at", "as", "by", "and", "or", "it", "its", "this", "that", "here"};

enum { RULE_WORDS = 6 };

static const char *phase_of(Compiler *c, const char *where) {
  const char *base = strrchr(where, '/') ? strrchr(where, '/') + 1 : where;
  for (size_t i = 0; i < sizeof phases / sizeof phases[0]; i++)
    if (strcmp(base, phases[i].file) == 0)
      return phases[i].phase;
  const char *dot = strchr(base, '.');
  return arena_strndup(&c->arena, base, dot ? (size_t)(dot - base) : strlen(base));
}

/* The end of the printf conversion starting at p (p[0] == '%'). */
static const char *skip_conversion(const char *p) {
  p++;
  while (*p && strchr("-+ #0", *p))
    p++;
  while (*p && (isdigit((unsigned char)*p) || *p == '*' || *p == '.'))
    p++;
  while (*p && strchr("hlLqjzt", *p))
    p++;
  return *p ? p + 1 : p;
}

static bool is_filler(const char *w, size_t n) {
  for (size_t i = 0; i < sizeof filler / sizeof filler[0]; i++)
    if (strlen(filler[i]) == n && memcmp(filler[i], w, n) == 0)
      return true;
  return false;
}

const char *diag_rule_id(Compiler *c, const char *where, const char *fmt) {
  StrBuf sb;
  sb_init(&sb, &c->arena);
  sb_puts(&sb, phase_of(c, where));
  sb_putc(&sb, '/');
  size_t start = sb.len;
  int nwords = 0;
  char word[64];
  size_t n = 0;
  for (const char *p = fmt;; p++) {
    bool in_word = *p && (isalnum((unsigned char)*p) || *p == '_');
    if (in_word && n < sizeof word)
      word[n++] = (char)(*p == '_' ? '-' : tolower((unsigned char)*p));
    if (!in_word && n > 0) {
      if (!is_filler(word, n) && nwords < RULE_WORDS) {
        if (nwords++)
          sb_putc(&sb, '-');
        for (size_t i = 0; i < n; i++)
          sb_putc(&sb, word[i]);
      }
      n = 0;
    }
    if (!*p)
      break;
    if (*p == '%')
      p = skip_conversion(p) - 1;
  }
  if (sb.len == start)
    sb_puts(&sb, "error");
  return sb.data;
}

/* ---- reporting ---- */

void diag_report(Compiler *c, const char *rule, const char *fmt, Span sp, const char *msg) {
  c->nerrors++;
  if (c->mute) { /* a trial check: counted, not shown, nor its notes */
    c->suppress = true;
    return;
  }
  c->suppress = c->max_errors > 0 && c->nerrors > c->max_errors;
  if (c->suppress) {
    if (!c->too_many) {
      char *what = arena_sprintf(&c->arena, "too many errors (%d), stopping here", c->max_errors);
      if (c->diag_format == DIAG_FORMAT_SARIF)
        sarif_notification(c, "warning", what);
      else
        fprintf(c->err, "spmdc: %s\n", what);
    }
    c->too_many = true;
    return;
  }
  if (c->diag_format == DIAG_FORMAT_SARIF)
    sarif_error(c, rule, fmt, sp, msg);
  else
    emit(c, DIAG_ERROR, sp, msg);
}

void diag_error(Compiler *c, const char *where, Span sp, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(c, fmt, ap);
  va_end(ap);
  diag_report(c, diag_rule_id(c, where, fmt), fmt, sp, msg);
}

void diag_error_rule(Compiler *c, const char *rule, Span sp, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(c, fmt, ap);
  va_end(ap);
  diag_report(c, rule, fmt, sp, msg);
}

void note_at(Compiler *c, Span sp, const char *fmt, ...) {
  if (c->suppress || c->mute)
    return;
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(c, fmt, ap);
  va_end(ap);
  if (c->diag_format == DIAG_FORMAT_SARIF)
    sarif_note(c, sp, msg);
  else
    emit(c, DIAG_NOTE, sp, msg);
}

void help(Compiler *c, const char *fmt, ...) {
  if (c->suppress || c->mute)
    return;
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(c, fmt, ap);
  va_end(ap);
  if (c->diag_format == DIAG_FORMAT_SARIF)
    sarif_help(c, (Span){0, 0, 0}, NULL, msg);
  else
    emit(c, DIAG_HELP, (Span){0, 0, 0}, msg);
}

void help_fix(Compiler *c, Span at, const char *code, const char *fmt, ...) {
  if (c->suppress || c->mute)
    return;
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(c, fmt, ap);
  va_end(ap);
  if (c->diag_format == DIAG_FORMAT_SARIF)
    sarif_help(c, at, code, msg);
  else
    emit(c, DIAG_HELP, (Span){0, 0, 0}, msg);
}

void diag_tool_error(Compiler *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = vformat(c, fmt, ap);
  va_end(ap);
  if (c->diag_format == DIAG_FORMAT_SARIF)
    sarif_notification(c, "error", msg);
  else
    fprintf(c->err, "spmdc: error: %s\n", msg);
}

void diag_fatal(Compiler *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap); /* no arena: it may be what failed */
  va_end(ap);
  if (c->diag_format == DIAG_FORMAT_SARIF) {
    sarif_notification(c, "error", msg);
    diag_finish(c, 1);
  } else {
    fprintf(c->err, "spmdc: error: %s\n", msg);
  }
  exit(1);
}

void diag_finish(Compiler *c, int exit_code) {
  if (c->diag_format == DIAG_FORMAT_SARIF) {
    sarif_write(c, stdout, exit_code);
    fflush(stdout);
  } else if (c->nerrors > 1 && !c->too_many) {
    fprintf(c->err, "%d errors\n", c->nerrors);
  }
}
