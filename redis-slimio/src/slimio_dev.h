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

typedef struct slimioDev {
    int fd;
    char *path;
    int is_blockdev;
    uint32_t lba_size;
    uint64_t lbas;
    slimioBlockIo io;       /* synchronous I/O on this device (pread/pwrite, O_DIRECT) */
} slimioDev;

/* Open path read-write with O_DIRECT. Regular files use lba_size (0 = 4096) and their size;
 * block devices use their logical block size and capacity. Returns 0, or -1 with a message
 * naming the path and the problem in err. */
int slimioDevOpen(slimioDev *dev, const char *path, uint32_t lba_size, char *err, size_t errlen);
void slimioDevClose(slimioDev *dev);

/* Look for a foreign signature in the first blocks of the device. Returns NULL when there is
 * none, else a static description ("an ext2/3/4 file system", "a GPT partition table", ...). */
const char *slimioDevForeignSignature(slimioDev *dev);

#endif
