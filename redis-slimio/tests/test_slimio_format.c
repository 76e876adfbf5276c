/* Unit tests of SlimIO's on-device format: CRC32C, layout, metadata records (alternation,
 * torn and failed writes, failpoints including a real crash in a child process) and the
 * WAL framing and recovery scan (torn tails, stale and corrupt blocks, wrap-around), and
 * the chain of WAL generations (slimioWalSuccessor), the NVMe passthru encoders and
 * discovery parsers (slimio_nvme.h) on data structures laid out as the NVMe spec says, and
 * deallocation (slimio_dealloc.h): the WAL ranges freed around the circular region, the
 * trace-marker line written before each range, the counters, and format's ordering.
 *
 * The device is a RAM disk in shared memory, so a forked child's writes are visible to the
 * parent after the child is killed. Prints "N passed, N failed" and exits non-zero on any
 * failure. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "slimio_crc32c.h"
#include "slimio_dealloc.h"
#include "slimio_failpoint.h"
#include "slimio_format.h"
#include "slimio_nvme.h"

static int passed, failed;
static const char *current;

#define CHECK(cond) do { \
    if (!(cond)) { \
        fprintf(stderr, "FAIL %s: %s:%d: %s\n", current, __FILE__, __LINE__, #cond); \
        failed++; return; \
    } } while (0)
#define RUN(fn) do { int before = failed; current = #fn; fn(); \
    if (failed == before) { passed++; printf("ok %s\n", #fn); } } while (0)

/* --- a RAM disk ------------------------------------------------------------------------ */

typedef struct ramdisk {
    unsigned char *data;
    uint32_t lba_size;
    uint64_t lbas;
    int writes, flushes;
    int fail_write_at;        /* fail the n-th write (1-based) with EIO; 0 = never */
    int torn_write_at;        /* the n-th write only lands its first 100 bytes */
    int dealloc_rc;           /* what deallocate returns instead of deallocating (0: works) */
    int deallocs;
    uint64_t dealloc_lba[8], dealloc_nlb[8];
    int (*on_dealloc)(uint64_t lba, uint64_t nlb);  /* checks at the time of the call */
    int dealloc_rejected;     /* calls on_dealloc found out of order */
} ramdisk;

static int ramRead(void *ctx, uint64_t lba, uint32_t nlb, void *buf) {
    ramdisk *d = ctx;
    if (lba + nlb > d->lbas) return -EINVAL;
    memcpy(buf, d->data + lba * d->lba_size, (size_t)nlb * d->lba_size);
    return 0;
}

static int ramWrite(void *ctx, uint64_t lba, uint32_t nlb, const void *buf, slimioDataKind k) {
    ramdisk *d = ctx;
    (void)k;
    if (lba + nlb > d->lbas) return -EINVAL;
    d->writes++;
    if (d->writes == d->fail_write_at) return -EIO;
    size_t len = (size_t)nlb * d->lba_size;
    if (d->writes == d->torn_write_at) len = 100;
    memcpy(d->data + lba * d->lba_size, buf, len);
    return 0;
}

static int ramFlush(void *ctx) { ((ramdisk *)ctx)->flushes++; return 0; }

/* Deallocated LBAs read as zeroes (an NVMe device with DLFEAT 001b, a punched hole). */
static int ramDeallocate(void *ctx, uint64_t lba, uint64_t nlb) {
    ramdisk *d = ctx;
    if (lba + nlb > d->lbas) return -EINVAL;
    if (d->dealloc_rc) return d->dealloc_rc;
    if (d->on_dealloc && d->on_dealloc(lba, nlb)) {
        d->dealloc_rejected++;
        return -EILSEQ;
    }
    if (d->deallocs < 8) {
        d->dealloc_lba[d->deallocs] = lba;
        d->dealloc_nlb[d->deallocs] = nlb;
    }
    d->deallocs++;
    memset(d->data + lba * d->lba_size, 0, (size_t)nlb * d->lba_size);
    return 1;
}

static ramdisk disk;
static slimioBlockIo io;

