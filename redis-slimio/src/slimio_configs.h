/* The slimio-* options: entries of config.c's static_configs[] table, included inside it
 * by the hook series (one line) and nowhere else, so they are Redis configs like any
 * other: redis.conf, the command line, CONFIG GET/SET/REWRITE, bounds and error
 * messages come from config.c. The create*Config macros are config.c's; slimio_cfg and
 * the enums are slimio.c's (slimio.h, which server.h includes). All are immutable
 * except slimio-snapshot-sink. redis-slimio/slimio.conf documents every option; keep
 * the two in step (tests/test_build.py checks names and defaults). */
    createStringConfig("slimio-device", NULL, IMMUTABLE_CONFIG, EMPTY_STRING_IS_NULL, slimio_cfg.device, NULL, NULL, NULL),
    createEnumConfig("slimio-backend", NULL, IMMUTABLE_CONFIG, slimio_backend_enum, slimio_cfg.backend, 0, NULL, NULL),
    createEnumConfig("slimio-format", NULL, IMMUTABLE_CONFIG, slimio_format_enum, slimio_cfg.format, SLIMIO_FORMAT_IF_BLANK, NULL, NULL),
    createEnumConfig("slimio-load-snapshot", NULL, IMMUTABLE_CONFIG, slimio_load_snapshot_enum, slimio_cfg.load_snapshot, SLIMIO_LOAD_WAL_SNAPSHOT, NULL, NULL),
    createLongLongConfig("slimio-wal-size", NULL, IMMUTABLE_CONFIG, 1<<20, LLONG_MAX, slimio_cfg.wal_size, 1LL<<30, MEMORY_CONFIG, NULL, NULL),
    createLongLongConfig("slimio-slot-size", NULL, IMMUTABLE_CONFIG, 0, LLONG_MAX, slimio_cfg.slot_size, 0, MEMORY_CONFIG, NULL, NULL),
    createIntConfig("slimio-lba-size", NULL, IMMUTABLE_CONFIG, 512, 65536, slimio_cfg.lba_size, 4096, INTEGER_CONFIG, slimioIsValidLbaSize, NULL),
    createIntConfig("slimio-placement-wal", NULL, IMMUTABLE_CONFIG, -1, 65534, slimio_cfg.placement_wal, 1, INTEGER_CONFIG, NULL, NULL),
    createIntConfig("slimio-placement-wal-snapshot", NULL, IMMUTABLE_CONFIG, -1, 65534, slimio_cfg.placement_wal_snapshot, 3, INTEGER_CONFIG, NULL, NULL),
    createIntConfig("slimio-placement-on-demand", NULL, IMMUTABLE_CONFIG, -1, 65534, slimio_cfg.placement_on_demand, 2, INTEGER_CONFIG, NULL, NULL),
    createBoolConfig("slimio-sqpoll", NULL, IMMUTABLE_CONFIG, slimio_cfg.sqpoll, 1, NULL, NULL),
    createIntConfig("slimio-ring-entries", NULL, IMMUTABLE_CONFIG, 8, 32768, slimio_cfg.ring_entries, 256, INTEGER_CONFIG, NULL, NULL),
    createLongLongConfig("slimio-wal-buffer-size", NULL, IMMUTABLE_CONFIG, 1<<20, 1LL<<32, slimio_cfg.wal_buffer_size, 8<<20, MEMORY_CONFIG, NULL, NULL),
    createLongLongConfig("slimio-readahead-size", NULL, IMMUTABLE_CONFIG, 1<<16, 1LL<<30, slimio_cfg.readahead_size, 1<<20, MEMORY_CONFIG, NULL, NULL),
    createLongLongConfig("slimio-snapshot-buffer-size", NULL, IMMUTABLE_CONFIG, 1<<16, 1LL<<28, slimio_cfg.snapshot_buffer_size, 1<<20, MEMORY_CONFIG, NULL, NULL),
    createBoolConfig("slimio-deallocate", NULL, IMMUTABLE_CONFIG, slimio_cfg.deallocate, 1, NULL, NULL),
    createBoolConfig("slimio-group-commit", NULL, IMMUTABLE_CONFIG, slimio_cfg.group_commit, 1, NULL, NULL),
    createEnumConfig("slimio-snapshot-sink", NULL, MODIFIABLE_CONFIG, slimio_snapshot_sink_enum, slimio_cfg.snapshot_sink, SLIMIO_SINK_DEVICE, NULL, NULL),
    createStringConfig("slimio-trace-marker", NULL, IMMUTABLE_CONFIG, EMPTY_STRING_IS_NULL, slimio_cfg.trace_marker, NULL, NULL, NULL),
