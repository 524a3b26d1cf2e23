/*
 * decodiff's native bf16 kernels, called through FFM (dev.decodiff.metal.NativeKernels).
 *
 * Why native: a bf16 matvec is memory-bound only if the core keeps enough cache-line fetches in flight. Java has
 * no prefetch instruction, and on the machine we measured the hardware prefetchers alone leave the Java kernel at
 * ~0.77 of the streaming-read bandwidth; software prefetch of the rows ahead into L2 brings it level (rows8).
 *
 * Contract: every result is bit-identical to WeightMatrix's Java kernels (and to the scalar reference in
 * WeightMatrixTest): per output, 16 fp32 lane accumulators over the vector part of the row in column order (one
 * fused multiply-add each), summed in lane order from 0.0f, then the scalar tail c >= cols - cols % 16 added as
 * separately rounded products. Built with -ffp-contract=off and without -ffast-math so the compiler keeps that
 * order, and without flush-to-zero so subnormals stay.
 */
#define _GNU_SOURCE /* syscall, for the AMX permission */
#include <cpuid.h>
#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "decodiff_affine.h"
#include "decodiff_bf16.h"

#define KERNEL __attribute__((target("avx512f")))
#define L 16
#define ROWS 4
#define TILE_TOKENS 6
/* Columns of one GEMM block: a row of 1536 or 2048 columns is one block, so nothing is carried between blocks.
 * Shorter blocks (512, 768, 1024: the widened rows and a tile's activations then share L1) measured 0.95-1.00 of
 * this with the packed operands: the carried accumulators cost what the smaller footprint saves (one thread, CPU
 * time). */
#define COL_BLOCK 2048
/* How far ahead the streaming reads prefetch, into L2 (see rows8). */
#define PREFETCH_BYTES 16384
/* A loop the compiler must unroll (so that arrays of vectors indexed by its counter become registers). */
#define UNROLLED _Pragma("GCC unroll 16")

int32_t decodiff_abi_version(void) { return 10; }

int32_t decodiff_cpu_supported(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? 1 : 0;
}

KERNEL static inline __m512 widen(const uint16_t *p) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *) p)), 16));
}

KERNEL static inline float sum_lanes(__m512 v) {
    float lanes[L];
    _mm512_storeu_ps(lanes, v);
    float s = 0.0f;
    for (int i = 0; i < L; i++) s += lanes[i];
    return s;
}

/*
 * Decode's matvec reads each row group once: MATVEC_ROWS rows at a time, each row with its own 16-lane accumulator
 * (so a row's bits do not depend on the group size), prefetching the rows one group ahead (at least PREFETCH_BYTES
 * further on), at the same column, into L2.
 *
 * Eight rows, not four: with four rows in flight the core read its weights at 0.75-0.80 of a streaming read's rate
 * even with no arithmetic at all (the same access pattern summing integers: 21.4 GB/s against 29.0 for one stream),
 * with eight at 0.95-1.02 of it (one thread, CPU time, bf16 [131072, 1536], [32768, 6144] and [98304, 2048], on
 * 4 KB and on 2 MB pages; sixteen rows fall back to 0.6-0.8). Into L2 rather than L1: an L1 prefetch holds one of
 * the core's few L1 miss buffers until its line arrives, which cut the rate to 0.56-0.74 of a streaming read.
 */
#define MATVEC_ROWS 8
KERNEL static void rows8(const uint16_t *w, int64_t cols, int64_t r, const float *x, float *y) {
    const uint16_t *b[MATVEC_ROWS];
    for (int i = 0; i < MATVEC_ROWS; i++) b[i] = w + (r + i) * cols;
    const int64_t group = MATVEC_ROWS * cols, ahead = group * ((PREFETCH_BYTES / 2 + group - 1) / group);
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
    int64_t bound = cols - cols % L, c = 0;
    for (; c + 2 * L <= bound; c += 2 * L) {
        for (int i = 0; i < MATVEC_ROWS; i++) _mm_prefetch((const char *) (b[i] + ahead + c), _MM_HINT_T1);
        for (int h = 0; h < 2 * L; h += L) {
            __m512 xv = _mm512_loadu_ps(x + c + h);
            a0 = _mm512_fmadd_ps(widen(b[0] + c + h), xv, a0);
            a1 = _mm512_fmadd_ps(widen(b[1] + c + h), xv, a1);
            a2 = _mm512_fmadd_ps(widen(b[2] + c + h), xv, a2);
            a3 = _mm512_fmadd_ps(widen(b[3] + c + h), xv, a3);
            a4 = _mm512_fmadd_ps(widen(b[4] + c + h), xv, a4);
            a5 = _mm512_fmadd_ps(widen(b[5] + c + h), xv, a5);
            a6 = _mm512_fmadd_ps(widen(b[6] + c + h), xv, a6);
            a7 = _mm512_fmadd_ps(widen(b[7] + c + h), xv, a7);
        }
    }
    for (; c < bound; c += L) {
        __m512 xv = _mm512_loadu_ps(x + c);
        a0 = _mm512_fmadd_ps(widen(b[0] + c), xv, a0);
        a1 = _mm512_fmadd_ps(widen(b[1] + c), xv, a1);
        a2 = _mm512_fmadd_ps(widen(b[2] + c), xv, a2);
        a3 = _mm512_fmadd_ps(widen(b[3] + c), xv, a3);
        a4 = _mm512_fmadd_ps(widen(b[4] + c), xv, a4);
        a5 = _mm512_fmadd_ps(widen(b[5] + c), xv, a5);
        a6 = _mm512_fmadd_ps(widen(b[6] + c), xv, a6);
        a7 = _mm512_fmadd_ps(widen(b[7] + c), xv, a7);
    }
    float s[MATVEC_ROWS] = {sum_lanes(a0), sum_lanes(a1), sum_lanes(a2), sum_lanes(a3),
                            sum_lanes(a4), sum_lanes(a5), sum_lanes(a6), sum_lanes(a7)};
    for (; c < cols; c++) {
        float xc = x[c];
        for (int i = 0; i < MATVEC_ROWS; i++) s[i] += bf16(b[i][c]) * xc;
    }
    for (int i = 0; i < MATVEC_ROWS; i++) y[r + i] = s[i];
}

KERNEL static float dot1(const uint16_t *row, int64_t cols, const float *x) {
    __m512 a = _mm512_setzero_ps();
    int64_t bound = cols - cols % L, c = 0;
    for (; c < bound; c += L) a = _mm512_fmadd_ps(widen(row + c), _mm512_loadu_ps(x + c), a);
    float s = sum_lanes(a);
    for (; c < cols; c++) s += bf16(row[c]) * x[c];
    return s;
}

/*
 * Reads bytes [0, n) of p (n a multiple of 256) and returns a checksum: the yardstick decode's weight traffic is
 * measured against. It prefetches like the matvec does, so the yardstick is never the weaker reader of the two.
 */
KERNEL int64_t decodiff_stream_read(const uint8_t *p, int64_t n) {
    __m512i a = _mm512_setzero_si512(), b = a, c = a, d = a;
    for (int64_t o = 0; o < n; o += 256) {
        _mm_prefetch((const char *) p + o + PREFETCH_BYTES, _MM_HINT_T1);
        _mm_prefetch((const char *) p + o + PREFETCH_BYTES + 64, _MM_HINT_T1);
        _mm_prefetch((const char *) p + o + PREFETCH_BYTES + 128, _MM_HINT_T1);
        _mm_prefetch((const char *) p + o + PREFETCH_BYTES + 192, _MM_HINT_T1);
        a = _mm512_add_epi32(a, _mm512_loadu_si512(p + o));
        b = _mm512_add_epi32(b, _mm512_loadu_si512(p + o + 64));
        c = _mm512_add_epi32(c, _mm512_loadu_si512(p + o + 128));
        d = _mm512_add_epi32(d, _mm512_loadu_si512(p + o + 192));
    }
    return _mm512_reduce_add_epi32(_mm512_add_epi32(_mm512_add_epi32(a, b), _mm512_add_epi32(c, d)));
}

/*
 * The fp32 FMA peak yardstick in C, for jmh/c/kernels_cpu_time.c (decodiff bench runs the same loop in Java,
 * FmaPeak): `iterations` rounds of FMA_CHAINS independent 16-lane fused multiply-adds kept in registers (no memory
 * traffic), so it runs at the core's FMA throughput: FMA_CHAINS · 32 flops per iteration. The chains start from
 * different values so the compiler cannot merge them. Returns a checksum.
 */
#define FMA_CHAINS 12
int32_t decodiff_fma_chains(void) { return FMA_CHAINS; }

#define CHAIN(k) __m512 a##k = _mm512_set1_ps(1.0f + 0.1f * (k))
#define STEP(k) a##k = _mm512_fmadd_ps(a##k, m, c)
KERNEL float decodiff_fma_loop(int64_t iterations) {
    CHAIN(0); CHAIN(1); CHAIN(2); CHAIN(3); CHAIN(4); CHAIN(5); CHAIN(6); CHAIN(7); CHAIN(8); CHAIN(9); CHAIN(10); CHAIN(11);
    const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
    for (int64_t i = 0; i < iterations; i++) {
        STEP(0); STEP(1); STEP(2); STEP(3); STEP(4); STEP(5); STEP(6); STEP(7); STEP(8); STEP(9); STEP(10); STEP(11);
    }
    __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)), _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
    return sum_lanes(_mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11))));
}

/* y[r] = W[r]·x for r in [from, to); W is [*, cols] bf16, row-major. */
KERNEL void decodiff_matvec_bf16(const uint16_t *w, int64_t cols, int32_t from, int32_t to, const float *x, float *y) {
    int64_t r = from;
    for (; r + MATVEC_ROWS <= to; r += MATVEC_ROWS) rows8(w, cols, r, x, y);
    for (; r < to; r++) y[r] = dot1(w + r * cols, cols, x);
}

/*
 * Y[t·rows + r] = W[r]·X[t] for r in [from, to), t < tokens (X is [tokens, cols], row-major): the exact GEMM.
 *
 * Blocking: both operands of the register tile are read from packed, 64-byte aligned copies in the scratch:
 *  - the activations of every 6-token tile, interleaved per 16 columns ([column/16][token][16]), copied once per
 *    call: one sequential stream per tile. Read in place, the six rows of a tile lie cols·4 bytes apart, a multiple
 *    of 4 KB for 1024, 2048 or 6144 columns, so they fall into the same L1 sets (and, from an unaligned Java array,
 *    every load splits a cache line). With the rest of this blocking it took the 1536 × 6144 GEMM with 42 tokens
 *    from 0.61-0.73 of the FMA peak to 0.67-0.79 (medians 0.71 and 0.77) and 6144 × 1536 with 168 tokens from
 *    0.71-0.81 to 0.82-0.89 (medians 0.78 and 0.87; one thread, CPU time, jmh/c/kernels_ab.c and
 *    kernels_cpu_time.c);
 *  - four weight rows of one column block, widened to fp32 and interleaved the same way ([column/16][row][16]):
 *    widened once per column block and reused by every token of the call, so the bf16 widening (which competes with
 *    the FMAs for ports) is out of the inner loop.
 * A 4-row × 6-token register tile (24 accumulators, 4 weight vectors, 1 activation vector of the 32 registers)
 * makes one pass over a column block; its accumulator vectors are carried across column blocks in the scratch. In
 * the last block each finished group of four tokens gets its lane sums (16 × 16 transposes) at once, overlapping
 * the next tile's FMAs; the scalar tail comes after. Each (t, r) still has its 16 lane accumulators over the columns
 * in order: bits as WeightMatrix's.
 *
 * Where the time goes (6144 × 1536 weights, 168 tokens, one thread, CPU time; 0.82-0.89 of the FMA peak in all):
 * the tile loop alone runs at ~0.98 of the peak with its operands in L1 or L2 and ~0.92-0.95 over a whole chunk of
 * activations, the lane sums take ~3 %. Tried and not taken, each measured no faster (0.99-1.03×): widening each
 * group's rows once per call instead of once per token chunk (four groups' rows kept in L2 across the chunks),
 * software prefetch of the activations, shorter column blocks. Rows wider than a column block go through it eight
 * groups at a time (SUPER_GROUPS): no faster where the L2 is 2 MB, but with a 1 MB L2 (Zen 4) a 42-token chunk of
 * 12288-column activations no longer fits it. There, 1.03× median on one thread (jmh/c/kernels_ab.c, 12288 1536 42),
 * and E2B's widest down projection (1536 × 12288, 1,024 tokens) took 0.224 and 0.211 s on two threads against 0.225
 * and 0.245 before.
 */
