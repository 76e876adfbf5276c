/* Backends: see slimio_backend.h. */
#define _GNU_SOURCE
#include "slimio_backend.h"

#include <errno.h>
#include <linux/nvme_ioctl.h>
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

/* nvme: one NVMe command in a 128-byte SQE. */
static void nvmePrep(const slimioBackend *be, struct io_uring_sqe *sqe, const slimioNvmeRw *rw,
                     const void *buf, uint32_t len) {
    memset(sqe, 0, 2 * sizeof(*sqe));
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = be->dev.fd;
    sqe->cmd_op = NVME_URING_CMD_IO;
    struct nvme_uring_cmd *cmd = (struct nvme_uring_cmd *)sqe->cmd;
    cmd->opcode = rw->opcode;
    cmd->nsid = be->dev.nvme.nsid;
    cmd->addr = (uint64_t)(uintptr_t)buf;
    cmd->data_len = len;
    cmd->cdw10 = rw->cdw10;
    cmd->cdw11 = rw->cdw11;
    cmd->cdw12 = rw->cdw12;
    cmd->cdw13 = rw->cdw13;
}

static void nvmeWrite(const slimioBackend *be, struct io_uring_sqe *sqe, uint64_t lba,
                      uint32_t nlb, const void *buf, slimioDataKind kind, int fua) {
    /* Without a volatile write cache every completed write is durable: no FUA needed. */
    slimioNvmeRw rw = slimioNvmeEncodeRw(SLIMIO_NVME_OP_WRITE, lba, nlb, be->dev.placement[kind],
                                         fua && be->dev.nvme.vwc);
    nvmePrep(be, sqe, &rw, buf, nlb * be->dev.lba_size);
}

static void nvmeRead(const slimioBackend *be, struct io_uring_sqe *sqe, uint64_t lba,
                     uint32_t nlb, void *buf) {
    slimioNvmeRw rw = slimioNvmeEncodeRw(SLIMIO_NVME_OP_READ, lba, nlb, SLIMIO_NO_PLACEMENT, 0);
    nvmePrep(be, sqe, &rw, buf, nlb * be->dev.lba_size);
}

static void nvmeFlush(const slimioBackend *be, struct io_uring_sqe *sqe) {
    if (!be->dev.nvme.vwc) {
        io_uring_prep_nop(sqe);     /* nothing volatile to flush */
        return;
    }
    slimioNvmeRw rw = {.opcode = SLIMIO_NVME_OP_FLUSH};
    nvmePrep(be, sqe, &rw, NULL, 0);
}

/* res: 0 done, > 0 an NVMe status (the command failed on the device), < 0 an errno. */
static int64_t nvmeComplete(const slimioBackend *be, const struct io_uring_cqe *cqe) {
    (void)be;
    if (cqe->res > 0) {
        fprintf(stderr, "slimio: NVMe command failed with status 0x%x\n", cqe->res);
        return -EIO;
    }
    return cqe->res;
}

static const slimioBackendOps nvmeOps = {
    .name = "nvme",
    .ring_flags = IORING_SETUP_SQE128 | IORING_SETUP_CQE32,
    .prep_write = nvmeWrite,
    .prep_read = nvmeRead,
    .prep_flush = nvmeFlush,
    .complete = nvmeComplete,
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

/* Deallocation is synchronous on every backend (slimio_dealloc.h says why): punch/discard
 * or Dataset Management through the device's own ioctl path, not a ring. */
static int countedDeallocate(void *ctx, uint64_t lba, uint64_t nlb) {
    slimioBackend *be = ctx;
    return be->dev.io.deallocate(be->dev.io.ctx, lba, nlb);
}

const char *slimioBackendTypeName(slimioBackendType type) {
    return type == SLIMIO_BACKEND_NVME ? "nvme" : "file";
}

int slimioBackendOpen(slimioBackend *be, slimioBackendType type, const char *path,
                      uint32_t lba_size, char *err, size_t errlen) {
    memset(be, 0, sizeof(*be));
    be->dev.fd = -1;
    if (path && *path && type == SLIMIO_BACKEND_NVME && !slimioNvmeIsGenericPath(path)) {
        snprintf(err, errlen, "slimio-backend nvme needs an NVMe namespace's generic char "
                 "device such as /dev/ng0n1, not %s: name it (nvme list -v shows them), or "
                 "use slimio-backend file", path);
        return -1;
    }
    if (slimioDevOpen(&be->dev, path, lba_size, err, errlen) < 0) return -1;
    if (type == SLIMIO_BACKEND_NVME && !be->dev.is_nvme) {
        snprintf(err, errlen, "slimio-backend nvme needs an NVMe generic char device; %s is "
                 "not one: name e.g. /dev/ng0n1, or use slimio-backend file", path);
        slimioDevClose(&be->dev);
        return -1;
    }
    if (type == SLIMIO_BACKEND_FILE && be->dev.is_nvme) {
        snprintf(err, errlen, "%s is an NVMe char device, which takes passthru commands only: "
                 "set slimio-backend nvme, or name the block device", path);
        slimioDevClose(&be->dev);
        return -1;
    }
    be->ops = type == SLIMIO_BACKEND_NVME ? &nvmeOps : &fileOps;
    /* 1 MiB per command (large enough for sequential bandwidth, small enough to keep
     * several in flight), or the namespace's transfer limit if lower. */
    be->max_io_lbas = type == SLIMIO_BACKEND_NVME ? be->dev.nvme.max_io_bytes / be->dev.lba_size
                                                  : (1024 * 1024) / be->dev.lba_size;
    be->io = be->dev.io;
    be->io.ctx = be;
    be->io.read = countedRead;
    be->io.write = countedWrite;
    be->io.flush = countedFlush;
    be->io.deallocate = be->dev.io.deallocate ? countedDeallocate : NULL;
    return 0;
}

void slimioBackendClose(slimioBackend *be) {
    if (be->dev.fd >= 0) slimioDevClose(&be->dev);
    be->ops = NULL;
}