static void diskInit(uint32_t lba_size, uint64_t lbas) {
    if (disk.data) munmap(disk.data, disk.lbas * disk.lba_size);
    memset(&disk, 0, sizeof(disk));
    disk.lba_size = lba_size;
    disk.lbas = lbas;
    disk.data = mmap(NULL, lbas * lba_size, PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    io = (slimioBlockIo){&disk, lba_size, lbas, ramRead, ramWrite, ramFlush, ramDeallocate};
}

/* A formatted device: layout planned, record 1 committed (seq 1 at LBA 1). */
static slimioMeta formatted(uint32_t lba_size, uint64_t lbas, uint64_t wal, uint64_t slot) {
    slimioMeta m;
    char err[256];
    diskInit(lba_size, lbas);
    if (slimioLayoutPlan(lbas, lba_size, wal, slot, &m, err, sizeof(err)) != SLIMIO_OK) {
        fprintf(stderr, "layout: %s\n", err);
        abort();
    }
    m.format_id = 0x5eed5eed12345678ULL;
    if (slimioMetaCommit(&io, &m) != 0) abort();
    return m;
}

/* --- CRC ------------------------------------------------------------------------------- */

/* Combining two chunks' CRCs gives the CRC of the whole, checked against the direct
 * computation at every split point of a buffer and across many chunk lengths. */
static void test_crc32c_combine(void) {
    CHECK(slimioCrc32cCombine(slimioCrc32c(0, "12345", 5), slimioCrc32c(0, "6789", 4), 4) ==
          0xE3069283U);
    unsigned char mix[4099];
    for (size_t i = 0; i < sizeof(mix); i++) mix[i] = (unsigned char)(i * 197 + 3);
    uint32_t whole = slimioCrc32c(0, mix, sizeof(mix));
    for (size_t cut = 0; cut <= sizeof(mix); cut += 61)
        CHECK(slimioCrc32cCombine(slimioCrc32c(0, mix, cut), slimioCrc32c(0, mix + cut,
                                  sizeof(mix) - cut), sizeof(mix) - cut) == whole);
    /* Chained chunk by chunk, as a read-ahead stream does. */
    uint32_t crc = 0;
    for (size_t off = 0; off < sizeof(mix); off += 1000) {
        size_t n = sizeof(mix) - off < 1000 ? sizeof(mix) - off : 1000;
        crc = slimioCrc32cCombine(crc, slimioCrc32c(0, mix + off, n), n);
    }
    CHECK(crc == whole);
    CHECK(slimioCrc32cCombine(whole, 0, 0) == whole);
}

static void test_crc32c_check_value(void) {
    static const char *const impls[] = {"table", "sse4.2", "pclmul"};
    CHECK(slimioCrc32c(0, "123456789", 9) == 0xE3069283U);
    uint32_t v;
    CHECK(slimioCrc32cWith("table", 0, "123456789", 9, &v) && v == 0xE3069283U);
    CHECK(!slimioCrc32cWith("none", 0, "123456789", 9, &v));
    /* The one in use is named, and is one of the three. */
    const char *impl = slimioCrc32cImplementation();
    CHECK(strcmp(impl, impls[0]) == 0 || strcmp(impl, impls[1]) == 0 ||
          strcmp(impl, impls[2]) == 0);
#if defined(__x86_64__)
    /* Its speed is among those reported, the table's first. */
    char timed[64];
    snprintf(timed, sizeof(timed), "%s=", impl);
    CHECK(strncmp(slimioCrc32cSpeeds(), "table=", 6) == 0);
    CHECK(strstr(slimioCrc32cSpeeds(), timed) != NULL);
    /* An instruction's implementation only at SLIMIO_CRC32C_MIN_GAIN times the table's
     * speed or more, and then the fastest of those (the speeds are reported rounded to
     * 1 MB/s). */
    double speed[3] = {0, 0, 0}, chosen = 0;
    for (size_t k = 0; k < 3; k++) {
        snprintf(timed, sizeof(timed), "%s=", impls[k]);
        const char *at = strstr(slimioCrc32cSpeeds(), timed);
        if (at) speed[k] = strtod(at + strlen(timed), NULL);
        if (strcmp(impl, impls[k]) == 0) chosen = speed[k];
    }
    CHECK(speed[0] > 0 && chosen > 0);
    if (strcmp(impl, "table") != 0) CHECK(chosen + 1 >= SLIMIO_CRC32C_MIN_GAIN * speed[0]);
    for (size_t k = 1; k < 3; k++)
        if (speed[k] > SLIMIO_CRC32C_MIN_GAIN * speed[0] + 1) CHECK(chosen + 1 >= speed[k]);
#endif
    /* Every implementation the CPU has agrees with the table on every length (across the
     * folding's 16- and 64-byte steps) and alignment, from any starting CRC, chained or
     * not. */
    unsigned char mix[4200];
    for (size_t i = 0; i < sizeof(mix); i++) mix[i] = (unsigned char)(i * 131 + 7 + (i >> 8));
    for (size_t off = 0; off < 9; off++)
        for (size_t len = 0; len + off <= sizeof(mix); len += len < 300 ? 1 : 37) {
            uint32_t a = slimioCrc32c(0, mix + off, len);
            uint32_t table;
            slimioCrc32cWith("table", 0, mix + off, len, &table);
            CHECK(a == table);
            for (size_t k = 0; k < sizeof(impls) / sizeof(impls[0]); k++) {
                uint32_t x, y, seeded;
                if (!slimioCrc32cWith(impls[k], 0, mix + off, len, &x)) continue;
                CHECK(x == table);
                slimioCrc32cWith(impls[k], 0xDEADBEEFU, mix + off, len, &y);
                slimioCrc32cWith("table", 0xDEADBEEFU, mix + off, len, &seeded);
                CHECK(y == seeded);
            }
            CHECK(slimioCrc32c(slimioCrc32c(0, mix + off, len / 2), mix + off + len / 2,
                               len - len / 2) == a);
        }
    CHECK(slimioCrc32c(0, "", 0) == 0);
    char buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (char)(i * 7);
    uint32_t whole = slimioCrc32c(0, buf, sizeof(buf));
    CHECK(slimioCrc32c(slimioCrc32c(0, buf, 333), buf + 333, 667) == whole);
}

/* --- layout ---------------------------------------------------------------------------- */

static void test_layout_regions_are_aligned_and_disjoint(void) {
    slimioMeta m;
    char err[256];
    CHECK(slimioLayoutPlan(1 << 20, 4096, 64 << 20, 256 << 20, &m, err, sizeof(err)) == 0);
    uint64_t align = SLIMIO_ALIGN_BYTES / 4096;
    CHECK(m.wal_start == align && m.wal_lbas % align == 0);
    CHECK(m.wal_lbas * slimioWalPayload(4096) >= (64u << 20));
    CHECK(m.slot_start == m.wal_start + m.wal_lbas && m.slot_lbas * 4096 >= (256u << 20));
    CHECK(slimioSlotLba(&m, 2) + m.slot_lbas <= m.device_lbas);
    CHECK(m.slots[0].role == SLIMIO_ROLE_WAL_SNAPSHOT && m.slots[1].role == SLIMIO_ROLE_RESERVE
          && m.slots[2].role == SLIMIO_ROLE_ON_DEMAND);
    CHECK(m.placement[SLIMIO_KIND_WAL] == SLIMIO_NO_PLACEMENT);
}

static void test_layout_refuses_a_small_device_naming_both_sizes(void) {
    slimioMeta m;
    char err[256] = "";
    CHECK(slimioLayoutPlan(1000, 4096, 64 << 20, 256 << 20, &m, err, sizeof(err))
          == SLIMIO_ERR_TOOSMALL);
    CHECK(strstr(err, "has 1000 LBAs") && strstr(err, "needs"));
    CHECK(slimioLayoutPlan(1 << 20, 1000, 1, 1, &m, err, sizeof(err)) == SLIMIO_ERR_FIELDS);
    CHECK(strstr(err, "LBA size 1000"));
}

/* --- metadata -------------------------------------------------------------------------- */

static void test_meta_roundtrip(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20), d;
    m.slots[1].valid = 1;
    m.slots[1].length = 12345;
    m.slots[1].crc = 0xabcdef01;
    m.gens[0] = (slimioWalGen){7, m.wal_start + 5, 1000};
    m.placement[SLIMIO_KIND_WAL] = 1;
    unsigned char rec[SLIMIO_META_RECORD_SIZE];
    slimioMetaEncode(&m, rec);
    CHECK(slimioMetaDecode(rec, &d) == SLIMIO_OK);
    CHECK(memcmp(&m.slots, &d.slots, sizeof(m.slots)) == 0);
    CHECK(memcmp(&m.gens, &d.gens, sizeof(m.gens)) == 0);
    CHECK(d.format_id == m.format_id && d.placement[SLIMIO_KIND_WAL] == 1);
    CHECK(d.placement[SLIMIO_KIND_ON_DEMAND] == SLIMIO_NO_PLACEMENT);
}

static void test_meta_decode_rejects_damage(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20), d;
    unsigned char rec[SLIMIO_META_RECORD_SIZE];
    slimioMetaEncode(&m, rec);
    rec[100] ^= 1;
    CHECK(slimioMetaDecode(rec, &d) == SLIMIO_ERR_CRC);
    slimioMetaEncode(&m, rec);
    rec[0] = 'X';
    CHECK(slimioMetaDecode(rec, &d) == SLIMIO_ERR_MAGIC);
    m.slots[2].role = SLIMIO_ROLE_RESERVE;  /* two Reserve slots */
    slimioMetaEncode(&m, rec);
    CHECK(slimioMetaDecode(rec, &d) == SLIMIO_ERR_FIELDS);
}

static void test_meta_records_alternate_and_newest_wins(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20), got;
    CHECK(m.seq == 1 && disk.flushes == 1);
    m.slots[0].valid = 1;
    CHECK(slimioMetaCommit(&io, &m) == 0 && m.seq == 2);   /* LBA 0 */
    m.slots[0].length = 99;
    CHECK(slimioMetaCommit(&io, &m) == 0 && m.seq == 3);   /* LBA 1 again */
    CHECK(slimioMetaLoad(&io, &got) == 0 && got.seq == 3 && got.slots[0].length == 99);
    /* Lose the newest record: the previous state (seq 2) comes back. */
    memset(disk.data + 1 * 4096, 0, 4096);
    CHECK(slimioMetaLoad(&io, &got) == 0 && got.seq == 2 && got.slots[0].length == 0);
}

static void test_meta_torn_or_failed_write_keeps_previous_state(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20), got;
    m.slots[1].length = 1;
    CHECK(slimioMetaCommit(&io, &m) == 0);                 /* seq 2 */
    slimioMeta before = m;
    m.slots[1].length = 2;
    disk.torn_write_at = disk.writes + 1;
    CHECK(slimioMetaCommit(&io, &m) == 0);                 /* seq 3 lands half */
    CHECK(slimioMetaLoad(&io, &got) == 0 && got.seq == 2 && got.slots[1].length == 1);
    disk.torn_write_at = 0;
    m = before;
    m.slots[1].length = 3;
    disk.fail_write_at = disk.writes + 1;
    CHECK(slimioMetaCommit(&io, &m) == -EIO && m.seq == before.seq);
    CHECK(slimioMetaLoad(&io, &got) == 0 && got.seq == 2);
}

static void test_meta_blank_and_foreign_devices(void) {
    slimioMeta got;
    diskInit(4096, 1 << 12);
    CHECK(slimioMetaLoad(&io, &got) == SLIMIO_ERR_NOMETA);
    memcpy(disk.data, "\x53\xef", 2);   /* anything that is not ours */
    CHECK(slimioMetaLoad(&io, &got) == SLIMIO_ERR_NOMETA);
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20);
    disk.data[1 * 4096 + 200] ^= 0xff;   /* our magic, damaged */
    CHECK(slimioMetaLoad(&io, &got) == SLIMIO_ERR_CRC);
    (void)m;
}

static void test_meta_lba_size_mismatch_is_refused(void) {
    /* A record written for 4096-byte LBAs, found on a namespace now formatted with 512. */
    formatted(4096, 1 << 16, 8 << 20, 32 << 20);
    unsigned char rec[SLIMIO_META_RECORD_SIZE];
    memcpy(rec, disk.data + 4096, sizeof(rec));
    diskInit(512, 1 << 19);
    memcpy(disk.data + 512, rec, sizeof(rec));
    slimioMeta got;
    CHECK(slimioMetaLoad(&io, &got) == SLIMIO_ERR_FIELDS);
}

