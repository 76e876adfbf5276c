/* NVMe passthru on a namespace's generic char device (/dev/ngXnY): discovery, command
 * encoding and synchronous I/O. The io_uring side (IORING_OP_URING_CMD) is in
 * slimio_backend.c and uses the same encoders.
 *
 * Discovery reads what SlimIO needs before it writes anything:
 *   NVME_IOCTL_ID                         nsid
 *   Identify Namespace (CNS 00h)          capacity (NSZE), LBA format (FLBAS/LBAF: LBA size,
 *                                         metadata size), endurance group (ENDGID)
 *   Identify Controller (CNS 01h)         volatile write cache (VWC bit 0), FDP support
 *                                         (CTRATT bit 19), MDTS, Dataset Management
 *                                         support (ONCS bit 2)
 *   Identify Controller, NVM command set  Dataset Management limits (DMRL, DMRSL, DMSL);
 *     (CNS 06h, CSI 00h)                  only with ONCS bit 2, optional (0 = no limit)
 *   Get Features FDP (FID 1Dh)            FDP enabled (bit 0) and configuration index
 *   I/O Management Receive (MO 01h)       reclaim unit handle status: the valid placement
 *                                         identifiers (PIDs)
 *
 * Writes: opcode 01h; cdw12 = NLB-1 | FUA (bit 30) | DTYPE (bits 23:20); cdw13 DSPEC in
 * bits 31:16. FDP placement is DTYPE = 2 with the placement identifier as DSPEC. Reads:
 * opcode 02h. Flush: opcode 00h.
 *
 * Deallocation: Dataset Management, opcode 09h, cdw10 = number of ranges - 1 (bits 7:0),
 * cdw11 = Attribute - Deallocate (AD, bit 2); the data is an array of 16-byte range
 * descriptors (context attributes, bytes 3:0 = 0; length in LBAs, bytes 7:4, not 0's
 * based; starting LBA, bytes 15:8), at most 256 per command. Write Zeroes is never used:
 * QEMU counts it as host bytes written in its FDP statistics and FEMU lacks it. */
#ifndef SLIMIO_NVME_H
#define SLIMIO_NVME_H

#include <stddef.h>
#include <stdint.h>

#include "slimio_format.h"

#define SLIMIO_NVME_OP_FLUSH 0x00
#define SLIMIO_NVME_OP_WRITE 0x01
#define SLIMIO_NVME_OP_READ 0x02
#define SLIMIO_NVME_OP_DSM 0x09
#define SLIMIO_NVME_OP_IO_MGMT_RECV 0x12
#define SLIMIO_NVME_DSM_AD (1u << 2)            /* cdw11: Attribute - Deallocate */
#define SLIMIO_NVME_DSM_MAX_RANGES 256
#define SLIMIO_NVME_DSM_RANGE_BYTES 16
#define SLIMIO_NVME_DSM_MAX_RANGE_LBAS 0xffffffffu
#define SLIMIO_NVME_ADMIN_IDENTIFY 0x06
#define SLIMIO_NVME_ADMIN_GET_FEATURES 0x0a
#define SLIMIO_NVME_FEAT_FDP 0x1d
#define SLIMIO_NVME_DTYPE_FDP 2
#define SLIMIO_NVME_MAX_PIDS 128

/* What discovery found on a namespace. */
typedef struct slimioNvmeInfo {
    uint32_t nsid;
    uint32_t lba_size;
    uint32_t metadata_size;     /* per LBA; SlimIO needs a format without metadata */
    uint64_t lbas;              /* NSZE */
    uint16_t endgid;            /* endurance group of the namespace (0 = none reported) */
    int vwc;                    /* volatile write cache present: durability needs FUA/Flush */
    int fdp_supported;          /* CTRATT bit 19 */
    int fdp_enabled;            /* Get Features 1Dh bit 0 */
    int fdp_config_index;
    int dsm;                    /* ONCS bit 2: Dataset Management (deallocation) supported */
    uint8_t dmrl;               /* ranges per DSM command (0 = no limit beyond 256) */
    uint32_t dmrsl;             /* LBAs per range (0 = no limit beyond 0xffffffff) */
    uint64_t dmsl;              /* LBAs per DSM command (0 = no limit) */
    uint32_t mdts_bytes;        /* 0 = no limit reported */
    uint32_t max_io_bytes;      /* largest single command SlimIO issues */
    uint16_t npids;
    uint16_t pids[SLIMIO_NVME_MAX_PIDS]; /* valid placement identifiers (RUH status order) */
} slimioNvmeInfo;

