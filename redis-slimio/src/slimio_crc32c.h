/* CRC32C (Castagnoli), as used by SlimIO's metadata records and WAL blocks. */
#ifndef SLIMIO_CRC32C_H
#define SLIMIO_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extend crc (start with 0) over len bytes of buf. slimioCrc32c(0, "123456789", 9)
 * is 0xE3069283, the standard check value. */
uint32_t slimioCrc32c(uint32_t crc, const void *buf, size_t len);

/* The CRC of A followed by B from crc_a = CRC(A), crc_b = CRC(B) and len_b = |B|, as
 * zlib's crc32_combine does for its polynomial: a chunk's CRC can then be computed where
 * the chunk arrives (another thread), in any order, and chained in order afterwards. */
uint32_t slimioCrc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* Which implementation slimioCrc32c uses here: "table" (slicing by 8), "sse4.2" (the crc32
 * instruction) or "pclmul" (carry-less multiplication), whichever was fastest when first
 * timed, an instruction only at SLIMIO_CRC32C_MIN_GAIN times the table's speed or more
 * (INFO slimio reports it). */
#define SLIMIO_CRC32C_MIN_GAIN 2.5
const char *slimioCrc32cImplementation(void);

/* Each implementation's speed in MB/s as timed for that choice, "table=N,sse4.2=N,pclmul=N"
 * (those the CPU has; INFO slimio reports it). */
const char *slimioCrc32cSpeeds(void);

/* The CRC by the implementation of that name into *out, whichever slimioCrc32c uses; 0
 * (nothing computed) where the CPU lacks it (for tests and benchmarks). */
int slimioCrc32cWith(const char *name, uint32_t crc, const void *buf, size_t len,
                     uint32_t *out);

#endif
