/* SlimIO's on-device format; the contract of every function is in slimio_format.h. */
#define _GNU_SOURCE
#include "slimio_format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slimio_crc32c.h"
#include "slimio_dealloc.h"
#include "slimio_failpoint.h"

/* Metadata record field offsets. */
#define MO_MAGIC 0
#define MO_VERSION 8
#define MO_RECSIZE 12
#define MO_SEQ 16
#define MO_FORMAT_ID 24
#define MO_LBA_SIZE 32
#define MO_DEVICE_LBAS 40
#define MO_WAL_START 48
#define MO_WAL_LBAS 56
#define MO_SLOT_START 64
#define MO_SLOT_LBAS 72
#define MO_SLOTS 80         /* 3 x 32 bytes */
#define MO_SLOT_SIZE 32
#define MO_GENS 176         /* 2 x 24 bytes */
#define MO_GEN_SIZE 24
#define MO_PLACEMENT 224    /* 4 x u16 */
#define MO_CRC (SLIMIO_META_RECORD_SIZE - 4)

/* WAL header field offsets. */
#define WO_MAGIC 0
#define WO_USED 4
#define WO_GEN 8
#define WO_SEQ 16
#define WO_FORMAT 24
#define WO_CRC 28

static void put16(unsigned char *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = v >> (8*i); }
static void put64(unsigned char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = v >> (8*i); }
static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t get32(const unsigned char *p) {
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static uint64_t get64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

const char *slimioStrerror(int err) {
    switch (err) {
    case SLIMIO_OK: return "ok";
    case SLIMIO_ERR_IO: return "I/O error";
    case SLIMIO_ERR_MAGIC: return "bad magic";
    case SLIMIO_ERR_VERSION: return "unsupported format version";
    case SLIMIO_ERR_CRC: return "CRC mismatch";
    case SLIMIO_ERR_FIELDS: return "inconsistent layout fields";
    case SLIMIO_ERR_NOMETA: return "no SlimIO metadata on the device";
    case SLIMIO_ERR_TOOSMALL: return "device too small for the layout";
    case SLIMIO_ERR_GEN: return "block of another WAL generation";
    case SLIMIO_ERR_SEQ: return "block out of sequence";
    case SLIMIO_ERR_FORMAT_ID: return "block of another format of the device";
    case SLIMIO_ERR_USED: return "bad used-bytes field";
    default: return err < 0 && err > -4096 ? strerror(-err) : "unknown error";
    }
}

const char *slimioRoleName(uint8_t role) {
    switch (role) {
    case SLIMIO_ROLE_WAL_SNAPSHOT: return "wal-snapshot";
    case SLIMIO_ROLE_RESERVE: return "reserve";
    case SLIMIO_ROLE_ON_DEMAND: return "on-demand";
    default: return "invalid";
    }
}

static uint64_t ceilDiv(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

int slimioLayoutPlan(uint64_t device_lbas, uint32_t lba_size, uint64_t wal_bytes,
                     uint64_t slot_bytes, slimioMeta *m, char *err, size_t errlen) {
    if (lba_size < SLIMIO_META_RECORD_SIZE || (lba_size & (lba_size - 1))) {
        snprintf(err, errlen, "LBA size %u is not a power of two of at least %d bytes",
                 lba_size, SLIMIO_META_RECORD_SIZE);
        return SLIMIO_ERR_FIELDS;
    }
    uint64_t align = SLIMIO_ALIGN_BYTES / lba_size;
    uint64_t wal_lbas = ceilDiv(ceilDiv(wal_bytes, slimioWalPayload(lba_size)), align) * align;
    uint64_t slot_lbas = ceilDiv(ceilDiv(slot_bytes, lba_size), align) * align;
    uint64_t need = align + wal_lbas + SLIMIO_SLOTS * slot_lbas;
    if (wal_lbas < 2 || slot_lbas == 0 || need > device_lbas) {
        snprintf(err, errlen, "the device has %llu LBAs of %u bytes (%llu MiB) but the layout "
                 "needs %llu (%llu MiB: metadata, a %llu MiB WAL and 3 slots of %llu MiB)",
                 (unsigned long long)device_lbas, lba_size,
                 (unsigned long long)(device_lbas * lba_size >> 20),
                 (unsigned long long)need, (unsigned long long)(need * lba_size >> 20),
                 (unsigned long long)(wal_lbas * lba_size >> 20),
                 (unsigned long long)(slot_lbas * lba_size >> 20));
        return SLIMIO_ERR_TOOSMALL;
    }
    memset(m, 0, sizeof(*m));
    m->lba_size = lba_size;
    m->device_lbas = device_lbas;
    m->wal_start = align;
    m->wal_lbas = wal_lbas;
    m->slot_start = align + wal_lbas;
    m->slot_lbas = slot_lbas;
    m->slots[0].role = SLIMIO_ROLE_WAL_SNAPSHOT;
    m->slots[1].role = SLIMIO_ROLE_RESERVE;
    m->slots[2].role = SLIMIO_ROLE_ON_DEMAND;
    for (int k = 0; k < SLIMIO_KINDS; k++) m->placement[k] = SLIMIO_NO_PLACEMENT;
    return SLIMIO_OK;
}

uint64_t slimioSlotLba(const slimioMeta *m, int slot) {
    return m->slot_start + (uint64_t)slot * m->slot_lbas;
}

void slimioMetaEncode(const slimioMeta *m, unsigned char *buf) {
    memset(buf, 0, SLIMIO_META_RECORD_SIZE);
    memcpy(buf + MO_MAGIC, SLIMIO_META_MAGIC, 8);
    put32(buf + MO_VERSION, SLIMIO_FORMAT_VERSION);
    put32(buf + MO_RECSIZE, SLIMIO_META_RECORD_SIZE);
    put64(buf + MO_SEQ, m->seq);
    put64(buf + MO_FORMAT_ID, m->format_id);
    put32(buf + MO_LBA_SIZE, m->lba_size);
    put64(buf + MO_DEVICE_LBAS, m->device_lbas);
    put64(buf + MO_WAL_START, m->wal_start);
    put64(buf + MO_WAL_LBAS, m->wal_lbas);
    put64(buf + MO_SLOT_START, m->slot_start);
    put64(buf + MO_SLOT_LBAS, m->slot_lbas);
    for (int i = 0; i < SLIMIO_SLOTS; i++) {
        unsigned char *p = buf + MO_SLOTS + i * MO_SLOT_SIZE;
        p[0] = m->slots[i].role;
        p[1] = m->slots[i].valid;
        put32(p + 4, m->slots[i].crc);
        put64(p + 8, m->slots[i].length);
        put64(p + 16, m->slots[i].wal_gen);
    }
    for (int i = 0; i < SLIMIO_MAX_WAL_GENS; i++) {
        unsigned char *p = buf + MO_GENS + i * MO_GEN_SIZE;
        put64(p, m->gens[i].gen);
        put64(p + 8, m->gens[i].start_lba);
        put64(p + 16, m->gens[i].start_seq);
    }
    for (int k = 0; k < SLIMIO_KINDS; k++) put16(buf + MO_PLACEMENT + 2 * k, m->placement[k]);
    put32(buf + MO_CRC, slimioCrc32c(0, buf, MO_CRC));
}

/* The layout must describe regions that fit the device, do not overlap, and roles that
 * form exactly one WAL-Snapshot, one Reserve and one On-Demand slot. */
static int metaFieldsValid(const slimioMeta *m) {
    if (m->lba_size < SLIMIO_META_RECORD_SIZE || (m->lba_size & (m->lba_size - 1))) return 0;
    if (m->wal_start < 2 || m->wal_lbas < 2 || m->slot_lbas == 0) return 0;
    if (m->slot_start < m->wal_start + m->wal_lbas) return 0;
    if (m->slot_start + SLIMIO_SLOTS * m->slot_lbas > m->device_lbas) return 0;
    int seen[4] = {0};
    for (int i = 0; i < SLIMIO_SLOTS; i++) {
        if (m->slots[i].role < 1 || m->slots[i].role > 3) return 0;
        if (m->slots[i].length > m->slot_lbas * m->lba_size) return 0;
        seen[m->slots[i].role]++;
    }
    if (seen[1] != 1 || seen[2] != 1 || seen[3] != 1) return 0;
    for (int i = 0; i < SLIMIO_MAX_WAL_GENS; i++) {
        const slimioWalGen *g = &m->gens[i];
        if (g->gen && (g->start_lba < m->wal_start ||
                       g->start_lba >= m->wal_start + m->wal_lbas)) return 0;
    }
    if (m->gens[0].gen && m->gens[1].gen && m->gens[1].gen <= m->gens[0].gen) return 0;
    return 1;
}

int slimioMetaDecode(const unsigned char *buf, slimioMeta *m) {
    if (memcmp(buf + MO_MAGIC, SLIMIO_META_MAGIC, 8)) return SLIMIO_ERR_MAGIC;
    if (get32(buf + MO_VERSION) != SLIMIO_FORMAT_VERSION ||
        get32(buf + MO_RECSIZE) != SLIMIO_META_RECORD_SIZE) return SLIMIO_ERR_VERSION;
    if (get32(buf + MO_CRC) != slimioCrc32c(0, buf, MO_CRC)) return SLIMIO_ERR_CRC;
    memset(m, 0, sizeof(*m));
    m->seq = get64(buf + MO_SEQ);
    m->format_id = get64(buf + MO_FORMAT_ID);
    m->lba_size = get32(buf + MO_LBA_SIZE);
    m->device_lbas = get64(buf + MO_DEVICE_LBAS);
    m->wal_start = get64(buf + MO_WAL_START);
    m->wal_lbas = get64(buf + MO_WAL_LBAS);
    m->slot_start = get64(buf + MO_SLOT_START);
    m->slot_lbas = get64(buf + MO_SLOT_LBAS);
    for (int i = 0; i < SLIMIO_SLOTS; i++) {
        const unsigned char *p = buf + MO_SLOTS + i * MO_SLOT_SIZE;
        m->slots[i].role = p[0];
        m->slots[i].valid = p[1];
        m->slots[i].crc = get32(p + 4);
        m->slots[i].length = get64(p + 8);
        m->slots[i].wal_gen = get64(p + 16);
    }
    for (int i = 0; i < SLIMIO_MAX_WAL_GENS; i++) {
        const unsigned char *p = buf + MO_GENS + i * MO_GEN_SIZE;
        m->gens[i].gen = get64(p);
        m->gens[i].start_lba = get64(p + 8);
        m->gens[i].start_seq = get64(p + 16);
    }
    for (int k = 0; k < SLIMIO_KINDS; k++) m->placement[k] = get16(buf + MO_PLACEMENT + 2 * k);
    return metaFieldsValid(m) ? SLIMIO_OK : SLIMIO_ERR_FIELDS;
}

/* One LBA-sized, LBA-aligned buffer (O_DIRECT and passthru need aligned memory). */
static unsigned char *blockAlloc(uint32_t lba_size, uint32_t n) {
    void *p = NULL;
    return posix_memalign(&p, 4096, (size_t)lba_size * n) ? NULL : p;
}

int slimioMetaLoad(const slimioBlockIo *io, slimioMeta *m) {
    unsigned char *buf = blockAlloc(io->lba_size, 2);
    if (!buf) return -ENOMEM;
    int rc = io->read(io->ctx, 0, 2, buf);
    if (rc) { free(buf); return rc; }
    slimioMeta rec[2];
    int st[2], best = -1, damaged = SLIMIO_ERR_NOMETA;
    for (int i = 0; i < 2; i++) {
        st[i] = slimioMetaDecode(buf + (size_t)i * io->lba_size, &rec[i]);
        if (st[i] == SLIMIO_OK && (rec[i].seq % 2) != (uint64_t)i) st[i] = SLIMIO_ERR_SEQ;
        if (st[i] == SLIMIO_OK && rec[i].lba_size != io->lba_size) st[i] = SLIMIO_ERR_FIELDS;
        if (st[i] == SLIMIO_OK) {
            if (best < 0 || rec[i].seq > rec[best].seq) best = i;
        } else if (st[i] != SLIMIO_ERR_MAGIC) {
            damaged = st[i];
        }
    }
    free(buf);
    if (best < 0) return damaged;
    *m = rec[best];
    return SLIMIO_OK;
}

int slimioMetaCommit(const slimioBlockIo *io, slimioMeta *m) {
    unsigned char *buf = blockAlloc(io->lba_size, 1);
    if (!buf) return -ENOMEM;
    memset(buf, 0, io->lba_size);
    slimioMeta next = *m;
    next.seq = m->seq + 1;
    slimioMetaEncode(&next, buf);
    int rc = slimioFailpoint(SLIMIO_FP_META_BEFORE_WRITE) ? -EIO : 0;
    if (!rc) rc = io->write(io->ctx, next.seq % 2, 1, buf, SLIMIO_KIND_META);
    if (!rc && slimioFailpoint(SLIMIO_FP_META_AFTER_WRITE)) rc = -EIO;
    if (!rc) rc = io->flush(io->ctx);
    if (!rc && slimioFailpoint(SLIMIO_FP_META_AFTER_FLUSH)) rc = -EIO;
    free(buf);
    if (!rc) m->seq = next.seq;
    return rc;
}

int slimioFormatDevice(const slimioBlockIo *io, slimioMeta *m, struct slimioDealloc *dealloc) {
    unsigned char *zero = blockAlloc(io->lba_size, 2);
    if (!zero) return -ENOMEM;
    memset(zero, 0, (size_t)io->lba_size * 2);
    int rc = io->write(io->ctx, 0, 2, zero, SLIMIO_KIND_META);
    free(zero);
    if (!rc) rc = io->flush(io->ctx);
    if (!rc && dealloc) {
        slimioLbaRange r[2];
        int n = slimioFormatRanges(m, r);
        for (int i = 0; i < n; i++)
            slimioDeallocRange(dealloc, r[i].lba, r[i].nlb, SLIMIO_DEALLOC_FORMAT);
    }
    m->seq = 0;
    if (!rc) rc = slimioMetaCommit(io, m);
    return rc;
}

void slimioWalBlockSeal(unsigned char *block, uint32_t lba_size, uint64_t gen, uint64_t seq,
                        uint64_t format_id, uint32_t used) {
    memset(block + SLIMIO_WAL_HDR_SIZE + used, 0, slimioWalPayload(lba_size) - used);
    put32(block + WO_MAGIC, SLIMIO_WAL_MAGIC);
    put32(block + WO_USED, used);
    put64(block + WO_GEN, gen);
    put64(block + WO_SEQ, seq);
    put32(block + WO_FORMAT, (uint32_t)format_id);
    put32(block + WO_CRC, 0);
    uint32_t crc = slimioCrc32c(0, block, SLIMIO_WAL_HDR_SIZE + used);
    put32(block + WO_CRC, crc);
}

int slimioWalBlockCheck(const unsigned char *block, uint32_t lba_size, uint64_t gen,
                        uint64_t seq, uint64_t format_id, uint32_t *used) {
    if (get32(block + WO_MAGIC) != SLIMIO_WAL_MAGIC) return SLIMIO_ERR_MAGIC;
    uint32_t u = get32(block + WO_USED);
    if (u == 0 || u > slimioWalPayload(lba_size)) return SLIMIO_ERR_USED;
    /* CRC over the header with its CRC field zeroed, then the payload. */
    unsigned char hdr[SLIMIO_WAL_HDR_SIZE];
    memcpy(hdr, block, SLIMIO_WAL_HDR_SIZE);
    put32(hdr + WO_CRC, 0);
    uint32_t crc = slimioCrc32c(0, hdr, SLIMIO_WAL_HDR_SIZE);
    crc = slimioCrc32c(crc, block + SLIMIO_WAL_HDR_SIZE, u);
    if (crc != get32(block + WO_CRC)) return SLIMIO_ERR_CRC;
    if (get32(block + WO_FORMAT) != (uint32_t)format_id) return SLIMIO_ERR_FORMAT_ID;
    if (get64(block + WO_GEN) != gen) return SLIMIO_ERR_GEN;
    if (get64(block + WO_SEQ) != seq) return SLIMIO_ERR_SEQ;
    *used = u;
    return SLIMIO_OK;
}

uint64_t slimioWalLba(const slimioMeta *m, uint64_t start_lba, uint64_t i) {
    return m->wal_start + (start_lba - m->wal_start + i) % m->wal_lbas;
}

int slimioWalEndAdvance(const slimioMeta *m, const slimioWalGen *g, uint32_t lba_size,
                        uint32_t used, slimioWalEnd *end) {
    uint64_t i = end->blocks++;
    end->bytes += used;
    if (used < slimioWalPayload(lba_size)) {
        /* A partial tail: the end of the log; it is rewritten in place. */
        end->tail_used = used;
        end->next_lba = slimioWalLba(m, g->start_lba, i);
        end->next_seq = g->start_seq + i;
        end->stop = SLIMIO_OK;
        return 1;
    }
    end->next_lba = slimioWalLba(m, g->start_lba, i + 1);
    end->next_seq = g->start_seq + i + 1;
    return 0;
}

int slimioWalScan(const slimioBlockIo *io, const slimioMeta *m, const slimioWalGen *g,
                  uint64_t max_blocks, uint32_t batch_blocks, slimioWalVisitFn visit,
                  void *ctx, slimioWalEnd *end) {
    memset(end, 0, sizeof(*end));
    end->next_lba = g->start_lba;
    end->next_seq = g->start_seq;
    if (max_blocks == 0 || max_blocks > m->wal_lbas) max_blocks = m->wal_lbas;
    if (batch_blocks == 0) batch_blocks = 1;
    unsigned char *buf = blockAlloc(io->lba_size, batch_blocks);
    if (!buf) return -ENOMEM;
    int rc = SLIMIO_OK;
    uint64_t i = 0;
    while (i < max_blocks) {
        /* Read ahead: a batch never wraps around the end of the region. */
        uint64_t lba = slimioWalLba(m, g->start_lba, i);
        uint64_t n = batch_blocks;
        if (n > max_blocks - i) n = max_blocks - i;
        if (n > m->wal_start + m->wal_lbas - lba) n = m->wal_start + m->wal_lbas - lba;
        rc = io->read(io->ctx, lba, (uint32_t)n, buf);
        if (rc) goto done;
        for (uint64_t j = 0; j < n; j++, i++) {
            const unsigned char *block = buf + j * io->lba_size;
            uint32_t used = 0;
            int st = slimioWalBlockCheck(block, io->lba_size, g->gen, g->start_seq + i,
                                         m->format_id, &used);
            if (st != SLIMIO_OK) { end->stop = st; goto done; }
            if (visit && (rc = visit(ctx, block + SLIMIO_WAL_HDR_SIZE, used))) goto done;
            if (slimioWalEndAdvance(m, g, io->lba_size, used, end)) goto done;
        }
    }
done:
    free(buf);
    return rc;
}

void slimioWalSuccessor(const slimioMeta *m, const slimioWalGen *g, const slimioWalEnd *end,
                        slimioWalGen *next) {
    next->gen = g->gen + 1;
    next->start_lba = end->tail_used ? slimioWalLba(m, end->next_lba, 1) : end->next_lba;
    next->start_seq = 0;
}

int slimioWalBlockPeek(const unsigned char *block, uint32_t lba_size, uint64_t format_id,
                       uint64_t *gen, uint64_t *seq) {
    uint32_t used;
    *gen = get64(block + WO_GEN);
    *seq = get64(block + WO_SEQ);
    return slimioWalBlockCheck(block, lba_size, *gen, *seq, format_id, &used);
}

int slimioWalFollow(const slimioBlockIo *io, const slimioMeta *m, const slimioWalGen *g,
                    const slimioWalEnd *end, uint64_t max_gen, slimioWalGen *next, int *stop,
                    uint64_t *seen_gen) {
    slimioWalSuccessor(m, g, end, next);
    if (stop) *stop = SLIMIO_OK;
    if (seen_gen) *seen_gen = 0;
    unsigned char *block = blockAlloc(io->lba_size, 1);
    if (!block) return -ENOMEM;
    int rc = io->read(io->ctx, next->start_lba, 1, block);
    if (rc) { free(block); return rc < 0 ? rc : -EIO; }
    /* An intact block (magic, CRC, format) first; then its generation; then block 0. */
    uint64_t gen, seq;
    int st = slimioWalBlockPeek(block, io->lba_size, m->format_id, &gen, &seq);
    free(block);
    if (st == SLIMIO_OK && seen_gen) *seen_gen = gen;
    if (st == SLIMIO_OK && (gen <= g->gen || gen > max_gen)) st = SLIMIO_ERR_GEN;
    if (st == SLIMIO_OK && seq != 0) st = SLIMIO_ERR_SEQ;
    if (stop) *stop = st;
    if (st != SLIMIO_OK) return 0;
    next->gen = gen;
    return 1;
}
