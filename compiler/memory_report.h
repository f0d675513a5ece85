/* memory_report.h: `spmdc --memory-report`: per rank, the bytes of the
 * parameters, the optimizer state, the residuals the backward keeps (per
 * call and per loop) and the peak of live temporaries, as formulas of the
 * mesh axis sizes and as numbers for one mesh (docs/memory.md).  The
 * generated code tells the runtime which var slots of main hold parameters
 * and optimizer state (mem_slot_kinds), so --profile's high-water marks
 * are measured by the same definitions. */
#ifndef SPMDC_MEMORY_REPORT_H
#define SPMDC_MEMORY_REPORT_H

#include "ir.h"

typedef enum { MEM_SLOT_TEMP, MEM_SLOT_PARAM, MEM_SLOT_OPT } MemSlot;

/* Per var slot of main, a MemSlot: PARAM for a tensor slot whose value is
 * differentiated (passed at a wrt= position of value_and_grad or grad),
 * OPT for another tensor slot assigned in main's body outside its loops
 * (what the program keeps across steps: optimizer moments, accumulators),
 * TEMP for the rest. */
const char *mem_slot_kinds(Compiler *c, IrFn *main);

/* sizes[a]: axis a's size (--mesh), or 0 for the declared size (1 when
 * undeclared). Each formula is checked against the reports of other
 * meshes and marked with the sizes it holds for only. False (an error
 * reported) when the mesh cannot run the program: a sharded dim that it
 * does not divide. */
bool memory_report(Compiler *c, IrProgram *p, FILE *out, const char *source_path, const long long *sizes);

#endif