/* One token of the tile: u is its activation vector, a<i><j> the accumulator of row i, token j. */
#define TOKEN(j)                                                  \
    do {                                                          \
        __m512 u = _mm512_load_ps(xp + (j) * L);                  \
        a0##j = _mm512_fmadd_ps(v0, u, a0##j);                    \
        a1##j = _mm512_fmadd_ps(v1, u, a1##j);                    \
        a2##j = _mm512_fmadd_ps(v2, u, a2##j);                    \
        a3##j = _mm512_fmadd_ps(v3, u, a3##j);                    \
    } while (0)
#define LOAD(i, j) __m512 a##i##j = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + ((j) * ROWS + (i)) * L)
#define LOAD_TOKEN(j) LOAD(0, j); LOAD(1, j); LOAD(2, j); LOAD(3, j)
#define STORE(i, j) _mm512_storeu_ps(acc + ((j) * ROWS + (i)) * L, a##i##j)
#define STORE_TOKEN(j) STORE(0, j); STORE(1, j); STORE(2, j); STORE(3, j)

/*
 * Columns [0, n) of the 4 × 6 tile: wp the packed weight rows, xp the packed tokens (both advance 16 columns a
 * step). 24 named accumulators: written out so the compiler keeps every one in a register (an array of them it
 * spills).
 */
KERNEL static void tile4x6(const float *wp, const float *xp, int64_t n, float *acc, int first) {
    LOAD_TOKEN(0); LOAD_TOKEN(1); LOAD_TOKEN(2); LOAD_TOKEN(3); LOAD_TOKEN(4); LOAD_TOKEN(5);
    for (int64_t c = 0; c < n; c += L, wp += ROWS * L, xp += TILE_TOKENS * L) {
        __m512 v0 = _mm512_load_ps(wp), v1 = _mm512_load_ps(wp + L), v2 = _mm512_load_ps(wp + 2 * L), v3 = _mm512_load_ps(wp + 3 * L);
        TOKEN(0); TOKEN(1); TOKEN(2); TOKEN(3); TOKEN(4); TOKEN(5);
    }
    STORE_TOKEN(0); STORE_TOKEN(1); STORE_TOKEN(2); STORE_TOKEN(3); STORE_TOKEN(4); STORE_TOKEN(5);
}

/* The same for one token left over after the tiles, read in place at x. */
KERNEL static void tile4x1(const float *wp, const float *x, int64_t n, float *acc, int first) {
    __m512 s0 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc), s1 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + L);
    __m512 s2 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + 2 * L), s3 = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + 3 * L);
    for (int64_t c = 0; c < n; c += L, wp += ROWS * L) {
        __m512 u = _mm512_loadu_ps(x + c);
        s0 = _mm512_fmadd_ps(_mm512_load_ps(wp), u, s0);
        s1 = _mm512_fmadd_ps(_mm512_load_ps(wp + L), u, s1);
        s2 = _mm512_fmadd_ps(_mm512_load_ps(wp + 2 * L), u, s2);
        s3 = _mm512_fmadd_ps(_mm512_load_ps(wp + 3 * L), u, s3);
    }
    _mm512_storeu_ps(acc, s0);
    _mm512_storeu_ps(acc + L, s1);
    _mm512_storeu_ps(acc + 2 * L, s2);
    _mm512_storeu_ps(acc + 3 * L, s3);
}

/* r[l] becomes lane l of every input vector (input k in lane k): a 16 × 16 transpose of 32-bit elements. */
KERNEL static inline __attribute__((always_inline)) void transpose16(__m512 r[L]) {
    __m512 t[L];
    UNROLLED for (int k = 0; k < L; k += 2) {
        t[k] = _mm512_unpacklo_ps(r[k], r[k + 1]);
        t[k + 1] = _mm512_unpackhi_ps(r[k], r[k + 1]);
    }
    UNROLLED for (int k = 0; k < L; k += 4) {
        r[k] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[k]), _mm512_castps_pd(t[k + 2])));
        r[k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[k]), _mm512_castps_pd(t[k + 2])));
        r[k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[k + 1]), _mm512_castps_pd(t[k + 3])));
        r[k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[k + 1]), _mm512_castps_pd(t[k + 3])));
    }
    UNROLLED for (int k = 0; k < L; k += 8)
        UNROLLED for (int j = 0; j < 4; j++) {
            t[k + j] = _mm512_shuffle_f32x4(r[k + j], r[k + 4 + j], 0x88);
            t[k + 4 + j] = _mm512_shuffle_f32x4(r[k + j], r[k + 4 + j], 0xdd);
        }
    UNROLLED for (int j = 0; j < 8; j++) {
        r[j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0x88);
        r[8 + j] = _mm512_shuffle_f32x4(t[j], t[8 + j], 0xdd);
    }
}

/*
 * The lane sums of sixteen accumulators at once: a[k·16 ..] for k < 16 (four tokens × ROWS rows, token-major),
 * each summed in lane order from 0.0f exactly as sum_lanes does, written to y[(k / ROWS)·ystride + k % ROWS].
 * A 16 × 16 transpose puts lane l of every accumulator in one vector, so sixteen vector additions replace 256
 * dependent scalar ones (which cost prefill's GEMM about a tenth of its time). Every loop is unrolled so the 32
 * vectors stay in registers: left as loops, gcc -O2 keeps r and t on the stack and the call takes ~200 cycles
 * instead of ~70 (one thread, in L1), a tenth of a 1536-column GEMM instead of a twentieth.
 */
KERNEL static void sum_lanes16(const float *a, float *y, int64_t ystride) {
    __m512 r[L];
    UNROLLED for (int k = 0; k < L; k++) r[k] = _mm512_loadu_ps(a + k * L);
    transpose16(r);
    /* r[l] now holds lane l of every accumulator (accumulator k in lane k). */
    __m512 s = _mm512_setzero_ps();
    UNROLLED for (int l = 0; l < L; l++) s = _mm512_add_ps(s, r[l]);
    float sums[L];
    _mm512_storeu_ps(sums, s);
    UNROLLED for (int j = 0; j < 4; j++) memcpy(y + j * ystride, sums + j * ROWS, ROWS * sizeof(float));
}

/*
 * Row groups of a row wider than one column block that decodiff_matmul_bf16 takes through each column block together
 * (a "superblock"): that block of the chunk's activations (42 tokens × 2048 columns: 344 KB) then stays in L2 while
 * all of them pass over it, where one group at a time streamed all of a wide row's activations (42 × 12288 columns:
 * 2 MB, past a 1 MB L2) for each group. Their accumulators (8 × 42 tokens × 4 rows × 64 B: 86 KB) wait in the scratch.
 */
#define SUPER_GROUPS 8

/* Row groups one superblock of a row of `bound` vector columns takes. */
static inline int64_t super_groups(int64_t bound) { return bound > COL_BLOCK ? SUPER_GROUPS : 1; }

/* The scratch, carved out of the caller's: accumulators, one packed weight block, the packed activation tiles. */
typedef struct {
    float *acc;  /* groups · tokens · ROWS · 16: group g, token t, row i at ((g · tokens + t) · ROWS + i) · 16 */
    float *wp;   /* ROWS · COL_BLOCK */
    float *xp;   /* (tokens / TILE_TOKENS) · TILE_TOKENS · bound: tile k's column c at (k · bound + c) · TILE_TOKENS */
} gemm_scratch;

static gemm_scratch carve_groups(float *scratch, int32_t tokens, int64_t groups) {
    float *p = (float *) (((uintptr_t) scratch + 63) & ~(uintptr_t) 63);
    int64_t acc = groups * tokens * ROWS * L;
    gemm_scratch s = {p, p + acc, p + acc + ROWS * COL_BLOCK};
    return s;
}

static gemm_scratch carve(float *scratch, int32_t tokens) { return carve_groups(scratch, tokens, 1); }

/* Floats of scratch decodiff_matmul_bf16 and decodiff_matmul_bf16dot need for `tokens` tokens of `cols` columns. */
int64_t decodiff_matmul_scratch_floats(int64_t cols, int32_t tokens) {
    /* Per tiled token: bound fp32 columns (decodiff_matmul_bf16) or cols rounded up to 32 bf16 ones (bf16dot). */
    int64_t bound = cols - cols % L, padded = (cols + 31) / 32 * 16, per_token = bound > padded ? bound : padded;
    return 16 + super_groups(bound) * tokens * ROWS * L + ROWS * COL_BLOCK + (int64_t) (tokens / TILE_TOKENS) * TILE_TOKENS * per_token;
}

KERNEL static void pack_tiles(const float *x, int64_t cols, int64_t bound, int32_t tokens, float *xp) {
    for (int k = 0; k < tokens / TILE_TOKENS; k++)
        for (int64_t c = 0; c < bound; c += L)
            for (int j = 0; j < TILE_TOKENS; j++)
                _mm512_store_ps(xp + (k * bound + c) * TILE_TOKENS + j * L, _mm512_loadu_ps(x + (int64_t) (k * TILE_TOKENS + j) * cols + c));
}

/*
 * Columns [c0, c0 + n) of rows [r, r + ROWS) widened into wp, interleaved per 16 columns. Unless next is NULL it
 * prefetches the block the next call will widen (ROWS rows from next, stride cols) into L1 meanwhile, so those bf16
 * reads come from cache: with few tokens per call (an expert's share of a MoE prefill) the GEMM waits on them (one
 * thread, CPU time, 704 × 2816 weights, medians of 10 rounds: 3 tokens 1.46× faster, 6 tokens 1.40×, 12 tokens
 * 1.24×, 32 tokens 1.09×; 6144 × 1536 with 168 tokens 1.03×).
 */
