/*
 * Two builds of metal/src/main/c/decodiff_kernels.c side by side, each dlopen'd on its own. First the bits: both
 * GEMMs (exact and bf16-dot) on one shape, with subnormal, signed-zero, infinite and NaN weights and subnormal and
 * signed-zero activations, the rows split into three ranges as Parallel splits them, the activations and the scratch
 * at unaligned addresses — every output must be the same in both builds. Then speed: one thread, CPU time, the two
 * builds alternating for ROUNDS rounds (which one goes first alternates too), each GEMM over the fp32 FMA peak
 * measured in the same round, and B/A; min/median/max. A kernel change that keeps the bits passes the first part on
 * every shape it is run on. (Two copies of one build give B/A 0.98-1.03.)
 *
 *   gcc -O2 -std=c11 -fPIC -ffp-contract=off -shared -o /tmp/a.so OLD/decodiff_kernels.c   (and /tmp/b.so: NEW)
 *   gcc -O2 -o /tmp/kab jmh/c/kernels_ab.c
 *   /tmp/kab /tmp/a.so /tmp/b.so 1536 6144 168 7   # COLS ROWS TOKENS ROUNDS; ROUNDS 0 checks the bits only
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_time.h"

typedef void (*gemm_fn)(const uint16_t *, int64_t, int32_t, int32_t, int32_t, const void *, int32_t, float *, float *);
typedef struct {
    gemm_fn exact, dot;
    int64_t (*scratch_floats)(int64_t, int32_t); /* absent before ABI 3: then tokens · 64 floats */
    float (*fma_loop)(int64_t);
} build;

static build load(const char *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); exit(2); }
    build b = {(gemm_fn) dlsym(h, "decodiff_matmul_bf16"), (gemm_fn) dlsym(h, "decodiff_matmul_bf16dot"),
               (int64_t (*)(int64_t, int32_t)) dlsym(h, "decodiff_matmul_scratch_floats"), (float (*)(int64_t)) dlsym(h, "decodiff_fma_loop")};
    if (!b.exact || !b.dot || !b.fma_loop) { fprintf(stderr, "%s lacks the GEMMs\n", path); exit(2); }
    return b;
}

/* One GEMM over all rows, cut into `parts` row ranges; the scratch one float past a 64-byte boundary. */
static void run(build b, int dot, const uint16_t *w, int cols, int rows, const void *x, int tokens, float *y, int parts) {
    size_t floats = b.scratch_floats ? (size_t) b.scratch_floats(cols, tokens) : (size_t) tokens * 64;
    float *s = aligned_alloc(64, (floats + 16) * 4 / 64 * 64 + 64);
    for (int p = 0; p < parts; p++)
        (dot ? b.dot : b.exact)(w, cols, rows, (int) ((int64_t) rows * p / parts), (int) ((int64_t) rows * (p + 1) / parts), x, tokens, y, s + 1);
    free(s);
}

static int cmp(const void *a, const void *b) { double x = *(const double *) a, y = *(const double *) b; return x < y ? -1 : x > y; }

int main(int argc, char **argv) {
    if (argc != 7) { fprintf(stderr, "usage: %s A.so B.so COLS ROWS TOKENS ROUNDS\n", argv[0]); return 2; }
    build a = load(argv[1]), b = load(argv[2]);
    int cols = atoi(argv[3]), rows = atoi(argv[4]), tokens = atoi(argv[5]), rounds = atoi(argv[6]);
    size_t nw = (size_t) rows * cols, nx = (size_t) tokens * cols, ny = (size_t) tokens * rows;
    uint16_t *w = aligned_alloc(4096, (nw * 2 + 4095) / 4096 * 4096), *xb = malloc(nx * 2 + 2);
    float *xa = malloc(nx * 4 + 4), *x = xa + 1, *ya = malloc(ny * 4), *yb = malloc(ny * 4);
    srand(1);
    for (size_t i = 0; i < nw; i++) w[i] = bf16((rand() / (float) RAND_MAX - 0.5f) * 0.1f);
    for (size_t i = 0; i < nx; i++) x[i] = rand() / (float) RAND_MAX - 0.5f;
    const uint16_t specials[] = {0x0001, 0x8001, 0x007f, 0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0};
    for (size_t i = 0; i < 8; i++) w[i * 977 % nw] = specials[i];
    for (size_t i = 5; i < nx; i += 97) x[i] = i % 2 ? -0.0f : 1e-40f;
    for (size_t i = 0; i < nx; i++) xb[i] = bf16(x[i]);
    for (int dot = 0; dot < 2; dot++) {
        memset(ya, 0x55, ny * 4);
        memset(yb, 0x66, ny * 4);
        run(a, dot, w, cols, rows, dot ? (void *) xb : (void *) x, tokens, ya, 3);
        run(b, dot, w, cols, rows, dot ? (void *) xb : (void *) x, tokens, yb, 3);
        for (size_t i = 0; i < ny; i++)
            if (memcmp(ya + i, yb + i, 4)) {
                printf("DIFFERENT BITS: %s GEMM, cols %d rows %d tokens %d, first at token %zu row %zu\n", dot ? "bf16-dot" : "exact", cols, rows, tokens, i / rows, i % rows);
                return 1;
            }
    }
    printf("same bits: exact and bf16-dot GEMMs, cols %d rows %d tokens %d\n", cols, rows, tokens);
    if (rounds <= 0) return 0;
    double flops = 2.0 * nw * tokens, *r = calloc(6 * (size_t) rounds, sizeof(double));
    volatile float sink = 0;
    for (int k = 0; k < rounds; k++) {
        double t0 = cpu();
        sink += a.fma_loop(10000000);
        double peak = 10000000 * 32.0 * 12 / (cpu() - t0); /* decodiff_fma_loop: 12 chains of 16-lane FMAs */
        for (int i = 0; i < 4; i++) {
            int v = k % 2 ? i ^ 1 : i; /* B first in odd rounds: whichever runs second gained ~2 % here */
            t0 = cpu();
            run(v % 2 ? b : a, v / 2, w, cols, rows, v / 2 ? (void *) xb : (void *) x, tokens, ya, 1);
            r[v * rounds + k] = flops / (cpu() - t0) / peak;
        }
        r[4 * rounds + k] = r[rounds + k] / r[k];
        r[5 * rounds + k] = r[3 * rounds + k] / r[2 * rounds + k];
    }
    const char *names[] = {"A exact / FMA peak", "B exact / FMA peak", "A bf16-dot / peak", "B bf16-dot / peak", "B / A exact", "B / A bf16-dot"};
    for (int v = 0; v < 6; v++) {
        qsort(r + v * rounds, rounds, sizeof(double), cmp);
        printf("%-20s min %.3f  median %.3f  max %.3f\n", names[v], r[v * rounds], r[v * rounds + rounds / 2], r[v * rounds + rounds - 1]);
    }
    return sink == 12345.0f;
}
