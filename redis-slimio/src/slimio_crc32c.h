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

/* Which implementation slimioCrc32c uses here: "sse4.2" (the crc32 instruction) or "table"
 * (slicing by 8), whichever was faster when first timed (INFO slimio reports it). */
const char *slimioCrc32cImplementation(void);

/* The table-driven implementation, whatever the CPU (for tests). */
uint32_t slimioCrc32cSoftware(uint32_t crc, const void *buf, size_t len);

/* The crc32 instruction's CRC into *out, whichever slimioCrc32c uses; 0 (nothing computed)
 * where the CPU has no SSE4.2 (for tests). */
int slimioCrc32cHardware(uint32_t crc, const void *buf, size_t len, uint32_t *out);

#endif