KERNEL static void pack_rows(const uint16_t *w, int64_t cols, int64_t r, int64_t c0, int64_t n, float *wp, const uint16_t *next) {
    for (int64_t c = 0; c < n; c += L) {
        if (next && c % (2 * L) == 0)
            for (int i = 0; i < ROWS; i++) _mm_prefetch((const char *) (next + i * cols + c), _MM_HINT_T0);
        for (int i = 0; i < ROWS; i++) _mm512_store_ps(wp + c * ROWS + i * L, widen(w + (r + i) * cols + c0 + c));
    }
}

/* y for rows [r, r + ROWS) of the tokens from `summed` on from their accumulators in acc, then every token's scalar
 * tail c >= bound (of x). */
KERNEL static void finish_rows(const uint16_t *w, int64_t cols, int64_t bound, int32_t rows, int64_t r, const float *x,
                               int64_t summed, int32_t tokens, float *y, const float *acc) {
    int64_t grouped = bound > 0 ? tokens - tokens % 4 : 0, t = summed;
    for (; t < grouped; t += 4) sum_lanes16(acc + t * ROWS * L, y + (int64_t) t * rows + r, rows);
    for (; t < tokens; t++)
        for (int i = 0; i < ROWS; i++) y[(int64_t) t * rows + r + i] = bound == 0 ? 0.0f : sum_lanes(_mm512_loadu_ps(acc + (t * ROWS + i) * L));
    for (t = 0; bound < cols && t < tokens; t++)
        for (int i = 0; i < ROWS; i++) {
            const uint16_t *row = w + (r + i) * cols;
            float s = y[(int64_t) t * rows + r + i];
            for (int64_t c = bound; c < cols; c++) s += bf16(row[c]) * x[(int64_t) t * cols + c];
            y[(int64_t) t * rows + r + i] = s;
        }
}

/*
 * The lane sums of the four-token groups that the tile of tokens [t, t + 6) completed (t is even, so the first such
 * group starts at t - t % 4), called right after the tile so that they run while the next tile's FMAs do: the
 * transposes take other ports than the FMAs and out-of-order execution overlaps the two (~3 % over summing at the
 * end).
 */
KERNEL static void sum_tile(const float *acc, float *y, int32_t rows, int64_t r, int64_t t) {
    for (int64_t u = t - t % 4; u + 4 <= t + TILE_TOKENS; u += 4) sum_lanes16(acc + u * ROWS * L, y + u * rows + r, rows);
}

/* scratch: decodiff_matmul_scratch_floats(cols, tokens) floats (any alignment). */
KERNEL void decodiff_matmul_bf16(const uint16_t *w, int64_t cols, int32_t rows, int32_t from, int32_t to,
                                 const float *x, int32_t tokens, float *y, float *scratch) {
    int64_t bound = cols - cols % L, tiled = tokens - tokens % TILE_TOKENS, groups = super_groups(bound);
    gemm_scratch s = carve_groups(scratch, tokens, groups);
    pack_tiles(x, cols, bound, tokens, s.xp);
    int64_t end = to - (to - from) % ROWS;
    for (int64_t r0 = from; r0 < end; r0 += groups * ROWS) {
        int64_t r1 = r0 + groups * ROWS < end ? r0 + groups * ROWS : end;
        for (int64_t c0 = 0; c0 < bound; c0 += COL_BLOCK) {
            int64_t n = bound - c0 < COL_BLOCK ? bound - c0 : COL_BLOCK, last = c0 + n == bound;
            for (int64_t r = r0; r < r1; r += ROWS) {
                float *acc = s.acc + (r - r0) / ROWS * tokens * ROWS * L;
                /* The block pack_rows reads next: the next group's in this column block, else the superblock's first
                 * group's next columns, else the next superblock's first columns. */
                const uint16_t *next = r + ROWS < r1 ? w + (r + ROWS) * cols + c0 : !last ? w + r0 * cols + c0 + n : r1 + ROWS <= end ? w + r1 * cols : NULL;
                pack_rows(w, cols, r, c0, n, s.wp, next);
                int64_t t = 0;
                for (; t < tiled; t += TILE_TOKENS) {
                    tile4x6(s.wp, s.xp + t * bound + c0 * TILE_TOKENS, n, acc + t * ROWS * L, c0 == 0);
                    if (last) sum_tile(acc, y, rows, r, t);
                }
                for (; t < tokens; t++) tile4x1(s.wp, x + t * cols + c0, n, acc + t * ROWS * L, c0 == 0);
            }
        }
        for (int64_t r = r0; r < r1; r += ROWS)
            finish_rows(w, cols, bound, rows, r, x, bound > 0 ? tiled - tiled % 4 : 0, tokens, y, s.acc + (r - r0) / ROWS * tokens * ROWS * L);
    }
    for (int64_t r = end; r < to; r++)
        for (int t = 0; t < tokens; t++) y[(int64_t) t * rows + r] = dot1(w + r * cols, cols, x + (int64_t) t * cols);
}

/*
 * The opt-in bf16 matmul (--matmul bf16): activations already rounded to bf16 (by the caller, round to nearest even),
 * multiplied with the bf16 weights by AVX512-BF16 dot products (vdpbf16ps: each 32-bit lane adds two bf16 products),
 * as llama.cpp multiplies bf16 weights. Not exact: the rounded activations and the instruction's own accumulation
 * (it treats subnormal inputs as zero) differ from the fp32 path by about bf16's precision; decodiff measures that
 * drift against the fp32 reference instead of assuming it. Deterministic: a fixed order for every sum.
 */
#define KERNEL_BF16 __attribute__((target("avx512f,avx512bw,avx512bf16")))
#define PAIRS 32 /* bf16 elements per vector */

int32_t decodiff_cpu_bf16dot(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") ? 1 : 0;
}

/* Elements [c, c + n) of a bf16 row as one vector, n <= 32, the rest zero (a product with zero adds nothing). */
KERNEL_BF16 static inline __m512bh bf16_part(const uint16_t *p, int64_t n) {
    return (__m512bh) _mm512_maskz_loadu_epi16(n >= PAIRS ? 0xffffffffu : (__mmask32) ((1u << n) - 1u), p);
}

#define DOT(i, j) a##i##j = _mm512_dpbf16_ps(a##i##j, v##i, u)
#define DOT_TOKEN(j)                                   \
    do {                                               \
        __m512bh u = bf16_part(x + (j) * cols + c, n - c); \
        DOT(0, j); DOT(1, j); DOT(2, j); DOT(3, j);    \
    } while (0)
#define PACKED_DOT_TOKEN(j)                                                   \
    do {                                                                      \
        __m512bh u = (__m512bh) _mm512_load_si512(xp + (j) * PAIRS);          \
        DOT(0, j); DOT(1, j); DOT(2, j); DOT(3, j);                           \
    } while (0)

/*
 * Columns [0, n) of the 4-row × 6-token tile, as tile4x6: xp six bf16 tokens interleaved per 32 columns and
 * zero-padded to a multiple of 32 (a product with zero adds nothing); the four bf16 rows at w, row i at w + i · wrow,
 * advancing wstep per 32 columns. Packed rows (a copy like xp: wrow 32, wstep 128) load whole vectors; rows in
 * place (wrow cols, wstep 32) load masked at the end of the columns (masking the packed loads too cost ~8 %).
 */
KERNEL_BF16 static inline __attribute__((always_inline)) void dot_tile4x6_body(const uint16_t *w, int64_t wrow, int64_t wstep,
                                                                             const uint16_t *xp, int64_t n, float *acc, int first, const int in_place) {
    LOAD_TOKEN(0); LOAD_TOKEN(1); LOAD_TOKEN(2); LOAD_TOKEN(3); LOAD_TOKEN(4); LOAD_TOKEN(5);
    for (int64_t c = 0; c < n; c += PAIRS, w += wstep, xp += TILE_TOKENS * PAIRS) {
        __m512bh v0, v1, v2, v3;
        if (in_place) {
            v0 = bf16_part(w, n - c), v1 = bf16_part(w + wrow, n - c), v2 = bf16_part(w + 2 * wrow, n - c), v3 = bf16_part(w + 3 * wrow, n - c);
        } else {
            v0 = (__m512bh) _mm512_load_si512(w), v1 = (__m512bh) _mm512_load_si512(w + wrow);
            v2 = (__m512bh) _mm512_load_si512(w + 2 * wrow), v3 = (__m512bh) _mm512_load_si512(w + 3 * wrow);
        }
        PACKED_DOT_TOKEN(0); PACKED_DOT_TOKEN(1); PACKED_DOT_TOKEN(2); PACKED_DOT_TOKEN(3); PACKED_DOT_TOKEN(4); PACKED_DOT_TOKEN(5);
    }
    STORE_TOKEN(0); STORE_TOKEN(1); STORE_TOKEN(2); STORE_TOKEN(3); STORE_TOKEN(4); STORE_TOKEN(5);
}

KERNEL_BF16 static void dot_tile4x6_packed(const uint16_t *wp, const uint16_t *xp, int64_t n, float *acc, int first) {
    dot_tile4x6_body(wp, PAIRS, ROWS * PAIRS, xp, n, acc, first, 0);
}

KERNEL_BF16 static void dot_tile4x6_in_place(const uint16_t *w, int64_t cols, const uint16_t *xp, int64_t n, float *acc, int first) {
    dot_tile4x6_body(w, cols, PAIRS, xp, n, acc, first, 1);
}

/* Every 6-token tile of x ([tokens, cols] bf16) into xp as dot_tile4x6 reads it: tile k's column c at (k · padded + c) · 6. */
KERNEL_BF16 static void pack_tiles_bf16(const uint16_t *x, int64_t cols, int64_t padded, int32_t tokens, uint16_t *xp) {
    for (int k = 0; k < tokens / TILE_TOKENS; k++)
        for (int64_t c = 0; c < cols; c += PAIRS)
            for (int j = 0; j < TILE_TOKENS; j++)
                _mm512_store_si512(xp + (k * padded + c) * TILE_TOKENS + j * PAIRS, (__m512i) bf16_part(x + (int64_t) (k * TILE_TOKENS + j) * cols + c, cols - c));
}

/*
 * Columns [c0, c0 + n) of rows [r, r + ROWS) into wp, interleaved per 32 columns, zero-padded. (Prefetching the next
 * group here, as pack_rows does, measured no better: 0.95-1.08 with 3 to 32 tokens.)
 */
KERNEL_BF16 static void pack_rows_bf16(const uint16_t *w, int64_t cols, int64_t r, int64_t c0, int64_t n, uint16_t *wp) {
    for (int64_t c = 0; c < n; c += PAIRS)
        for (int i = 0; i < ROWS; i++) _mm512_store_si512(wp + c * ROWS + i * PAIRS, (__m512i) bf16_part(w + (r + i) * cols + c0 + c, n - c));
}

/* The same for one token (a chunk's last tokens); with ahead > 0 it prefetches the rows that far ahead, as rows8. */
KERNEL_BF16 static void dot_tile4x1(const uint16_t *w, const uint16_t *x, int64_t cols, int64_t n, float *acc, int first, int64_t ahead) {
    LOAD_TOKEN(0);
    for (int64_t c = 0; c < n; c += PAIRS) {
        if (ahead > 0)
            for (int i = 0; i < ROWS; i++) _mm_prefetch((const char *) (w + i * cols + ahead + c), _MM_HINT_T1);
        __m512bh v0 = bf16_part(w + c, n - c), v1 = bf16_part(w + cols + c, n - c);
        __m512bh v2 = bf16_part(w + 2 * cols + c, n - c), v3 = bf16_part(w + 3 * cols + c, n - c);
        DOT_TOKEN(0);
    }
    STORE_TOKEN(0);
}

