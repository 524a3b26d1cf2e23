/* What jmh/c's timing programs share: thread CPU time and fp32 → bf16 rounding (nearest even). */
#ifndef DECODIFF_KERNELS_TIME_H
#define DECODIFF_KERNELS_TIME_H
#include <stdint.h>
#include <string.h>
#include <time.h>

static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static uint16_t bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t) ((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}
#endif