static void test_format_erases_records_of_an_earlier_format(void) {
    slimioMeta old = formatted(4096, 1 << 16, 8 << 20, 32 << 20), got, fresh;
    for (int i = 0; i < 5; i++) slimioMetaCommit(&io, &old);       /* old seq 6 at LBA 0 */
    char err[256];
    CHECK(slimioLayoutPlan(1 << 16, 4096, 16 << 20, 32 << 20, &fresh, err, sizeof(err)) == 0);
    fresh.format_id = 42;
    CHECK(slimioFormatDevice(&io, &fresh, NULL) == 0 && fresh.seq == 1);
    CHECK(slimioMetaLoad(&io, &got) == 0 && got.format_id == 42 && got.seq == 1);
    CHECK(got.wal_lbas == fresh.wal_lbas);
}

/* --- failpoints ------------------------------------------------------------------------ */

static void test_failpoint_spec_errors_name_the_entry(void) {
    char err[256];
    CHECK(slimioFailpointSet("meta.before-writ", err, sizeof(err)) == -1);
    CHECK(strstr(err, "unknown failpoint 'meta.before-writ'"));
    CHECK(slimioFailpointSet("meta.after-write=explode", err, sizeof(err)) == -1);
    CHECK(strstr(err, "unknown action 'explode'"));
    CHECK(slimioFailpointSet("meta.after-write@0", err, sizeof(err)) == -1);
    CHECK(slimioFailpointSet("wal.append=delay:", err, sizeof(err)) == -1);
    CHECK(strstr(err, "delay:<microseconds"));
    CHECK(slimioFailpointSet("wal.append=delay:0", err, sizeof(err)) == -1);
    CHECK(slimioFailpointSet("wal.append=delay:5x", err, sizeof(err)) == -1);
    CHECK(slimioFailpointSet("wal.append=delay:-5", err, sizeof(err)) == -1);
    CHECK(slimioFailpointSet("", err, sizeof(err)) == 0);
}

/* The delay action sleeps at the call site and then lets it go on. */
static void test_failpoint_delay_sleeps_and_goes_on(void) {
    char err[256];
    struct timespec t0, t1;
    CHECK(slimioFailpointSet("wal.append=delay:20000", err, sizeof(err)) == 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(slimioFailpoint(SLIMIO_FP_WAL_APPEND) == 0);
    CHECK(slimioFailpoint(SLIMIO_FP_WAL_APPEND) == 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double slept = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(slept >= 0.040);                                          /* 2 x 20 ms */
    CHECK(slimioFailpointHits(SLIMIO_FP_WAL_APPEND) == 2);
    CHECK(slimioFailpoint(SLIMIO_FP_META_BEFORE_WRITE) == 0);       /* others untouched */
    CHECK(slimioFailpointSet("", err, sizeof(err)) == 0);
}

static void test_failpoint_error_action_and_hit_counting(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20), got;
    char err[256];
    CHECK(slimioFailpointSet("meta.before-write=error@2", err, sizeof(err)) == 0);
    CHECK(slimioMetaCommit(&io, &m) == 0 && m.seq == 2);          /* hit 1: passes */
    int writes = disk.writes;
    CHECK(slimioMetaCommit(&io, &m) == -EIO && m.seq == 2);       /* hit 2: fails */
    CHECK(disk.writes == writes);                                   /* nothing written */
    CHECK(slimioFailpointHits(SLIMIO_FP_META_BEFORE_WRITE) == 2);
    CHECK(slimioMetaLoad(&io, &got) == 0 && got.seq == 2);
    CHECK(slimioFailpointSet("", err, sizeof(err)) == 0);
}

/* Kill a child with the crash action at each metadata step; the parent must load a valid
 * record: the old one before the write, either one after it. */
static void test_failpoint_crash_leaves_a_valid_record(void) {
    static const char *specs[] = {"meta.before-write", "meta.after-write",
                                  "meta.after-flush"};
    for (int s = 0; s < 3; s++) {
        slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20), got;
        m.slots[0].length = 1;
        CHECK(slimioMetaCommit(&io, &m) == 0);                      /* seq 2 */
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            char err[256];
            int devnull = open("/dev/null", O_WRONLY);
            dup2(devnull, 2);
            if (slimioFailpointSet(specs[s], err, sizeof(err))) _exit(2);
            m.slots[0].length = 2;
            slimioMetaCommit(&io, &m);
            _exit(0);                                                /* not reached */
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        CHECK(slimioMetaLoad(&io, &got) == 0);
        if (s == 0) CHECK(got.seq == 2 && got.slots[0].length == 1);
        else CHECK(got.seq == 3 && got.slots[0].length == 2);
    }
}

/* --- WAL ------------------------------------------------------------------------------- */

typedef struct collected { unsigned char *data; size_t len, cap; int fail_after; } collected;

static int collect(void *ctx, const unsigned char *p, uint32_t len) {
    collected *c = ctx;
    if (c->fail_after && --c->fail_after == 0) return 42;
    if (c->len + len > c->cap) return 99;
    memcpy(c->data + c->len, p, len);
    c->len += len;
    return 0;
}

/* Append bytes [0, len) of a deterministic stream to generation g as the writer would:
 * full blocks, then a partial tail. Returns the number of blocks. */
static uint64_t walWrite(const slimioMeta *m, const slimioWalGen *g, size_t len) {
    uint32_t cap = slimioWalPayload(m->lba_size);
    unsigned char *block = malloc(m->lba_size);
    uint64_t i = 0;
    for (size_t off = 0; off < len; off += cap, i++) {
        uint32_t used = (uint32_t)(len - off < cap ? len - off : cap);
        for (uint32_t b = 0; b < used; b++) block[SLIMIO_WAL_HDR_SIZE + b] = (unsigned char)((off + b) * 31 + 7);
        slimioWalBlockSeal(block, m->lba_size, g->gen, g->start_seq + i, m->format_id, used);
        ramWrite(&disk, slimioWalLba(m, g->start_lba, i), 1, block, SLIMIO_KIND_WAL);
    }
    free(block);
    return i;
}

static int streamMatches(const collected *c, size_t len) {
    if (c->len != len) return 0;
    for (size_t b = 0; b < len; b++)
        if (c->data[b] != (unsigned char)(b * 31 + 7)) return 0;
    return 1;
}

static void test_wal_scan_reads_back_every_byte(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20);
    slimioWalGen g = {3, m.wal_start, 100};
    size_t len = 10 * slimioWalPayload(4096) + 123;
    CHECK(walWrite(&m, &g, len) == 11);
    uint32_t batches[] = {1, 3, 64};
    for (int b = 0; b < 3; b++) {
        collected c = {malloc(len + 4096), 0, len + 4096, 0};
        slimioWalEnd end;
        CHECK(slimioWalScan(&io, &m, &g, 0, batches[b], collect, &c, &end) == 0);
        CHECK(streamMatches(&c, len) && end.bytes == len && end.blocks == 11);
        CHECK(end.tail_used == 123 && end.next_seq == 110 && end.next_lba == m.wal_start + 10);
        CHECK(end.stop == SLIMIO_OK);
        free(c.data);
    }
}

static void test_wal_scan_stops_at_torn_tail(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20);
    slimioWalGen g = {1, m.wal_start, 0};
    uint32_t cap = slimioWalPayload(4096);
    walWrite(&m, &g, 5 * cap);
    disk.data[(m.wal_start + 4) * 4096 + 2000] ^= 0x40;     /* a torn last block */
    slimioWalEnd end;
    CHECK(slimioWalScan(&io, &m, &g, 0, 8, NULL, NULL, &end) == 0);
    CHECK(end.blocks == 4 && end.bytes == 4 * (uint64_t)cap && end.stop == SLIMIO_ERR_CRC);
    CHECK(end.next_lba == m.wal_start + 4 && end.next_seq == 4 && end.tail_used == 0);
}

