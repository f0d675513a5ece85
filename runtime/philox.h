/* Philox4x32-10 (Salmon et al., SC'11) and the 53-bit unit double made of
 * two of its words, written once for the CPU target (random.c) and the CUDA
 * target (cuda/random.cu, __host__ __device__ there): the same integer steps
 * on both, so uniform samples and dropout masks are the same bits. Header
 * only; RT_PHILOX_QUAL qualifies the functions (default `static inline`). */
#ifndef RT_PHILOX_H
#define RT_PHILOX_H

#include <stdint.h>

#ifndef RT_PHILOX_QUAL
#define RT_PHILOX_QUAL static inline
#endif

/* the 4 words of block `counter` of stream `stream` under key `seed` */
RT_PHILOX_QUAL void rt_philox_(uint64_t seed, uint64_t counter, uint32_t stream, uint32_t out[4])
{
    uint32_t c[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), stream, 0};
    uint32_t k[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c[0], p1 = (uint64_t)0xCD9E8D57u * c[2];
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        uint32_t n0 = hi1 ^ c[1] ^ k[0], n2 = hi0 ^ c[3] ^ k[1];
        c[0] = n0;
        c[1] = lo1;
        c[2] = n2;
        c[3] = lo0;
        k[0] += 0x9E3779B9u;
        k[1] += 0xBB67AE85u;
    }
    for (int i = 0; i < 4; i++)
        out[i] = c[i];
}

/* 53 random bits as a double in [0, 1) */
RT_PHILOX_QUAL double rt_philox_unit_(uint32_t a, uint32_t b)
{
    return ((double)(a >> 5) * 67108864.0 + (double)(b >> 6)) * (1.0 / 9007199254740992.0);
}

#endif /* RT_PHILOX_H */