/* One row against one token. */
KERNEL_BF16 static float dot_row(const uint16_t *w, const uint16_t *x, int64_t cols) {
    __m512 a = _mm512_setzero_ps();
    for (int64_t c = 0; c < cols; c += PAIRS) a = _mm512_dpbf16_ps(a, bf16_part(w + c, cols - c), bf16_part(x + c, cols - c));
    return sum_lanes(a);
}

/*
 * Y[t·rows + r] = W[r]·X[t] for r in [from, to), t < tokens, X [tokens, cols] bf16. Rows in groups of four, columns
 * in blocks of COL_BLOCK; the 6-token tiles read packed activations (copied once per call, as in the fp32 GEMM) and,
 * with 48 tokens or more, packed rows (copied once per column block): 1.18 → 1.69 times the fp32 FMA peak with
 * 6144 × 1536 weights and 168 tokens, against reading both in place (one thread, CPU time). Accumulators are carried
 * across blocks in the scratch, lanes summed as in the fp32 GEMM. The tokens after the last tile read the rows in
 * place; a single token prefetches the rows ahead, as the fp32 matvec does: decode is a read of the weights.
 * scratch: as decodiff_matmul_bf16.
 */
KERNEL_BF16 void decodiff_matmul_bf16dot(const uint16_t *w, int64_t cols, int32_t rows, int32_t from, int32_t to,
                                         const uint16_t *x, int32_t tokens, float *y, float *scratch) {
    const int64_t group = ROWS * cols, ahead = group * ((PREFETCH_BYTES / 2 + group - 1) / group);
    const int64_t padded = (cols + PAIRS - 1) / PAIRS * PAIRS, tiled = tokens - tokens % TILE_TOKENS;
    /* Copying four rows per column block pays off over 48 tokens or more; with fewer, the copy costs more than the
     * in-place rows' masked, strided loads (704 × 2816 weights: 32 tokens 0.93×, 48 1.02×, 90 1.04×). */
    const int pack = tiled >= 8 * TILE_TOKENS;
    gemm_scratch s = carve(scratch, tokens);
    uint16_t *wp = (uint16_t *) s.wp, *xp = (uint16_t *) s.xp;
    pack_tiles_bf16(x, cols, padded, tokens, xp);
    int64_t r = from;
    for (; r + ROWS <= to; r += ROWS) {
        const uint16_t *wr = w + r * cols;
        for (int64_t c0 = 0; c0 < cols; c0 += COL_BLOCK) {
            int64_t n = cols - c0 < COL_BLOCK ? cols - c0 : COL_BLOCK, t = 0;
            if (pack) pack_rows_bf16(w, cols, r, c0, n, wp);
            for (; t < tiled; t += TILE_TOKENS) {
                if (pack) dot_tile4x6_packed(wp, xp + t * padded + c0 * TILE_TOKENS, n, s.acc + t * ROWS * L, c0 == 0);
                else dot_tile4x6_in_place(wr + c0, cols, xp + t * padded + c0 * TILE_TOKENS, n, s.acc + t * ROWS * L, c0 == 0);
                if (c0 + n == cols) sum_tile(s.acc, y, rows, r, t);
            }
            for (; t < tokens; t++) dot_tile4x1(wr + c0, x + t * cols + c0, cols, n, s.acc + t * ROWS * L, c0 == 0, tokens == 1 ? ahead : 0);
        }
        finish_rows(w, cols, cols, rows, r, NULL, tiled - tiled % 4, tokens, y, s.acc); /* all columns in vectors: no tail */
    }
    for (; r < to; r++)
        for (int t = 0; t < tokens; t++) y[(int64_t) t * rows + r] = dot_row(w + r * cols, x + t * cols, cols);
}

/*
 * The AMX GEMMs: bf16 tile products (TDPBF16PS) accumulated in fp32 tiles.
 *
 * Why tiles: one TDPBF16PS multiplies a 16 × 32 bf16 tile by a 32 × 16 one into 16 × 16 fp32 accumulators, 16384
 * flops in about 16 cycles — on the machine we measured, 27 times the fp32 FMA peak of one core (3.1 TFLOPS against
 * 116 GFLOPS, one thread, CPU time). Every product of two bf16 values is exact in fp32, and the instruction adds each
 * product to its fp32 accumulator with one rounding (as a fused multiply-add does; it treats subnormal inputs as zero
 * and flushes subnormal results), so the precision lost is only what the activations lose in becoming bf16.
 *
 * Exact mode: the weights are bf16 already, so only the activations are split, x = h + l + l2 with h the top 8
 * significant bits of x (the fp32 pattern truncated to its high 16 bits), l the top 8 of x − h, l2 = x − h − l (at
 * most 8 significant bits left, so it is a bf16 value too). The split is exact: W·x = W·h + W·l + W·l2, each product
 * exact, three tile products instead of one, every sum in fp32. What differs from the FMA GEMM is the order of the
 * sums (one fp32 accumulator per output over the columns in order, h, l, l2 per 32 columns, instead of 16 lane
 * accumulators summed at the end), and what the instruction drops: terms below 2^-126 (subnormal bf16) and subnormal
 * partial sums. The bound is in WeightMatrixTest. bf16 mode (--matmul bf16): the activations rounded to bf16 by the
 * caller, one tile product.
 *
 * Layout: A tiles are 16 tokens × 32 columns of one term ([token tile][column block][term][16][32], packed once per
 * token chunk by decodiff_amx_pack_x or _xr), B tiles 16 weight rows in the tile's pair layout (B[p][n] holds columns 2p and
 * 2p + 1 of row n: a 16 × 16 transpose of the rows' 32-bit pairs, packed per 32-row group into the scratch). The C
 * tiles are [token][row], stored straight into Y[t · rows + r]. Rows and tokens are padded to 16 and columns to 32
 * with zeros (a product with zero adds nothing); only the real outputs are stored.
 */
#define KERNEL_AMX __attribute__((target("avx512f,avx512bw,amx-tile,amx-bf16")))
#define TILE 16             /* rows of a tile: tokens of A and C, pairs of B */
#define TILE_COLS 32        /* bf16 columns of an A tile */
#define TILE_SHORTS (TILE * TILE_COLS)
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

typedef struct __attribute__((packed)) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_config;

/* 1 when the CPU has AMX-TILE and AMX-BF16 and the kernel lets this process use the tile state (asked once). */
int32_t decodiff_amx_init(void) {
    static int state = -1;
    if (state >= 0) return state;
    unsigned a, b, c, d;
    state = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) && (d & (1u << 22)))
        state = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
    return state;
}

KERNEL_AMX static void amx_configure(void) {
    tile_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) cfg.rows[i] = TILE, cfg.colsb[i] = 64;
    _tile_loadconfig(&cfg);
}

/* Shorts of packed activations for `tokens` tokens of `cols` columns with `terms` bf16 terms each. */
int64_t decodiff_amx_packed_shorts(int64_t cols, int32_t tokens, int32_t terms) {
    return (int64_t) ((tokens + TILE - 1) / TILE) * ((cols + TILE_COLS - 1) / TILE_COLS) * terms * TILE_SHORTS;
}

/*
 * Columns per K slice of the AMX GEMM: a slice's packed activations (every token of the chunk) stay in L2 while each
 * 32-row group of weights passes over them. A row wider than this (the FFN's down projection) is taken a slice at a
 * time, its accumulator tiles parked in the scratch between slices: with the whole 6144-column row at once, one
 * thread's exact GEMM ran at 0.14-0.16 of the AMX peak's tile products, 1.6-1.8 × the FMA GEMM, against 0.26-0.27 for
 * 1536 columns (one thread, CPU time).
 */
#define AMX_SLICE_BLOCKS 48
int32_t decodiff_amx_slice_columns(void) { return AMX_SLICE_BLOCKS * TILE_COLS; }

/* Shorts of scratch decodiff_matmul_amx needs for a call over `rows` rows and `tokens` tokens of `cols` columns. */
int64_t decodiff_amx_scratch_shorts(int64_t cols, int32_t rows, int32_t tokens) {
    int64_t blocks = (cols + TILE_COLS - 1) / TILE_COLS, slice = blocks < AMX_SLICE_BLOCKS ? blocks : AMX_SLICE_BLOCKS;
    int64_t parked = blocks > AMX_SLICE_BLOCKS ? (int64_t) ((rows + 2 * TILE - 1) / (2 * TILE)) * ((tokens + 2 * TILE - 1) / (2 * TILE)) * 4 * TILE * TILE : 0;
    return 32 + 2 * slice * TILE_SHORTS + 2 * (TILE * TILE + parked);
}

KERNEL_AMX static inline __m512i amx_load32(const float *p, int64_t n) {
    return _mm512_castps_si512(_mm512_maskz_loadu_ps(n >= L ? 0xffff : (__mmask16) ((1u << (n > 0 ? n : 0)) - 1u), p));
}

/* The high halves of 32 fp32 patterns (a: columns 0-15, b: 16-31) as one row of 32 bf16. */
KERNEL_AMX static inline __m512i amx_high_halves(__m512i a, __m512i b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(_mm512_srli_epi32(a, 16))),
                              _mm512_cvtepi32_epi16(_mm512_srli_epi32(b, 16)), 1);
}

/* x split into its three bf16 terms, each an fp32 pattern with the low 16 bits zero; non-finite x: h alone. */
KERNEL_AMX static inline void amx_split(__m512i u, __m512i *h, __m512i *l, __m512i *l2) {
    const __m512i high = _mm512_set1_epi32((int) 0xffff0000u), expo = _mm512_set1_epi32(0x7f800000);
    __mmask16 finite = _mm512_cmpneq_epi32_mask(_mm512_and_si512(u, expo), expo);
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), expo);
    __m512i hi = _mm512_and_si512(u, high);
    /* A NaN whose payload lies in the low half stays a NaN (its quiet bit set), not an infinity. */
    hi = _mm512_mask_or_epi32(hi, nan, hi, _mm512_set1_epi32(0x00400000));
    __m512 r1 = _mm512_maskz_sub_ps(finite, _mm512_castsi512_ps(u), _mm512_castsi512_ps(hi));
    __m512i lo = _mm512_and_si512(_mm512_castps_si512(r1), high);
    __m512 r2 = _mm512_sub_ps(r1, _mm512_castsi512_ps(lo));
    *h = hi, *l = lo, *l2 = _mm512_and_si512(_mm512_castps_si512(r2), high);
}

/*
 * Token tiles [tile_from, tile_to) of x ([tokens, cols] fp32) split into three bf16 terms, packed as the A tiles
 * read them: tile k, column block b, term s at ((k · blocks + b) · 3 + s) · 512 shorts.
 */