static void test_wal_scan_stops_at_stale_blocks(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20);
    uint32_t cap = slimioWalPayload(4096);
    slimioWalGen old = {1, m.wal_start, 0}, cur = {2, m.wal_start, 0};
    walWrite(&m, &old, 8 * cap);            /* an older generation fills blocks 0..7 */
    walWrite(&m, &cur, 3 * cap);            /* the live one overwrote blocks 0..2 */
    slimioWalEnd end;
    CHECK(slimioWalScan(&io, &m, &cur, 0, 4, NULL, NULL, &end) == 0);
    CHECK(end.blocks == 3 && end.stop == SLIMIO_ERR_GEN);
    /* Same generation, older lap: the sequence number gives it away. */
    slimioWalGen lap = {5, m.wal_start, 0};
    walWrite(&m, &lap, 8 * cap);
    slimioWalGen relap = {5, m.wal_start, 8};
    walWrite(&m, &relap, 2 * cap);
    CHECK(slimioWalScan(&io, &m, &relap, 0, 4, NULL, NULL, &end) == 0);
    CHECK(end.blocks == 2 && end.stop == SLIMIO_ERR_SEQ);
}

static void test_wal_scan_rejects_corrupt_and_foreign_blocks(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20);
    uint32_t cap = slimioWalPayload(4096);
    slimioWalGen g = {1, m.wal_start, 0};
    walWrite(&m, &g, 4 * cap);
    slimioWalEnd end;
    memset(disk.data + (m.wal_start + 1) * 4096, 0, 4096);          /* zeroed block */
    CHECK(slimioWalScan(&io, &m, &g, 0, 4, NULL, NULL, &end) == 0);
    CHECK(end.blocks == 1 && end.stop == SLIMIO_ERR_MAGIC);
    walWrite(&m, &g, 4 * cap);
    slimioMeta other = m;
    other.format_id ^= 1;                                              /* a re-format */
    CHECK(slimioWalScan(&io, &other, &g, 0, 4, NULL, NULL, &end) == 0);
    CHECK(end.blocks == 0 && end.stop == SLIMIO_ERR_FORMAT_ID);
    /* used beyond the payload capacity is refused before any CRC is computed over it */
    unsigned char *b = disk.data + (m.wal_start + 2) * 4096;
    b[4] = 0xff; b[5] = 0xff;
    CHECK(slimioWalScan(&io, &m, &g, 0, 4, NULL, NULL, &end) == 0);
    CHECK(end.blocks == 2 && end.stop == SLIMIO_ERR_USED);
}

static void test_wal_scan_wraps_around_the_region(void) {
    slimioMeta m = formatted(512, 1 << 16, 1 << 20, 1 << 20);
    uint32_t cap = slimioWalPayload(512);
    slimioWalGen g = {9, m.wal_start + m.wal_lbas - 3, 77};
    size_t len = 7 * (size_t)cap + 5;
    walWrite(&m, &g, len);
    collected c = {malloc(len), 0, len, 0};
    slimioWalEnd end;
    CHECK(slimioWalScan(&io, &m, &g, 0, 16, collect, &c, &end) == 0);
    CHECK(streamMatches(&c, len) && end.blocks == 8);
    CHECK(end.next_lba == m.wal_start + 4 && end.tail_used == 5);
    free(c.data);
}

static void test_wal_scan_honours_limits_and_visitor_errors(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20);
    uint32_t cap = slimioWalPayload(4096);
    slimioWalGen g = {1, m.wal_start, 0};
    walWrite(&m, &g, 10 * cap);
    slimioWalEnd end;
    CHECK(slimioWalScan(&io, &m, &g, 4, 3, NULL, NULL, &end) == 0);
    CHECK(end.blocks == 4 && end.next_seq == 4);
    collected c = {malloc(10 * cap), 0, 10 * cap, 3};
    CHECK(slimioWalScan(&io, &m, &g, 0, 3, collect, &c, &end) == 42);
    CHECK(end.blocks == 2);
    free(c.data);
}

/* --- the chain of WAL generations ------------------------------------------------------ */

/* Write len bytes of data as generation g: full blocks, then a partial tail. Returns the
 * number of blocks. */
static uint64_t walWriteBytes(const slimioMeta *m, const slimioWalGen *g,
                              const unsigned char *data, size_t len) {
    uint32_t cap = slimioWalPayload(m->lba_size);
    unsigned char *block = malloc(m->lba_size);
    uint64_t i = 0;
    for (size_t off = 0; off < len; off += cap, i++) {
        uint32_t used = (uint32_t)(len - off < cap ? len - off : cap);
        memcpy(block + SLIMIO_WAL_HDR_SIZE, data + off, used);
        slimioWalBlockSeal(block, m->lba_size, g->gen, g->start_seq + i, m->format_id, used);
        ramWrite(&disk, slimioWalLba(m, g->start_lba, i), 1, block, SLIMIO_KIND_WAL);
    }
    free(block);
    return i;
}

/* One block of generation gen, sequence seq, for format_id, at lba. */
static void walWriteBlock(const slimioMeta *m, uint64_t lba, uint64_t gen, uint64_t seq,
                          uint64_t format_id) {
    unsigned char *block = calloc(1, m->lba_size);
    memset(block + SLIMIO_WAL_HDR_SIZE, 'x', 100);
    slimioWalBlockSeal(block, m->lba_size, gen, seq, format_id, 100);
    ramWrite(&disk, lba, 1, block, SLIMIO_KIND_WAL);
    free(block);
}

/* Where the generation after g starts, from a scan of g. */
static slimioWalGen successorOf(const slimioMeta *m, const slimioWalGen *g,
                                slimioWalEnd *end) {
    slimioWalGen next;
    if (slimioWalScan(&io, m, g, 0, 4, NULL, NULL, end) != 0) abort();
    slimioWalSuccessor(m, g, end, &next);
    return next;
}

/* Follow the chain of generations from first as recovery does: scan each one to its valid
 * end, continue with the generation slimioWalFollow finds at its successor position (any
 * generation above it up to max_gen whose block 0 is there). Fills out[] with up to max
 * generations, collects the payloads into c (if not NULL), and *why is the check result
 * that ended the chain. Returns the number of generations. */
static int chainFollow(const slimioMeta *m, const slimioWalGen *first, uint64_t max_gen,
                       collected *c, slimioWalGen *out, int max, int *why) {
    slimioWalGen g = *first;
    int n = 0;
    *why = SLIMIO_OK;
    while (n < max) {
        slimioWalEnd end;
        if (slimioWalScan(&io, m, &g, 0, 3, c ? collect : NULL, c, &end) != 0) break;
        out[n++] = g;
        slimioWalGen next;
        if (slimioWalFollow(&io, m, &g, &end, max_gen, &next, why, NULL) != 1) break;
        g = next;
    }
    return n;
}

static void test_wal_successor_after_full_block_and_partial_tail(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20);
    uint32_t cap = slimioWalPayload(4096);
    slimioWalEnd end;
    /* Ends with a full block: the successor starts on the next LBA. */
    slimioWalGen g = {3, m.wal_start + 10, 0};
    CHECK(walWrite(&m, &g, 4 * (size_t)cap) == 4);
    slimioWalGen next = successorOf(&m, &g, &end);
    CHECK(end.blocks == 4 && end.tail_used == 0 && end.next_lba == m.wal_start + 14);
    CHECK(next.gen == 4 && next.start_lba == m.wal_start + 14 && next.start_seq == 0);
    /* Ends with a partial tail (rewritten in place as it grows): the successor starts after
     * the tail block, never on it. */
    diskInit(4096, 1 << 16);
    CHECK(slimioMetaCommit(&io, &m) == 0);
    CHECK(walWrite(&m, &g, 3 * (size_t)cap + 17) == 4);
    next = successorOf(&m, &g, &end);
    CHECK(end.blocks == 4 && end.tail_used == 17 && end.next_lba == m.wal_start + 13);
    CHECK(next.gen == 4 && next.start_lba == m.wal_start + 14 && next.start_seq == 0);
    /* A torn last block is not part of g: the successor overwrites it. */
    disk.data[(m.wal_start + 13) * 4096 + 40] ^= 1;
    next = successorOf(&m, &g, &end);
    CHECK(end.blocks == 3 && end.stop == SLIMIO_ERR_CRC && end.tail_used == 0);
    CHECK(next.start_lba == m.wal_start + 13);
    /* A generation with no valid block: its successor starts where it would have. */
    slimioWalGen empty = {9, m.wal_start + 100, 0};
    next = successorOf(&m, &empty, &end);
    CHECK(end.blocks == 0 && next.gen == 10 && next.start_lba == m.wal_start + 100);
}

