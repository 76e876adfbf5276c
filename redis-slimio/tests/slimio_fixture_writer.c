/* slimio_fixture_writer: test helper that puts snapshot and WAL content on a SlimIO device
 * file without Redis, through the real format code (layout, metadata commit, WAL block
 * sealing, scan and successor rule). Built by `make -C redis-slimio fixture-writer`; used
 * by tests/test_slimio_unit.py to test slimio-admin export and dump-wal.
 *
 *   slimio_fixture_writer --device PATH [--lba-size N] [--format WAL_MIB SLOT_MIB]
 *       [--roles ROLE0,ROLE1,ROLE2] [--slot I FILE]... [--snapshot-wal-gen G]
 *       [--wal-offset K] [--gen G FILE | --gen-unlisted G FILE]...
 *
 * --format     plan and write a fresh layout (else the device's metadata is loaded)
 * --roles      set the slots' roles (wal-snapshot, reserve, on-demand)
 * --slot       write FILE's bytes into slot I and mark it valid (length, CRC32C)
 * --snapshot-wal-gen  the WAL-Snapshot slot's first generation to replay
 * --wal-offset the first generation starts K LBAs into the WAL region
 * --gen        append FILE's bytes as WAL generation G (full blocks, then a partial tail),
 *              starting where slimioWalSuccessor puts it after the previous one, and list
 *              it in the metadata's gens[]; --gen-unlisted: the same, not listed. Any
 *              --gen replaces the generations listed before; without one they are kept.
 *
 * Everything is committed with one metadata record at the end. Exit status 0, or 1 with a
 * message. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "slimio_crc32c.h"
#include "slimio_dev.h"
#include "slimio_format.h"

#define MAX_ITEMS 16

typedef struct item { uint64_t n; const char *file; int listed; } item;

static void die(const char *fmt, const char *arg) {
    fprintf(stderr, "slimio_fixture_writer: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    exit(1);
}

static uint64_t num(const char *v) {
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (!*v || *end) die("'%s' is not a number", v);
    return n;
}

/* Read a whole file into an LBA-aligned buffer padded with zeros to whole LBAs. */
static unsigned char *slurp(const char *path, uint32_t lba_size, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t padded = ((size_t)size + lba_size - 1) / lba_size * lba_size;
    void *buf = NULL;
    if (posix_memalign(&buf, 4096, padded ? padded : lba_size)) die("out of memory%s", "");
    memset(buf, 0, padded ? padded : lba_size);
    if (size && fread(buf, 1, (size_t)size, f) != (size_t)size) die("cannot read %s", path);
    fclose(f);
    *len = (size_t)size;
    return buf;
}

static uint8_t roleByName(const char *name, size_t len) {
    for (uint8_t r = SLIMIO_ROLE_WAL_SNAPSHOT; r <= SLIMIO_ROLE_ON_DEMAND; r++)
        if (strlen(slimioRoleName(r)) == len && !strncmp(slimioRoleName(r), name, len))
            return r;
    die("unknown role in '%s'", name);
    return 0;
}

/* Write len bytes of data as generation g: full blocks, then a partial tail. */
static void walWriteGen(slimioDev *dev, const slimioMeta *m, const slimioWalGen *g,
                        const unsigned char *data, size_t len) {
    uint32_t cap = slimioWalPayload(m->lba_size);
    unsigned char *block = NULL;
    if (posix_memalign((void **)&block, 4096, m->lba_size)) die("out of memory%s", "");
    uint64_t i = 0;
    for (size_t off = 0; off < len; off += cap, i++) {
        uint32_t used = (uint32_t)(len - off < cap ? len - off : cap);
        memcpy(block + SLIMIO_WAL_HDR_SIZE, data + off, used);
        slimioWalBlockSeal(block, m->lba_size, g->gen, g->start_seq + i, m->format_id, used);
        int rc = dev->io.write(dev->io.ctx, slimioWalLba(m, g->start_lba, i), 1, block,
                               SLIMIO_KIND_WAL);
        if (rc) die("WAL write failed: %s", slimioStrerror(rc));
    }
    free(block);
}

