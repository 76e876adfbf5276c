/* libFuzzer target: SlimIO's metadata and WAL loaders on damaged devices.
 *
 * The input is a tiny device image (512-byte LBAs):
 *
 *   byte 0        flags: bit 0 reseals both metadata records' CRC32C, bit 1 every WAL
 *                 block's, so that mutations reach the checks behind the CRC (fields that
 *                 contradict each other, generations pointing anywhere, lengths, sequence
 *                 numbers) instead of stopping at it
 *   bytes 1..1024 LBA 0 and LBA 1 (the two metadata records)
 *   the rest      WAL blocks from LBA WAL_START on (where a layout with 512-byte LBAs puts
 *                 the WAL region: 1 MiB in); every other LBA reads as zeroes
 *
 * It runs what recovery runs before Redis parses a byte (slimio.c,
 * slimioLoadAppendOnlyFiles): slimioMetaLoad, then the chain of WAL generations from the
 * oldest listed one (slimioWalScan to each one's valid end, slimioWalFollow to the next),
 * and checks what recovery relies on: a loaded record is self-consistent, a scan never
 * passes the region, the chain's generations ascend and begin inside the region, and it
 * ends. A violation aborts (a finding); so does any memory error (ASan/UBSan).
 *
 *   make -C redis-slimio fuzz                     build ../build/redis-slimio-unit/fuzz_slimio_load
 *   fuzz_slimio_load -max_total_time=600 CORPUS tests/fuzz-corpus    longer, on demand
 *
 * The seeds in tests/fuzz-corpus/ are images the real format code wrote
 * (slimio_fixture_writer), cut down to this input format by tests/test_slimio_fuzz.py. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slimio_crc32c.h"
#include "slimio_format.h"

#define LBA 512
#define DEVICE_LBAS (1u << 16)
#define WAL_START 2048u
#define MAX_CHAIN 64

static const uint8_t *img;
static size_t img_len;
static unsigned char meta[2 * LBA];
static unsigned char *wal;
static size_t wal_blocks;

static int ramRead(void *ctx, uint64_t lba, uint32_t nlb, void *buf) {
    (void)ctx;
    if (lba + nlb > DEVICE_LBAS) return -5;
    for (uint32_t i = 0; i < nlb; i++) {
        unsigned char *out = (unsigned char *)buf + (size_t)i * LBA;
        uint64_t l = lba + i;
        if (l < 2) memcpy(out, meta + l * LBA, LBA);
        else if (l >= WAL_START && l - WAL_START < wal_blocks)
            memcpy(out, wal + (l - WAL_START) * LBA, LBA);
        else memset(out, 0, LBA);
    }
    return 0;
}

static int ramWrite(void *ctx, uint64_t lba, uint32_t nlb, const void *buf, slimioDataKind k) {
    (void)ctx; (void)lba; (void)nlb; (void)buf; (void)k;
    abort();    /* loading never writes */
}

static int ramFlush(void *ctx) { (void)ctx; return 0; }

static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = v >> (8 * i); }
static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void resealMeta(unsigned char *rec) {
    put32(rec + SLIMIO_META_RECORD_SIZE - 4, slimioCrc32c(0, rec, SLIMIO_META_RECORD_SIZE - 4));
}

static void resealWal(unsigned char *block) {
    uint32_t used = get32(block + 4);
    if (used > LBA - SLIMIO_WAL_HDR_SIZE) return;
    put32(block + 28, 0);
    uint32_t crc = slimioCrc32c(0, block, SLIMIO_WAL_HDR_SIZE);
    put32(block + 28, slimioCrc32c(crc, block + SLIMIO_WAL_HDR_SIZE, used));
}

static int visit(void *ctx, const unsigned char *payload, uint32_t len) {
    uint64_t *sum = ctx;
    if (len == 0 || len > LBA - SLIMIO_WAL_HDR_SIZE) abort();
    for (uint32_t i = 0; i < len; i++) *sum += payload[i];
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    img = data;
    img_len = size;
    uint8_t flags = data[0];
    memset(meta, 0, sizeof(meta));
    size_t m = size - 1 < sizeof(meta) ? size - 1 : sizeof(meta);
    memcpy(meta, data + 1, m);
    size_t rest = size - 1 - m;
    wal_blocks = (rest + LBA - 1) / LBA;
    wal = calloc(wal_blocks ? wal_blocks : 1, LBA);
    if (rest) memcpy(wal, data + 1 + m, rest);
    if (flags & 1) { resealMeta(meta); resealMeta(meta + LBA); }
    if (flags & 2)
        for (size_t b = 0; b < wal_blocks; b++) resealWal(wal + b * LBA);

    slimioBlockIo io = {NULL, LBA, DEVICE_LBAS, ramRead, ramWrite, ramFlush, NULL};
    slimioMeta md;
    if (slimioMetaLoad(&io, &md) != SLIMIO_OK) goto out;
    /* A record recovery accepts is one whose layout the server then relies on. */
    unsigned char rec[SLIMIO_META_RECORD_SIZE];
    slimioMeta back;
    slimioMetaEncode(&md, rec);
    if (slimioMetaDecode(rec, &back) != SLIMIO_OK) abort();
    if (md.lba_size != LBA || md.device_lbas > DEVICE_LBAS) goto out;   /* the server refuses */
    if (md.slot_start < md.wal_start + md.wal_lbas) abort();

    uint64_t max_gen = md.gens[1].gen ? md.gens[1].gen : md.gens[0].gen;
    if (!md.gens[0].gen) goto out;
    slimioWalGen g = md.gens[0], next;
    uint64_t sum = 0, blocks = 0;
    for (int n = 0; n < MAX_CHAIN; n++) {
        slimioWalEnd end;
        if (g.start_lba < md.wal_start || g.start_lba >= md.wal_start + md.wal_lbas) abort();
        if (slimioWalScan(&io, &md, &g, 0, 7, visit, &sum, &end) != SLIMIO_OK) goto out;
        if (end.blocks > md.wal_lbas) abort();
        if (end.next_lba < md.wal_start || end.next_lba >= md.wal_start + md.wal_lbas) abort();
        blocks += end.blocks;
        /* Each block has one generation and the chain's generations ascend: no LBA can be
         * counted twice, so the chain never holds more blocks than the region. */
        if (blocks > md.wal_lbas) abort();
        int st;
        uint64_t seen;
        int more = slimioWalFollow(&io, &md, &g, &end, max_gen, &next, &st, &seen);
        if (more < 0) goto out;
        if (!more) {
            if (st == SLIMIO_OK) abort();  /* an end always has a reason */
            break;
        }
        if (next.gen <= g.gen || next.gen > max_gen || next.start_seq != 0) abort();
        g = next;
    }
out:
    free(wal);
    wal = NULL;
    return 0;
}
