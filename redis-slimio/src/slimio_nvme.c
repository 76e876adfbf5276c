/* NVMe passthru discovery, encoding and synchronous commands; see slimio_nvme.h. */
#define _GNU_SOURCE
#include "slimio_nvme.h"

#include <errno.h>
#include <linux/nvme_ioctl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const unsigned char *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }
static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = v >> (8 * i); }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = v >> (8 * i); }

slimioNvmeRw slimioNvmeEncodeRw(uint8_t opcode, uint64_t slba, uint32_t nlb,
                                uint16_t placement, int fua) {
    slimioNvmeRw rw = {.opcode = opcode};
    rw.cdw10 = (uint32_t)slba;
    rw.cdw11 = (uint32_t)(slba >> 32);
    rw.cdw12 = (nlb - 1) & 0xffff;
    if (fua) rw.cdw12 |= 1u << 30;
    if (placement != SLIMIO_NO_PLACEMENT) {
        rw.cdw12 |= (uint32_t)SLIMIO_NVME_DTYPE_FDP << 20;
        rw.cdw13 = (uint32_t)placement << 16;
    }
    return rw;
}

void slimioNvmeParseIdNs(const unsigned char *id, slimioNvmeInfo *info) {
    info->lbas = le64(id + 0);                      /* NSZE */
    uint8_t flbas = id[26];
    unsigned idx = (flbas & 0x0f) | ((flbas >> 5) & 0x03) << 4;
    const unsigned char *lbaf = id + 128 + 4 * idx;
    info->metadata_size = le16(lbaf);
    info->lba_size = lbaf[2] < 32 ? 1u << lbaf[2] : 0;
    info->endgid = le16(id + 102);
}

void slimioNvmeParseIdCtrl(const unsigned char *id, slimioNvmeInfo *info) {
    uint8_t mdts = id[77];
    /* MDTS is in units of the minimum memory page size (CAP.MPSMIN, not readable from user
     * space); 4 KiB is the smallest, so this never overestimates. */
    info->mdts_bytes = mdts ? (mdts >= 20 ? 0 : 4096u << mdts) : 0;
    info->fdp_supported = (le32(id + 96) >> 19) & 1;   /* CTRATT.FDPS */
    info->vwc = id[525] & 1;
    info->dsm = (le16(id + 520) >> 2) & 1;             /* ONCS bit 2: Dataset Management */
}

void slimioNvmeParseIdCtrlNvm(const unsigned char *id, slimioNvmeInfo *info) {
    info->dmrl = id[3];
    info->dmrsl = le32(id + 4);
    info->dmsl = le64(id + 8);
}

unsigned slimioNvmeEncodeDsm(const slimioNvmeInfo *info, uint64_t slba, uint64_t nlb,
                             unsigned char *buf, uint64_t *covered) {
    unsigned max_ranges = info->dmrl ? info->dmrl : SLIMIO_NVME_DSM_MAX_RANGES;
    uint64_t range_max = info->dmrsl ? info->dmrsl : SLIMIO_NVME_DSM_MAX_RANGE_LBAS;
    uint64_t left = info->dmsl && info->dmsl < nlb ? info->dmsl : nlb;
    unsigned n = 0;
    *covered = 0;
    while (left && n < max_ranges) {
        uint64_t len = left < range_max ? left : range_max;
        unsigned char *d = buf + (size_t)n * SLIMIO_NVME_DSM_RANGE_BYTES;
        put32(d, 0);                        /* context attributes: none */
        put32(d + 4, (uint32_t)len);        /* length in LBAs */
        put64(d + 8, slba + *covered);      /* starting LBA */
        *covered += len;
        left -= len;
        n++;
    }
    return n;
}

int slimioNvmeParseRuhStatus(const unsigned char *buf, size_t len, slimioNvmeInfo *info) {
    if (len < 16) return -1;
    unsigned n = le16(buf + 14);                    /* NRUHSD */
    if (16 + (size_t)n * 32 > len) return -1;
    info->npids = 0;
    for (unsigned i = 0; i < n && info->npids < SLIMIO_NVME_MAX_PIDS; i++)
        info->pids[info->npids++] = le16(buf + 16 + 32 * i);
    return (int)n;
}

