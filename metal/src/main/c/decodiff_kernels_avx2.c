/*
 * decodiff's native kernels for x86-64 CPUs with AVX2 and FMA but no AVX-512 (AMD Zen 2 and Zen 3, most Intel client
 * cores), called through FFM (dev.decodiff.metal.NativeKernels) where decodiff_kernels.c's AVX-512 kernels cannot run.
 *
 * Why native here too: the Java kernels are written for 16-lane (512-bit) vectors, because decodiff's numeric contract
 * sums every dot product in sixteen lanes. Where the CPU's vectors are 256 bits wide, HotSpot does not compile 512-bit
 * vector operations to instructions: they run as Java loops over the lanes, tens of times slower (a small model's
 * bench took over ten minutes on a Zen 3 host). These kernels keep the sixteen lanes as two 8-lane halves: lanes
 * 0-7 of an accumulator are one 256-bit register, lanes 8-15 another, so every sum is the same sum in the same
 * order and every result the same bits as decodiff_kernels.c's and the Java kernels' (WeightMatrixTest and
 * AttentionKernelsTest hold all of them to one scalar reference).
 *
 * Contract (as decodiff_kernels.c): per output, 16 fp32 lane accumulators over the vector part of the row in column
 * order (one fused multiply-add each), summed in lane order from 0.0f, then the scalar tail c >= cols - cols % 16
 * added as separately rounded products. Built with -ffp-contract=off and without -ffast-math, without flush-to-zero.
 */
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "decodiff_affine.h"
#include "decodiff_bf16.h"

#define KERNEL2 __attribute__((target("avx2,fma")))
#define L 16  /* lanes of the contract's accumulators */
#define H 8   /* lanes of one register: half an accumulator */
#define ROWS 4
#define TILE_TOKENS 3
/* Columns of one GEMM block: four widened rows of it (32 KB) stay in L1/L2 while every token of the call passes. */
#define COL_BLOCK 2048
/* How far ahead the streaming reads prefetch, into L2. */
#define PREFETCH_BYTES 16384
#define UNROLLED _Pragma("GCC unroll 16")

int32_t decodiff_cpu_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 1 : 0;
}

/* Eight bf16 values widened to fp32 (exact: a bf16 is the high half of an fp32). */
KERNEL2 static inline __m256 widen8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *) p)), 16));
}

/*
 * The weights come as bf16, as fp32 (matrices dequantized at load: MLX bit widths other than 4 and 8, or all of them
 * where the CPU lacks F16C or -Ddecodiff.quantized=dequantize asks) or as MLX affine codes (W_AFFINE: w points at an
 * affine_matrix; the GEMM only). Each kernel below takes the type as a constant argument and is inlined into one
 * exported function per type, so the compiler drops the other types' code. Element i of a bf16 or fp32 row at w:
 */
#define W_BF16 0
#define W_F32 1
#define W_AFFINE 2
KERNEL2 static inline __attribute__((always_inline)) __m256 load_w(const void *w, int64_t i, const int type) {
    return type == W_F32 ? _mm256_loadu_ps((const float *) w + i) : widen8((const uint16_t *) w + i);
}

static inline __attribute__((always_inline)) float scalar_w(const void *w, int64_t i, const int type) {
    return type == W_F32 ? ((const float *) w)[i] : bf16(((const uint16_t *) w)[i]);
}

/* Bytes of one weight. */
#define W_BYTES(type) ((type) == W_F32 ? 4 : 2)

/* The lane sum of one accumulator held as lanes 0-7 (lo) and 8-15 (hi): in lane order from 0.0f. */
KERNEL2 static inline float sum_halves(__m256 lo, __m256 hi) {
    float lanes[L];
    _mm256_storeu_ps(lanes, lo);
    _mm256_storeu_ps(lanes + H, hi);
    float s = 0.0f;
    for (int i = 0; i < L; i++) s += lanes[i];
    return s;
}

/* r[l] becomes lane l of the eight input vectors (input k in lane k): an 8 × 8 transpose. */
KERNEL2 static inline __attribute__((always_inline)) void transpose8(__m256 r[H]) {
    __m256 t[H], u[H];
    UNROLLED for (int k = 0; k < H; k += 2) {
        t[k] = _mm256_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm256_unpackhi_ps(r[k], r[k + 1]);
    }
    UNROLLED for (int k = 0; k < H; k += 4) {
        u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
        u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xee);
        u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
        u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xee);
    }
    UNROLLED for (int j = 0; j < 4; j++) {
        r[j] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x20);
        r[j + 4] = _mm256_permute2f128_ps(u[j], u[j + 4], 0x31);
    }
}

/*
 * The lane sums of eight 16-lane accumulators at once (accumulator k at a + k·16), each in lane order from 0.0f as
 * sum_halves adds them, into sums[0 .. 8): two 8 × 8 transposes put lane l of all eight in one register.
 */
KERNEL2 static inline __attribute__((always_inline)) void sum_lanes8(const float *a, float *sums) {
    __m256 lo[H], hi[H];
    UNROLLED for (int k = 0; k < H; k++) {
        lo[k] = _mm256_loadu_ps(a + k * L);
        hi[k] = _mm256_loadu_ps(a + k * L + H);
    }
    transpose8(lo);
    transpose8(hi);
    __m256 s = _mm256_setzero_ps();
    UNROLLED for (int l = 0; l < H; l++) s = _mm256_add_ps(s, lo[l]);
    UNROLLED for (int l = 0; l < H; l++) s = _mm256_add_ps(s, hi[l]);
    _mm256_storeu_ps(sums, s);
}

