/* An io_uring ring with its own completion thread, on one backend.
 *
 * Any thread may queue requests (serialized by a submission lock); the completion thread
 * reaps completions and runs each request's callback once all of its commands are done.
 * Requests larger than the backend's max_io_lbas are split into several commands.
 *
 * The main process owns one ring for the WAL; a fork child never touches it (it calls
 * slimioRingAbandon) and creates its own, optionally with SQPOLL, for its snapshot. */
#ifndef SLIMIO_RING_H
#define SLIMIO_RING_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "slimio_backend.h"

/* Monotonic microseconds: what the WAL, the slot writer and the read streams time their
 * waits on a ring with. */
static inline uint64_t slimioNowUs(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

typedef struct slimioReq slimioReq;
/* Runs on the completion thread; res is 0 or the first negative errno of its commands. */
typedef void (*slimioReqDone)(slimioReq *req, int res);

struct slimioReq {
    slimioReqDone done;
    void *ctx;
    _Atomic uint32_t pending;   /* commands not completed yet (set by the ring) */
    _Atomic int res;
    uint64_t bytes;             /* bytes the request transfers (0 for a flush) */
    _Atomic uint64_t transferred; /* as reported by the completions */
};

typedef struct slimioRingStats {
    _Atomic uint64_t requests, commands, completions, submits, errors;
    _Atomic uint64_t inflight, inflight_max;
} slimioRingStats;

typedef struct slimioRing {
    struct io_uring ring;
    slimioBackend *be;
    pthread_mutex_t sq_lock;
    pthread_t thread;
    int started;
    int sqpoll;
    unsigned entries;
    slimioRingStats stats;
} slimioRing;

/* Create the ring (entries submission slots; sqpoll: a kernel thread polls the submission
 * queue, so submitting costs no system call while it is awake) and start its completion
 * thread. Returns 0, or -1 with a message in err. */
int slimioRingInit(slimioRing *r, slimioBackend *be, unsigned entries, int sqpoll,
                   char *err, size_t errlen);

/* Queue a write/read of nlb LBAs at lba, or a flush, and submit it. buf must stay valid and
 * unmodified until req->done runs. Returns 0 or a negative errno (nothing was queued). */
int slimioRingWrite(slimioRing *r, uint64_t lba, uint32_t nlb, const void *buf,
                    slimioDataKind kind, int fua, slimioReq *req);
int slimioRingRead(slimioRing *r, uint64_t lba, uint32_t nlb, void *buf, slimioReq *req);
int slimioRingFlush(slimioRing *r, slimioReq *req);

/* Wait for every queued request, stop the completion thread, and tear the ring down. */
void slimioRingShutdown(slimioRing *r);

/* In a fork child: forget the parent's ring without using it (its thread does not exist
 * here, and its submission queue belongs to the parent). */
void slimioRingAbandon(slimioRing *r);

/* A request that a thread can wait for. */
typedef struct slimioWaiter {
    slimioReq req;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
} slimioWaiter;

void slimioWaiterInit(slimioWaiter *w);
void slimioWaiterDestroy(slimioWaiter *w);
/* Block until w's request completed; returns its result. */
int slimioWaiterWait(slimioWaiter *w);

#endif