int main(int argc, char **argv) {
    const char *path = NULL, *roles = NULL;
    uint64_t lba_size = 0, wal_mib = 0, slot_mib = 0, snap_gen = 0, wal_offset = 0;
    int do_format = 0, have_snap_gen = 0;
    item slots[MAX_ITEMS], gens[MAX_ITEMS];
    int nslots = 0, ngens = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int left = argc - i - 1;
        if (!strcmp(a, "--device") && left >= 1) path = argv[++i];
        else if (!strcmp(a, "--lba-size") && left >= 1) lba_size = num(argv[++i]);
        else if (!strcmp(a, "--format") && left >= 2) {
            do_format = 1;
            wal_mib = num(argv[++i]);
            slot_mib = num(argv[++i]);
        } else if (!strcmp(a, "--roles") && left >= 1) roles = argv[++i];
        else if (!strcmp(a, "--snapshot-wal-gen") && left >= 1) {
            snap_gen = num(argv[++i]);
            have_snap_gen = 1;
        } else if (!strcmp(a, "--wal-offset") && left >= 1) wal_offset = num(argv[++i]);
        else if (!strcmp(a, "--slot") && left >= 2 && nslots < MAX_ITEMS) {
            slots[nslots].n = num(argv[i + 1]);
            slots[nslots++].file = argv[i + 2];
            i += 2;
        } else if ((!strcmp(a, "--gen") || !strcmp(a, "--gen-unlisted")) && left >= 2 &&
                   ngens < MAX_ITEMS) {
            gens[ngens].n = num(argv[i + 1]);
            gens[ngens].file = argv[i + 2];
            gens[ngens++].listed = !strcmp(a, "--gen");
            i += 2;
        } else die("unknown, incomplete or repeated too often: '%s'", a);
    }
    if (!path) die("name the device with --device%s", "");
    slimioDev dev;
    char err[512];
    if (slimioDevOpen(&dev, path, (uint32_t)lba_size, err, sizeof(err))) die("%s", err);
    slimioMeta m;
    if (do_format) {
        if (slimioLayoutPlan(dev.lbas, dev.lba_size, wal_mib << 20, slot_mib << 20, &m, err,
                             sizeof(err)) != SLIMIO_OK) die("%s", err);
        if (getrandom(&m.format_id, sizeof(m.format_id), 0) != sizeof(m.format_id))
            die("getrandom failed%s", "");
        int rc = slimioFormatDevice(&dev.io, &m, NULL);
        if (rc) die("format failed: %s", slimioStrerror(rc));
    } else {
        int rc = slimioMetaLoad(&dev.io, &m);
        if (rc) die("no metadata: %s", slimioStrerror(rc));
    }
    if (roles) {
        const char *p = roles;
        for (int s = 0; s < SLIMIO_SLOTS; s++) {
            const char *comma = strchr(p, ',');
            size_t len = comma ? (size_t)(comma - p) : strlen(p);
            m.slots[s].role = roleByName(p, len);
            if (!comma && s < SLIMIO_SLOTS - 1) die("--roles wants three roles: '%s'", roles);
            p = comma ? comma + 1 : p + len;
        }
    }
    for (int k = 0; k < nslots; k++) {
        int s = (int)slots[k].n;
        if (s >= SLIMIO_SLOTS) die("no slot %s", "(0, 1 or 2)");
        size_t len;
        unsigned char *buf = slurp(slots[k].file, dev.lba_size, &len);
        if (len > m.slot_lbas * m.lba_size) die("%s does not fit the slot", slots[k].file);
        uint32_t nlb = (uint32_t)((len + dev.lba_size - 1) / dev.lba_size);
        slimioDataKind kind = m.slots[s].role == SLIMIO_ROLE_ON_DEMAND
                              ? SLIMIO_KIND_ON_DEMAND : SLIMIO_KIND_WAL_SNAPSHOT;
        int rc = nlb ? dev.io.write(dev.io.ctx, slimioSlotLba(&m, s), nlb, buf, kind) : 0;
        if (rc) die("slot write failed: %s", slimioStrerror(rc));
        m.slots[s].valid = 1;
        m.slots[s].length = len;
        m.slots[s].crc = slimioCrc32c(0, buf, len);
        printf("slot %d (%s): %zu bytes at LBA %llu, crc32c %08x\n", s,
               slimioRoleName(m.slots[s].role), len,
               (unsigned long long)slimioSlotLba(&m, s), m.slots[s].crc);
        free(buf);
    }
    if (have_snap_gen)
        for (int s = 0; s < SLIMIO_SLOTS; s++)
            if (m.slots[s].role == SLIMIO_ROLE_WAL_SNAPSHOT) m.slots[s].wal_gen = snap_gen;
    slimioWalGen g = {0, m.wal_start + wal_offset % m.wal_lbas, 0};
    int nlisted = 0;
    if (ngens) memset(m.gens, 0, sizeof(m.gens));  /* the new generations replace the old */
    for (int k = 0; k < ngens; k++) {
        if (k > 0) {
            /* Where the previous generation's successor starts, by the real rule. */
            slimioWalEnd end;
            int rc = slimioWalScan(&dev.io, &m, &g, 0, 64, NULL, NULL, &end);
            if (rc) die("WAL scan failed: %s", slimioStrerror(rc));
            slimioWalGen next;
            slimioWalSuccessor(&m, &g, &end, &next);
            g.start_lba = next.start_lba;
        }
        g.gen = gens[k].n;
        g.start_seq = 0;
        size_t len;
        unsigned char *buf = slurp(gens[k].file, dev.lba_size, &len);
        walWriteGen(&dev, &m, &g, buf, len);
        free(buf);
        if (gens[k].listed) {
            if (nlisted == SLIMIO_MAX_WAL_GENS) die("at most two generations can be %s",
                                                    "listed");
            m.gens[nlisted++] = g;
        }
        printf("gen %llu: %zu bytes from LBA %llu%s\n", (unsigned long long)g.gen, len,
               (unsigned long long)g.start_lba, gens[k].listed ? "" : " (unlisted)");
    }
    int rc = dev.io.flush(dev.io.ctx);
    if (!rc) rc = slimioMetaCommit(&dev.io, &m);
    if (rc) die("metadata commit failed: %s", slimioStrerror(rc));
    slimioDevClose(&dev);
    return 0;
}