/* Reads bytes [0, n) of p (n a multiple of 256) and returns a checksum: the yardstick for decode's weight traffic. */
KERNEL2 int64_t decodiff_stream_read_avx2(const uint8_t *p, int64_t n) {
    __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
    for (int64_t o = 0; o < n; o += 256) {
        _mm_prefetch((const char *) p + o + PREFETCH_BYTES, _MM_HINT_T1);
        _mm_prefetch((const char *) p + o + PREFETCH_BYTES + 64, _MM_HINT_T1);
        _mm_prefetch((const char *) p + o + PREFETCH_BYTES + 128, _MM_HINT_T1);
        _mm_prefetch((const char *) p + o + PREFETCH_BYTES + 192, _MM_HINT_T1);
        a = _mm256_add_epi32(a, _mm256_loadu_si256((const __m256i *) (p + o)));
        b = _mm256_add_epi32(b, _mm256_loadu_si256((const __m256i *) (p + o + 32)));
        c = _mm256_add_epi32(c, _mm256_loadu_si256((const __m256i *) (p + o + 64)));
        d = _mm256_add_epi32(d, _mm256_loadu_si256((const __m256i *) (p + o + 96)));
        a = _mm256_add_epi32(a, _mm256_loadu_si256((const __m256i *) (p + o + 128)));
        b = _mm256_add_epi32(b, _mm256_loadu_si256((const __m256i *) (p + o + 160)));
        c = _mm256_add_epi32(c, _mm256_loadu_si256((const __m256i *) (p + o + 192)));
        d = _mm256_add_epi32(d, _mm256_loadu_si256((const __m256i *) (p + o + 224)));
    }
    int32_t lanes[H];
    _mm256_storeu_si256((__m256i *) lanes, _mm256_add_epi32(_mm256_add_epi32(a, b), _mm256_add_epi32(c, d)));
    int64_t s = 0;
    for (int i = 0; i < H; i++) s += lanes[i];
    return (int32_t) s;
}

/* One row's dot product with x (the contract's order). */
KERNEL2 static inline __attribute__((always_inline)) float dot1(const void *row, int64_t cols, const float *x, const int type) {
    __m256 lo = _mm256_setzero_ps(), hi = lo;
    int64_t bound = cols - cols % L, c = 0;
    for (; c < bound; c += L) {
        lo = _mm256_fmadd_ps(load_w(row, c, type), _mm256_loadu_ps(x + c), lo);
        hi = _mm256_fmadd_ps(load_w(row, c + H, type), _mm256_loadu_ps(x + c + H), hi);
    }
    float s = sum_halves(lo, hi);
    for (; c < cols; c++) s += scalar_w(row, c, type) * x[c];
    return s;
}

/*
 * Decode's matvec, MATVEC_ROWS rows at a time, each row with its own accumulator (two registers), prefetching the
 * rows one group ahead (at least PREFETCH_BYTES further on) into L2: the same access pattern as the AVX-512 kernel's,
 * with half the rows in flight because an accumulator takes two of the sixteen registers.
 */
#define MATVEC_ROWS 4
KERNEL2 static inline __attribute__((always_inline)) void rows4(const void *w, int64_t cols, int64_t r, const float *x, float *y, const int type) {
    const int64_t bytes = W_BYTES(type), group = MATVEC_ROWS * cols * bytes, ahead = group * ((PREFETCH_BYTES + group - 1) / group);
    const char *b0 = (const char *) w + r * cols * bytes, *b1 = b0 + cols * bytes, *b2 = b1 + cols * bytes, *b3 = b2 + cols * bytes;
    __m256 l0 = _mm256_setzero_ps(), h0 = l0, l1 = l0, h1 = l0, l2 = l0, h2 = l0, l3 = l0, h3 = l0;
    int64_t bound = cols - cols % L, c = 0;
    for (; c < bound; c += L) {
        if (c * bytes % 64 == 0) {
            _mm_prefetch(b0 + ahead + c * bytes, _MM_HINT_T1);
            _mm_prefetch(b1 + ahead + c * bytes, _MM_HINT_T1);
            _mm_prefetch(b2 + ahead + c * bytes, _MM_HINT_T1);
            _mm_prefetch(b3 + ahead + c * bytes, _MM_HINT_T1);
        }
        __m256 xl = _mm256_loadu_ps(x + c), xh = _mm256_loadu_ps(x + c + H);
        l0 = _mm256_fmadd_ps(load_w(b0, c, type), xl, l0);
        h0 = _mm256_fmadd_ps(load_w(b0, c + H, type), xh, h0);
        l1 = _mm256_fmadd_ps(load_w(b1, c, type), xl, l1);
        h1 = _mm256_fmadd_ps(load_w(b1, c + H, type), xh, h1);
        l2 = _mm256_fmadd_ps(load_w(b2, c, type), xl, l2);
        h2 = _mm256_fmadd_ps(load_w(b2, c + H, type), xh, h2);
        l3 = _mm256_fmadd_ps(load_w(b3, c, type), xl, l3);
        h3 = _mm256_fmadd_ps(load_w(b3, c + H, type), xh, h3);
    }
    float s[MATVEC_ROWS] = {sum_halves(l0, h0), sum_halves(l1, h1), sum_halves(l2, h2), sum_halves(l3, h3)};
    const char *b[MATVEC_ROWS] = {b0, b1, b2, b3};
    for (; c < cols; c++) {
        float xc = x[c];
        for (int i = 0; i < MATVEC_ROWS; i++) s[i] += scalar_w(b[i], c, type) * xc;
    }
    for (int i = 0; i < MATVEC_ROWS; i++) y[r + i] = s[i];
}

/* y[r] = W[r]·x for r in [from, to); W is [*, cols], row-major. */
KERNEL2 static inline __attribute__((always_inline)) void matvec(const void *w, int64_t cols, int32_t from, int32_t to, const float *x, float *y,
                                                                 const int type) {
    int64_t r = from;
    for (; r + MATVEC_ROWS <= to; r += MATVEC_ROWS) rows4(w, cols, r, x, y, type);
    for (; r < to; r++) y[r] = dot1((const char *) w + r * cols * W_BYTES(type), cols, x, type);
}

