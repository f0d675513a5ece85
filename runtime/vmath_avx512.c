/* vmath's AVX-512F kernels (this file alone is compiled with -mavx512f;
 * its functions run only where rt_vm_select found AVX-512F). */
#include <immintrin.h>
#include <sleef.h>

#define VF __m512
#define WF 16
#define LDF(p) _mm512_loadu_ps(p)
#define STF(p, v) _mm512_storeu_ps((p), (v))
#define MASKF(n) ((__mmask16)((1u << (n)) - 1))
#define LDMF(p, n) _mm512_maskz_loadu_ps(MASKF(n), (p))
#define STMF(p, v, n) _mm512_mask_storeu_ps((p), MASKF(n), (v))
#define SETF(c) _mm512_set1_ps((float)(c))
#define ADDF _mm512_add_ps
#define SUBF _mm512_sub_ps
#define MULF _mm512_mul_ps
#define DIVF _mm512_div_ps
#define NEGF(x) _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN)))
#define GE0F(x, a, b) _mm512_mask_blend_ps(_mm512_cmp_ps_mask((x), _mm512_setzero_ps(), _CMP_GE_OQ), (b), (a))
#define EXPF Sleef_finz_expf16_u10avx512f
#define LOGF Sleef_finz_logf16_u10avx512f
#define TANHF Sleef_finz_tanhf16_u10avx512f
#define SINF Sleef_finz_sinf16_u10avx512f
#define COSF Sleef_finz_cosf16_u10avx512f

#define VD __m512d
#define WD 8
#define LDD(p) _mm512_loadu_pd(p)
#define STD(p, v) _mm512_storeu_pd((p), (v))
#define MASKD(n) ((__mmask8)((1u << (n)) - 1))
#define LDMD(p, n) _mm512_maskz_loadu_pd(MASKD(n), (p))
#define STMD(p, v, n) _mm512_mask_storeu_pd((p), MASKD(n), (v))
#define SETD(c) _mm512_set1_pd(c)
#define ADDD _mm512_add_pd
#define SUBD _mm512_sub_pd
#define MULD _mm512_mul_pd
#define DIVD _mm512_div_pd
#define NEGD(x) _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(x), _mm512_set1_epi64(INT64_MIN)))
#define GE0D(x, a, b) _mm512_mask_blend_pd(_mm512_cmp_pd_mask((x), _mm512_setzero_pd(), _CMP_GE_OQ), (b), (a))
#define ERFD Sleef_finz_erfd8_u10avx512f
#define EXPD Sleef_finz_expd8_u10avx512f
#define LOGD Sleef_finz_logd8_u10avx512f
#define TANHD Sleef_finz_tanhd8_u10avx512f
#define SIND Sleef_finz_sind8_u10avx512f
#define COSD Sleef_finz_cosd8_u10avx512f

#define VI __m512i
#define SETI(c) _mm512_set1_epi64((long long)(c))
#define ADDI _mm512_add_epi64
#define ANDI _mm512_and_si512
#define XORI _mm512_xor_si512
#define SRLI(v, n) _mm512_srli_epi64((v), (n))
#define MULU32 _mm512_mul_epu32
#define IOTAI _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7)
#define TOD(v) _mm512_cvtepi32_pd(_mm512_cvtepi64_epi32(v))
#define SQRTD _mm512_sqrt_pd

#define VM_TABLE rt_vm_avx512
#define VM_NAME "avx512"
#include "vmath_isa.h"
