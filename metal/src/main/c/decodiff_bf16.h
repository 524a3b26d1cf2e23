/* One bf16 value widened to fp32 (exact: a bf16 is the high half of an fp32), for both kernel files' scalar tails. */
#ifndef DECODIFF_BF16_H
#define DECODIFF_BF16_H
#include <stdint.h>
#include <string.h>

static inline float bf16(uint16_t v) {
    uint32_t u = (uint32_t) v << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
#endif