KERNEL2 void decodiff_matvec_bf16_avx2(const uint16_t *w, int64_t cols, int32_t from, int32_t to, const float *x, float *y) {
    matvec(w, cols, from, to, x, y, W_BF16);
}

KERNEL2 void decodiff_matvec_f32_avx2(const float *w, int64_t cols, int32_t from, int32_t to, const float *x, float *y) {
    matvec(w, cols, from, to, x, y, W_F32);
}

/*
 * MLX affine 4- and 8-bit matrices kept packed: decodiff_kernels.c's blocked layout and formulas (its comment above
 * decodiff_cpu_affine), the same bits. The prefill dequantizes each weight as fl(fl(scale · q) + bias) into the
 * GEMM's packed rows; decode sums each group exactly in integers. Without VNNI the integer sums take VPMADDUBSW
 * (unsigned code times signed activation byte, adjacent pairs summed into 16 bits, saturating) and VPMADDWD by ones
 * into 32 bits. No sum saturates: a code is a nibble (an 8-bit code is split in two, q = lo + 16 · hi), so a pair is
 * at most 2 · 15 · 128 = 3840 in magnitude, and a 16-bit sum adds at most 8 of them (30720) before it is widened.
 * All the integer sums are exact, so every order gives decodiff_kernels.c's bits (AffineWeightMatrixTest holds both
 * to one independent scalar formula).
 */
#define KERNEL2Q __attribute__((target("avx2,fma,f16c")))

int32_t decodiff_cpu_affine_avx2(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") ? 1 : 0;
}

typedef struct {
    const uint8_t *codes;
    const void *pairs;
    int32_t fmt, bits;
    int64_t group, rows, cols;
} affine_matrix;

/* Codes of columns [c, c + 8) (c a multiple of 8) of row r, as int32 lanes, from the blocked layout. */
KERNEL2Q static inline __m256i affine_codes8(const uint8_t *codes, const int bits, int64_t rows, int64_t cols, int64_t r, int64_t c) {
    const int64_t rb = cols * bits / 8, full = rows / BLOCK * BLOCK;
    const __m256i m15 = _mm256_set1_epi32(15);
    uint32_t d0, d1;
    if (r >= full) { /* row-major: 8-bit column c at byte c, 4-bit at nibble c of the row */
        const uint8_t *row = codes + r * rb;
        if (bits == 8) return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *) (row + c)));
        memcpy(&d0, row + c / 2, 4);
        return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int) d0), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)), m15);
    }
    const uint8_t *base = codes + (r - r % BLOCK) * rb + 4 * (r % BLOCK);
    if (bits == 8) {
        memcpy(&d0, base + (c / 4) * 64, 4);
        memcpy(&d1, base + (c / 4 + 1) * 64, 4);
        return _mm256_cvtepu8_epi32(_mm_setr_epi32((int) d0, (int) d1, 0, 0));
    }
    /* column c + j, j < 4: byte j's low nibble; j >= 4: byte j - 4's high nibble */
    memcpy(&d0, base + (c / 8) * 64, 4);
    return _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int) d0), _mm256_setr_epi32(0, 8, 16, 24, 4, 12, 20, 28)), m15);
}

/* Row r's scale and bias for group g, each broadcast to a register. */
KERNEL2Q static inline void affine_pair8(const void *pairs, int fmt, int64_t rows, int64_t groups, int64_t r, int64_t g, __m256 *s, __m256 *o) {
    float sc, bi;
    affine_pair(pairs, fmt, pair_index(rows, groups, r, g), &sc, &bi);
    *s = _mm256_set1_ps(sc), *o = _mm256_set1_ps(bi);
}

/* Weights fl(fl(s · q) + o) of columns [c, c + 8) of row r. */
KERNEL2Q static inline __m256 affine_weights8(const uint8_t *codes, const int bits, int64_t rows, int64_t cols, int64_t r, int64_t c, __m256 s,
                                              __m256 o) {
    return _mm256_add_ps(_mm256_mul_ps(s, _mm256_cvtepi32_ps(affine_codes8(codes, bits, rows, cols, r, c))), o);
}

/* Row r · x with the fp32 contract (the prefill's): weight fl(fl(scale · q) + bias), 16 lanes in column order. */
KERNEL2Q static float affine_row_fp32(const uint8_t *codes, const void *pairs, int fmt, int bits, int64_t rows, int64_t cols, int64_t group,
                                      int64_t r, const float *x) {
    const int64_t groups = cols / group;
    __m256 lo = _mm256_setzero_ps(), hi = lo, s = lo, o = lo;
    for (int64_t c = 0; c < cols; c += L) {
        if (c % group == 0) affine_pair8(pairs, fmt, rows, groups, r, c / group, &s, &o);
        lo = _mm256_fmadd_ps(affine_weights8(codes, bits, rows, cols, r, c, s, o), _mm256_loadu_ps(x + c), lo);
        hi = _mm256_fmadd_ps(affine_weights8(codes, bits, rows, cols, r, c + H, s, o), _mm256_loadu_ps(x + c + H), hi);
    }
    return sum_halves(lo, hi);
}

/* Columns [c0, c0 + n) of rows [r, r + ROWS) dequantized into wp, half by half (as pack_rows below). */
KERNEL2Q static void affine_pack_rows(const affine_matrix *m, int64_t r, int64_t c0, int64_t n, float *wp) {
    const int64_t groups = m->cols / m->group, half_stride = ROWS * n / 2;
    for (int i = 0; i < ROWS; i++) {
        __m256 s = _mm256_setzero_ps(), o = s;
        for (int64_t c = 0; c < n; c += L) {
            int64_t col = c0 + c;
            if (c == 0 || col % m->group == 0) affine_pair8(m->pairs, m->fmt, m->rows, groups, r + i, col / m->group, &s, &o);
            float *dst = wp + (c / L * ROWS + i) * H;
            _mm256_store_ps(dst, affine_weights8(m->codes, m->bits, m->rows, m->cols, r + i, col, s, o));
            _mm256_store_ps(dst + half_stride, affine_weights8(m->codes, m->bits, m->rows, m->cols, r + i, col + H, s, o));
        }
    }
}

