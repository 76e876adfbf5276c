/* SlimIO's on-device format: the LBA layout, the metadata records and the WAL framing.
 *
 * LBA space (all regions in whole LBAs, starts aligned to SLIMIO_ALIGN_BYTES):
 *
 *   | Metadata: record A (LBA 0), record B (LBA 1) | WAL (circular) | slot 0 | slot 1 | slot 2 |
 *
 * Metadata: two alternating fixed-size records, each in a single LBA (a single-LBA write
 * is power-fail atomic). Record number seq lives at LBA (seq % 2); the valid record with
 * the highest seq is current, so a torn or failed write of the new one leaves the old one.
 *
 * WAL: one SLIMIO_WAL_HDR_SIZE header per LBA block (magic, used bytes, generation,
 * sequence, format id, CRC32C over header and payload). Blocks of a generation are
 * numbered consecutively; the partially filled tail block is rewritten in place as it
 * grows. Recovery reads from the generation's first block and stops at the first block
 * that fails a check or is not full: that is the valid end.
 *
 * Snapshot slots: three equal slots whose roles (WAL-Snapshot, Reserve, On-Demand) are in
 * the metadata. A new snapshot is written to the Reserve slot, made durable, then promoted
 * by a metadata commit; the slot it replaces becomes the Reserve.
 *
 * All integers are little-endian on the device. */
#ifndef SLIMIO_FORMAT_H
#define SLIMIO_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define SLIMIO_FORMAT_VERSION 1
#define SLIMIO_META_MAGIC "SLIMIOMD"
#define SLIMIO_META_RECORD_SIZE 512     /* fits the smallest LBA */
#define SLIMIO_WAL_MAGIC 0x4c57534cU    /* "LSWL" */
#define SLIMIO_WAL_HDR_SIZE 32
#define SLIMIO_SLOTS 3
#define SLIMIO_MAX_WAL_GENS 2
#define SLIMIO_ALIGN_BYTES (1024 * 1024)
#define SLIMIO_NO_PLACEMENT 0xffff

/* Error codes (negative); slimioStrerror() names them. */
#define SLIMIO_OK 0
#define SLIMIO_ERR_IO (-1)
#define SLIMIO_ERR_MAGIC (-2)
#define SLIMIO_ERR_VERSION (-3)
#define SLIMIO_ERR_CRC (-4)
#define SLIMIO_ERR_FIELDS (-5)
#define SLIMIO_ERR_NOMETA (-6)
#define SLIMIO_ERR_TOOSMALL (-7)
#define SLIMIO_ERR_GEN (-8)
#define SLIMIO_ERR_SEQ (-9)
#define SLIMIO_ERR_FORMAT_ID (-10)
#define SLIMIO_ERR_USED (-11)

typedef enum {
    SLIMIO_ROLE_WAL_SNAPSHOT = 1,
    SLIMIO_ROLE_RESERVE = 2,
    SLIMIO_ROLE_ON_DEMAND = 3,
} slimioSlotRole;

typedef enum {
    SLIMIO_KIND_META = 0,
    SLIMIO_KIND_WAL = 1,
    SLIMIO_KIND_WAL_SNAPSHOT = 2,
    SLIMIO_KIND_ON_DEMAND = 3,
    SLIMIO_KINDS = 4,
} slimioDataKind;

typedef struct slimioSlot {
    uint8_t role;           /* slimioSlotRole */
    uint8_t valid;          /* holds a complete, durable snapshot */
    uint64_t length;        /* logical bytes of the snapshot */
    uint64_t wal_gen;       /* WAL-Snapshot: first WAL generation to replay after it */
    uint32_t crc;           /* CRC32C of the snapshot's logical bytes */
} slimioSlot;

typedef struct slimioWalGen {
    uint64_t gen;           /* 0 = unused entry */
    uint64_t start_lba;     /* absolute LBA of the generation's first block */
    uint64_t start_seq;     /* sequence number of that block */
} slimioWalGen;

typedef struct slimioMeta {
    uint64_t seq;           /* record sequence number; the record lives at LBA seq % 2 */
    uint64_t format_id;     /* random, chosen at format time: tells our layout from another */
    uint32_t lba_size;
    uint64_t device_lbas;
    uint64_t wal_start, wal_lbas;
    uint64_t slot_start, slot_lbas;     /* slot i starts at slot_start + i * slot_lbas */
    slimioSlot slots[SLIMIO_SLOTS];
    slimioWalGen gens[SLIMIO_MAX_WAL_GENS]; /* live WAL generations, oldest first */
    uint16_t placement[SLIMIO_KINDS];   /* FDP placement id per data kind, or NO_PLACEMENT */
} slimioMeta;

