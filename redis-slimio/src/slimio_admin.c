/* slimio-admin: format and inspect a SlimIO device, export its snapshots and dump its WAL.
 *
 *   slimio-admin format   --device PATH [--wal-mib N] [--slot-mib N] [--lba-size N] [--force]
 *                         [--placement-wal ID] [--placement-wal-snapshot ID]
 *                         [--placement-on-demand ID] [--no-deallocate] [--trace-marker PATH]
 *   slimio-admin inspect  --device PATH [--lba-size N] [--json]
 *   slimio-admin device   --device PATH [--lba-size N]
 *   slimio-admin export   --device PATH --slot SLOT --output FILE.rdb [--lba-size N] [--force]
 *   slimio-admin dump-wal --device PATH --output FILE.aof|- [--from-gen G] [--lba-size N]
 *                         [--force]
 *
 * PATH is a regular file, a block device, or an NVMe generic char device (/dev/ngXnY),
 * which is driven by passthru. device prints, as JSON, what SlimIO discovers on PATH
 * (geometry; for NVMe: nsid, write cache, FDP support and enablement, placement ids).
 * format records the placement id of each data kind (-1 = none, the default) after
 * checking it against the device's reclaim unit handle status.
 * format refuses a device that carries a file system, partition table, swap, LUKS or
 * another SlimIO layout unless --force is given, and a device too small for the layout.
 * It deallocates the WAL region and the three slots before committing the metadata (like
 * mkfs discarding a device; --no-deallocate: not), writing a line per range to the
 * trace marker first when --trace-marker names one (slimio_dealloc.h), and prints what it
 * deallocated.
 * export writes the RDB image of one valid snapshot slot (SLOT: wal-snapshot, reserve,
 * on-demand, or the slot number 0, 1, 2) after checking its CRC32C against the metadata.
 * dump-wal writes the live WAL as an AOF stream: the payloads of the chain of generations,
 * from the WAL-Snapshot's first generation to replay (or the oldest live one, or --from-gen).
 * Both write FILE.partial and rename it over FILE only when complete, and refuse to replace
 * an existing FILE unless --force is given.
 * Exit status: 0 ok, 1 refused or failed, 2 usage. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "slimio_crc32c.h"
#include "slimio_dealloc.h"
#include "slimio_dev.h"
#include "slimio_format.h"

#define IO_CHUNK_BYTES (4u << 20)   /* export and WAL read-ahead: large O_DIRECT reads */

static void usage(void) {
    fprintf(stderr,
        "usage: slimio-admin format   --device PATH [--wal-mib N] [--slot-mib N] "
        "[--lba-size N] [--force]\n"
        "                             [--placement-wal ID] [--placement-wal-snapshot ID] "
        "[--placement-on-demand ID]\n"
        "                             [--no-deallocate] [--trace-marker PATH]\n"
        "       slimio-admin inspect  --device PATH [--lba-size N] [--json]\n"
        "       slimio-admin device   --device PATH [--lba-size N]\n"
        "       slimio-admin export   --device PATH --slot wal-snapshot|reserve|on-demand|0|1|2 "
        "--output FILE.rdb [--lba-size N] [--force]\n"
        "       slimio-admin dump-wal --device PATH --output FILE.aof|- [--from-gen G] "
        "[--lba-size N] [--force]\n");
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

/* A slot named on the command line: by number (index 0..2) or by role (index -1). */
typedef struct slotSpec { int index; int role; } slotSpec;

/* Parse --slot: a role name or a slot number. Exits with a usage error naming the accepted
 * values otherwise. */
static slotSpec parseSlot(const char *v) {
    static const uint8_t roles[] = {SLIMIO_ROLE_WAL_SNAPSHOT, SLIMIO_ROLE_RESERVE,
                                    SLIMIO_ROLE_ON_DEMAND};
    for (size_t i = 0; i < sizeof(roles); i++)
        if (!strcmp(v, slimioRoleName(roles[i]))) return (slotSpec){-1, roles[i]};
    if (v[0] >= '0' && v[0] < '0' + SLIMIO_SLOTS && v[1] == '\0')
        return (slotSpec){v[0] - '0', 0};
    fprintf(stderr, "slimio-admin: --slot wants wal-snapshot, reserve, on-demand or a slot "
            "number 0, 1, 2; got '%s'\n", v);
    exit(2);
}

/* A monotonic clock, in seconds. */
static double nowSeconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* An LBA-aligned buffer of len bytes for O_DIRECT reads, or NULL. */
static unsigned char *alignedAlloc(size_t len) {
    void *p = NULL;
    return posix_memalign(&p, 4096, len) ? NULL : p;
}

/* Print s as a JSON string (quoted, with quotes, backslashes and control bytes escaped). */
static void jsonString(const char *s) {
    putchar('"');
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if (*p < 0x20) printf("\\u%04x", *p);
        else putchar(*p);
    }
    putchar('"');
}

/* --- output files: FILE.partial, renamed over FILE when complete ------------------------ */

