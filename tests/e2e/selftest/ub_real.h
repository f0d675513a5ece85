/* run_e2e.py's self-test (the sanitizer build): signed overflow in code
 * spmdc compiles, which must stop the program */
#include <limits.h>
__attribute__((constructor)) static void spmd_selftest_overflow(void)
{
    volatile int x = INT_MAX;
    volatile int y = x + 1; /* volatile: the sum is made (and checked) even at -O2 */
    (void)y;
}