/* Synchronous block I/O used for metadata and recovery (the WAL and snapshot streams use
 * io_uring rings on top of the same device). read, write and flush return 0 or a negative
 * errno.
 *
 * deallocate (NULL: the device has none) tells the device that nlb LBAs from lba hold
 * nothing of value any more, and returns only once the device completed it (see
 * slimio_dealloc.h for why it must be synchronous). It returns the number of device
 * commands it took (>= 1), -EOPNOTSUPP when the device cannot deallocate (nothing was
 * done; not an error), or another negative errno. Afterwards a read of those LBAs returns
 * zeroes, another fixed pattern or the old data: SlimIO treats all three alike. */
typedef struct slimioBlockIo {
    void *ctx;
    uint32_t lba_size;
    uint64_t lbas;
    int (*read)(void *ctx, uint64_t lba, uint32_t nlb, void *buf);
    int (*write)(void *ctx, uint64_t lba, uint32_t nlb, const void *buf, slimioDataKind kind);
    int (*flush)(void *ctx);
    int (*deallocate)(void *ctx, uint64_t lba, uint64_t nlb);
} slimioBlockIo;

struct slimioDealloc;

const char *slimioStrerror(int err);
const char *slimioRoleName(uint8_t role);

/* Plan a layout for a device of device_lbas blocks of lba_size bytes with a WAL region of
 * at least wal_bytes and three slots of at least slot_bytes each. Fills every layout
 * field of m (roles: slot 0 WAL-Snapshot, 1 Reserve, 2 On-Demand, none valid; no WAL
 * generation; no placement). Returns SLIMIO_OK, or SLIMIO_ERR_TOOSMALL with a message
 * giving the needed and the available size. */
int slimioLayoutPlan(uint64_t device_lbas, uint32_t lba_size, uint64_t wal_bytes,
                     uint64_t slot_bytes, slimioMeta *m, char *err, size_t errlen);

uint64_t slimioSlotLba(const slimioMeta *m, int slot);

/* Serialize m into buf (SLIMIO_META_RECORD_SIZE bytes) with its CRC32C. */
void slimioMetaEncode(const slimioMeta *m, unsigned char *buf);

/* Parse and check a record: magic, version, CRC, and that the layout is self-consistent.
 * Returns SLIMIO_OK or the first failed check. */
int slimioMetaDecode(const unsigned char *buf, slimioMeta *m);

/* Read both records and return the current one (valid, highest seq, at LBA seq % 2).
 * SLIMIO_ERR_NOMETA when neither record carries our magic (a blank or foreign device); the
 * failed check (SLIMIO_ERR_CRC, ...) when one does but none is valid (a damaged layout). */
int slimioMetaLoad(const slimioBlockIo *io, slimioMeta *m);

/* Make m durable as the next record: seq = m->seq + 1, written to LBA seq % 2, flushed.
 * On success m->seq is the new sequence number. Failpoints: meta.before-write,
 * meta.after-write, meta.after-flush. */
int slimioMetaCommit(const slimioBlockIo *io, slimioMeta *m);

/* Write a fresh layout m (from slimioLayoutPlan, with its format_id set): both metadata
 * LBAs are zeroed and flushed first, so that no record of an earlier format can outrank
 * the new one; then the WAL region and the three slots are deallocated through dealloc
 * (NULL: not at all; why=format), like mkfs discarding a device: nothing there is
 * referenced any more, and no record can reference it before the commit; then m is
 * committed as record 1. A failed deallocation is counted, never an error. */
int slimioFormatDevice(const slimioBlockIo *io, slimioMeta *m, struct slimioDealloc *dealloc);

/* WAL block framing. payload capacity = lba_size - SLIMIO_WAL_HDR_SIZE. */
static inline uint32_t slimioWalPayload(uint32_t lba_size) {
    return lba_size - SLIMIO_WAL_HDR_SIZE;
}

/* Fill the header of block (payload already at block + SLIMIO_WAL_HDR_SIZE; bytes past
 * used are zeroed) and its CRC. */
