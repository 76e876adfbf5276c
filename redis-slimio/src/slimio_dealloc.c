/* Deallocation with a trace-marker record; the contract is in slimio_dealloc.h. */
#define _GNU_SOURCE
#include "slimio_dealloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void slimioDeallocInit(slimioDealloc *d, const slimioBlockIo *io, int enabled, int supported,
                       void (*warn)(void *ctx, const char *msg), void *warn_ctx) {
    memset(d, 0, sizeof(*d));
    d->io = io;
    d->enabled = enabled;
    d->supported = io->deallocate ? supported : 0;
    d->marker_fd = -1;
    d->warn = warn;
    d->warn_ctx = warn_ctx;
}

int slimioDeallocOpenMarker(slimioDealloc *d, const char *path, char *err, size_t errlen) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot open the trace marker %s: %s%s", path, strerror(e),
                 e == ENOENT ? " (mount tracefs, e.g. /sys/kernel/tracing/trace_marker, or "
                 "name an existing file)" : e == EACCES || e == EPERM ? " (writing the trace "
                 "marker needs root)" : "");
        return -1;
    }
    slimioDeallocClose(d);
    d->marker_fd = fd;
    d->marker_path = strdup(path);
    return 0;
}

void slimioDeallocClose(slimioDealloc *d) {
    if (d->marker_fd >= 0) close(d->marker_fd);
    free(d->marker_path);
    d->marker_fd = -1;
    d->marker_path = NULL;
}

const char *slimioDeallocWhyName(slimioDeallocWhy why) {
    switch (why) {
    case SLIMIO_DEALLOC_WAL: return "wal";
    case SLIMIO_DEALLOC_SLOT: return "slot";
    case SLIMIO_DEALLOC_FORMAT: return "format";
    }
    return "?";
}

int slimioDeallocMarkerLine(char *buf, size_t len, uint64_t lba, uint64_t nlb,
                            slimioDeallocWhy why) {
    return snprintf(buf, len, "slimio_dealloc slba=%llu nlb=%llu why=%s\n",
                    (unsigned long long)lba, (unsigned long long)nlb, slimioDeallocWhyName(why));
}

/* Format one problem and hand it to d->warn (if any). */
static void warn(slimioDealloc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warn(slimioDealloc *d, const char *fmt, ...) {
    if (!d->warn) return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    d->warn(d->warn_ctx, msg);
}

/* Write the range's line to the marker, if one is open: one write(2) per line, since
 * trace_marker records each write as one event. A failure is counted, logged once. */
static void writeMarker(slimioDealloc *d, uint64_t lba, uint64_t nlb, slimioDeallocWhy why) {
    if (d->marker_fd < 0) return;
    char line[128];
    int len = slimioDeallocMarkerLine(line, sizeof(line), lba, nlb, why);
    ssize_t n;
    do n = write(d->marker_fd, line, (size_t)len); while (n < 0 && errno == EINTR);
    if (n == len) return;
    d->stats.marker_errors++;
    if (!d->marker_warned) {
        d->marker_warned = 1;
        warn(d, "writing to the trace marker %s failed (%s): deallocations go on, but the "
             "trace misses them (counted in slimio_dealloc_marker_errors; logged once)",
             d->marker_path, n < 0 ? strerror(errno) : "short write");
    }
}

int slimioDeallocRange(slimioDealloc *d, uint64_t lba, uint64_t nlb, slimioDeallocWhy why) {
    if (!d || !d->enabled || nlb == 0) return 0;
    if (d->supported == 0) {
        d->stats.unsupported++;
        return 1;
    }
    writeMarker(d, lba, nlb, why);
    int rc = d->io->deallocate(d->io->ctx, lba, nlb);
    if (rc == -EOPNOTSUPP) {
        d->supported = 0;
        d->stats.unsupported++;
        if (!d->unsupported_warned) {
            d->unsupported_warned = 1;
            warn(d, "the device does not support deallocation: nothing is freed (counted in "
                 "slimio_dealloc_unsupported)");
        }
        return 1;
    }
    if (rc < 0) {
        d->stats.errors++;
        warn(d, "deallocating %llu LBAs at LBA %llu (%s) failed: %s; they stay allocated, "
             "which is harmless", (unsigned long long)nlb, (unsigned long long)lba,
             slimioDeallocWhyName(why), strerror(-rc));
        return rc;
    }
    d->supported = 1;
    d->stats.commands += (uint64_t)rc;
    d->stats.lbas += nlb;
    return 0;
}

int slimioWalFreeRanges(const slimioMeta *m, uint64_t from, uint64_t to, slimioLbaRange out[2]) {
    uint64_t start = m->wal_start, end = m->wal_start + m->wal_lbas;
    if (from < start || from >= end || to < start || to >= end) return -1;
    if (from == to) return 0;
    if (from < to) {
        out[0] = (slimioLbaRange){from, to - from};
        return 1;
    }
    out[0] = (slimioLbaRange){from, end - from};
    if (to == start) return 1;
    out[1] = (slimioLbaRange){start, to - start};
    return 2;
}

int slimioFormatRanges(const slimioMeta *m, slimioLbaRange out[2]) {
    uint64_t slots = (uint64_t)SLIMIO_SLOTS * m->slot_lbas;
    if (m->slot_start == m->wal_start + m->wal_lbas) {
        out[0] = (slimioLbaRange){m->wal_start, m->wal_lbas + slots};
        return 1;
    }
    out[0] = (slimioLbaRange){m->wal_start, m->wal_lbas};
    out[1] = (slimioLbaRange){m->slot_start, slots};
    return 2;
}
