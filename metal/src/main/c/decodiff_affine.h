/*
 * What the MLX affine kernels of both kernel files share (decodiff_kernels.c describes the blocked layout and the
 * integer dot): the pair formats, a pair's index and values, a group's fixed-point exponent, the integer dot of one
 * row-major row, and the exported matvec's body over each file's own block kernels. Plain C, always inlined, so each
 * file compiles it for its own instruction set (a fused multiply-add is one instruction there, the same rounding).
 */
#ifndef DECODIFF_AFFINE_H
#define DECODIFF_AFFINE_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decodiff_bf16.h"

#define AFFINE_F32 0
#define AFFINE_BF16 1
#define AFFINE_F16 2
/* Rows of one block of the blocked layout. */
#define BLOCK 16
#define AFFINE_INLINE static inline __attribute__((always_inline))

/*
 * One IEEE half widened to fp32 (exact; F16C's bits for all 65,536 halves), without F16C: this header compiles for no
 * particular instruction set.
 */
AFFINE_INLINE float half_float(uint16_t h) {
    uint32_t s = (uint32_t) (h & 0x8000) << 16, e = h >> 10 & 0x1f, m = h & 0x3ff, u;
    if (e == 0x1f) u = s | 0x7f800000u | m << 13 | (m ? 0x400000u : 0); /* a NaN comes out quiet, as F16C makes it */
    else if (e != 0) u = s | (e + 112) << 23 | m << 13;
    else if (m == 0) u = s;
    else { /* subnormal: m · 2^-24, normalised */
        uint32_t k = 0;
        while (!(m & 0x400)) m <<= 1, k++;
        u = s | (113 - k) << 23 | (m & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Index of the pair of row r, group g (the blocked layout). */
AFFINE_INLINE int64_t pair_index(int64_t rows, int64_t groups, int64_t r, int64_t g) {
    const int64_t full = rows / BLOCK * BLOCK;
    return r >= full ? r * groups + g : (r - r % BLOCK) * groups + g * BLOCK + r % BLOCK;
}

/* Pair i's scale and bias. */
AFFINE_INLINE void affine_pair(const void *pairs, const int fmt, int64_t i, float *s, float *b) {
    if (fmt == AFFINE_F32) {
        const float *p = (const float *) pairs + 2 * i;
        *s = p[0], *b = p[1];
    } else {
        const uint16_t *p = (const uint16_t *) pairs + 2 * i;
        if (fmt == AFFINE_BF16) *s = bf16(p[0]), *b = bf16(p[1]);
        else *s = half_float(p[0]), *b = half_float(p[1]);
    }
}

/* 2^k for k in [-126, 127]. */
AFFINE_INLINE float pow2f(int k) {
    uint32_t u = (uint32_t) (k + 127) << 23;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/*
 * The fixed-point exponent of a group whose largest magnitude is M: e with 2^(e-1) <= M < 2^e (0 for M = 0). Returns 0
 * where the group is too small for the fixed point (M < 2^-97): the fp32 path must be taken instead.
 */
AFFINE_INLINE int group_exponent(float M, int *e) {
    uint32_t mb;
    memcpy(&mb, &M, 4);
    *e = M > 0 ? (int) (mb >> 23) - 126 : 0;
    return !(M > 0 && *e < -96);
}

/*
 * The integer dot of one row stored row-major (the rows after the last whole block), from the staged activations
 * (byte planes, per group 2^(e-30) and the sum X): the vector kernels' operations in scalar code, so the same bits.
 */
AFFINE_INLINE float affine_row_int(const uint8_t *codes, const void *pairs, int fmt, int bits, int64_t cols, int64_t group, int64_t r,
                                   const int8_t *planes, const float *pw, const float *xsum) {
    const int64_t rb = cols * bits / 8, groups = cols / group;
    const uint8_t *row = codes + r * rb;
    float acc = 0.0f;
    for (int64_t g = 0; g < groups; g++) {
        int32_t P[4] = {0, 0, 0, 0};
        for (int64_t c = g * group; c < (g + 1) * group; c++) {
            int32_t q = bits == 8 ? row[c] : row[c / 2] >> (4 * (c & 1)) & 15;
            for (int k = 0; k < 4; k++) P[k] += q * planes[k * cols + c];
        }
        float s, o;
        affine_pair(pairs, fmt, r * groups + g, &s, &o);
        int32_t A = P[0] + (int32_t) ((uint32_t) P[1] << 8), B = P[2] + (int32_t) ((uint32_t) P[3] << 8);
        float f = __builtin_fmaf((float) B, 65536.0f, (float) A);
        acc = __builtin_fmaf(s * pw[g], f, acc);
        acc = __builtin_fmaf(o, xsum[g], acc);
    }
    return acc;
}

/* The kernels' specialisations: `call(F, B, G)` with the pair format, the bits and the group as constants. */
#define AFFINE_GROUPS(F, B, call)                    \
    do {                                             \
        if (group == 32) call(F, B, 32);             \
        else if (group == 64) call(F, B, 64);        \
        else call(F, B, 128);                        \
    } while (0)

#define AFFINE_CASES(call)                                                         \
    do {                                                                           \
        if (bits == 4 && fmt == AFFINE_BF16) AFFINE_GROUPS(AFFINE_BF16, 4, call);  \
        else if (bits == 4 && fmt == AFFINE_F16) AFFINE_GROUPS(AFFINE_F16, 4, call); \
        else if (bits == 4) AFFINE_GROUPS(AFFINE_F32, 4, call);                    \
        else if (fmt == AFFINE_BF16) AFFINE_GROUPS(AFFINE_BF16, 8, call);          \
        else if (fmt == AFFINE_F16) AFFINE_GROUPS(AFFINE_F16, 8, call);            \
        else AFFINE_GROUPS(AFFINE_F32, 8, call);                                   \
    } while (0)

#define AFFINE_BLOCKS(F, B, G)                                                                        \
    do {                                                                                              \
        for (int64_t b = from / BLOCK * BLOCK; b < full && b < to; b += BLOCK) {                      \
            float out[BLOCK];                                                                         \
            affine_block_int(codes, pairs, F, B, cols, G, b, planes, pw, xsum, out);                  \
            for (int64_t r = b > from ? b : from; r < b + BLOCK && r < to; r++) y[r] = out[r - b];    \
        }                                                                                             \
    } while (0)

/* Bytes of stack the matvec's staged activations may take; wider rows stage on the heap. */
#define AFFINE_MAX_STACK_COLS 16384
/*
 * Defines the exported integer matvec `name` (target `attr`) over the file's own kernels: affine_stage (the
 * activations' byte planes; 0 where the fp32 path must run), affine_block_int (a whole block of 16 rows),
 * affine_row_fp32 (one row with the fp32 contract) and affine_row_int above.
 */
#define AFFINE_MATVEC(name, attr)                                                                                                  \
    attr void name(const uint8_t *codes, const void *pairs, int32_t fmt, int32_t bits, int64_t rows, int64_t cols, int32_t group,  \
                   int32_t from, int32_t to, const float *x, float *y) {                                                          \
        const int64_t groups = cols / group, full = rows / BLOCK * BLOCK;                                                          \
        const int small = cols <= AFFINE_MAX_STACK_COLS;                                                                           \
        int8_t stack[small ? 4 * cols : 1] __attribute__((aligned(64)));                                                           \
        float pws[small ? groups : 1], sums[small ? groups : 1];                                                                   \
        void *heap = small ? NULL : malloc(4 * cols + 8 * groups);                                                                 \
        if (!small && !heap) { /* no memory to stage: the fp32 path needs none */                                                 \
            for (int64_t r = from; r < to; r++) y[r] = affine_row_fp32(codes, pairs, fmt, bits, rows, cols, group, r, x);          \
            return;                                                                                                                \
        }                                                                                                                          \
        int8_t *planes = small ? stack : heap;                                                                                     \
        float *pw = small ? pws : (float *) ((int8_t *) heap + 4 * cols), *xsum = small ? sums : pw + groups;                      \
        if (!affine_stage(x, cols, group, planes, pw, xsum)) {                                                                     \
            for (int64_t r = from; r < to; r++) y[r] = affine_row_fp32(codes, pairs, fmt, bits, rows, cols, group, r, x);          \
        } else {                                                                                                                   \
            AFFINE_CASES(AFFINE_BLOCKS);                                                                                           \
            for (int64_t r = from > full ? from : full; r < to; r++)                                                               \
                y[r] = affine_row_int(codes, pairs, fmt, bits, cols, group, r, planes, pw, xsum);                                  \
        }                                                                                                                          \
        free(heap);                                                                                                                \
    }
#endif
