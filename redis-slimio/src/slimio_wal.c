/* SlimIO's WAL writer: see slimio_wal.h for the design. */
#define _GNU_SOURCE
#include "slimio_wal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "slimio_failpoint.h"

static uint64_t blocksOf(const slimioWal *w, uint64_t bytes) {
    return (bytes + w->payload - 1) / w->payload;
}

static unsigned char *stageBlock(const slimioWal *w, uint64_t b) {
    return w->stage + (b % w->stage_blocks) * w->lba_size;
}

static uint64_t genLba(const slimioWal *w, uint64_t b) {
    return slimioWalLba(w->meta, w->gen.start_lba, b);
}

static void submitFlush(slimioWal *w);

/* Lock held (completion thread): the durable level advanced, or an error was recorded. */
static void notifyLocked(slimioWal *w) {
    if (w->notify_fd < 0 || !atomic_load(&w->notify_wanted)) return;
    uint64_t one = 1;
    ssize_t rc;
    do rc = write(w->notify_fd, &one, sizeof(one));
    while (rc < 0 && errno == EINTR);
    /* EAGAIN: the counter is saturated, so a wake-up is pending anyway. */
}
static void markAppend(slimioWal *w, uint64_t now);
static void submitBatch(slimioWal *w);

/* Lock held: whether what is appended but not submitted goes now (slimio_wal.h:
 * SLIMIO_WAL_MIN_BATCH). */
static int batchDue(slimioWal *w) {
    uint64_t pending = w->appended - w->submitted;
    if (!pending) return 0;
    if (w->fua || w->flush_wanted || pending >= w->min_batch) return 1;
    return slimioNowUs() - w->pending_since_us >= SLIMIO_WAL_MAX_DELAY_US;
}

/* Lock held: whether a batch may be submitted now. With none in flight, always; beside
 * one, only under Always-Log, when the batch in flight is durable too and ended on a block
 * boundary (so the new one shares no block with it), and while a slot is free. */
static int maySubmit(slimioWal *w) {
    if (w->bn == 0) return 1;
    if (w->bn >= SLIMIO_WAL_INFLIGHT || !w->fua) return 0;
    const slimioWalBatch *last = &w->batches[(w->bhead + w->bn - 1) % SLIMIO_WAL_INFLIGHT];
    return last->fua && last->end % w->payload == 0;
}

/* Copy n bytes to logical offset off of the staging buffer (room already checked). */
static void stagePut(slimioWal *w, uint64_t off, const unsigned char *p, size_t n) {
    size_t done = 0;
    while (done < n) {
        uint64_t b = (off + done) / w->payload;
        uint32_t o = (uint32_t)((off + done) % w->payload);
        size_t c = w->payload - o;
        if (c > n - done) c = n - done;
        memcpy(stageBlock(w, b) + SLIMIO_WAL_HDR_SIZE + o, p + done, c);
        done += c;
    }
}

/* Lock held, Always-Log, `appended` at a command boundary (no append waits for room):
 * fill the partial tail block with AOF annotation lines, so the batch ends on a block
 * boundary (slimio_wal.h). A tail one byte short of full takes the next block too (no
 * line is shorter than "#\n"). Nothing is padded when the pad does not fit the region or
 * the staging buffer, or would pass the generation's cap (SLIMIO_WAL_PAD_PER_LOG_DIV):
 * that batch then keeps its partial tail, and the next waits for it. */
