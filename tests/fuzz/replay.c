/* replay.c: runs the fuzz target on saved inputs without libFuzzer, so that
 * every build (gcc, ASan) replays the findings and the seed corpus:
 *   fuzz_replay FILE|DIR...
 * A directory's regular files run in name order.  A crash or a sanitizer
 * report fails the run; the input's name is printed before it runs. */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    fprintf(stderr, "fuzz_replay: cannot read '%s': %s\n", path, strerror(errno));
    return 1;
  }
  size_t cap = 4096, len = 0;
  uint8_t *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len, fp)) > 0) {
    len += got;
    if (len == cap) {
      uint8_t *nb = realloc(buf, cap *= 2);
      if (!nb)
        free(buf);
      buf = nb;
    }
  }
  fclose(fp);
  if (!buf) {
    fprintf(stderr, "fuzz_replay: out of memory reading '%s'\n", path);
    return 1;
  }
  fprintf(stderr, "fuzz_replay: %s\n", path);
  LLVMFuzzerTestOneInput(buf, len);
  free(buf);
  return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b) { return strcmp((*a)->d_name, (*b)->d_name); }

int main(int argc, char **argv) {
  if (LLVMFuzzerInitialize(&argc, &argv) != 0)
    return 1;
  int failed = 0, ran = 0;
  for (int i = 1; i < argc; i++) {
    struct stat st;
    if (stat(argv[i], &st) != 0 || !S_ISDIR(st.st_mode)) {
      failed |= run_file(argv[i]);
      ran++;
      continue;
    }
    struct dirent **names;
    int n = scandir(argv[i], &names, NULL, by_name);
    if (n < 0) {
      fprintf(stderr, "fuzz_replay: cannot list '%s': %s\n", argv[i], strerror(errno));
      return 1;
    }
    for (int j = 0; j < n; j++) {
      char *path = malloc(strlen(argv[i]) + strlen(names[j]->d_name) + 2);
      if (!path)
        return 1;
      sprintf(path, "%s/%s", argv[i], names[j]->d_name);
      if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
        failed |= run_file(path);
        ran++;
      }
      free(path);
      free(names[j]);
    }
    free(names);
  }
  printf("%d inputs replayed\n", ran);
  return failed;
}
