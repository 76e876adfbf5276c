/* SlimIO inside Redis: the glue between Redis's hooks and SlimIO's engine. See slimio.h
 * for the mapping from Redis's AOF/RDB files to SlimIO's LBA space. */
#include "server.h"
#include "slimio.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "slimio_backend.h"
#include "slimio_crc32c.h"
#include "slimio_dealloc.h"
#include "slimio_failpoint.h"
#include "slimio_snap.h"
#include "slimio_wal.h"

slimioConfig slimio_cfg;

configEnum slimio_backend_enum[] = {
    {"file", SLIMIO_BACKEND_FILE}, {"nvme", SLIMIO_BACKEND_NVME}, {NULL, 0}};
configEnum slimio_format_enum[] = {
    {"never", SLIMIO_FORMAT_NEVER}, {"if-blank", SLIMIO_FORMAT_IF_BLANK},
    {"force", SLIMIO_FORMAT_FORCE}, {NULL, 0}};
configEnum slimio_load_snapshot_enum[] = {
    {"wal-snapshot", SLIMIO_LOAD_WAL_SNAPSHOT}, {"on-demand", SLIMIO_LOAD_ON_DEMAND}, {NULL, 0}};
configEnum slimio_snapshot_sink_enum[] = {
    {"device", SLIMIO_SINK_DEVICE}, {"discard", SLIMIO_SINK_DISCARD}, {NULL, 0}};

/* What a snapshot writer reports to the main process (a MAP_SHARED page that survives the
 * fork, so the child's result reaches the parent's done handler). */
typedef struct slimioReport {
    pid_t pid;
    int kind;
    int slot;
    int ok;
    uint64_t length;
    uint32_t crc;
    uint64_t device_bytes;
    double seconds;
    int discarded;              /* serialised into the discard sink: nothing to promote */
} slimioReport;

static struct {
    int enabled;
    slimioBackend be;
    slimioMeta meta;
    slimioWal wal;
    int wal_open;
    slimioReport *report;
    slimioDealloc dealloc;          /* deallocation and its trace-marker record */
    slimioWalGen rewrite_gen;       /* generation opened when the running rewrite began */
    /* Recovery. */
    slimioWalGen write_gen;         /* where the WAL continues after loading */
    int restore_on_demand;          /* loaded the On-Demand snapshot: rebase the WAL */
    slimioWalGen cur_gen;           /* generation being loaded */
    slimioStreamStats load_stats;
    uint64_t recovery_bytes, recovery_device_bytes, recovery_wal_bytes, recovery_gens;
    double recovery_s;
    int recovery_slot;
    /* Snapshots. */
    uint64_t snapshots[SLIMIO_KINDS], promotions;
    uint64_t last_snapshot_bytes;
    double last_snapshot_s;
    int last_snapshot_kind;
    uint64_t early_rewrites;        /* rewrites scheduled by the region's fill level */
    int refusing;                   /* writes refused: the region is full */
    uint64_t refusals;              /* times it filled */
} S;

/* Group commit (Always-Log): the main thread does not wait for the WAL. A reply built in
 * epoch e (the event-loop iteration between two WAL hand-overs) is held until everything
 * appended by the end of e is durable; meanwhile the loop serves other clients, whose
 * commands join the next batch. See slimio.h, "Group commit". */
#define SLIMIO_EPOCH_QUEUE 64
static struct {
    unsigned long long open;        /* replies built now belong to this epoch */
    unsigned long long durable;     /* epochs up to this one are durable */
    struct { unsigned long long epoch; uint64_t total, closed_us; } q[SLIMIO_EPOCH_QUEUE];
    unsigned qh, qn;                /* closed epochs not yet durable, oldest first */
    list *held;                     /* clients whose replies wait */
    int fd;                         /* eventfd the WAL's completion thread writes */
    uint64_t holds, releases, wakeups;
    /* How late held replies went out: ready_us is when the newest durable epoch became
     * releasable (closed, and durable by the WAL: the later of the two); release_lag_us
     * sums, over released replies, the microseconds from then to their release. */
    uint64_t ready_us, release_lag_us;
} G = {.open = 1, .fd = -1};

/* Periodical-Log's loss window (slimioWalBoundLag): Redis's everysec contract. */
#define SLIMIO_MAX_UNWRITTEN_US 1000000
#define SLIMIO_MAX_UNDURABLE_US 2000000
/* The fill level of the WAL region (per mille) at which a WAL-Snapshot is scheduled: 5/8,
 * which leaves a quarter of the region for what arrives while it runs, before the reserve
 * (the sizing rule: README, "A full WAL region"; plan/checks.py checks it). */
#define SLIMIO_WAL_REWRITE_PERMILLE 625

static const char *kindName(int kind) {
    switch (kind) {
    case SLIMIO_KIND_META: return "metadata";
    case SLIMIO_KIND_WAL: return "wal";
    case SLIMIO_KIND_WAL_SNAPSHOT: return "wal-snapshot";
    case SLIMIO_KIND_ON_DEMAND: return "on-demand";
    }
    return "?";
}

int slimioIsValidLbaSize(long long val, const char **err) {
    if (val < 512 || val > 65536 || (val & (val - 1))) {
        *err = "slimio-lba-size must be a power of two from 512 to 65536";
        return 0;
    }
    return 1;
}

int slimioEnabled(void) {
    return S.enabled;
}

static void fatal(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    serverLog(LL_WARNING, "SlimIO: %s", msg);
    exit(1);
}

static int slotWithRole(const slimioMeta *m, int role) {
    for (int i = 0; i < SLIMIO_SLOTS; i++)
        if (m->slots[i].role == role) return i;
    return -1;
}

static void loadingExit(void);

static void atForkChild(void) {
    /* The child never touches the parent's WAL ring, thread or staging buffers. */
    if (S.wal_open) slimioWalAtForkChild(&S.wal);
    S.wal_open = 0;
    /* A snapshot child outliving its parent would go on writing the Reserve slot, which
     * the next server on the device writes its own snapshots into: it dies with the parent
     * (stock Redis's orphan only finishes a temporary file nobody reads). */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != server.pid) _exit(1);
}

/* ------------------------------------------------------------------------------------
 * Start-up: configuration, device, format policy, metadata
 * ---------------------------------------------------------------------------------- */

static uint64_t randomFormatId(void) {
    uint64_t id = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (read(fd, &id, sizeof(id)) != sizeof(id)) id = 0;
        close(fd);
    }
    if (!id) id = ((uint64_t)ustime() << 16) ^ (uint64_t)getpid();
    return id;
}

/* slimioDealloc's warnings go to the server log. */
static void deallocWarn(void *ctx, const char *msg) {
    UNUSED(ctx);
    serverLog(LL_WARNING, "SlimIO: %s", msg);
}

/* Format the device with the configured sizes (slimioFormatDevice: the WAL region and the
 * slots are deallocated before the first metadata commit). Exits when it cannot. */
static void formatDevice(void) {
    char err[512];
    uint64_t lba = S.be.dev.lba_size, align = SLIMIO_ALIGN_BYTES;
    uint64_t wal = ((uint64_t)slimio_cfg.wal_size + align - 1) / align * align;
    uint64_t slot = (uint64_t)slimio_cfg.slot_size;
    uint64_t dev_bytes = S.be.dev.lbas * lba;
    slimioMeta m;
    if (!slot) {
        /* Three equal slots in what the WAL region (with its block headers) leaves. */
        slimioLayoutPlan(UINT64_MAX / lba, S.be.dev.lba_size, wal, align, &m, err, sizeof(err));
        uint64_t used = m.slot_start * lba;
        if (dev_bytes > used) slot = (dev_bytes - used) / SLIMIO_SLOTS / align * align;
    }
    if (slimioLayoutPlan(S.be.dev.lbas, S.be.dev.lba_size, wal, slot ? slot : align, &m, err,
                         sizeof(err)) != SLIMIO_OK)
        fatal("%s is too small: %s. Use a larger device or lower slimio-wal-size / "
              "slimio-slot-size", S.be.dev.path, err);
    m.format_id = randomFormatId();
    m.placement[SLIMIO_KIND_META] = SLIMIO_NO_PLACEMENT;
    for (int k = 1; k < SLIMIO_KINDS; k++) m.placement[k] = S.be.dev.placement[k];
    slimioDeallocStats before = S.dealloc.stats;
    int rc = slimioFormatDevice(&S.be.io, &m, &S.dealloc);
    if (rc) fatal("formatting %s failed: %s", S.be.dev.path, rc < 0 && rc > -4096 ? strerror(-rc) : slimioStrerror(rc));
    serverLog(LL_NOTICE, "SlimIO: formatted %s: WAL %llu LBAs at %llu, 3 slots of %llu LBAs at "
              "%llu (LBA %u bytes, format id %016llx); deallocated %llu LBAs%s", S.be.dev.path,
              (unsigned long long)m.wal_lbas, (unsigned long long)m.wal_start,
              (unsigned long long)m.slot_lbas, (unsigned long long)m.slot_start, m.lba_size,
              (unsigned long long)m.format_id,
              (unsigned long long)(S.dealloc.stats.lbas - before.lbas),
              !slimio_cfg.deallocate ? " (slimio-deallocate no)"
              : S.dealloc.stats.unsupported > before.unsupported ? " (not supported by the device)"
              : "");
    S.meta = m;
}