/*
 * The activations as the integer kernel reads them: byte plane k of column c at planes[k · cols + c], per group its
 * scale 2^(e-30) and its sum X (decodiff_kernels.c's affine_stage, eight lanes at a time: the same values). Returns 0
 * where the fp32 path must be taken instead.
 */
KERNEL2Q static int affine_stage(const float *x, int64_t cols, int64_t group, int8_t *planes, float *pw, float *xsum) {
    const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff)), finite = _mm256_set1_ps(3.4028235e38f);
    for (int64_t g = 0; g < cols / group; g++) {
        const float *xg = x + g * group;
        __m256 mx = _mm256_setzero_ps();
        int bad = 0;
        for (int64_t i = 0; i < group; i += H) {
            __m256 v = _mm256_and_ps(_mm256_loadu_ps(xg + i), magnitude);
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(v, finite, _CMP_NLE_UQ)); /* inf or NaN */
            mx = _mm256_max_ps(mx, v);
        }
        if (bad) return 0;
        float lanes[H], M = 0.0f;
        _mm256_storeu_ps(lanes, mx);
        for (int i = 0; i < H; i++) M = lanes[i] > M ? lanes[i] : M;
        int e;
        if (!group_exponent(M, &e)) return 0;
        const __m256 up = _mm256_set1_ps(pow2f(30 - e));
        __m256i S = _mm256_setzero_si256();
        for (int64_t i = 0; i < group; i += H) {
            __m256i m = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xg + i), up)); /* |m| <= 2^30: round to nearest even */
            S = _mm256_add_epi64(S, _mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_castsi256_si128(m)),
                                                     _mm256_cvtepi32_epi64(_mm256_extracti128_si256(m, 1))));
            for (int k = 0; k < 4; k++) {
                __m256i b = _mm256_srai_epi32(_mm256_slli_epi32(m, 24), 24);
                __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
                _mm_storel_epi64((__m128i *) (planes + k * cols + g * group + i), _mm_packs_epi16(w, w));
                m = _mm256_srai_epi32(_mm256_sub_epi32(m, b), 8);
            }
        }
        int64_t s4[4];
        _mm256_storeu_si256((__m256i *) s4, S);
        pw[g] = pow2f(e - 30);
        xsum[g] = (float) (s4[0] + s4[1] + s4[2] + s4[3]) * pw[g];
    }
    return 1;
}

/* Scale and bias of rows [r + half, r + half + 8) of a whole block, group g: the block's 16 pairs of the group are contiguous. */
KERNEL2Q static inline __attribute__((always_inline)) void affine_pairs8(const void *pairs, const int fmt, int64_t groups, int64_t r, int64_t g,
                                                                        int half, __m256 *s, __m256 *b) {
    const int64_t at = r * groups + g * BLOCK + half;
    if (fmt == AFFINE_F32) { /* (s, b) interleaved: take the even and the odd floats, then restore the order of the 64-bit pieces */
        const float *p = (const float *) pairs + 2 * at;
        __m256 lo = _mm256_loadu_ps(p), hi = _mm256_loadu_ps(p + H);
        *s = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xd8));
        *b = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xdd)), 0xd8));
        return;
    }
    __m256i v = _mm256_loadu_si256((const __m256i *) ((const int32_t *) pairs + at));
    if (fmt == AFFINE_BF16) {
        *s = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
        *b = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32((int) 0xffff0000u)));
    } else {
        __m256i lo = _mm256_and_si256(v, _mm256_set1_epi32(0xffff)), hi = _mm256_srli_epi32(v, 16);
        *s = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(lo), _mm256_extracti128_si256(lo, 1)));
        *b = _mm256_cvtph_ps(_mm_packus_epi32(_mm256_castsi256_si128(hi), _mm256_extracti128_si256(hi, 1)));
    }
}

/*
 * Pins v to a register at this point: without it gcc reassociates the integer sums of the block kernel below (all
 * products first, then their sums), which keeps twice the values alive and spills half the accumulators.
 */
#define IN_REGISTER(v) __asm__("" : "+x"(v))
/* How far ahead the blocked matvec prefetches into L2. */
#define AFFINE_AHEAD 16384

/*
 * Block b (rows [b, b + 16)) of the integer matvec: per 64-byte chunk, rows b .. b + 7 from bytes 0-31 and rows
 * b + 8 .. b + 15 from bytes 32-63 (the two halves share each broadcast plane word); per row and plane k the exact
 * sum of codes times plane k over the group. Both halves in one pass share each chunk's loads and broadcasts; the
 * halves one after the other measured ~1.2 times slower (from cache, one thread, Zen 3).
 */