static void padToBlock(slimioWal *w) {
    uint32_t r = (uint32_t)(w->appended % w->payload);
    if (!r || w->mid_append) return;
    uint64_t need = w->payload - r;
    if (need == 1) need += w->payload;
    uint64_t limit = w->meta->wal_lbas - 1 - (w->use_reserve ? 0 : w->reserve_blocks);
    if (w->gen_offset + blocksOf(w, w->appended + need) > limit) return;
    if (blocksOf(w, w->appended + need) - w->written / w->payload > w->stage_blocks) return;
    if ((w->gen_pad + need) * SLIMIO_WAL_PAD_PER_LOG_DIV > w->appended - w->gen_pad) {
        w->stat_pad_capped++;
        return;
    }
    unsigned char line[SLIMIO_WAL_PAD_LINE];
    memset(line, ' ', sizeof(line));
    line[0] = '#';
    uint64_t left = need;
    while (left) {
        size_t len = left;
        if (len > SLIMIO_WAL_PAD_LINE) {
            len = SLIMIO_WAL_PAD_LINE;
            if (left - len < 2) len = (size_t)left - 2;
        }
        line[len - 1] = '\n';
        stagePut(w, w->appended, line, len);
        line[len - 1] = ' ';
        w->appended += len;
        left -= len;
    }
    w->stat_pad_bytes += need;
    w->gen_pad += need;
}

/* Lock held: retire the batches at the head of the queue that are done, in submission
 * order: the written level (and, for a durable batch after durable ones, the durable
 * level) moves to each one's end. */
static void retireBatches(slimioWal *w) {
    while (w->bn) {
        slimioWalBatch *b = &w->batches[w->bhead];
        if (b->left) break;
        w->bhead = (w->bhead + 1) % SLIMIO_WAL_INFLIGHT;
        w->bn--;
        if (b->failed || w->error) continue;
        w->written = b->end;
        slimioFailpoint(SLIMIO_FP_WAL_AFTER_WRITE);
        /* A FUA batch makes everything durable only if all before it already was. */
        if (b->fua && w->durable >= b->base && w->written > w->durable) {
            w->durable = w->written;
            w->durable_us = slimioNowUs();  /* after any failpoint delay above */
            slimioFailpoint(SLIMIO_FP_WAL_AFTER_FLUSH);
        }
    }
}

/* Completion of one part of a write batch (completion thread). */
static void batchPartDone(slimioReq *req, int res) {
    slimioWalPart *part = req->ctx;
    slimioWal *w = part->wal;
    slimioWalBatch *b = part->batch;
    pthread_mutex_lock(&w->lock);
    if (res) {
        b->failed = 1;
        if (!w->error) w->error = res;
    }
    if (--b->left == 0) {
        w->stat_batch_device_us += slimioNowUs() - b->submit_us;
        retireBatches(w);
        if (!w->error) {
            if (w->flush_wanted && !w->flush_inflight && !w->bn) submitFlush(w);
            if (maySubmit(w) && batchDue(w)) submitBatch(w);
        }
        notifyLocked(w);
        pthread_cond_broadcast(&w->cond);
    }
    pthread_mutex_unlock(&w->lock);
}

