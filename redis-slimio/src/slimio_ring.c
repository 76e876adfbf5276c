/* io_uring ring with a completion thread: see slimio_ring.h. */
#define _GNU_SOURCE
#include "slimio_ring.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* user_data of the NOP that tells the completion thread to stop. */
static char stopMarker;

static void statMax(_Atomic uint64_t *max, uint64_t v) {
    uint64_t cur = atomic_load(max);
    while (v > cur && !atomic_compare_exchange_weak(max, &cur, v)) { }
}

static void *completionThread(void *arg) {
    slimioRing *r = arg;
    for (;;) {
        struct io_uring_cqe *cqe;
        int rc = io_uring_wait_cqe(&r->ring, &cqe);
        if (rc == -EINTR) continue;
        if (rc < 0) {
            fprintf(stderr, "slimio: io_uring_wait_cqe failed: %s\n", strerror(-rc));
            return NULL;
        }
        void *ud = io_uring_cqe_get_data(cqe);
        if (ud == &stopMarker) {
            io_uring_cqe_seen(&r->ring, cqe);
            return NULL;
        }
        slimioReq *req = ud;
        int64_t got = r->be->ops->complete(r->be, cqe);
        io_uring_cqe_seen(&r->ring, cqe);
        int res = got < 0 ? (int)got : 0;
        if (got > 0) atomic_fetch_add(&req->transferred, (uint64_t)got);
        atomic_fetch_add(&r->stats.completions, 1);
        atomic_fetch_sub(&r->stats.inflight, 1);
        if (res) {
            int zero = 0;
            atomic_compare_exchange_strong(&req->res, &zero, res);
            atomic_fetch_add(&r->stats.errors, 1);
        }
        if (atomic_fetch_sub(&req->pending, 1) == 1) {
            uint64_t t = atomic_load(&req->transferred);
            if (!atomic_load(&req->res) && t && t != req->bytes)
                atomic_store(&req->res, -EIO);  /* short transfer: past the end */
            req->done(req, atomic_load(&req->res));
        }
    }
}

int slimioRingInit(slimioRing *r, slimioBackend *be, unsigned entries, int sqpoll,
                   char *err, size_t errlen) {
    memset(r, 0, sizeof(*r));
    r->be = be;
    r->entries = entries;
    r->sqpoll = sqpoll;
    struct io_uring_params p;
    memset(&p, 0, sizeof(p));
    p.flags = be->ops->ring_flags;
    if (sqpoll) {
        p.flags |= IORING_SETUP_SQPOLL;
        p.sq_thread_idle = 50;  /* ms before the poller sleeps */
    }
    int rc = io_uring_queue_init_params(entries, &r->ring, &p);
    if (rc < 0) {
        snprintf(err, errlen, "cannot create an io_uring ring of %u entries%s: %s", entries,
                 sqpoll ? " with SQPOLL (set slimio-sqpoll no to go without)" : "",
                 strerror(-rc));
        return -1;
    }
    pthread_mutex_init(&r->sq_lock, NULL);
    if ((rc = pthread_create(&r->thread, NULL, completionThread, r)) != 0) {
        snprintf(err, errlen, "cannot start the io_uring completion thread: %s", strerror(rc));
        io_uring_queue_exit(&r->ring);
        return -1;
    }
    r->started = 1;
    return 0;
}

static struct io_uring_sqe *getSqe(slimioRing *r) {
    struct io_uring_sqe *sqe;
    while (!(sqe = io_uring_get_sqe(&r->ring))) {
        /* Submission queue full: push what is queued and try again. */
        int rc = io_uring_submit(&r->ring);
        if (rc < 0 && rc != -EBUSY && rc != -EAGAIN) return NULL;
        if (rc <= 0) usleep(50);
    }
    return sqe;
}