void slimioWalBlockSeal(unsigned char *block, uint32_t lba_size, uint64_t gen, uint64_t seq,
                        uint64_t format_id, uint32_t used);

/* Check one block against the expected generation and sequence. On SLIMIO_OK *used is its
 * payload length. */
int slimioWalBlockCheck(const unsigned char *block, uint32_t lba_size, uint64_t gen,
                        uint64_t seq, uint64_t format_id, uint32_t *used);

/* Whether block is an intact WAL block of this format (magic, used bytes, CRC32C, format
 * id), whatever its generation and sequence, which go to *gen and *seq. */
int slimioWalBlockPeek(const unsigned char *block, uint32_t lba_size, uint64_t format_id,
                       uint64_t *gen, uint64_t *seq);

/* LBA of the i-th block after start_lba in the circular WAL region. */
uint64_t slimioWalLba(const slimioMeta *m, uint64_t start_lba, uint64_t i);

typedef struct slimioWalEnd {
    uint64_t blocks;        /* valid blocks, the partial tail included */
    uint64_t bytes;         /* logical bytes in them */
    uint64_t next_lba;      /* where the next block goes (or where the tail is rewritten) */
    uint64_t next_seq;
    uint32_t tail_used;     /* payload bytes in the last block if it is partial, else 0 */
    int stop;               /* why the scan stopped: a SLIMIO_ERR_* of the first bad block,
                               SLIMIO_OK for a partial tail or the region's end */
} slimioWalEnd;

/* Account for the next valid block of generation g (the end->blocks-th, whose check passed
 * with `used` payload bytes) in *end. Returns 1 when it is the partial tail, the end of the
 * log (end->stop is then SLIMIO_OK), else 0. Shared by slimioWalScan and the streaming
 * reader of slimio_snap.c. */
int slimioWalEndAdvance(const slimioMeta *m, const slimioWalGen *g, uint32_t lba_size,
                        uint32_t used, slimioWalEnd *end);

/* Called for each valid block's payload, in order; a non-zero return stops the scan and is
 * returned by slimioWalScan. */
typedef int (*slimioWalVisitFn)(void *ctx, const unsigned char *payload, uint32_t len);

/* Scan generation g from its first block: read ahead in batches of up to batch_blocks,
 * visit every valid payload, and stop at the first block that fails a check or is not
 * full, or after max_blocks. The end position is in *end. Returns SLIMIO_OK, an I/O
 * error, or the visitor's non-zero return. */
int slimioWalScan(const slimioBlockIo *io, const slimioMeta *m, const slimioWalGen *g,
                  uint64_t max_blocks, uint32_t batch_blocks, slimioWalVisitFn visit,
                  void *ctx, slimioWalEnd *end);

/* The generation that follows g, which ended at *end (from slimioWalScan): generation
 * g->gen + 1 starts at sequence 0 on the LBA after g's valid end (after the partial tail
 * block if there is one). A new generation is only opened after the previous one is
 * drained and flushed, so recovery can follow the chain of generations from the
 * snapshot's first one without each being listed in the metadata. */
void slimioWalSuccessor(const slimioMeta *m, const slimioWalGen *g, const slimioWalEnd *end,
                        slimioWalGen *next);

/* The generation that continues the log after g, which ended at *end. Generations are
 * numbered in the order they begin, and each begins at its predecessor's successor
 * position P (slimioWalSuccessor); one that never wrote a block leaves P to the next one,
 * so several generation numbers can begin at the same P and all but the last are empty.
 * The log therefore continues with the first block at P if it is block 0 (sequence 0) of
 * a generation numbered above g->gen and at most max_gen (the newest generation the
 * metadata lists: no block of a newer one can exist, since a generation is listed before
 * its first write), whatever its number. A stale block at P carries an older generation
 * (a previous lap of the circular region, or the abandoned end of a truncated one) and
 * ends the log. Returns 1 with *next filled, 0 when the log ends at P (*stop says why: the
 * failed check of that block; *seen_gen, if not NULL, the generation of an intact block
 * there, else 0), or a negative errno. */
int slimioWalFollow(const slimioBlockIo *io, const slimioMeta *m, const slimioWalGen *g,
                    const slimioWalEnd *end, uint64_t max_gen, slimioWalGen *next, int *stop,
                    uint64_t *seen_gen);

#endif
