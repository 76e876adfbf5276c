/* SlimIO's WAL-Path: the main process's write-ahead log on the WAL region.
 *
 * Appends are copied into a staging buffer (mmap'ed with MADV_DONTFORK, so a fork child
 * never shares or copies it) as LBA blocks with SlimIO's framing, and written through the
 * WAL's own ring. Data appended while a batch is in flight joins the next batch, which
 * goes as soon as it may (group commit). Full blocks are sealed once and never change; a
 * partial tail block is sealed into a separate bounce block for each batch, so a block is
 * never modified while it is being written, and the tail is rewritten in place as it grows.
 *
 * Always-Log keeps up to SLIMIO_WAL_INFLIGHT batches in flight: its batch ends on a block
 * boundary, its partial tail filled with an AOF annotation ("#" ... "\n", lines Redis's
 * AOF loader skips), so the next batch starts in a block of its own and two writes in
 * flight never share an LBA. The format does not change: the pad is part of the log.
 * The written and durable levels advance in submission order: a batch that completes
 * before the one ahead of it waits for it, since recovery stops at the first block that
 * is not there. Periodical-Log keeps one batch in flight and no pad.
 *
 *   slimioWalSync        Always-Log: returns once everything appended is written and
 *                        flushed, so replies can go out after it.
 *   slimioWalFlushAsync  Periodical-Log: a flush is submitted (after the batch in flight);
 *                        called once a second by Redis's everysec logic.
 *
 * Space: the live WAL runs from the first LBA of the oldest live generation (the head) to
 * the end of the current generation; one block is always kept free, and ordinary appends
 * also leave the reserve (SLIMIO_WAL_RESERVE_DIV) free. An append that does not fit fails
 * as a whole with ENOSPC, like a full disk. */
#ifndef SLIMIO_WAL_H
#define SLIMIO_WAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "slimio_ring.h"

#define SLIMIO_WAL_BATCH_PARTS 4
#define SLIMIO_WAL_INFLIGHT 2
/* The pad's lines are at most this long: Redis's AOF loader reads a line into 1024 bytes
 * (AOF_ANNOTATION_LINE_MAX_LEN), and the rest of a longer one would not start with '#'. */
#define SLIMIO_WAL_PAD_LINE 1000
/* A generation's pad never exceeds 1 / SLIMIO_WAL_PAD_PER_LOG_DIV of its log bytes, so the
 * pad takes at most a ninth of the region's payload (the sizing rule in plan/checks.py
 * counts on it): a batch whose pad would pass that keeps its partial tail, and the next
 * waits for it. Large commands' batches stay under it (redis-benchmark's 4 KiB SETs pad
 * 5-9 % of their log); small ones' would pad more (YCSB-A's 1 KB updates, 60 %), and the
 * cap leaves them a batch in flight more often instead of a region filled faster. */
#define SLIMIO_WAL_PAD_PER_LOG_DIV 8
/* One part in SLIMIO_WAL_RESERVE_DIV of the region is kept free by ordinary appends: it
 * takes the commands Redis accepted but could not write when the region filled, which must
 * reach the current generation before a rewrite begins the next one (the rewrite's
 * snapshot already contains them; written after it they would be replayed twice). */
#define SLIMIO_WAL_RESERVE_DIV 8
/* Periodical-Log writes in batches of at least SLIMIO_WAL_MIN_BATCH bytes (at most a
 * quarter of the staging buffer): appended data waits in the staging buffer until that
 * much has gathered, a flush is asked for, or its oldest byte is SLIMIO_WAL_MAX_DELAY_US
 * old (slimioWalKick, once per event-loop iteration, at least every 100 ms with Redis's
 * default hz). Fewer, larger writes cost the host less per byte: on this project's bare
 * testbed 1 MiB batches ran 13 % more SET/s than a write per event-loop iteration. Under
 * Always-Log every batch goes at once. */
#define SLIMIO_WAL_MIN_BATCH (1u << 20)
#define SLIMIO_WAL_MAX_DELAY_US 10000
#define SLIMIO_WAL_MARKS 64
#define SLIMIO_WAL_MARK_US 50000

