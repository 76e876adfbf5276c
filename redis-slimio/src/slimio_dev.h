/* Opening the device SlimIO writes to, and the safety checks before anything is written.
 *
 * SlimIO writes raw LBAs, so it only ever opens the path it was explicitly given, and it
 * refuses a device that carries a file-system, partition-table, swap or LUKS signature, or
 * metadata of another SlimIO layout, unless told to format it. */
#ifndef SLIMIO_DEV_H
#define SLIMIO_DEV_H

#include <stddef.h>
#include <stdint.h>

#include "slimio_format.h"
#include "slimio_nvme.h"

typedef struct slimioDev {
    int fd;
    char *path;
    int is_blockdev;
    int is_nvme;            /* an NVMe generic char device, driven by passthru */
    uint32_t lba_size;
    uint64_t lbas;
    slimioNvmeInfo nvme;    /* discovery (is_nvme only) */
    uint16_t placement[SLIMIO_KINDS];  /* PID per data kind, SLIMIO_NO_PLACEMENT = none */
    slimioBlockIo io;       /* synchronous I/O: pread/pwrite with O_DIRECT, or passthru;
                               deallocation: hole punch, BLKDISCARD, or Dataset Management */
} slimioDev;

/* Open path read-write. Regular files (lba_size, 0 = 4096, and their size) and block
 * devices (their logical block size and capacity) with O_DIRECT; an NVMe generic char
 * device (/dev/ngXnY) through passthru, after discovery (slimio_nvme.h). A non-zero
 * lba_size must match a device's. No placement is set. Returns 0, or -1 with a message
 * naming the path and the problem in err. */
int slimioDevOpen(slimioDev *dev, const char *path, uint32_t lba_size, char *err, size_t errlen);

/* Set the placement id of each data kind (-1 = none; names[k] is the option that set it,
 * for messages). On an NVMe device every id must be valid (slimioNvmeCheckPlacement); on a
 * file or block device they are only recorded. Returns 0, or -1 with a message in err. */
int slimioDevSetPlacement(slimioDev *dev, const int placement[SLIMIO_KINDS],
                          const char *const names[SLIMIO_KINDS], char *err, size_t errlen);
void slimioDevClose(slimioDev *dev);

/* What is known before trying whether dev can deallocate (dev->io.deallocate): 1 yes, 0 no,
 * -1 not until tried. NVMe: Identify Controller ONCS bit 2 (Dataset Management); a block
 * device: its queue's discard_max_bytes; a regular file: its file system decides (-1). */
int slimioDevDeallocSupport(const slimioDev *dev);

/* Probe the device with libblkid for any signature it knows (file systems, partition
 * tables, LVM, RAID, swap, LUKS, ...); an NVMe generic char device is probed through its
 * block node. Returns NULL when there is none, else a description in a thread-local
 * buffer ("an ext4 file system (libblkid: TYPE=ext4)", "a gpt partition table ...");
 * a probe that fails or is ambivalent is described too (never NULL then). */
const char *slimioDevForeignSignature(slimioDev *dev);

#endif
