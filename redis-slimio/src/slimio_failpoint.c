/* Named failpoints: see slimio_failpoint.h for the contract. */
#define _GNU_SOURCE
#include "slimio_failpoint.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { FP_OFF = 0, FP_CRASH = 1, FP_ERROR = 2, FP_DELAY = 3 };

typedef struct {
    _Atomic int action;
    _Atomic uint64_t nth;   /* 0 = every hit */
    _Atomic uint64_t hits;
    _Atomic uint64_t delay_us;  /* FP_DELAY: microseconds slept per hit */
} failpoint;

static failpoint failpoints[SLIMIO_FP_COUNT];

static const char *failpointNames[SLIMIO_FP_COUNT] = {
#define SLIMIO_FP_NAME(id, name) name,
    SLIMIO_FAILPOINT_LIST(SLIMIO_FP_NAME)
#undef SLIMIO_FP_NAME
};

const char *slimioFailpointName(slimioFailpointId id) {
    return id < SLIMIO_FP_COUNT ? failpointNames[id] : "?";
}

uint64_t slimioFailpointHits(slimioFailpointId id) {
    return atomic_load(&failpoints[id].hits);
}

int slimioFailpoint(slimioFailpointId id) {
    failpoint *fp = &failpoints[id];
    uint64_t hit = atomic_fetch_add_explicit(&fp->hits, 1, memory_order_relaxed) + 1;
    int action = atomic_load_explicit(&fp->action, memory_order_relaxed);
    if (action == FP_OFF) return 0;
    uint64_t nth = atomic_load(&fp->nth);
    if (nth && hit != nth) return 0;
    if (action == FP_ERROR) return -1;
    if (action == FP_DELAY) {
        uint64_t us = atomic_load_explicit(&fp->delay_us, memory_order_relaxed);
        struct timespec ts = {(time_t)(us / 1000000), (long)(us % 1000000) * 1000};
        while (nanosleep(&ts, &ts) == -1) { /* EINTR: sleep the rest */ }
        return 0;
    }
    /* Crash: no atexit handlers, no flushing, exactly like kill -9. */
    static const char msg[] = "slimio: failpoint crash\n";
    if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0) { /* nothing to do */ }
    raise(SIGKILL);
    _exit(137);
}

int slimioFailpointSet(const char *spec, char *err, size_t errlen) {
    int action[SLIMIO_FP_COUNT] = {0};
    uint64_t nth[SLIMIO_FP_COUNT] = {0};
    uint64_t delay[SLIMIO_FP_COUNT] = {0};
    char *copy = strdup(spec ? spec : ""), *save = NULL;
    if (!copy) { snprintf(err, errlen, "out of memory"); return -1; }
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        if (!*tok) continue;
        char *at = strchr(tok, '@'), *eq = strchr(tok, '=');
        uint64_t n = 0;
        if (at) {
            char *end;
            *at = '\0';
            n = strtoull(at + 1, &end, 10);
            if (*end || n == 0) {
                snprintf(err, errlen, "failpoint '%s': '@%s' is not a positive hit number",
                         tok, at + 1);
                free(copy);
                return -1;
            }
        }
        int act = FP_CRASH;
        uint64_t us = 0;
        if (eq) {
            *eq = '\0';
            char *end = NULL;
            if (!strcmp(eq + 1, "crash")) act = FP_CRASH;
            else if (!strcmp(eq + 1, "error")) act = FP_ERROR;
            else if (!strncmp(eq + 1, "delay:", 6) && eq[7] >= '0' && eq[7] <= '9' &&
                     (us = strtoull(eq + 7, &end, 10)) > 0 && !*end && us <= 10000000)
                act = FP_DELAY;
            else {
                snprintf(err, errlen, "failpoint '%s': unknown action '%s' (use crash, error "
                         "or delay:<microseconds, 1-10000000>)", tok, eq + 1);
                free(copy);
                return -1;
            }
        }
        int found = -1;
        for (int i = 0; i < SLIMIO_FP_COUNT; i++)
            if (!strcmp(tok, failpointNames[i])) found = i;
        if (found < 0) {
            snprintf(err, errlen, "unknown failpoint '%s' (see SLIMIO_FAILPOINT_LIST in "
                     "slimio_failpoint.h)", tok);
            free(copy);
            return -1;
        }
        action[found] = act;
        nth[found] = n;
        delay[found] = us;
    }
    free(copy);
    for (int i = 0; i < SLIMIO_FP_COUNT; i++) {
        atomic_store(&failpoints[i].action, FP_OFF);
        atomic_store(&failpoints[i].hits, 0);
        atomic_store(&failpoints[i].nth, nth[i]);
        atomic_store(&failpoints[i].delay_us, delay[i]);
        atomic_store(&failpoints[i].action, action[i]);
    }
    return 0;
}

int slimioFailpointInitFromEnv(char *err, size_t errlen) {
    const char *spec = getenv("SLIMIO_FAILPOINTS");
    return spec ? slimioFailpointSet(spec, err, errlen) : 0;
}
