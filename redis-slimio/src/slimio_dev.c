/* Device opening and signature checks; see slimio_dev.h. */
#define _GNU_SOURCE
#include "slimio_dev.h"

#include <blkid/blkid.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static int devRead(void *ctx, uint64_t lba, uint32_t nlb, void *buf) {
    slimioDev *dev = ctx;
    size_t len = (size_t)nlb * dev->lba_size, done = 0;
    while (done < len) {
        ssize_t n = pread(dev->fd, (char *)buf + done, len - done,
                          (off_t)(lba * dev->lba_size + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        if (n == 0) return -EIO;    /* past the end */
        done += (size_t)n;
    }
    return 0;
}

static int devWrite(void *ctx, uint64_t lba, uint32_t nlb, const void *buf, slimioDataKind k) {
    slimioDev *dev = ctx;
    (void)k;    /* placement needs the nvme backend; the file backend has none */
    size_t len = (size_t)nlb * dev->lba_size, done = 0;
    while (done < len) {
        ssize_t n = pwrite(dev->fd, (const char *)buf + done, len - done,
                           (off_t)(lba * dev->lba_size + done));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        done += (size_t)n;
    }
    return 0;
}

static int devFlush(void *ctx) {
    return fdatasync(((slimioDev *)ctx)->fd) ? -errno : 0;
}

/* Deallocation, synchronous (slimio_dealloc.h says why). A regular file: punch a hole
 * (KEEP_SIZE); a block device: BLKDISCARD, never fallocate, which issues write-zeroes
 * there. EOPNOTSUPP (the file system or device cannot) is reported as such. */
static int devDeallocate(void *ctx, uint64_t lba, uint64_t nlb) {
    slimioDev *dev = ctx;
    uint64_t off = lba * dev->lba_size, len = nlb * dev->lba_size;
    int rc;
    if (!nlb) return 0;
    if (dev->is_blockdev) {
        uint64_t range[2] = {off, len};
        do rc = ioctl(dev->fd, BLKDISCARD, range); while (rc < 0 && errno == EINTR);
    } else {
        do rc = fallocate(dev->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
                          (off_t)len);
        while (rc < 0 && errno == EINTR);
    }
    if (rc < 0) return errno == EOPNOTSUPP || errno == ENOTTY ? -EOPNOTSUPP : -errno;
    return 1;
}

/* Dataset Management (Deallocate), synchronous through the ioctl path; -EOPNOTSUPP when
 * the controller has none (slimio_nvme.h). */
static int nvmeDeallocate(void *ctx, uint64_t lba, uint64_t nlb) {
    slimioDev *dev = ctx;
    return slimioNvmeSyncDeallocate(dev->fd, &dev->nvme, lba, nlb, NULL);
}

int slimioDevDeallocSupport(const slimioDev *dev) {
    if (dev->is_nvme) return dev->nvme.dsm;
    if (!dev->is_blockdev) return -1;   /* the file system decides: known when tried */
    struct stat st;
    if (fstat(dev->fd, &st) < 0) return -1;
    char p[128];
    snprintf(p, sizeof(p), "/sys/dev/block/%u:%u/queue/discard_max_bytes", major(st.st_rdev),
             minor(st.st_rdev));
    FILE *f = fopen(p, "r");
    unsigned long long v = 0;
    int known = f && fscanf(f, "%llu", &v) == 1;
    if (f) fclose(f);
    return known ? v > 0 : -1;
}

/* Passthru: commands of at most max_io_bytes; the write carries its kind's placement. */
static int nvmeRw(slimioDev *dev, uint8_t op, uint64_t lba, uint32_t nlb, void *buf,
                  uint16_t placement) {
    uint32_t max = dev->nvme.max_io_bytes / dev->lba_size;
    while (nlb) {
        uint32_t n = nlb < max ? nlb : max;
        slimioNvmeRw rw = slimioNvmeEncodeRw(op, lba, n, placement, 0);
        int rc = slimioNvmeSyncRw(dev->fd, dev->nvme.nsid, &rw, buf, n * dev->lba_size, NULL);
        if (rc) return rc;
        lba += n;
        nlb -= n;
        buf = (char *)buf + (size_t)n * dev->lba_size;
    }
    return 0;
}

static int nvmeRead(void *ctx, uint64_t lba, uint32_t nlb, void *buf) {
    return nvmeRw(ctx, SLIMIO_NVME_OP_READ, lba, nlb, buf, SLIMIO_NO_PLACEMENT);
}

static int nvmeWrite(void *ctx, uint64_t lba, uint32_t nlb, const void *buf, slimioDataKind k) {
    slimioDev *dev = ctx;
    return nvmeRw(dev, SLIMIO_NVME_OP_WRITE, lba, nlb, (void *)buf, dev->placement[k]);
}

/* Without a volatile write cache a completed write is durable: nothing to flush. */
static int nvmeFlush(void *ctx) {
    slimioDev *dev = ctx;
    return dev->nvme.vwc ? slimioNvmeSyncFlush(dev->fd, dev->nvme.nsid, NULL) : 0;
}

static int openNvme(slimioDev *dev, int fd, const char *path, uint32_t lba_size, char *err,
                    size_t errlen) {
    if (slimioNvmeDiscover(fd, path, &dev->nvme, err, errlen) < 0) return -1;
    if (dev->nvme.metadata_size) {
        snprintf(err, errlen, "%s: the namespace's LBA format has %u bytes of metadata per "
                 "LBA; SlimIO needs a format without metadata (nvme format --lbaf=N)", path,
                 dev->nvme.metadata_size);
        return -1;
    }
    if (lba_size && lba_size != dev->nvme.lba_size) {
        snprintf(err, errlen, "%s has %u-byte LBAs, not the configured %u: set slimio-lba-size "
                 "%u, or reformat the namespace with a %u-byte LBA format", path,
                 dev->nvme.lba_size, lba_size, dev->nvme.lba_size, lba_size);
        return -1;
    }
    dev->is_nvme = 1;
    dev->lba_size = dev->nvme.lba_size;
    dev->lbas = dev->nvme.lbas;
    return 0;
}

int slimioDevOpen(slimioDev *dev, const char *path, uint32_t lba_size, char *err, size_t errlen) {
    memset(dev, 0, sizeof(*dev));
    dev->fd = -1;
    if (!path || !*path) {
        snprintf(err, errlen, "no SlimIO device given: name one explicitly (slimio-device)");
        return -1;
    }
    for (int k = 0; k < SLIMIO_KINDS; k++) dev->placement[k] = SLIMIO_NO_PLACEMENT;
    struct stat pre;
    int chr = stat(path, &pre) == 0 && S_ISCHR(pre.st_mode);
    /* Char devices take no O_DIRECT: passthru bypasses the page cache anyway. */
    int fd = open(path, O_RDWR | O_CLOEXEC | (chr ? 0 : O_DIRECT));
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "cannot open SlimIO device %s: %s%s", path, strerror(e),
                 e == EACCES || e == EPERM ? ": SlimIO needs read-write access to it (run as "
                 "root, or grant the server's user access to the device)" : "");
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        snprintf(err, errlen, "cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (S_ISBLK(st.st_mode)) {
        int ssz = 0;
        uint64_t bytes = 0;
        if (ioctl(fd, BLKSSZGET, &ssz) < 0 || ioctl(fd, BLKGETSIZE64, &bytes) < 0) {
            snprintf(err, errlen, "cannot read the geometry of %s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        if (lba_size && lba_size != (uint32_t)ssz) {
            snprintf(err, errlen, "%s has %d-byte logical blocks, not the configured %u",
                     path, ssz, lba_size);
            close(fd);
            return -1;
        }
        dev->is_blockdev = 1;
        dev->lba_size = (uint32_t)ssz;
        dev->lbas = bytes / (uint32_t)ssz;
    } else if (S_ISREG(st.st_mode)) {
        dev->lba_size = lba_size ? lba_size : 4096;
        dev->lbas = (uint64_t)st.st_size / dev->lba_size;
    } else if (S_ISCHR(st.st_mode)) {
        if (openNvme(dev, fd, path, lba_size, err, errlen) < 0) {
            close(fd);
            return -1;
        }
    } else {
        snprintf(err, errlen, "%s is neither a regular file, a block device nor an NVMe char "
                 "device", path);
        close(fd);
        return -1;
    }
    dev->fd = fd;
    dev->path = strdup(path);
    dev->io = dev->is_nvme
        ? (slimioBlockIo){dev, dev->lba_size, dev->lbas, nvmeRead, nvmeWrite, nvmeFlush,
                          nvmeDeallocate}
        : (slimioBlockIo){dev, dev->lba_size, dev->lbas, devRead, devWrite, devFlush,
                          devDeallocate};
    return 0;
}

int slimioDevSetPlacement(slimioDev *dev, const int placement[SLIMIO_KINDS],
                          const char *const names[SLIMIO_KINDS], char *err, size_t errlen) {
    for (int k = 0; k < SLIMIO_KINDS; k++) {
        if (placement[k] > 0xfffe) {
            snprintf(err, errlen, "%s %d is out of range: a placement id is 0-65534, or -1 "
                     "for none", names[k], placement[k]);
            return -1;
        }
    }
    if (dev->is_nvme &&
        slimioNvmeCheckPlacement(&dev->nvme, dev->path, placement, names, err, errlen) < 0)
        return -1;
    for (int k = 0; k < SLIMIO_KINDS; k++)
        dev->placement[k] = placement[k] < 0 ? SLIMIO_NO_PLACEMENT : (uint16_t)placement[k];
    return 0;
}

void slimioDevClose(slimioDev *dev) {
    if (dev->fd >= 0) close(dev->fd);
    free(dev->path);
    dev->fd = -1;
    dev->path = NULL;
}

/* The node libblkid probes for dev: the path itself, except for an NVMe generic char
 * device (/dev/ngXnY), whose block node is /dev/nvmeXnY (libblkid reads through the page
 * cache of a block device or a file; the char device has neither). */
static void probePath(const slimioDev *dev, char *out, size_t len) {
    const char *base = strrchr(dev->path, '/');
    unsigned ctrl, ns;
    base = base ? base + 1 : dev->path;
    if (dev->is_nvme && sscanf(base, "ng%un%u", &ctrl, &ns) == 2)
        snprintf(out, len, "/dev/nvme%un%u", ctrl, ns);
    else
        snprintf(out, len, "%s", dev->path);
}

/* Every signature libblkid knows (file systems, partition tables, LVM, RAID members, swap,
 * LUKS, ...), through its safe probe: superblocks with their type and usage, partition
 * tables by their magic. A probe that cannot run, or finds several signatures at once, is
 * reported too: SlimIO only writes where nothing is found. */
const char *slimioDevForeignSignature(slimioDev *dev) {
    static __thread char what[640];
    char path[256];
    probePath(dev, path, sizeof(path));
    blkid_probe pr = blkid_new_probe_from_filename(path);
    if (!pr) {
        snprintf(what, sizeof(what), "something libblkid cannot probe (%s: %s)", path,
                 strerror(errno ? errno : EIO));
        return what;
    }
    blkid_probe_enable_superblocks(pr, 1);
    blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE | BLKID_SUBLKS_USAGE);
    blkid_probe_enable_partitions(pr, 1);
    blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
    int rc = blkid_do_safeprobe(pr);
    const char *found = NULL;
    if (rc == 0) {
        const char *type = NULL, *usage = NULL;
        if (blkid_probe_lookup_value(pr, "PTTYPE", &type, NULL) == 0)
            snprintf(what, sizeof(what), "a %s partition table (libblkid: PTTYPE=%s)", type, type);
        else if (blkid_probe_lookup_value(pr, "TYPE", &type, NULL) == 0) {
            if (blkid_probe_lookup_value(pr, "USAGE", &usage, NULL) != 0) usage = "signature";
            snprintf(what, sizeof(what), "a%s %s %s (libblkid: TYPE=%s)",
                     strchr("aeiou", type[0]) ? "n" : "", type,
                     !strcmp(usage, "filesystem") ? "file system"
                     : !strcmp(usage, "raid") ? "RAID or volume-manager member"
                     : !strcmp(usage, "crypto") ? "encrypted volume"
                     : !strcmp(usage, "other") ? "signature" : usage, type);
        } else
            snprintf(what, sizeof(what), "a signature libblkid recognises");
        found = what;
    } else if (rc == -2) {
        snprintf(what, sizeof(what), "several conflicting signatures (libblkid: ambivalent "
                 "probe result)");
        found = what;
    } else if (rc < 0) {
        snprintf(what, sizeof(what), "something libblkid cannot probe (%s)", path);
        found = what;
    }
    blkid_free_probe(pr);
    return found;
}
