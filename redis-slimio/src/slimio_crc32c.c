/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78): table driven (slicing by 8), the
 * SSE4.2 crc32 instruction, or carry-less multiplication (PCLMULQDQ folding, four 16-byte
 * lanes, as in Intel's "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"),
 * whichever checksums faster on this CPU (timed once, at first use; the snapshot writer,
 * the WAL and the loaders checksum every byte). On real hardware the folding is the
 * fastest and the table the slowest; an emulator that advertises an instruction without
 * running it natively (QEMU's TCG and its crc32) can reverse the order. All give the same
 * values (the unit tests check the standard vector and each against the table). */
#define _GNU_SOURCE
#include "slimio_crc32c.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

static uint32_t crc32cSw(uint32_t crc, const unsigned char *p, size_t len);

#if defined(__x86_64__)
/* The folding constants: x^n mod P for the fold distances n, bit-reflected and shifted
 * left by one (the reflected product of PCLMULQDQ is one bit short), computed at init. The
 * same derivation gives the constants of Linux's crc32-pclmul for the IEEE polynomial. */
static uint64_t crc32cFoldK[4];   /* n = 4*128+32, 4*128-32 (four lanes); 128+32, 128-32 */

static uint64_t crc32cFoldConstant(unsigned n) {
    uint64_t r = 1;                                       /* x^0, normal bit order */
    for (unsigned i = 0; i < n; i++) {
        r <<= 1;
        if (r & (1ULL << 32)) r ^= (1ULL << 32) | 0x1EDC6F41ULL;
    }
    uint32_t refl = 0;
    for (int i = 0; i < 32; i++)
        if (r & (1ULL << i)) refl |= 1U << (31 - i);
    return (uint64_t)refl << 1;
}

__attribute__((target("pclmul,sse4.1")))
static inline __m128i crc32cFold(__m128i x, __m128i k, __m128i next) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                                       _mm_clmulepi64_si128(x, k, 0x11)), next);
}

/* Four 16-byte lanes folded 64 bytes at a time, then into one lane, then 16 bytes at a
 * time; the last lane and the tail (under 16 bytes) go through the table. The folding
 * keeps the message's remainder: the lane, as 16 bytes of message with a zero register,
 * leaves what the bytes it replaced would have. */
__attribute__((target("pclmul,sse4.1")))
static uint32_t crc32cClmul(uint32_t crc, const unsigned char *p, size_t len) {
    if (len < 64) return crc32cSw(crc, p, len);
    const __m128i k4 = _mm_set_epi64x((long long)crc32cFoldK[1], (long long)crc32cFoldK[0]);
    const __m128i k1 = _mm_set_epi64x((long long)crc32cFoldK[3], (long long)crc32cFoldK[2]);
    __m128i x0 = _mm_loadu_si128((const __m128i *)p);
    __m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
    x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)~crc));
    p += 64;
    len -= 64;
    while (len >= 64) {
        x0 = crc32cFold(x0, k4, _mm_loadu_si128((const __m128i *)p));
        x1 = crc32cFold(x1, k4, _mm_loadu_si128((const __m128i *)(p + 16)));
        x2 = crc32cFold(x2, k4, _mm_loadu_si128((const __m128i *)(p + 32)));
        x3 = crc32cFold(x3, k4, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        len -= 64;
    }
    __m128i x = crc32cFold(crc32cFold(crc32cFold(x0, k1, x1), k1, x2), k1, x3);
    while (len >= 16) {
        x = crc32cFold(x, k1, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        len -= 16;
    }
    unsigned char lane[16];
    _mm_storeu_si128((__m128i *)lane, x);
    return crc32cSw(crc32cSw(0xFFFFFFFFU, lane, sizeof(lane)), p, len);
}
#endif

typedef uint32_t (*crc32cFn)(uint32_t, const unsigned char *, size_t);
/* The implementations, the table first; ``has`` is set at init from the CPU's features. */
static struct { crc32cFn fn; const char *name; int has; } crc32cImpl[] = {
    {crc32cSw, "table", 1},
#if defined(__x86_64__)
    {crc32cHw, "sse4.2", 0},
    {crc32cClmul, "pclmul", 0},
#endif
};
enum { CRC32C_IMPLS = sizeof(crc32cImpl) / sizeof(crc32cImpl[0]) };
static crc32cFn crc32cUse = crc32cSw;
static const char *crc32cUseName = "table";
static char crc32cSpeeds[96] = "";   /* "table=MB/s,..." as timed at init */

#if defined(__x86_64__)
static double crc32cSeconds(crc32cFn fn, const unsigned char *buf, size_t len) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    volatile uint32_t sink = fn(0, buf, len);
    (void)sink;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (double)(b.tv_sec - a.tv_sec) + (b.tv_nsec - a.tv_nsec) / 1e9;
}
#endif