KERNEL2Q static inline __attribute__((always_inline)) void affine_block_int(const uint8_t *codes, const void *pairs, const int fmt, const int bits,
                                                                           int64_t cols, const int64_t G, int64_t b, const int8_t *planes,
                                                                           const float *pw, const float *xsum, float *out) {
    const int64_t rb = cols * bits / 8, groups = cols / G, per = bits == 4 ? 8 : 4, chunks = G / per;
    const int32_t *xw[4] = {(const int32_t *) planes, (const int32_t *) (planes + cols), (const int32_t *) (planes + 2 * cols),
                            (const int32_t *) (planes + 3 * cols)};
    const __m256i m15 = _mm256_set1_epi8(15);
    const int64_t pb = fmt == AFFINE_F32 ? 8 : 4, span = BLOCK * groups * pb, ahead = b + BLOCK * ((AFFINE_AHEAD + BLOCK * rb - 1) / (BLOCK * rb));
    const char *pairs_ahead = (const char *) pairs + ahead * groups * pb;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t g = 0; g < groups; g++) {
        const uint8_t *cg = codes + b * rb + g * chunks * 64;
        for (int64_t o = g * span / groups; o < (g + 1) * span / groups; o += 64) _mm_prefetch(pairs_ahead + o, _MM_HINT_T1);
        UNROLLED for (int64_t k = 0; k < chunks; k++) _mm_prefetch((const char *) (cg + k * 64 + AFFINE_AHEAD), _MM_HINT_T1);
        const int64_t q0 = g * G / 4; /* the group's first column, in 4-column words */
        /*
         * P[2p + h]: plane p, half h; the 16-bit sums alike, widened every `flush` chunks (8 pairs a lane at most). 4-bit:
         * all four planes a pass, the high nibbles (the next four columns, the next word) into the same sums; 8-bit: two
         * planes a pass, the high nibbles (the same columns' upper parts) into sums of their own, widened times 16.
         */
        __m256i P[8], lo[8], hi[8];
        const int64_t flush = bits == 4 ? 4 : 8, np = bits == 4 ? 4 : 2;
        UNROLLED for (int i = 0; i < 8; i++) P[i] = _mm256_setzero_si256();
        UNROLLED for (int p0 = 0; p0 < 4; p0 += np)
            _Pragma("GCC unroll 1") for (int64_t k0 = 0; k0 < chunks; k0 += flush) {
                UNROLLED for (int i = 2 * p0; i < 2 * (p0 + np); i++) lo[i] = hi[i] = _mm256_setzero_si256();
                _Pragma("GCC unroll 1") for (int64_t k = k0; k < k0 + flush; k++) {
                    const __m256i *c = (const __m256i *) (cg + k * 64);
                    UNROLLED for (int nib = 0; nib < 2; nib++) {
                        __m256i u0 = _mm256_loadu_si256(c), u1 = _mm256_loadu_si256(c + 1);
                        if (nib) u0 = _mm256_srli_epi16(u0, 4), u1 = _mm256_srli_epi16(u1, 4);
                        u0 = _mm256_and_si256(u0, m15), u1 = _mm256_and_si256(u1, m15);
                        const int64_t q = bits == 4 ? q0 + 2 * k + nib : q0 + k;
                        __m256i *s = bits == 4 || nib == 0 ? lo : hi;
                        UNROLLED for (int p = p0; p < p0 + np; p++) {
                            __m256i x = _mm256_set1_epi32(xw[p][q]);
                            s[2 * p] = _mm256_add_epi16(s[2 * p], _mm256_maddubs_epi16(u0, x));
                            s[2 * p + 1] = _mm256_add_epi16(s[2 * p + 1], _mm256_maddubs_epi16(u1, x));
                            IN_REGISTER(s[2 * p]);
                            IN_REGISTER(s[2 * p + 1]);
                        }
                    }
                }
                UNROLLED for (int i = 2 * p0; i < 2 * (p0 + np); i++) {
                    P[i] = _mm256_add_epi32(P[i], _mm256_madd_epi16(lo[i], _mm256_set1_epi16(1)));
                    if (bits == 8) P[i] = _mm256_add_epi32(P[i], _mm256_madd_epi16(hi[i], _mm256_set1_epi16(16)));
                }
            }
        UNROLLED for (int h = 0; h < 2; h++) { /* decodiff_kernels.c's affine_group_end, eight rows */
            __m256i A = _mm256_add_epi32(_mm256_slli_epi32(P[2 + h], 8), P[h]), B = _mm256_add_epi32(_mm256_slli_epi32(P[6 + h], 8), P[4 + h]);
            __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(B), _mm256_set1_ps(65536.0f), _mm256_cvtepi32_ps(A)), s, o;
            affine_pairs8(pairs, fmt, groups, b, g, h * H, &s, &o);
            acc[h] = _mm256_fmadd_ps(_mm256_mul_ps(s, _mm256_set1_ps(pw[g])), f, acc[h]);
            acc[h] = _mm256_fmadd_ps(o, _mm256_set1_ps(xsum[g]), acc[h]);
        }
    }
    _mm256_storeu_ps(out, acc[0]);
    _mm256_storeu_ps(out + H, acc[1]);
}

AFFINE_MATVEC(decodiff_matvec_affine_avx2, KERNEL2Q)

/*
 * The exact GEMM: Y[t·rows + r] = W[r]·X[t] for r in [from, to), t < tokens (X is [tokens, cols], row-major).
 *
 * decodiff_kernels.c's blocking with a register tile for sixteen 256-bit registers: four weight rows of a column
 * block widened to fp32 once into the scratch, the activations of every 3-token tile packed once per call, and a
 * 4-row × 3-token tile of 12 accumulator registers (plus the tile's three activation registers; the weights come
 * from memory as the FMAs' operands). Each pass of the tile takes one half of the sixteen lanes: both operands are
 * packed half by half ([half][column/16][row or token][8]), so a pass reads two contiguous streams. The accumulators'
 * two halves wait in the scratch between passes and column blocks, each (t, r) with its 16 lanes over the columns in
 * order: the contract's bits.
 */
#define ACC(i, j) a##i##j
#define LOAD_ACC(i, j) __m256 ACC(i, j) = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + ((j) * ROWS + (i)) * L + half)
#define STORE_ACC(i, j) _mm256_storeu_ps(acc + ((j) * ROWS + (i)) * L + half, ACC(i, j))
#define LOAD_TOKEN(j) LOAD_ACC(0, j); LOAD_ACC(1, j); LOAD_ACC(2, j); LOAD_ACC(3, j)
#define STORE_TOKEN(j) STORE_ACC(0, j); STORE_ACC(1, j); STORE_ACC(2, j); STORE_ACC(3, j)
#define ROW(i)                                                        \
    do {                                                              \
        __m256 v = _mm256_load_ps(wp + (i) * H);                      \
        ACC(i, 0) = _mm256_fmadd_ps(v, u0, ACC(i, 0));                \
        ACC(i, 1) = _mm256_fmadd_ps(v, u1, ACC(i, 1));                \
        ACC(i, 2) = _mm256_fmadd_ps(v, u2, ACC(i, 2));                \
    } while (0)