KERNEL_AMX void decodiff_amx_pack_x(const float *x, int64_t cols, int32_t tokens, int32_t tile_from, int32_t tile_to, uint16_t *xa) {
    const int64_t blocks = (cols + TILE_COLS - 1) / TILE_COLS;
    for (int64_t k = tile_from; k < tile_to; k++)
        for (int64_t b = 0; b < blocks; b++) {
            uint16_t *out = xa + (k * blocks + b) * 3 * TILE_SHORTS;
            int64_t c = b * TILE_COLS;
            for (int j = 0; j < TILE; j++) {
                int64_t t = k * TILE + j;
                __m512i u0 = _mm512_setzero_si512(), u1 = u0;
                if (t < tokens) u0 = amx_load32(x + t * cols + c, cols - c), u1 = amx_load32(x + t * cols + c + L, cols - c - L);
                __m512i h0, l0, m0, h1, l1, m1;
                amx_split(u0, &h0, &l0, &m0);
                amx_split(u1, &h1, &l1, &m1);
                _mm512_store_si512(out + j * TILE_COLS, amx_high_halves(h0, h1));
                _mm512_store_si512(out + TILE_SHORTS + j * TILE_COLS, amx_high_halves(l0, l1));
                _mm512_store_si512(out + 2 * TILE_SHORTS + j * TILE_COLS, amx_high_halves(m0, m1));
            }
        }
}

/* fp32 patterns rounded to bf16 to nearest even, as torch's cast (a NaN stays a quiet NaN), in the low halves. */
KERNEL_AMX static inline __m512i amx_round(__m512i u) {
    __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7fff))), 16);
    return _mm512_mask_or_epi32(r, nan, _mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
}

/*
 * The same for --matmul bf16: fp32 x rounded to bf16 here (one term), so the rounding runs vectorized and shared out
 * over the cores with the packing instead of in a separate pass.
 */
KERNEL_AMX void decodiff_amx_pack_xr(const float *x, int64_t cols, int32_t tokens, int32_t tile_from, int32_t tile_to, uint16_t *xa) {
    const int64_t blocks = (cols + TILE_COLS - 1) / TILE_COLS;
    for (int64_t k = tile_from; k < tile_to; k++)
        for (int64_t b = 0; b < blocks; b++) {
            uint16_t *out = xa + (k * blocks + b) * TILE_SHORTS;
            int64_t c = b * TILE_COLS;
            for (int j = 0; j < TILE; j++) {
                int64_t t = k * TILE + j;
                __m512i u0 = _mm512_setzero_si512(), u1 = u0;
                if (t < tokens) u0 = amx_round(amx_load32(x + t * cols + c, cols - c)), u1 = amx_round(amx_load32(x + t * cols + c + L, cols - c - L));
                /* the padding columns load as +0, which rounds to +0 */
                _mm512_store_si512(out + j * TILE_COLS, _mm512_inserti64x4(_mm512_castsi256_si512(_mm512_cvtepi32_epi16(u0)), _mm512_cvtepi32_epi16(u1), 1));
            }
        }
}

/*
 * Rows [r, r + 16) of w (those below `to`; the rest zero), column blocks [b0, b0 + nb), in B-tile layout: block
 * b0 + b at wb + b · (2 · 512), the second tile of a 32-row group at + 512. Prefetches next_rows rows from `next`
 * (the block the next call packs, offset as these rows are; or NULL) into L2 meanwhile, so their reads come from cache.
 */
KERNEL_AMX static void amx_pack_rows(const uint16_t *w, int64_t cols, int64_t r, int64_t to, int64_t b0, int64_t nb, uint16_t *wb,
                                     const uint16_t *next, int64_t next_rows) {
    for (int64_t b = 0; b < nb; b++) {
        int64_t c = (b0 + b) * TILE_COLS, n = cols - c;
        __mmask32 m = n >= TILE_COLS ? 0xffffffffu : (__mmask32) ((1u << n) - 1u);
        __m512 v[L];
        UNROLLED for (int i = 0; i < TILE; i++)
            v[i] = r + i < to ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi16(m, w + (r + i) * cols + c)) : _mm512_setzero_ps();
        if (next)
            for (int i = 0; i < next_rows; i++) _mm_prefetch((const char *) (next + i * cols + c), _MM_HINT_T1);
        transpose16(v);
        uint16_t *out = wb + b * 2 * TILE_SHORTS;
        UNROLLED for (int p = 0; p < TILE; p++) _mm512_store_ps(out + p * TILE_COLS, v[p]);
    }
}

/* A C tile into y (rows stride apart) when whole, else its real part (tokens × rows) through tmp. */
#define AMX_STORE(tile, yp, tokens_, rows_)                                                                      \
    do {                                                                                                         \
        if ((tokens_) >= TILE && (rows_) >= TILE) _tile_stored(tile, yp, stride * 4);                            \
        else {                                                                                                   \
            _tile_stored(tile, tmp, TILE * 4);                                                                   \
            for (int j_ = 0; j_ < (tokens_); j_++) memcpy((yp) + j_ * stride, tmp + j_ * TILE, (rows_) * 4);     \
        }                                                                                                        \
    } while (0)

/*
 * One 32-token × 32-row block (two token tiles × two row tiles; C tiles 0-3, A 4-5, B 6-7) over nb column blocks:
 * per block two weight tiles, then per term two activation tiles and four products. nt / nr (1 or 2): the tiles the
 * block has; tokens / rows: how many of them are real. The accumulators start at zero in the first slice and from
 * `parked` otherwise; they go to y after the last slice, else back to `parked`.
 */
KERNEL_AMX static inline __attribute__((always_inline)) void amx_block(const uint16_t *xa, int64_t tile_step, const uint16_t *wb, int64_t nb, int terms,
                                                                      int nt, int nr, float *y, int64_t stride, int tokens, int rows, float *tmp,
                                                                      float *parked, int first, int last) {
    if (first) {
        _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    } else {
        _tile_loadd(0, parked, 64); _tile_loadd(1, parked + TILE * TILE, 64);
        _tile_loadd(2, parked + 2 * TILE * TILE, 64); _tile_loadd(3, parked + 3 * TILE * TILE, 64);
    }
    for (int64_t b = 0; b < nb; b++) {
        const uint16_t *wt = wb + b * 2 * TILE_SHORTS, *xt = xa + b * terms * TILE_SHORTS;
        _tile_loadd(6, wt, 64);
        if (nr == 2) _tile_loadd(7, wt + TILE_SHORTS, 64);
        for (int s = 0; s < terms; s++) {
            _tile_loadd(4, xt + s * TILE_SHORTS, 64);
            if (nt == 2) _tile_loadd(5, xt + tile_step + s * TILE_SHORTS, 64);
            _tile_dpbf16ps(0, 4, 6);
            if (nr == 2) _tile_dpbf16ps(1, 4, 7);
            if (nt == 2) _tile_dpbf16ps(2, 5, 6);
            if (nt == 2 && nr == 2) _tile_dpbf16ps(3, 5, 7);
        }
    }
    if (!last) {
        _tile_stored(0, parked, 64); _tile_stored(1, parked + TILE * TILE, 64);
        _tile_stored(2, parked + 2 * TILE * TILE, 64); _tile_stored(3, parked + 3 * TILE * TILE, 64);
        return;
    }
    int t0 = tokens < TILE ? tokens : TILE, t1 = tokens - t0, r0 = rows < TILE ? rows : TILE, r1 = rows - r0;
    AMX_STORE(0, y, t0, r0);
    if (nr == 2) AMX_STORE(1, y + TILE, t0, r1);
    if (nt == 2) AMX_STORE(2, y + TILE * stride, t1, r0);
    if (nt == 2 && nr == 2) AMX_STORE(3, y + TILE * stride + TILE, t1, r1);
}

/*
 * Y[t·rows + r] = W[r]·X[t] for r in [from, to), t < tokens: xa the activations packed by decodiff_amx_pack_x
 * (terms 3) or decodiff_amx_pack_xr (terms 1) for these tokens; scratch decodiff_amx_scratch_shorts(cols, to - from,
 * tokens) shorts. The columns in slices of AMX_SLICE_BLOCKS blocks; per slice the rows in groups of 32, each group's
 * slice packed once and multiplied with every token, the tokens in blocks of 32. decodiff_amx_init() must have
 * returned 1.
 */
KERNEL_AMX void decodiff_matmul_amx(const uint16_t *w, int64_t cols, int32_t rows, int32_t from, int32_t to,
                                    const uint16_t *xa, int32_t terms, int32_t tokens, float *y, uint16_t *scratch) {
    const int64_t blocks = (cols + TILE_COLS - 1) / TILE_COLS, tile_step = blocks * terms * TILE_SHORTS;
    const int64_t slice = blocks < AMX_SLICE_BLOCKS ? blocks : AMX_SLICE_BLOCKS, token_blocks = (tokens + 2 * TILE - 1) / (2 * TILE);
    uint16_t *wb = (uint16_t *) (((uintptr_t) scratch + 63) & ~(uintptr_t) 63);
    float *tmp = (float *) (wb + 2 * slice * TILE_SHORTS), *parked = tmp + TILE * TILE;
    amx_configure();
    for (int64_t b0 = 0; b0 < blocks; b0 += slice) {
        int64_t nb = blocks - b0 < slice ? blocks - b0 : slice;
        int first = b0 == 0, last = b0 + nb == blocks;
        for (int64_t r = from; r < to; r += 2 * TILE) {
            int64_t n = to - r < 2 * TILE ? to - r : 2 * TILE;
            /* The block the next pack reads: the next group's rows in this slice, or the first group's in the next. */
            int64_t nr0 = r + 2 * TILE < to ? r + 2 * TILE : !last ? from : -1;
            const uint16_t *next = nr0 < 0 ? NULL : w + nr0 * cols + (nr0 > r ? 0 : slice * TILE_COLS);
            int64_t next_rows = nr0 < 0 ? 0 : to - nr0 < 2 * TILE ? to - nr0 : 2 * TILE;
            amx_pack_rows(w, cols, r, to, b0, nb, wb, next, next_rows < TILE ? next_rows : TILE);
            if (n > TILE) amx_pack_rows(w, cols, r + TILE, to, b0, nb, wb + TILE_SHORTS, next ? next + TILE * cols : NULL, next_rows - TILE);
            int nr = n > TILE ? 2 : 1;
            float *pg = parked + (r - from) / (2 * TILE) * token_blocks * 4 * TILE * TILE;
            for (int64_t t = 0, k = 0; t < tokens; t += 2 * TILE, k++) {
                const uint16_t *xt = xa + (t / TILE) * tile_step + b0 * terms * TILE_SHORTS;
                int real = tokens - t < 2 * TILE ? (int) (tokens - t) : 2 * TILE;
                float *pk = pg + k * 4 * TILE * TILE, *yt = y + t * rows + r;
                if (real > TILE && nr == 2) amx_block(xt, tile_step, wb, nb, terms, 2, 2, yt, rows, real, (int) n, tmp, pk, first, last);
                else if (real > TILE) amx_block(xt, tile_step, wb, nb, terms, 2, 1, yt, rows, real, (int) n, tmp, pk, first, last);
                else if (nr == 2) amx_block(xt, tile_step, wb, nb, terms, 1, 2, yt, rows, real, (int) n, tmp, pk, first, last);
                else amx_block(xt, tile_step, wb, nb, terms, 1, 1, yt, rows, real, (int) n, tmp, pk, first, last);
            }
        }
    }
    _tile_release();
}

