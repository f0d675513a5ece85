/* main.c: the spmdc command line (SPEC section 11).  main() parses options
 * into a Driver and runs the phases in order; each phase reports its errors
 * and the driver stops after the first phase that had any.  Exit status: 0
 * success, 1 a rejected program, 2 a usage error. */
#define _XOPEN_SOURCE 700 /* realpath, and POSIX 2008 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include "ir.h"
#include "comm_report.h"
#include "memory_report.h"
#include "schedule.h"

typedef enum {
  MODE_COMPILE, MODE_CHECK, MODE_DUMP_AST, MODE_DUMP_TYPES, MODE_DUMP_IR, MODE_COMM_REPORT, MODE_MEMORY_REPORT,
  MODE_REGIONS, MODE_EMIT_C, MODE_RUN, MODE_SHARED
} Mode;

typedef struct Driver {
  Mode mode;
  bool mode_set;
  const char *input;
  const char *output;
  const char *color;     /* auto, always, never */
  DiagFormat format;     /* --diagnostics-format */
  int nprocs;            /* run -n */
  char **run_args;       /* after `--` */
  int nrun_args;
  int opt_level;
  const char *depfile;   /* --depfile FILE, or -MD: OUTPUT.d */
  const char *mesh;      /* --mesh a=n,... of --memory-report */
  bool depfile_md;
  bool print_paths;
  bool cuda;             /* --target=cuda */
} Driver;

/* Where spmdc finds the standard library and the runtime (see find_paths). */
typedef struct Paths {
  const char *stdlib, *rt_include, *rt_lib, *blas_lib, *dnnl_lib, *gomp_lib, *sleef_lib, *cjson_lib;
  const char *layout; /* "installed" or "build tree" */
  const char *rt_cuda_lib, *nvcc; /* the CUDA target's runtime and compiler; "" if this spmdc has none */
} Paths;

static const char usage_text[] =
    "usage: spmdc [options] FILE.spmd                compile to an executable\n"
    "       spmdc run -n N [options] FILE.spmd [-- ARGS]   compile and run under mpirun\n"
    "\n"
    "modes:\n"
    "  -o FILE           write the executable (or with -S, the C file) to FILE\n"
    "  -S                emit C only (with --target=cuda, also the kernels: FILE.cu beside FILE.c)\n"
    "  --shared          build a shared library of the export fns (-o libNAME.so, default\n"
    "                    libFILE.so) and its header (libNAME.h), for hosts such as\n"
    "                    Python's spmdc module (docs/python.md)\n"
    "  --check           run every check that -S runs (types, lowering, autodiff), write nothing\n"
    "  --dump-ast        print the syntax tree\n"
    "  --dump-types      print every binding with its inferred type\n"
    "  --dump-ir         print the IR after autodiff\n"
    "  --comm-report     list every collective, forward and backward, with bytes per rank\n"
    "  --regions         list the graph regions of main's loops (the stretches of device work the\n"
    "                    CUDA target captures and replays) and what stops each one\n"
    "  --memory-report   per rank: parameters, optimizer state, residuals and the peak of\n"
    "                    temporaries, as formulas of the axis sizes and in bytes\n"
    "  --mesh a=n,...    the mesh whose numbers --memory-report and --comm-report print (default: the declared sizes)\n"
    "options:\n"
    "  -D NAME=VALUE     override `const NAME` with an integer or float VALUE\n"
    "  -I DIR            search DIR for imported modules (before the standard library)\n"
    "  -O0 -O1 -O2 -O3   optimisation level of the C compiler (default -O2)\n"
    "  --target=TARGET   cpu (default): C over the CPU runtime; cuda: the same host C\n"
    "                    with the fused elementwise loops as CUDA kernels, one GPU per rank\n"
    "  --depfile=FILE    also write Make-style dependencies of the output: the\n"
    "                    input and every module it imports (with -S or -o)\n"
    "  -MD               the same, into OUTPUT.d\n"
    "  --color=WHEN      colour diagnostics: auto (default), always or never\n"
    "  --diagnostics-format=FORMAT\n"
    "                    text (default), or sarif: a SARIF 2.1.0 log on standard output\n"
    "  --max-errors=N    stop after N errors (default 50; 0: no limit)\n"
    "  --print-paths     print where the standard library and the runtime are\n"
    "  --version         print the version\n"
    "  --help            print this help\n";

static bool usage_in_sarif; /* --diagnostics-format=sarif is on the command line */

