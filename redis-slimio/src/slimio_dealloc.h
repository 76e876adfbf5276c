/* Deallocation: SlimIO tells the device which LBAs it no longer needs.
 *
 * The paper deallocates the previous WAL only after a new WAL-Snapshot generation is
 * promoted, and the snapshot slot that becomes the Reserve slot. SlimIO does that, and
 * frees the whole WAL region and the three slots when it formats a device:
 *
 *   why=wal     after a WAL-Snapshot's promotion is durable: the old WAL generations the
 *               new metadata no longer lists (the circular range from the old oldest live
 *               generation's first LBA to the new one's; one or two ranges with wrap-around)
 *   why=slot    after any promotion is durable: the whole slot that became the Reserve
 *   why=format  at format, after both metadata LBAs are zeroed, before the first commit
 *
 * Crash safety (README "Deallocation"): only LBAs that neither the durable metadata record
 * nor any record recovery could fall back to references are freed, and only after the
 * commit that makes them dead is durable. A deallocated LBA reads as zeroes, another fixed
 * pattern or its old data; a WAL block in any of these states fails its checks where it
 * is not expected, and a Reserve slot is never read.
 *
 * Synchronous: slimioDeallocRange returns only once the device completed the deallocation.
 * NVMe gives no ordering between commands in flight, so a deallocation still in flight
 * could discard data written later to the same LBAs (the WAL ring wraps into the freed
 * range; the next snapshot is written into the Reserve slot). Callers write to freed LBAs
 * only after it returned (the WAL's space is released after it, in the same thread).
 *
 * Trace marker: with slimio-trace-marker (slimio-admin format --trace-marker) SlimIO writes
 * one line per contiguous range to that file (the kernel's tracefs trace_marker),
 * immediately before the range is deallocated, so that in the trace it precedes the NVMe
 * Dataset Management command(s):
 *
 *     slimio_dealloc slba=<first LBA> nlb=<LBAs> why=<wal|slot|format>
 *
 * No line is written for a range that is not sent to the device (deallocation off, or a
 * device known not to support it). A failed write is logged once and counted, never
 * fatal. */
#ifndef SLIMIO_DEALLOC_H
#define SLIMIO_DEALLOC_H

#include <stddef.h>
#include <stdint.h>

#include "slimio_format.h"

typedef enum {
    SLIMIO_DEALLOC_WAL = 0,
    SLIMIO_DEALLOC_SLOT = 1,
    SLIMIO_DEALLOC_FORMAT = 2,
} slimioDeallocWhy;

typedef struct slimioLbaRange {
    uint64_t lba, nlb;
} slimioLbaRange;

typedef struct slimioDeallocStats {
    uint64_t commands;          /* device commands that completed (DSM, punch, discard) */
    uint64_t lbas;              /* LBAs they deallocated */
    uint64_t unsupported;       /* ranges not deallocated because the device cannot */
    uint64_t errors;            /* ranges whose deallocation failed (they stay allocated) */
    uint64_t marker_errors;     /* trace-marker lines that could not be written */
} slimioDeallocStats;

typedef struct slimioDealloc {
    const slimioBlockIo *io;    /* io->deallocate does the work */
    int enabled;                /* slimio-deallocate / not --no-deallocate */
    int supported;              /* 1 yes, 0 no (nothing is sent), -1 not known until tried */
    int marker_fd;              /* -1: no trace marker */
    char *marker_path;
    int marker_warned;          /* a failed marker write was logged */
    int unsupported_warned;
    void (*warn)(void *ctx, const char *msg);   /* how to log a problem (once per kind) */
    void *warn_ctx;
    slimioDeallocStats stats;
} slimioDealloc;

/* Set d up to deallocate through io (enabled: whether to at all; supported: what is known
 * of the device, 1, 0 or -1). warn (may be NULL) receives one line per problem. No trace
 * marker until slimioDeallocOpenMarker. */
void slimioDeallocInit(slimioDealloc *d, const slimioBlockIo *io, int enabled, int supported,
                       void (*warn)(void *ctx, const char *msg), void *warn_ctx);

/* Open path (O_WRONLY|O_APPEND, never created: tracefs's trace_marker, or any existing
 * file) as the trace marker. Returns 0, or -1 with a message naming the path in err. */
int slimioDeallocOpenMarker(slimioDealloc *d, const char *path, char *err, size_t errlen);

/* Close the marker. */
void slimioDeallocClose(slimioDealloc *d);

/* Deallocate nlb LBAs from lba, synchronously: the marker line, then the device's
 * deallocation. Returns 0 when done (or nothing to do: nlb 0, or deallocation off), 1 when
 * the device cannot deallocate (counted as unsupported), or a negative errno when it
 * failed (counted and logged). Never fatal: the range only stays allocated. */
int slimioDeallocRange(slimioDealloc *d, uint64_t lba, uint64_t nlb, slimioDeallocWhy why);

/* "wal", "slot", "format". */
const char *slimioDeallocWhyName(slimioDeallocWhy why);

/* The marker line for a range, newline included, into buf. Returns its length (as
 * snprintf). */
int slimioDeallocMarkerLine(char *buf, size_t len, uint64_t lba, uint64_t nlb,
                            slimioDeallocWhy why);

/* The WAL LBAs from `from` (inclusive) to `to` (exclusive) going forward around the
 * circular WAL region of m: 0 ranges when from == to, 1 when it does not wrap, 2 when it
 * does (the piece up to the region's end first). -1 when either LBA is outside the
 * region. */
int slimioWalFreeRanges(const slimioMeta *m, uint64_t from, uint64_t to, slimioLbaRange out[2]);

/* What format deallocates: the WAL region and the three slots, as one range when they are
 * contiguous (slimioLayoutPlan's layout), else two. Returns the number of ranges. */
int slimioFormatRanges(const slimioMeta *m, slimioLbaRange out[2]);

#endif
