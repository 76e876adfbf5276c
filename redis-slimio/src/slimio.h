/* SlimIO inside Redis: the functions Redis's hooks call (aof.c, rdb.c, server.c,
 * networking.c, config.c) and the configuration they read. The hook series includes it
 * at the end of server.h, so every file of Redis sees it after server.h's types.
 *
 * Every hook is of the form `if (slimioEnabled()) <SlimIO> else <stock>`: with
 * slimio-device unset, Redis behaves exactly as stock. With it set (appendonly yes is
 * required), the AOF's files and manifest are replaced by SlimIO's LBA space:
 *
 *   manifest             -> the Metadata region (slimio_format.h)
 *   INCR AOF (aofWrite)  -> the WAL region, one generation per INCR file (slimio_wal.h)
 *   fsync always/everysec-> slimioWalSync / slimioWalFlushAsync
 *   BASE AOF (rewrite)   -> a WAL-Snapshot written by the fork child into the Reserve slot
 *   dump.rdb (BGSAVE)    -> an On-Demand snapshot, same path (slimio_snap.h)
 *   renames/manifest     -> promotion of the Reserve slot by one metadata commit
 *   loading              -> Redis's own loader over read-ahead streams of the slot and WAL */
#ifndef SLIMIO_H
#define SLIMIO_H

#include <stdio.h>
#include <sys/types.h>

#define SLIMIO_FORMAT_NEVER 0
#define SLIMIO_FORMAT_IF_BLANK 1
#define SLIMIO_FORMAT_FORCE 2
#define SLIMIO_LOAD_WAL_SNAPSHOT 0
#define SLIMIO_LOAD_ON_DEMAND 1
#define SLIMIO_SINK_DEVICE 0
#define SLIMIO_SINK_DISCARD 1

typedef struct slimioConfig {
    char *device;
    int backend;
    int format;
    long long wal_size, slot_size;
    int lba_size;
    int placement_wal, placement_wal_snapshot, placement_on_demand;
    int sqpoll;
    int ring_entries;
    long long wal_buffer_size, readahead_size, snapshot_buffer_size;
    int load_snapshot;
    int deallocate;             /* slimio-deallocate */
    char *trace_marker;         /* slimio-trace-marker, NULL = none */
    int group_commit;           /* slimio-group-commit */
    int snapshot_sink;          /* slimio-snapshot-sink (modifiable): device or discard */
} slimioConfig;

extern slimioConfig slimio_cfg;
extern configEnum slimio_backend_enum[];
extern configEnum slimio_format_enum[];
extern configEnum slimio_load_snapshot_enum[];
extern configEnum slimio_snapshot_sink_enum[];

/* slimio-lba-size: a power of two from 512 to 65536. */
int slimioIsValidLbaSize(long long val, const char **err);

/* True once slimioServerInit() accepted the device. */
int slimioEnabled(void);

/* Start-up, from aofLoadManifestFromDisk(): when slimio-device is set, check the
 * configuration, open the device, apply the format policy and read the metadata. Exits
 * with a message naming the problem when anything is wrong. Returns slimioEnabled():
 * 1 when SlimIO owns the AOF (no manifest is read), 0 for stock behaviour. */
int slimioServerInit(void);

/* loadAppendOnlyFiles(): load the requested snapshot, then replay the WAL. AOF_* codes. */
int slimioLoadAppendOnlyFiles(void);
/* loadSingleAppendOnlyFile()'s fopen/truncate for SlimIO's stream names. */
FILE *slimioOpenStream(const char *name);
int slimioTruncateStream(const char *name, off_t valid_up_to);

/* aofOpenIfNeededOnServerStart(): open the WAL and begin a generation. */
void slimioOpenWalOnServerStart(void);
/* openNewIncrAofForAppend(): a new WAL generation. C_OK / C_ERR. */
int slimioOpenNewIncrAof(void);

/* aofWrite(): append to the WAL; len, or -1 with errno (ENOSPC: region full). */
ssize_t slimioAofWrite(const char *buf, size_t len);
/* redis_fsync(aof_fd) / aof_background_fsync(). */
int slimioAofFsync(void);
void slimioAofBackgroundFsync(void);
#define slimioFsync(fd) (slimioEnabled() ? slimioAofFsync() : redis_fsync(fd))
/* flushAppendOnlyFile()'s fsync under appendfsync always: with group commit, it does not
 * wait (the replies do, below); without, it is slimioAofFsync. */
int slimioAofAlwaysFsync(void);
#define slimioAlwaysFsync(fd) (slimioEnabled() ? slimioAofAlwaysFsync() : redis_fsync(fd))

/* Group commit (slimio-group-commit yes, Always-Log, io-threads 1). Stock Redis under
 * appendfsync always writes and fsyncs the AOF in beforeSleep and only then sends the
 * iteration's replies: the server does nothing while the device works. Here the WAL batch
 * is submitted with FUA and the server goes on; instead, every reply waits until what was
 * appended before it was built is durable:
 *   prepareClientToWrite       -> slimioStampReply: the reply belongs to the open epoch
 *   beforeSleep, after flushAppendOnlyFile -> slimioBeforeSleep: the epoch ends at the
 *                                 WAL's appended level (the AOF buffer was just handed
 *                                 over); held clients whose epochs are durable are queued
 *                                 again (every iteration, clients pending or not)
 *   handleClientsWithPendingWrites, each client -> slimioHoldReply: 1 = not yet durable,
 *                                 the client waits
 *   sendReplyToClient          -> slimioHoldReply too (a client with a write handler)
 *   freeClient                 -> slimioForgetClient
 * The WAL's completion thread wakes the event loop through an eventfd when the durable
 * level advances. No reply, to a write or a read, leaves before the writes it may reflect
 * are durable: the same guarantee as stock's, and a crash loses no acknowledged write. */
void slimioStampReply(client *c);
/* createClient(): the group-commit fields of a new client (not held, no reply yet). */
void slimioInitClient(client *c);
/* beforeSleep, after flushAppendOnlyFile: the Periodical-Log batch kick (slimio_wal.h,
 * SLIMIO_WAL_MIN_BATCH) and the end of the group-commit epoch. */
void slimioBeforeSleep(void);
int slimioHoldReply(client *c);
void slimioReleaseHeld(void);
void slimioForgetClient(client *c);

/* Fork child of a rewrite: the WAL-Snapshot into the Reserve slot. C_OK / C_ERR. */
int slimioRewriteAppendOnlyFile(void);
/* Parent, rewrite child exited 0: promote the WAL-Snapshot, deallocate the old WAL and
 * the new Reserve slot, release the old WAL. */
int slimioRewriteDone(void);

/* rdbSave() (BGSAVE child, SAVE, shutdown): an On-Demand snapshot into the Reserve slot;
 * promoted at once when called in the main process. C_OK / C_ERR. */
int slimioRdbSave(int req, rdbSaveInfo *rsi, int rdbflags);
/* Parent, BGSAVE child exited 0: promote the On-Demand snapshot and deallocate the new
 * Reserve slot. C_OK / C_ERR. */
int slimioBgsaveDone(void);

/* CONFIG SET appendonly while SlimIO owns the AOF: refused. */
int slimioRefuseAppendonlyChange(const char **err);

/* The INFO "slimio" section; sections = how many genRedisInfoString() has written before
 * it (a blank line separates them). */
sds slimioGenInfoString(sds info, int sections);

/* Redis functions SlimIO reuses (not declared in server.h). */
int loadSingleAppendOnlyFile(char *filename);
int rewriteAppendOnlyFileRio(rio *aof);

#endif
