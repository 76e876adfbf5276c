/* The small interface between SlimIO's persistence logic and the device it writes to.
 *
 * A backend knows how to encode one read, write or flush as an io_uring submission for its
 * device, how to interpret the completion, and how to do the same synchronously (metadata,
 * formatting, inspection). Everything above it (rings, WAL writer, snapshot writer,
 * readers, recovery) is backend-independent.
 *
 *   file  io_uring IORING_OP_READ / IORING_OP_WRITE with O_DIRECT on a regular file or a
 *         block device, IORING_OP_FSYNC (datasync) as the flush. No placement: the data
 *         kind of a write is only counted. An ablation (io_uring without passthru) and the
 *         way to exercise the persistence logic on any host.
 *   nvme  IORING_OP_URING_CMD NVMe passthru on /dev/ngXnY (SQE128|CQE32): writes carry
 *         DTYPE=2 and the data kind's placement id as DSPEC when one is set (FDP), none
 *         otherwise. Durability follows the namespace's volatile write cache: with one, FUA
 *         writes and NVMe Flush; without, a completed write is durable and a flush is a
 *         no-op. Commands are at most the namespace's transfer limit (slimio_nvme.h).
 *
 * Deallocation (be->io.deallocate, used through slimio_dealloc.h) is synchronous on both:
 * file punches a hole in a regular file (fallocate PUNCH_HOLE|KEEP_SIZE) or discards on a
 * block device (BLKDISCARD); nvme sends Dataset Management with the Deallocate attribute
 * (when Identify Controller ONCS bit 2 says the controller has it) through the ioctl path.
 * It returns only once the device completed it: NVMe orders nothing between commands in
 * flight, so a deallocation still in flight could discard data written later to the same
 * LBAs. Write Zeroes is never used (QEMU counts it as host writes in its FDP statistics). */
#ifndef SLIMIO_BACKEND_H
#define SLIMIO_BACKEND_H

#include <liburing.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "slimio_dev.h"
#include "slimio_format.h"

typedef enum { SLIMIO_BACKEND_FILE = 0, SLIMIO_BACKEND_NVME = 1 } slimioBackendType;

typedef struct slimioBackend slimioBackend;

typedef struct slimioBackendOps {
    const char *name;
    /* Extra io_uring_setup flags every ring on this backend needs (SQE128|CQE32 for
     * passthru, 0 for file). */
    unsigned ring_flags;
    /* fua: the write is durable when it completes (file: RWF_DSYNC; NVMe: FUA). */
    void (*prep_write)(const slimioBackend *be, struct io_uring_sqe *sqe, uint64_t lba,
                       uint32_t nlb, const void *buf, slimioDataKind kind, int fua);
    void (*prep_read)(const slimioBackend *be, struct io_uring_sqe *sqe, uint64_t lba,
                      uint32_t nlb, void *buf);
    void (*prep_flush)(const slimioBackend *be, struct io_uring_sqe *sqe);
    /* A negative errno, or the bytes the command transferred (0 when the completion does
     * not say, as for passthru and flushes: then success means all of them). */
    int64_t (*complete)(const slimioBackend *be, const struct io_uring_cqe *cqe);
} slimioBackendOps;

struct slimioBackend {
    const slimioBackendOps *ops;
    slimioDev dev;              /* fd, path, geometry, placement, synchronous slimioBlockIo */
    uint32_t max_io_lbas;       /* largest single command; rings split larger requests */
    /* Bytes written per data kind by this process through rings and synchronous I/O. */
    _Atomic uint64_t bytes_written[SLIMIO_KINDS];
    _Atomic uint64_t bytes_read;
    slimioBlockIo io;           /* dev.io wrapped so that written bytes are counted */
};

/* Open the backend of the given type on path: nvme needs an NVMe generic char device, file
 * a regular file or a block device. lba_size applies to regular files (0 = 4096) and must
 * match a device's. Placement is set afterwards with slimioDevSetPlacement(&be->dev, ...).
 * Returns 0, or -1 with a message naming the path and the problem in err. */
int slimioBackendOpen(slimioBackend *be, slimioBackendType type, const char *path,
                      uint32_t lba_size, char *err, size_t errlen);
void slimioBackendClose(slimioBackend *be);

const char *slimioBackendTypeName(slimioBackendType type);

#endif