static void test_wal_successor_wraps_around_the_region(void) {
    slimioMeta m = formatted(512, 1 << 16, 1 << 20, 1 << 20);
    uint32_t cap = slimioWalPayload(512);
    uint64_t last = m.wal_start + m.wal_lbas - 1;
    slimioWalEnd end;
    slimioWalGen full = {2, last - 1, 0};       /* two full blocks end on the last LBA */
    walWrite(&m, &full, 2 * (size_t)cap);
    slimioWalGen next = successorOf(&m, &full, &end);
    CHECK(end.blocks == 2 && end.tail_used == 0 && next.start_lba == m.wal_start);
    slimioWalGen tail = {5, last - 1, 0};       /* a partial tail on the last LBA */
    walWrite(&m, &tail, (size_t)cap + 9);
    next = successorOf(&m, &tail, &end);
    CHECK(end.blocks == 2 && end.tail_used == 9 && end.next_lba == last);
    CHECK(next.gen == 6 && next.start_lba == m.wal_start);
}

/* Generations 4, 5 and 6 written back to back across the end of the region, as a writer
 * opens each after the previous one drained; only 4 and 6 are in the metadata (5 was
 * opened by a rewrite that failed, its entry replaced by 6). Recovery follows the chain
 * from gens[0] and gets the whole stream, in order. */
static void test_wal_chain_follows_an_unlisted_middle_generation(void) {
    slimioMeta m = formatted(512, 1 << 16, 1 << 20, 1 << 20), got;
    uint32_t cap = slimioWalPayload(512);
    size_t lens[3] = {2 * (size_t)cap + 100, 3 * (size_t)cap, (size_t)cap + 33};
    size_t total = lens[0] + lens[1] + lens[2];
    unsigned char *stream = malloc(total);
    for (size_t b = 0; b < total; b++) stream[b] = (unsigned char)(b * 131 + b / 7);
    slimioWalGen g = {4, m.wal_start + m.wal_lbas - 2, 0}, written[3];
    size_t off = 0;
    for (int k = 0; k < 3; k++) {
        if (k) {
            slimioWalEnd end;
            g = successorOf(&m, &g, &end);
        }
        written[k] = g;
        walWriteBytes(&m, &g, stream + off, lens[k]);
        off += lens[k];
    }
    CHECK(written[1].start_lba == m.wal_start + 1);     /* after gen 4's tail, wrapped */
    CHECK(written[2].start_lba == m.wal_start + 4);     /* right after gen 5's full block */
    m.gens[0] = written[0];
    m.gens[1] = written[2];
    CHECK(slimioMetaCommit(&io, &m) == 0);
    CHECK(slimioMetaLoad(&io, &got) == 0 && got.gens[0].gen == 4 && got.gens[1].gen == 6);
    collected c = {malloc(total), 0, total, 0};
    slimioWalGen chain[8];
    int why;
    int n = chainFollow(&got, &got.gens[0], 6, &c, chain, 8, &why);
    CHECK(n == 3 && why == SLIMIO_ERR_MAGIC);           /* gen 7's place is blank */
    for (int k = 0; k < 3; k++)
        CHECK(chain[k].gen == written[k].gen && chain[k].start_lba == written[k].start_lba);
    CHECK(chain[2].start_lba == got.gens[1].start_lba);  /* the chain meets the listed 6 */
    CHECK(c.len == total && memcmp(c.data, stream, total) == 0);
    /* From the listed gen 6 alone: its own bytes only. */
    c.len = 0;
    CHECK(chainFollow(&got, &got.gens[1], 6, &c, chain, 8, &why) == 1);
    CHECK(c.len == lens[2] && memcmp(c.data, stream + lens[0] + lens[1], lens[2]) == 0);
    free(c.data);
    free(stream);
}

/* The chain ends where the successor's first block is not block 0 of a generation above g
 * and at most the newest listed one: a stale block of an older generation, a block of a
 * later lap or of another format. */
static void test_wal_chain_ends_at_a_stale_or_foreign_successor(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20);
    uint32_t cap = slimioWalPayload(4096);
    slimioWalGen old = {1, m.wal_start, 0}, cur = {2, m.wal_start, 0}, chain[8];
    walWrite(&m, &old, 8 * (size_t)cap);        /* an older lap fills blocks 0..7 */
    walWrite(&m, &cur, 2 * (size_t)cap + 5);    /* gen 2 overwrote 0..2, tail on 2 */
    int why;
    CHECK(chainFollow(&m, &cur, 3, NULL, chain, 8, &why) == 1 && why == SLIMIO_ERR_GEN);
    uint64_t at = m.wal_start + 3;              /* gen 3 would start here */
    walWriteBlock(&m, at, 3, 7, m.format_id);   /* gen 3, but not its first block */
    CHECK(chainFollow(&m, &cur, 3, NULL, chain, 8, &why) == 1 && why == SLIMIO_ERR_SEQ);
    walWriteBlock(&m, at, 4, 0, m.format_id);   /* a generation too far */
    CHECK(chainFollow(&m, &cur, 3, NULL, chain, 8, &why) == 1 && why == SLIMIO_ERR_GEN);
    walWriteBlock(&m, at, 3, 0, m.format_id ^ 1);   /* left by an earlier format */
    CHECK(chainFollow(&m, &cur, 3, NULL, chain, 8, &why) == 1 && why == SLIMIO_ERR_FORMAT_ID);
    walWriteBlock(&m, at, 3, 0, m.format_id);   /* the real gen 3: the chain goes on */
    CHECK(chainFollow(&m, &cur, 3, NULL, chain, 8, &why) == 2);
    CHECK(chain[1].gen == 3 && chain[1].start_lba == at && why == SLIMIO_ERR_GEN);
}

/* Generations that never wrote a block leave their position to the next one: after gen 1,
 * gens 2 (a restart) and 3 (a rewrite at once) both began at P and only 3 wrote; gens 4 and
 * 5 both began after 3 and neither wrote. The chain is 1, 3 and ends where 4 and 5 would
 * begin; the block of a generation newer than the newest listed one is not followed. */
static void test_wal_chain_skips_generations_that_never_wrote(void) {
    slimioMeta m = formatted(4096, 1 << 16, 8 << 20, 32 << 20);
    uint32_t cap = slimioWalPayload(4096);
    slimioWalGen g1 = {1, m.wal_start, 0}, chain[8];
    walWrite(&m, &g1, 2 * (size_t)cap + 9);
    slimioWalEnd end;
    slimioWalGen p = successorOf(&m, &g1, &end);        /* gen 2's place: empty */
    slimioWalGen g3 = {3, p.start_lba, 0};
    walWrite(&m, &g3, (size_t)cap);                     /* a full block: 4 begins after it */
    slimioWalGen p4 = successorOf(&m, &g3, &end);
    CHECK(p4.start_lba == p.start_lba + 1);
    int why;
    CHECK(chainFollow(&m, &g1, 5, NULL, chain, 8, &why) == 2);
    CHECK(chain[1].gen == 3 && chain[1].start_lba == p.start_lba && why == SLIMIO_ERR_MAGIC);
    /* The newest listed generation is 2: gen 3's block cannot be part of this log. */
    CHECK(chainFollow(&m, &g1, 2, NULL, chain, 8, &why) == 1 && why == SLIMIO_ERR_GEN);
    /* A block 0 of gen 6 where 4 and 5 would begin, but 5 is the newest listed: stale. */
    walWriteBlock(&m, p4.start_lba, 6, 0, m.format_id);
    CHECK(chainFollow(&m, &g1, 5, NULL, chain, 8, &why) == 2 && why == SLIMIO_ERR_GEN);
    /* Gen 5 wrote there after all: the log goes on with it. */
    walWriteBlock(&m, p4.start_lba, 5, 0, m.format_id);
    CHECK(chainFollow(&m, &g1, 5, NULL, chain, 8, &why) == 3 && chain[2].gen == 5);
}

/* --- NVMe passthru: encoding and discovery parsers -------------------------------------- */

