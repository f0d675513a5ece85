/* main.c: the spmdc command line (SPEC section 11).  main() parses options
 * into a Driver and runs the phases in order; each phase reports its errors
 * and the driver stops after the first phase that had any.  Exit status: 0
 * success, 1 a rejected program, 2 a usage error. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

typedef enum { MODE_COMPILE, MODE_CHECK, MODE_DUMP_AST, MODE_DUMP_TYPES, MODE_COMM_REPORT, MODE_EMIT_C, MODE_RUN } Mode;

typedef struct Driver {
  Mode mode;
  bool mode_set;
  const char *input;
  const char *output;
  const char *color;     /* auto, always, never */
  int nprocs;            /* run -n */
  char **run_args;       /* after `--` */
  int nrun_args;
  int opt_level;
} Driver;

static const char usage_text[] =
    "usage: spmdc [options] FILE.spmd                compile to an executable\n"
    "       spmdc run -n N [options] FILE.spmd [-- ARGS]   compile and run under mpirun\n"
    "\n"
    "modes:\n"
    "  -o FILE           write the executable (or with -S, the C file) to FILE\n"
    "  -S                emit C only\n"
    "  --check           parse and type-check only\n"
    "  --dump-ast        print the syntax tree\n"
    "  --dump-types      print every binding with its inferred type\n"
    "  --comm-report     list every collective, forward and backward, with bytes per rank\n"
    "options:\n"
    "  -D NAME=VALUE     override `const NAME` with an integer or float VALUE\n"
    "  -I DIR            search DIR for imported modules (before the standard library)\n"
    "  -O0 -O1 -O2 -O3   optimisation level of the C compiler (default -O2)\n"
    "  --color=WHEN      colour diagnostics: auto (default), always or never\n"
    "  --max-errors=N    stop after N errors (default 50; 0: no limit)\n"
    "  --version         print the version\n"
    "  --help            print this help\n";

static _Noreturn void usage_error(const char *fmt, const char *arg) {
  fputs("spmdc: error: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\nrun 'spmdc --help' for usage\n", stderr);
  exit(2);
}

static void set_mode(Driver *d, Mode m, const char *flag) {
  if (d->mode_set && d->mode != m)
    usage_error("%s cannot be combined with another mode", flag);
  d->mode = m;
  d->mode_set = true;
}

/* -D NAME=VALUE: the value must be an integer or a float literal. */
static void add_define(Compiler *c, const char *arg) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg)
    usage_error("-D expects NAME=VALUE, got '%s'", arg);
  Define *d = arena_alloc(&c->arena, sizeof(Define));
  d->name = arena_strndup(&c->arena, arg, (size_t)(eq - arg));
  d->value = eq + 1;
  Expr *e = ast_expr(c, EX_INT, (Span){0, 0, 0});
  char *end;
  errno = 0;
  e->ival = strtoll(d->value, &end, 10);
  if (*d->value == '\0' || *end != '\0' || errno) {
    e->kind = EX_FLOAT;
    errno = 0;
    e->fval = strtod(d->value, &end);
    if (*d->value == '\0' || *end != '\0' || errno)
      usage_error("-D %s: the value must be an integer or a float", arg);
  }
  d->expr = e;
  d->next = c->defines;
  c->defines = d;
}

static void add_include(Compiler *c, const char *dir) {
  const char **dirs = arena_alloc(&c->arena, sizeof(char *) * (size_t)(c->ninclude + 1));
  memcpy(dirs, c->include_dirs, sizeof(char *) * (size_t)c->ninclude);
  dirs[c->ninclude++] = dir;
  c->include_dirs = dirs;
}

/* The value of an option given as `-X VALUE` or `-XVALUE`. */
static const char *option_value(int argc, char **argv, int *i, const char *flag) {
  size_t n = strlen(flag);
  if (argv[*i][n] != '\0')
    return argv[*i] + n;
  if (*i + 1 >= argc)
    usage_error("%s needs an argument", flag);
  return argv[++*i];
}

