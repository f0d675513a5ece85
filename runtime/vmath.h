/* Internal to libspmdrt: vectorised transcendental kernels (vmath*.c).
 *
 * Each instruction set has one table of array kernels, built from the same
 * template (vmath_isa.h) with SLEEF's deterministic FMA functions
 * (Sleef_finz_*_u10: at most 1 ulp, and the same bits on every instruction
 * set that has FMA), and chosen once per context from the CPU
 * (rt_vm_select): AVX-512F, else AVX2+FMA, else none (the scalar libm loops
 * of kernels.c). Every element goes through the same vector function, the
 * last partial vector too (a masked load and store), so an element's value
 * never depends on its position, its alignment or the length of the array:
 * a sharded tensor computes bit-identical values on every mesh. */
#ifndef RT_VMATH_H
#define RT_VMATH_H

#include "spmdrt.h"

typedef void (*rt_vm_map)(const void *x, void *y, int64_t n);               /* y = f(x) */
typedef void (*rt_vm_bwd)(const void *x, const void *dy, void *dx, int64_t n); /* dy f'(x) */
typedef void (*rt_vm_grad)(const void *x, void *y, void *g, int64_t n);     /* f, f' */

typedef struct rt_vm_table {
    const char *name; /* "avx512", "avx2" */
    /* [0] f32, [1] f64; NULL: that op has no vector kernel (the scalar loop runs) */
    rt_vm_map un[2][RT_NUNARY];
    rt_vm_bwd unb[2][RT_NUNARY];
    rt_vm_grad ung[2][RT_NUNARY];
    /* y = exp(x) in double: softmax, log_softmax, cross entropy lanes */
    void (*exp_f64)(const double *x, double *y, int64_t n);
    /* random.c's samples for the n counters g0, g0 + 1, ...: Philox4x32-10
     * in vector lanes, Box-Muller on SLEEF's log and cos (normal: p0 = std)
     * or lo + (hi - lo) u (uniform: p0 = lo, p1 = hi) */
    void (*normal)(uint64_t seed, uint32_t stream, uint64_t g0, int64_t n, double p0, double p1,
                   double *out);
    void (*uniform)(uint64_t seed, uint32_t stream, uint64_t g0, int64_t n, double p0, double p1,
                    double *out);
} rt_vm_table;

extern const rt_vm_table rt_vm_avx512, rt_vm_avx2;

/* The table for this CPU, or NULL (scalar). SPMD_VMATH=avx512|avx2|scalar
 * forces one (a table the CPU cannot run is refused: NULL). */
const rt_vm_table *rt_vm_select(void);

#endif /* RT_VMATH_H */