/*
 * The AMX bf16 peak yardstick: `iterations` rounds of four independent tile products (C tiles 0-3 from A tiles 4-5
 * and B tiles 6-7, loaded once from zeros), no memory traffic: 4 · 16 · 16 · 32 · 2 flops per iteration.
 * decodiff_amx_init() must have returned 1.
 */
KERNEL_AMX float decodiff_amx_loop(int64_t iterations) {
    static const uint16_t zeros[TILE_SHORTS] __attribute__((aligned(64)));
    float out[TILE * TILE];
    amx_configure();
    _tile_loadd(4, zeros, 64); _tile_loadd(5, zeros, 64); _tile_loadd(6, zeros, 64); _tile_loadd(7, zeros, 64);
    _tile_zero(0); _tile_zero(1); _tile_zero(2); _tile_zero(3);
    for (int64_t i = 0; i < iterations; i++) {
        _tile_dpbf16ps(0, 4, 6); _tile_dpbf16ps(1, 4, 7); _tile_dpbf16ps(2, 5, 6); _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, out, 64);
    _tile_release();
    return out[0];
}

/*
 * MLX affine-quantized weights kept packed (4- or 8-bit codes, per group of `group` columns one (scale, bias) pair):
 * decode and prefill dequantize in registers instead of streaming an fp32 copy (four or eight times the codes' bytes).
 * Groups are 32, 64 or 128 columns: a 16-column vector never straddles two, and a row never has a scalar tail.
 *
 * Codes, blocked (decodiff_affine_block writes them from MLX's row-major words): rows in blocks of 16, block b at
 * b · 16 · cols · bits / 8, as 64-byte chunks; in a chunk, bytes 4i .. 4i + 3 belong to row 16b + i. 4-bit: chunk k
 * holds columns 8k .. 8k + 7, byte 4i + j the code of column 8k + j in its low nibble and of 8k + 4 + j in its high
 * one; 8-bit: chunk k holds columns 4k .. 4k + 3, byte 4i + j column 4k + j. The rows after the last whole block
 * (rows % 16 of them) follow row-major, as MLX stores them. So one 64-byte load gives sixteen rows four (or eight)
 * columns each, the shape of a VNNI dot product. Pairs, two values (scale, bias) in `fmt` (AFFINE_F32: 8 bytes a pair,
 * AFFINE_BF16 or AFFINE_F16: 4 bytes), blocked alike (decodiff_affine_block_pairs): in a block of 16 rows, group g's
 * 16 pairs follow each other (row 16b + i, group g at index 16b · groups + 16g + i: one 64-byte load for the block);
 * the rows after the last whole block keep MLX's index r · groups + g.
 *
 * Prefill (the GEMM) keeps the fp32 contract above: each weight is fl(fl(scale · q) + bias), the very value
 * AffineDequantizer writes (with bf16 or f16 scales the product is exact and the sum rounds once, so a fused
 * multiply-add gives it too), then 16 lane accumulators per output in column order, lanes summed in order: the bits of
 * the dequantized fp32 weights.
 *
 * Decode (the matvec) computes each group's dot product exactly, in integers. Per group of the activations, with
 * 2^(e-1) <= max |x| < 2^e, each x is held as the integer m = rint(x · 2^(30-e)) (exact for every x within 2^7 of the
 * group's largest, and off by at most 2^(e-31) otherwise: below the rounding of any fp32 sum of that group), split into
 * four signed bytes m = m0 + 2^8 m1 + 2^16 m2 + 2^24 m3; VPDPBUSD sums codes times bytes exactly, P_k = sum q · m_k,
 * and per row and group
 *     A = P0 + 2^8 P1,  B = P2 + 2^8 P3                  (exact int32)
 *     f = fl(fl(B) · 2^16 + fl(A))                        (one fused multiply-add)
 *     acc = fl(fl(scale · 2^(e-30)) · f + acc),  acc = fl(bias · X + acc),   X = fl(sum m · 2^(e-30)) (the group's sum)
 * with acc from 0 over the groups in order: sum (scale · q + bias) · x with the weights never rounded and three
 * roundings per group instead of one per column. Why: the fp32 matvec costs a shift, a table lookup and a fused
 * multiply-add per 16 weights and was bound by them (2.4 cycles per 16 weights on Zen 4, 0.6 of the memory's rate);
 * one VPDPBUSD multiplies 64 codes by a byte plane, and four planes cost 4 instructions per 64 weights. Against an fp64
 * dot product it is closer than the fp32 chain (rel L2 1.3e-7 against 2.2e-7 on random rows). Every implementation
 * of these formulas gives the same bits (the sums are exact), so a row's result depends neither on its block nor on
 * the rows a thread was given. Activations that are not finite, or a group whose largest is below 2^-97, take the fp32
 * path (the prefill's) for the whole call.
 */
#define KERNEL_Q __attribute__((target("avx512f,avx512bw,avx512vbmi,avx512vnni,avx512dq,f16c,fma")))

int32_t decodiff_cpu_affine(void) {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi")
           && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("f16c")
           && __builtin_cpu_supports("fma") ? 1 : 0;
}

/* 4-bit: the 8 codes of one 32-bit row word (code t in nibble t) as the blocked chunk's nibbles (t and 4 + t in byte t). */
static inline uint32_t block_nibbles(uint32_t w) {
    uint32_t lo = w & 0xffff, hi = w >> 16;
    lo = (lo | lo << 8) & 0x00ff00ffu, lo = (lo | lo << 4) & 0x0f0f0f0fu;
    hi = (hi | hi << 8) & 0x00ff00ffu, hi = (hi | hi << 4) & 0x0f0f0f0fu;
    return lo | hi << 4;
}

/* Writes MLX's row-major codes (`in`) blocked into `out` (as many bytes), the layout above. */
void decodiff_affine_block(const uint8_t *in, uint8_t *out, int64_t rows, int64_t cols, int32_t bits) {
    const int64_t rb = cols * bits / 8, full = rows / BLOCK * BLOCK, chunks = rb / 4;
    for (int64_t b = 0; b < full; b += BLOCK) {
        const uint8_t *src = in + b * rb;
        uint8_t *dst = out + b * rb;
        for (int64_t k = 0; k < chunks; k++)
            for (int i = 0; i < BLOCK; i++) {
                uint32_t w;
                memcpy(&w, src + i * rb + 4 * k, 4);
                if (bits == 4) w = block_nibbles(w);
                memcpy(dst + k * 64 + 4 * i, &w, 4);
            }
    }
    memcpy(out + full * rb, in + full * rb, (size_t) ((rows - full) * rb));
}

/* Regroups MLX-ordered pairs (index r · groups + g, `bytes` each) in place into the blocked order. 0 where out of memory. */
int32_t decodiff_affine_block_pairs(uint8_t *pairs, int64_t rows, int64_t groups, int32_t bytes) {
    const int64_t full = rows / BLOCK * BLOCK, span = BLOCK * groups * bytes;
    uint8_t *tmp = malloc(span > 0 ? span : 1);
    if (!tmp) return 0;
    for (int64_t b = 0; b < full; b += BLOCK) {
        uint8_t *blk = pairs + b * groups * bytes;
        memcpy(tmp, blk, span);
        for (int i = 0; i < BLOCK; i++)
            for (int64_t g = 0; g < groups; g++) memcpy(blk + (g * BLOCK + i) * bytes, tmp + (i * groups + g) * bytes, bytes);
    }
    free(tmp);
    return 1;
}

/* Codes of columns [c, c + 16) (c a multiple of 16) of row r, as fp32 integers, from the blocked layout. */
KERNEL_Q static inline __m512 affine_codes(const uint8_t *codes, const int bits, int64_t rows, int64_t cols, int64_t r, int64_t c) {
    const int64_t rb = cols * bits / 8, full = rows / BLOCK * BLOCK;
    if (r >= full) {
        const uint8_t *row = codes + r * rb;
        if (bits == 8) return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *) (row + c))));
        int64_t v;
        memcpy(&v, row + c / 2, 8);
        const __m512i at = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60);
        return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_multishift_epi64_epi8(at, _mm512_set1_epi64(v)), _mm512_set1_epi32(15)));
    }
    const uint8_t *base = codes + (r - r % BLOCK) * rb + 4 * (r % BLOCK);
    if (bits == 8) {
        int32_t d[4];
        for (int m = 0; m < 4; m++) memcpy(&d[m], base + (c / 4 + m) * 64, 4);
        return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_setr_epi32(d[0], d[1], d[2], d[3])));
    }
    uint32_t d0, d1;
    memcpy(&d0, base + (c / 8) * 64, 4);
    memcpy(&d1, base + (c / 8 + 1) * 64, 4);
    /* column j < 8 of chunk c/8: byte j % 4, high nibble when j >= 4; columns 8.. from the second chunk's word */
    const __m512i at = _mm512_setr_epi32(0, 8, 16, 24, 4, 12, 20, 28, 32, 40, 48, 56, 36, 44, 52, 60);
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_multishift_epi64_epi8(at, _mm512_set1_epi64((int64_t) d0 | (int64_t) d1 << 32)),
                                               _mm512_set1_epi32(15)));
}

/* Row r · x with the fp32 contract (the prefill's): weight fl(fl(scale · q) + bias), 16 lanes in column order. */
KERNEL_Q static float affine_row_fp32(const uint8_t *codes, const void *pairs, int fmt, int bits, int64_t rows, int64_t cols, int64_t group,
                                      int64_t r, const float *x) {
    const int64_t groups = cols / group;
    __m512 a = _mm512_setzero_ps();
    float s = 0, o = 0;
    for (int64_t c = 0; c < cols; c += L) {
        if (c % group == 0) affine_pair(pairs, fmt, pair_index(rows, groups, r, c / group), &s, &o);
        __m512 w = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(s), affine_codes(codes, bits, rows, cols, r, c)), _mm512_set1_ps(o));
        a = _mm512_fmadd_ps(w, _mm512_loadu_ps(x + c), a);
    }
    return sum_lanes(a);
}

/*
 * The activations as the integer kernel reads them: byte plane k of column c at planes[k · cols + c] (m_k above), per
 * group its scale 2^(e-30) and its sum X. Returns 0 where the fp32 path must be taken instead.
 */
KERNEL_Q static int affine_stage(const float *x, int64_t cols, int64_t group, int8_t *planes, float *pw, float *xsum) {
    for (int64_t g = 0; g < cols / group; g++) {
        const float *xg = x + g * group;
        __m512 mx = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (int64_t i = 0; i < group; i += L) {
            __m512 v = _mm512_abs_ps(_mm512_loadu_ps(xg + i));
            bad |= _mm512_cmp_ps_mask(v, _mm512_set1_ps(3.4028235e38f), _CMP_NLE_UQ); /* inf or NaN */
            mx = _mm512_max_ps(mx, v);
        }
        if (bad) return 0;
        int e;
        if (!group_exponent(_mm512_reduce_max_ps(mx), &e)) return 0;
        const __m512 up = _mm512_set1_ps(pow2f(30 - e));
        __m512i S = _mm512_setzero_si512();
        for (int64_t i = 0; i < group; i += L) {
            __m512i m = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xg + i), up)); /* |m| <= 2^30: round to nearest even */
            S = _mm512_add_epi64(S, _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm512_castsi512_si256(m)),
                                                     _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(m, 1))));
            for (int k = 0; k < 4; k++) {
                __m512i b = _mm512_srai_epi32(_mm512_slli_epi32(m, 24), 24);
                _mm_storeu_si128((__m128i *) (planes + k * cols + g * group + i), _mm512_cvtepi32_epi8(b));
                m = _mm512_srai_epi32(_mm512_sub_epi32(m, b), 8);
            }
        }
        pw[g] = pow2f(e - 30);
        xsum[g] = (float) _mm512_reduce_add_epi64(S) * pw[g];
    }
    return 1;
}