static void test_nvme_write_encodes_fdp_placement_and_fua(void) {
    slimioNvmeRw w = slimioNvmeEncodeRw(SLIMIO_NVME_OP_WRITE, 0x123456789ull, 256, 2, 1);
    CHECK(w.opcode == 0x01);
    CHECK(w.cdw10 == 0x23456789u && w.cdw11 == 0x1);
    CHECK((w.cdw12 & 0xffff) == 255);               /* NLB is 0-based */
    CHECK(((w.cdw12 >> 20) & 0xf) == 2);            /* DTYPE = data placement */
    CHECK((w.cdw12 >> 30) & 1);                     /* FUA */
    CHECK(w.cdw13 == 2u << 16);                     /* DSPEC = placement id */
    /* As the guest's nvme_setup_cmd trace shows it: ctrl=0x20 (DTYPE), dsmgmt=131072. */
    CHECK(((w.cdw12 >> 16) & 0xffff) == 0x4020);
    slimioNvmeRw n = slimioNvmeEncodeRw(SLIMIO_NVME_OP_WRITE, 8, 1, SLIMIO_NO_PLACEMENT, 0);
    CHECK(n.cdw12 == 0 && n.cdw13 == 0);            /* no directive, no FUA, one LBA */
    slimioNvmeRw r = slimioNvmeEncodeRw(SLIMIO_NVME_OP_READ, 0, 8, SLIMIO_NO_PLACEMENT, 0);
    CHECK(r.opcode == 0x02 && r.cdw12 == 7);
}

static void test_nvme_identify_parsers_read_the_spec_offsets(void) {
    unsigned char ns[4096] = {0}, ctrl[4096] = {0};
    slimioNvmeInfo info;
    memset(&info, 0, sizeof(info));
    ns[0] = 0x00; ns[1] = 0x00; ns[2] = 0x20;       /* NSZE = 0x200000 LBAs */
    ns[26] = 1;                                     /* FLBAS: format 1 */
    ns[128 + 4 * 0 + 2] = 9;                        /* LBAF0: 512 bytes */
    ns[128 + 4 * 1 + 2] = 12;                       /* LBAF1: 4096 bytes, no metadata */
    ns[102] = 1;                                    /* ENDGID 1 */
    slimioNvmeParseIdNs(ns, &info);
    CHECK(info.lbas == 0x200000 && info.lba_size == 4096 && info.metadata_size == 0);
    CHECK(info.endgid == 1);
    ns[128 + 4 * 1] = 8;                            /* LBAF1 with 8 bytes of metadata */
    slimioNvmeParseIdNs(ns, &info);
    CHECK(info.metadata_size == 8);
    ctrl[77] = 7;                                   /* MDTS: 2^7 pages */
    ctrl[96 + 2] = 0x08;                            /* CTRATT bit 19: FDP supported */
    ctrl[525] = 1;                                  /* VWC present */
    slimioNvmeParseIdCtrl(ctrl, &info);
    CHECK(info.mdts_bytes == 512 * 1024 && info.fdp_supported && info.vwc);
    ctrl[96 + 2] = 0;
    ctrl[525] = 0;
    ctrl[77] = 0;
    slimioNvmeParseIdCtrl(ctrl, &info);
    CHECK(!info.fdp_supported && !info.vwc && info.mdts_bytes == 0);
}

static void test_nvme_ruh_status_lists_placement_ids(void) {
    unsigned char buf[16 + 32 * 4] = {0};
    slimioNvmeInfo info;
    memset(&info, 0, sizeof(info));
    buf[14] = 3;                                    /* NRUHSD */
    for (int i = 0; i < 3; i++) {
        buf[16 + 32 * i] = (unsigned char)(i * 2);  /* PID */
        buf[16 + 32 * i + 2] = (unsigned char)i;    /* RUHID */
    }
    CHECK(slimioNvmeParseRuhStatus(buf, sizeof(buf), &info) == 3);
    CHECK(info.npids == 3 && info.pids[0] == 0 && info.pids[1] == 2 && info.pids[2] == 4);
    buf[14] = 9;                                    /* announces more than the buffer holds */
    CHECK(slimioNvmeParseRuhStatus(buf, sizeof(buf), &info) == -1);
}

static void test_nvme_placement_check_names_the_problem(void) {
    slimioNvmeInfo info;
    memset(&info, 0, sizeof(info));
    info.fdp_supported = 1;
    info.endgid = 1;
    info.npids = 8;
    for (int i = 0; i < 8; i++) info.pids[i] = (uint16_t)i;
    const char *const names[SLIMIO_KINDS] = {"m", "slimio-placement-wal", "ws", "od"};
    int none[SLIMIO_KINDS] = {-1, -1, -1, -1}, want[SLIMIO_KINDS] = {-1, 1, 3, 2};
    char err[512];
    CHECK(slimioNvmeCheckPlacement(&info, "/dev/ng0n1", none, names, err, sizeof(err)) == 0);
    CHECK(slimioNvmeCheckPlacement(&info, "/dev/ng0n1", want, names, err, sizeof(err)) == -1);
    CHECK(strstr(err, "slimio-placement-wal 1") && strstr(err, "FDP is disabled"));
    info.fdp_enabled = 1;
    CHECK(slimioNvmeCheckPlacement(&info, "/dev/ng0n1", want, names, err, sizeof(err)) == 0);
    want[1] = 9;
    CHECK(slimioNvmeCheckPlacement(&info, "/dev/ng0n1", want, names, err, sizeof(err)) == -1);
    CHECK(strstr(err, "slimio-placement-wal 9 is not a placement id") &&
          strstr(err, "0, 1, 2, 3, 4, 5, 6, 7"));
    info.fdp_supported = 0;
    want[1] = 1;
    CHECK(slimioNvmeCheckPlacement(&info, "/dev/ng0n1", want, names, err, sizeof(err)) == -1);
    CHECK(strstr(err, "does not support FDP"));
    CHECK(slimioNvmeIsGenericPath("/dev/ng0n1") && slimioNvmeIsGenericPath("ng12n3"));
    CHECK(!slimioNvmeIsGenericPath("/dev/nvme0n1") && !slimioNvmeIsGenericPath("/dev/ng0n1p1"));
}

/* --- deallocation ------------------------------------------------------------------------ */

static void test_wal_free_ranges_wrap_around_the_region(void) {
    slimioMeta m;
    memset(&m, 0, sizeof(m));
    m.wal_start = 256;
    m.wal_lbas = 1000;                              /* LBAs 256..1255 */
    slimioLbaRange r[2];
    CHECK(slimioWalFreeRanges(&m, 300, 300, r) == 0);           /* nothing between */
    CHECK(slimioWalFreeRanges(&m, 300, 700, r) == 1);
    CHECK(r[0].lba == 300 && r[0].nlb == 400);
    CHECK(slimioWalFreeRanges(&m, 256, 1255, r) == 1);
    CHECK(r[0].lba == 256 && r[0].nlb == 999);                  /* never the live start */
    CHECK(slimioWalFreeRanges(&m, 1200, 310, r) == 2);          /* wraps */
    CHECK(r[0].lba == 1200 && r[0].nlb == 56 && r[1].lba == 256 && r[1].nlb == 54);
    CHECK(r[0].nlb + r[1].nlb == (310 + 1000 - 1200));
    CHECK(slimioWalFreeRanges(&m, 1200, 256, r) == 1);          /* up to the region's end */
    CHECK(r[0].lba == 1200 && r[0].nlb == 56);
    CHECK(slimioWalFreeRanges(&m, 1255, 1254, r) == 2);         /* all but one block */
    CHECK(r[0].nlb + r[1].nlb == 999 && r[1].lba + r[1].nlb == 1254);
    CHECK(slimioWalFreeRanges(&m, 255, 300, r) == -1);          /* outside the region */
    CHECK(slimioWalFreeRanges(&m, 300, 1256, r) == -1);
}

