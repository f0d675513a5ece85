/* sarif.c: diagnostics as a SARIF 2.1.0 log (the OASIS Static Analysis
 * Results Interchange Format that GCC, clang and code-scanning tools use),
 * written to standard output at the end of a run with
 * --diagnostics-format=sarif (docs/diagnostics.md).
 *
 * One run of one tool.  Each error is a result with its rule id, message and
 * region; its notes are related locations; a help line whose fix is code
 * (help_fix) is a fix replacing the source, and any other help line a
 * related location whose message starts with "help: " (SARIF requires a fix
 * to change an artifact).  Errors of the tool itself are notifications of
 * the invocation.  Columns count Unicode code points (columnKind).  All
 * memory is in the compiler's arena. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "spmdc.h"

typedef struct SarifItem {
  bool help;
  const char *text;
  Span sp;          /* a note: where it points (file 0: nowhere); a fix: what `code` replaces */
  const char *code; /* a help line with a fix: the replacement; else NULL */
} SarifItem;

typedef struct SarifResult {
  const char *rule, *message;
  Span sp;
  SarifItem *items;
  int nitems, capitems;
} SarifResult;

typedef struct SarifRule {
  const char *id, *fmt; /* fmt: the format string of the rule's first error */
} SarifRule;

typedef struct SarifNotification {
  const char *level, *text;
} SarifNotification;

struct SarifLog {
  SarifResult *results;
  int nresults, capresults;
  SarifRule *rules;
  int nrules, caprules;
  SarifNotification *notes;
  int nnotes, capnotes;
};

static SarifLog *sarif_log(Compiler *c) {
  if (!c->sarif)
    c->sarif = arena_alloc(&c->arena, sizeof(SarifLog));
  return c->sarif;
}

void sarif_error(Compiler *c, const char *rule, const char *fmt, Span sp, const char *msg) {
  SarifLog *log = sarif_log(c);
  int r = 0;
  while (r < log->nrules && strcmp(log->rules[r].id, rule) != 0)
    r++;
  if (r == log->nrules) {
    log->rules = arena_grow(&c->arena, log->rules, log->nrules, &log->caprules, sizeof *log->rules, 8);
    log->rules[log->nrules++] = (SarifRule){rule, fmt};
  }
  log->results = arena_grow(&c->arena, log->results, log->nresults, &log->capresults, sizeof *log->results, 8);
  log->results[log->nresults++] = (SarifResult){.rule = rule, .message = msg, .sp = sp};
}

static void add_item(Compiler *c, SarifItem item) {
  SarifLog *log = sarif_log(c);
  if (log->nresults == 0) { /* nothing to attach to: keep the text */
    sarif_notification(c, "note", arena_sprintf(&c->arena, "%s%s", item.help ? "help: " : "", item.text));
    return;
  }
  SarifResult *r = &log->results[log->nresults - 1];
  r->items = arena_grow(&c->arena, r->items, r->nitems, &r->capitems, sizeof *r->items, 8);
  r->items[r->nitems++] = item;
}

void sarif_note(Compiler *c, Span sp, const char *msg) { add_item(c, (SarifItem){false, msg, sp, NULL}); }

void sarif_help(Compiler *c, Span at, const char *code, const char *msg) {
  add_item(c, (SarifItem){true, msg, at, at.file && code ? code : NULL});
}

void sarif_notification(Compiler *c, const char *level, const char *msg) {
  SarifLog *log = sarif_log(c);
  log->notes = arena_grow(&c->arena, log->notes, log->nnotes, &log->capnotes, sizeof *log->notes, 8);
  log->notes[log->nnotes++] = (SarifNotification){level, msg};
}

/* ---- JSON output, indented two spaces per level ---- */

typedef struct Json {
  FILE *fp;
  int depth;
  bool first; /* no member written yet at this level */
} Json;

/* The length of the valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n) {
  if (p[0] < 0x80)
    return 1;
  size_t len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
  if (len == 0 || len > n || p[0] > 0xf4)
    return 0;
  for (size_t i = 1; i < len; i++)
    if ((p[i] & 0xc0) != 0x80)
      return 0;
  if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) || /* overlong, surrogate */
      (p[0] == 0xf0 && p[1] < 0x90) || (p[0] == 0xf4 && p[1] >= 0x90))  /* overlong, > U+10FFFF */
    return 0;
  return len;
}

/* n bytes of s as a JSON string: invalid UTF-8 becomes U+FFFD. */
static void json_string_n(Json *j, const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  fputc('"', j->fp);
  for (size_t i = 0; i < n;) {
    unsigned char ch = p[i];
    size_t len = utf8_len(p + i, n - i);
    if (len == 0) {
      fputs("\\ufffd", j->fp);
      i++;
      continue;
    }
    if (ch == '"' || ch == '\\')
      fprintf(j->fp, "\\%c", ch);
    else if (ch == '\n')
      fputs("\\n", j->fp);
    else if (ch == '\t')
      fputs("\\t", j->fp);
    else if (ch == '\r')
      fputs("\\r", j->fp);
    else if (ch < 0x20 || ch == 0x7f)
      fprintf(j->fp, "\\u%04x", ch);
    else
      fwrite(p + i, 1, len, j->fp);
    i += len;
  }
  fputc('"', j->fp);
}