static void flushDone(slimioReq *req, int res) {
    slimioWal *w = ((slimioWalPart *)req->ctx)->wal;
    pthread_mutex_lock(&w->lock);
    w->flush_inflight = 0;
    if (res && !w->error) w->error = res;
    if (!res) {
        if (w->flush_target > w->durable) {
            w->durable = w->flush_target;
            w->durable_us = slimioNowUs();
        }
        slimioFailpoint(SLIMIO_FP_WAL_AFTER_FLUSH);
        if (w->flush_wanted && !w->bn && w->written > w->durable) submitFlush(w);
    }
    notifyLocked(w);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Lock held, no flush in flight. */
static void submitFlush(slimioWal *w) {
    w->flush_wanted = 0;
    w->flush_target = w->written;
    w->flush_inflight = 1;
    w->stat_flushes++;
    int rc = slimioRingFlush(&w->ring, &w->flush_part.req);
    if (rc) {
        w->flush_inflight = 0;
        if (!w->error) w->error = rc;
    }
}

/* Lock held, maySubmit: write everything from the block holding `submitted` up to
 * `appended` (under Always-Log padded to a block boundary first). */
static void submitBatch(slimioWal *w) {
    if (w->appended <= w->submitted) return;
    if (w->fua) padToBlock(w);
    uint64_t b0 = w->submitted / w->payload;
    uint64_t full = w->appended / w->payload;
    uint32_t tail = (uint32_t)(w->appended % w->payload);
    const slimioMeta *m = w->meta;
    for (uint64_t b = b0; b < full; b++)
        slimioWalBlockSeal(stageBlock(w, b), w->lba_size, w->gen.gen, w->gen.start_seq + b,
                           m->format_id, w->payload);
    slimioFailpoint(SLIMIO_FP_WAL_APPEND);
    int nparts = 0;
    struct { uint64_t lba; uint32_t nlb; const void *buf; } part[SLIMIO_WAL_BATCH_PARTS];
    /* Full blocks in runs contiguous both in the staging buffer and on the device. */
    for (uint64_t b = b0; b < full;) {
        uint64_t lba = genLba(w, b);
        uint64_t n = full - b;
        uint64_t slot = b % w->stage_blocks;
        if (n > w->stage_blocks - slot) n = w->stage_blocks - slot;
        if (n > m->wal_start + m->wal_lbas - lba) n = m->wal_start + m->wal_lbas - lba;
        part[nparts].lba = lba;
        part[nparts].nlb = (uint32_t)n;
        part[nparts].buf = stageBlock(w, b);
        nparts++;
        b += n;
    }
    if (tail) {
        /* maySubmit: no other batch in flight has a partial tail in the bounce block. */
        memcpy(w->bounce, stageBlock(w, full), w->lba_size);
        slimioWalBlockSeal(w->bounce, w->lba_size, w->gen.gen, w->gen.start_seq + full,
                           m->format_id, tail);
        part[nparts].lba = genLba(w, full);
        part[nparts].nlb = 1;
        part[nparts].buf = w->bounce;
        nparts++;
    }
    slimioWalBatch *bt = &w->batches[(w->bhead + w->bn) % SLIMIO_WAL_INFLIGHT];
    if (w->bn) w->stat_overlapped++;
    w->bn++;
    bt->base = w->submitted;
    bt->end = w->appended;
    bt->fua = w->fua;
    bt->left = nparts;
    bt->failed = 0;
    bt->submit_us = slimioNowUs();
    w->submitted = w->appended;
    w->stat_batches++;
    w->stat_batch_queue_us += bt->submit_us - w->pending_since_us;
    for (int i = 0; i < nparts; i++) {
        int rc = slimioRingWrite(&w->ring, part[i].lba, part[i].nlb, part[i].buf,
                                 SLIMIO_KIND_WAL, bt->fua, &bt->parts[i].req);
        if (rc) {
            /* Not queued: account for it as a failed part. */
            bt->failed = 1;
            if (!w->error) w->error = rc;
            if (--bt->left == 0) retireBatches(w);
        }
    }
}

int slimioWalOpen(slimioWal *w, slimioBackend *be, slimioMeta *meta, unsigned ring_entries,
                  size_t stage_bytes, char *err, size_t errlen) {
    memset(w, 0, sizeof(*w));
    w->notify_fd = -1;
    w->be = be;
    w->meta = meta;
    w->lba_size = be->dev.lba_size;
    w->payload = slimioWalPayload(w->lba_size);
    w->stage_blocks = stage_bytes / w->lba_size;
    if (w->stage_blocks < 16) w->stage_blocks = 16;
    w->stage_bytes = w->stage_blocks * w->lba_size;
    w->stage = mmap(NULL, w->stage_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                    -1, 0);
    if (w->stage == MAP_FAILED) {
        snprintf(err, errlen, "cannot allocate the %zu-byte WAL staging buffer: %s",
                 w->stage_bytes, strerror(errno));
        w->stage = NULL;
        return -1;
    }
    /* The fork child must neither copy nor see the parent's in-flight buffers. */
    madvise(w->stage, w->stage_bytes, MADV_DONTFORK);
    w->bounce = mmap(NULL, w->lba_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (w->bounce == MAP_FAILED) {
        snprintf(err, errlen, "cannot allocate the WAL bounce block: %s", strerror(errno));
        munmap(w->stage, w->stage_bytes);
        w->stage = w->bounce = NULL;
        return -1;
    }
    madvise(w->bounce, w->lba_size, MADV_DONTFORK);
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    for (int k = 0; k < SLIMIO_WAL_INFLIGHT; k++)
        for (int i = 0; i < SLIMIO_WAL_BATCH_PARTS; i++) {
            slimioWalPart *part = &w->batches[k].parts[i];
            part->wal = w;
            part->batch = &w->batches[k];
            part->req.ctx = part;
            part->req.done = batchPartDone;
        }
    w->flush_part.wal = w;
    w->flush_part.req.ctx = &w->flush_part;
    w->flush_part.req.done = flushDone;
    w->reserve_blocks = meta->wal_lbas / SLIMIO_WAL_RESERVE_DIV;
    w->min_batch = SLIMIO_WAL_MIN_BATCH;
    if (w->min_batch > w->stage_bytes / 4) w->min_batch = w->stage_bytes / 4;
    if (slimioRingInit(&w->ring, be, ring_entries, 0, err, errlen) < 0) {
        munmap(w->stage, w->stage_bytes);
        munmap(w->bounce, w->lba_size);
        w->stage = w->bounce = NULL;
        return -1;
    }
    return 0;
}

static uint64_t distance(const slimioMeta *m, uint64_t from, uint64_t to) {
    return (to - m->wal_start + m->wal_lbas - (from - m->wal_start)) % m->wal_lbas;
}

int slimioWalBegin(slimioWal *w, const slimioWalGen *g) {
    slimioMeta next = *w->meta;
    if (!next.gens[0].gen) next.gens[0] = *g;
    if (next.gens[0].gen == g->gen) memset(&next.gens[1], 0, sizeof(next.gens[1]));
    else next.gens[1] = *g;
    int rc = slimioMetaCommit(&w->be->io, &next);
    if (rc) { errno = rc < 0 && rc > -4096 ? -rc : EIO; return -1; }
    *w->meta = next;
    pthread_mutex_lock(&w->lock);
    w->gen = *g;
    w->head_lba = next.gens[0].start_lba;
    w->gen_offset = distance(w->meta, w->head_lba, g->start_lba);
    w->base_total += w->appended;   /* all of it durable: a switch drains and flushes */
    w->appended = w->written = w->durable = w->submitted = 0;
    w->gen_pad = 0;
    w->mark_first = w->mark_n = 0;
    w->stat_gens++;
    pthread_mutex_unlock(&w->lock);
    return 0;
}

ssize_t slimioWalAppend(slimioWal *w, const void *buf, size_t len) {
    const unsigned char *p = buf;
    pthread_mutex_lock(&w->lock);
    if (w->error) {
        pthread_mutex_unlock(&w->lock);
        errno = EIO;
        return -1;
    }
    /* All or nothing: the region must hold the whole append, one block (and, unless this
     * is the drain before a generation switch, the reserve) kept free. */
    uint64_t limit = w->meta->wal_lbas - 1 - (w->use_reserve ? 0 : w->reserve_blocks);
    if (w->gen_offset + blocksOf(w, w->appended + len) > limit) {
        w->stat_full++;
        pthread_mutex_unlock(&w->lock);
        if (w->on_full) w->on_full(w->on_full_ctx);
        errno = ENOSPC;
        return -1;
    }
    uint64_t now = slimioNowUs();
    markAppend(w, now);
    /* Nothing waited to be submitted: the wait of what follows starts now (batchDue). */
    if (w->appended == w->submitted) w->pending_since_us = now;
    size_t left = len;
    w->mid_append = 1;      /* no pad until the whole append is in (padToBlock) */
    while (left) {
        /* Staging room: live blocks span from the one holding `written` to the end. */
        uint64_t first = w->written / w->payload;
        uint64_t room = (w->stage_blocks - (blocksOf(w, w->appended) - first)) * w->payload
                        + (w->appended % w->payload ? w->payload - w->appended % w->payload : 0);
        if (blocksOf(w, w->appended) - first >= w->stage_blocks) room = 0;
        if (room == 0) {
            w->stat_stage_waits++;
            if (maySubmit(w)) submitBatch(w);
            while (w->bn && !w->error) pthread_cond_wait(&w->cond, &w->lock);
            if (w->error) {
                w->mid_append = 0;
                pthread_mutex_unlock(&w->lock);
                errno = EIO;
                return -1;
            }
            continue;
        }
        size_t n = left < room ? left : room;
        stagePut(w, w->appended, p, n);
        w->appended += n;
        p += n;
        left -= n;
    }
    w->mid_append = 0;
    if (maySubmit(w) && batchDue(w)) submitBatch(w);
    w->stat_appends++;
    w->stat_bytes += len;
    pthread_mutex_unlock(&w->lock);
    return (ssize_t)len;
}

/* Lock held: remember that what is appended from now on comes no earlier than now. */
static void markAppend(slimioWal *w, uint64_t now) {
    if (w->mark_n) {
        unsigned last = (w->mark_first + w->mark_n - 1) % SLIMIO_WAL_MARKS;
        if (now - w->marks[last].us < SLIMIO_WAL_MARK_US) return;
        if (w->marks[last].off == w->appended) return;
    }
    if (w->mark_n == SLIMIO_WAL_MARKS) return;   /* coarser: the older mark stays */
    unsigned i = (w->mark_first + w->mark_n++) % SLIMIO_WAL_MARKS;
    w->marks[i].off = w->appended;
    w->marks[i].us = now;
}

/* Lock held: how long ago (at most) the byte at offset level was appended (the last mark
 * at or below it); 0 when every appended byte is below level. With drop, the marks before
 * that one go: call it with drop only for the lowest level still needed (durable). */
static uint64_t lagUs(slimioWal *w, uint64_t level, uint64_t now, int drop) {
    if (level >= w->appended || !w->mark_n) return 0;
    unsigned first = w->mark_first, n = w->mark_n;
    while (n > 1) {
        unsigned next = (first + 1) % SLIMIO_WAL_MARKS;
        if (w->marks[next].off > level) break;
        first = next;
        n--;
    }
    if (drop) {
        w->mark_first = first;
        w->mark_n = n;
    }
    uint64_t t = w->marks[first].us;
    return now > t ? now - t : 0;
}

/* Lock held: wait until everything appended is written and flushed. */
static int syncLocked(slimioWal *w) {
    uint64_t target = w->appended;
    while (!w->error && w->durable < target) {
        if (w->submitted < target && maySubmit(w)) submitBatch(w);
        if (w->written >= target && w->durable < target && !w->flush_inflight && !w->bn)
            submitFlush(w);
        if (w->error) break;
        pthread_cond_wait(&w->cond, &w->lock);
    }
    if (w->error) { errno = EIO; return -1; }
    return 0;
}

int slimioWalSync(slimioWal *w) {
    uint64_t start = slimioNowUs();
    pthread_mutex_lock(&w->lock);
    int rc = syncLocked(w);
    w->stat_syncs++;
    w->stat_sync_wait_us += slimioNowUs() - start;
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int slimioWalBoundLag(slimioWal *w, uint64_t max_unwritten_us, uint64_t max_undurable_us) {
    uint64_t now = slimioNowUs();
    pthread_mutex_lock(&w->lock);
    int rc = 0;
    /* durable <= written: the durable level's call may drop marks, the other may not. */
    if (!w->error && (lagUs(w, w->durable, now, 1) > max_undurable_us ||
                      lagUs(w, w->written, now, 0) > max_unwritten_us)) {
        w->stat_lag_waits++;
        rc = syncLocked(w);
        w->stat_lag_wait_us += slimioNowUs() - now;
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

void slimioWalKick(slimioWal *w) {
    pthread_mutex_lock(&w->lock);
    if (!w->error && maySubmit(w) && batchDue(w)) submitBatch(w);
    pthread_mutex_unlock(&w->lock);
}

void slimioWalFlushAsync(slimioWal *w) {
    pthread_mutex_lock(&w->lock);
    if (!w->error && w->durable < w->appended) {
        w->flush_wanted = 1;
        if (!w->bn && !w->flush_inflight) {
            if (w->submitted < w->appended) submitBatch(w); /* the flush follows it */
            else submitFlush(w);
        }
    }
    pthread_mutex_unlock(&w->lock);
}

uint64_t slimioWalAppendedTotal(slimioWal *w) {
    pthread_mutex_lock(&w->lock);
    uint64_t v = w->base_total + w->appended;
    pthread_mutex_unlock(&w->lock);
    return v;
}

uint64_t slimioWalDurableTotal(slimioWal *w) {
    return slimioWalDurableTotalAt(w, NULL);
}

uint64_t slimioWalDurableTotalAt(slimioWal *w, uint64_t *at_us) {
    pthread_mutex_lock(&w->lock);
    uint64_t v = w->base_total + w->durable;
    if (at_us) *at_us = w->durable_us;
    pthread_mutex_unlock(&w->lock);
    return v;
}

int slimioWalError(slimioWal *w) {
    pthread_mutex_lock(&w->lock);
    int e = w->error;
    pthread_mutex_unlock(&w->lock);
    return e;
}

void slimioWalSetNotify(slimioWal *w, int fd) {
    pthread_mutex_lock(&w->lock);
    w->notify_fd = fd;
    pthread_mutex_unlock(&w->lock);
}

void slimioWalWantNotify(slimioWal *w, int wanted) {
    /* Stored before the caller's next lock of w->lock (slimioWalDurableTotal): a completion
     * that advances the level after that read finds it set under the same lock. */
    atomic_store(&w->notify_wanted, wanted);
}

void slimioWalSetFua(slimioWal *w, int fua) {
    if (w->fua == fua) return;
    pthread_mutex_lock(&w->lock);
    w->fua = fua;
    pthread_mutex_unlock(&w->lock);
}

uint64_t slimioWalTailLba(slimioWal *w) {
    return genLba(w, w->appended / w->payload);
}

uint64_t slimioWalUsedBlocks(slimioWal *w) {
    return w->gen_offset + blocksOf(w, w->appended);
}

int slimioWalNewGeneration(slimioWal *w) {
    pthread_mutex_lock(&w->lock);
    int rc = syncLocked(w);
    slimioWalEnd end;
    memset(&end, 0, sizeof(end));
    end.next_lba = genLba(w, w->appended / w->payload);
    end.tail_used = (uint32_t)(w->appended % w->payload);
    pthread_mutex_unlock(&w->lock);
    if (rc) return -1;
    slimioFailpoint(SLIMIO_FP_WAL_NEW_GEN);
    slimioWalGen next;
    slimioWalSuccessor(w->meta, &w->gen, &end, &next);
    return slimioWalBegin(w, &next);
}

void slimioWalRelease(slimioWal *w, const slimioWalGen *root) {
    pthread_mutex_lock(&w->lock);
    w->head_lba = root->start_lba;
    w->gen_offset = distance(w->meta, w->head_lba, w->gen.start_lba);
    pthread_mutex_unlock(&w->lock);
}

void slimioWalClose(slimioWal *w) {
    if (!w->stage) return;
    pthread_mutex_lock(&w->lock);
    if (!w->error) syncLocked(w);
    pthread_mutex_unlock(&w->lock);
    slimioRingShutdown(&w->ring);
    munmap(w->stage, w->stage_bytes);
    munmap(w->bounce, w->lba_size);
    w->stage = w->bounce = NULL;
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
}

void slimioWalAtForkChild(slimioWal *w) {
    if (!w->stage) return;
    slimioRingAbandon(&w->ring);
    /* The staging buffers are MADV_DONTFORK: not mapped here at all. */
    w->stage = w->bounce = NULL;
}