/* Command dwords of one read or write (what differs between the ioctl and io_uring). */
typedef struct slimioNvmeRw {
    uint8_t opcode;
    uint32_t cdw10, cdw11, cdw12, cdw13;
} slimioNvmeRw;

/* Encode a read/write of nlb LBAs at slba. placement: a PID or SLIMIO_NO_PLACEMENT (no
 * directive). fua: Force Unit Access. */
slimioNvmeRw slimioNvmeEncodeRw(uint8_t opcode, uint64_t slba, uint32_t nlb,
                                uint16_t placement, int fua);

/* Parse an Identify Namespace / Identify Controller data structure (4096 bytes) and a
 * reclaim unit handle status buffer of len bytes into info. The RUH parser returns the
 * number of descriptors, or -1 when the buffer is too short for what it announces. */
void slimioNvmeParseIdNs(const unsigned char *id, slimioNvmeInfo *info);
void slimioNvmeParseIdCtrl(const unsigned char *id, slimioNvmeInfo *info);
/* Parse the NVM command set's Identify Controller data structure (CNS 06h, CSI 00h): the
 * Dataset Management limits DMRL (byte 3), DMRSL (bytes 7:4) and DMSL (bytes 15:8). */
void slimioNvmeParseIdCtrlNvm(const unsigned char *id, slimioNvmeInfo *info);
int slimioNvmeParseRuhStatus(const unsigned char *buf, size_t len, slimioNvmeInfo *info);

/* True when path names an NVMe generic char device (/dev/ngXnY). */
int slimioNvmeIsGenericPath(const char *path);

/* Discover the namespace behind the open char device fd (path is for messages). Returns 0,
 * or -1 with a message naming the path, the failed step and what to do. */
int slimioNvmeDiscover(int fd, const char *path, slimioNvmeInfo *info, char *err, size_t errlen);

/* Check the requested placement ids (one per data kind, -1 = none; names[k] is the option
 * that set kind k, for messages) against the device: any id needs FDP enabled, and each id
 * must be one of the device's PIDs. Returns 0, or -1 with a message in err. */
int slimioNvmeCheckPlacement(const slimioNvmeInfo *info, const char *path,
                             const int placement[SLIMIO_KINDS], const char *const names[SLIMIO_KINDS],
                             char *err, size_t errlen);

/* Synchronous commands through NVME_IOCTL_IO_CMD. Each returns 0, a negative errno, or
 * -EIO for an NVMe error status (then *status, if given, holds it). */
int slimioNvmeSyncRw(int fd, uint32_t nsid, const slimioNvmeRw *rw, void *buf, uint32_t len,
                     uint32_t *status);
int slimioNvmeSyncFlush(int fd, uint32_t nsid, uint32_t *status);

/* Encode as much of the deallocation of [slba, slba + nlb) as one Dataset Management
 * command may carry: range descriptors into buf (SLIMIO_NVME_DSM_MAX_RANGES * 16 bytes),
 * each of at most DMRSL (else 0xffffffff) LBAs, at most DMRL (else 256) of them and at most
 * DMSL LBAs in all. Returns the number of descriptors (0 only when nlb is 0); *covered is
 * the number of LBAs they describe, from slba on. The command is opcode 09h, cdw10 =
 * descriptors - 1, cdw11 = SLIMIO_NVME_DSM_AD, descriptors * 16 bytes of data. */
unsigned slimioNvmeEncodeDsm(const slimioNvmeInfo *info, uint64_t slba, uint64_t nlb,
                             unsigned char *buf, uint64_t *covered);

/* Deallocate [slba, slba + nlb) with as many Dataset Management commands as the limits
 * need, synchronously (each ioctl returns when the controller completed it). Returns the
 * number of commands (0 for nlb 0), -EOPNOTSUPP when the controller has no Dataset
 * Management (ONCS bit 2 clear: nothing is sent), or another negative errno (-EIO for an
 * NVMe error status, then in *status if given). */
int slimioNvmeSyncDeallocate(int fd, const slimioNvmeInfo *info, uint64_t slba, uint64_t nlb,
                             uint32_t *status);

/* One line describing info ("nsid 1, 2097152 x 4096-byte LBAs, write cache on, FDP enabled
 * (config 0), placement ids 0-7"), for logs. */
void slimioNvmeDescribe(const slimioNvmeInfo *info, char *out, size_t outlen);

#endif
