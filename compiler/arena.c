/* arena.c: the compiler's only allocator.  Blocks are chained and freed
 * together; allocation is a pointer bump.  Out-of-memory ends the process
 * with a message, since the compiler cannot continue without memory. */
#include <stdlib.h>
#include <string.h>

#include "spmdc.h"

enum { ARENA_BLOCK = 64 * 1024, ARENA_ALIGN = 16 };

struct ArenaBlock {
  ArenaBlock *next;
  size_t used, cap;
  _Alignas(16) unsigned char data[];
};

static ArenaBlock *block_new(size_t cap, ArenaBlock *next) {
  ArenaBlock *b = malloc(sizeof(ArenaBlock) + cap);
  if (!b) {
    fputs("spmdc: fatal error: out of memory\n", stderr);
    exit(3);
  }
  b->next = next;
  b->used = 0;
  b->cap = cap;
  return b;
}

void *arena_alloc(Arena *a, size_t size) {
  size = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
  ArenaBlock *b = a->head;
  if (!b || b->cap - b->used < size) {
    if (size > ARENA_BLOCK / 4) {
      /* A large request gets a block of its own behind the current one. */
      ArenaBlock *big = block_new(size, b ? b->next : NULL);
      if (b)
        b->next = big;
      else
        a->head = big;
      big->used = size;
      memset(big->data, 0, size);
      return big->data;
    }
    b = a->head = block_new(ARENA_BLOCK, b);
  }
  void *p = b->data + b->used;
  b->used += size;
  memset(p, 0, size);
  return p;
}

void *arena_grow(Arena *a, void *items, int n, int *cap, size_t size, int first) {
  if (n < *cap)
    return items;
  int ncap = *cap ? 2 * *cap : first;
  void *p = arena_alloc(a, size * (size_t)ncap);
  if (n)
    memcpy(p, items, size * (size_t)n);
  *cap = ncap;
  return p;
}

char *arena_strndup(Arena *a, const char *s, size_t n) {
  char *p = arena_alloc(a, n + 1);
  memcpy(p, s, n);
  p[n] = '\0';
  return p;
}

char *arena_sprintf(Arena *a, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *p = arena_alloc(a, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(p, (size_t)n + 1, fmt, ap);
  va_end(ap);
  return p;
}

void arena_free(Arena *a) {
  for (ArenaBlock *b = a->head, *next; b; b = next) {
    next = b->next;
    free(b);
  }
  a->head = NULL;
}

void sb_init(StrBuf *sb, Arena *a) {
  sb->arena = a;
  sb->cap = 64;
  sb->len = 0;
  sb->data = arena_alloc(a, sb->cap);
}

static void sb_reserve(StrBuf *sb, size_t extra) {
  if (sb->len + extra + 1 <= sb->cap)
    return;
  size_t cap = sb->cap * 2;
  while (cap < sb->len + extra + 1)
    cap *= 2;
  char *d = arena_alloc(sb->arena, cap);
  memcpy(d, sb->data, sb->len + 1);
  sb->data = d;
  sb->cap = cap;
}

void sb_putc(StrBuf *sb, char ch) {
  sb_reserve(sb, 1);
  sb->data[sb->len++] = ch;
  sb->data[sb->len] = '\0';
}

void sb_puts(StrBuf *sb, const char *s) {
  size_t n = strlen(s);
  sb_reserve(sb, n);
  memcpy(sb->data + sb->len, s, n + 1);
  sb->len += n;
}

void sb_printf(StrBuf *sb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  sb_reserve(sb, (size_t)n);
  va_start(ap, fmt);
  vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  sb->len += (size_t)n;
}