static void test_format_ranges_cover_wal_and_slots(void) {
    slimioMeta m;
    char err[256];
    CHECK(slimioLayoutPlan(1 << 16, 4096, 16 << 20, 32 << 20, &m, err, sizeof(err)) == 0);
    slimioLbaRange r[2];
    CHECK(slimioFormatRanges(&m, r) == 1);
    CHECK(r[0].lba == m.wal_start);
    CHECK(r[0].lba + r[0].nlb == slimioSlotLba(&m, 2) + m.slot_lbas);
    CHECK(r[0].lba > 1);                                        /* never the metadata */
    m.slot_start += 256;                                        /* a gap before the slots */
    CHECK(slimioFormatRanges(&m, r) == 2);
    CHECK(r[0].lba == m.wal_start && r[0].nlb == m.wal_lbas);
    CHECK(r[1].lba == m.slot_start && r[1].nlb == 3 * m.slot_lbas);
}

static void test_dealloc_marker_line_is_exact(void) {
    char line[128];
    int n = slimioDeallocMarkerLine(line, sizeof(line), 262400, 4096, SLIMIO_DEALLOC_WAL);
    CHECK(n == (int)strlen(line));
    CHECK(!strcmp(line, "slimio_dealloc slba=262400 nlb=4096 why=wal\n"));
    slimioDeallocMarkerLine(line, sizeof(line), 18446744073709551615ull, 1, SLIMIO_DEALLOC_SLOT);
    CHECK(!strcmp(line, "slimio_dealloc slba=18446744073709551615 nlb=1 why=slot\n"));
    slimioDeallocMarkerLine(line, sizeof(line), 256, 7, SLIMIO_DEALLOC_FORMAT);
    CHECK(!strcmp(line, "slimio_dealloc slba=256 nlb=7 why=format\n"));
}

static char marker_path[64];
static int warnings;

static void countWarning(void *ctx, const char *msg) {
    (void)ctx; (void)msg;
    warnings++;
}

static size_t fileSize(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n < 0 ? 0 : (size_t)n;
}

/* The marker file ends with this range's line when the device is asked to deallocate it. */
static int markerPrecedes(uint64_t lba, uint64_t nlb) {
    char want[128], got[4096] = {0};
    slimioDeallocMarkerLine(want, sizeof(want), lba, nlb, SLIMIO_DEALLOC_SLOT);
    FILE *f = fopen(marker_path, "r");
    if (!f) return 1;
    size_t n = fread(got, 1, sizeof(got) - 1, f);
    fclose(f);
    size_t w = strlen(want);
    return !(n >= w && !memcmp(got + n - w, want, w));
}

static void test_dealloc_writes_the_marker_first_and_counts(void) {
    diskInit(4096, 4096);
    snprintf(marker_path, sizeof(marker_path), "/tmp/slimio-marker-XXXXXX");
    int fd = mkstemp(marker_path);
    CHECK(fd >= 0);
    close(fd);
    slimioDealloc d;
    char err[256];
    warnings = 0;
    slimioDeallocInit(&d, &io, 1, -1, countWarning, NULL);
    CHECK(slimioDeallocOpenMarker(&d, marker_path, err, sizeof(err)) == 0);
    memset(disk.data + 100 * 4096, 0xab, 8 * 4096);
    disk.on_dealloc = markerPrecedes;
    CHECK(slimioDeallocRange(&d, 100, 8, SLIMIO_DEALLOC_SLOT) == 0);
    CHECK(slimioDeallocRange(&d, 2000, 96, SLIMIO_DEALLOC_SLOT) == 0);
    disk.on_dealloc = NULL;
    CHECK(disk.dealloc_rejected == 0);              /* each line came before its range */
    CHECK(disk.deallocs == 2 && disk.dealloc_lba[0] == 100 && disk.dealloc_nlb[0] == 8);
    CHECK(disk.data[100 * 4096] == 0 && disk.data[108 * 4096 - 1] == 0);
    CHECK(d.stats.commands == 2 && d.stats.lbas == 104 && d.supported == 1);
    CHECK(slimioDeallocRange(&d, 5, 0, SLIMIO_DEALLOC_WAL) == 0);   /* nothing to do */
    CHECK(disk.deallocs == 2);
    char text[512] = {0};
    FILE *f = fopen(marker_path, "r");
    CHECK(f != NULL);
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    CHECK(n > 0 && !strcmp(text, "slimio_dealloc slba=100 nlb=8 why=slot\n"
                                 "slimio_dealloc slba=2000 nlb=96 why=slot\n"));
    /* A failed deallocation is counted and logged, never fatal. */
    disk.dealloc_rc = -EIO;
    CHECK(slimioDeallocRange(&d, 10, 1, SLIMIO_DEALLOC_WAL) == -EIO);
    CHECK(d.stats.errors == 1 && warnings == 1 && d.stats.lbas == 104);
    /* A device that cannot: counted as unsupported, and no marker line after it is known. */
    disk.dealloc_rc = -EOPNOTSUPP;
    size_t before = fileSize(marker_path);
    CHECK(slimioDeallocRange(&d, 10, 1, SLIMIO_DEALLOC_WAL) == 1);
    CHECK(d.supported == 0 && d.stats.unsupported == 1 && warnings == 2);
    size_t after_first = fileSize(marker_path);
    CHECK(after_first > before);                    /* tried: the line preceded the try */
    CHECK(slimioDeallocRange(&d, 20, 1, SLIMIO_DEALLOC_WAL) == 1);
    CHECK(d.stats.unsupported == 2 && warnings == 2 && fileSize(marker_path) == after_first);
    disk.dealloc_rc = 0;
    slimioDeallocClose(&d);
    /* Off: nothing at all. */
    slimioDeallocInit(&d, &io, 0, 1, countWarning, NULL);
    CHECK(slimioDeallocOpenMarker(&d, marker_path, err, sizeof(err)) == 0);
    CHECK(slimioDeallocRange(&d, 10, 1, SLIMIO_DEALLOC_WAL) == 0);
    CHECK(disk.deallocs == 2 && d.stats.commands == 0 && fileSize(marker_path) == after_first);
    slimioDeallocClose(&d);
    unlink(marker_path);
    /* A marker that cannot be opened names its path. */
    CHECK(slimioDeallocOpenMarker(&d, "/nonexistent/trace_marker", err, sizeof(err)) == -1);
    CHECK(strstr(err, "/nonexistent/trace_marker") != NULL);
}

static void test_dealloc_marker_write_failure_is_counted_once_logged(void) {
    diskInit(4096, 256);
    slimioDealloc d;
    char err[256];
    warnings = 0;
    slimioDeallocInit(&d, &io, 1, 1, countWarning, NULL);
    CHECK(slimioDeallocOpenMarker(&d, "/dev/full", err, sizeof(err)) == 0);
    CHECK(slimioDeallocRange(&d, 1, 2, SLIMIO_DEALLOC_SLOT) == 0);
    CHECK(slimioDeallocRange(&d, 3, 2, SLIMIO_DEALLOC_SLOT) == 0);
    CHECK(d.stats.marker_errors == 2 && warnings == 1);         /* logged once */
    CHECK(d.stats.commands == 2 && disk.deallocs == 2);         /* deallocated anyway */
    slimioDeallocClose(&d);
}

/* At the time format deallocates, no metadata record may be valid any more. */
static int metaIsBlank(uint64_t lba, uint64_t nlb) {
    (void)lba; (void)nlb;
    slimioMeta got;
    return slimioMetaLoad(&io, &got) != SLIMIO_ERR_NOMETA;
}