int slimioNvmeIsGenericPath(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    unsigned a, b;
    char tail;
    return sscanf(base, "ng%un%u%c", &a, &b, &tail) == 2;
}

static int passthru(int fd, unsigned long req, struct nvme_passthru_cmd *cmd, uint32_t *status) {
    int rc;
    do rc = ioctl(fd, req, cmd); while (rc < 0 && errno == EINTR);
    if (rc < 0) return -errno;
    if (status) *status = (uint32_t)rc;
    return rc > 0 ? -EIO : 0;
}

int slimioNvmeSyncRw(int fd, uint32_t nsid, const slimioNvmeRw *rw, void *buf, uint32_t len,
                     uint32_t *status) {
    struct nvme_passthru_cmd cmd = {
        .opcode = rw->opcode, .nsid = nsid, .addr = (uint64_t)(uintptr_t)buf, .data_len = len,
        .cdw10 = rw->cdw10, .cdw11 = rw->cdw11, .cdw12 = rw->cdw12, .cdw13 = rw->cdw13};
    return passthru(fd, NVME_IOCTL_IO_CMD, &cmd, status);
}

int slimioNvmeSyncFlush(int fd, uint32_t nsid, uint32_t *status) {
    struct nvme_passthru_cmd cmd = {.opcode = SLIMIO_NVME_OP_FLUSH, .nsid = nsid};
    return passthru(fd, NVME_IOCTL_IO_CMD, &cmd, status);
}

/* Synchronous on purpose: the ioctl returns once the controller completed the command.
 * NVMe orders nothing between commands in flight, so a deallocation still in flight could
 * discard data written later to the same LBAs (the WAL ring wraps into freed space, and
 * the Reserve slot is rewritten by the next snapshot); the caller writes there only after
 * this returns. */
int slimioNvmeSyncDeallocate(int fd, const slimioNvmeInfo *info, uint64_t slba, uint64_t nlb,
                             uint32_t *status) {
    if (!info->dsm) return -EOPNOTSUPP;
    if (!nlb) return 0;
    unsigned char *buf = NULL;
    size_t len = SLIMIO_NVME_DSM_MAX_RANGES * SLIMIO_NVME_DSM_RANGE_BYTES;
    if (posix_memalign((void **)&buf, 4096, len)) return -ENOMEM;
    int commands = 0, rc = 0;
    while (nlb) {
        uint64_t covered;
        memset(buf, 0, len);
        unsigned n = slimioNvmeEncodeDsm(info, slba, nlb, buf, &covered);
        struct nvme_passthru_cmd cmd = {
            .opcode = SLIMIO_NVME_OP_DSM, .nsid = info->nsid, .addr = (uint64_t)(uintptr_t)buf,
            .data_len = n * SLIMIO_NVME_DSM_RANGE_BYTES, .cdw10 = n - 1,
            .cdw11 = SLIMIO_NVME_DSM_AD};
        if ((rc = passthru(fd, NVME_IOCTL_IO_CMD, &cmd, status)) < 0) break;
        commands++;
        slba += covered;
        nlb -= covered;
    }
    free(buf);
    return rc < 0 ? rc : commands;
}

/* The block layer's limits of the namespace (/sys/block/nvmeXnY/queue for /dev/ngXnY):
 * a passthru command larger than max_hw_sectors_kb or spanning more pages than
 * max_segments fails. 0 when unknown. */
static uint32_t queueLimitBytes(const char *path) {
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    unsigned ctrl, ns;
    if (sscanf(base, "ng%un%u", &ctrl, &ns) != 2) return 0;
    uint32_t limit = 0;
    const char *files[] = {"max_hw_sectors_kb", "max_segments"};
    for (int i = 0; i < 2; i++) {
        char p[128];
        snprintf(p, sizeof(p), "/sys/block/nvme%un%u/queue/%s", ctrl, ns, files[i]);
        FILE *f = fopen(p, "r");
        unsigned long v = 0;
        if (!f) continue;
        if (fscanf(f, "%lu", &v) == 1 && v) {
            /* Segments: buffers are page-aligned, so one page each at worst. */
            uint64_t bytes = i == 0 ? (uint64_t)v * 1024 : (uint64_t)v * 4096;
            if (bytes > UINT32_MAX) bytes = UINT32_MAX;
            if (!limit || bytes < limit) limit = (uint32_t)bytes;
        }
        fclose(f);
    }
    return limit;
}

