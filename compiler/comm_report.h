/* comm_report.h: `spmdc --comm-report`: every collective of the lowered and
 * differentiated program, forward and backward, with the bytes each rank
 * sends (the cost model of redistribute.h), and totals per function and for
 * the program.  The format is described in docs/global.md. */
#ifndef SPMDC_COMM_REPORT_H
#define SPMDC_COMM_REPORT_H

#include "ir.h"

/* sizes: --mesh's axis sizes (0: the declared size), or NULL */
void comm_report(Compiler *c, IrProgram *p, FILE *out, const char *source_path, const long long *sizes);

#endif