int slimioServerInit(void) {
    char err[512];
    if (!slimio_cfg.device || !slimio_cfg.device[0]) return 0;
    if (server.aof_state != AOF_ON)
        fatal("slimio-device %s is set but appendonly is no: SlimIO is the storage of the AOF "
              "and its snapshots; set appendonly yes, or remove slimio-device",
              slimio_cfg.device);
    if (server.masterhost)
        fatal("SlimIO on a replica is not supported: remove replicaof, or remove slimio-device");
    if (!server.repl_diskless_sync)
        fatal("SlimIO keeps no dump.rdb file for disk-based replication: set "
              "repl-diskless-sync yes, or remove slimio-device");
    if (slimioFailpointInitFromEnv(err, sizeof(err)) < 0) fatal("SLIMIO_FAILPOINTS: %s", err);
    if (slimioBackendOpen(&S.be, slimio_cfg.backend, slimio_cfg.device,
                          (uint32_t)slimio_cfg.lba_size, err, sizeof(err)) < 0)
        fatal("%s", err);
    int place[SLIMIO_KINDS] = {-1, slimio_cfg.placement_wal, slimio_cfg.placement_wal_snapshot,
                               slimio_cfg.placement_on_demand};
    static const char *const names[SLIMIO_KINDS] = {
        "metadata", "slimio-placement-wal", "slimio-placement-wal-snapshot",
        "slimio-placement-on-demand"};
    if (slimioDevSetPlacement(&S.be.dev, place, names, err, sizeof(err)) < 0) fatal("%s", err);
    slimioDeallocInit(&S.dealloc, &S.be.io, slimio_cfg.deallocate,
                      slimioDevDeallocSupport(&S.be.dev), deallocWarn, NULL);
    if (slimio_cfg.trace_marker && slimio_cfg.trace_marker[0] &&
        slimioDeallocOpenMarker(&S.dealloc, slimio_cfg.trace_marker, err, sizeof(err)) < 0)
        fatal("slimio-trace-marker: %s", err);
    if (S.be.dev.is_nvme) {
        char desc[256];
        slimioNvmeDescribe(&S.be.dev.nvme, desc, sizeof(desc));
        serverLog(LL_NOTICE, "SlimIO: %s: %s", S.be.dev.path, desc);
    }

    int rc = slimioMetaLoad(&S.be.io, &S.meta);
    if (rc == SLIMIO_OK) {
        if (S.meta.lba_size != S.be.dev.lba_size)
            fatal("%s carries a SlimIO layout with %u-byte LBAs but is opened with %u-byte LBAs: "
                  "set slimio-lba-size %u", S.be.dev.path, S.meta.lba_size, S.be.dev.lba_size,
                  S.meta.lba_size);
        if (S.meta.device_lbas > S.be.dev.lbas)
            fatal("%s is smaller (%llu LBAs) than its SlimIO layout (%llu LBAs)", S.be.dev.path,
                  (unsigned long long)S.be.dev.lbas, (unsigned long long)S.meta.device_lbas);
        serverLog(LL_NOTICE, "SlimIO: %s (%s backend) carries layout %016llx, metadata record %llu",
                  S.be.dev.path, S.be.ops->name, (unsigned long long)S.meta.format_id,
                  (unsigned long long)S.meta.seq);
    } else {
        const char *sig = slimioDevForeignSignature(&S.be.dev);
        const char *state = rc == SLIMIO_ERR_NOMETA ? "no SlimIO layout" : "a damaged SlimIO layout";
        if (slimio_cfg.format == SLIMIO_FORMAT_NEVER)
            fatal("%s carries %s%s%s (slimio-format never): format it with slimio-admin format, "
                  "or set slimio-format if-blank", S.be.dev.path, sig ? sig : state,
                  rc == SLIMIO_ERR_NOMETA ? "" : ": ", rc == SLIMIO_ERR_NOMETA ? "" : slimioStrerror(rc));
        if (slimio_cfg.format == SLIMIO_FORMAT_IF_BLANK && sig)
            fatal("refusing to format %s: it carries %s. Name another device, or set "
                  "slimio-format force to erase it", S.be.dev.path, sig);
        if (slimio_cfg.format == SLIMIO_FORMAT_IF_BLANK && rc != SLIMIO_ERR_NOMETA)
            fatal("refusing to format %s: it carries a damaged SlimIO layout (%s). Inspect it "
                  "with slimio-admin inspect, or set slimio-format force to erase it",
                  S.be.dev.path, slimioStrerror(rc));
        if (sig) serverLog(LL_WARNING, "SlimIO: erasing %s on %s (slimio-format force)", sig, S.be.dev.path);
        formatDevice();
    }
    S.report = mmap(NULL, sizeof(slimioReport), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (S.report == MAP_FAILED) fatal("cannot map the snapshot report page: %s", strerror(errno));
    memset(S.report, 0, sizeof(*S.report));
    pthread_atfork(NULL, NULL, atForkChild);
    atexit(loadingExit);
    S.enabled = 1;
    return 1;
}

/* ------------------------------------------------------------------------------------
 * Recovery
 * ---------------------------------------------------------------------------------- */

#define SLOT_STREAM "slimio-slot-"
#define WAL_STREAM "slimio-wal-gen-"

/* What recovery is loading, for the message if Redis's loader exits on damaged data (it
 * calls exit(1) from inside; this names the slot or generation and what to do). */
static char loading_what[160];

static void loadingExit(void) {
    if (!loading_what[0]) return;
    serverLog(LL_WARNING, "SlimIO: %s of %s could not be loaded: it is damaged. Inspect the "
              "device with slimio-admin inspect; export the other snapshots with slimio-admin "
              "export, or start from the On-Demand snapshot (slimio-load-snapshot on-demand)",
              loading_what, S.be.dev.path);
}

FILE *slimioOpenStream(const char *name) {
    size_t ra = (size_t)slimio_cfg.readahead_size;
    memset(&S.load_stats, 0, sizeof(S.load_stats));
    if (!strncmp(name, SLOT_STREAM, strlen(SLOT_STREAM))) {
        int i = atoi(name + strlen(SLOT_STREAM));
        if (i < 0 || i >= SLIMIO_SLOTS || !S.meta.slots[i].valid) { errno = ENOENT; return NULL; }
        const slimioSlot *s = &S.meta.slots[i];
        return slimioOpenSlotStream(&S.be, slimioSlotLba(&S.meta, i), s->length, s->crc, ra,
                                    &S.load_stats);
    }
    if (!strncmp(name, WAL_STREAM, strlen(WAL_STREAM)))
        return slimioOpenWalStream(&S.be, &S.meta, &S.cur_gen, ra, &S.load_stats);
    errno = ENOENT;
    return NULL;
}

static const slimioWalGen *newestGen(void);

int slimioTruncateStream(const char *name, off_t valid_up_to) {
    if (strncmp(name, WAL_STREAM, strlen(WAL_STREAM))) { errno = EINVAL; return -1; }
    /* A generation a later one follows (slimioWalFollow finds it where this one's valid
     * blocks end) was ended there by an earlier recovery, which truncated it at the last
     * complete command: what Redis cuts now is what that recovery left unexecuted (an
     * incomplete MULTI, which Redis reverts). It stays as it is: rewriting its tail would
     * move its end away from where the next generation begins. A generation closed by a
     * rewrite ends with whole transactions, and damage inside one ends its scan where no
     * generation begins (README, "Generations"). */
    const slimioWalGen *newest = newestGen();
    slimioWalGen after;
    int followed = slimioWalFollow(&S.be.io, &S.meta, &S.cur_gen, &S.load_stats.end,
                                   newest ? newest->gen : S.cur_gen.gen, &after, NULL, NULL);
    if (followed == 1) {
        serverLog(LL_WARNING, "SlimIO: WAL generation %llu ends in a command or transaction an "
                  "earlier recovery cut short (%lld of its bytes are whole commands); "
                  "generation %llu follows it: left as it is",
                  (unsigned long long)S.cur_gen.gen, (long long)valid_up_to,
                  (unsigned long long)after.gen);
        return 0;
    }
    int rc = slimioWalTruncate(&S.be, &S.meta, &S.cur_gen, (uint64_t)valid_up_to);
    if (rc) { errno = rc < 0 && rc > -4096 ? -rc : EIO; return -1; }
    /* The generation now ends there: recompute its end for the successor rule. */
    uint32_t payload = slimioWalPayload(S.be.dev.lba_size);
    uint64_t b = (uint64_t)valid_up_to / payload;
    slimioWalEnd *end = &S.load_stats.end;
    end->tail_used = (uint32_t)((uint64_t)valid_up_to % payload);
    end->blocks = b + (end->tail_used ? 1 : 0);
    end->bytes = (uint64_t)valid_up_to;
    end->next_lba = slimioWalLba(&S.meta, S.cur_gen.start_lba, b);
    end->next_seq = S.cur_gen.start_seq + b;
    serverLog(LL_WARNING, "SlimIO: WAL generation %llu truncated to %lld bytes",
              (unsigned long long)S.cur_gen.gen, (long long)valid_up_to);
    return 0;
}

static const slimioWalGen *newestGen(void) {
    return S.meta.gens[1].gen ? &S.meta.gens[1] : S.meta.gens[0].gen ? &S.meta.gens[0] : NULL;
}

int slimioLoadAppendOnlyFiles(void) {
    long long start = ustime();
    int on_demand = slimio_cfg.load_snapshot == SLIMIO_LOAD_ON_DEMAND;
    int slot = slotWithRole(&S.meta, on_demand ? SLIMIO_ROLE_ON_DEMAND : SLIMIO_ROLE_WAL_SNAPSHOT);
    const slimioWalGen *newest = newestGen();
    slimioWalGen root;
    memset(&root, 0, sizeof(root));
    S.recovery_slot = -1;
    if (slot >= 0 && !S.meta.slots[slot].valid) slot = -1;
    if (on_demand && slot < 0)
        fatal("slimio-load-snapshot on-demand, but the On-Demand slot of %s holds no snapshot: "
              "set slimio-load-snapshot wal-snapshot", S.be.dev.path);
    if (!on_demand) {
        if (slot >= 0) {
            for (int i = 0; i < SLIMIO_MAX_WAL_GENS; i++)
                if (S.meta.gens[i].gen == S.meta.slots[slot].wal_gen) root = S.meta.gens[i];
            if (!root.gen)
                fatal("the WAL-Snapshot of %s names WAL generation %llu, which the metadata does "
                      "not list: the layout is damaged (inspect it with slimio-admin inspect)",
                      S.be.dev.path, (unsigned long long)S.meta.slots[slot].wal_gen);
        } else if (S.meta.gens[0].gen) {
            root = S.meta.gens[0];
        }
    }
    /* Where the WAL continues by default: a first generation at the region's start. */
    S.write_gen.gen = newest ? newest->gen + 1 : 1;
    S.write_gen.start_lba = S.meta.wal_start;
    S.write_gen.start_seq = 0;
    if (slot < 0 && !root.gen) return AOF_NOT_EXIST;

    int ret = AOF_OK;
    uint64_t total = 0, device = 0, wal_bytes = 0, gens = 0, wait_us = 0;
    startLoading(slot >= 0 ? S.meta.slots[slot].length : 0, RDBFLAGS_AOF_PREAMBLE, 0);
    if (slot >= 0) {
        char name[64];
        snprintf(name, sizeof(name), SLOT_STREAM "%d", slot);
        updateLoadingFileName(name);
        snprintf(loading_what, sizeof(loading_what), "the %s snapshot in slot %d",
                 on_demand ? "On-Demand" : "WAL-Snapshot", slot);
        long long t = ustime();
        ret = loadSingleAppendOnlyFile(name);
        total += S.load_stats.bytes;
        device += S.load_stats.device_bytes;
        wait_us += S.load_stats.wait_us;
        if (ret == AOF_EMPTY) ret = AOF_OK;
        if (ret != AOF_OK) {
            /* The server exits: loadingExit names the slot. */
            if (ret == AOF_TRUNCATED) ret = AOF_FAILED;
            goto done;
        }
        loading_what[0] = '\0';
        serverLog(LL_NOTICE, "SlimIO: loaded the %s snapshot from slot %d (%llu bytes) in %.3f seconds",
                  on_demand ? "On-Demand" : "WAL-Snapshot", slot,
                  (unsigned long long)S.meta.slots[slot].length, (float)(ustime() - t) / 1000000);
        S.recovery_slot = slot;
    }
    if (on_demand) {
        /* A point-in-time restore: the WAL belongs to another history. A new WAL-Snapshot
         * of the restored data is written before the server accepts writes. */
        S.restore_on_demand = 1;
        goto done;
    }
    slimioWalGen g = root, last = root, next;
    slimioWalEnd last_end;
    memset(&last_end, 0, sizeof(last_end));
    uint64_t max_gen = newest ? newest->gen : root.gen, seen_gen = 0;
    for (;;) {
        char name[64];
        snprintf(name, sizeof(name), WAL_STREAM "%llu", (unsigned long long)g.gen);
        updateLoadingFileName(name);
        S.cur_gen = g;
        snprintf(loading_what, sizeof(loading_what), "WAL generation %llu at LBA %llu",
                 (unsigned long long)g.gen, (unsigned long long)g.start_lba);
        ret = loadSingleAppendOnlyFile(name);
        total += S.load_stats.bytes;
        wal_bytes += S.load_stats.bytes;
        device += S.load_stats.device_bytes;
        wait_us += S.load_stats.wait_us;
        gens++;
        if (ret == AOF_EMPTY) ret = AOF_OK;
        if (ret == AOF_FAILED || ret == AOF_OPEN_ERR) goto done;   /* loadingExit names it */
        loading_what[0] = '\0';
        last = g;
        last_end = S.load_stats.end;
        int more = slimioWalFollow(&S.be.io, &S.meta, &g, &last_end, max_gen, &next, NULL,
                                   &seen_gen);
        if (more < 0)
            fatal("reading the WAL of %s after generation %llu failed: %s", S.be.dev.path,
                  (unsigned long long)g.gen, strerror(-more));
        if (!more) break;
        g = next;
    }
    /* The invariant (README, "Generations"): every listed generation newer than the log's
     * last one never wrote a block, so it begins where the log ends. */
    for (int i = 0; i < SLIMIO_MAX_WAL_GENS; i++) {
        const slimioWalGen *l = &S.meta.gens[i];
        if (l->gen > last.gen && l->start_lba != next.start_lba)
            fatal("the WAL ends in generation %llu at LBA %llu, but the metadata records "
                  "generation %llu at LBA %llu: the device is damaged (WAL blocks are missing "
                  "or corrupt, or the newest metadata record is and an older one is current); "
                  "inspect it with slimio-admin inspect, dump the WAL with slimio-admin "
                  "dump-wal", (unsigned long long)last.gen,
                  (unsigned long long)next.start_lba, (unsigned long long)l->gen,
                  (unsigned long long)l->start_lba);
    }
    /* Continue in a generation numbered above every one that may have blocks on the device
     * (never one recovery cut short: its abandoned blocks must stay stale), where the log
     * ends. */
    S.write_gen.gen = (max_gen > last.gen ? max_gen : last.gen) + 1;
    /* An intact block of a newer generation where the log ends (the metadata that listed it
     * was damaged, and an older record is current): never reuse its number, or its other
     * blocks would read as ours. */
    if (seen_gen >= S.write_gen.gen) S.write_gen.gen = seen_gen + 1;
    S.write_gen.start_lba = next.start_lba;
    S.write_gen.start_seq = 0;

done:
    stopLoading(ret == AOF_OK || ret == AOF_TRUNCATED);
    if (ret == AOF_OK || ret == AOF_TRUNCATED) {
        double secs = (double)(ustime() - start) / 1e6;
        S.recovery_s = secs;
        S.recovery_bytes = total;
        S.recovery_wal_bytes = wal_bytes;
        S.recovery_device_bytes = device;
        S.recovery_gens = gens;
        server.aof_current_size = (off_t)total;
        server.aof_rewrite_base_size = slot >= 0 ? (off_t)S.meta.slots[slot].length : 0;
        serverLog(LL_NOTICE, "SlimIO recovery: loaded %llu bytes in %.3f seconds (%.1f MB/s): "
                  "snapshot slot %d, %llu WAL generation(s) with %llu bytes, %llu bytes read "
                  "from the device, %.3f seconds waiting for it", (unsigned long long)total,
                  secs, secs > 0 ? (double)total / 1e6 / secs : 0.0, slot,
                  (unsigned long long)gens, (unsigned long long)wal_bytes,
                  (unsigned long long)device, (double)wait_us / 1e6);
    }
    return ret;
}

/* ------------------------------------------------------------------------------------
 * Snapshots: the rio backend, the writer, promotion
 * ---------------------------------------------------------------------------------- */

/* A rio with SlimIO's context next to it: Redis hands the callbacks the rio's address,
 * which is the slimioRio's (its first member), so rio.h needs no member of its own. */
typedef struct slimioRio {
    rio r;              /* first */
    void *ctx;          /* the slimioSlotWriter, or the discard sink's byte count */
} slimioRio;

#define SLIMIO_RIO_CTX(r) (((slimioRio *)(r))->ctx)

static size_t rioSlimioWrite(rio *r, const void *buf, size_t len) {
    int rc = slimioSlotWriterWrite(SLIMIO_RIO_CTX(r), buf, len);
    if (rc) errno = -rc;
    return rc == 0;
}

static size_t rioSlimioRead(rio *r, void *buf, size_t len) {
    UNUSED(r); UNUSED(buf); UNUSED(len);
    return 0;   /* write-only */
}

static off_t rioSlimioTell(rio *r) {
    return (off_t)((slimioSlotWriter *)SLIMIO_RIO_CTX(r))->length;
}

static int rioSlimioFlush(rio *r) {
    UNUSED(r);
    return 1;   /* durability comes with slimioSlotWriterFinish */
}

/* A rio that writes into a SlimIO slot: pass &sr->r to Redis. */
static void rioInitWithSlimio(slimioRio *sr, slimioSlotWriter *w) {
    memset(sr, 0, sizeof(*sr));
    sr->r.read = rioSlimioRead;
    sr->r.write = rioSlimioWrite;
    sr->r.tell = rioSlimioTell;
    sr->r.flush = rioSlimioFlush;
    sr->ctx = w;
}

/* The discard sink: a rio that counts what it is given and keeps nothing. */
static size_t rioDiscardWrite(rio *r, const void *buf, size_t len) {
    UNUSED(buf);
    *(uint64_t *)SLIMIO_RIO_CTX(r) += len;
    return 1;
}

static off_t rioDiscardTell(rio *r) {
    return (off_t)*(uint64_t *)SLIMIO_RIO_CTX(r);
}

/* CPU seconds (user and system) of this process (RUSAGE_SELF: every thread) or of the
 * calling thread (RUSAGE_THREAD): a snapshot child's log line tells its work from its
 * waiting with them. */
static double cpuSeconds(int who) {
    struct rusage ru;
    if (getrusage(who, &ru) < 0) return 0.0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* An On-Demand-Snapshot serialised into nothing (slimio-snapshot-sink discard): the same
 * fork, iteration, encoding, compression and RDB checksum as a real one, no copy and no
 * I/O. Its time is the snapshot's no-I/O bound; nothing is written or promoted. */
static int discardSnapshot(rdbSaveInfo *rsi) {
    long long start = ustime();
    memset(S.report, 0, sizeof(*S.report));
    S.report->pid = getpid();
    S.report->kind = SLIMIO_KIND_ON_DEMAND;
    S.report->slot = -1;
    S.report->discarded = 1;
    uint64_t bytes = 0;
    slimioRio sr;
    memset(&sr, 0, sizeof(sr));
    sr.ctx = &bytes;
    sr.r.read = rioSlimioRead;
    sr.r.write = rioDiscardWrite;
    sr.r.tell = rioDiscardTell;
    sr.r.flush = rioSlimioFlush;
    startSaving(RDBFLAGS_NONE);
    int error = 0;
    int ok = rdbSaveRio(SLAVE_REQ_NONE, &sr.r, &error, RDBFLAGS_NONE, rsi) == C_OK;
    stopSaving(ok);
    if (!ok) {
        serverLog(LL_WARNING, "SlimIO: serialising the On-Demand snapshot into the discard "
                  "sink failed");
        return C_ERR;
    }
    double secs = (double)(ustime() - start) / 1e6;
    S.report->ok = 1;
    S.report->length = bytes;
    S.report->seconds = secs;
    serverLog(LL_NOTICE, "SlimIO: On-Demand snapshot of %llu bytes serialised into the discard "
              "sink in %.3f seconds (%.1f MB/s), nothing written; CPU %.3f seconds (this "
              "thread %.3f)", (unsigned long long)S.report->length, secs,
              secs > 0 ? (double)S.report->length / 1e6 / secs : 0.0,
              cpuSeconds(RUSAGE_SELF), cpuSeconds(RUSAGE_THREAD));
    return C_OK;
}

/* Write a snapshot of the dataset (kind WAL-Snapshot or On-Demand) into the Reserve slot,
 * in this process, and fill the shared report. C_OK when it is durable. */
static int writeSnapshot(int kind, rdbSaveInfo *rsi) {
    char err[256];
    long long start = ustime();
    int slot = slotWithRole(&S.meta, SLIMIO_ROLE_RESERVE);
    memset(S.report, 0, sizeof(*S.report));
    S.report->pid = getpid();
    S.report->kind = kind;
    S.report->slot = slot;
    if (slot < 0) {
        serverLog(LL_WARNING, "SlimIO: no Reserve slot in the metadata of %s", S.be.dev.path);
        return C_ERR;
    }
    uint64_t before = atomic_load(&S.be.bytes_written[kind]);
    slimioSlotWriter w;
    if (slimioSlotWriterOpen(&w, &S.be, slimioSlotLba(&S.meta, slot), S.meta.slot_lbas, kind,
                             (unsigned)slimio_cfg.ring_entries, slimio_cfg.sqpoll,
                             (size_t)slimio_cfg.snapshot_buffer_size, err, sizeof(err)) < 0) {
        serverLog(LL_WARNING, "SlimIO: cannot start the %s snapshot: %s", kindName(kind), err);
        return C_ERR;
    }
    slimioRio sr;
    rioInitWithSlimio(&sr, &w);
    int rdbflags = kind == SLIMIO_KIND_WAL_SNAPSHOT ? RDBFLAGS_AOF_PREAMBLE : RDBFLAGS_NONE;
    startSaving(rdbflags);
    int error = 0, ok;
    if (kind == SLIMIO_KIND_WAL_SNAPSHOT && !server.aof_use_rdb_preamble)
        ok = rewriteAppendOnlyFileRio(&sr.r) == C_OK;
    else
        ok = rdbSaveRio(SLAVE_REQ_NONE, &sr.r, &error, rdbflags, rsi) == C_OK;
    if (!ok) {
        int rc = w.error;
        slimioSlotWriterAbort(&w);
        stopSaving(0);
        serverLog(LL_WARNING, "SlimIO: writing the %s snapshot to slot %d failed: %s%s",
                  kindName(kind), slot, rc ? strerror(-rc) : "serialization error",
                  rc == -ENOSPC ? " (the snapshot does not fit the slot: format the device with "
                                  "larger slots, slimio-slot-size)" : "");
        return C_ERR;
    }
    uint64_t length;
    uint32_t crc;
    int rc = slimioSlotWriterFinish(&w, &length, &crc);
    stopSaving(rc == 0);
    if (rc) {
        serverLog(LL_WARNING, "SlimIO: making the %s snapshot durable failed: %s",
                  kindName(kind), strerror(-rc));
        return C_ERR;
    }
    double secs = (double)(ustime() - start) / 1e6;
    S.report->ok = 1;
    S.report->length = length;
    S.report->crc = crc;
    S.report->device_bytes = atomic_load(&S.be.bytes_written[kind]) - before;
    S.report->seconds = secs;
    serverLog(LL_NOTICE, "SlimIO: %s snapshot of %llu bytes written to slot %d in %.3f seconds "
              "(%.1f MB/s), %.3f seconds waiting for the ring; CPU %.3f seconds (this "
              "thread %.3f)", kindName(kind), (unsigned long long)length, slot, secs,
              secs > 0 ? (double)length / 1e6 / secs : 0.0, (double)w.wait_us / 1e6,
              cpuSeconds(RUSAGE_SELF), cpuSeconds(RUSAGE_THREAD));
    return C_OK;
}

/* Whether m, once committed, is the record recovery picks: it must pass the same checks
 * as when it is read back (slimioMetaDecode), else recovery would fall back to the record
 * before it, which still references what a promotion frees. */
static int recordIsSound(const slimioMeta *m) {
    unsigned char rec[SLIMIO_META_RECORD_SIZE];
    slimioMeta back;
    slimioMetaEncode(m, rec);
    return slimioMetaDecode(rec, &back) == SLIMIO_OK;
}

/* After a promotion's commit is durable (S.meta is the committed record, before the one it
 * replaced): deallocate what no record recovery can pick references any more, each range
 * synchronously, before the caller releases the WAL's space for new writes:
 *   - a WAL-Snapshot's promotion (root set): the old WAL generations, from the old oldest
 *     live generation's first LBA up to root's (circular; the live WAL starts at root);
 *   - the slot that became the Reserve, whole: the Reserve is never read, and a whole slot
 *     also frees what a failed snapshot or a crash before an earlier deallocation left
 *     there, which its last length does not cover.
 * Failpoints promote.after-dealloc-wal (WAL-Snapshot only) and promote.after-dealloc-slot. */
static void deallocAfterPromotion(const slimioMeta *before, const slimioWalGen *root,
                                  int demoted) {
    if (!recordIsSound(&S.meta)) {
        serverLog(LL_WARNING, "SlimIO: the committed metadata record %llu does not check; "
                  "nothing is deallocated", (unsigned long long)S.meta.seq);
        return;
    }
    if (root) {
        const slimioWalGen *old = &before->gens[0];
        slimioLbaRange r[2];
        int n = old->gen && old->gen < root->gen
            ? slimioWalFreeRanges(&S.meta, old->start_lba, root->start_lba, r) : 0;
        for (int i = 0; i < n; i++)
            slimioDeallocRange(&S.dealloc, r[i].lba, r[i].nlb, SLIMIO_DEALLOC_WAL);
        slimioFailpoint(SLIMIO_FP_PROMOTE_AFTER_DEALLOC_WAL);
    }
    slimioDeallocRange(&S.dealloc, slimioSlotLba(&S.meta, demoted), S.meta.slot_lbas,
                       SLIMIO_DEALLOC_SLOT);
    slimioFailpoint(SLIMIO_FP_PROMOTE_AFTER_DEALLOC_SLOT);
}

static void walSpaceFreed(void);

/* Promote the reported snapshot: one metadata commit makes the Reserve slot the new
 * WAL-Snapshot (with root as its first WAL generation) or On-Demand snapshot, and the slot
 * it replaces the Reserve; then what became dead is deallocated (deallocAfterPromotion)
 * and, for a WAL-Snapshot, the WAL's space before root is released. */
static int promote(const slimioReport *rep, const slimioWalGen *root) {
    int role = rep->kind == SLIMIO_KIND_WAL_SNAPSHOT ? SLIMIO_ROLE_WAL_SNAPSHOT : SLIMIO_ROLE_ON_DEMAND;
    int old = slotWithRole(&S.meta, role);
    if (rep->slot < 0 || S.meta.slots[rep->slot].role != SLIMIO_ROLE_RESERVE || old < 0) {
        serverLog(LL_WARNING, "SlimIO: slot %d is not the Reserve slot: not promoted", rep->slot);
        return C_ERR;
    }
    if (slimioFailpoint(SLIMIO_FP_PROMOTE_BEFORE_COMMIT)) return C_ERR;
    slimioMeta next = S.meta;
    slimioSlot *s = &next.slots[rep->slot];
    s->role = (uint8_t)role;
    s->valid = 1;
    s->length = rep->length;
    s->crc = rep->crc;
    s->wal_gen = root ? root->gen : 0;
    memset(&next.slots[old], 0, sizeof(next.slots[old]));
    next.slots[old].role = SLIMIO_ROLE_RESERVE;
    if (root) {
        /* The WAL before root is no longer needed. gens[] must ascend: an entry not newer
         * than root goes (root itself, or the old history's newest generation when the
         * WAL is rebased after an On-Demand restore, which would make the record fail its
         * checks and recovery fall back to the one before). */
        next.gens[0] = *root;
        if (next.gens[1].gen <= root->gen) memset(&next.gens[1], 0, sizeof(next.gens[1]));
    }
    slimioMeta before = S.meta;
    uint64_t freed = S.dealloc.stats.lbas;
    int rc = slimioMetaCommit(&S.be.io, &next);
    if (rc) {
        serverLog(LL_WARNING, "SlimIO: committing the promotion of slot %d failed: %s", rep->slot,
                  rc < 0 && rc > -4096 ? strerror(-rc) : slimioStrerror(rc));
        return C_ERR;
    }
    S.meta = next;
    slimioFailpoint(SLIMIO_FP_PROMOTE_AFTER_COMMIT);
    deallocAfterPromotion(&before, root, old);
    if (root && S.wal_open) {
        slimioWalRelease(&S.wal, root);
        walSpaceFreed();
    }
    S.snapshots[rep->kind]++;
    S.promotions++;
    S.last_snapshot_bytes = rep->length;
    S.last_snapshot_s = rep->seconds;
    S.last_snapshot_kind = rep->kind;
    atomic_fetch_add(&S.be.bytes_written[rep->kind], rep->pid != getpid() ? rep->device_bytes : 0);
    serverLog(LL_NOTICE, "SlimIO: slot %d promoted to %s (%llu bytes); slot %d is the Reserve; "
              "%llu LBAs deallocated", rep->slot, slimioRoleName((uint8_t)role),
              (unsigned long long)rep->length, old,
              (unsigned long long)(S.dealloc.stats.lbas - freed));
    return C_OK;
}

int slimioRewriteAppendOnlyFile(void) {
    return writeSnapshot(SLIMIO_KIND_WAL_SNAPSHOT, NULL);
}

/* The report of the child that just exited, if it wrote a durable snapshot of `kind`. */
static int childReport(int kind, slimioReport *rep) {
    *rep = *S.report;
    if (rep->pid == server.child_pid && rep->ok && rep->kind == kind) return C_OK;
    serverLog(LL_WARNING, "SlimIO: the snapshot child %ld reported no durable %s snapshot",
              (long)server.child_pid, kindName(kind));
    return C_ERR;
}

int slimioRewriteDone(void) {
    slimioReport rep;
    if (childReport(SLIMIO_KIND_WAL_SNAPSHOT, &rep) != C_OK) return C_ERR;
    if (promote(&rep, &S.rewrite_gen) != C_OK) return C_ERR;
    server.aof_current_size = (off_t)rep.length + server.aof_last_incr_size;
    server.aof_rewrite_base_size = server.aof_current_size;
    return C_OK;
}

int slimioRdbSave(int req, rdbSaveInfo *rsi, int rdbflags) {
    UNUSED(req); UNUSED(rdbflags);
    /* Only a BGSAVE's child may discard: SAVE and the save at shutdown always write. */
    if (getpid() != server.pid && slimio_cfg.snapshot_sink == SLIMIO_SINK_DISCARD)
        return discardSnapshot(rsi);
    if (writeSnapshot(SLIMIO_KIND_ON_DEMAND, rsi) != C_OK) return C_ERR;
    if (getpid() == server.pid) {
        /* SAVE, or a save at shutdown: this process promotes it at once. */
        if (promote(S.report, NULL) != C_OK) return C_ERR;
        serverLog(LL_NOTICE, "DB saved on disk");
        server.dirty = 0;
        server.lastsave = time(NULL);
        server.lastbgsave_status = C_OK;
    }
    return C_OK;
}

int slimioBgsaveDone(void) {
    slimioReport rep;
    if (childReport(SLIMIO_KIND_ON_DEMAND, &rep) != C_OK) return C_ERR;
    if (rep.discarded) return C_OK;     /* the discard sink: nothing to promote */
    return promote(&rep, NULL);
}

/* ------------------------------------------------------------------------------------
 * WAL-Path
 * ---------------------------------------------------------------------------------- */

/* Refuse new writes (on) with MISCONF "Errors writing to the AOF file: No space left on
 * device", through the status Redis's own background fsync reports errors in (SlimIO
 * replaces that fsync, so nothing else sets it), or accept them again (off). */
static void refuseWrites(int on) {
    if (on == S.refusing) return;
    S.refusing = on;
    atomicSet(server.aof_bio_fsync_errno, ENOSPC);
    atomicSet(server.aof_bio_fsync_status, on ? C_ERR : C_OK);
    if (on) {
        S.refusals++;
        serverLog(LL_WARNING, "SlimIO: the WAL region of %s is full (its reserve took the last "
                  "accepted commands): refusing writes until the WAL-Snapshot frees it",
                  S.be.dev.path);
    } else {
        serverLog(LL_WARNING, "SlimIO: the WAL region of %s has room again: accepting writes",
                  S.be.dev.path);
    }
}

/* After a promotion released WAL space: writes are accepted again once the live WAL is
 * below the fill level that schedules a rewrite. */
static void walSpaceFreed(void) {
    if (S.refusing && slimioWalUsedBlocks(&S.wal) * 1000 <= S.meta.wal_lbas * SLIMIO_WAL_REWRITE_PERMILLE)
        refuseWrites(0);
}

static void walFull(void *ctx) {
    UNUSED(ctx);
    if (server.child_type != CHILD_TYPE_AOF && !server.aof_rewrite_scheduled) {
        serverLog(LL_WARNING, "SlimIO: the WAL region of %s is full: scheduling an AOF rewrite "
                  "(WAL-Snapshot) to free it", S.be.dev.path);
        server.aof_rewrite_scheduled = 1;
    }
}

static void groupCommitWake(aeEventLoop *el, int fd, void *privdata, int mask);

void slimioOpenWalOnServerStart(void) {
    char err[512];
    if (slimioWalOpen(&S.wal, &S.be, &S.meta, (unsigned)slimio_cfg.ring_entries,
                      (size_t)slimio_cfg.wal_buffer_size, err, sizeof(err)) < 0)
        fatal("%s", err);
    S.wal.on_full = walFull;
    S.wal_open = 1;
    if (slimio_cfg.group_commit) {
        G.held = listCreate();
        G.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (G.fd < 0) fatal("cannot create the group-commit eventfd: %s", strerror(errno));
        if (aeCreateFileEvent(server.el, G.fd, AE_READABLE, groupCommitWake, NULL) == AE_ERR)
            fatal("cannot watch the group-commit eventfd: %s", strerror(errno));
        slimioWalSetNotify(&S.wal, G.fd);
    }
    if (S.restore_on_demand) {
        /* Rebase: the restored dataset becomes the WAL-Snapshot of a fresh WAL history. */
        if (writeSnapshot(SLIMIO_KIND_WAL_SNAPSHOT, NULL) != C_OK ||
            promote(S.report, &S.write_gen) != C_OK)
            fatal("cannot write the WAL-Snapshot of the restored On-Demand snapshot");
        S.restore_on_demand = 0;
    }
    if (slimioWalBegin(&S.wal, &S.write_gen) < 0)
        fatal("cannot record WAL generation %llu in the metadata of %s: %s",
              (unsigned long long)S.write_gen.gen, S.be.dev.path, strerror(errno));
    /* Redis keeps an AOF descriptor open while the AOF is on; SlimIO's is /dev/null, so
     * that no stock code path can ever write to the SlimIO device through it. */
    server.aof_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (server.aof_fd < 0) fatal("cannot open /dev/null: %s", strerror(errno));
    server.aof_last_incr_size = 0;
    server.aof_last_incr_fsync_offset = 0;
    serverLog(LL_NOTICE, "SlimIO: WAL generation %llu at LBA %llu (%llu of %llu WAL LBAs in use)",
              (unsigned long long)S.wal.gen.gen, (unsigned long long)S.wal.gen.start_lba,
              (unsigned long long)slimioWalUsedBlocks(&S.wal), (unsigned long long)S.meta.wal_lbas);
}

int slimioOpenNewIncrAof(void) {
    /* Commands Redis accepted but could not write (the region was full) are in the dataset
     * the rewrite is about to snapshot: they belong to the current generation, never to the
     * next one (replayed after the snapshot they would apply twice, and a crash in the middle
     * of them would recover older values under newer ones). They may use the reserve. */
    if (sdslen(server.aof_buf)) {
        S.wal.use_reserve = 1;
        flushAppendOnlyFile(1);
        S.wal.use_reserve = 0;
        if (sdslen(server.aof_buf)) {
            serverLog(LL_WARNING, "SlimIO: %zu bytes of accepted commands do not fit the WAL "
                      "region of %s even with its reserve: the rewrite cannot start. The region "
                      "is too small for the write rate (slimio-wal-size)",
                      sdslen(server.aof_buf), S.be.dev.path);
            return C_ERR;
        }
    }
    if (slimioWalNewGeneration(&S.wal) < 0) {
        serverLog(LL_WARNING, "SlimIO: cannot begin a new WAL generation: %s", strerror(errno));
        return C_ERR;
    }
    S.rewrite_gen = S.wal.gen;
    server.aof_last_incr_size = 0;
    server.aof_last_incr_fsync_offset = 0;
    server.aof_last_fsync = server.unixtime;
    serverLog(LL_NOTICE, "SlimIO: WAL generation %llu at LBA %llu on background rewrite",
              (unsigned long long)S.wal.gen.gen, (unsigned long long)S.wal.gen.start_lba);
    return C_OK;
}

ssize_t slimioAofWrite(const char *buf, size_t len) {
    int always = server.aof_fsync == AOF_FSYNC_ALWAYS;
    slimioWalSetFua(&S.wal, always);
    /* Periodical-Log: no reply goes out while older writes wait beyond the loss window. */
    if (!always && slimioWalBoundLag(&S.wal, SLIMIO_MAX_UNWRITTEN_US, SLIMIO_MAX_UNDURABLE_US) < 0)
        return -1;
    ssize_t n = slimioWalAppend(&S.wal, buf, len);
    if (n < 0 && errno == ENOSPC) {
        /* These commands are executed and their replies about to go out: they go into the
         * reserve, and new writes are refused (MISCONF, as on a full disk) until the
         * rewrite's promotion frees the region. Only when even the reserve cannot take
         * them does stock Redis's full-disk handling follow (always: exit; everysec: they
         * stay in the AOF buffer and writes are refused). */
        S.wal.use_reserve = 1;
        n = slimioWalAppend(&S.wal, buf, len);
        S.wal.use_reserve = 0;
        if (n >= 0) refuseWrites(1);
        else errno = ENOSPC;
    }
    /* The WAL-Snapshot that frees the region starts when 5/8 of it is in use, so that it
     * ends before the rest fills (the sizing rule: README, "A full WAL region"). */
    if (n >= 0 && slimioWalUsedBlocks(&S.wal) * 1000 > S.meta.wal_lbas * SLIMIO_WAL_REWRITE_PERMILLE &&
        server.child_type != CHILD_TYPE_AOF && !server.aof_rewrite_scheduled) {
        serverLog(LL_NOTICE, "SlimIO: the WAL region of %s is %.1f%% full: scheduling an AOF "
                  "rewrite (WAL-Snapshot) to free it", S.be.dev.path,
                  SLIMIO_WAL_REWRITE_PERMILLE / 10.0);
        server.aof_rewrite_scheduled = 1;
        S.early_rewrites++;
    }
    return n;
}

int slimioAofFsync(void) {
    return S.wal_open ? slimioWalSync(&S.wal) : 0;
}

/* Group commit applies under Always-Log with the main thread writing every reply (no I/O
 * threads: they would write replies this module does not see). */
static int groupCommitActive(void) {
    return G.held && server.aof_fsync == AOF_FSYNC_ALWAYS && server.io_threads_num == 1;
}

int slimioAofAlwaysFsync(void) {
    if (!S.wal_open) return 0;
    if (!groupCommitActive()) return slimioWalSync(&S.wal);
    /* The batch is on its way (FUA): replies wait for it in slimioHoldReply instead of the
     * whole server waiting here. An earlier failure is reported as stock Redis's fsync
     * error (always: exit). */
    if (slimioWalError(&S.wal)) { errno = EIO; return -1; }
    return 0;
}

void slimioStampReply(client *c) {
    c->slimio_epoch = G.open;
}

void slimioInitClient(client *c) {
    c->slimio_epoch = 0;
    c->slimio_held = NULL;
}

/* Move the durable epoch up to what the WAL has made durable. */
static void advanceEpochs(void) {
    if (!G.qn) return;
    uint64_t at_us;
    uint64_t d = slimioWalDurableTotalAt(&S.wal, &at_us);
    while (G.qn && G.q[G.qh].total <= d) {
        G.durable = G.q[G.qh].epoch;
        G.ready_us = G.q[G.qh].closed_us > at_us ? G.q[G.qh].closed_us : at_us;
        G.qh = (G.qh + 1) % SLIMIO_EPOCH_QUEUE;
        G.qn--;
    }
}

/* Always-Log's fsync error, as stock Redis reports it: the held replies never go out. */
static void groupCommitCheckError(void) {
    int e = slimioWalError(&S.wal);
    if (!e) return;
    serverLog(LL_WARNING, "Can't persist AOF for fsync error when the AOF fsync policy is "
              "'always': %s. Exiting...", strerror(-e));
    exit(1);
}

/* beforeSleep(), after flushAppendOnlyFile: a Periodical-Log batch that waited long
 * enough goes (slimioWalKick); with group commit the epoch ends (everything propagated so
 * far was handed to the WAL just before), and held clients whose epochs are durable go
 * back to the pending-write queue, which beforeSleep serves next. */
void slimioBeforeSleep(void) {
    if (!S.wal_open) return;
    slimioWalKick(&S.wal);
    if (!G.held) return;
    unsigned long long e = G.open++;
    uint64_t total = slimioWalAppendedTotal(&S.wal);
    unsigned last = (G.qh + G.qn + SLIMIO_EPOCH_QUEUE - 1) % SLIMIO_EPOCH_QUEUE;
    uint64_t now = slimioNowUs();
    if (G.qn && G.q[last].total == total) {
        G.q[last].epoch = e;            /* nothing new appended: the same level */
        G.q[last].closed_us = now;
    } else if (G.qn == SLIMIO_EPOCH_QUEUE) {
        G.q[last].epoch = e;            /* full: the newest entry covers e too (later) */
        G.q[last].total = total;
        G.q[last].closed_us = now;
    } else {
        unsigned i = (G.qh + G.qn++) % SLIMIO_EPOCH_QUEUE;
        G.q[i].epoch = e;
        G.q[i].total = total;
        G.q[i].closed_us = now;
    }
    slimioReleaseHeld();
}

int slimioHoldReply(client *c) {
    if (!groupCommitActive() || c->slimio_epoch <= G.durable) return 0;
    /* Wanted before the level is read: an advance after the read is always notified. */
    slimioWalWantNotify(&S.wal, 1);
    advanceEpochs();
    if (c->slimio_epoch <= G.durable) return 0;
    groupCommitCheckError();
    if (!c->slimio_held) {
        listAddNodeTail(G.held, c);
        c->slimio_held = listLast(G.held);
        G.holds++;
    }
    return 1;
}

void slimioReleaseHeld(void) {
    if (!G.held || !listLength(G.held)) return;
    advanceEpochs();
    uint64_t now = slimioNowUs();
    listIter li;
    listNode *ln;
    listRewind(G.held, &li);
    while ((ln = listNext(&li))) {
        client *c = listNodeValue(ln);
        if (c->slimio_epoch > G.durable) continue;
        listDelNode(G.held, ln);
        c->slimio_held = NULL;
        putClientInPendingWriteQueue(c);
        G.releases++;
        G.release_lag_us += now > G.ready_us ? now - G.ready_us : 0;
    }
    if (listLength(G.held)) groupCommitCheckError();
    else slimioWalWantNotify(&S.wal, 0);
}

void slimioForgetClient(client *c) {
    if (!c->slimio_held) return;
    listDelNode(G.held, c->slimio_held);
    c->slimio_held = NULL;
}

/* The WAL's completion thread made more durable (or failed). */
static void groupCommitWake(aeEventLoop *el, int fd, void *privdata, int mask) {
    UNUSED(el);
    UNUSED(privdata);
    UNUSED(mask);
    uint64_t v;
    ssize_t rc;
    do rc = read(fd, &v, sizeof(v));
    while (rc < 0 && errno == EINTR);
    G.wakeups++;
    slimioReleaseHeld();
}

void slimioAofBackgroundFsync(void) {
    if (S.wal_open) slimioWalFlushAsync(&S.wal);
}

int slimioRefuseAppendonlyChange(const char **err) {
    *err = "appendonly cannot change while slimio-device is set (SlimIO is the AOF's storage)";
    return 0;
}

/* ------------------------------------------------------------------------------------
 * INFO slimio
 * ---------------------------------------------------------------------------------- */

sds slimioGenInfoString(sds info, int sections) {
    if (sections) info = sdscat(info, "\r\n");
    info = sdscatprintf(info, "# SlimIO\r\nslimio_enabled:%d\r\n", S.enabled);
    if (!S.enabled) return info;
    const slimioMeta *m = &S.meta;
    info = sdscatprintf(info,
        "slimio_device:%s\r\nslimio_backend:%s\r\nslimio_lba_size:%u\r\nslimio_device_lbas:%llu\r\n"
        "slimio_format_id:%016llx\r\nslimio_meta_seq:%llu\r\n"
        "slimio_wal_start_lba:%llu\r\nslimio_wal_lbas:%llu\r\n"
        "slimio_slot_start_lba:%llu\r\nslimio_slot_lbas:%llu\r\n",
        S.be.dev.path, S.be.ops->name, S.be.dev.lba_size, (unsigned long long)S.be.dev.lbas,
        (unsigned long long)m->format_id, (unsigned long long)m->seq,
        (unsigned long long)m->wal_start, (unsigned long long)m->wal_lbas,
        (unsigned long long)m->slot_start, (unsigned long long)m->slot_lbas);
    for (int i = 0; i < SLIMIO_SLOTS; i++)
        info = sdscatprintf(info, "slimio_slot%d:role=%s,valid=%d,length=%llu,wal_gen=%llu,lba=%llu\r\n",
            i, slimioRoleName(m->slots[i].role), m->slots[i].valid,
            (unsigned long long)m->slots[i].length, (unsigned long long)m->slots[i].wal_gen,
            (unsigned long long)slimioSlotLba(m, i));
    for (int k = 1; k < SLIMIO_KINDS; k++)
        info = sdscatprintf(info, "slimio_placement_%s:%d\r\n", kindName(k),
                            S.be.dev.placement[k] == SLIMIO_NO_PLACEMENT ? -1 : S.be.dev.placement[k]);
    info = sdscatprintf(info, "slimio_max_io_bytes:%llu\r\nslimio_crc32c:%s\r\n"
                        "slimio_crc32c_mb_s:%s\r\n",
                        (unsigned long long)S.be.max_io_lbas * S.be.dev.lba_size,
                        slimioCrc32cImplementation(), slimioCrc32cSpeeds());
    if (S.be.dev.is_nvme) {
        const slimioNvmeInfo *n = &S.be.dev.nvme;
        sds pids = sdsempty();
        for (unsigned i = 0; i < n->npids; i++)
            pids = sdscatprintf(pids, "%s%u", i ? "," : "", n->pids[i]);
        info = sdscatprintf(info,
            "slimio_nvme_nsid:%u\r\nslimio_nvme_write_cache:%d\r\nslimio_fdp_supported:%d\r\n"
            "slimio_fdp_enabled:%d\r\nslimio_fdp_endurance_group:%u\r\n"
            "slimio_fdp_placement_ids:%s\r\n",
            n->nsid, n->vwc, n->fdp_supported, n->fdp_enabled, n->endgid, pids);
        sdsfree(pids);
    }
    if (S.wal_open) {
        slimioWal *w = &S.wal;
        pthread_mutex_lock(&w->lock);
        info = sdscatprintf(info,
            "slimio_wal_gen:%llu\r\nslimio_wal_oldest_gen:%llu\r\nslimio_wal_head_lba:%llu\r\n"
            "slimio_wal_tail_lba:%llu\r\nslimio_wal_used_lbas:%llu\r\nslimio_wal_free_lbas:%llu\r\n"
            "slimio_wal_gen_appended_bytes:%llu\r\nslimio_wal_gen_written_bytes:%llu\r\n"
            "slimio_wal_gen_durable_bytes:%llu\r\nslimio_wal_appends:%llu\r\nslimio_wal_bytes:%llu\r\n"
            "slimio_wal_batches:%llu\r\nslimio_wal_flushes:%llu\r\nslimio_wal_syncs:%llu\r\n"
            "slimio_wal_sync_wait_us:%llu\r\nslimio_wal_full_events:%llu\r\n"
            "slimio_wal_staging_waits:%llu\r\nslimio_wal_error:%d\r\n"
            "slimio_wal_lag_waits:%llu\r\nslimio_wal_lag_wait_us:%llu\r\n"
            "slimio_wal_reserve_lbas:%llu\r\nslimio_wal_early_rewrites:%llu\r\n"
            "slimio_wal_refusing_writes:%d\r\nslimio_wal_full_refusals:%llu\r\n"
            "slimio_wal_min_batch_bytes:%llu\r\n"
            "slimio_wal_batch_queue_us:%llu\r\nslimio_wal_batch_device_us:%llu\r\n"
            "slimio_wal_batches_overlapped:%llu\r\nslimio_wal_pad_bytes:%llu\r\n"
            "slimio_wal_gen_pad_bytes:%llu\r\nslimio_wal_pad_capped:%llu\r\n",
            (unsigned long long)w->gen.gen, (unsigned long long)m->gens[0].gen,
            (unsigned long long)w->head_lba, (unsigned long long)slimioWalTailLba(w),
            (unsigned long long)slimioWalUsedBlocks(w),
            (unsigned long long)(m->wal_lbas - slimioWalUsedBlocks(w)),
            (unsigned long long)w->appended, (unsigned long long)w->written,
            (unsigned long long)w->durable, (unsigned long long)w->stat_appends,
            (unsigned long long)w->stat_bytes, (unsigned long long)w->stat_batches,
            (unsigned long long)w->stat_flushes, (unsigned long long)w->stat_syncs,
            (unsigned long long)w->stat_sync_wait_us, (unsigned long long)w->stat_full,
            (unsigned long long)w->stat_stage_waits, w->error,
            (unsigned long long)w->stat_lag_waits, (unsigned long long)w->stat_lag_wait_us,
            (unsigned long long)w->reserve_blocks, (unsigned long long)S.early_rewrites,
            S.refusing, (unsigned long long)S.refusals, (unsigned long long)w->min_batch,
            (unsigned long long)w->stat_batch_queue_us,
            (unsigned long long)w->stat_batch_device_us,
            (unsigned long long)w->stat_overlapped, (unsigned long long)w->stat_pad_bytes,
            (unsigned long long)w->gen_pad, (unsigned long long)w->stat_pad_capped);
        pthread_mutex_unlock(&w->lock);
        slimioRingStats *rs = &w->ring.stats;
        info = sdscatprintf(info,
            "slimio_wal_ring_requests:%llu\r\nslimio_wal_ring_commands:%llu\r\n"
            "slimio_wal_ring_submits:%llu\r\nslimio_wal_ring_completions:%llu\r\n"
            "slimio_wal_ring_inflight_max:%llu\r\nslimio_wal_ring_errors:%llu\r\n",
            (unsigned long long)rs->requests, (unsigned long long)rs->commands,
            (unsigned long long)rs->submits, (unsigned long long)rs->completions,
            (unsigned long long)rs->inflight_max, (unsigned long long)rs->errors);
    }
    for (int k = 0; k < SLIMIO_KINDS; k++)
        info = sdscatprintf(info, "slimio_bytes_written_%s:%llu\r\n", kindName(k),
                            (unsigned long long)atomic_load(&S.be.bytes_written[k]));
    const slimioDeallocStats *ds = &S.dealloc.stats;
    info = sdscatprintf(info,
        "slimio_dealloc_enabled:%d\r\nslimio_dealloc_supported:%d\r\n"
        "slimio_dealloc_commands:%llu\r\nslimio_dealloc_lbas:%llu\r\n"
        "slimio_dealloc_unsupported:%llu\r\nslimio_dealloc_errors:%llu\r\n"
        "slimio_dealloc_marker_errors:%llu\r\nslimio_trace_marker:%s\r\n",
        S.dealloc.enabled, S.dealloc.supported, (unsigned long long)ds->commands,
        (unsigned long long)ds->lbas, (unsigned long long)ds->unsupported,
        (unsigned long long)ds->errors, (unsigned long long)ds->marker_errors,
        S.dealloc.marker_path ? S.dealloc.marker_path : "");
    info = sdscatprintf(info,
        "slimio_group_commit:%d\r\nslimio_group_commit_active:%d\r\n"
        "slimio_held_clients:%lu\r\nslimio_reply_holds:%llu\r\nslimio_reply_releases:%llu\r\n"
        "slimio_group_commit_wakeups:%llu\r\nslimio_reply_release_lag_us:%llu\r\n"
        "slimio_sqpoll:%d\r\nslimio_snapshots_wal_snapshot:%llu\r\nslimio_snapshots_on_demand:%llu\r\n"
        "slimio_promotions:%llu\r\nslimio_last_snapshot_kind:%s\r\nslimio_last_snapshot_bytes:%llu\r\n"
        "slimio_last_snapshot_time_s:%.3f\r\nslimio_last_snapshot_mbps:%.1f\r\n"
        "slimio_recovery_slot:%d\r\nslimio_recovery_wal_gens:%llu\r\nslimio_recovery_wal_bytes:%llu\r\n"
        "slimio_recovery_bytes:%llu\r\nslimio_recovery_device_bytes:%llu\r\n"
        "slimio_recovery_time_s:%.3f\r\nslimio_recovery_mbps:%.1f\r\n",
        slimio_cfg.group_commit, groupCommitActive(),
        G.held ? (unsigned long)listLength(G.held) : 0UL, (unsigned long long)G.holds,
        (unsigned long long)G.releases, (unsigned long long)G.wakeups,
        (unsigned long long)G.release_lag_us,
        slimio_cfg.sqpoll, (unsigned long long)S.snapshots[SLIMIO_KIND_WAL_SNAPSHOT],
        (unsigned long long)S.snapshots[SLIMIO_KIND_ON_DEMAND], (unsigned long long)S.promotions,
        S.promotions ? kindName(S.last_snapshot_kind) : "none",
        (unsigned long long)S.last_snapshot_bytes, S.last_snapshot_s,
        S.last_snapshot_s > 0 ? (double)S.last_snapshot_bytes / 1e6 / S.last_snapshot_s : 0.0,
        S.recovery_slot, (unsigned long long)S.recovery_gens,
        (unsigned long long)S.recovery_wal_bytes, (unsigned long long)S.recovery_bytes,
        (unsigned long long)S.recovery_device_bytes, S.recovery_s,
        S.recovery_s > 0 ? (double)S.recovery_bytes / 1e6 / S.recovery_s : 0.0);
    return info;
}