/* The fastest of those this CPU has: each one's best of five passes over 64 KiB, the
 * implementations taking turns (so that a slow spell of the CPU, as a busy host gives an
 * emulated one, falls on all of them; under 0.2 ms on real hardware, about 10 ms under
 * TCG). An instruction's implementation is taken only if it times at least
 * SLIMIO_CRC32C_MIN_GAIN times the table's speed. On hardware the gain is 3.8 (sse4.2) and 11.3
 * (pclmul); under QEMU's TCG, which emulates the instructions, the folding times 1.4-1.7
 * and in the server's use ran far slower than the table (docs/explanation/slimio.md). */
static void crc32cInitAll(void) {
    crc32cInit();
#if defined(__x86_64__)
    for (int i = 0; i < 4; i++)
        crc32cFoldK[i] = crc32cFoldConstant((unsigned[]){4 * 128 + 32, 4 * 128 - 32,
                                                         128 + 32, 128 - 32}[i]);
    static unsigned char buf[64 << 10];
    for (size_t i = 0; i < sizeof(buf); i++) buf[i] = (unsigned char)(i * 2654435761U >> 13);
    crc32cImpl[1].has = __builtin_cpu_supports("sse4.2");
    crc32cImpl[2].has = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
    enum { PASSES = 5 };
    double took[CRC32C_IMPLS];
    for (size_t i = 0; i < CRC32C_IMPLS; i++) took[i] = 1e9;
    for (int pass = 0; pass < PASSES; pass++)
        for (size_t i = 0; i < CRC32C_IMPLS; i++) {
            if (!crc32cImpl[i].has) continue;
            double s = crc32cSeconds(crc32cImpl[i].fn, buf, sizeof(buf));
            if (s < took[i]) took[i] = s;
        }
    size_t used = 0, fastest = 0;
    for (size_t i = 0; i < CRC32C_IMPLS; i++) {
        if (!crc32cImpl[i].has) continue;
        if (took[i] <= took[fastest] && took[i] * SLIMIO_CRC32C_MIN_GAIN <= took[0]) fastest = i;
        used += (size_t)snprintf(crc32cSpeeds + used, sizeof(crc32cSpeeds) - used, "%s%s=%.0f",
                                 used ? "," : "", crc32cImpl[i].name,
                                 took[i] > 0 ? sizeof(buf) / took[i] / 1e6 : 0.0);
    }
    crc32cUse = crc32cImpl[fastest].fn;
    crc32cUseName = crc32cImpl[fastest].name;
#endif
}

const char *slimioCrc32cImplementation(void) {
    pthread_once(&crc32cOnce, crc32cInitAll);
    return crc32cUseName;
}

const char *slimioCrc32cSpeeds(void) {
    pthread_once(&crc32cOnce, crc32cInitAll);
    return crc32cSpeeds;
}

uint32_t slimioCrc32c(uint32_t crc, const void *buf, size_t len) {
    pthread_once(&crc32cOnce, crc32cInitAll);
    return crc32cUse(crc, buf, len);
}

int slimioCrc32cWith(const char *name, uint32_t crc, const void *buf, size_t len,
                     uint32_t *out) {
    pthread_once(&crc32cOnce, crc32cInitAll);
    for (size_t i = 0; i < CRC32C_IMPLS; i++)
        if (crc32cImpl[i].has && strcmp(name, crc32cImpl[i].name) == 0) {
            *out = crc32cImpl[i].fn(crc, buf, len);
            return 1;
        }
    return 0;
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
