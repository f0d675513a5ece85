/* fuzz_compiler.c: a libFuzzer target that runs spmdc's phases in process on
 * each input, as `spmdc -S` would: lexer and parser, name resolution, the
 * checker with lowering, autodiff, and for accepted programs the C, the
 * header, the IR dump and the comm report (all written to /dev/null).  Any
 * crash, sanitizer report, leak or timeout is a finding (tests/README.md). */
#include <stdint.h>
#include <stdlib.h>

#include "ast.h"
#include "comm_report.h"
#include "ir.h"
#include "resolve.h"

static FILE *sink; /* /dev/null: outputs are not checked here */
static FILE *diags; /* /dev/null, or stderr with SPMD_FUZZ_VERBOSE=1 */

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  sink = fopen("/dev/null", "w");
  const char *verbose = getenv("SPMD_FUZZ_VERBOSE");
  diags = verbose && *verbose == '1' ? stderr : sink;
  return sink ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Compiler compiler;
  Compiler *c = &compiler;
  compiler_init(c);
  c->err = diags;
  c->max_errors = 0; /* report everything: the error paths are what we test */
  c->stdlib_dir = SPMD_STDLIB_DIR;
  int file = source_add(c, "fuzz.spmd", (const char *)data, size);
  Mesh mesh;
  IrProgram prog;
  bool ok = resolve_source(c, file, &mesh);
  for (Module *m = c->modules; m; m = m->next)
    ast_dump_module(c, m, sink);
  if (ok && lower_program(c, &mesh, &prog)) {
    ad_differentiate(c, &prog);
    if (c->nerrors == 0 && emit_check(c, &prog)) {
      ir_dump(c, &prog, sink);
      comm_report(c, &prog, sink, "fuzz.spmd", NULL);
      emit_c(c, &prog, sink, "fuzz.spmd");
      if (ir_has_exports(&prog))
        emit_header(c, &prog, sink, "fuzz.spmd", "FUZZ_H");
    }
  }
  compiler_free(c);
  return 0;
}