typedef struct slimioWal slimioWal;
typedef struct slimioWalBatch slimioWalBatch;

typedef struct slimioWalPart {
    slimioReq req;
    slimioWal *wal;
    slimioWalBatch *batch;
} slimioWalPart;

/* A batch in flight. */
struct slimioWalBatch {
    uint64_t base, end;         /* logical bytes [base, end) of the generation */
    int fua;                    /* written durable (FUA/RWF_DSYNC) */
    int left;                   /* parts not yet completed */
    int failed;                 /* a part failed */
    uint64_t submit_us;
    slimioWalPart parts[SLIMIO_WAL_BATCH_PARTS];
};

struct slimioWal {
    slimioBackend *be;
    slimioMeta *meta;           /* current metadata, owned by the caller (main thread) */
    slimioRing ring;
    uint32_t lba_size, payload;
    unsigned char *stage;       /* stage_blocks LBA blocks; block b of the generation is at
                                   slot b % stage_blocks */
    size_t stage_bytes;
    uint64_t stage_blocks;
    unsigned char *bounce;      /* the sealed partial tail of the batch in flight */
    slimioWalGen gen;           /* current generation */
    uint64_t head_lba;          /* first LBA of the oldest live generation */
    uint64_t gen_offset;        /* blocks from head_lba to gen.start_lba */

    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint64_t appended, written, durable;    /* logical bytes of the current generation */
    uint64_t submitted;         /* the end of the last batch submitted (>= written) */
    uint64_t flush_target;
    int flush_inflight, flush_wanted;
    int fua;                    /* Always-Log: batches are written durable (FUA/RWF_DSYNC),
                                   so no separate flush is needed */
    int mid_append;             /* an append waits for staging room: `appended` may end
                                   inside a command, so no pad may follow it now */
    /* Batches in flight, oldest first: batches[(bhead + i) % SLIMIO_WAL_INFLIGHT]. */
    slimioWalBatch batches[SLIMIO_WAL_INFLIGHT];
    unsigned bhead, bn;
    int error;                  /* sticky negative errno of a failed write or flush */
    uint64_t min_batch;         /* SLIMIO_WAL_MIN_BATCH, capped by the staging buffer */
    uint64_t pending_since_us;  /* when the first byte not yet submitted was appended */
    uint64_t base_total;        /* bytes appended to earlier generations (totals below) */
    int notify_fd;              /* eventfd written when durability advances (-1: none) */
    _Atomic int notify_wanted;  /* ... and only while someone waits for it */
    slimioWalPart flush_part;

    void (*on_full)(void *ctx);     /* called (main thread) when an append does not fit */
    void *on_full_ctx;
    uint64_t reserve_blocks;    /* kept free by ordinary appends (SLIMIO_WAL_RESERVE_DIV) */
    int use_reserve;            /* set around the drain before a generation switch */

    /* When the bytes were appended: marks[i] says bytes from off on were appended at or
     * after us (one mark per SLIMIO_WAL_MARK_US at most), for the loss-window bound. */
    struct { uint64_t off, us; } marks[SLIMIO_WAL_MARKS];
    unsigned mark_first, mark_n;

    /* Statistics. */
    uint64_t stat_lag_waits, stat_lag_wait_us;
    uint64_t stat_appends, stat_bytes, stat_batches, stat_flushes, stat_syncs;
    uint64_t stat_sync_wait_us, stat_full, stat_stage_waits, stat_gens;
    /* The batches' timeline: microseconds their data waited between its first append and
     * the batch's submission (behind the batch in flight, or for more data), and from
     * submission to the last part's completion (the device, as the WAL sees it). */
    uint64_t stat_batch_queue_us, stat_batch_device_us;
    uint64_t stat_overlapped;   /* batches submitted while another was in flight */
    uint64_t stat_pad_bytes;    /* annotation bytes that ended Always-Log batches on a block */
    uint64_t gen_pad;           /* ... of them in the current generation */
    uint64_t stat_pad_capped;   /* batches that kept a partial tail: the pad would pass its cap */
    uint64_t durable_us;        /* when the durable level last advanced */
};