/* One half (lanes [half, half + 8)) of the 4 × 3 tile over n/16 steps: wp and xp that half's packed streams. */
KERNEL2 static void tile4x3(const float *wp, const float *xp, int64_t n, float *acc, int half, int first) {
    LOAD_TOKEN(0); LOAD_TOKEN(1); LOAD_TOKEN(2);
    for (int64_t c = 0; c < n; c += L, wp += ROWS * H, xp += TILE_TOKENS * H) {
        __m256 u0 = _mm256_load_ps(xp), u1 = _mm256_load_ps(xp + H), u2 = _mm256_load_ps(xp + 2 * H);
        ROW(0); ROW(1); ROW(2); ROW(3);
    }
    STORE_TOKEN(0); STORE_TOKEN(1); STORE_TOKEN(2);
}

/* The same for one token left over after the tiles, both halves, read in place at x (x and wp at the block's start). */
KERNEL2 static void tile4x1(const float *wp, int64_t half_stride, const float *x, int64_t n, float *acc, int first) {
    for (int half = 0; half < L; half += H, wp += half_stride) {
        __m256 s0 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + half), s1 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + L + half);
        __m256 s2 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + 2 * L + half), s3 = first ? _mm256_setzero_ps() : _mm256_loadu_ps(acc + 3 * L + half);
        const float *w = wp;
        for (int64_t c = 0; c < n; c += L, w += ROWS * H) {
            __m256 u = _mm256_loadu_ps(x + c + half);
            s0 = _mm256_fmadd_ps(_mm256_load_ps(w), u, s0);
            s1 = _mm256_fmadd_ps(_mm256_load_ps(w + H), u, s1);
            s2 = _mm256_fmadd_ps(_mm256_load_ps(w + 2 * H), u, s2);
            s3 = _mm256_fmadd_ps(_mm256_load_ps(w + 3 * H), u, s3);
        }
        _mm256_storeu_ps(acc + half, s0);
        _mm256_storeu_ps(acc + L + half, s1);
        _mm256_storeu_ps(acc + 2 * L + half, s2);
        _mm256_storeu_ps(acc + 3 * L + half, s3);
    }
}

/* Floats of scratch decodiff_matmul_bf16_avx2 needs for `tokens` tokens of `cols` columns (any alignment). */
int64_t decodiff_matmul_scratch_floats_avx2(int64_t cols, int32_t tokens) {
    int64_t bound = cols - cols % L;
    return 16 + (int64_t) tokens * ROWS * L + ROWS * COL_BLOCK + (int64_t) (tokens / TILE_TOKENS) * TILE_TOKENS * bound;
}

/* Tile k's activations, half by half: half h, column c (a multiple of 16), token j at xp + k·3·bound + h·(3·bound/2) + (c/16·3 + j)·8. */
KERNEL2 static void pack_tiles(const float *x, int64_t cols, int64_t bound, int32_t tokens, float *xp) {
    const int64_t tile = TILE_TOKENS * bound, half_stride = tile / 2;
    for (int k = 0; k < tokens / TILE_TOKENS; k++)
        for (int64_t c = 0; c < bound; c += L)
            for (int j = 0; j < TILE_TOKENS; j++) {
                const float *src = x + (int64_t) (k * TILE_TOKENS + j) * cols + c;
                float *dst = xp + k * tile + (c / L * TILE_TOKENS + j) * H;
                _mm256_store_ps(dst, _mm256_loadu_ps(src));
                _mm256_store_ps(dst + half_stride, _mm256_loadu_ps(src + H));
            }
}

/* Columns [c0, c0 + n) of rows [r, r + ROWS) as fp32 into wp half by half: half h, column c, row i at h·(ROWS·n/2) + (c/16·ROWS + i)·8. */
KERNEL2 static inline __attribute__((always_inline)) void pack_rows(const void *w, int64_t cols, int64_t r, int64_t c0, int64_t n, float *wp,
                                                                    const int type) {
    if (type == W_AFFINE) {
        affine_pack_rows((const affine_matrix *) w, r, c0, n, wp);
        return;
    }
    const int64_t half_stride = ROWS * n / 2;
    for (int64_t c = 0; c < n; c += L)
        for (int i = 0; i < ROWS; i++) {
            int64_t at = (r + i) * cols + c0 + c;
            float *dst = wp + (c / L * ROWS + i) * H;
            _mm256_store_ps(dst, load_w(w, at, type));
            _mm256_store_ps(dst + half_stride, load_w(w, at + H, type));
        }
}

/* y for rows [r, r + ROWS) of every token from their accumulators, then each token's scalar tail c >= bound. */
KERNEL2 static inline __attribute__((always_inline)) void finish_rows(const void *w, int64_t cols, int64_t bound, int32_t rows, int64_t r,
                                                                      const float *x, int32_t tokens, float *y, const float *acc, const int type) {
    int32_t t = 0;
    float sums[H];
    for (; bound > 0 && t + 2 <= tokens; t += 2) { /* two tokens × four rows: eight accumulators, contiguous */
        sum_lanes8(acc + (int64_t) t * ROWS * L, sums);
        memcpy(y + (int64_t) t * rows + r, sums, ROWS * sizeof(float));
        memcpy(y + (int64_t) (t + 1) * rows + r, sums + ROWS, ROWS * sizeof(float));
    }
    for (; t < tokens; t++)
        for (int i = 0; i < ROWS; i++) {
            const float *a = acc + ((int64_t) t * ROWS + i) * L;
            y[(int64_t) t * rows + r + i] = bound == 0 ? 0.0f : sum_halves(_mm256_loadu_ps(a), _mm256_loadu_ps(a + H));
        }
    for (t = 0; type != W_AFFINE && bound < cols && t < tokens; t++) /* an affine row has none: its groups are whole vectors */
        for (int i = 0; i < ROWS; i++) {
            float s = y[(int64_t) t * rows + r + i];
            for (int64_t c = bound; c < cols; c++) s += scalar_w(w, (r + i) * cols + c, type) * x[(int64_t) t * cols + c];
            y[(int64_t) t * rows + r + i] = s;
        }
}