static void parse_args(Driver *d, Compiler *c, int argc, char **argv) {
  int i = 1;
  if (argc > 1 && strcmp(argv[1], "run") == 0) {
    set_mode(d, MODE_RUN, "run");
    i = 2;
  }
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      if (d->mode != MODE_RUN)
        usage_error("'%s' is only for `spmdc run`", a);
      d->run_args = argv + i + 1;
      d->nrun_args = argc - i - 1;
      break;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      fputs(usage_text, stdout);
      exit(0);
    } else if (strcmp(a, "--version") == 0) {
      printf("spmdc %s\n", SPMDC_VERSION);
      exit(0);
    } else if (strcmp(a, "--check") == 0) {
      set_mode(d, MODE_CHECK, a);
    } else if (strcmp(a, "--dump-ast") == 0) {
      set_mode(d, MODE_DUMP_AST, a);
    } else if (strcmp(a, "--dump-types") == 0) {
      set_mode(d, MODE_DUMP_TYPES, a);
    } else if (strcmp(a, "--comm-report") == 0) {
      set_mode(d, MODE_COMM_REPORT, a);
    } else if (strcmp(a, "-S") == 0) {
      set_mode(d, MODE_EMIT_C, a);
    } else if (strncmp(a, "-o", 2) == 0) {
      d->output = option_value(argc, argv, &i, "-o");
    } else if (strncmp(a, "-D", 2) == 0) {
      add_define(c, option_value(argc, argv, &i, "-D"));
    } else if (strncmp(a, "-I", 2) == 0) {
      add_include(c, option_value(argc, argv, &i, "-I"));
    } else if (strcmp(a, "-n") == 0 && d->mode == MODE_RUN) {
      const char *v = option_value(argc, argv, &i, "-n");
      char *end;
      long n = strtol(v, &end, 10);
      if (*end || n < 1 || n > 4096)
        usage_error("-n expects a number of ranks, got '%s'", v);
      d->nprocs = (int)n;
    } else if (a[0] == '-' && a[1] == 'O' && (a[2] >= '0' && a[2] <= '3') && a[3] == '\0') {
      d->opt_level = a[2] - '0';
    } else if (strncmp(a, "--color=", 8) == 0) {
      d->color = a + 8;
      if (strcmp(d->color, "auto") && strcmp(d->color, "always") && strcmp(d->color, "never"))
        usage_error("--color expects auto, always or never, got '%s'", d->color);
    } else if (strncmp(a, "--max-errors=", 13) == 0) {
      char *end;
      long n = strtol(a + 13, &end, 10);
      if (*end || n < 0 || a[13] == '\0')
        usage_error("--max-errors expects a count, got '%s'", a + 13);
      c->max_errors = (int)n;
    } else if (a[0] == '-' && a[1] != '\0') {
      usage_error("unknown option '%s'", a);
    } else if (d->input) {
      usage_error("more than one input file ('%s')", a);
    } else {
      d->input = a;
    }
  }
  if (!d->input)
    usage_error("%s", "no input file");
  if (d->mode == MODE_RUN && d->nprocs == 0)
    usage_error("%s", "spmdc run needs -n N");
}

static bool want_color(const char *setting) {
  if (setting && strcmp(setting, "always") == 0)
    return true;
  if (setting && strcmp(setting, "never") == 0)
    return false;
  const char *term = getenv("TERM");
  return isatty(fileno(stderr)) && !getenv("NO_COLOR") && term && strcmp(term, "dumb") != 0;
}

static const char *mode_flag(Mode m) {
  switch (m) {
  case MODE_COMM_REPORT: return "--comm-report";
  case MODE_EMIT_C: return "-S";
  case MODE_RUN: return "run";
  default: return "compiling to an executable (-o)";
  }
}

int main(int argc, char **argv) {
  Compiler compiler;
  Compiler *c = &compiler;
  compiler_init(c);
  Driver d = {.mode = MODE_COMPILE, .opt_level = 2};
  parse_args(&d, c, argc, argv);
  c->color = want_color(d.color);
  c->stdlib_dir = getenv("SPMDC_STDLIB") ? getenv("SPMDC_STDLIB") : SPMD_STDLIB_DIR;

  Mesh mesh;
  bool ok = resolve_program(c, d.input, &mesh);
  for (Define *def = c->defines; def; def = def->next)
    if (!def->used) {
      fprintf(stderr, "spmdc: error: -D %s=%s: the program has no constant named '%s'\n",
              def->name, def->value, def->name);
      compiler_free(c);
      return 2;
    }
  int status = 0;
  if (d.mode == MODE_DUMP_AST && c->main) {
    for (Module *m = c->modules; m; m = m->next)
      ast_dump_module(c, m, stdout);
  } else if (!ok) {
    status = 1;
  } else if (!check_program(c, &mesh, d.mode == MODE_DUMP_TYPES ? stdout : NULL)) {
    status = 1;
  } else if (d.mode != MODE_CHECK && d.mode != MODE_DUMP_TYPES) {
    fprintf(stderr, "spmdc: error: %s is not implemented yet; `spmdc --check` checks the program\n",
            mode_flag(d.mode));
    status = 2;
  }
  if (c->nerrors)
    status = 1;
  if (c->nerrors > 1 && !c->too_many)
    fprintf(stderr, "%d errors\n", c->nerrors);
  compiler_free(c);
  return status;
}
