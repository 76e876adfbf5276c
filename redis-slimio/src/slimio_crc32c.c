/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the SSE4.2 crc32 instruction or
 * table driven, slicing by 8, whichever checksums faster on this CPU (timed once, at first
 * use; the snapshot writer, the WAL and the loaders checksum every byte). On real hardware
 * the instruction is several times faster; an emulator that advertises SSE4.2 without
 * running it natively (QEMU's TCG) can make it the slower one. Both give the same values
 * (the unit tests check the standard vector). */
#define _GNU_SOURCE
#include "slimio_crc32c.h"

#include <pthread.h>
#include <time.h>

static uint32_t crc32cTable[8][256];
static pthread_once_t crc32cOnce = PTHREAD_ONCE_INIT;

static void crc32cInit(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ 0x82F63B78U : c >> 1;
        crc32cTable[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc32cTable[t][i] = (crc32cTable[t-1][i] >> 8) ^
                                crc32cTable[0][crc32cTable[t-1][i] & 0xff];
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc32cHw(uint32_t crc, const unsigned char *p, size_t len) {
    uint64_t c = ~crc;
    while (len >= 8) {
        uint64_t v;
        __builtin_memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (len--) c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#endif

static int crc32cUseHw;

static uint32_t crc32cSw(uint32_t crc, const unsigned char *p, size_t len);

#if defined(__x86_64__)
static double crc32cSeconds(uint32_t (*fn)(uint32_t, const unsigned char *, size_t),
                            const unsigned char *buf, size_t len) {
    double best = 1e9;
    for (int pass = 0; pass < 3; pass++) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        volatile uint32_t sink = fn(0, buf, len);
        (void)sink;
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
        if (s < best) best = s;
    }
    return best;
}

/* The instruction, unless the table is faster here: the best of three passes over 64 KiB
 * each (about 0.1 ms on real hardware, a few ms under TCG). */
static int crc32cHwIsFaster(void) {
    static unsigned char buf[64 << 10];
    for (size_t i = 0; i < sizeof(buf); i++) buf[i] = (unsigned char)(i * 2654435761U >> 13);
    return crc32cSeconds(crc32cHw, buf, sizeof(buf)) <=
           crc32cSeconds(crc32cSw, buf, sizeof(buf));
}
#endif

static void crc32cInitAll(void) {
    crc32cInit();
#if defined(__x86_64__)
    crc32cUseHw = __builtin_cpu_supports("sse4.2") && crc32cHwIsFaster();
#endif
}

const char *slimioCrc32cImplementation(void) {
    pthread_once(&crc32cOnce, crc32cInitAll);
    return crc32cUseHw ? "sse4.2" : "table";
}

uint32_t slimioCrc32c(uint32_t crc, const void *buf, size_t len) {
    pthread_once(&crc32cOnce, crc32cInitAll);
#if defined(__x86_64__)
    if (crc32cUseHw) return crc32cHw(crc, buf, len);
#endif
    return crc32cSw(crc, buf, len);
}

/* The instruction, for the unit tests; 0 where the CPU has none. */
int slimioCrc32cHardware(uint32_t crc, const void *buf, size_t len, uint32_t *out) {
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2")) {
        *out = crc32cHw(crc, buf, len);
        return 1;
    }
#endif
    (void)crc; (void)buf; (void)len; (void)out;
    return 0;
}

/* Exposed to the unit tests through slimioCrc32cSoftware. */
uint32_t slimioCrc32cSoftware(uint32_t crc, const void *buf, size_t len) {
    pthread_once(&crc32cOnce, crc32cInitAll);
    return crc32cSw(crc, buf, len);
}

static uint32_t crc32cSw(uint32_t crc, const unsigned char *p, size_t len) {
    crc = ~crc;
    while (len >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 |
                             (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        crc = crc32cTable[7][lo & 0xff] ^ crc32cTable[6][(lo >> 8) & 0xff] ^
              crc32cTable[5][(lo >> 16) & 0xff] ^ crc32cTable[4][lo >> 24] ^
              crc32cTable[3][p[4]] ^ crc32cTable[2][p[5]] ^
              crc32cTable[1][p[6]] ^ crc32cTable[0][p[7]];
        p += 8;
        len -= 8;
    }
    while (len--) crc = (crc >> 8) ^ crc32cTable[0][(crc ^ *p++) & 0xff];
    return ~crc;
}

/* slimioCrc32cCombine: appending len_b zero bytes to A is a linear map on its CRC register,
 * applied by squaring an operator matrix over GF(2) (Mark Adler's method in zlib's
 * crc32_combine, here for the Castagnoli polynomial); O(log len_b) 32x32 products. */
static uint32_t gf2Times(const uint32_t *mat, uint32_t vec) {
    uint32_t sum = 0;
    for (; vec; vec >>= 1, mat++)
        if (vec & 1) sum ^= *mat;
    return sum;
}

static void gf2Square(uint32_t *square, const uint32_t *mat) {
    for (int n = 0; n < 32; n++) square[n] = gf2Times(mat, mat[n]);
}

uint32_t slimioCrc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b) {
    if (len_b == 0) return crc_a;
    uint32_t even[32], odd[32];
    odd[0] = 0x82F63B78U;               /* the operator for one zero bit */
    for (int n = 1; n < 32; n++) odd[n] = 1U << (n - 1);
    gf2Square(even, odd);               /* two zero bits */
    gf2Square(odd, even);               /* four zero bits */
    do {                                /* apply len_b zero bytes to crc_a */
        gf2Square(even, odd);
        if (len_b & 1) crc_a = gf2Times(even, crc_a);
        len_b >>= 1;
        if (!len_b) break;
        gf2Square(odd, even);
        if (len_b & 1) crc_a = gf2Times(odd, crc_a);
        len_b >>= 1;
    } while (len_b);
    return crc_a ^ crc_b;
}