static _Noreturn void usage_error(const char *fmt, const char *arg) {
  fputs("spmdc: error: ", stderr);
  fprintf(stderr, fmt, arg);
  fputs("\nrun 'spmdc --help' for usage\n", stderr);
  if (usage_in_sarif) { /* the log says it too, for tools reading only it */
    Compiler log;
    compiler_init(&log);
    log.diag_format = DIAG_FORMAT_SARIF;
    diag_tool_error(&log, fmt, arg);
    diag_finish(&log, 2);
    compiler_free(&log);
  }
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
  if (c->ninclude)
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
  for (int j = 1; j < argc && strcmp(argv[j], "--") != 0; j++)
    usage_in_sarif |= strcmp(argv[j], "--diagnostics-format=sarif") == 0;
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
    } else if (strcmp(a, "--dump-ir") == 0) {
      set_mode(d, MODE_DUMP_IR, a);
    } else if (strcmp(a, "--regions") == 0) {
      set_mode(d, MODE_REGIONS, a);
    } else if (strcmp(a, "--comm-report") == 0) {
      set_mode(d, MODE_COMM_REPORT, a);
    } else if (strcmp(a, "--memory-report") == 0) {
      set_mode(d, MODE_MEMORY_REPORT, a);
    } else if (strcmp(a, "--mesh") == 0 || strncmp(a, "--mesh=", 7) == 0) {
      d->mesh = a[6] == '=' ? a + 7 : option_value(argc, argv, &i, "--mesh");
    } else if (strcmp(a, "-S") == 0) {
      set_mode(d, MODE_EMIT_C, a);
    } else if (strcmp(a, "--shared") == 0) {
      set_mode(d, MODE_SHARED, a);
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
    } else if (strcmp(a, "--depfile") == 0 || strncmp(a, "--depfile=", 10) == 0) {
      d->depfile = a[9] == '=' ? a + 10 : option_value(argc, argv, &i, "--depfile");
      if (!*d->depfile)
        usage_error("%s needs a file name", "--depfile");
    } else if (strcmp(a, "-MD") == 0) {
      d->depfile_md = true;
    } else if (strncmp(a, "--target=", 9) == 0) {
      if (strcmp(a + 9, "cpu") && strcmp(a + 9, "cuda"))
        usage_error("--target expects cpu or cuda, got '%s'", a + 9);
      d->cuda = strcmp(a + 9, "cuda") == 0;
    } else if (strcmp(a, "--print-paths") == 0) {
      d->print_paths = true;
    } else if (a[0] == '-' && a[1] == 'O' && (a[2] >= '0' && a[2] <= '3') && a[3] == '\0') {
      d->opt_level = a[2] - '0';
    } else if (strncmp(a, "--color=", 8) == 0) {
      d->color = a + 8;
      if (strcmp(d->color, "auto") && strcmp(d->color, "always") && strcmp(d->color, "never"))
        usage_error("--color expects auto, always or never, got '%s'", d->color);
    } else if (strncmp(a, "--diagnostics-format=", 21) == 0) {
      if (strcmp(a + 21, "text") == 0)
        d->format = DIAG_FORMAT_TEXT;
      else if (strcmp(a + 21, "sarif") == 0)
        d->format = DIAG_FORMAT_SARIF;
      else
        usage_error("--diagnostics-format expects text or sarif, got '%s'", a + 21);
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
  if (d->format == DIAG_FORMAT_SARIF) {
    static const char *const writes_stdout[] = {
        [MODE_DUMP_AST] = "--dump-ast", [MODE_DUMP_TYPES] = "--dump-types", [MODE_DUMP_IR] = "--dump-ir",
        [MODE_COMM_REPORT] = "--comm-report", [MODE_REGIONS] = "--regions", [MODE_MEMORY_REPORT] = "--memory-report", [MODE_RUN] = "spmdc run"};
    const char *other = d->print_paths ? "--print-paths"
                        : d->mode == MODE_EMIT_C && d->output && strcmp(d->output, "-") == 0 ? "-S -o -"
                        : d->mode < (int)(sizeof writes_stdout / sizeof *writes_stdout) ? writes_stdout[d->mode]
                                                                                          : NULL;
    if (other)
      usage_error("--diagnostics-format=sarif writes the log to standard output, so it cannot be combined with %s",
                  other);
  }
  if (d->print_paths && !d->input)
    return;
  if (!d->input)
    usage_error("%s", "no input file");
  if ((d->depfile || d->depfile_md) && d->mode != MODE_COMPILE && d->mode != MODE_EMIT_C && d->mode != MODE_SHARED)
    usage_error("%s", "--depfile and -MD describe an output: use them with -S, --shared or when building an executable");
  if (d->mesh && d->mode != MODE_MEMORY_REPORT && d->mode != MODE_COMM_REPORT)
    usage_error("%s", "--mesh gives the mesh of --memory-report and --comm-report (a program takes its own --mesh when it "
                "runs)");
  if (d->mode == MODE_RUN && d->nprocs == 0)
    usage_error("%s", "spmdc run needs -n N");
}

/* --mesh dp=2,tp=2 for --memory-report: a size for axes of the program's
 * mesh (the others keep their declared size) */
