/*
 * The native kernels timed in thread CPU time, one thread, rounds interleaved: on a machine other jobs keep busy,
 * wall time measures the scheduler, CPU time measures the kernel. (Shared caches and memory bandwidth still feel the
 * other jobs: compare ratios within one run.)
 *
 *   gcc -O2 -std=c11 -fPIC -ffp-contract=off -shared -o /tmp/libk.so metal/src/main/c/decodiff_kernels.c
 *   gcc -O2 -o /tmp/kcpu jmh/c/kernels_cpu_time.c -L/tmp -lk -Wl,-rpath,/tmp
 *   /tmp/kcpu gemm 168 5        # fp32 FMA peak, exact fp32 GEMM and bf16-dot GEMM (6144 x 1536, 168 tokens)
 *   /tmp/kcpu matvec 131072 5   # streaming read vs fp32 matvec vs bf16-dot matvec over 131072 x 1536 bf16 (403 MB)
 *
 * To compare two builds of the kernels (same bits? which is faster?), see kernels_ab.c.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels_time.h"

void decodiff_matmul_bf16(const uint16_t *w, int64_t cols, int32_t rows, int32_t from, int32_t to, const float *x, int32_t tokens, float *y, float *scratch);
void decodiff_matmul_bf16dot(const uint16_t *w, int64_t cols, int32_t rows, int32_t from, int32_t to, const uint16_t *x, int32_t tokens, float *y, float *scratch);
int64_t decodiff_matmul_scratch_floats(int64_t cols, int32_t tokens);
void decodiff_matvec_bf16(const uint16_t *w, int64_t cols, int32_t from, int32_t to, const float *x, float *y);
int64_t decodiff_stream_read(const uint8_t *p, int64_t n);
float decodiff_fma_loop(int64_t iterations);
int32_t decodiff_fma_chains(void);

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: %s gemm TOKENS ROUNDS | matvec ROWS ROUNDS\n", argv[0]); return 2; }
    int gemm = strcmp(argv[1], "gemm") == 0, n = atoi(argv[2]), rounds = atoi(argv[3]);
    int cols = 1536, rows = gemm ? 6144 : n, tokens = gemm ? n : 1;
    size_t weights = (size_t) rows * cols;
    uint16_t *w = aligned_alloc(4096, weights * 2), *xb = malloc((size_t) tokens * cols * 2);
    float *x = malloc((size_t) tokens * cols * 4), *y = malloc((size_t) tokens * rows * 4), *scratch = malloc((size_t) decodiff_matmul_scratch_floats(cols, tokens) * 4);
    srand(1);
    for (size_t i = 0; i < weights; i++) w[i] = bf16((rand() / (float) RAND_MAX - 0.5f) * 0.1f);
    for (size_t i = 0; i < (size_t) tokens * cols; i++) xb[i] = bf16(x[i] = rand() / (float) RAND_MAX - 0.5f);
    volatile double sink = 0;
    for (int r = 0; r < rounds; r++) {
        double t0;
        if (gemm) {
            long iterations = 20000000;
            t0 = cpu();
            sink += decodiff_fma_loop(iterations);
            double peak = iterations * 32.0 * decodiff_fma_chains() / (cpu() - t0) / 1e9, flops = 2.0 * rows * cols * tokens;
            t0 = cpu();
            decodiff_matmul_bf16(w, cols, rows, 0, rows, x, tokens, y, scratch);
            double exact = flops / (cpu() - t0) / 1e9;
            t0 = cpu();
            decodiff_matmul_bf16dot(w, cols, rows, 0, rows, xb, tokens, y, scratch);
            double dot = flops / (cpu() - t0) / 1e9;
            printf("round %d: fp32 FMA peak %.1f GFLOPS; exact GEMM %.1f (%.2f of peak); bf16-dot GEMM %.1f (%.2f x exact)\n",
                   r, peak, exact, exact / peak, dot, dot / exact);
        } else {
            double bytes = weights * 2.0;
            t0 = cpu();
            sink += decodiff_stream_read((const uint8_t *) w, (int64_t) bytes);
            double stream = bytes / (cpu() - t0) / 1e9;
            t0 = cpu();
            decodiff_matvec_bf16(w, cols, 0, rows, x, y);
            double mv = bytes / (cpu() - t0) / 1e9;
            t0 = cpu();
            decodiff_matmul_bf16dot(w, cols, rows, 0, rows, xb, 1, y, scratch);
            double dot = bytes / (cpu() - t0) / 1e9;
            printf("round %d: stream read %.1f GB/s; fp32 matvec %.1f (%.2f of the read); bf16-dot matvec %.1f (%.2f)\n",
                   r, stream, mv, mv / stream, dot, dot / stream);
        }
    }
    return sink == 12345.0;
}