/* scratch: decodiff_matmul_scratch_floats_avx2(cols, tokens) floats (any alignment). */
KERNEL2 static inline __attribute__((always_inline)) void matmul(const void *w, int64_t cols, int32_t rows, int32_t from, int32_t to,
                                                                 const float *x, int32_t tokens, float *y, float *scratch, const int type) {
    int64_t bound = cols - cols % L, tiled = tokens - tokens % TILE_TOKENS;
    float *acc = (float *) (((uintptr_t) scratch + 63) & ~(uintptr_t) 63);
    float *wp = acc + (int64_t) tokens * ROWS * L, *xp = wp + ROWS * COL_BLOCK;
    pack_tiles(x, cols, bound, tokens, xp);
    int64_t end = to - (to - from) % ROWS;
    for (int64_t r = from; r < end; r += ROWS) {
        for (int64_t c0 = 0; c0 < bound; c0 += COL_BLOCK) {
            int64_t n = bound - c0 < COL_BLOCK ? bound - c0 : COL_BLOCK, wh = ROWS * n / 2;
            pack_rows(w, cols, r, c0, n, wp, type);
            /*
             * Every tile's first half, then every tile's second: the block's two packed halves (24-32 KB) and a tile's
             * activations do not fit a 32 KB L1 together, one half does (cachegrind, L1 32 KB 8-way: half the L1 misses
             * at 1536 and 6144 columns). The halves' lanes are apart, so the bits are the same in either order.
             */
            for (int half = 0; half < 2; half++)
                for (int64_t t = 0; t < tiled; t += TILE_TOKENS)
                    tile4x3(wp + half * wh, xp + t * bound + c0 * TILE_TOKENS / 2 + half * (TILE_TOKENS * bound / 2), n, acc + t * ROWS * L,
                            half * H, c0 == 0);
            for (int64_t t = tiled; t < tokens; t++) tile4x1(wp, wh, x + t * cols + c0, n, acc + t * ROWS * L, c0 == 0);
        }
        finish_rows(w, cols, bound, rows, r, x, tokens, y, acc, type);
    }
    for (int64_t r = end; r < to; r++)
        for (int t = 0; t < tokens; t++) {
            const float *xt = x + (int64_t) t * cols;
            const affine_matrix *m = (const affine_matrix *) w;
            y[(int64_t) t * rows + r] = type == W_AFFINE ? affine_row_fp32(m->codes, m->pairs, m->fmt, m->bits, m->rows, cols, m->group, r, xt)
                                                         : dot1((const char *) w + r * cols * W_BYTES(type), cols, xt, type);
        }
}

KERNEL2 void decodiff_matmul_bf16_avx2(const uint16_t *w, int64_t cols, int32_t rows, int32_t from, int32_t to,
                                      const float *x, int32_t tokens, float *y, float *scratch) {
    matmul(w, cols, rows, from, to, x, tokens, y, scratch, W_BF16);
}

KERNEL2 void decodiff_matmul_f32_avx2(const float *w, int64_t cols, int32_t rows, int32_t from, int32_t to,
                                     const float *x, int32_t tokens, float *y, float *scratch) {
    matmul(w, cols, rows, from, to, x, tokens, y, scratch, W_F32);
}

/* decodiff_kernels.c's decodiff_matmul_affine: the rows dequantized (instead of widened) into the packed block. */
KERNEL2Q void decodiff_matmul_affine_avx2(const uint8_t *codes, const void *pairs, int32_t fmt, int32_t bits, int32_t group, int64_t cols,
                                         int32_t rows, int32_t from, int32_t to, const float *x, int32_t tokens, float *y, float *scratch) {
    const affine_matrix m = {codes, pairs, fmt, bits, group, rows, cols};
    matmul(&m, cols, rows, from, to, x, tokens, y, scratch, W_AFFINE);
}

/* Keys kr[0 .. nk) (nk 2 or 3) against the four heads, lanes [half, half + 8): 4 × nk accumulators, into lanes[h][j + i]. */
KERNEL2 static inline __attribute__((always_inline)) void score_pass(const float *const qh[4], const float *const *kr, const int nk, int32_t half,
                                                                     int32_t bound, float lanes[4][H][L], int j) {
    __m256 a[4][3];
    UNROLLED for (int h = 0; h < 4; h++) UNROLLED for (int i = 0; i < 3; i++) a[h][i] = _mm256_setzero_ps();
    for (int32_t c = half; c < bound; c += L) {
        __m256 v[3];
        UNROLLED for (int i = 0; i < nk; i++) v[i] = _mm256_loadu_ps(kr[i] + c);
        UNROLLED for (int h = 0; h < 4; h++) {
            __m256 x = _mm256_loadu_ps(qh[h] + c);
            UNROLLED for (int i = 0; i < nk; i++) a[h][i] = _mm256_fmadd_ps(x, v[i], a[h][i]);
        }
    }
    UNROLLED for (int h = 0; h < 4; h++) UNROLLED for (int i = 0; i < nk; i++) _mm256_store_ps(lanes[h][j + i] + half, a[h][i]);
}