static void test_format_deallocates_after_zeroing_before_commit(void) {
    diskInit(4096, 1 << 16);
    slimioMeta old, fresh, got;
    char err[256];
    CHECK(slimioLayoutPlan(1 << 16, 4096, 16 << 20, 32 << 20, &old, err, sizeof(err)) == 0);
    old.format_id = 41;
    CHECK(slimioFormatDevice(&io, &old, NULL) == 0);
    CHECK(disk.deallocs == 0);                      /* NULL: no deallocation */
    memset(disk.data + old.slot_start * 4096, 0x5a, 4096);      /* an old snapshot */
    fresh = old;
    fresh.format_id = 42;
    slimioDealloc d;
    slimioDeallocInit(&d, &io, 1, 1, NULL, NULL);
    disk.on_dealloc = metaIsBlank;
    CHECK(slimioFormatDevice(&io, &fresh, &d) == 0);
    disk.on_dealloc = NULL;
    CHECK(disk.dealloc_rejected == 0);              /* no record left when it deallocated */
    CHECK(disk.deallocs == 1 && disk.dealloc_lba[0] == fresh.wal_start);
    CHECK(disk.dealloc_lba[0] + disk.dealloc_nlb[0] == slimioSlotLba(&fresh, 2) + fresh.slot_lbas);
    CHECK(d.stats.lbas == disk.dealloc_nlb[0] && d.stats.commands == 1);
    CHECK(disk.data[old.slot_start * 4096] == 0);
    CHECK(slimioMetaLoad(&io, &got) == 0 && got.format_id == 42 && got.seq == 1);
    /* Off: format still works, nothing is deallocated. */
    slimioDeallocInit(&d, &io, 0, 1, NULL, NULL);
    CHECK(slimioFormatDevice(&io, &fresh, &d) == 0 && disk.deallocs == 1);
    /* A device that cannot deallocate formats all the same. */
    slimioDeallocInit(&d, &io, 1, -1, NULL, NULL);
    disk.dealloc_rc = -EOPNOTSUPP;
    CHECK(slimioFormatDevice(&io, &fresh, &d) == 0 && d.stats.unsupported == 1);
    disk.dealloc_rc = -EIO;                         /* nor does a failing one stop it */
    slimioDeallocInit(&d, &io, 1, 1, NULL, NULL);
    CHECK(slimioFormatDevice(&io, &fresh, &d) == 0 && d.stats.errors == 1);
    disk.dealloc_rc = 0;
    CHECK(slimioMetaLoad(&io, &got) == 0 && got.format_id == 42);
}

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static void test_nvme_dsm_ranges_follow_the_spec_and_the_limits(void) {
    static unsigned char buf[SLIMIO_NVME_DSM_MAX_RANGES * SLIMIO_NVME_DSM_RANGE_BYTES];
    slimioNvmeInfo info;
    memset(&info, 0, sizeof(info));
    uint64_t covered;
    /* One range: context attributes 0, length (not 0's based), starting LBA; LE. */
    memset(buf, 0xee, sizeof(buf));
    CHECK(slimioNvmeEncodeDsm(&info, 0x123456789ull, 10, buf, &covered) == 1);
    CHECK(covered == 10);
    CHECK(rd32(buf) == 0 && rd32(buf + 4) == 10 && rd64(buf + 8) == 0x123456789ull);
    CHECK(buf[8] == 0x89 && buf[12] == 0x01);       /* little-endian SLBA */
    /* A range is at most 0xffffffff LBAs, a command at most 256 ranges. */
    uint64_t huge = 300ull * 0xffffffffull;
    CHECK(slimioNvmeEncodeDsm(&info, 0, huge, buf, &covered) == 256);
    CHECK(covered == 256ull * 0xffffffffull);
    CHECK(rd32(buf + 4) == 0xffffffffu && rd64(buf + 16 + 8) == 0xffffffffull);
    CHECK(rd64(buf + 255 * 16 + 8) == 255ull * 0xffffffffull);
    /* The controller's limits: DMRSL per range, DMRL ranges, DMSL per command. */
    info.dmrsl = 4;
    CHECK(slimioNvmeEncodeDsm(&info, 100, 10, buf, &covered) == 3 && covered == 10);
    CHECK(rd32(buf + 4) == 4 && rd32(buf + 16 + 4) == 4 && rd32(buf + 32 + 4) == 2);
    CHECK(rd64(buf + 8) == 100 && rd64(buf + 16 + 8) == 104 && rd64(buf + 32 + 8) == 108);
    info.dmrl = 2;
    CHECK(slimioNvmeEncodeDsm(&info, 100, 10, buf, &covered) == 2 && covered == 8);
    info.dmrl = 0;
    info.dmsl = 5;
    CHECK(slimioNvmeEncodeDsm(&info, 100, 10, buf, &covered) == 2 && covered == 5);
    CHECK(rd32(buf + 16 + 4) == 1);
    CHECK(slimioNvmeEncodeDsm(&info, 100, 0, buf, &covered) == 0 && covered == 0);
    /* Without ONCS bit 2 nothing is sent: unsupported, never an error. */
    info.dsm = 0;
    CHECK(slimioNvmeSyncDeallocate(-1, &info, 0, 8, NULL) == -EOPNOTSUPP);
    CHECK(SLIMIO_NVME_OP_DSM == 0x09 && SLIMIO_NVME_DSM_AD == 0x4);
}

static void test_nvme_identify_reports_dsm_and_its_limits(void) {
    unsigned char ctrl[4096] = {0}, nvm[4096] = {0};
    slimioNvmeInfo info;
    memset(&info, 0, sizeof(info));
    ctrl[520] = 0x04;                               /* ONCS bit 2: Dataset Management */
    slimioNvmeParseIdCtrl(ctrl, &info);
    CHECK(info.dsm == 1);
    ctrl[520] = 0x08 | 0x01;                        /* Write Zeroes and Compare, no DSM */
    slimioNvmeParseIdCtrl(ctrl, &info);
    CHECK(info.dsm == 0);
    ctrl[521] = 0x04;                               /* bit 10, not bit 2 */
    slimioNvmeParseIdCtrl(ctrl, &info);
    CHECK(info.dsm == 0);
    nvm[3] = 255;                                   /* DMRL */
    nvm[4] = 0xff; nvm[5] = 0xff; nvm[6] = 0x07;    /* DMRSL 524287 (QEMU, 4 KiB LBAs) */
    nvm[8] = 0x00; nvm[9] = 0x00; nvm[10] = 0x10;   /* DMSL 0x100000 */
    slimioNvmeParseIdCtrlNvm(nvm, &info);
    CHECK(info.dmrl == 255 && info.dmrsl == 524287 && info.dmsl == 0x100000);
}

int main(void) {
    RUN(test_crc32c_check_value);
    RUN(test_crc32c_combine);
    RUN(test_layout_regions_are_aligned_and_disjoint);
    RUN(test_layout_refuses_a_small_device_naming_both_sizes);
    RUN(test_meta_roundtrip);
    RUN(test_meta_decode_rejects_damage);
    RUN(test_meta_records_alternate_and_newest_wins);
    RUN(test_meta_torn_or_failed_write_keeps_previous_state);
    RUN(test_meta_blank_and_foreign_devices);
    RUN(test_meta_lba_size_mismatch_is_refused);
    RUN(test_format_erases_records_of_an_earlier_format);
    RUN(test_failpoint_spec_errors_name_the_entry);
    RUN(test_failpoint_error_action_and_hit_counting);
    RUN(test_failpoint_delay_sleeps_and_goes_on);
    RUN(test_failpoint_crash_leaves_a_valid_record);
    RUN(test_wal_scan_reads_back_every_byte);
    RUN(test_wal_scan_stops_at_torn_tail);
    RUN(test_wal_scan_stops_at_stale_blocks);
    RUN(test_wal_scan_rejects_corrupt_and_foreign_blocks);
    RUN(test_wal_scan_wraps_around_the_region);
    RUN(test_wal_scan_honours_limits_and_visitor_errors);
    RUN(test_wal_successor_after_full_block_and_partial_tail);
    RUN(test_wal_successor_wraps_around_the_region);
    RUN(test_wal_chain_follows_an_unlisted_middle_generation);
    RUN(test_wal_chain_skips_generations_that_never_wrote);
    RUN(test_wal_chain_ends_at_a_stale_or_foreign_successor);
    RUN(test_nvme_write_encodes_fdp_placement_and_fua);
    RUN(test_nvme_identify_parsers_read_the_spec_offsets);
    RUN(test_nvme_ruh_status_lists_placement_ids);
    RUN(test_nvme_placement_check_names_the_problem);
    RUN(test_wal_free_ranges_wrap_around_the_region);
    RUN(test_format_ranges_cover_wal_and_slots);
    RUN(test_dealloc_marker_line_is_exact);
    RUN(test_dealloc_writes_the_marker_first_and_counts);
    RUN(test_dealloc_marker_write_failure_is_counted_once_logged);
    RUN(test_format_deallocates_after_zeroing_before_commit);
    RUN(test_nvme_dsm_ranges_follow_the_spec_and_the_limits);
    RUN(test_nvme_identify_reports_dsm_and_its_limits);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
