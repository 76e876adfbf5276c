/* SlimIO's Snapshot-Path and its readers.
 *
 * slimioSlotWriter: the fork child writes a snapshot (an RDB image, or an AOF rewrite
 * without preamble) sequentially into the Reserve slot through its own ring (SQPOLL when
 * configured) and completion thread, from a few aligned buffers that are filled while
 * earlier ones are written. It computes the snapshot's length and CRC32C as it goes.
 *
 * slimioOpen*Stream: read-only stdio streams (fopencookie) over a slot or one WAL
 * generation, fed by a read-ahead reader that keeps the next chunk's read in flight while
 * the current one is parsed. They let Redis's own AOF/RDB loading code read SlimIO's
 * regions unchanged. A slot stream ends at the snapshot's exact logical length and fails
 * (EIO) at its end when the CRC32C does not match the metadata. A WAL stream ends at the
 * generation's valid end (first torn, stale, foreign or partial block). */
#ifndef SLIMIO_SNAP_H
#define SLIMIO_SNAP_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "slimio_ring.h"

#define SLIMIO_SNAP_BUFS 4

typedef struct slimioSlotWriter slimioSlotWriter;

typedef struct slimioSlotBuf {
    slimioReq req;
    slimioSlotWriter *w;
    unsigned char *data;
    int busy;                   /* submitted, and its CRC not yet chained into the slot's */
    int done;                   /* written; crc holds its CRC32C */
    uint64_t seq;               /* its place among the writer's buffers */
    size_t len;                 /* its logical bytes (before the padding to whole LBAs) */
    uint32_t crc;
} slimioSlotBuf;

struct slimioSlotWriter {
    slimioBackend *be;
    slimioRing ring;
    slimioDataKind kind;
    uint64_t slot_lba, slot_lbas;
    size_t buf_bytes;
    slimioSlotBuf bufs[SLIMIO_SNAP_BUFS];
    int cur;
    size_t fill;
    uint64_t next_lba;          /* where the current buffer goes */
    uint64_t length;            /* logical bytes so far */
    uint32_t crc;               /* CRC32C of the buffers chained so far, in order */
    uint64_t submitted;         /* buffers submitted */
    uint64_t chained;           /* buffers whose CRC is in crc */
    uint64_t wait_us;           /* time the writer blocked on the ring: for a free buffer
                                 * (written, its CRC chained), then for the flush */
    int error;                  /* negative errno */
    int chunks;
    pthread_mutex_t lock;
    pthread_cond_t cond;
};

/* Open a writer on the slot starting at slot_lba (slot_lbas long) for data kind `kind`.
 * Returns 0, or -1 with a message in err. Failpoint snapshot.begin. */
int slimioSlotWriterOpen(slimioSlotWriter *w, slimioBackend *be, uint64_t slot_lba,
                         uint64_t slot_lbas, slimioDataKind kind, unsigned ring_entries,
                         int sqpoll, size_t buf_bytes, char *err, size_t errlen);

/* Append len bytes of the snapshot. 0, or a negative errno (-ENOSPC: the snapshot does
 * not fit the slot). */
int slimioSlotWriterWrite(slimioSlotWriter *w, const void *buf, size_t len);

/* Write the last partial buffer (zero-padded to a whole LBA), wait for every write, flush,
 * and stop the ring. On 0 the snapshot is durable: *length and *crc describe it.
 * Failpoints snapshot.after-write, snapshot.after-flush. */
int slimioSlotWriterFinish(slimioSlotWriter *w, uint64_t *length, uint32_t *crc);

/* Stop without finishing (after an error). */
void slimioSlotWriterAbort(slimioSlotWriter *w);

typedef struct slimioStreamStats {
    uint64_t bytes;             /* logical bytes delivered */
    uint64_t device_bytes;      /* bytes read from the device */
    uint64_t wait_us;           /* time the reader waited for a chunk (the device, or its
                                   check on the completion thread) */
    slimioWalEnd end;           /* WAL streams: the valid end (for slimioWalSuccessor) */
} slimioStreamStats;

/* A stream over the snapshot in the slot at slot_lba, `length` bytes with CRC32C crc.
 * *stats (owned by the caller, may be NULL) is updated as the stream is read and stays
 * valid after fclose. NULL with errno on failure. */
FILE *slimioOpenSlotStream(slimioBackend *be, uint64_t slot_lba, uint64_t length,
                           uint32_t crc, size_t readahead_bytes, slimioStreamStats *stats);

/* A stream over WAL generation g's payloads. */
FILE *slimioOpenWalStream(slimioBackend *be, const slimioMeta *m, const slimioWalGen *g,
                          size_t readahead_bytes, slimioStreamStats *stats);

/* Make generation g end after `bytes` logical bytes (dropping a torn last command found
 * while loading): the block holding that point is rewritten as a partial tail, or
 * invalidated when the point is a block boundary, and flushed. 0 or a negative errno. */
int slimioWalTruncate(slimioBackend *be, const slimioMeta *m, const slimioWalGen *g,
                      uint64_t bytes);

#endif