/* Set up the WAL on be (ring of ring_entries, staging of stage_bytes), writing after the
 * generation g, which must already be recorded in meta (slimioWalBegin). Returns 0 or -1
 * with a message in err. */
int slimioWalOpen(slimioWal *w, slimioBackend *be, slimioMeta *meta, unsigned ring_entries,
                  size_t stage_bytes, char *err, size_t errlen);

/* Make g (empty, not yet written) the current generation and record it durably in the
 * metadata as the newest live generation (gens[0] is kept when set, else becomes g). */
int slimioWalBegin(slimioWal *w, const slimioWalGen *g);

/* Append len bytes. Returns len, or -1 with errno ENOSPC (the WAL region is full; nothing
 * was appended) or EIO (an earlier write or flush failed). */
ssize_t slimioWalAppend(slimioWal *w, const void *buf, size_t len);

/* Always-Log on (1) or off: whether batches are written with FUA (set by the caller before
 * appending; a policy change takes effect with the next batch). */
void slimioWalSetFua(slimioWal *w, int fua);

/* Block until everything appended so far is written and flushed. 0 or -1 with errno. */
int slimioWalSync(slimioWal *w);

/* Periodical-Log's loss window: when the oldest appended byte not yet written is older
 * than max_unwritten_us, or the oldest not yet durable older than max_undurable_us, wait
 * (on the calling thread) until it is; 0 or -1 with errno. Called before an append, so no
 * acknowledgement goes out while the window is exceeded: a crash then loses at most the
 * writes of the window (Redis's everysec contract: a second, two when a flush is slow). */
int slimioWalBoundLag(slimioWal *w, uint64_t max_unwritten_us, uint64_t max_undurable_us);

/* Bytes appended, and bytes durable, over every generation of this process: monotonic
 * levels for callers that wait for durability without blocking (group commit). */
uint64_t slimioWalAppendedTotal(slimioWal *w);
uint64_t slimioWalDurableTotal(slimioWal *w);
/* The same, and (at_us, not NULL) when that level was reached (slimioNowUs; 0: never). */
uint64_t slimioWalDurableTotalAt(slimioWal *w, uint64_t *at_us);
/* The sticky negative errno of a failed write or flush, or 0. */
int slimioWalError(slimioWal *w);

/* Durability notifications: while wanted (slimioWalWantNotify(w, 1)), every advance of
 * the durable level (and every error) adds 1 to the eventfd fd, from the completion
 * thread. Call slimioWalWantNotify before reading slimioWalDurableTotal: an advance after
 * that read is then always notified. */
void slimioWalSetNotify(slimioWal *w, int fd);
void slimioWalWantNotify(slimioWal *w, int wanted);

/* Periodical-Log: submit what is appended if it has waited SLIMIO_WAL_MAX_DELAY_US (or
 * is a whole batch) and no batch is in flight. Called once per event-loop iteration. */
void slimioWalKick(slimioWal *w);

/* Ask for a flush of everything appended so far, without waiting. */
void slimioWalFlushAsync(slimioWal *w);

/* Drain and flush the current generation, then begin the next one right after it
 * (slimioWalSuccessor) and commit it to the metadata. 0 or -1 with errno. */
int slimioWalNewGeneration(slimioWal *w);

/* The oldest live generation is now root (after a WAL-Snapshot promotion committed it):
 * the space before it is free. */
void slimioWalRelease(slimioWal *w, const slimioWalGen *root);

/* Drain, flush and stop the ring; frees the buffers. */
void slimioWalClose(slimioWal *w);

/* In a fork child: drop the parent's ring and buffers without touching them. */
void slimioWalAtForkChild(slimioWal *w);

/* LBA where the next block of the current generation goes (the partial tail if any). */
uint64_t slimioWalTailLba(slimioWal *w);
uint64_t slimioWalUsedBlocks(slimioWal *w);

#endif