static bool parse_mesh(Compiler *c, const Mesh *mesh, const char *text, long long *sizes) {
  const char *p = text;
  while (*p) {
    const char *eq = strchr(p, '='), *comma = strchr(p, ',');
    if (!comma)
      comma = p + strlen(p);
    if (!eq || eq > comma) {
      diag_tool_error(c, "--mesh expects axis=size,..., got '%s'", text);
      return false;
    }
    int a;
    for (a = 0; a < mesh->naxes; a++)
      if (strlen(mesh->axes[a].name) == (size_t)(eq - p) && strncmp(mesh->axes[a].name, p, (size_t)(eq - p)) == 0)
        break;
    char *end;
    long long n = strtoll(eq + 1, &end, 10);
    if (a == mesh->naxes) {
      diag_tool_error(c, "--mesh: the program's mesh has no axis '%s'", arena_strndup(&c->arena, p, (size_t)(eq - p)));
      return false;
    }
    if (end != comma || n < 1 || n > 1000000) {
      diag_tool_error(c, "--mesh: the size of '%s' must be a positive integer, got '%s'", mesh->axes[a].name,
                      arena_strndup(&c->arena, eq + 1, (size_t)(comma - eq - 1)));
      return false;
    }
    sizes[a] = n;
    p = *comma ? comma + 1 : comma;
  }
  return true;
}

static bool want_color(const char *setting) {
  if (setting && strcmp(setting, "always") == 0)
    return true;
  if (setting && strcmp(setting, "never") == 0)
    return false;
  const char *term = getenv("TERM");
  return isatty(fileno(stderr)) && !getenv("NO_COLOR") && term && strcmp(term, "dumb") != 0;
}

/* Writes path atomically: a temporary beside it, then rename. */
static bool write_atomic(Compiler *c, const char *path, void (*write)(Compiler *, IrProgram *, FILE *, const void *),
                         IrProgram *prog, const void *arg) {
  char *tmp = arena_sprintf(&c->arena, "%s.tmp.%ld", path, (long)getpid());
  FILE *fp = fopen(tmp, "w");
  if (!fp) {
    diag_tool_error(c, "cannot write '%s': %s", tmp, strerror(errno));
    return false;
  }
  write(c, prog, fp, arg);
  bool ok = !ferror(fp);
  ok &= fclose(fp) == 0;
  if (!ok || rename(tmp, path) != 0) {
    diag_tool_error(c, "cannot write '%s': %s", path, strerror(errno));
    remove(tmp);
    return false;
  }
  return true;
}

static void put_c(Compiler *c, IrProgram *prog, FILE *fp, const void *source) { emit_c(c, prog, fp, source); }

static bool write_c(Compiler *c, IrProgram *prog, const char *path, const char *source) {
  return write_atomic(c, path, put_c, prog, source);
}

/* --target=cuda: FILE.cu beside FILE.c (NAME.c -> NAME.cu, else PATH.cu) */
static const char *cu_path(Compiler *c, const char *cpath) {
  size_t n = strlen(cpath);
  return n > 2 && strcmp(cpath + n - 2, ".c") == 0 ? arena_sprintf(&c->arena, "%.*s.cu", (int)(n - 2), cpath)
                                                   : arena_sprintf(&c->arena, "%s.cu", cpath);
}

typedef struct CudaArgs {
  const char *source;
  FILE *cu;
} CudaArgs;

static void put_cuda(Compiler *c, IrProgram *prog, FILE *fp, const void *arg) {
  const CudaArgs *a = arg;
  emit_cuda(c, prog, fp, a->cu, a->source);
}

/* The host C at cpath and its kernels at cu_path(cpath), each renamed into
 * place when complete. */
static bool write_cuda(Compiler *c, IrProgram *prog, const char *cpath, const char *source) {
  const char *cupath = cu_path(c, cpath);
  char *tmp = arena_sprintf(&c->arena, "%s.tmp.%ld", cupath, (long)getpid());
  FILE *cu = fopen(tmp, "w");
  if (!cu) {
    diag_tool_error(c, "cannot write '%s': %s", tmp, strerror(errno));
    return false;
  }
  CudaArgs a = {source, cu};
  bool ok = write_atomic(c, cpath, put_cuda, prog, &a);
  ok &= !ferror(cu);
  ok &= fclose(cu) == 0;
  if (ok && rename(tmp, cupath) != 0) {
    diag_tool_error(c, "cannot write '%s': %s", cupath, strerror(errno));
    ok = false;
  }
  if (!ok)
    remove(tmp);
  return ok;
}

/* -S -o - with --target=cuda: the host C, then the kernels. */
static void print_cuda(Compiler *c, IrProgram *prog, const char *source) {
  char *buf = NULL;
  size_t n = 0;
  FILE *cu = open_memstream(&buf, &n);
  if (!cu)
    diag_fatal(c, "out of memory");
  emit_cuda(c, prog, stdout, cu, source);
  fclose(cu);
  fputs("/* ---- the kernels (FILE.cu) ---- */\n", stdout);
  fwrite(buf, 1, n, stdout);
  free(buf);
}

typedef struct HeaderArgs {
  const char *source, *guard;
} HeaderArgs;

static void put_header(Compiler *c, IrProgram *prog, FILE *fp, const void *arg) {
  const HeaderArgs *h = arg;
  emit_header(c, prog, fp, h->source, h->guard);
}

/* NAME.h beside NAME.c (or libNAME.so): the C entry points of the export
 * fns.  Returns the header's path, or NULL. */
