/* source.c: source files (loaded whole, with a line table), spans, and the
 * identifier intern table.  File indices start at 1; index 0 is "nowhere". */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "spmdc.h"

void compiler_init(Compiler *c) {
  memset(c, 0, sizeof *c);
  c->err = stderr;
  c->max_errors = 50;
  c->nfiles = 1; /* slot 0 is "no file" */
  c->capfiles = 16;
  c->files = arena_alloc(&c->arena, sizeof(SourceFile) * (size_t)c->capfiles);
  c->files[0].path = "<nowhere>";
  c->files[0].text = "";
  /* Never NULL, so that copying the first -I list (memcpy of 0 entries) is
   * defined behaviour. */
  c->include_dirs = arena_alloc(&c->arena, sizeof(char *));
}

void compiler_free(Compiler *c) {
  free(c->names.slots);
  arena_free(&c->arena);
}

int source_add(Compiler *c, const char *path, const char *text, size_t len) {
  if (c->nfiles == c->capfiles) {
    SourceFile *nf = arena_alloc(&c->arena, sizeof(SourceFile) * (size_t)c->capfiles * 2);
    memcpy(nf, c->files, sizeof(SourceFile) * (size_t)c->capfiles);
    c->files = nf;
    c->capfiles *= 2;
  }
  SourceFile *f = &c->files[c->nfiles];
  f->path = arena_strndup(&c->arena, path, strlen(path));
  f->text = arena_strndup(&c->arena, text, len); /* adds the final NUL */
  f->len = len;
  int n = 1;
  for (size_t i = 0; i < len; i++)
    n += text[i] == '\n';
  f->lines = arena_alloc(&c->arena, sizeof(uint32_t) * (size_t)n);
  f->nlines = 0;
  f->lines[f->nlines++] = 0;
  for (size_t i = 0; i < len; i++)
    if (text[i] == '\n')
      f->lines[f->nlines++] = (uint32_t)(i + 1);
  return c->nfiles++;
}

int source_load(Compiler *c, const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp)
    return 0;
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  for (;;) {
    if (!buf) {
      fclose(fp);
      return 0;
    }
    len += fread(buf + len, 1, cap - len, fp);
    if (len < cap)
      break;
    if (cap >= ((size_t)1 << 31)) { /* spans are 32-bit offsets */
      free(buf);
      fclose(fp);
      errno = EFBIG;
      return 0;
    }
    cap *= 2;
    char *nb = realloc(buf, cap);
    if (!nb)
      free(buf);
    buf = nb;
  }
  int err = ferror(fp);
  fclose(fp);
  if (err) {
    free(buf);
    errno = EIO;
    return 0;
  }
  int id = source_add(c, path, buf, len);
  free(buf);
  return id;
}

SourceFile *source_file(Compiler *c, uint32_t file) {
  return &c->files[file < (uint32_t)c->nfiles ? file : 0];
}

/* 1-based line and byte column of the start of sp. */
void source_position(Compiler *c, Span sp, int *line, int *col) {
  SourceFile *f = source_file(c, sp.file);
  if (sp.file == 0 || f->nlines == 0) {
    *line = *col = 0;
    return;
  }
  int lo = 0, hi = f->nlines - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (f->lines[mid] <= sp.begin)
      lo = mid;
    else
      hi = mid - 1;
  }
  *line = lo + 1;
  *col = (int)(sp.begin - f->lines[lo]) + 1;
}

Span span_join(Span a, Span b) {
  if (a.file == 0)
    return b;
  if (b.file == 0 || b.file != a.file)
    return a;
  Span s = a;
  if (b.begin < s.begin)
    s.begin = b.begin;
  if (b.end > s.end)
    s.end = b.end;
  return s;
}

static uint32_t hash_bytes(const char *s, size_t n) {
  uint32_t h = 2166136261u; /* FNV-1a */
  for (size_t i = 0; i < n; i++)
    h = (h ^ (unsigned char)s[i]) * 16777619u;
  return h;
}

static void intern_grow(Compiler *c) {
  InternTable *t = &c->names;
  size_t cap = t->cap ? t->cap * 2 : 1024;
  Name *slots = calloc(cap, sizeof(Name));
  if (!slots)
    diag_fatal(c, "out of memory");
  for (size_t i = 0; i < t->cap; i++) {
    Name n = t->slots[i];
    if (!n)
      continue;
    size_t j = hash_bytes(n, strlen(n)) & (cap - 1);
    while (slots[j])
      j = (j + 1) & (cap - 1);
    slots[j] = n;
  }
  free(t->slots);
  t->slots = slots;
  t->cap = cap;
}

Name intern(Compiler *c, const char *s, size_t len) {
  InternTable *t = &c->names;
  if ((t->count + 1) * 2 > t->cap)
    intern_grow(c);
  size_t j = hash_bytes(s, len) & (t->cap - 1);
  for (; t->slots[j]; j = (j + 1) & (t->cap - 1))
    if (strncmp(t->slots[j], s, len) == 0 && t->slots[j][len] == '\0')
      return t->slots[j];
  t->count++;
  return t->slots[j] = arena_strndup(&c->arena, s, len);
}

Name intern_cstr(Compiler *c, const char *s) { return intern(c, s, strlen(s)); }
