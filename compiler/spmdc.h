/* spmdc.h: the compiler's shared core: the Compiler context, arenas, interned
 * names, source files and spans, and diagnostics.  Every phase takes a
 * Compiler * first; all compiler memory lives in c->arena and is freed at once
 * by compiler_free(), so no phase frees anything it allocates. */
#ifndef SPMDC_H
#define SPMDC_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define SPMDC_VERSION "0.1.0"

/* ---- arena.c: bump allocation; everything is freed with the arena ---- */
typedef struct ArenaBlock ArenaBlock;
typedef struct Arena {
  ArenaBlock *head;
} Arena;

void *arena_alloc(Arena *a, size_t size);          /* zeroed memory */
char *arena_strndup(Arena *a, const char *s, size_t n);
char *arena_sprintf(Arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void arena_free(Arena *a);
/* Room for one more element in an arena array of n elements and *cap places
 * (first: the places of a first allocation; then doubled): items itself, or
 * a copy of its n elements in a larger array (*cap updated).  ARENA_RESERVE
 * assigns it back: ARENA_RESERVE(&c->arena, f->values, f->nvalues, f->capvalues, 32). */
void *arena_grow(Arena *a, void *items, int n, int *cap, size_t size, int first);
#define ARENA_RESERVE(a, items, n, cap, first) \
  ((items) = arena_grow((a), (items), (n), &(cap), sizeof *(items), (first)))

/* A growable string in an arena, for building messages and dumps. */
typedef struct StrBuf {
  Arena *arena;
  char *data;
  size_t len, cap;
} StrBuf;

void sb_init(StrBuf *sb, Arena *a);
void sb_putc(StrBuf *sb, char ch);
void sb_puts(StrBuf *sb, const char *s);
void sb_printf(StrBuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- source.c: files, spans and interned names ---- */
typedef struct Span {
  uint32_t file;    /* index into Compiler.files; 0 means "no location" */
  uint32_t begin;   /* byte offset of the first character */
  uint32_t end;     /* byte offset one past the last character */
} Span;

typedef struct SourceFile {
  const char *path;    /* as given or found; used in diagnostics */
  const char *text;    /* NUL-terminated copy of the contents */
  size_t len;          /* length in bytes, excluding the final NUL */
  uint32_t *lines;     /* byte offset of the start of each line */
  int nlines;
} SourceFile;

/* An interned identifier: equal names are the same pointer. */
typedef const char *Name;

typedef struct Compiler Compiler;

int source_add(Compiler *c, const char *path, const char *text, size_t len);
int source_load(Compiler *c, const char *path); /* file index, or 0 on error */
SourceFile *source_file(Compiler *c, uint32_t file);
void source_position(Compiler *c, Span sp, int *line, int *col);
Span span_join(Span a, Span b);
Name intern(Compiler *c, const char *s, size_t len);
Name intern_cstr(Compiler *c, const char *s);

/* ---- diag.c: GNU-format diagnostics with the source line and a caret,
 *      or SARIF 2.1.0 on standard output (sarif.c) ---- */
typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE, DIAG_HELP } DiagLevel;
typedef enum { DIAG_FORMAT_TEXT, DIAG_FORMAT_SARIF } DiagFormat;

/* error_at reports an error; note_at/help/help_fix attach to the last error.
 * After max_errors the compiler stops reporting and says so once.
 *
 * Every error has a rule id, `phase/kind` (docs/diagnostics.md): the phase
 * is the file that reports it (its __FILE__), the kind is made of the words
 * of its format string (diag_rule_id).  diag_error_rule names the rule
 * itself, for a format with no words of its own ("%s"). */
#define error_at(c, ...) diag_error((c), __FILE__, __VA_ARGS__)
void diag_error(Compiler *c, const char *where, Span sp, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void diag_error_rule(Compiler *c, const char *rule, Span sp, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *diag_rule_id(Compiler *c, const char *where, const char *fmt);
/* An error already formatted: msg, made from the format string fmt. */
void diag_report(Compiler *c, const char *rule, const char *fmt, Span sp, const char *msg);
void note_at(Compiler *c, Span sp, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void help(Compiler *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A help line whose fix is code: `code` replaces the source at `at` (an
 * empty span inserts it).  The text shows the help line as help() does;
 * SARIF gives it as a fix with that replacement. */
void help_fix(Compiler *c, Span at, const char *code, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* `spmdc: error: ...`: an error of the tool, not of the program (a file that
 * cannot be read or written, the C compiler failing). */
void diag_tool_error(Compiler *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void diag_fatal(Compiler *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Writes what the chosen format needs at the end (the SARIF log). */
void diag_finish(Compiler *c, int exit_code);

/* ---- sarif.c: diagnostics collected and written as a SARIF 2.1.0 log ---- */
typedef struct SarifLog SarifLog;
void sarif_error(Compiler *c, const char *rule, const char *fmt, Span sp, const char *msg);
void sarif_note(Compiler *c, Span sp, const char *msg);
void sarif_help(Compiler *c, Span at, const char *code, const char *msg);
void sarif_notification(Compiler *c, const char *level, const char *msg);
void sarif_write(Compiler *c, FILE *out, int exit_code);

/* ---- the compiler context ---- */
typedef struct Module Module;
struct Expr;
typedef struct Define {
  const char *name, *value;
  struct Expr *expr;      /* the value as a literal, replacing the const's */
  bool used;
  struct Define *next;
} Define;

typedef struct InternTable {
  Name *slots;
  size_t cap, count;
} InternTable;

struct Compiler {
  Arena arena;
  FILE *err;              /* where diagnostics go (stderr) */
  bool color;             /* ANSI colours in diagnostics */
  DiagFormat diag_format; /* text (default) or SARIF */
  SarifLog *sarif;        /* the SARIF results so far (sarif.c) */
  int max_errors;         /* stop reporting after this many (0: no limit) */
  int nerrors;
  bool suppress;          /* inside a suppressed error: drop its notes */
  bool mute;              /* count errors but show nothing (a trial check) */
  bool too_many;          /* the "too many errors" line was printed */

  SourceFile *files;      /* files[0] is unused ("no location") */
  int nfiles, capfiles;
  InternTable names;

  const char **include_dirs; /* -I, in order */
  int ninclude;
  const char *stdlib_dir;
  Define *defines;           /* -D NAME=VALUE */

  Module *modules;           /* main module first, then imports in load order */
  /* shape variables checked as symbols (types.h SIZE_SYM0): their names */
  const char **size_syms;
  int nsize_syms, capsize_syms;
  Module *main;
  bool cuda_target; /* --target=cuda: what the schedule fuses depends on the target (schedule.c) */
};

void compiler_init(Compiler *c);
void compiler_free(Compiler *c);

/* A path that load and save read as a .safetensors file (SPEC 16). */
static inline bool path_is_safetensors(const char *path) {
  size_t n = 0, k = sizeof ".safetensors" - 1;
  while (path && path[n])
    n++;
  for (size_t i = 0; n >= k && i < k; i++)
    if (path[n - k + i] != ".safetensors"[i])
      return false;
  return n > k;
}

#endif
