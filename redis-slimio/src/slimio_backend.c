/* Backends: see slimio_backend.h. The file backend lives here; nvme comes with issue 5. */
#define _GNU_SOURCE
#include "slimio_backend.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void fileWrite(const slimioBackend *be, struct io_uring_sqe *sqe, uint64_t lba,
                      uint32_t nlb, const void *buf, slimioDataKind kind, int fua) {
    (void)kind;     /* no placement on a file: the kind is only counted */
    io_uring_prep_write(sqe, be->dev.fd, buf, nlb * be->dev.lba_size, lba * be->dev.lba_size);
    if (fua) sqe->rw_flags = RWF_DSYNC;
}

static void fileRead(const slimioBackend *be, struct io_uring_sqe *sqe, uint64_t lba,
                     uint32_t nlb, void *buf) {
    io_uring_prep_read(sqe, be->dev.fd, buf, nlb * be->dev.lba_size, lba * be->dev.lba_size);
}

static void fileFlush(const slimioBackend *be, struct io_uring_sqe *sqe) {
    io_uring_prep_fsync(sqe, be->dev.fd, IORING_FSYNC_DATASYNC);
}

static int64_t fileComplete(const slimioBackend *be, const struct io_uring_cqe *cqe) {
    (void)be;
    return cqe->res;
}

static const slimioBackendOps fileOps = {
    .name = "file",
    .ring_flags = 0,
    .prep_write = fileWrite,
    .prep_read = fileRead,
    .prep_flush = fileFlush,
    .complete = fileComplete,
};

/* Synchronous I/O through the device, counting written bytes per kind. */
static int countedRead(void *ctx, uint64_t lba, uint32_t nlb, void *buf) {
    slimioBackend *be = ctx;
    int rc = be->dev.io.read(be->dev.io.ctx, lba, nlb, buf);
    if (!rc) atomic_fetch_add(&be->bytes_read, (uint64_t)nlb * be->dev.lba_size);
    return rc;
}

static int countedWrite(void *ctx, uint64_t lba, uint32_t nlb, const void *buf,
                        slimioDataKind kind) {
    slimioBackend *be = ctx;
    int rc = be->dev.io.write(be->dev.io.ctx, lba, nlb, buf, kind);
    if (!rc) atomic_fetch_add(&be->bytes_written[kind], (uint64_t)nlb * be->dev.lba_size);
    return rc;
}

static int countedFlush(void *ctx) {
    slimioBackend *be = ctx;
    return be->dev.io.flush(be->dev.io.ctx);
}

const char *slimioBackendTypeName(slimioBackendType type) {
    return type == SLIMIO_BACKEND_NVME ? "nvme" : "file";
}

int slimioBackendOpen(slimioBackend *be, slimioBackendType type, const char *path,
                      uint32_t lba_size, char *err, size_t errlen) {
    memset(be, 0, sizeof(*be));
    be->dev.fd = -1;
    if (type == SLIMIO_BACKEND_NVME) {
        snprintf(err, errlen, "slimio-backend nvme is not available in this build (NVMe "
                 "passthru with FDP comes with the VM testbed); use slimio-backend file");
        return -1;
    }
    if (slimioDevOpen(&be->dev, path, lba_size, err, errlen) < 0) return -1;
    be->ops = &fileOps;
    /* 1 MiB per command: large enough for sequential bandwidth, small enough to keep
     * several in flight. */
    be->max_io_lbas = (1024 * 1024) / be->dev.lba_size;
    for (int k = 0; k < SLIMIO_KINDS; k++) be->placement[k] = SLIMIO_NO_PLACEMENT;
    be->io = be->dev.io;
    be->io.ctx = be;
    be->io.read = countedRead;
    be->io.write = countedWrite;
    be->io.flush = countedFlush;
    return 0;
}

void slimioBackendClose(slimioBackend *be) {
    if (be->dev.fd >= 0) slimioDevClose(&be->dev);
    be->ops = NULL;
}