static const char *write_header(Compiler *c, IrProgram *prog, const char *cpath, const char *source) {
  size_t n = strlen(cpath);
  const char *base = n > 2 && strcmp(cpath + n - 2, ".c") == 0    ? arena_strndup(&c->arena, cpath, n - 2)
                     : n > 3 && strcmp(cpath + n - 3, ".so") == 0 ? arena_strndup(&c->arena, cpath, n - 3)
                                                                  : cpath;
  const char *path = arena_sprintf(&c->arena, "%s.h", base);
  const char *file = strrchr(base, '/') ? strrchr(base, '/') + 1 : base;
  StrBuf guard;
  sb_init(&guard, &c->arena);
  sb_puts(&guard, "SPMD_");
  for (const char *p = file; *p; p++)
    sb_putc(&guard, (char)((*p >= 'a' && *p <= 'z') ? *p - 32 : ((*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')) ? *p : '_'));
  sb_puts(&guard, "_H");
  HeaderArgs h = {source, guard.data};
  return write_atomic(c, path, put_header, prog, &h) ? path : NULL;
}

/* nvcc's flags for the kernels (also printed by --print-paths, for tests) */
#define NVCC_FLAGS "-std=c++17 -fmad=false -gencode arch=compute_90,code=[sm_90,compute_90]"

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v && *v ? v : dflt;
}

/* Runs argv, waiting for it; returns its exit status (or 127). */
static int run_command(char **argv) {
  pid_t pid = fork();
  if (pid < 0)
    return 127;
  if (pid == 0) {
    execvp(argv[0], argv);
    fprintf(stderr, "spmdc: error: cannot run '%s': %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return 127;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* path with symbolic links and '..' resolved, in the arena; NULL if it does
 * not exist. */
static const char *real_path(Compiler *c, const char *path) {
  char *full = realpath(path, NULL);
  if (!full)
    return NULL;
  const char *p = arena_sprintf(&c->arena, "%s", full);
  free(full);
  return p;
}

/* The directory holding this executable (from /proc/self/exe), or NULL. */
static const char *own_dir(Compiler *c) {
  const char *exe = real_path(c, "/proc/self/exe");
  const char *slash = exe ? strrchr(exe, '/') : NULL;
  return slash ? arena_strndup(&c->arena, exe, (size_t)(slash - exe)) : NULL;
}

static bool is_dir(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* An installed spmdc finds the standard library and the runtime relative to
 * its own directory (<prefix>/bin -> <prefix>/share/spmdc/stdlib, ...), so a
 * prefix moved elsewhere keeps working; an spmdc in its build tree uses the
 * source and build directories it was configured with.  SPMDC_STDLIB,
 * SPMDC_RT_INCLUDE, SPMDC_RT_LIB, SPMDC_BLAS_LIB, SPMDC_SLEEF_LIB and SPMDC_CJSON_LIB override
 * each one. */
static Paths find_paths(Compiler *c) {
  Paths p = {SPMD_STDLIB_DIR, SPMD_RT_INCLUDE, SPMD_RT_LIB, SPMD_BLAS_LIB, SPMD_DNNL_LIB, SPMD_GOMP_LIB,
             SPMD_SLEEF_LIB, SPMD_CJSON_LIB, "build tree", SPMD_RT_CUDA_LIB, SPMD_NVCC};
  const char *dir = own_dir(c);
  const char *stdlib = dir ? real_path(c, arena_sprintf(&c->arena, "%s/%s", dir, SPMD_INSTALL_STDLIB)) : NULL;
  const char *lib = dir ? real_path(c, arena_sprintf(&c->arena, "%s/%s", dir, SPMD_INSTALL_RT_LIB)) : NULL;
  const char *include = dir ? real_path(c, arena_sprintf(&c->arena, "%s/%s", dir, SPMD_INSTALL_RT_INCLUDE)) : NULL;
  if (stdlib && lib && include && is_dir(stdlib) && access(lib, R_OK) == 0) {
    p.stdlib = stdlib;
    p.rt_lib = lib;
    p.rt_include = include;
    p.layout = "installed";
  }
  p.stdlib = env_or("SPMDC_STDLIB", p.stdlib);
  p.rt_include = env_or("SPMDC_RT_INCLUDE", p.rt_include);
  p.rt_lib = env_or("SPMDC_RT_LIB", p.rt_lib);
  p.blas_lib = env_or("SPMDC_BLAS_LIB", p.blas_lib);
  p.dnnl_lib = env_or("SPMDC_DNNL_LIB", p.dnnl_lib);
  p.sleef_lib = env_or("SPMDC_SLEEF_LIB", p.sleef_lib);
  p.cjson_lib = env_or("SPMDC_CJSON_LIB", p.cjson_lib);
  p.rt_cuda_lib = env_or("SPMDC_RT_CUDA_LIB", SPMD_RT_CUDA_LIB);
  p.nvcc = env_or("SPMDC_NVCC", SPMD_NVCC);
  return p;
}

static void print_paths(const Paths *p) {
  printf("layout: %s\nstdlib: %s\nruntime include: %s\nruntime library: %s\nblas library: %s\n"
         "sleef library: %s\n",
         p->layout, p->stdlib, p->rt_include, p->rt_lib, p->blas_lib, p->sleef_lib);
  if (*p->nvcc) /* the CUDA target */
    printf("nvcc: %s\nnvcc flags: %s\ncuda runtime library: %s\n", p->nvcc, NVCC_FLAGS,
           *p->rt_cuda_lib ? p->rt_cuda_lib : "(none)");
}

/* Appends the words of SPMD_RT_CFLAGS (the sanitizer flags of a sanitizer
 * build of libspmdrt: -fsanitize=... -fno-sanitize-recover=undefined, so
 * undefined behaviour in a generated program stops it, as in the runtime)
 * to argv; returns the new count. */
static int add_rt_cflags(Compiler *c, char **argv, int n, int cap) {
  const char *p = SPMD_RT_CFLAGS;
  while (*p) {
    while (*p == ' ')
      p++;
    size_t len = strcspn(p, " ");
    if (len && n < cap)
      argv[n++] = arena_strndup(&c->arena, p, len);
    p += len;
  }
  return n;
}

/* A shared library (spmdc --shared): what compile_c and compile_cuda add.
 * The generated C and the host interface (spmdrt_host.c, beside spmdrt.h)
 * compiled with -fPIC and -include of the program's header, linked with
 * the shared runtime (libspmdrt.so beside libspmdrt.a), found at run time
 * through an rpath. */
typedef struct Shared {
  const char *header;  /* NULL: an executable */
  const char *target;  /* "cpu" or "cuda" */
} Shared;

static int add_shared_flags(Compiler *c, const Paths *paths, const Shared *sh, char **argv, int n) {
  if (!sh || !sh->header)
    return n;
  argv[n++] = "-fPIC";
  argv[n++] = "-shared";
  argv[n++] = "-D_POSIX_C_SOURCE=200809L"; /* spmdrt_host.c: clock_gettime, nanosleep, open_memstream */
  /* the library's calls of its own functions bind to them: an export fn
   * named like a symbol loaded before (glibc's `step`) is not interposed */
  argv[n++] = "-Wl,-Bsymbolic";
  argv[n++] = arena_sprintf(&c->arena, "-DSPMD_HOST_TARGET=\"%s\"", sh->target);
  argv[n++] = "-include";
  argv[n++] = (char *)sh->header;
  argv[n++] = arena_sprintf(&c->arena, "%s/spmdrt_host.c", paths->rt_include);
  return n;
}

/* the shared runtime beside the static one, and its rpath */
static int add_shared_runtime(Compiler *c, const Paths *paths, char **argv, int n) {
  const char *slash = strrchr(paths->rt_lib, '/');
  const char *dir = slash ? arena_strndup(&c->arena, paths->rt_lib, (size_t)(slash - paths->rt_lib)) : ".";
  argv[n++] = arena_sprintf(&c->arena, "%s/libspmdrt.so", dir);
  argv[n++] = arena_sprintf(&c->arena, "-Wl,-rpath,%s", dir);
  return n;
}

/* mpicc the generated C (and obj, if not NULL: the simulated kernels) into
 * an executable (or with sh, a shared library) linked with libspmdrt and
 * BLAS. */
static bool compile_c(Compiler *c, const Paths *paths, const char *cfile, const char *obj, const char *exe, int opt,
                      const Shared *sh) {
  char *argv[48];
  int n = 0;
  argv[n++] = (char *)env_or("SPMDC_CC", "mpicc");
  argv[n++] = "-std=c17";
  argv[n++] = arena_sprintf(&c->arena, "-O%d", opt);
  argv[n++] = "-Wall";
  argv[n++] = "-Wextra";
  /* the fused loops' sqrt vectorises only without errno; no contraction of
   * a * b + c into an FMA, so a fused loop rounds as the runtime's kernels */
  argv[n++] = "-fno-math-errno";
  argv[n++] = "-ffp-contract=off";
  n = add_rt_cflags(c, argv, n, 18); /* a sanitizer build of libspmdrt (14 more follow) */
  const char *extra = getenv("SPMDC_CFLAGS"); /* e.g. -Werror in tests */
  if (extra && *extra)
    argv[n++] = (char *)extra;
  argv[n++] = arena_sprintf(&c->arena, "-I%s", paths->rt_include);
  argv[n++] = (char *)cfile;
  n = add_shared_flags(c, paths, sh, argv, n);
  if (obj)
    argv[n++] = (char *)obj;
  argv[n++] = "-o";
  argv[n++] = (char *)exe;
  if (sh && sh->header)
    n = add_shared_runtime(c, paths, argv, n);
  else
    argv[n++] = (char *)paths->rt_lib;
  argv[n++] = (char *)paths->blas_lib;
  argv[n++] = (char *)paths->dnnl_lib; /* bf16 GEMM */
  argv[n++] = (char *)paths->gomp_lib;
  argv[n++] = (char *)paths->sleef_lib;
  argv[n++] = (char *)paths->cjson_lib; /* .safetensors headers */
  if (obj)
    argv[n++] = "-lstdc++";
  argv[n++] = "-lm";
  argv[n] = NULL;
  int rc = run_command(argv);
  if (rc != 0)
    diag_tool_error(c, "the C compiler failed (exit %d) on %s", rc, cfile);
  return rc == 0;
}

/* SPMDC_CUDA_SIM=1 spmdc --target=cuda: the simulation build, for machines
 * without a GPU (tests): the kernels' .cu compiled by the host C++ compiler
 * with SPMD_CUDA_SIM (each launch a loop over the same per-element body),
 * rounding as the CPU's loops (-ffp-contract=off), linked with the CPU
 * runtime. */
static bool compile_cuda_sim(Compiler *c, const Paths *paths, const char *cfile, const char *cufile, const char *exe,
                             int opt, const Shared *sh) {
  const char *obj = arena_sprintf(&c->arena, "%s.o", cufile);
  char *argv[26];
  int n = 0;
  argv[n++] = (char *)env_or("SPMDC_CXX", "c++");
  argv[n++] = "-x";
  argv[n++] = "c++";
  argv[n++] = "-std=c++17";
  argv[n++] = arena_sprintf(&c->arena, "-O%d", opt);
  argv[n++] = "-Wall";
  argv[n++] = "-Wextra";
  argv[n++] = "-fno-math-errno";
  argv[n++] = "-ffp-contract=off";
  argv[n++] = "-DSPMD_CUDA_SIM";
  if (sh && sh->header)
    argv[n++] = "-fPIC";
  n = add_rt_cflags(c, argv, n, 18);
  const char *extra = getenv("SPMDC_CXXFLAGS"); /* tests: -DSPMD_MULTI_FIELDS=2 (emit_cuda.c) */
  if (extra && *extra)
    argv[n++] = (char *)extra;
  argv[n++] = arena_sprintf(&c->arena, "-I%s", paths->rt_include);
  argv[n++] = "-c";
  argv[n++] = (char *)cufile;
  argv[n++] = "-o";
  argv[n++] = (char *)obj;
  argv[n] = NULL;
  int rc = run_command(argv);
  if (rc != 0) {
    diag_tool_error(c, "the C++ compiler failed (exit %d) on %s", rc, cufile);
    return false;
  }
  bool ok = compile_c(c, paths, cfile, obj, exe, opt, sh);
  remove(obj);
  return ok;
}

/* --target=cuda: nvcc the kernels, mpicc the host C, link both with the
 * CUDA runtime.  The kernels round as the CPU's loops: no FMA contraction
 * (-fmad=false), IEEE division and square root (nvcc's defaults), no fast
 * math; code for sm_90 and PTX for later GPUs. */
static bool compile_cuda(Compiler *c, const Paths *paths, const char *cfile, const char *cufile, const char *exe,
                         int opt, const Shared *sh) {
  if (getenv("SPMDC_CUDA_SIM") && *getenv("SPMDC_CUDA_SIM") && strcmp(getenv("SPMDC_CUDA_SIM"), "0"))
    return compile_cuda_sim(c, paths, cfile, cufile, exe, opt, sh);
  if (!*paths->nvcc || !*paths->rt_cuda_lib) {
    diag_tool_error(c, "this spmdc has no CUDA runtime (libspmdrt_cuda, built with SPMD_CUDA where nvcc is found); "
                    "spmdc --target=cuda -S writes the C and the kernels");
    return false;
  }
  const char *obj = arena_sprintf(&c->arena, "%s.o", cufile);
  char *nv[32];
  int n = 0;
  nv[n++] = (char *)paths->nvcc;
  nv[n++] = "-c";
  nv[n++] = arena_sprintf(&c->arena, "-O%d", opt);
  char *flags = arena_sprintf(&c->arena, "%s", NVCC_FLAGS);
  for (char *tok = strtok(flags, " "); tok && n < 24; tok = strtok(NULL, " "))
    nv[n++] = tok;
  if (sh && sh->header) {
    nv[n++] = "-Xcompiler";
    nv[n++] = "-fPIC";
  }
  nv[n++] = arena_sprintf(&c->arena, "-I%s", paths->rt_include);
  nv[n++] = (char *)cufile;
  nv[n++] = "-o";
  nv[n++] = (char *)obj;
  nv[n] = NULL;
  int rc = run_command(nv);
  if (rc != 0) {
    diag_tool_error(c, "nvcc failed (exit %d) on %s", rc, cufile);
    return false;
  }
  char *argv[48];
  n = 0;
  argv[n++] = (char *)env_or("SPMDC_CC", "mpicc");
  argv[n++] = "-std=c17";
  argv[n++] = arena_sprintf(&c->arena, "-O%d", opt);
  argv[n++] = "-Wall";
  argv[n++] = "-Wextra";
  const char *extra = getenv("SPMDC_CFLAGS");
  if (extra && *extra)
    argv[n++] = (char *)extra;
  argv[n++] = arena_sprintf(&c->arena, "-I%s", paths->rt_include);
  argv[n++] = (char *)cfile;
  n = add_shared_flags(c, paths, sh, argv, n);
  argv[n++] = (char *)obj;
  argv[n++] = "-o";
  argv[n++] = (char *)exe;
  argv[n++] = (char *)paths->rt_cuda_lib;
  char *link = arena_sprintf(&c->arena, "%s", SPMD_CUDA_LINK);
  for (char *tok = strtok(link, " "); tok && n < 46; tok = strtok(NULL, " "))
    argv[n++] = tok;
  argv[n] = NULL;
  rc = run_command(argv);
  remove(obj);
  if (rc != 0)
    diag_tool_error(c, "the C compiler failed (exit %d) on %s", rc, cfile);
  return rc == 0;
}

/* A path in a Make rule: spaces, '#' and '$' escaped as GCC does. */
static void put_make_path(FILE *fp, const char *path) {
  for (const char *p = path; *p; p++) {
    if (*p == ' ' || *p == '#')
      fputc('\\', fp);
    else if (*p == '$')
      fputc('$', fp);
    fputc(*p, fp);
  }
}

typedef struct DepArgs {
  const char *target;
} DepArgs;

/* TARGET: the main file and every module it imports, as absolute paths. */
static void put_deps(Compiler *c, IrProgram *prog, FILE *fp, const void *arg) {
  (void)prog;
  const DepArgs *d = arg;
  put_make_path(fp, d->target);
  fputc(':', fp);
  for (Module *m = c->modules; m; m = m->next) {
    const char *path = source_file(c, (uint32_t)m->file)->path;
    char *full = realpath(path, NULL);
    fputs(" \\\n  ", fp);
    put_make_path(fp, full ? full : path);
    free(full);
  }
  fputc('\n', fp);
}

static bool write_depfile(Compiler *c, Driver *d, const char *target) {
  const char *path = d->depfile ? d->depfile : arena_sprintf(&c->arena, "%s.d", target);
  DepArgs args = {target};
  return write_atomic(c, path, put_deps, NULL, &args);
}

static const char *stem(Compiler *c, const char *path) {
  const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  const char *dot = strrchr(base, '.');
  return arena_strndup(&c->arena, base, dot ? (size_t)(dot - base) : strlen(base));
}

/* spmdc run: compile into a per-user cache, then exec mpirun. */
static int run_program(Compiler *c, Driver *d, const Paths *paths, IrProgram *prog) {
  const char *cache = arena_sprintf(&c->arena, "%s/spmdc-cache-%ld", env_or("TMPDIR", "/tmp"), (long)getuid());
  mkdir(cache, 0700);
  /* one entry per source file: its stem plus a hash of its full path */
  char *full = realpath(d->input, NULL);
  uint32_t h = 2166136261u;
  for (const char *p = full ? full : d->input; *p; p++)
    h = (h ^ (unsigned char)*p) * 16777619u;
  free(full);
  const char *base = arena_sprintf(&c->arena, "%s/%s-%08x", cache, stem(c, d->input), h);
  const char *cfile = arena_sprintf(&c->arena, "%s.c", base);
  const char *exe = base;
  if (d->cuda ? !write_cuda(c, prog, cfile, d->input) || !compile_cuda(c, paths, cfile, cu_path(c, cfile), exe, d->opt_level, NULL)
             : !write_c(c, prog, cfile, d->input) || !compile_c(c, paths, cfile, NULL, exe, d->opt_level, NULL))
    return 1;
  char **argv = arena_alloc(&c->arena, sizeof(char *) * (size_t)(d->nrun_args + 12));
  int n = 0;
  argv[n++] = (char *)env_or("SPMDC_MPIRUN", "mpirun");
  if (getuid() == 0) {
    argv[n++] = "--allow-run-as-root";
    argv[n++] = "--oversubscribe";
  }
  argv[n++] = "-np";
  argv[n++] = arena_sprintf(&c->arena, "%d", d->nprocs);
  argv[n++] = (char *)exe;
  for (int i = 0; i < d->nrun_args; i++)
    argv[n++] = d->run_args[i];
  argv[n] = NULL;
  fflush(stdout);
  return run_command(argv);
}

/* spmdc --shared: libNAME.so and libNAME.h (the header of its export fns;
 * the generated C is removed unless SPMDC_KEEP_C is set). */
static int build_shared(Compiler *c, Driver *d, const Paths *paths, IrProgram *prog) {
  if (!ir_has_exports(prog)) {
    diag_tool_error(c, "%s has no `export fn`, so a shared library would have nothing to call", d->input);
    return 1;
  }
  const char *lib = d->output ? d->output : arena_sprintf(&c->arena, "lib%s.so", stem(c, d->input));
  const char *header = write_header(c, prog, lib, d->input);
  if (!header)
    return 1;
  const char *cfile = arena_sprintf(&c->arena, "%s.spmdc.%ld.c", lib, (long)getpid());
  Shared sh = {header, d->cuda ? "cuda" : "cpu"};
  bool ok = d->cuda ? write_cuda(c, prog, cfile, d->input) &&
                          compile_cuda(c, paths, cfile, cu_path(c, cfile), lib, d->opt_level, &sh)
                    : write_c(c, prog, cfile, d->input) && compile_c(c, paths, cfile, NULL, lib, d->opt_level, &sh);
  if (!getenv("SPMDC_KEEP_C")) {
    remove(cfile);
    if (d->cuda)
      remove(cu_path(c, cfile));
  }
  if (ok && (d->depfile || d->depfile_md))
    ok = write_depfile(c, d, lib);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  Compiler compiler;
  Compiler *c = &compiler;
  compiler_init(c);
  Driver d = {.mode = MODE_COMPILE, .opt_level = 2};
  parse_args(&d, c, argc, argv);
  c->color = want_color(d.color);
  c->diag_format = d.format;
  c->cuda_target = d.cuda;
  Paths paths = find_paths(c);
  c->stdlib_dir = paths.stdlib;
  if (d.print_paths) {
    print_paths(&paths);
    if (!d.input) {
      compiler_free(c);
      return 0;
    }
  }

  Mesh mesh;
  bool ok = resolve_program(c, d.input, &mesh);
  for (Define *def = c->defines; def; def = def->next)
    if (!def->used) {
      diag_tool_error(c, "-D %s=%s: the program has no constant named '%s'", def->name, def->value, def->name);
      diag_finish(c, 2);
      compiler_free(c);
      return 2;
    }
  int status = 0;
  IrProgram prog;
  if (d.mode == MODE_DUMP_AST && c->main) {
    for (Module *m = c->modules; m; m = m->next)
      ast_dump_module(c, m, stdout);
  } else if (!ok) {
    status = 1;
  } else if (d.mode == MODE_DUMP_TYPES) {
    status = check_program(c, &mesh, stdout) ? 0 : 1;
  } else if (!lower_program(c, &mesh, &prog)) {
    status = 1;
  } else {
    /* --check too runs every phase that can reject a program before C is
     * written: the checker, the lowering, autodiff, the IR's verifier, the
     * emitter's own checks; it writes nothing */
    attention_layouts(c, &prog);
    ad_differentiate(c, &prog);
    if (c->cuda_target)
      sched_host_scalars(c, &prog);
    emit_check(c, &prog);
    if (c->nerrors) {
      status = 1;
    } else if (d.mode == MODE_CHECK) {
      status = 0;
    } else if (d.mode == MODE_DUMP_IR) {
      ir_dump(c, &prog, stdout);
    } else if (d.mode == MODE_COMM_REPORT) {
      long long sizes[MAX_MESH_AXES] = {0};
      if (d.mesh && !parse_mesh(c, &mesh, d.mesh, sizes))
        status = 2;
      else
        comm_report(c, &prog, stdout, d.input, sizes);
    } else if (d.mode == MODE_REGIONS) {
      status = emit_regions(c, &prog, stdout, d.input) ? 0 : 1;
    } else if (d.mode == MODE_MEMORY_REPORT) {
      long long sizes[MAX_MESH_AXES] = {0};
      if (d.mesh && !parse_mesh(c, &mesh, d.mesh, sizes))
        status = 2;
      else if (!memory_report(c, &prog, stdout, d.input, sizes))
        status = 1;
    } else if (d.mode == MODE_SHARED) {
      status = build_shared(c, &d, &paths, &prog);
    } else if (!prog.main && d.mode != MODE_EMIT_C) {
      diag_tool_error(c, "%s has no `fn main()`, so there is no program to build", d.input);
      status = 1;
    } else if (d.mode == MODE_EMIT_C) {
      const char *out = d.output ? d.output : arena_sprintf(&c->arena, "%s.c", stem(c, d.input));
      if (d.cuda)
        status = strcmp(out, "-") == 0 ? (print_cuda(c, &prog, d.input), 0) : write_cuda(c, &prog, out, d.input) ? 0 : 1;
      else
        status = strcmp(out, "-") == 0 ? (emit_c(c, &prog, stdout, d.input), 0) : write_c(c, &prog, out, d.input) ? 0 : 1;
      if (status == 0 && strcmp(out, "-") != 0 && ir_has_exports(&prog))
        status = write_header(c, &prog, out, d.input) ? 0 : 1;
      if (status == 0 && (d.depfile || d.depfile_md))
        status = write_depfile(c, &d, out) ? 0 : 1;
    } else if (d.mode == MODE_RUN) {
      status = run_program(c, &d, &paths, &prog);
    } else {
      const char *exe = d.output ? d.output : stem(c, d.input);
      const char *cfile = arena_sprintf(&c->arena, "%s.spmdc.%ld.c", exe, (long)getpid());
      if (d.cuda)
        status = write_cuda(c, &prog, cfile, d.input) &&
                 compile_cuda(c, &paths, cfile, cu_path(c, cfile), exe, d.opt_level, NULL) ? 0 : 1;
      else
        status = write_c(c, &prog, cfile, d.input) && compile_c(c, &paths, cfile, NULL, exe, d.opt_level, NULL) ? 0 : 1;
      if (!getenv("SPMDC_KEEP_C")) {
        remove(cfile);
        if (d.cuda)
          remove(cu_path(c, cfile));
      }
      if (status == 0 && (d.depfile || d.depfile_md))
        status = write_depfile(c, &d, exe) ? 0 : 1;
    }
  }
  if (c->nerrors)
    status = status ? status : 1;
  diag_finish(c, status);
  compiler_free(c);
  return status;
}
