"""The FTL's inner loop, compiled with Numba: a page-mapped FTL with one open erase unit
(reclaim unit) per placement handle, greedy victim selection and two GC triggers.

Why Numba and not NumPy or C: the replay is a strictly sequential state machine (every page
write depends on the mapping the previous one left), which NumPy cannot vectorise, and the
paper profile's traces hold hundreds of millions of page writes; Numba compiles this plain
Python to machine code (about 10 ns a page here) without a C toolchain in the pipeline or a
build step in the package. ``cache=True`` keeps the compiled code between runs.

State (all NumPy arrays, owned by :class:`slimio_repro.ftl.model.Device`):

* ``l2p[lpn]`` physical page of a logical page, -1 when unmapped;
* ``p2l[ppn]`` logical page stored in a physical page, -1 when invalid or free;
* ``vpc[blk]`` valid pages, ``state[blk]`` 0 free / 1 open / 2 closed, ``owner[blk]`` the
  handle whose write pointer filled it;
* a FIFO of free units (``free_q``, head and count in ``scal``), as FEMU's free line list;
* ``open_blk[h]``, ``open_wp[h]``: each handle's open unit and its next page. Every handle
  holds an open unit from the start and takes the next free one as soon as it fills
  (FEMU's ``fdpssd_init_write_pointer`` / ``ssd_advance_write_pointer``).

Counters (``cnt``, int64): see the ``C_*`` indices; per handle: host pages, GC-copied pages
written into the handle, units erased (by the handle that owned them).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Operation kinds of a replay (see ftl.trace.Ops).
OP_WRITE = 0
OP_DEALLOC = 1
OP_REQUEST = 2      # a command that reaches the FTL but moves no data (read, DSM itself)

# Scalar state indices.
S_FREE_HEAD = 0
S_FREE_COUNT = 1
S_ERROR = 2         # 0 ok; 1 out of free units; 2 LBA out of range
S_ERROR_OP = 3      # index of the operation that failed
N_SCALARS = 4

# Global counter indices.
C_HOST_PAGES = 0
C_GC_PAGES = 1
C_ERASES = 2
C_GC_FOREGROUND = 3
C_GC_BACKGROUND = 4
C_DEALLOC_PAGES = 5        # mapped pages unmapped by deallocations
C_DEALLOC_UNMAPPED = 6     # deallocated pages that were not mapped
C_REQUESTS = 7
C_MIN_FREE = 8             # lowest free-unit count seen
N_COUNTERS = 9

# Parameter indices (int64 array).
P_PPB = 0              # pages per erase unit
P_BG_THRESH = 1        # background GC while free units <= this (-1: never)
P_BG_MIN_INVALID = 2   # a background victim needs at least this many invalid pages
P_FG_THRESH = 3        # foreground GC while free units <= this
P_FG_PER_PAGE = 4      # 1: check before every page; 0: once per write command (FEMU)
P_FG_MAX = 5           # at most this many foreground rounds per check (-1: until above)
P_GC_DEST = 6          # -1: copies go to the victim's own handle; h >= 0: to handle h
P_SHIFT = 7            # log2(pages per unit)
N_PARAMS = 8


@njit(cache=True, inline="always")
def _take_free(free_q, scal):
    n = free_q.shape[0]
    if scal[S_FREE_COUNT] == 0:
        return -1
    b = free_q[scal[S_FREE_HEAD]]
    scal[S_FREE_HEAD] = (scal[S_FREE_HEAD] + 1) % n
    scal[S_FREE_COUNT] -= 1
    return b


@njit(cache=True, inline="always")
def _put_free(free_q, scal, b):
    n = free_q.shape[0]
    free_q[(scal[S_FREE_HEAD] + scal[S_FREE_COUNT]) % n] = b
    scal[S_FREE_COUNT] += 1


@njit(cache=True, inline="always")
def _open(h, open_blk, open_wp, state, owner, free_q, scal, cnt):
    b = _take_free(free_q, scal)
    if b < 0:
        return False
    open_blk[h] = b
    open_wp[h] = 0
    state[b] = 1
    owner[b] = h
    if scal[S_FREE_COUNT] < cnt[C_MIN_FREE]:
        cnt[C_MIN_FREE] = scal[S_FREE_COUNT]
    return True


@njit(cache=True, inline="always")
def _invalidate(lpn, ppb, l2p, p2l, vpc):
    old = l2p[lpn]
    if old < 0:
        return False
    vpc[old // ppb] -= 1
    p2l[old] = -1
    l2p[lpn] = -1
    return True


@njit(cache=True)
def _gc_once(force, prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q, scal, cnt,
             h_gc, h_erase):
    """Collect one victim: the closed unit with the fewest valid pages (a unit with every
    page valid is never one). Without ``force`` it must have >= P_BG_MIN_INVALID invalid
    pages. Returns 1 when a unit was erased, 0 when there was no victim, -1 when the copies
    found no free unit."""
    ppb = prm[P_PPB]
    nblk = vpc.shape[0]
    victim = -1
    best = ppb
    for b in range(nblk):
        if state[b] == 2 and vpc[b] < best:
            best = vpc[b]
            victim = b
            if best == 0:
                break
    if victim < 0:
        return 0
    if not force and ppb - best < prm[P_BG_MIN_INVALID]:
        return 0
    dest = owner[victim] if prm[P_GC_DEST] < 0 else prm[P_GC_DEST]
    base = victim * ppb
    for i in range(ppb):
        lpn = p2l[base + i]
        if lpn >= 0:
            # The copy invalidates the old one (this page) through l2p.
            if _program(lpn, lpn + 1, dest, prm, l2p, p2l, vpc, state, owner, open_blk,
                        open_wp, free_q, scal, cnt) < 0:
                return -1
            cnt[C_GC_PAGES] += 1
            h_gc[dest] += 1
    state[victim] = 0
    vpc[victim] = 0
    h_erase[owner[victim]] += 1
    owner[victim] = -1
    cnt[C_ERASES] += 1
    _put_free(free_q, scal, victim)
    return 1


@njit(cache=True, inline="always")
def _foreground(prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q, scal, cnt,
                h_gc, h_erase):
    rounds = 0
    while scal[S_FREE_COUNT] <= prm[P_FG_THRESH]:
        if prm[P_FG_MAX] >= 0 and rounds >= prm[P_FG_MAX]:
            break
        r = _gc_once(True, prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q,
                     scal, cnt, h_gc, h_erase)
        if r < 0:
            return False
        if r == 0:
            break
        cnt[C_GC_FOREGROUND] += 1
        rounds += 1
    return True


@njit(cache=True, inline="always")
def _write_run(lpn, run, h, shift, l2p, p2l, vpc, open_blk, open_wp):
    """Program logical pages ``lpn .. lpn + run - 1`` into handle ``h``'s open unit, which
    has room for them: the hot loop (no calls, a shift instead of a division)."""
    b = open_blk[h]
    base = (b << shift) + open_wp[h]
    for j in range(run):
        lp = lpn + j
        old = l2p[lp]
        if old >= 0:
            vpc[old >> shift] -= 1
            p2l[old] = -1
        p2l[base + j] = lp
        l2p[lp] = base + j
    vpc[b] += run
    open_wp[h] += run


@njit(cache=True, inline="always")
def _program(lpn, end, h, prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q, scal,
             cnt):
    """Program pages from ``lpn`` towards ``end`` into handle ``h``'s open unit, as many as
    fit; when the unit fills, close it and take the next one (FEMU's write pointer).
    Returns the pages programmed, -1 when no free unit is left."""
    ppb = prm[P_PPB]
    if open_blk[h] < 0:
        if not _open(h, open_blk, open_wp, state, owner, free_q, scal, cnt):
            return -1
    run = min(ppb - open_wp[h], end - lpn)
    _write_run(lpn, run, h, prm[P_SHIFT], l2p, p2l, vpc, open_blk, open_wp)
    if open_wp[h] == ppb:
        state[open_blk[h]] = 2
        open_blk[h] = -1
        _open(h, open_blk, open_wp, state, owner, free_q, scal, cnt)
    return run


@njit(cache=True, inline="always")
def _write(lpn, count, h, prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q, scal,
           cnt, h_gc, h_erase):
    """Host write of ``count`` pages from ``lpn`` on handle ``h``; False when out of units.
    Units are only taken when one fills, so the per-page foreground check of the greedy
    model is made where it can change anything: before each run within a unit."""
    end = lpn + count
    while lpn < end:
        if prm[P_FG_PER_PAGE] != 0:
            if not _foreground(prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q,
                               scal, cnt, h_gc, h_erase):
                return False
        r = _program(lpn, end, h, prm, l2p, p2l, vpc, state, owner, open_blk, open_wp,
                     free_q, scal, cnt)
        if r < 0:
            return False
        lpn += r
    return True


@njit(cache=True, inline="always")
def _host_write(lpn, count, h, prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q,
                scal, cnt, h_host, h_gc, h_erase):
    """One host write command: the model's foreground GC (once per command, FEMU's
    ``fdpssd_write``, or before each unit for the greedy model), then the pages."""
    cnt[C_REQUESTS] += 1
    if prm[P_FG_PER_PAGE] == 0:
        if not _foreground(prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q, scal,
                           cnt, h_gc, h_erase):
            return False
    if not _write(lpn, count, h, prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q,
                  scal, cnt, h_gc, h_erase):
        return False
    cnt[C_HOST_PAGES] += count
    h_host[h] += count
    return True


@njit(cache=True, inline="always")
def _background(prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q, scal, cnt, h_gc,
                h_erase):
    """After each command the FTL may clean one unit in the background (FEMU's thread);
    False when the copies found no free unit."""
    if prm[P_BG_THRESH] >= 0 and scal[S_FREE_COUNT] <= prm[P_BG_THRESH]:
        r = _gc_once(False, prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q, scal,
                     cnt, h_gc, h_erase)
        if r < 0:
            return False
        if r > 0:
            cnt[C_GC_BACKGROUND] += 1
    return True


@njit(cache=True)
def replay(kind, first, count, handle, prm, l2p, p2l, vpc, state, owner, open_blk, open_wp,
           free_q, scal, cnt, h_host, h_gc, h_erase):
    """Apply operations ``kind[i]`` on pages ``first[i] .. first[i] + count[i] - 1`` (writes
    at ``handle[i]``) in order. Returns the number of operations applied; on an error it
    stops and sets ``scal[S_ERROR]`` and ``scal[S_ERROR_OP]``."""
    ppb = prm[P_PPB]
    nlpn = l2p.shape[0]
    n = kind.shape[0]
    for i in range(n):
        k = kind[i]
        if k == OP_WRITE or k == OP_DEALLOC:
            if first[i] < 0 or first[i] + count[i] > nlpn:
                scal[S_ERROR] = 2
                scal[S_ERROR_OP] = i
                return i
        if k == OP_WRITE:
            if not _host_write(first[i], count[i], handle[i], prm, l2p, p2l, vpc, state, owner,
                               open_blk, open_wp, free_q, scal, cnt, h_host, h_gc, h_erase):
                scal[S_ERROR] = 1
                scal[S_ERROR_OP] = i
                return i
        elif k == OP_DEALLOC:
            for lpn in range(first[i], first[i] + count[i]):
                if _invalidate(lpn, ppb, l2p, p2l, vpc):
                    cnt[C_DEALLOC_PAGES] += 1
                else:
                    cnt[C_DEALLOC_UNMAPPED] += 1
            continue  # a deallocation range is not a command of its own (its DSM is)
        else:
            cnt[C_REQUESTS] += 1
        if not _background(prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q, scal,
                           cnt, h_gc, h_erase):
            scal[S_ERROR] = 1
            scal[S_ERROR_OP] = i
            return i
    return n


@njit(cache=True)
def uniform_random_writes(n_writes, n_lpn, seed, prm, l2p, p2l, vpc, state, owner, open_blk,
                          open_wp, free_q, scal, cnt, h_host, h_gc, h_erase):
    """Single-page write commands to uniformly random logical pages, all on handle 0 (the
    classic workload of the analytic WAF models), with the model's GC triggers as in
    :func:`replay`. Same state and counters."""
    np.random.seed(seed)
    for i in range(n_writes):
        lpn = np.random.randint(0, n_lpn)
        if not _host_write(lpn, 1, 0, prm, l2p, p2l, vpc, state, owner, open_blk, open_wp,
                           free_q, scal, cnt, h_host, h_gc, h_erase) or \
                not _background(prm, l2p, p2l, vpc, state, owner, open_blk, open_wp, free_q,
                                scal, cnt, h_gc, h_erase):
            scal[S_ERROR] = 1
            scal[S_ERROR_OP] = i
            return i
    return n_writes


@njit(cache=True)
def qemu_ru_accounting(cmd_is_write, nlb, handle, runs_lbas, ruamw, stats):
    """QEMU's FDP bookkeeping (hw/nvme/ctrl.c ``nvme_do_write_fdp``/``nvme_update_ruh``,
    10.0.2): each write or write zeroes adds its bytes to host and media bytes written and
    consumes its handle's reclaim unit; when a write reaches the unit's end, QEMU moves the
    handle to a fresh unit and, because it does so before zeroing the old unit's remaining
    count, adds that remainder to media bytes written a second time (the quirk that makes
    MBMW exceed HBMW with no GC at all). ``ruamw[h]`` (LBAs) is updated in place;
    ``stats`` gets host LBAs [0], media LBAs [1] and unit switches [2]."""
    for i in range(cmd_is_write.shape[0]):
        if not cmd_is_write[i]:
            continue
        h = handle[i]
        n = nlb[i]
        stats[0] += n
        stats[1] += n
        while n > 0:
            if n < ruamw[h]:
                ruamw[h] -= n
                break
            n -= ruamw[h]
            stats[1] += ruamw[h]
            stats[2] += 1
            ruamw[h] = runs_lbas
