/* Snapshot writer and read-ahead streams: see slimio_snap.h. */
#define _GNU_SOURCE
#include "slimio_snap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "slimio_crc32c.h"
#include "slimio_failpoint.h"

static void *alignedAlloc(size_t align, size_t bytes) {
    void *p = NULL;
    if (posix_memalign(&p, align < 4096 ? 4096 : align, bytes)) return NULL;
    return p;
}

/* ------------------------------------------------------------------------------------
 * Slot writer
 * ---------------------------------------------------------------------------------- */

/* On the ring's completion thread: the buffer's CRC32C, computed here rather than by the
 * serialising child as it writes (under TCG the crc32 instruction is emulated, and a
 * snapshot spent a third of its time on it), then chained into the slot's CRC in buffer
 * order: a buffer stays busy until every buffer before it is chained, so its CRC is never
 * overwritten and Finish, which waits until none is busy, finds the slot's whole CRC. */
static void slotBufDone(slimioReq *req, int res) {
    slimioSlotBuf *b = req->ctx;
    slimioSlotWriter *w = b->w;
    uint32_t crc = res ? 0 : slimioCrc32c(0, b->data, b->len);
    pthread_mutex_lock(&w->lock);
    b->crc = crc;
    b->done = 1;
    if (res && !w->error) w->error = res;
    for (;;) {
        slimioSlotBuf *n = &w->bufs[w->chained % SLIMIO_SNAP_BUFS];
        if (!n->busy || !n->done || n->seq != w->chained) break;
        w->crc = slimioCrc32cCombine(w->crc, n->crc, n->len);
        n->done = 0;
        n->busy = 0;
        w->chained++;
    }
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

int slimioSlotWriterOpen(slimioSlotWriter *w, slimioBackend *be, uint64_t slot_lba,
                         uint64_t slot_lbas, slimioDataKind kind, unsigned ring_entries,
                         int sqpoll, size_t buf_bytes, char *err, size_t errlen) {
    memset(w, 0, sizeof(*w));
    w->be = be;
    w->kind = kind;
    w->slot_lba = slot_lba;
    w->slot_lbas = slot_lbas;
    w->next_lba = slot_lba;
    uint32_t lba = be->dev.lba_size;
    if (buf_bytes < lba) buf_bytes = lba;
    w->buf_bytes = buf_bytes / lba * lba;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    for (int i = 0; i < SLIMIO_SNAP_BUFS; i++) {
        w->bufs[i].w = w;
        w->bufs[i].req.ctx = &w->bufs[i];
        w->bufs[i].req.done = slotBufDone;
        w->bufs[i].data = alignedAlloc(lba, w->buf_bytes);
        if (!w->bufs[i].data) {
            snprintf(err, errlen, "cannot allocate %zu-byte snapshot buffers", w->buf_bytes);
            slimioSlotWriterAbort(w);
            return -1;
        }
    }
    if (slimioRingInit(&w->ring, be, ring_entries, sqpoll, err, errlen) < 0) {
        slimioSlotWriterAbort(w);
        return -1;
    }
    slimioFailpoint(SLIMIO_FP_SNAPSHOT_BEGIN);
    return 0;
}

/* Submit the current buffer (fill bytes, padded to whole LBAs) and move to the next one,
 * waiting until it is free. */
static int submitCurrent(slimioSlotWriter *w) {
    uint32_t lba = w->be->dev.lba_size;
    slimioSlotBuf *b = &w->bufs[w->cur];
    uint32_t nlb = (uint32_t)((w->fill + lba - 1) / lba);
    if (w->next_lba + nlb > w->slot_lba + w->slot_lbas) return -ENOSPC;
    memset(b->data + w->fill, 0, (size_t)nlb * lba - w->fill);
    pthread_mutex_lock(&w->lock);
    b->busy = 1;
    b->done = 0;
    b->seq = w->submitted;
    b->len = w->fill;
    pthread_mutex_unlock(&w->lock);
    int rc = slimioRingWrite(&w->ring, w->next_lba, nlb, b->data, w->kind, 0, &b->req);
    if (rc) {
        b->busy = 0;
        return rc;
    }
    w->submitted++;
    w->next_lba += nlb;
    if (++w->chunks == 1) slimioFailpoint(SLIMIO_FP_SNAPSHOT_MID);
    w->cur = (w->cur + 1) % SLIMIO_SNAP_BUFS;
    w->fill = 0;
    uint64_t t0 = slimioNowUs();
    pthread_mutex_lock(&w->lock);
    while (w->bufs[w->cur].busy && !w->error) pthread_cond_wait(&w->cond, &w->lock);
    rc = w->error;
    pthread_mutex_unlock(&w->lock);
    w->wait_us += slimioNowUs() - t0;
    return rc;
}

int slimioSlotWriterWrite(slimioSlotWriter *w, const void *buf, size_t len) {
    const unsigned char *p = buf;
    if (w->error) return w->error;
    uint64_t cap = w->slot_lbas * w->be->dev.lba_size;
    if (w->length + len > cap) return w->error = -ENOSPC;
    w->length += len;
    while (len) {
        size_t n = w->buf_bytes - w->fill;
        if (n > len) n = len;
        memcpy(w->bufs[w->cur].data + w->fill, p, n);
        w->fill += n;
        p += n;
        len -= n;
        if (w->fill == w->buf_bytes) {
            int rc = submitCurrent(w);
            if (rc) return w->error = rc;
        }
    }
    return 0;
}

static void waitIdle(slimioSlotWriter *w) {
    pthread_mutex_lock(&w->lock);
    for (int i = 0; i < SLIMIO_SNAP_BUFS; i++)
        while (w->bufs[i].busy) pthread_cond_wait(&w->cond, &w->lock);
    pthread_mutex_unlock(&w->lock);
}

int slimioSlotWriterFinish(slimioSlotWriter *w, uint64_t *length, uint32_t *crc) {
    int rc = w->error;
    if (!rc && w->fill) rc = submitCurrent(w);
    uint64_t t0 = slimioNowUs();
    waitIdle(w);
    if (!rc) rc = w->error;
    if (!rc) {
        slimioFailpoint(SLIMIO_FP_SNAPSHOT_AFTER_WRITE);
        slimioWaiter fw;
        slimioWaiterInit(&fw);
        rc = slimioRingFlush(&w->ring, &fw.req);
        if (!rc) rc = slimioWaiterWait(&fw);
        slimioWaiterDestroy(&fw);
    }
    w->wait_us += slimioNowUs() - t0;
    if (!rc) slimioFailpoint(SLIMIO_FP_SNAPSHOT_AFTER_FLUSH);
    *length = w->length;
    *crc = w->crc;
    slimioSlotWriterAbort(w);
    return rc;
}

void slimioSlotWriterAbort(slimioSlotWriter *w) {
    if (w->ring.started) {
        waitIdle(w);
        slimioRingShutdown(&w->ring);
    }
    for (int i = 0; i < SLIMIO_SNAP_BUFS; i++) {
        free(w->bufs[i].data);
        w->bufs[i].data = NULL;
    }
}

/* ------------------------------------------------------------------------------------
 * Read-ahead reader over a circular LBA region: PF_BUFS chunks, all but the one being
 * parsed in flight (one chunk ahead was not enough once the checks moved off the main
 * thread: the main thread then waited for the device).
 * Each chunk is checked on the ring's completion thread as it arrives, before the reader
 * takes it, so that the checking runs beside the main thread's parsing instead of in it:
 * a slot chunk's CRC32C (chained in order by slimioCrc32cCombine), or every WAL block's
 * header and CRC32C (slimioWalBlockCheck, with the sequence number the block must carry).
 * ---------------------------------------------------------------------------------- */

enum { PF_CHECK_NONE, PF_CHECK_SLOT, PF_CHECK_WAL };

/* What the completion thread checks in each chunk. */
typedef struct pfCheck {
    int kind;                               /* PF_CHECK_* */
    uint64_t length;                        /* slot: its bytes */
    uint64_t gen, start_seq, format_id;     /* WAL: what each block must carry */
} pfCheck;
#define PF_BUFS 4

typedef struct prefetch prefetch;

typedef struct pfBuf {
    slimioWaiter w;
    prefetch *pf;
    unsigned char *data;
    uint32_t nlb;
    int pending;
    uint64_t first;             /* its first LBA's index in the stream */
    /* Set on the completion thread before the waiter wakes. */
    uint32_t crc;               /* slot: CRC32C of its bytes inside the slot's length */
    uint64_t bytes;             /* slot: how many of its bytes that is */
    uint32_t valid;             /* WAL: leading blocks that passed the check */
    int stop;                   /* WAL: the check's status for the block after them */
    uint32_t *used;             /* WAL: payload bytes of each valid block */
} pfBuf;

struct prefetch {
    slimioBackend *be;
    slimioRing ring;
    uint64_t region_start, region_lbas;     /* reads wrap inside this region */
    uint64_t start;                         /* first LBA to read */
    uint64_t total;                         /* LBAs to read at most */
    uint32_t chunk_lbas;
    uint64_t issued;                        /* LBAs requested so far */
    pfBuf buf[PF_BUFS];
    int next;                               /* buffer the next chunk comes from */
    int issue_at;                           /* buffer the next read goes into */
    uint64_t device_bytes;
    uint64_t wait_us;                       /* time prefetchNext blocked */
    pfCheck check;
};

/* On the completion thread: check the chunk, then wake the reader. */
static void prefetchDone(slimioReq *req, int res) {
    pfBuf *b = req->ctx;
    prefetch *pf = b->pf;
    uint32_t lba = pf->be->dev.lba_size;
    const pfCheck *c = &pf->check;
    if (res == 0 && c->kind == PF_CHECK_SLOT) {
        uint64_t off = b->first * lba, n = (uint64_t)b->nlb * lba;
        if (off >= c->length) n = 0;
        else if (n > c->length - off) n = c->length - off;
        b->bytes = n;
        b->crc = slimioCrc32c(0, b->data, n);
    } else if (res == 0 && c->kind == PF_CHECK_WAL) {
        b->valid = 0;
        b->stop = SLIMIO_OK;
        for (uint32_t j = 0; j < b->nlb; j++) {
            int st = slimioWalBlockCheck(b->data + (size_t)j * lba, lba, c->gen,
                                         c->start_seq + b->first + j, c->format_id,
                                         &b->used[j]);
            if (st != SLIMIO_OK) { b->stop = st; break; }
            b->valid++;
        }
    }
    pthread_mutex_lock(&b->w.lock);
    b->w.done = 1;
    pthread_cond_signal(&b->w.cond);
    pthread_mutex_unlock(&b->w.lock);
}

static void prefetchIssue(prefetch *pf, int i) {
    pfBuf *b = &pf->buf[i];
    b->nlb = 0;
    b->pending = 0;
    if (pf->issued >= pf->total) return;
    uint64_t lba = pf->region_start + (pf->start - pf->region_start + pf->issued) % pf->region_lbas;
    uint64_t n = pf->chunk_lbas;
    if (n > pf->total - pf->issued) n = pf->total - pf->issued;
    if (n > pf->region_start + pf->region_lbas - lba) n = pf->region_start + pf->region_lbas - lba;
    b->first = pf->issued;
    b->nlb = (uint32_t)n;           /* before the read: the completion reads it */
    if (slimioRingRead(&pf->ring, lba, (uint32_t)n, b->data, &b->w.req) == 0) {
        b->pending = 1;
        pf->issued += n;
    } else {
        b->nlb = 0;
    }
}

static int prefetchInit(prefetch *pf, slimioBackend *be, uint64_t region_start,
                        uint64_t region_lbas, uint64_t start, uint64_t total, size_t chunk,
                        pfCheck check) {
    memset(pf, 0, sizeof(*pf));
    pf->be = be;
    pf->region_start = region_start;
    pf->region_lbas = region_lbas;
    pf->start = start;
    pf->total = total;
    pf->check = check;
    pf->chunk_lbas = (uint32_t)(chunk / be->dev.lba_size);
    if (pf->chunk_lbas == 0) pf->chunk_lbas = 1;
    char err[256];
    if (slimioRingInit(&pf->ring, be, 32, 0, err, sizeof(err)) < 0) { errno = EIO; return -1; }
    for (int i = 0; i < PF_BUFS; i++) {
        pfBuf *b = &pf->buf[i];
        slimioWaiterInit(&b->w);
        b->w.req.done = prefetchDone;
        b->w.req.ctx = b;
        b->pf = pf;
        b->data = alignedAlloc(be->dev.lba_size, (size_t)pf->chunk_lbas * be->dev.lba_size);
        if (!b->data) { errno = ENOMEM; return -1; }
        if (check.kind == PF_CHECK_WAL) {
            b->used = malloc(sizeof(uint32_t) * pf->chunk_lbas);
            if (!b->used) { errno = ENOMEM; return -1; }
        }
    }
    for (int i = 0; i < PF_BUFS; i++) prefetchIssue(pf, i);
    return 0;
}

/* The next chunk (NULL at the end), checked; the chunk returned before it is reused for
 * read-ahead, so only the latest chunk is valid. Negative errno in *rc on error. */
static pfBuf *prefetchNext(prefetch *pf, int *rc) {
    int i = pf->next;
    *rc = 0;
    /* The buffer returned last time is consumed now: recycle it for read-ahead. Buffers are
     * issued and taken in the same circular order, so the chunks come in LBA order. */
    pfBuf *prev = &pf->buf[(i + PF_BUFS - 1) % PF_BUFS];
    if (!prev->pending) prev->nlb = 0;
    while (pf->issued < pf->total && !pf->buf[pf->issue_at].pending &&
           pf->buf[pf->issue_at].nlb == 0) {
        prefetchIssue(pf, pf->issue_at);
        if (!pf->buf[pf->issue_at].pending) break;     /* not queued: its chunk fails */
        pf->issue_at = (pf->issue_at + 1) % PF_BUFS;
    }
    pfBuf *b = &pf->buf[i];
    if (!b->pending) return NULL;
    uint64_t t0 = slimioNowUs();
    *rc = slimioWaiterWait(&b->w);
    pf->wait_us += slimioNowUs() - t0;
    b->pending = 0;
    if (*rc) return NULL;
    pf->device_bytes += (uint64_t)b->nlb * pf->be->dev.lba_size;
    pf->next = (i + 1) % PF_BUFS;
    return b;
}

static void prefetchFree(prefetch *pf) {
    if (pf->ring.started) slimioRingShutdown(&pf->ring);
    for (int i = 0; i < PF_BUFS; i++) {
        free(pf->buf[i].data);
        free(pf->buf[i].used);
        pf->buf[i].data = NULL;
        pf->buf[i].used = NULL;
        slimioWaiterDestroy(&pf->buf[i].w);
    }
}

/* ------------------------------------------------------------------------------------
 * Streams
 * ---------------------------------------------------------------------------------- */

typedef struct stream {
    slimioBackend *be;
    int is_wal;
    prefetch pf;
    size_t readahead;
    /* Slot streams. */
    uint64_t slot_lba, length;
    uint32_t want_crc, crc;
    /* WAL streams. */
    slimioMeta meta;
    slimioWalGen gen;
    int ended;
    /* Current chunk and cursor. */
    pfBuf *chunk;
    uint64_t chunk_index;       /* number of chunks taken so far */
    const unsigned char *cur;   /* undelivered bytes */
    size_t cur_len;
    uint32_t chunk_block;       /* WAL: next block within the chunk */
    uint64_t pos;               /* logical bytes delivered */
    slimioStreamStats *stats, own_stats;
} stream;

static int streamStart(stream *s) {
    uint32_t lba = s->be->dev.lba_size;
    int rc;
    if (s->is_wal)
        rc = prefetchInit(&s->pf, s->be, s->meta.wal_start, s->meta.wal_lbas, s->gen.start_lba,
                          s->meta.wal_lbas, s->readahead,
                          (pfCheck){ .kind = PF_CHECK_WAL, .gen = s->gen.gen,
                                     .start_seq = s->gen.start_seq,
                                     .format_id = s->meta.format_id });
    else
        rc = prefetchInit(&s->pf, s->be, s->slot_lba, (s->length + lba - 1) / lba + 1,
                          s->slot_lba, (s->length + lba - 1) / lba, s->readahead,
                          (pfCheck){ .kind = PF_CHECK_SLOT, .length = s->length });
    s->chunk = NULL;
    s->chunk_index = 0;
    s->cur = NULL;
    s->cur_len = 0;
    s->chunk_block = 0;
    s->ended = 0;
    s->pos = 0;
    s->crc = 0;
    memset(&s->stats->end, 0, sizeof(s->stats->end));
    s->stats->end.next_lba = s->gen.start_lba;
    s->stats->end.next_seq = s->gen.start_seq;
    return rc;
}

/* Slot: make cur/cur_len the next bytes, and chain the chunk's CRC (computed when it
 * arrived) onto the slot's. 0 at the end, 1 with data, -1 on error. */
static int slotFill(stream *s) {
    if (s->pos >= s->length) return 0;
    int rc;
    pfBuf *b = prefetchNext(&s->pf, &rc);
    if (rc) { errno = -rc; return -1; }
    if (!b || b->bytes == 0) { errno = EIO; return -1; }
    s->chunk_index++;
    s->chunk = b;
    s->crc = slimioCrc32cCombine(s->crc, b->crc, b->bytes);
    s->cur = b->data;
    s->cur_len = b->bytes;
    return 1;
}

/* WAL: make cur/cur_len the next valid block's payload. */
static int walFill(stream *s) {
    uint32_t lba = s->be->dev.lba_size;
    slimioWalEnd *end = &s->stats->end;
    while (!s->ended) {
        if (!s->chunk || s->chunk_block >= s->chunk->nlb) {
            int rc;
            pfBuf *b = prefetchNext(&s->pf, &rc);
            if (rc) { errno = -rc; return -1; }
            if (!b) { s->ended = 1; end->stop = SLIMIO_OK; break; }
            s->chunk = b;
            s->chunk_block = 0;
            s->chunk_index++;
        }
        /* Checked on arrival: the leading valid blocks, then the status of the next. */
        pfBuf *b = s->chunk;
        if (s->chunk_block >= b->valid) { s->ended = 1; end->stop = b->stop; break; }
        const unsigned char *block = b->data + (size_t)s->chunk_block * lba;
        uint32_t used = b->used[s->chunk_block];
        s->chunk_block++;
        if (slimioWalEndAdvance(&s->meta, &s->gen, lba, used, end)) s->ended = 1;
        s->cur = block + SLIMIO_WAL_HDR_SIZE;
        s->cur_len = used;
        return 1;
    }
    return 0;
}

static ssize_t streamRead(void *cookie, char *buf, size_t size) {
    stream *s = cookie;
    size_t done = 0;
    while (done < size) {
        if (s->cur_len == 0) {
            int r = s->is_wal ? walFill(s) : slotFill(s);
            if (r < 0) return done ? (ssize_t)done : -1;
            if (r == 0) break;
            continue;
        }
        size_t n = s->cur_len < size - done ? s->cur_len : size - done;
        memcpy(buf + done, s->cur, n);
        s->cur += n;
        s->cur_len -= n;
        s->pos += n;
        done += n;
    }
    s->stats->bytes = s->pos;
    s->stats->device_bytes = s->pf.device_bytes;
    s->stats->wait_us = s->pf.wait_us;
    if (!s->is_wal && s->pos == s->length && done < size && s->crc != s->want_crc) {
        /* At the end of a slot: the content must be what was made durable. */
        errno = EIO;
        return done ? (ssize_t)done : -1;
    }
    return (ssize_t)done;
}

static int streamSeek(void *cookie, off64_t *off, int whence) {
    stream *s = cookie;
    if (whence == SEEK_CUR && *off == 0) { *off = (off64_t)s->pos; return 0; }
    if (whence == SEEK_SET && *off == 0) {
        if (s->pos == 0) return 0;
        if (!s->is_wal && s->chunk_index == 1 && s->chunk) {
            /* Still in the first chunk: rewind within it (its CRC is the slot's so far). */
            s->cur = s->chunk->data;
            s->cur_len = s->chunk->bytes;
            s->pos = 0;
            s->crc = s->chunk->crc;
            return 0;
        }
        prefetchFree(&s->pf);
        if (streamStart(s) < 0) return -1;
        return 0;
    }
    errno = EINVAL;
    return -1;
}

static int streamClose(void *cookie) {
    stream *s = cookie;
    s->stats->bytes = s->pos;
    s->stats->device_bytes = s->pf.device_bytes;
    s->stats->wait_us = s->pf.wait_us;
    prefetchFree(&s->pf);
    free(s);
    return 0;
}

static FILE *openStream(stream *s, slimioStreamStats *stats) {
    s->stats = stats ? stats : &s->own_stats;
    memset(s->stats, 0, sizeof(*s->stats));
    if (streamStart(s) < 0) {
        int e = errno;
        prefetchFree(&s->pf);
        free(s);
        errno = e;
        return NULL;
    }
    cookie_io_functions_t fns = { .read = streamRead, .write = NULL, .seek = streamSeek,
                                  .close = streamClose };
    FILE *fp = fopencookie(s, "r", fns);
    if (!fp) {
        int e = errno;
        prefetchFree(&s->pf);
        free(s);
        errno = e;
        return NULL;
    }
    setvbuf(fp, NULL, _IOFBF, 1 << 16);
    return fp;
}

FILE *slimioOpenSlotStream(slimioBackend *be, uint64_t slot_lba, uint64_t length,
                           uint32_t crc, size_t readahead_bytes, slimioStreamStats *stats) {
    stream *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->be = be;
    s->slot_lba = slot_lba;
    s->length = length;
    s->want_crc = crc;
    s->readahead = readahead_bytes;
    return openStream(s, stats);
}

FILE *slimioOpenWalStream(slimioBackend *be, const slimioMeta *m, const slimioWalGen *g,
                          size_t readahead_bytes, slimioStreamStats *stats) {
    stream *s = calloc(1, sizeof(*s));
    if (!s) return NULL;
    s->be = be;
    s->is_wal = 1;
    s->meta = *m;
    s->gen = *g;
    s->readahead = readahead_bytes;
    return openStream(s, stats);
}

int slimioWalTruncate(slimioBackend *be, const slimioMeta *m, const slimioWalGen *g,
                      uint64_t bytes) {
    uint32_t lba = be->dev.lba_size, payload = slimioWalPayload(lba);
    uint64_t b = bytes / payload;
    uint32_t off = (uint32_t)(bytes % payload);
    uint64_t at = slimioWalLba(m, g->start_lba, b);
    unsigned char *block = alignedAlloc(lba, lba);
    if (!block) return -ENOMEM;
    int rc = 0;
    if (off) {
        uint32_t used;
        rc = be->io.read(be->io.ctx, at, 1, block);
        if (!rc && slimioWalBlockCheck(block, lba, g->gen, g->start_seq + b, m->format_id,
                                       &used) != SLIMIO_OK)
            rc = -EIO;
        if (!rc && used < off) rc = -EINVAL;
        if (!rc) slimioWalBlockSeal(block, lba, g->gen, g->start_seq + b, m->format_id, off);
    } else {
        memset(block, 0, lba);
    }
    if (!rc) rc = be->io.write(be->io.ctx, at, 1, block, SLIMIO_KIND_WAL);
    if (!rc) rc = be->io.flush(be->io.ctx);
    free(block);
    return rc;
}