int slimioNvmeDiscover(int fd, const char *path, slimioNvmeInfo *info, char *err, size_t errlen) {
    memset(info, 0, sizeof(*info));
    int nsid = ioctl(fd, NVME_IOCTL_ID);
    if (nsid <= 0) {
        snprintf(err, errlen, "%s is not an NVMe namespace char device (NVME_IOCTL_ID: %s): "
                 "name the namespace's generic device, e.g. /dev/ng0n1 (see nvme list -v), or "
                 "use slimio-backend file", path, nsid < 0 ? strerror(errno) : "no nsid");
        return -1;
    }
    info->nsid = (uint32_t)nsid;
    unsigned char *id = NULL;
    if (posix_memalign((void **)&id, 4096, 4096)) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    uint32_t st = 0;
    const char *step = NULL;
    /* Identify Namespace, then Identify Controller. */
    for (uint32_t cns = 0; cns <= 1 && !step; cns++) {
        memset(id, 0, 4096);
        struct nvme_passthru_cmd cmd = {.opcode = SLIMIO_NVME_ADMIN_IDENTIFY,
                                        .nsid = cns == 0 ? info->nsid : 0,
                                        .addr = (uint64_t)(uintptr_t)id, .data_len = 4096,
                                        .cdw10 = cns};
        if ((rc = passthru(fd, NVME_IOCTL_ADMIN_CMD, &cmd, &st)) < 0) {
            step = cns == 0 ? "Identify Namespace" : "Identify Controller";
            break;
        }
        if (cns == 0) slimioNvmeParseIdNs(id, info);
        else slimioNvmeParseIdCtrl(id, info);
    }
    if (!step && info->dsm) {
        /* The NVM command set's controller data (CNS 06h, CSI 00h) holds the Dataset
         * Management limits. Optional: a controller without it reports none (QEMU skips a
         * range longer than its DMRSL without an error, so the limit matters). */
        memset(id, 0, 4096);
        struct nvme_passthru_cmd cmd = {.opcode = SLIMIO_NVME_ADMIN_IDENTIFY,
                                        .addr = (uint64_t)(uintptr_t)id, .data_len = 4096,
                                        .cdw10 = 0x06, .cdw11 = 0 /* CSI 00h: NVM */};
        if (passthru(fd, NVME_IOCTL_ADMIN_CMD, &cmd, &st) == 0) slimioNvmeParseIdCtrlNvm(id, info);
    }
    if (!step && info->fdp_supported) {
        struct nvme_passthru_cmd cmd = {.opcode = SLIMIO_NVME_ADMIN_GET_FEATURES,
                                        .cdw10 = SLIMIO_NVME_FEAT_FDP, .cdw11 = info->endgid};
        if ((rc = passthru(fd, NVME_IOCTL_ADMIN_CMD, &cmd, &st)) < 0) step = "Get Features (FDP)";
        else {
            info->fdp_enabled = cmd.result & 1;
            info->fdp_config_index = (int)((cmd.result >> 8) & 0xff);
        }
    }
    if (!step && info->fdp_enabled) {
        /* As nvme-cli does: the 16-byte header first (NRUHSD), then exactly the descriptors
         * (QEMU rejects a transfer longer than what it returns). */
        size_t len = 16;
        for (int pass = 0; pass < 2 && !step; pass++) {
            memset(id, 0, 4096);
            struct nvme_passthru_cmd cmd = {.opcode = SLIMIO_NVME_OP_IO_MGMT_RECV,
                                            .nsid = info->nsid, .addr = (uint64_t)(uintptr_t)id,
                                            .data_len = (uint32_t)len,
                                            .cdw10 = 1 /* MO: reclaim unit handle status */,
                                            .cdw11 = (uint32_t)(len / 4 - 1)};
            if ((rc = passthru(fd, NVME_IOCTL_IO_CMD, &cmd, &st)) < 0) {
                step = "I/O Management Receive (reclaim unit handle status)";
            } else if (pass == 0) {
                unsigned n = le16(id + 14);
                if (n > (4096 - 16) / 32) n = (4096 - 16) / 32;
                len = 16 + 32 * (size_t)n;
            } else if (slimioNvmeParseRuhStatus(id, len, info) < 0) {
                step = "I/O Management Receive (reclaim unit handle status)";
            }
        }
    }
    free(id);
    if (step) {
        if (rc == -EACCES || rc == -EPERM)
            snprintf(err, errlen, "%s: %s was refused (%s): discovering an NVMe namespace needs "
                     "CAP_SYS_ADMIN; run as root", path, step, strerror(-rc));
        else if (rc == -EIO)
            snprintf(err, errlen, "%s: %s failed with NVMe status 0x%x", path, step, st);
        else
            snprintf(err, errlen, "%s: %s failed: %s", path, step,
                     rc ? strerror(-rc) : "malformed reply");
        return -1;
    }
    if (!info->lba_size || !info->lbas) {
        snprintf(err, errlen, "%s: namespace %u reports no usable LBA format or capacity", path,
                 info->nsid);
        return -1;
    }
    uint32_t limit = 1024 * 1024;
    uint32_t q = queueLimitBytes(path);
    if (info->mdts_bytes && info->mdts_bytes < limit) limit = info->mdts_bytes;
    if (q && q < limit) limit = q;
    /* A power of two, whole LBAs. */
    uint32_t p2 = info->lba_size;
    while (p2 * 2 <= limit) p2 *= 2;
    info->max_io_bytes = p2;
    return 0;
}