/* Split [lba, lba+nlb) into commands of at most max_io_lbas and queue them. */
static int queueIo(slimioRing *r, int write, uint64_t lba, uint32_t nlb, void *buf,
                   slimioDataKind kind, int fua, slimioReq *req) {
    uint32_t max = r->be->max_io_lbas ? r->be->max_io_lbas : nlb;
    uint32_t lba_size = r->be->dev.lba_size;
    uint32_t ncmd = nlb ? (nlb + max - 1) / max : 1;
    req->bytes = (uint64_t)nlb * lba_size;
    atomic_store(&req->transferred, 0);
    atomic_store(&req->pending, ncmd);
    atomic_store(&req->res, 0);
    pthread_mutex_lock(&r->sq_lock);
    for (uint32_t i = 0; i < ncmd; i++) {
        struct io_uring_sqe *sqe = getSqe(r);
        if (!sqe) {
            /* Cannot happen with a live ring; fail the commands not queued. */
            pthread_mutex_unlock(&r->sq_lock);
            if (i == 0) return -EIO;
            atomic_store(&req->res, -EIO);
            if (atomic_fetch_sub(&req->pending, ncmd - i) == ncmd - i) req->done(req, -EIO);
            return 0;
        }
        uint32_t n = i + 1 < ncmd ? max : nlb - i * max;
        char *p = (char *)buf + (size_t)i * max * lba_size;
        if (write) r->be->ops->prep_write(r->be, sqe, lba + (uint64_t)i * max, n, p, kind, fua);
        else r->be->ops->prep_read(r->be, sqe, lba + (uint64_t)i * max, n, p);
        io_uring_sqe_set_data(sqe, req);
    }
    atomic_fetch_add(&r->stats.requests, 1);
    atomic_fetch_add(&r->stats.commands, ncmd);
    statMax(&r->stats.inflight_max, atomic_fetch_add(&r->stats.inflight, ncmd) + ncmd);
    int rc = io_uring_submit(&r->ring);
    atomic_fetch_add(&r->stats.submits, 1);
    pthread_mutex_unlock(&r->sq_lock);
    if (rc < 0) {
        fprintf(stderr, "slimio: io_uring_submit failed: %s\n", strerror(-rc));
        return rc;
    }
    if (write) atomic_fetch_add(&r->be->bytes_written[kind], (uint64_t)nlb * lba_size);
    else atomic_fetch_add(&r->be->bytes_read, (uint64_t)nlb * lba_size);
    return 0;
}

int slimioRingWrite(slimioRing *r, uint64_t lba, uint32_t nlb, const void *buf,
                    slimioDataKind kind, int fua, slimioReq *req) {
    return queueIo(r, 1, lba, nlb, (void *)buf, kind, fua, req);
}

int slimioRingRead(slimioRing *r, uint64_t lba, uint32_t nlb, void *buf, slimioReq *req) {
    return queueIo(r, 0, lba, nlb, buf, SLIMIO_KIND_META, 0, req);
}

int slimioRingFlush(slimioRing *r, slimioReq *req) {
    req->bytes = 0;
    atomic_store(&req->transferred, 0);
    atomic_store(&req->pending, 1);
    atomic_store(&req->res, 0);
    pthread_mutex_lock(&r->sq_lock);
    struct io_uring_sqe *sqe = getSqe(r);
    if (!sqe) { pthread_mutex_unlock(&r->sq_lock); return -EIO; }
    r->be->ops->prep_flush(r->be, sqe);
    io_uring_sqe_set_data(sqe, req);
    atomic_fetch_add(&r->stats.requests, 1);
    atomic_fetch_add(&r->stats.commands, 1);
    statMax(&r->stats.inflight_max, atomic_fetch_add(&r->stats.inflight, 1) + 1);
    int rc = io_uring_submit(&r->ring);
    atomic_fetch_add(&r->stats.submits, 1);
    pthread_mutex_unlock(&r->sq_lock);
    return rc < 0 ? rc : 0;
}

void slimioRingShutdown(slimioRing *r) {
    if (!r->started) return;
    pthread_mutex_lock(&r->sq_lock);
    struct io_uring_sqe *sqe = getSqe(r);
    if (sqe) {
        /* Drain: the NOP completes after everything queued before it. */
        io_uring_prep_nop(sqe);
        sqe->flags |= IOSQE_IO_DRAIN;
        io_uring_sqe_set_data(sqe, &stopMarker);
        io_uring_submit(&r->ring);
    }
    pthread_mutex_unlock(&r->sq_lock);
    if (sqe) pthread_join(r->thread, NULL);
    else pthread_cancel(r->thread);
    io_uring_queue_exit(&r->ring);
    pthread_mutex_destroy(&r->sq_lock);
    r->started = 0;
}

void slimioRingAbandon(slimioRing *r) {
    if (!r->started) return;
    /* The parent's completion thread was not copied by fork. Close our copy of the ring
     * descriptor only; the mappings go away with the child. */
    close(r->ring.ring_fd);
    r->started = 0;
}

static void waiterDone(slimioReq *req, int res) {
    slimioWaiter *w = req->ctx;
    (void)res;
    pthread_mutex_lock(&w->lock);
    w->done = 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

void slimioWaiterInit(slimioWaiter *w) {
    memset(w, 0, sizeof(*w));
    w->req.done = waiterDone;
    w->req.ctx = w;
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
}

void slimioWaiterDestroy(slimioWaiter *w) {
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
}

int slimioWaiterWait(slimioWaiter *w) {
    pthread_mutex_lock(&w->lock);
    while (!w->done) pthread_cond_wait(&w->cond, &w->lock);
    w->done = 0;
    pthread_mutex_unlock(&w->lock);
    return atomic_load(&w->req.res);
}