static void json_string(Json *j, const char *s) { json_string_n(j, s, strlen(s)); }

/* Starts a member `"key": ` (or an array element when key is NULL). */
static void json_key(Json *j, const char *key) {
  fprintf(j->fp, "%s\n%*s", j->first ? "" : ",", 2 * j->depth, "");
  j->first = false;
  if (key)
    fprintf(j->fp, "\"%s\": ", key);
}

static void json_open(Json *j, const char *key, char bracket) {
  json_key(j, key);
  fputc(bracket, j->fp);
  j->depth++;
  j->first = true;
}

static void json_close(Json *j, char bracket) {
  j->depth--;
  if (!j->first)
    fprintf(j->fp, "\n%*s", 2 * j->depth, "");
  fputc(bracket, j->fp);
  j->first = false;
}

static void json_str(Json *j, const char *key, const char *value) {
  json_key(j, key);
  json_string(j, value);
}

static void json_int(Json *j, const char *key, long value) {
  json_key(j, key);
  fprintf(j->fp, "%ld", value);
}

static void json_bool(Json *j, const char *key, bool value) {
  json_key(j, key);
  fputs(value ? "true" : "false", j->fp);
}

/* {"text": msg} */
static void json_message(Json *j, const char *key, const char *msg) {
  json_open(j, key, '{');
  json_str(j, "text", msg);
  json_close(j, '}');
}

/* ---- locations ---- */

/* path as a URI reference: unreserved characters and '/' as they are, every
 * other byte %XX (as RFC 3986 and Python's pathlib.Path.as_uri do). */
static const char *uri_escape(Compiler *c, const char *path) {
  StrBuf sb;
  sb_init(&sb, &c->arena);
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-._~/", *p))
      sb_putc(&sb, (char)*p);
    else
      sb_printf(&sb, "%%%02X", *p);
  }
  return sb.data;
}

/* {"uri": ...}: absolute paths as file: URIs, relative ones relative to
 * %PWD%, the directory spmdc ran in (run.originalUriBaseIds). */
static void json_artifact(Json *j, Compiler *c, uint32_t file) {
  const char *path = source_file(c, file)->path;
  json_open(j, "artifactLocation", '{');
  if (path[0] == '/') {
    json_str(j, "uri", arena_sprintf(&c->arena, "file://%s", uri_escape(c, path)));
  } else {
    json_str(j, "uri", uri_escape(c, path));
    json_str(j, "uriBaseId", "PWD");
  }
  json_close(j, '}');
}

/* The line (1-based) holding byte offset off, and its column in code points. */
static void position(Compiler *c, uint32_t file, uint32_t off, int *line, int *col) {
  SourceFile *f = source_file(c, file);
  source_position(c, (Span){file, off, off}, line, col);
  const unsigned char *text = (const unsigned char *)f->text;
  size_t i = f->lines[*line - 1], n = 1;
  while (i < off && i < f->len) {
    size_t len = utf8_len(text + i, f->len - i);
    i += len ? len : 1;
    n++;
  }
  *col = (int)n;
}

/* A region from byte begin to byte end (exclusive). */
static void json_region(Json *j, Compiler *c, const char *key, uint32_t file, uint32_t begin, uint32_t end) {
  int l0, c0, l1, c1;
  position(c, file, begin, &l0, &c0);
  position(c, file, end, &l1, &c1);
  json_open(j, key, '{');
  json_int(j, "startLine", l0);
  json_int(j, "startColumn", c0);
  json_int(j, "endLine", l1);
  json_int(j, "endColumn", c1);
  json_close(j, '}');
}

/* Where a diagnostic points: the span, at least one character wide as the
 * caret under it is, and the source line around it. */
static void json_location(Json *j, Compiler *c, Span sp, const char *msg) {
  SourceFile *f = source_file(c, sp.file);
  int line, col;
  source_position(c, sp, &line, &col);
  size_t start = f->lines[line - 1], stop = start;
  while (stop < f->len && f->text[stop] != '\n')
    stop++;
  uint32_t end = sp.end > sp.begin ? sp.end : sp.begin < stop ? sp.begin + 1 : sp.begin;
  json_open(j, NULL, '{');
  json_open(j, "physicalLocation", '{');
  json_artifact(j, c, sp.file);
  json_region(j, c, "region", sp.file, sp.begin, end);
  if (end <= stop) { /* on one line: that line is the context */
    json_open(j, "contextRegion", '{');
    json_int(j, "startLine", line);
    json_open(j, "snippet", '{');
    json_key(j, "text");
    json_string_n(j, f->text + start, stop - start);
    json_close(j, '}');
    json_close(j, '}');
  }
  json_close(j, '}');
  if (msg)
    json_message(j, "message", msg);
  json_close(j, '}');
}