/*
 * Attention's two inner loops over f32 cache rows, with VectorMath's contract (its dotsRange and accumulateF32; as
 * decodiff_kernels.c's decodiff_attention_scores and decodiff_attention_values, the same bits).
 *
 * decodiff_attention_scores_avx2: for up to four heads (q + qo0 .. qo3; spare heads repeat the last) and key rows
 * k + ko[i], i < n: scores[s0 + h·stride + i] = 16 lane accumulators over the head dim's vector part in order,
 * summed in lane order from 0.0f, then the scalar tail c >= d - d % 16 as separately rounded products in order.
 * Eight keys at a time: for each half of the lanes, keys 0-2, 3-5 and 6-7 in three passes of four heads × three (or
 * two) keys, 12 accumulators, into `lanes`; then per head one sum_lanes8 gives the eight keys' scores. Two keys a pass
 * (8 accumulators, six loads per eight FMAs) ran at about half the GEMM tile's rate; three run 1.1-1.3 × that (one
 * thread, the prefill's 64-key blocks of 16 query rows, head dims 256 and 512).
 */
KERNEL2 void decodiff_attention_scores_avx2(const float *q, int32_t qo0, int32_t qo1, int32_t qo2, int32_t qo3, int32_t heads, const float *k,
                                           const int32_t *ko, int32_t n, int32_t d, float *scores, int32_t s0, int32_t stride) {
    const float *qh[4] = {q + qo0, q + qo1, q + qo2, q + qo3};
    int32_t bound = d - d % L, i = 0;
    float lanes[4][H][L] __attribute__((aligned(32))); /* head, key of the eight, lane */
    for (; i + H <= n; i += H) {
        const float *kr[H];
        UNROLLED for (int j = 0; j < H; j++) kr[j] = k + ko[i + j];
        for (int half = 0; half < L; half += H) {
            score_pass(qh, kr, 3, half, bound, lanes, 0);
            score_pass(qh, kr + 3, 3, half, bound, lanes, 3);
            score_pass(qh, kr + 6, 2, half, bound, lanes, 6);
        }
        for (int h = 0; h < heads; h++) sum_lanes8(lanes[h][0], scores + s0 + (int64_t) h * stride + i);
        for (int32_t c = bound; c < d; c++)
            for (int j = 0; j < H; j++) {
                float kc = k[ko[i + j] + c];
                for (int h = 0; h < heads; h++) scores[s0 + (int64_t) h * stride + i + j] += qh[h][c] * kc;
            }
    }
    for (; i < n; i++) {
        const float *kr = k + ko[i];
        for (int h = 0; h < heads; h++) {
            __m256 lo = _mm256_setzero_ps(), hi = lo;
            for (int32_t c = 0; c < bound; c += L) {
                lo = _mm256_fmadd_ps(_mm256_loadu_ps(qh[h] + c), _mm256_loadu_ps(kr + c), lo);
                hi = _mm256_fmadd_ps(_mm256_loadu_ps(qh[h] + c + H), _mm256_loadu_ps(kr + c + H), hi);
            }
            float s = sum_halves(lo, hi);
            for (int32_t c = bound; c < d; c++) s += qh[h][c] * kr[c];
            scores[s0 + (int64_t) h * stride + i] = s;
        }
    }
}

/* Columns [c, c + 8·nr) (nr 1 to 3) of the four heads' outputs over rows [i0, i1): 4 × nr accumulators. */
KERNEL2 static inline __attribute__((always_inline)) void values_pass(const float *const pp[4], const float *v, const int32_t *vo, int32_t i0,
                                                                      int32_t i1, int32_t c, const int nr, float *const u[4]) {
    __m256 o[4][3];
    UNROLLED for (int h = 0; h < 4; h++) UNROLLED for (int r = 0; r < nr; r++) o[h][r] = _mm256_loadu_ps(u[h] + c + r * H);
    for (int32_t i = i0; i < i1; i++) {
        const float *row = v + vo[i] + c;
        __m256 x[3];
        UNROLLED for (int r = 0; r < nr; r++) x[r] = _mm256_loadu_ps(row + r * H);
        UNROLLED for (int h = 0; h < 4; h++) {
            __m256 b = _mm256_broadcast_ss(pp[h] + i);
            UNROLLED for (int r = 0; r < nr; r++) o[h][r] = _mm256_fmadd_ps(x[r], b, o[h][r]);
        }
    }
    /* Spare heads alias the last: stored last to first, the last head's own store lands last — the same bits anyway. */
    UNROLLED for (int h = 3; h >= 0; h--) UNROLLED for (int r = 0; r < nr; r++) _mm256_storeu_ps(u[h] + c + r * H, o[h][r]);
}

/*
 * decodiff_attention_values_avx2: columns [0, c2) of four heads' outputs (out + uo0 .. uo3; spare heads repeat the
 * last, computing and storing the same bits to the same place) += their weights p[po<h> + i] · value rows v + vo[i],
 * rows [i0, i1) in order, one fused multiply-add each: 24 columns of the four heads a pass (12 accumulator chains,
 * where 16 columns gave 8, about as many as the FMA latency keeps busy: 1.15-1.2 × as fast), the last 16 or 8 columns
 * in a pass of their own. Each column is its own sum over the rows, so the columns' grouping changes no bit.
 */
KERNEL2 void decodiff_attention_values_avx2(const float *p, int32_t po0, int32_t po1, int32_t po2, int32_t po3, const float *v, const int32_t *vo,
                                           int32_t i0, int32_t i1, int32_t c2, float *out, int32_t uo0, int32_t uo1, int32_t uo2, int32_t uo3) {
    float *const u[4] = {out + uo0, out + uo1, out + uo2, out + uo3};
    const float *const pp[4] = {p + po0, p + po1, p + po2, p + po3};
    int32_t c = 0;
    for (; c + 3 * H <= c2; c += 3 * H) values_pass(pp, v, vo, i0, i1, c, 3, u);
    if (c + 2 * H <= c2) values_pass(pp, v, vo, i0, i1, c, 2, u), c += 2 * H;
    if (c + H <= c2) values_pass(pp, v, vo, i0, i1, c, 1, u);
}