/* Scale and bias of rows [r, r + 16) (a whole block), group g, as vectors: the block's 16 pairs of the group are contiguous. */
KERNEL_Q static inline __attribute__((always_inline)) void affine_pairs16(const void *pairs, const int fmt, int64_t groups, int64_t r, int64_t g,
                                                                         __m512 *s, __m512 *b) {
    const int64_t at = r * groups + g * BLOCK;
    if (fmt == AFFINE_F32) {
        const float *p = (const float *) pairs + 2 * at;
        __m512 lo = _mm512_loadu_ps(p), hi = _mm512_loadu_ps(p + 16);
        *s = _mm512_permutex2var_ps(lo, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), hi);
        *b = _mm512_permutex2var_ps(lo, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), hi);
        return;
    }
    __m512i v = _mm512_loadu_si512((const int32_t *) pairs + at);
    if (fmt == AFFINE_BF16) {
        *s = _mm512_castsi512_ps(_mm512_slli_epi32(v, 16));
        *b = _mm512_castsi512_ps(_mm512_and_si512(v, _mm512_set1_epi32((int) 0xffff0000u)));
    } else {
        *s = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(v));
        *b = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(v, 16)));
    }
}

/* One group's epilogue (see above) into the fp32 accumulator; p[k]: the exact sums of plane k. */
KERNEL_Q static inline __attribute__((always_inline)) __m512 affine_group_end(const __m512i p[4], __m512 s, __m512 b, float pw, float xsum,
                                                                             __m512 acc) {
    __m512i A = _mm512_add_epi32(_mm512_slli_epi32(p[1], 8), p[0]), B = _mm512_add_epi32(_mm512_slli_epi32(p[3], 8), p[2]);
    __m512 f = _mm512_fmadd_ps(_mm512_cvtepi32_ps(B), _mm512_set1_ps(65536.0f), _mm512_cvtepi32_ps(A));
    acc = _mm512_fmadd_ps(_mm512_mul_ps(s, _mm512_set1_ps(pw)), f, acc);
    return _mm512_fmadd_ps(b, _mm512_set1_ps(xsum), acc);
}

/*
 * a += u · (the 32-bit word p in every lane), bytes times bytes summed in fours: VPDPBUSD with the word as an embedded
 * broadcast from memory. Written out because gcc 12 broadcasts into a register first (a separate instruction per
 * product); the embedded form made the kernel 15-25 % faster from cache (one and two threads, [2048, 1536] 4-bit).
 */
#define DPB(a, u, p) __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(a) : "v"(u), "m"(p))
/* How far ahead the blocked matvec prefetches into L2 (the same stream as rows8's, one sequential one here). */
#define AFFINE_AHEAD 16384
/*
 * Block b (rows [b, b + 16)) of the integer matvec: per 64-byte chunk four VPDPBUSD per 16-row code vector (one per
 * byte plane, the plane's four columns broadcast); two accumulators per plane for 4-bit (the low and the high nibbles'
 * columns) so that the chains stay short. G (the group) and B (bits) are constants after inlining.
 */
KERNEL_Q static inline __attribute__((always_inline)) void affine_block_int(const uint8_t *codes, const void *pairs, const int fmt, const int bits,
                                                                           int64_t cols, const int64_t G, int64_t b, const int8_t *planes,
                                                                           const float *pw, const float *xsum, float *out) {
    const int64_t rb = cols * bits / 8, groups = cols / G, per = bits == 4 ? 8 : 4; /* columns a chunk holds */
    const uint8_t *c = codes + b * rb;
    const int32_t *x0 = (const int32_t *) planes, *x1 = (const int32_t *) (planes + cols), *x2 = (const int32_t *) (planes + 2 * cols),
                  *x3 = (const int32_t *) (planes + 3 * cols);
    const __m512i m15 = _mm512_set1_epi8(15);
    __m512 acc = _mm512_setzero_ps();
    /* the pairs of the block the codes' prefetch has reached, a line per group (their rows' pairs are one span) */
    const int64_t pb = fmt == AFFINE_F32 ? 8 : 4, span = BLOCK * groups * pb, ahead = b + BLOCK * ((AFFINE_AHEAD + BLOCK * rb - 1) / (BLOCK * rb));
    const char *pairs_ahead = (const char *) pairs + ahead * groups * pb;
    for (int64_t g = 0; g < groups; g++) {
        __m512i lo[4], hi[4];
        for (int64_t o = g * span / groups; o < (g + 1) * span / groups; o += 64) _mm_prefetch(pairs_ahead + o, _MM_HINT_T1);
        UNROLLED for (int k = 0; k < 4; k++) lo[k] = hi[k] = _mm512_setzero_si512();
        UNROLLED for (int64_t k = 0; k < G / per; k++, c += 64) {
            _mm_prefetch((const char *) (c + AFFINE_AHEAD), _MM_HINT_T1);
            __m512i v = _mm512_loadu_si512(c);
            int64_t q = (g * G + k * per) / 4; /* the chunk's first column, in 4-column words */
            if (bits == 4) {
                __m512i l = _mm512_and_si512(v, m15), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), m15);
                DPB(lo[0], l, x0[q]); DPB(lo[1], l, x1[q]); DPB(lo[2], l, x2[q]); DPB(lo[3], l, x3[q]);
                DPB(hi[0], h, x0[q + 1]); DPB(hi[1], h, x1[q + 1]); DPB(hi[2], h, x2[q + 1]); DPB(hi[3], h, x3[q + 1]);
            } else if (k % 2 == 0) {
                DPB(lo[0], v, x0[q]); DPB(lo[1], v, x1[q]); DPB(lo[2], v, x2[q]); DPB(lo[3], v, x3[q]);
            } else {
                DPB(hi[0], v, x0[q]); DPB(hi[1], v, x1[q]); DPB(hi[2], v, x2[q]); DPB(hi[3], v, x3[q]);
            }
        }
        UNROLLED for (int k = 0; k < 4; k++) lo[k] = _mm512_add_epi32(lo[k], hi[k]);
        __m512 s, o;
        affine_pairs16(pairs, fmt, groups, b, g, &s, &o);
        acc = affine_group_end(lo, s, o, pw[g], xsum[g], acc);
    }
    _mm512_storeu_ps(out, acc);
}

/* y[r] = W[r]·x for r in [from, to) of a matrix of `rows` rows, blocked codes; bits 4 or 8, group 32, 64 or 128 (dividing cols). */
AFFINE_MATVEC(decodiff_matvec_affine, KERNEL_Q)

/* Columns [c0, c0 + n) of rows [r, r + ROWS) dequantized into wp, interleaved per 16 columns (as pack_rows). */
KERNEL_Q static void affine_pack_rows(const uint8_t *codes, const void *pairs, int fmt, int bits, int64_t rows, int64_t cols, int64_t group,
                                      int64_t r, int64_t c0, int64_t n, float *wp) {
    const int64_t groups = cols / group;
    for (int i = 0; i < ROWS; i++) {
        float s = 0, o = 0;
        for (int64_t c = 0; c < n; c += L) {
            int64_t col = c0 + c;
            if (c == 0 || col % group == 0) affine_pair(pairs, fmt, pair_index(rows, groups, r + i, col / group), &s, &o);
            __m512 q = affine_codes(codes, bits, rows, cols, r + i, col);
            _mm512_store_ps(wp + c * ROWS + i * L, _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(s), q), _mm512_set1_ps(o)));
        }
    }
}

/*
 * Y[t·rows + r] = W[r]·X[t] for r in [from, to), t < tokens: decodiff_matmul_bf16's blocking with the four rows of
 * each column block dequantized (instead of widened) into the packed fp32 block, and the rows after the last four
 * with the same fp32 contract. scratch: decodiff_matmul_scratch_floats(cols, tokens) floats.
 */
KERNEL_Q void decodiff_matmul_affine(const uint8_t *codes, const void *pairs, int32_t fmt, int32_t bits, int32_t group, int64_t cols,
                                     int32_t rows, int32_t from, int32_t to, const float *x, int32_t tokens, float *y, float *scratch) {
    gemm_scratch s = carve(scratch, tokens);
    int64_t bound = cols, tiled = tokens - tokens % TILE_TOKENS;
    pack_tiles(x, cols, bound, tokens, s.xp);
    int64_t end = to - (to - from) % ROWS;
    for (int64_t r = from; r < end; r += ROWS) {
        for (int64_t c0 = 0; c0 < bound; c0 += COL_BLOCK) {
            int64_t n = bound - c0 < COL_BLOCK ? bound - c0 : COL_BLOCK, t = 0, last = c0 + n == bound;
            affine_pack_rows(codes, pairs, fmt, bits, rows, cols, group, r, c0, n, s.wp);
            for (; t < tiled; t += TILE_TOKENS) {
                tile4x6(s.wp, s.xp + t * bound + c0 * TILE_TOKENS, n, s.acc + t * ROWS * L, c0 == 0);
                if (last) sum_tile(s.acc, y, rows, r, t);
            }
            for (; t < tokens; t++) tile4x1(s.wp, x + t * cols + c0, n, s.acc + t * ROWS * L, c0 == 0);
        }
        finish_rows(NULL, cols, bound, rows, r, x, bound > 0 ? tiled - tiled % 4 : 0, tokens, y, s.acc);
    }
    for (int t = 0; t < tokens; t++)
        for (int64_t r = end; r < to; r++)
            y[(int64_t) t * rows + r] = affine_row_fp32(codes, pairs, fmt, bits, rows, cols, group, r, x + (int64_t) t * cols);
}

/*
 * Attention's two inner loops over f32 cache rows, with VectorMath's contract (its dotsRange and accumulateF32; each
 * result the same bits): why native — in Java the scores' lane sums take sixteen scalar additions per score (the
 * Vector API's two-vector shuffles, which a transpose needs, compile to far slower code), a quarter to a half of
 * the score kernel's time at head dims 512 and 256; here a 16 × 16 transpose sums sixteen scores' lanes in ~70
 * cycles. And the value rows' per-row array loads and bounds checks go.
 *
 * decodiff_attention_scores: for up to four heads (q + qo0 .. qo3; spare heads repeat the last) and keys rows k + ko[i],
 * i < n: scores[s0 + h·stride + i] = 16 lane accumulators over the head dim's vector part in order (one fused
 * multiply-add each), summed in lane order from 0.0f, then the scalar tail c >= d - d % 16 as separately rounded
 * products added in order.
 */