static void json_fix(Json *j, Compiler *c, const SarifItem *it) {
  json_open(j, NULL, '{');
  json_message(j, "description", it->text);
  json_open(j, "artifactChanges", '[');
  json_open(j, NULL, '{');
  json_artifact(j, c, it->sp.file);
  json_open(j, "replacements", '[');
  json_open(j, NULL, '{');
  json_region(j, c, "deletedRegion", it->sp.file, it->sp.begin, it->sp.end);
  json_message(j, "insertedContent", it->code);
  json_close(j, '}');
  json_close(j, ']');
  json_close(j, '}');
  json_close(j, ']');
  json_close(j, '}');
}

/* A rule's description: its format string with each conversion as "...". */
static const char *rule_text(Compiler *c, const char *fmt) {
  StrBuf sb;
  sb_init(&sb, &c->arena);
  for (const char *p = fmt; *p; p++) {
    if (*p != '%') {
      sb_putc(&sb, *p);
    } else if (p[1] == '%') {
      sb_putc(&sb, '%');
      p++;
    } else {
      p++;
      while (*p && !strchr("diouxXeEfgGcsp", *p))
        p++;
      sb_puts(&sb, "...");
      if (!*p)
        break;
    }
  }
  return sb.data;
}

static void json_result(Json *j, Compiler *c, const SarifLog *log, const SarifResult *r) {
  int index = 0;
  while (strcmp(log->rules[index].id, r->rule) != 0)
    index++;
  json_open(j, NULL, '{');
  json_str(j, "ruleId", r->rule);
  json_int(j, "ruleIndex", index);
  json_str(j, "level", "error");
  json_message(j, "message", r->message);
  if (r->sp.file) {
    json_open(j, "locations", '[');
    json_location(j, c, r->sp, NULL);
    json_close(j, ']');
  }
  bool related = false, fixes = false;
  for (int i = 0; i < r->nitems; i++) {
    related |= !r->items[i].code;
    fixes |= r->items[i].code != NULL;
  }
  if (related) {
    json_open(j, "relatedLocations", '[');
    for (int i = 0; i < r->nitems; i++) {
      const SarifItem *it = &r->items[i];
      const char *text = it->help ? arena_sprintf(&c->arena, "help: %s", it->text) : it->text;
      if (it->code) {
        continue;
      } else if (it->sp.file && !it->help) {
        json_location(j, c, it->sp, text);
      } else {
        json_open(j, NULL, '{');
        json_message(j, "message", text);
        json_close(j, '}');
      }
    }
    json_close(j, ']');
  }
  if (fixes) {
    json_open(j, "fixes", '[');
    for (int i = 0; i < r->nitems; i++)
      if (r->items[i].code)
        json_fix(j, c, &r->items[i]);
    json_close(j, ']');
  }
  json_close(j, '}');
}

void sarif_write(Compiler *c, FILE *out, int exit_code) {
  SarifLog *log = sarif_log(c);
  Json js = {out, 0, true};
  Json *j = &js;
  bool tool_failed = exit_code == 2;
  for (int i = 0; i < log->nnotes; i++)
    tool_failed |= strcmp(log->notes[i].level, "error") == 0;
  fputc('{', out);
  j->depth = 1;
  json_str(j, "$schema", "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json");
  json_str(j, "version", "2.1.0");
  json_open(j, "runs", '[');
  json_open(j, NULL, '{');

  json_open(j, "tool", '{');
  json_open(j, "driver", '{');
  json_str(j, "name", "spmdc");
  json_str(j, "version", SPMDC_VERSION);
  json_open(j, "rules", '[');
  for (int i = 0; i < log->nrules; i++) {
    json_open(j, NULL, '{');
    json_str(j, "id", log->rules[i].id);
    json_message(j, "shortDescription", rule_text(c, log->rules[i].fmt));
    json_close(j, '}');
  }
  json_close(j, ']');
  json_close(j, '}');
  json_close(j, '}');

  json_open(j, "invocations", '[');
  json_open(j, NULL, '{');
  json_bool(j, "executionSuccessful", !tool_failed);
  json_int(j, "exitCode", exit_code);
  if (log->nnotes) {
    json_open(j, "toolExecutionNotifications", '[');
    for (int i = 0; i < log->nnotes; i++) {
      json_open(j, NULL, '{');
      json_str(j, "level", log->notes[i].level);
      json_message(j, "message", log->notes[i].text);
      json_close(j, '}');
    }
    json_close(j, ']');
  }
  json_close(j, '}');
  json_close(j, ']');

  char *cwd = getcwd(NULL, 0);
  if (cwd) {
    json_open(j, "originalUriBaseIds", '{');
    json_open(j, "PWD", '{');
    json_str(j, "uri", arena_sprintf(&c->arena, "file://%s%s", uri_escape(c, cwd), strcmp(cwd, "/") ? "/" : ""));
    json_close(j, '}');
    json_close(j, '}');
    free(cwd);
  }
  json_str(j, "columnKind", "unicodeCodePoints");
  json_open(j, "results", '[');
  for (int i = 0; i < log->nresults; i++)
    json_result(j, c, log, &log->results[i]);
  json_close(j, ']');

  json_close(j, '}');
  json_close(j, ']');
  fputs("\n}\n", out);
}
