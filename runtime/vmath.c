/* Choosing the vector kernels (vmath.h) for this CPU at run time: the
 * library holds every instruction set's kernels, so one binary runs on any
 * x86-64 machine and uses the widest vectors it has. */
#include <stdlib.h>
#include <string.h>

#include "vmath.h"

const rt_vm_table *rt_vm_select(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    bool avx512 = __builtin_cpu_supports("avx512f");
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const char *want = getenv("SPMD_VMATH");
    if (want && strcmp(want, "scalar") == 0)
        return NULL;
    if (want && strcmp(want, "avx2") == 0)
        return avx2 ? &rt_vm_avx2 : NULL;
    if (avx512)
        return &rt_vm_avx512;
    if (avx2)
        return &rt_vm_avx2;
#endif
    return NULL;
}