KERNEL void decodiff_attention_scores(const float *q, int32_t qo0, int32_t qo1, int32_t qo2, int32_t qo3, int32_t heads, const float *k,
                                      const int32_t *ko, int32_t n, int32_t d, float *scores, int32_t s0, int32_t stride) {
    const float *q0 = q + qo0, *q1 = q + qo1, *q2 = q + qo2, *q3 = q + qo3;
    int32_t bound = d - d % L, i = 0;
    float lanes[4][L][L] __attribute__((aligned(64))); /* head, key of the sixteen, lane */
    for (; i + L <= n; i += L) {
        for (int j = 0; j < L; j += 4) {
            const float *k0 = k + ko[i + j], *k1 = k + ko[i + j + 1], *k2 = k + ko[i + j + 2], *k3 = k + ko[i + j + 3];
            __m512 a00 = _mm512_setzero_ps(), a01 = a00, a02 = a00, a03 = a00, a10 = a00, a11 = a00, a12 = a00, a13 = a00;
            __m512 a20 = a00, a21 = a00, a22 = a00, a23 = a00, a30 = a00, a31 = a00, a32 = a00, a33 = a00;
            for (int32_t c = 0; c < bound; c += L) {
                __m512 v0 = _mm512_loadu_ps(k0 + c), v1 = _mm512_loadu_ps(k1 + c), v2 = _mm512_loadu_ps(k2 + c), v3 = _mm512_loadu_ps(k3 + c);
                __m512 x = _mm512_loadu_ps(q0 + c);
                a00 = _mm512_fmadd_ps(x, v0, a00); a01 = _mm512_fmadd_ps(x, v1, a01); a02 = _mm512_fmadd_ps(x, v2, a02); a03 = _mm512_fmadd_ps(x, v3, a03);
                x = _mm512_loadu_ps(q1 + c);
                a10 = _mm512_fmadd_ps(x, v0, a10); a11 = _mm512_fmadd_ps(x, v1, a11); a12 = _mm512_fmadd_ps(x, v2, a12); a13 = _mm512_fmadd_ps(x, v3, a13);
                x = _mm512_loadu_ps(q2 + c);
                a20 = _mm512_fmadd_ps(x, v0, a20); a21 = _mm512_fmadd_ps(x, v1, a21); a22 = _mm512_fmadd_ps(x, v2, a22); a23 = _mm512_fmadd_ps(x, v3, a23);
                x = _mm512_loadu_ps(q3 + c);
                a30 = _mm512_fmadd_ps(x, v0, a30); a31 = _mm512_fmadd_ps(x, v1, a31); a32 = _mm512_fmadd_ps(x, v2, a32); a33 = _mm512_fmadd_ps(x, v3, a33);
            }
            _mm512_store_ps(lanes[0][j], a00); _mm512_store_ps(lanes[0][j + 1], a01); _mm512_store_ps(lanes[0][j + 2], a02); _mm512_store_ps(lanes[0][j + 3], a03);
            _mm512_store_ps(lanes[1][j], a10); _mm512_store_ps(lanes[1][j + 1], a11); _mm512_store_ps(lanes[1][j + 2], a12); _mm512_store_ps(lanes[1][j + 3], a13);
            _mm512_store_ps(lanes[2][j], a20); _mm512_store_ps(lanes[2][j + 1], a21); _mm512_store_ps(lanes[2][j + 2], a22); _mm512_store_ps(lanes[2][j + 3], a23);
            _mm512_store_ps(lanes[3][j], a30); _mm512_store_ps(lanes[3][j + 1], a31); _mm512_store_ps(lanes[3][j + 2], a32); _mm512_store_ps(lanes[3][j + 3], a33);
        }
        for (int h = 0; h < heads; h++) {
            __m512 r[L];
            UNROLLED for (int j = 0; j < L; j++) r[j] = _mm512_load_ps(lanes[h][j]);
            transpose16(r); /* r[l]: lane l of the sixteen keys' accumulators */
            __m512 s = _mm512_setzero_ps();
            UNROLLED for (int l = 0; l < L; l++) s = _mm512_add_ps(s, r[l]);
            _mm512_storeu_ps(scores + s0 + (int64_t) h * stride + i, s);
        }
        const float *qh[4] = {q0, q1, q2, q3};
        for (int32_t c = bound; c < d; c++)
            for (int j = 0; j < L; j++) {
                float kc = k[ko[i + j] + c];
                for (int h = 0; h < heads; h++) scores[s0 + (int64_t) h * stride + i + j] += qh[h][c] * kc;
            }
    }
    for (; i < n; i++) {
        const float *kr = k + ko[i];
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        for (int32_t c = 0; c < bound; c += L) {
            __m512 v = _mm512_loadu_ps(kr + c);
            a0 = _mm512_fmadd_ps(_mm512_loadu_ps(q0 + c), v, a0);
            a1 = _mm512_fmadd_ps(_mm512_loadu_ps(q1 + c), v, a1);
            a2 = _mm512_fmadd_ps(_mm512_loadu_ps(q2 + c), v, a2);
            a3 = _mm512_fmadd_ps(_mm512_loadu_ps(q3 + c), v, a3);
        }
        float s[4] = {sum_lanes(a0), sum_lanes(a1), sum_lanes(a2), sum_lanes(a3)};
        const float *qh[4] = {q0, q1, q2, q3};
        for (int32_t c = bound; c < d; c++)
            for (int h = 0; h < 4; h++) s[h] += qh[h][c] * kr[c];
        for (int h = 0; h < heads; h++) scores[s0 + (int64_t) h * stride + i] = s[h];
    }
}

/*
 * decodiff_attention_values: columns [0, c2) of four heads' outputs (out + uo0 .. uo3; spare heads repeat the last,
 * computing and storing the same bits to the same place) += their weights p[po<h> + i] · value rows v + vo[i], rows
 * [i0, i1) in order, one fused multiply-add each: 64 columns a pass, then 32 (c2 a multiple of 32).
 */
#define PV_TERM(h, b)                                                          \
    do {                                                                       \
        o##h##0 = _mm512_fmadd_ps(v0, b, o##h##0);                             \
        o##h##1 = _mm512_fmadd_ps(v1, b, o##h##1);                             \
        o##h##2 = _mm512_fmadd_ps(v2, b, o##h##2);                             \
        o##h##3 = _mm512_fmadd_ps(v3, b, o##h##3);                             \
    } while (0)
KERNEL void decodiff_attention_values(const float *p, int32_t po0, int32_t po1, int32_t po2, int32_t po3, const float *v, const int32_t *vo,
                                      int32_t i0, int32_t i1, int32_t c2, float *out, int32_t uo0, int32_t uo1, int32_t uo2, int32_t uo3) {
    float *u0 = out + uo0, *u1 = out + uo1, *u2 = out + uo2, *u3 = out + uo3;
    int32_t c = 0;
    for (; c + 4 * L <= c2; c += 4 * L) {
        __m512 o00 = _mm512_loadu_ps(u0 + c), o01 = _mm512_loadu_ps(u0 + c + L), o02 = _mm512_loadu_ps(u0 + c + 2 * L), o03 = _mm512_loadu_ps(u0 + c + 3 * L);
        __m512 o10 = _mm512_loadu_ps(u1 + c), o11 = _mm512_loadu_ps(u1 + c + L), o12 = _mm512_loadu_ps(u1 + c + 2 * L), o13 = _mm512_loadu_ps(u1 + c + 3 * L);
        __m512 o20 = _mm512_loadu_ps(u2 + c), o21 = _mm512_loadu_ps(u2 + c + L), o22 = _mm512_loadu_ps(u2 + c + 2 * L), o23 = _mm512_loadu_ps(u2 + c + 3 * L);
        __m512 o30 = _mm512_loadu_ps(u3 + c), o31 = _mm512_loadu_ps(u3 + c + L), o32 = _mm512_loadu_ps(u3 + c + 2 * L), o33 = _mm512_loadu_ps(u3 + c + 3 * L);
        for (int32_t i = i0; i < i1; i++) {
            const float *row = v + vo[i] + c;
            __m512 v0 = _mm512_loadu_ps(row), v1 = _mm512_loadu_ps(row + L), v2 = _mm512_loadu_ps(row + 2 * L), v3 = _mm512_loadu_ps(row + 3 * L);
            PV_TERM(0, _mm512_set1_ps(p[(int64_t) po0 + i]));
            PV_TERM(1, _mm512_set1_ps(p[(int64_t) po1 + i]));
            PV_TERM(2, _mm512_set1_ps(p[(int64_t) po2 + i]));
            PV_TERM(3, _mm512_set1_ps(p[(int64_t) po3 + i]));
        }
        _mm512_storeu_ps(u0 + c, o00); _mm512_storeu_ps(u0 + c + L, o01); _mm512_storeu_ps(u0 + c + 2 * L, o02); _mm512_storeu_ps(u0 + c + 3 * L, o03);
        _mm512_storeu_ps(u1 + c, o10); _mm512_storeu_ps(u1 + c + L, o11); _mm512_storeu_ps(u1 + c + 2 * L, o12); _mm512_storeu_ps(u1 + c + 3 * L, o13);
        _mm512_storeu_ps(u2 + c, o20); _mm512_storeu_ps(u2 + c + L, o21); _mm512_storeu_ps(u2 + c + 2 * L, o22); _mm512_storeu_ps(u2 + c + 3 * L, o23);
        _mm512_storeu_ps(u3 + c, o30); _mm512_storeu_ps(u3 + c + L, o31); _mm512_storeu_ps(u3 + c + 2 * L, o32); _mm512_storeu_ps(u3 + c + 3 * L, o33);
    }
    for (; c < c2; c += 2 * L) {
        __m512 o0 = _mm512_loadu_ps(u0 + c), o1 = _mm512_loadu_ps(u0 + c + L), o2 = _mm512_loadu_ps(u1 + c), o3 = _mm512_loadu_ps(u1 + c + L);
        __m512 o4 = _mm512_loadu_ps(u2 + c), o5 = _mm512_loadu_ps(u2 + c + L), o6 = _mm512_loadu_ps(u3 + c), o7 = _mm512_loadu_ps(u3 + c + L);
        for (int32_t i = i0; i < i1; i++) {
            const float *row = v + vo[i] + c;
            __m512 v0 = _mm512_loadu_ps(row), v1 = _mm512_loadu_ps(row + L), b = _mm512_set1_ps(p[(int64_t) po0 + i]);
            o0 = _mm512_fmadd_ps(v0, b, o0); o1 = _mm512_fmadd_ps(v1, b, o1);
            b = _mm512_set1_ps(p[(int64_t) po1 + i]); o2 = _mm512_fmadd_ps(v0, b, o2); o3 = _mm512_fmadd_ps(v1, b, o3);
            b = _mm512_set1_ps(p[(int64_t) po2 + i]); o4 = _mm512_fmadd_ps(v0, b, o4); o5 = _mm512_fmadd_ps(v1, b, o5);
            b = _mm512_set1_ps(p[(int64_t) po3 + i]); o6 = _mm512_fmadd_ps(v0, b, o6); o7 = _mm512_fmadd_ps(v1, b, o7);
        }
        _mm512_storeu_ps(u0 + c, o0); _mm512_storeu_ps(u0 + c + L, o1); _mm512_storeu_ps(u1 + c, o2); _mm512_storeu_ps(u1 + c + L, o3);
        _mm512_storeu_ps(u2 + c, o4); _mm512_storeu_ps(u2 + c + L, o5); _mm512_storeu_ps(u3 + c, o6); _mm512_storeu_ps(u3 + c + L, o7);
    }
}
