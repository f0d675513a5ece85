/* vmath's AVX2+FMA kernels (this file alone is compiled with -mavx2 -mfma;
 * its functions run only where rt_vm_select found both). */
#include <immintrin.h>
#include <sleef.h>

/* lane masks for the last partial vector: lanes < n set */
static inline __m256i mask32(int64_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline __m256i mask64(int64_t n)
{
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3));
}

#define VF __m256
#define WF 8
#define LDF(p) _mm256_loadu_ps(p)
#define STF(p, v) _mm256_storeu_ps((p), (v))
#define LDMF(p, n) _mm256_maskload_ps((p), mask32(n))
#define STMF(p, v, n) _mm256_maskstore_ps((p), mask32(n), (v))
#define SETF(c) _mm256_set1_ps((float)(c))
#define ADDF _mm256_add_ps
#define SUBF _mm256_sub_ps
#define MULF _mm256_mul_ps
#define DIVF _mm256_div_ps
#define NEGF(x) _mm256_xor_ps((x), _mm256_set1_ps(-0.0f))
#define GE0F(x, a, b) _mm256_blendv_ps((b), (a), _mm256_cmp_ps((x), _mm256_setzero_ps(), _CMP_GE_OQ))
#define EXPF Sleef_finz_expf8_u10avx2
#define LOGF Sleef_finz_logf8_u10avx2
#define TANHF Sleef_finz_tanhf8_u10avx2
#define SINF Sleef_finz_sinf8_u10avx2
#define COSF Sleef_finz_cosf8_u10avx2

#define VD __m256d
#define WD 4
#define LDD(p) _mm256_loadu_pd(p)
#define STD(p, v) _mm256_storeu_pd((p), (v))
#define LDMD(p, n) _mm256_maskload_pd((p), mask64(n))
#define STMD(p, v, n) _mm256_maskstore_pd((p), mask64(n), (v))
#define SETD(c) _mm256_set1_pd(c)
#define ADDD _mm256_add_pd
#define SUBD _mm256_sub_pd
#define MULD _mm256_mul_pd
#define DIVD _mm256_div_pd
#define NEGD(x) _mm256_xor_pd((x), _mm256_set1_pd(-0.0))
#define GE0D(x, a, b) _mm256_blendv_pd((b), (a), _mm256_cmp_pd((x), _mm256_setzero_pd(), _CMP_GE_OQ))
#define ERFD Sleef_finz_erfd4_u10avx2
#define EXPD Sleef_finz_expd4_u10avx2
#define LOGD Sleef_finz_logd4_u10avx2
#define TANHD Sleef_finz_tanhd4_u10avx2
#define SIND Sleef_finz_sind4_u10avx2
#define COSD Sleef_finz_cosd4_u10avx2

#define VI __m256i
#define SETI(c) _mm256_set1_epi64x((long long)(c))
#define ADDI _mm256_add_epi64
#define ANDI _mm256_and_si256
#define XORI _mm256_xor_si256
#define SRLI(v, n) _mm256_srli_epi64((v), (n))
#define MULU32 _mm256_mul_epu32
#define IOTAI _mm256_setr_epi64x(0, 1, 2, 3)
/* the low 32 bits of each 64-bit lane, packed, to double */
#define TOD(v) _mm256_cvtepi32_pd(_mm256_castsi256_si128( \
    _mm256_permutevar8x32_epi32((v), _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0))))
#define SQRTD _mm256_sqrt_pd

#define VM_TABLE rt_vm_avx2
#define VM_NAME "avx2"
#include "vmath_isa.h"
