/* Named failpoints for SlimIO's crash-consistency campaign.
 *
 * Every step of SlimIO's persistence protocols calls slimioFailpoint(name). They are
 * compiled in and off by default; a disabled failpoint costs one relaxed atomic load.
 * Enable them with the environment variable
 *
 *     SLIMIO_FAILPOINTS="name[=action][@N][,name...]"
 *
 * read once at start-up (slimioFailpointInitFromEnv), or with slimioFailpointSet().
 * Actions: "crash" (default: the process dies at once with SIGKILL, as kill -9 would),
 * "error" (the call site fails its I/O with EIO), "delay:US" (the call site sleeps US
 * microseconds, 1 to 10^7, then goes on: a deliberately slowed SlimIO, which the nightly
 * regression must catch; "wal.append=delay:200" slows every WAL batch). "@N" triggers on
 * the N-th hit only (1-based; default every hit). Unknown names are refused, so a typo in a campaign cannot
 * silently test nothing. SLIMIO_FAILPOINT_LIST is the complete list, in protocol order. */
#ifndef SLIMIO_FAILPOINT_H
#define SLIMIO_FAILPOINT_H

#include <stddef.h>
#include <stdint.h>

#define SLIMIO_FAILPOINT_LIST(X) \
    X(META_BEFORE_WRITE,      "meta.before-write")      /* new record encoded, not written */ \
    X(META_AFTER_WRITE,       "meta.after-write")       /* record written, not yet flushed */ \
    X(META_AFTER_FLUSH,       "meta.after-flush")       /* record durable */ \
    X(WAL_APPEND,             "wal.append")             /* data in the staging buffer, no write submitted */ \
    X(WAL_AFTER_WRITE,        "wal.after-write")        /* a WAL write completed, not flushed */ \
    X(WAL_AFTER_FLUSH,        "wal.after-flush")        /* WAL flush completed */ \
    X(WAL_NEW_GEN,            "wal.new-gen")            /* old generation drained, new one not committed */ \
    X(SNAPSHOT_BEGIN,         "snapshot.begin")         /* child: Reserve slot opened, nothing written */ \
    X(SNAPSHOT_MID,           "snapshot.mid")           /* child: first chunk written to the Reserve slot */ \
    X(SNAPSHOT_AFTER_WRITE,   "snapshot.after-write")   /* child: all data written, not flushed */ \
    X(SNAPSHOT_AFTER_FLUSH,   "snapshot.after-flush")   /* child: snapshot durable, not reported */ \
    X(PROMOTE_BEFORE_COMMIT,  "promote.before-commit")  /* parent: snapshot reported, metadata not committed */ \
    X(PROMOTE_AFTER_COMMIT,   "promote.after-commit")   /* parent: promotion durable, nothing deallocated */ \
    X(PROMOTE_AFTER_DEALLOC_WAL, "promote.after-dealloc-wal")   /* parent: old WAL deallocated, old slot not */ \
    X(PROMOTE_AFTER_DEALLOC_SLOT, "promote.after-dealloc-slot") /* parent: new Reserve deallocated, WAL not released */

typedef enum {
#define SLIMIO_FP_ENUM(id, name) SLIMIO_FP_##id,
    SLIMIO_FAILPOINT_LIST(SLIMIO_FP_ENUM)
#undef SLIMIO_FP_ENUM
    SLIMIO_FP_COUNT
} slimioFailpointId;

/* Returns 0 to go on, -1 when the call site must fail with EIO. Does not return when the
 * action is "crash". */
int slimioFailpoint(slimioFailpointId id);

/* Parse a spec like the environment variable's. Returns 0, or -1 with a message naming the
 * bad entry in err. An empty spec disables every failpoint. */
int slimioFailpointSet(const char *spec, char *err, size_t errlen);

/* slimioFailpointSet(getenv("SLIMIO_FAILPOINTS")) if it is set. */
int slimioFailpointInitFromEnv(char *err, size_t errlen);

const char *slimioFailpointName(slimioFailpointId id);

/* How often a failpoint was reached since the last slimioFailpointSet (for tests and INFO). */
uint64_t slimioFailpointHits(slimioFailpointId id);

#endif
