/* slimio-admin: format and inspect a SlimIO device.
 *
 *   slimio-admin format  --device PATH [--wal-mib N] [--slot-mib N] [--lba-size N] [--force]
 *   slimio-admin inspect --device PATH [--lba-size N] [--json]
 *
 * format refuses a device that carries a file system, partition table, swap, LUKS or
 * another SlimIO layout unless --force is given, and a device too small for the layout.
 * Exit status: 0 ok, 1 refused or failed, 2 usage. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "slimio_dev.h"
#include "slimio_format.h"

static void usage(void) {
    fprintf(stderr,
        "usage: slimio-admin format  --device PATH [--wal-mib N] [--slot-mib N] "
        "[--lba-size N] [--force]\n"
        "       slimio-admin inspect --device PATH [--lba-size N] [--json]\n");
    exit(2);
}

static uint64_t parseNum(const char *opt, const char *v) {
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (!*v || *end || n == 0) {
        fprintf(stderr, "slimio-admin: %s wants a positive number, got '%s'\n", opt, v);
        exit(2);
    }
    return n;
}

static int cmdFormat(slimioDev *dev, uint64_t wal_mib, uint64_t slot_mib, int force) {
    const char *sig = slimioDevForeignSignature(dev);
    slimioMeta m;
    int st = slimioMetaLoad(&dev->io, &m);
    if (!force && sig) {
        fprintf(stderr, "slimio-admin: refusing to format %s: it carries %s. Pass --force to "
                "destroy it.\n", dev->path, sig);
        return 1;
    }
    if (!force && st != SLIMIO_ERR_NOMETA) {
        if (st == SLIMIO_OK)
            fprintf(stderr, "slimio-admin: refusing to format %s: it already holds a SlimIO "
                    "layout (format id %016llx, metadata seq %llu). Pass --force to erase "
                    "it.\n", dev->path, (unsigned long long)m.format_id,
                    (unsigned long long)m.seq);
        else
            fprintf(stderr, "slimio-admin: refusing to format %s: it holds damaged SlimIO "
                    "metadata (%s). Pass --force to erase it.\n", dev->path,
                    slimioStrerror(st));
        return 1;
    }
    char err[512];
    if (slimioLayoutPlan(dev->lbas, dev->lba_size, wal_mib << 20, slot_mib << 20, &m,
                         err, sizeof(err)) != SLIMIO_OK) {
        fprintf(stderr, "slimio-admin: %s: %s\n", dev->path, err);
        return 1;
    }
    if (getrandom(&m.format_id, sizeof(m.format_id), 0) != sizeof(m.format_id)) {
        perror("slimio-admin: getrandom");
        return 1;
    }
    int rc = slimioFormatDevice(&dev->io, &m);
    if (rc) {
        fprintf(stderr, "slimio-admin: writing the metadata of %s failed: %s\n", dev->path,
                slimioStrerror(rc));
        return 1;
    }
    printf("formatted %s: format id %016llx, WAL %llu MiB, 3 slots of %llu MiB\n", dev->path,
           (unsigned long long)m.format_id,
           (unsigned long long)(m.wal_lbas * m.lba_size >> 20),
           (unsigned long long)(m.slot_lbas * m.lba_size >> 20));
    return 0;
}

/* A placement id for JSON: the id, or -1 for "no placement". */
static int placementJson(const slimioMeta *m, slimioDataKind kind) {
    return m->placement[kind] == SLIMIO_NO_PLACEMENT ? -1 : m->placement[kind];
}