int slimioNvmeCheckPlacement(const slimioNvmeInfo *info, const char *path,
                             const int placement[SLIMIO_KINDS], const char *const names[SLIMIO_KINDS],
                             char *err, size_t errlen) {
    for (int k = 0; k < SLIMIO_KINDS; k++) {
        if (placement[k] < 0) continue;
        if (!info->fdp_supported) {
            snprintf(err, errlen, "%s %d asks for FDP placement, but the controller of %s does "
                     "not support FDP (CTRATT bit 19 clear): set it to -1, or use an FDP device",
                     names[k], placement[k], path);
            return -1;
        }
        if (!info->fdp_enabled) {
            snprintf(err, errlen, "%s %d asks for FDP placement, but FDP is disabled on "
                     "endurance group %u of %s: enable it (nvme set-feature -f 0x1d, before "
                     "the namespace is created), or set it to -1", names[k], placement[k],
                     info->endgid, path);
            return -1;
        }
        int found = 0;
        for (unsigned i = 0; i < info->npids && !found; i++) found = info->pids[i] == placement[k];
        if (!found) {
            char list[256] = "";
            size_t off = 0;
            for (unsigned i = 0; i < info->npids && off < sizeof(list) - 8; i++)
                off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%u", i ? ", " : "",
                                        info->pids[i]);
            snprintf(err, errlen, "%s %d is not a placement id of %s: its reclaim unit handle "
                     "status lists %s; choose one of them, or -1 for none", names[k],
                     placement[k], path, info->npids ? list : "none");
            return -1;
        }
    }
    return 0;
}

void slimioNvmeDescribe(const slimioNvmeInfo *info, char *out, size_t outlen) {
    char pids[64] = "none";
    if (info->npids) {
        int contiguous = 1;
        for (unsigned i = 1; i < info->npids; i++)
            contiguous &= info->pids[i] == info->pids[i - 1] + 1;
        if (contiguous && info->npids > 1)
            snprintf(pids, sizeof(pids), "%u-%u", info->pids[0], info->pids[info->npids - 1]);
        else
            snprintf(pids, sizeof(pids), "%u%s", info->pids[0], info->npids > 1 ? ", ..." : "");
    }
    snprintf(out, outlen, "nsid %u, %llu x %u-byte LBAs, write cache %s, FDP %s, placement ids "
             "%s, max command %u KiB, deallocation %s", info->nsid,
             (unsigned long long)info->lbas, info->lba_size,
             info->vwc ? "on (FUA/Flush)" : "off",
             !info->fdp_supported ? "not supported" : info->fdp_enabled ? "enabled" : "disabled",
             pids, info->max_io_bytes / 1024,
             info->dsm ? "Dataset Management" : "not supported (ONCS bit 2 clear)");
}