typedef struct outFile {
    const char *path;       /* the final name; "-" = stdout */
    char *partial;          /* path.partial while it is written, NULL for stdout */
    int fd;
} outFile;

/* Refuse an existing output unless force, then create path.partial (or use stdout for "-").
 * Returns 0, or 1 after printing why not. */
static int outOpen(outFile *o, const char *path, int force) {
    memset(o, 0, sizeof(*o));
    o->path = path;
    o->fd = -1;
    if (!strcmp(path, "-")) {
        o->fd = STDOUT_FILENO;
        return 0;
    }
    struct stat st;
    if (!force && lstat(path, &st) == 0) {
        fprintf(stderr, "slimio-admin: refusing to overwrite %s: it exists. Pass --force to "
                "replace it.\n", path);
        return 1;
    }
    if (asprintf(&o->partial, "%s.partial", path) < 0) {
        o->partial = NULL;
        perror("slimio-admin");
        return 1;
    }
    o->fd = open(o->partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o->fd < 0) {
        fprintf(stderr, "slimio-admin: cannot create %s: %s\n", o->partial, strerror(errno));
        free(o->partial);
        o->partial = NULL;
        return 1;
    }
    return 0;
}

/* Write all of buf. Returns 0 or -errno. */
static int outWrite(outFile *o, const void *buf, size_t len) {
    const char *p = buf;
    while (len) {
        ssize_t n = write(o->fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -errno;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Drop the partial file (after a failure). */
static void outAbort(outFile *o) {
    if (o->partial) {
        close(o->fd);
        unlink(o->partial);
        free(o->partial);
        o->partial = NULL;
    }
}

/* Make the partial file durable and give it its final name: without force it must still
 * not exist (RENAME_NOREPLACE where the file system has it). Returns 0, or 1 after
 * printing why not (the partial file is removed). */
static int outCommit(outFile *o, int force) {
    if (!o->partial) return 0;
    int rc = 0;
    if (fsync(o->fd) < 0 || close(o->fd) < 0) {
        fprintf(stderr, "slimio-admin: writing %s failed: %s\n", o->partial, strerror(errno));
        unlink(o->partial);
        free(o->partial);
        o->partial = NULL;
        return 1;
    }
    int r = force ? rename(o->partial, o->path)
                  : renameat2(AT_FDCWD, o->partial, AT_FDCWD, o->path, RENAME_NOREPLACE);
    if (r < 0 && !force && (errno == EINVAL || errno == ENOSYS)) {
        /* No RENAME_NOREPLACE here: check, then rename (a race we accept). */
        struct stat st;
        if (lstat(o->path, &st) == 0) errno = EEXIST;
        else r = rename(o->partial, o->path);
    }
    if (r < 0) {
        if (errno == EEXIST)
            fprintf(stderr, "slimio-admin: refusing to overwrite %s: it appeared while it was "
                    "written. Pass --force to replace it.\n", o->path);
        else
            fprintf(stderr, "slimio-admin: cannot rename %s to %s: %s\n", o->partial,
                    o->path, strerror(errno));
        unlink(o->partial);
        rc = 1;
    }
    free(o->partial);
    o->partial = NULL;
    return rc;
}

/* --- format ---------------------------------------------------------------------------- */

/* slimioDealloc's warnings go to stderr. */
static void deallocWarn(void *ctx, const char *msg) {
    (void)ctx;
    fprintf(stderr, "slimio-admin: %s\n", msg);
}

/* Format dev unless it carries anything worth keeping (or force), deallocating the WAL
 * region and the slots unless told not to (deallocate 0), with a trace-marker line per
 * range when marker names a file. Returns the exit status. */
static int cmdFormat(slimioDev *dev, uint64_t wal_mib, uint64_t slot_mib, int force,
                     int deallocate, const char *marker) {
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
    for (int k = 1; k < SLIMIO_KINDS; k++) m.placement[k] = dev->placement[k];
    slimioDealloc dealloc;
    slimioDeallocInit(&dealloc, &dev->io, deallocate, slimioDevDeallocSupport(dev),
                      deallocWarn, NULL);
    if (marker && slimioDeallocOpenMarker(&dealloc, marker, err, sizeof(err)) < 0) {
        fprintf(stderr, "slimio-admin: --trace-marker: %s\n", err);
        return 1;
    }
    int rc = slimioFormatDevice(&dev->io, &m, &dealloc);
    slimioDeallocClose(&dealloc);
    if (rc) {
        fprintf(stderr, "slimio-admin: writing the metadata of %s failed: %s\n", dev->path,
                slimioStrerror(rc));
        return 1;
    }
    printf("formatted %s: format id %016llx, WAL %llu MiB, 3 slots of %llu MiB\n", dev->path,
           (unsigned long long)m.format_id,
           (unsigned long long)(m.wal_lbas * m.lba_size >> 20),
           (unsigned long long)(m.slot_lbas * m.lba_size >> 20));
    const slimioDeallocStats *ds = &dealloc.stats;
    if (!deallocate)
        printf("deallocated nothing (--no-deallocate)\n");
    else if (ds->unsupported)
        printf("deallocated nothing: %s does not support deallocation\n", dev->path);
    else
        printf("deallocated %llu LBAs (%llu MiB) from LBA %llu in %llu command(s)%s\n",
               (unsigned long long)ds->lbas,
               (unsigned long long)(ds->lbas * m.lba_size >> 20),
               (unsigned long long)m.wal_start, (unsigned long long)ds->commands,
               ds->errors ? " (some failed: see above)" : "");
    return 0;
}

/* Load the current metadata record of dev. Returns 0, or 1 after printing why there is
 * none. */
static int loadMeta(slimioDev *dev, slimioMeta *m) {
    int st = slimioMetaLoad(&dev->io, m);
    if (st != SLIMIO_OK) {
        fprintf(stderr, "slimio-admin: %s: %s\n", dev->path, slimioStrerror(st));
        return 1;
    }
    return 0;
}

/* --- the WAL chain --------------------------------------------------------------------- */

typedef struct chainGen {
    slimioWalGen g;
    slimioWalEnd end;
    int listed;         /* named in the metadata's gens[] */
    int gap_before;     /* does not start where its predecessor's valid end is: the blocks
                           in between (lost or corrupt) are not part of the stream */
    int emitted;        /* its payload was passed to the visitor */
} chainGen;

typedef struct walChain {
    chainGen *gens;
    size_t n;
    uint64_t blocks, bytes;     /* over all generations of the chain */
    slimioWalGen next;          /* the successor of the last generation, probed */
    int end_reason;             /* why that successor is not part of the chain */
} walChain;

/* The listed generation (from gens[]) with the smallest number above gen, or NULL. */
static const slimioWalGen *nextListed(const slimioMeta *m, uint64_t gen) {
    const slimioWalGen *best = NULL;
    for (int i = 0; i < SLIMIO_MAX_WAL_GENS; i++)
        if (m->gens[i].gen > gen && (!best || m->gens[i].gen < best->gen)) best = &m->gens[i];
    return best;
}

/* The newest listed generation's number (0: none). */
static uint64_t maxListed(const slimioMeta *m) {
    uint64_t g = 0;
    for (int i = 0; i < SLIMIO_MAX_WAL_GENS; i++)
        if (m->gens[i].gen > g) g = m->gens[i].gen;
    return g;
}

/* Whether g is one of the metadata's gens[] entries. */
static int isListed(const slimioMeta *m, const slimioWalGen *g) {
    for (int i = 0; i < SLIMIO_MAX_WAL_GENS; i++)
        if (m->gens[i].gen && m->gens[i].gen == g->gen && m->gens[i].start_lba == g->start_lba
            && m->gens[i].start_seq == g->start_seq) return 1;
    return 0;
}

/* Follow the chain of WAL generations from first (a gens[] entry): scan each to its valid
 * end and pass the payloads of the generations numbered emit_from or above to visit. The
 * next generation is the listed one numbered gen + 1 if there is one (the metadata names
 * its start), else the one whose first block is at slimioWalSuccessor's position
 * (slimioWalFollow: any generation above gen up to the newest listed one, since
 * generations that never wrote a block leave that position to the next), else the next
 * listed generation above (lost blocks in between: gap_before tells). The chain ends when none of these exists, or when
 * it has covered the whole WAL region. Returns SLIMIO_OK, an I/O error, or the visitor's
 * return; *c is filled in any case (free c->gens). */
static int walChainFollow(const slimioBlockIo *io, const slimioMeta *m,
                          const slimioWalGen *first, uint64_t emit_from,
                          slimioWalVisitFn visit, void *ctx, walChain *c) {
    memset(c, 0, sizeof(*c));
    c->end_reason = SLIMIO_OK;
    size_t cap = 0;
    uint32_t batch = IO_CHUNK_BYTES / io->lba_size;
    slimioWalGen cur = *first;
    int gap = 0;
    for (;;) {
        if (c->n == cap) {
            cap = cap ? cap * 2 : 8;
            chainGen *grown = realloc(c->gens, cap * sizeof(*grown));
            if (!grown) return -ENOMEM;
            c->gens = grown;
        }
        chainGen *cg = &c->gens[c->n++];
        memset(cg, 0, sizeof(*cg));
        cg->g = cur;
        cg->listed = isListed(m, &cur);
        cg->gap_before = gap;
        cg->emitted = cur.gen >= emit_from;
        int rc = slimioWalScan(io, m, &cur, m->wal_lbas - c->blocks, batch,
                               cg->emitted ? visit : NULL, ctx, &cg->end);
        if (rc) return rc;
        c->blocks += cg->end.blocks;
        c->bytes += cg->end.bytes;
        slimioWalSuccessor(m, &cur, &cg->end, &c->next);
        if (c->blocks >= m->wal_lbas) {
            c->end_reason = SLIMIO_OK;  /* the chain fills the region */
            return SLIMIO_OK;
        }
        const slimioWalGen *listed = nextListed(m, cur.gen);
        if (listed && listed->gen == c->next.gen) {
            gap = listed->start_lba != c->next.start_lba;
            cur = *listed;
            continue;
        }
        /* The server's rule (slimioWalFollow): the first block at the successor position
         * begins a newer generation, up to the newest listed one. */
        slimioWalGen found;
        int st;
        int more = slimioWalFollow(io, m, &cur, &cg->end, maxListed(m), &found, &st, NULL);
        if (more < 0) return more;
        if (more) {
            gap = 0;
            cur = found;
            continue;
        }
        if (listed) {
            gap = listed->start_lba != c->next.start_lba;
            cur = *listed;
            continue;
        }
        c->end_reason = st;
        return SLIMIO_OK;
    }
}

/* LBAs of the WAL region from the chain's first block to the end of its last block
 * (circular); the chain started at first. */
static uint64_t walChainUsedLbas(const slimioMeta *m, const slimioWalGen *first,
                                 const walChain *c) {
    if (c->n == 0) return 0;
    if (c->blocks >= m->wal_lbas) return m->wal_lbas;
    uint64_t d = (c->next.start_lba + m->wal_lbas - first->start_lba) % m->wal_lbas;
    return d == 0 && c->blocks ? m->wal_lbas : d;
}

/* Why a generation's scan stopped, for the text reports. */
static const char *stopText(const slimioWalEnd *end) {
    if (end->stop == SLIMIO_OK) return end->tail_used ? "ok (partial tail)" : "ok";
    return slimioStrerror(end->stop);
}

/* --- inspect --------------------------------------------------------------------------- */

/* A placement id for JSON: the id, or -1 for "no placement". */
static int placementJson(const slimioMeta *m, slimioDataKind kind) {
    return m->placement[kind] == SLIMIO_NO_PLACEMENT ? -1 : m->placement[kind];
}

/* One generation of the chain as a JSON object; extra adds the chain-only keys. */
static void jsonChainGen(const chainGen *cg, int extra) {
    printf("{\"gen\": %llu, \"start_lba\": %llu, \"blocks\": %llu, \"bytes\": %llu, "
           "\"stop\": ", (unsigned long long)cg->g.gen, (unsigned long long)cg->g.start_lba,
           (unsigned long long)cg->end.blocks, (unsigned long long)cg->end.bytes);
    jsonString(slimioStrerror(cg->end.stop));
    printf(", \"tail_used\": %u", cg->end.tail_used);
    if (extra)
        printf(", \"start_seq\": %llu, \"listed\": %s, \"gap_before\": %s",
               (unsigned long long)cg->g.start_seq, cg->listed ? "true" : "false",
               cg->gap_before ? "true" : "false");
    putchar('}');
}

/* Print the layout, the slots and the WAL chain from the oldest live generation (text or
 * JSON; JSON keys are only ever added). Returns the exit status. */
static int cmdInspect(slimioDev *dev, int json) {
    slimioMeta m;
    if (loadMeta(dev, &m)) return 1;
    walChain c;
    memset(&c, 0, sizeof(c));
    if (m.gens[0].gen) {
        int rc = walChainFollow(&dev->io, &m, &m.gens[0], 0, NULL, NULL, &c);
        if (rc) {
            fprintf(stderr, "slimio-admin: reading the WAL of %s failed: %s\n", dev->path,
                    slimioStrerror(rc));
            free(c.gens);
            return 1;
        }
    }
    uint64_t used = walChainUsedLbas(&m, &m.gens[0], &c);
    if (json) {
        printf("{\"device\": ");
        jsonString(dev->path);
        printf(", \"lba_size\": %u, \"lbas\": %llu, \"format_id\": \"%016llx\", "
               "\"meta_seq\": %llu,\n", m.lba_size, (unsigned long long)m.device_lbas,
               (unsigned long long)m.format_id, (unsigned long long)m.seq);
        printf(" \"wal\": {\"start_lba\": %llu, \"lbas\": %llu, \"live_bytes\": %llu, "
               "\"used_lbas\": %llu, \"free_lbas\": %llu, \"chain_end\": ",
               (unsigned long long)m.wal_start, (unsigned long long)m.wal_lbas,
               (unsigned long long)c.bytes, (unsigned long long)used,
               (unsigned long long)(m.wal_lbas - used));
        if (c.n) {
            printf("{\"gen\": %llu, \"start_lba\": %llu, \"reason\": ",
                   (unsigned long long)c.next.gen, (unsigned long long)c.next.start_lba);
            jsonString(slimioStrerror(c.end_reason));
            putchar('}');
        } else {
            printf("null");
        }
        printf("},\n \"slots\": [");
        for (int i = 0; i < SLIMIO_SLOTS; i++)
            printf("%s{\"slot\": %d, \"start_lba\": %llu, \"lbas\": %llu, \"role\": \"%s\", "
                   "\"valid\": %s, \"length_bytes\": %llu, \"crc32c\": \"%08x\", "
                   "\"wal_gen\": %llu}", i ? ", " : "", i,
                   (unsigned long long)slimioSlotLba(&m, i), (unsigned long long)m.slot_lbas,
                   slimioRoleName(m.slots[i].role), m.slots[i].valid ? "true" : "false",
                   (unsigned long long)m.slots[i].length, m.slots[i].crc,
                   (unsigned long long)m.slots[i].wal_gen);
        printf("],\n \"wal_generations\": [");
        int first = 1;
        for (size_t k = 0; k < c.n; k++) {
            if (!c.gens[k].listed) continue;
            printf("%s", first ? "" : ", ");
            jsonChainGen(&c.gens[k], 0);
            first = 0;
        }
        printf("],\n \"wal_chain\": [");
        for (size_t k = 0; k < c.n; k++) {
            printf("%s", k ? ", " : "");
            jsonChainGen(&c.gens[k], 1);
        }
        printf("],\n \"placement\": {\"wal\": %d, \"wal_snapshot\": %d, \"on_demand\": %d}}\n",
               placementJson(&m, SLIMIO_KIND_WAL), placementJson(&m, SLIMIO_KIND_WAL_SNAPSHOT),
               placementJson(&m, SLIMIO_KIND_ON_DEMAND));
        free(c.gens);
        return 0;
    }
    printf("device      %s (%u-byte LBAs, %llu LBAs)\n", dev->path, m.lba_size,
           (unsigned long long)m.device_lbas);
    printf("format id   %016llx, metadata seq %llu\n", (unsigned long long)m.format_id,
           (unsigned long long)m.seq);
    printf("wal         LBA %llu + %llu\n", (unsigned long long)m.wal_start,
           (unsigned long long)m.wal_lbas);
    for (int i = 0; i < SLIMIO_SLOTS; i++) {
        printf("slot %d      LBA %llu + %llu  %-12s %s  %llu bytes", i,
               (unsigned long long)slimioSlotLba(&m, i), (unsigned long long)m.slot_lbas,
               slimioRoleName(m.slots[i].role), m.slots[i].valid ? "valid  " : "empty  ",
               (unsigned long long)m.slots[i].length);
        if (m.slots[i].valid) printf("  crc32c %08x", m.slots[i].crc);
        if (m.slots[i].valid && m.slots[i].role == SLIMIO_ROLE_WAL_SNAPSHOT)
            printf("  replay from wal gen %llu", (unsigned long long)m.slots[i].wal_gen);
        putchar('\n');
    }
    for (size_t k = 0; k < c.n; k++)
        if (c.gens[k].listed)
            printf("wal gen %llu  from LBA %llu: %llu blocks, %llu bytes\n",
                   (unsigned long long)c.gens[k].g.gen,
                   (unsigned long long)c.gens[k].g.start_lba,
                   (unsigned long long)c.gens[k].end.blocks,
                   (unsigned long long)c.gens[k].end.bytes);
    if (c.n) {
        printf("wal chain   from gen %llu (oldest live):\n", (unsigned long long)m.gens[0].gen);
        for (size_t k = 0; k < c.n; k++) {
            const chainGen *cg = &c.gens[k];
            printf("  gen %-8llu LBA %-10llu %8llu blocks %12llu bytes  %-8s stop: %s%s\n",
                   (unsigned long long)cg->g.gen, (unsigned long long)cg->g.start_lba,
                   (unsigned long long)cg->end.blocks, (unsigned long long)cg->end.bytes,
                   cg->listed ? "listed" : "chained", stopText(&cg->end),
                   cg->gap_before ? "  (gap before it)" : "");
        }
        printf("  ends: gen %llu at LBA %llu: %s\n", (unsigned long long)c.next.gen,
               (unsigned long long)c.next.start_lba,
               c.blocks >= m.wal_lbas ? "the chain fills the WAL region"
                                      : slimioStrerror(c.end_reason));
    }
    printf("wal live    %llu bytes, %llu LBAs used, %llu LBAs free\n",
           (unsigned long long)c.bytes, (unsigned long long)used,
           (unsigned long long)(m.wal_lbas - used));
    free(c.gens);
    return 0;
}

/* --- export ---------------------------------------------------------------------------- */

/* Export the snapshot in the slot named by spec to output (see the top of the file).
 * Returns the exit status. */
static int cmdExport(slimioDev *dev, slotSpec spec, const char *output, int force) {
    slimioMeta m;
    if (loadMeta(dev, &m)) return 1;
    int s = spec.index;
    for (int i = 0; s < 0 && i < SLIMIO_SLOTS; i++)
        if (m.slots[i].role == spec.role) s = i;
    if (s < 0) {    /* not reached for a metadata record that decoded */
        fprintf(stderr, "slimio-admin: %s has no %s slot\n", dev->path,
                slimioRoleName((uint8_t)spec.role));
        return 1;
    }
    const slimioSlot *slot = &m.slots[s];
    const char *role = slimioRoleName(slot->role);
    if (!slot->valid) {
        fprintf(stderr, "slimio-admin: slot %d (%s) of %s holds no valid snapshot; nothing "
                "to export (see slimio-admin inspect)\n", s, role, dev->path);
        return 1;
    }
    outFile out;
    if (outOpen(&out, output, force)) return 1;
    unsigned char *buf = alignedAlloc(IO_CHUNK_BYTES);
    if (!buf) {
        fprintf(stderr, "slimio-admin: out of memory\n");
        outAbort(&out);
        return 1;
    }
    double t0 = nowSeconds();
    uint64_t lba = slimioSlotLba(&m, s), done = 0;
    uint32_t crc = 0;
    int rc = 0;
    while (done < slot->length) {
        uint64_t n = slot->length - done;
        if (n > IO_CHUNK_BYTES) n = IO_CHUNK_BYTES;
        uint32_t nlb = (uint32_t)((n + m.lba_size - 1) / m.lba_size);
        if ((rc = dev->io.read(dev->io.ctx, lba, nlb, buf))) {
            fprintf(stderr, "slimio-admin: reading slot %d (%s) of %s at LBA %llu failed: %s\n",
                    s, role, dev->path, (unsigned long long)lba, slimioStrerror(rc));
            break;
        }
        if (done == 0 && memcmp(buf, "REDIS", n < 5 ? n : 5))
            fprintf(stderr, "slimio-admin: warning: slot %d (%s) does not start with an RDB "
                    "header (\"REDIS\")\n", s, role);
        crc = slimioCrc32c(crc, buf, n);
        if ((rc = outWrite(&out, buf, n))) {
            fprintf(stderr, "slimio-admin: writing %s failed: %s\n", out.partial,
                    strerror(-rc));
            break;
        }
        lba += nlb;
        done += n;
    }
    free(buf);
    if (!rc && crc != slot->crc) {
        fprintf(stderr, "slimio-admin: refusing to export slot %d (%s) of %s: CRC32C mismatch "
                "(the metadata says %08x, the %llu bytes read give %08x); the snapshot is "
                "damaged, no file written\n", s, role, dev->path, slot->crc,
                (unsigned long long)slot->length, crc);
        rc = 1;
    }
    if (rc) {
        outAbort(&out);
        return 1;
    }
    double secs = nowSeconds() - t0;
    if (outCommit(&out, force)) return 1;
    printf("exported slot %d (%s) of %s to %s: %llu bytes, CRC32C %08x ok, %.3f s, %.1f MB/s\n",
           s, role, dev->path, output, (unsigned long long)slot->length, crc, secs,
           secs > 0 ? slot->length / 1e6 / secs : 0.0);
    return 0;
}

/* --- dump-wal -------------------------------------------------------------------------- */

typedef struct dumpCtx { outFile *out; int err; } dumpCtx;

/* slimioWalVisitFn writing each payload to the output; keeps the write error. */
static int dumpVisit(void *ctx, const unsigned char *payload, uint32_t len) {
    dumpCtx *d = ctx;
    d->err = outWrite(d->out, payload, len);
    return d->err ? 1 : 0;
}

/* Write the live WAL from the chosen generation on as an AOF stream to output (see the top
 * of the file). Returns the exit status. */
static int cmdDumpWal(slimioDev *dev, uint64_t from_gen, const char *output, int force) {
    slimioMeta m;
    if (loadMeta(dev, &m)) return 1;
    /* Reports go to stderr when the stream goes to stdout. */
    FILE *report = strcmp(output, "-") ? stdout : stderr;
    const slimioSlot *snap = NULL;
    for (int i = 0; i < SLIMIO_SLOTS; i++)
        if (m.slots[i].role == SLIMIO_ROLE_WAL_SNAPSHOT && m.slots[i].valid) snap = &m.slots[i];
    const slimioWalGen *first = m.gens[0].gen ? &m.gens[0] : NULL;
    uint64_t emit_from = first ? first->gen : 0;
    const char *why = "the oldest live generation";
    if (from_gen) {
        first = NULL;
        for (int i = 0; i < SLIMIO_MAX_WAL_GENS; i++)
            if (m.gens[i].gen == from_gen) first = &m.gens[i];
        if (!first) {
            fprintf(stderr, "slimio-admin: generation %llu is not a live WAL generation of %s "
                    "(live:", (unsigned long long)from_gen, dev->path);
            for (int i = 0; i < SLIMIO_MAX_WAL_GENS; i++)
                if (m.gens[i].gen) fprintf(stderr, " %llu", (unsigned long long)m.gens[i].gen);
            fprintf(stderr, "%s); --from-gen names one of them\n", m.gens[0].gen ? "" : " none");
            return 1;
        }
        emit_from = from_gen;
        why = "--from-gen";
    } else if (snap && snap->wal_gen && first) {
        if (snap->wal_gen < first->gen) {
            fprintf(stderr, "slimio-admin: warning: the WAL-Snapshot replays from generation "
                    "%llu but the oldest live generation is %llu; dumping from %llu\n",
                    (unsigned long long)snap->wal_gen, (unsigned long long)first->gen,
                    (unsigned long long)first->gen);
        } else {
            /* Start at its entry if it is listed, else follow the chain up to it. */
            for (int i = 0; i < SLIMIO_MAX_WAL_GENS; i++)
                if (m.gens[i].gen == snap->wal_gen) first = &m.gens[i];
            emit_from = snap->wal_gen;
            why = "the WAL-Snapshot's first generation to replay";
        }
    }
    outFile out;
    if (outOpen(&out, output, force)) return 1;
    if (!first) {
        fprintf(report, "%s has no live WAL generation: the AOF stream is empty\n", dev->path);
        return outCommit(&out, force);
    }
    fprintf(report, "WAL of %s from generation %llu (%s):\n", dev->path,
            (unsigned long long)emit_from, why);
    double t0 = nowSeconds();
    dumpCtx d = {&out, 0};
    walChain c;
    int rc = walChainFollow(&dev->io, &m, first, emit_from, dumpVisit, &d, &c);
    if (rc) {
        if (d.err)
            fprintf(stderr, "slimio-admin: writing %s failed: %s\n",
                    out.partial ? out.partial : "stdout", strerror(-d.err));
        else
            fprintf(stderr, "slimio-admin: reading the WAL of %s failed: %s\n", dev->path,
                    slimioStrerror(rc));
        free(c.gens);
        outAbort(&out);
        return 1;
    }
    uint64_t bytes = 0, gens = 0;
    int reached = 0, gaps = 0;
    for (size_t k = 0; k < c.n; k++) {
        const chainGen *cg = &c.gens[k];
        if (cg->emitted) {
            reached = 1;
            bytes += cg->end.bytes;
            gens++;
            gaps += k > 0 && cg->gap_before && c.gens[k - 1].emitted;
        }
        fprintf(report, "  gen %-8llu LBA %-10llu %8llu blocks %12llu bytes  %-8s stop: %s%s%s\n",
                (unsigned long long)cg->g.gen, (unsigned long long)cg->g.start_lba,
                (unsigned long long)cg->end.blocks, (unsigned long long)cg->end.bytes,
                cg->listed ? "listed" : "chained", stopText(&cg->end),
                cg->gap_before ? "  (gap before it)" : "",
                cg->emitted ? "" : "  (before the first to replay: skipped)");
        if (cg->emitted && cg->gap_before && k > 0 && c.gens[k - 1].emitted)
            fprintf(stderr, "slimio-admin: warning: generation %llu does not start where "
                    "generation %llu ends (LBA %llu): the stream misses what was between\n",
                    (unsigned long long)cg->g.gen, (unsigned long long)c.gens[k - 1].g.gen,
                    (unsigned long long)slimioWalLba(&m, c.gens[k - 1].end.next_lba,
                                                     c.gens[k - 1].end.tail_used ? 1 : 0));
    }
    fprintf(report, "  ends: gen %llu at LBA %llu: %s\n", (unsigned long long)c.next.gen,
            (unsigned long long)c.next.start_lba,
            c.blocks >= m.wal_lbas ? "the chain fills the WAL region"
                                   : slimioStrerror(c.end_reason));
    free(c.gens);
    if (!reached) {
        fprintf(stderr, "slimio-admin: the chain of WAL generations from %llu ends before "
                "generation %llu (%s); nothing written\n", (unsigned long long)first->gen,
                (unsigned long long)emit_from, why);
        outAbort(&out);
        return 1;
    }
    double secs = nowSeconds() - t0;
    if (outCommit(&out, force)) return 1;
    fprintf(report, "wrote %llu bytes of AOF from %llu generations to %s, %.3f s, %.1f MB/s%s\n",
            (unsigned long long)bytes, (unsigned long long)gens,
            strcmp(output, "-") ? output : "stdout", secs, secs > 0 ? bytes / 1e6 / secs : 0.0,
            gaps ? " (with gaps: see the warnings)" : "");
    return 0;
}

/* What slimioDevOpen discovered, as JSON. */
static int cmdDevice(const slimioDev *dev) {
    printf("{\"path\": \"%s\", \"kind\": \"%s\", \"lba_size\": %u, \"lbas\": %llu",
           dev->path, dev->is_nvme ? "nvme" : dev->is_blockdev ? "block" : "file",
           dev->lba_size, (unsigned long long)dev->lbas);
    if (dev->is_nvme) {
        const slimioNvmeInfo *n = &dev->nvme;
        printf(", \"nsid\": %u, \"write_cache\": %s, \"fdp_supported\": %s, "
               "\"fdp_enabled\": %s, \"fdp_config_index\": %d, \"endurance_group\": %u, "
               "\"mdts_bytes\": %u, \"max_io_bytes\": %u, \"placement_ids\": [",
               n->nsid, n->vwc ? "true" : "false", n->fdp_supported ? "true" : "false",
               n->fdp_enabled ? "true" : "false", n->fdp_config_index, n->endgid,
               n->mdts_bytes, n->max_io_bytes);
        for (unsigned i = 0; i < n->npids; i++) printf("%s%u", i ? ", " : "", n->pids[i]);
        printf("], \"dsm\": %s, \"dmrl\": %u, \"dmrsl\": %u, \"dmsl\": %llu",
               n->dsm ? "true" : "false", n->dmrl, n->dmrsl, (unsigned long long)n->dmsl);
    }
    printf(", \"deallocate\": %d}\n", slimioDevDeallocSupport(dev));
    return 0;
}

/* --placement-*: a placement id 0-65534, or -1 for none. */
static int parsePlacement(const char *opt, const char *v) {
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < -1 || n > 65534) {
        fprintf(stderr, "slimio-admin: %s wants a placement id (0-65534) or -1 for none, "
                "got '%s'\n", opt, v);
        exit(2);
    }
    return (int)n;
}

int main(int argc, char **argv) {
    if (argc < 2) usage();
    const char *cmd = argv[1], *path = NULL, *output = NULL;
    uint64_t wal_mib = 1024, slot_mib = 1024, lba_size = 0, from_gen = 0;
    int force = 0, json = 0, have_slot = 0, deallocate = 1;
    const char *marker = NULL;
    int place[SLIMIO_KINDS] = {-1, -1, -1, -1};
    static const char *const place_names[SLIMIO_KINDS] = {
        "metadata", "--placement-wal", "--placement-wal-snapshot", "--placement-on-demand"};
    slotSpec slot = {0, 0};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (!strcmp(a, "--device") && more) path = argv[++i];
        else if (!strcmp(a, "--wal-mib") && more) wal_mib = parseNum(a, argv[++i]);
        else if (!strcmp(a, "--slot-mib") && more) slot_mib = parseNum(a, argv[++i]);
        else if (!strcmp(a, "--lba-size") && more) lba_size = parseNum(a, argv[++i]);
        else if (!strcmp(a, "--slot") && more) { slot = parseSlot(argv[++i]); have_slot = 1; }
        else if (!strcmp(a, "--output") && more) output = argv[++i];
        else if (!strcmp(a, "--from-gen") && more) from_gen = parseNum(a, argv[++i]);
        else if (!strcmp(a, "--placement-wal") && more)
            place[SLIMIO_KIND_WAL] = parsePlacement(a, argv[++i]);
        else if (!strcmp(a, "--placement-wal-snapshot") && more)
            place[SLIMIO_KIND_WAL_SNAPSHOT] = parsePlacement(a, argv[++i]);
        else if (!strcmp(a, "--placement-on-demand") && more)
            place[SLIMIO_KIND_ON_DEMAND] = parsePlacement(a, argv[++i]);
        else if (!strcmp(a, "--trace-marker") && more) marker = argv[++i];
        else if (!strcmp(a, "--no-deallocate")) deallocate = 0;
        else if (!strcmp(a, "--force")) force = 1;
        else if (!strcmp(a, "--json")) json = 1;
        else {
            fprintf(stderr, "slimio-admin: unknown or incomplete option '%s'\n", a);
            usage();
        }
    }
    int is_export = !strcmp(cmd, "export"), is_dump = !strcmp(cmd, "dump-wal");
    if (strcmp(cmd, "format") && strcmp(cmd, "inspect") && strcmp(cmd, "device") && !is_export &&
        !is_dump)
        usage();
    if (!path) {
        fprintf(stderr, "slimio-admin: name the device with --device PATH\n");
        return 2;
    }
    if (is_export && !have_slot) {
        fprintf(stderr, "slimio-admin: name the slot to export with --slot "
                "wal-snapshot|reserve|on-demand|0|1|2\n");
        return 2;
    }
    if ((is_export || is_dump) && (!output || !*output)) {
        fprintf(stderr, "slimio-admin: name the output file with --output FILE%s\n",
                is_dump ? " (- for stdout)" : "");
        return 2;
    }
    if (is_export && !strcmp(output, "-")) {
        fprintf(stderr, "slimio-admin: export writes to a file, not stdout (its CRC is "
                "checked before the file appears); name one with --output FILE.rdb\n");
        return 2;
    }
    slimioDev dev;
    char err[512];
    if (slimioDevOpen(&dev, path, (uint32_t)lba_size, err, sizeof(err))) {
        fprintf(stderr, "slimio-admin: %s\n", err);
        return 1;
    }
    if (slimioDevSetPlacement(&dev, place, place_names, err, sizeof(err))) {
        fprintf(stderr, "slimio-admin: %s\n", err);
        slimioDevClose(&dev);
        return 1;
    }
    int rc;
    if (!strcmp(cmd, "format")) rc = cmdFormat(&dev, wal_mib, slot_mib, force, deallocate, marker);
    else if (!strcmp(cmd, "device")) rc = cmdDevice(&dev);
    else if (is_export) rc = cmdExport(&dev, slot, output, force);
    else if (is_dump) rc = cmdDumpWal(&dev, from_gen, output, force);
    else rc = cmdInspect(&dev, json);
    slimioDevClose(&dev);
    return rc;
}