static int cmdInspect(slimioDev *dev, int json) {
    slimioMeta m;
    int st = slimioMetaLoad(&dev->io, &m);
    if (st != SLIMIO_OK) {
        fprintf(stderr, "slimio-admin: %s: %s\n", dev->path, slimioStrerror(st));
        return 1;
    }
    slimioWalEnd ends[SLIMIO_MAX_WAL_GENS];
    memset(ends, 0, sizeof(ends));
    for (int g = 0; g < SLIMIO_MAX_WAL_GENS; g++) {
        if (!m.gens[g].gen) continue;
        int rc = slimioWalScan(&dev->io, &m, &m.gens[g], 0, 256, NULL, NULL, &ends[g]);
        if (rc) {
            fprintf(stderr, "slimio-admin: reading the WAL of %s failed: %s\n", dev->path,
                    slimioStrerror(rc));
            return 1;
        }
    }
    if (json) {
        printf("{\"device\": \"%s\", \"lba_size\": %u, \"lbas\": %llu, "
               "\"format_id\": \"%016llx\", \"meta_seq\": %llu,\n", dev->path, m.lba_size,
               (unsigned long long)m.device_lbas, (unsigned long long)m.format_id,
               (unsigned long long)m.seq);
        printf(" \"wal\": {\"start_lba\": %llu, \"lbas\": %llu},\n",
               (unsigned long long)m.wal_start, (unsigned long long)m.wal_lbas);
        printf(" \"slots\": [");
        for (int i = 0; i < SLIMIO_SLOTS; i++)
            printf("%s{\"slot\": %d, \"start_lba\": %llu, \"lbas\": %llu, \"role\": \"%s\", "
                   "\"valid\": %s, \"length_bytes\": %llu}", i ? ", " : "", i,
                   (unsigned long long)slimioSlotLba(&m, i), (unsigned long long)m.slot_lbas,
                   slimioRoleName(m.slots[i].role), m.slots[i].valid ? "true" : "false",
                   (unsigned long long)m.slots[i].length);
        printf("],\n \"wal_generations\": [");
        int first = 1;
        for (int g = 0; g < SLIMIO_MAX_WAL_GENS; g++) {
            if (!m.gens[g].gen) continue;
            printf("%s{\"gen\": %llu, \"start_lba\": %llu, \"blocks\": %llu, \"bytes\": %llu}",
                   first ? "" : ", ", (unsigned long long)m.gens[g].gen,
                   (unsigned long long)m.gens[g].start_lba,
                   (unsigned long long)ends[g].blocks, (unsigned long long)ends[g].bytes);
            first = 0;
        }
        printf("],\n \"placement\": {\"wal\": %d, \"wal_snapshot\": %d, \"on_demand\": %d}}\n",
               placementJson(&m, SLIMIO_KIND_WAL), placementJson(&m, SLIMIO_KIND_WAL_SNAPSHOT),
               placementJson(&m, SLIMIO_KIND_ON_DEMAND));
        return 0;
    }
    printf("device      %s (%u-byte LBAs, %llu LBAs)\n", dev->path, m.lba_size,
           (unsigned long long)m.device_lbas);
    printf("format id   %016llx, metadata seq %llu\n", (unsigned long long)m.format_id,
           (unsigned long long)m.seq);
    printf("wal         LBA %llu + %llu\n", (unsigned long long)m.wal_start,
           (unsigned long long)m.wal_lbas);
    for (int i = 0; i < SLIMIO_SLOTS; i++)
        printf("slot %d      LBA %llu + %llu  %-12s %s  %llu bytes\n", i,
               (unsigned long long)slimioSlotLba(&m, i), (unsigned long long)m.slot_lbas,
               slimioRoleName(m.slots[i].role), m.slots[i].valid ? "valid  " : "empty  ",
               (unsigned long long)m.slots[i].length);
    for (int g = 0; g < SLIMIO_MAX_WAL_GENS; g++)
        if (m.gens[g].gen)
            printf("wal gen %llu  from LBA %llu: %llu blocks, %llu bytes\n",
                   (unsigned long long)m.gens[g].gen, (unsigned long long)m.gens[g].start_lba,
                   (unsigned long long)ends[g].blocks, (unsigned long long)ends[g].bytes);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    const char *cmd = argv[1], *path = NULL;
    uint64_t wal_mib = 1024, slot_mib = 1024, lba_size = 0;
    int force = 0, json = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--device") && more) path = argv[++i];
        else if (!strcmp(a, "--wal-mib") && more) wal_mib = parseNum(a, argv[++i]);
        else if (!strcmp(a, "--slot-mib") && more) slot_mib = parseNum(a, argv[++i]);
        else if (!strcmp(a, "--lba-size") && more) lba_size = parseNum(a, argv[++i]);
        else if (!strcmp(a, "--force")) force = 1;
        else if (!strcmp(a, "--json")) json = 1;
        else {
            fprintf(stderr, "slimio-admin: unknown or incomplete option '%s'\n", a);
            usage();
        }
    }
    if (strcmp(cmd, "format") && strcmp(cmd, "inspect")) usage();
    if (!path) {
        fprintf(stderr, "slimio-admin: name the device with --device PATH\n");
        return 2;
    }
    slimioDev dev;
    char err[512];
    if (slimioDevOpen(&dev, path, (uint32_t)lba_size, err, sizeof(err))) {
        fprintf(stderr, "slimio-admin: %s\n", err);
        return 1;
    }
    int rc = !strcmp(cmd, "format") ? cmdFormat(&dev, wal_mib, slot_mib, force)
                                    : cmdInspect(&dev, json);
    slimioDevClose(&dev);
    return rc;
}
