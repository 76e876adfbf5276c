"""Named FTL models, a device's geometry, and a :class:`Device` that replays traces on it.

Two named models (``MODELS``):

* ``femu-fdp``: the paper's device, the FTL of the artifact's FEMU (lass-lab/ConfFDP,
  ``hw/femu/fdp/fdpftl.c`` at commit ``a225af2a481d40195bda3ce1c2dfd094d6583bef``, the
  parent of the branch head that sends every write to handle 0; ``femu-scripts/run-fdp.sh``
  sets its parameters). Read from that file:

  - physical = user / 0.75 (``gc_thres_pcent=75`` is also the user-space ratio,
    ``ssd_init_params``); a reclaim unit ("line") is one block on every die; one reclaim
    group (``rg_number=1``);
  - handle = DSPEC & 0xff whatever the directive type; a handle >= ``handle_number`` becomes
    the last one (``fdpssd_write``); without a directive DSPEC is 0, i.e. handle 0;
  - every handle holds an open line from the start and takes the next free line (FIFO) as
    soon as its line fills (``fdpssd_init_write_pointer``, ``ssd_advance_write_pointer``);
  - foreground GC before each write command: up to 5 rounds while free lines <=
    ``gc_thres_lines_high`` = (1 - 0.95) x lines (``should_gc_high``), victim forced;
  - background GC after each command the FTL thread dequeues (write, read, DSM): one round
    while free lines <= ``gc_thres_lines`` = (1 - 0.75) x lines, only a victim with at least
    1/8 of its pages invalid (``msftl_thread``, ``select_victim_line``);
  - victim = the closed line with the fewest valid pages (a priority queue on vpc; a line
    with every page valid sits in the full list and is never a victim);
  - GC copies go to the victim's own handle's write pointer (``do_gc``: ``stream_id =
    victim_line->stream_id``), mixed with that handle's host writes;
  - DSM deallocate unmaps ``nlb + 1`` pages per range (one LBA too many, ``msssd_trim``);
    Write Zeroes does not reach the FTL.

* ``greedy``: a plain page-mapped FTL with greedy GC on demand (before every page, while no
  more than one unit is free), GC copies into the same write frontier, a configurable
  over-provisioning and, by default, one handle: the FTL of the analytic WAF models
  (Desnoyers 2012; Van Houdt 2013).

Parameters that every model takes (:class:`Geometry`): user capacity, over-provisioning,
page size, reclaim-unit size, number of handles, and whether placement is honoured (ignored:
every write on handle 0).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from . import engine as e
from .trace import Ops

FEMU_REPO = "lass-lab/ConfFDP"
FEMU_COMMIT = "a225af2a481d40195bda3ce1c2dfd094d6583bef"
FEMU_FILE = "hw/femu/fdp/fdpftl.c"
MAX_PAGES = 2**31 - 1   # int32 mapping tables


class ModelError(ValueError):
    """A geometry or trace the model cannot replay; the message says what to change."""


@dataclass(frozen=True)
class Geometry:
    """A device: ``user_bytes`` exported, ``op`` over-provisioning (physical = user x (1 +
    op), rounded down to whole reclaim units), ``page_bytes`` per flash page,
    ``ru_bytes`` per reclaim unit (the erase unit the FTL collects), ``handles``."""
    user_bytes: int
    op: float
    page_bytes: int = 4096
    ru_bytes: int = 1 << 30
    handles: int = 8
    placement: bool = True

    def __post_init__(self):
        for name in ("user_bytes", "page_bytes", "ru_bytes", "handles"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ModelError(f"{name}={v!r} must be a positive integer")
        ppb = self.ru_bytes // self.page_bytes
        if self.ru_bytes % self.page_bytes or ppb & (ppb - 1):
            raise ModelError(f"ru_bytes={self.ru_bytes} must be page_bytes={self.page_bytes} "
                             "times a power of two (pages per reclaim unit)")
        if not 0 < self.op <= 10:
            raise ModelError(f"op={self.op!r} must be in (0, 10]: over-provisioning as a "
                             "fraction of the user capacity (0.28 = 28 %)")
        if self.physical_units < self.handles + 2:
            raise ModelError(
                f"{self.physical_units} reclaim units of {self.ru_bytes} B cannot serve "
                f"{self.handles} handles (each holds an open unit, GC needs two more): "
                "use a smaller ru_bytes or a larger device")
        if self.physical_units * self.pages_per_unit > MAX_PAGES:
            raise ModelError(f"{self.physical_units * self.pages_per_unit} physical pages "
                             f"exceed the model's {MAX_PAGES}: use a larger page_bytes")

    @property
    def pages_per_unit(self) -> int:
        return self.ru_bytes // self.page_bytes

    @property
    def user_pages(self) -> int:
        return self.user_bytes // self.page_bytes

    @property
    def physical_units(self) -> int:
        return int(self.user_bytes * (1 + self.op)) // self.ru_bytes

    @property
    def physical_bytes(self) -> int:
        return self.physical_units * self.ru_bytes


@dataclass(frozen=True)
class Policy:
    """How a model collects garbage and reads commands (see the module docstring)."""
    name: str
    bg_free_fraction: float | None   # background GC while free units <= this x units
    bg_min_invalid_fraction: float   # a background victim's invalid pages >= this x ppb
    fg_free_fraction: float | None   # foreground GC while free units <= this x units
    fg_min_free_units: int           # ... or <= this many units, whichever is larger
    fg_per_page: bool
    fg_max_rounds: int               # -1: until above the threshold
    gc_to_victim_handle: bool
    handle_from_dspec_any_dtype: bool  # FEMU reads DSPEC whatever DTYPE says
    dealloc_extra_lba: bool            # FEMU's trim unmaps nlb + 1
    source: str


FEMU_FDP = Policy(
    name="femu-fdp", bg_free_fraction=1 - 0.75, bg_min_invalid_fraction=1 / 8,
    fg_free_fraction=1 - 0.95, fg_min_free_units=0, fg_per_page=False, fg_max_rounds=5,
    gc_to_victim_handle=True, handle_from_dspec_any_dtype=True, dealloc_extra_lba=True,
    source=f"github.com/{FEMU_REPO} {FEMU_FILE} @ {FEMU_COMMIT[:9]} "
           "(femu-scripts/run-fdp.sh: gc_thres_pcent=75, gc_thres_pcent_high=95)")
GREEDY = Policy(
    name="greedy", bg_free_fraction=None, bg_min_invalid_fraction=0.0,
    fg_free_fraction=None, fg_min_free_units=1, fg_per_page=True, fg_max_rounds=-1,
    gc_to_victim_handle=True, handle_from_dspec_any_dtype=False, dealloc_extra_lba=False,
    source="greedy page-mapped FTL (Desnoyers, SYSTOR 2012; Van Houdt, SIGMETRICS 2013)")
MODELS = {p.name: p for p in (FEMU_FDP, GREEDY)}
# FEMU keeps physical = user / 0.75: over-provisioning 1/3 of the user capacity.
FEMU_OP = 1 / 0.75 - 1


def paper_geometry(placement: bool = True) -> Geometry:
    """The paper's FEMU device: 180 GB (run-fdp.sh devsz_mb=184320), 4 KiB pages, 1 GiB
    reclaim units (one 16 MiB block on each of 8 x 8 dies), 8 handles: 240 reclaim units."""
    return Geometry(user_bytes=184320 << 20, op=FEMU_OP, page_bytes=4096, ru_bytes=1 << 30,
                    handles=8, placement=placement)


def policy(name: str) -> Policy:
    try:
        return MODELS[name]
    except KeyError:
        raise ModelError(f"unknown FTL model {name!r}: use one of {sorted(MODELS)}") from None


def _threshold(fraction: float | None, units: int, floor: int) -> int:
    if fraction is None:
        return floor if floor > 0 else -1
    return max(int(fraction * units), floor)


@dataclass
class Counters:
    """What a replay did, in pages and units; per handle where it says so."""
    host_pages: int = 0
    gc_pages: int = 0
    erases: int = 0
    gc_foreground: int = 0
    gc_background: int = 0
    dealloc_pages: int = 0
    dealloc_unmapped_pages: int = 0
    requests: int = 0
    min_free_units: int = 0
    host_pages_per_handle: list = dataclasses.field(default_factory=list)
    gc_pages_per_handle: list = dataclasses.field(default_factory=list)
    erases_per_handle: list = dataclasses.field(default_factory=list)

    def __add__(self, other: "Counters") -> "Counters":
        """Two replays' counters together (``min_free_units``: the lower of those that
        wrote)."""
        out = _fieldwise(self, other, lambda a, b: a + b)
        out.min_free_units = (min(self.min_free_units, other.min_free_units)
                              if self.host_pages and other.host_pages
                              else self.min_free_units or other.min_free_units)
        return out

    @property
    def waf(self) -> float | None:
        """(host + GC-copied pages) / host pages; None when nothing was written."""
        if self.host_pages == 0:
            return None
        return (self.host_pages + self.gc_pages) / self.host_pages

    def as_dict(self, page_bytes: int) -> dict:
        d = dataclasses.asdict(self)
        d["waf"] = self.waf
        d["host_bytes"] = self.host_pages * page_bytes
        d["flash_bytes"] = (self.host_pages + self.gc_pages) * page_bytes
        return d


def _fieldwise(a: Counters, b: Counters, op) -> Counters:
    """``op`` of ``a`` and ``b`` for every counter and every handle's (a missing handle
    counts 0); ``min_free_units`` left 0 for the caller."""
    out = Counters(**{f.name: op(getattr(a, f.name), getattr(b, f.name))
                      for f in dataclasses.fields(Counters)
                      if not f.name.endswith("_per_handle") and f.name != "min_free_units"})
    for name in ("host_pages_per_handle", "gc_pages_per_handle", "erases_per_handle"):
        x, y = getattr(a, name), getattr(b, name)
        n = max(len(x), len(y))
        setattr(out, name, [op(x[i] if i < len(x) else 0, y[i] if i < len(y) else 0)
                            for i in range(n)])
    return out


class Device:
    """One modelled device; its state persists across :meth:`replay` calls, so the cells
    replayed one after the other age it as repetitions on an un-reformatted device do."""

    def __init__(self, geometry: Geometry, model: str | Policy = "femu-fdp",
                 deallocations: bool = True):
        """``deallocations=False`` drops every deallocation of the traces (what the device
        does when the host never tells it what it freed: F2FS mounted nodiscard, SlimIO with
        slimio-deallocate no)."""
        self.deallocations = deallocations
        self.geometry = g = geometry
        self.policy = p = policy(model) if isinstance(model, str) else model
        units = g.physical_units
        ppb = g.pages_per_unit
        self.l2p = np.full(g.user_pages, -1, dtype=np.int32)
        self.p2l = np.full(units * ppb, -1, dtype=np.int32)
        self.vpc = np.zeros(units, dtype=np.int32)
        self.state = np.zeros(units, dtype=np.int8)
        self.owner = np.full(units, -1, dtype=np.int16)
        self.free_q = np.arange(units, dtype=np.int32)
        self.scal = np.zeros(e.N_SCALARS, dtype=np.int64)
        self.scal[e.S_FREE_COUNT] = units
        self.open_blk = np.full(g.handles, -1, dtype=np.int32)
        self.open_wp = np.zeros(g.handles, dtype=np.int32)
        self.prm = np.zeros(e.N_PARAMS, dtype=np.int64)
        self.prm[e.P_PPB] = ppb
        self.prm[e.P_BG_THRESH] = -1 if p.bg_free_fraction is None \
            else int(p.bg_free_fraction * units)
        self.prm[e.P_BG_MIN_INVALID] = int(p.bg_min_invalid_fraction * ppb)
        self.prm[e.P_FG_THRESH] = _threshold(p.fg_free_fraction, units, p.fg_min_free_units)
        self.prm[e.P_FG_PER_PAGE] = int(p.fg_per_page)
        self.prm[e.P_FG_MAX] = p.fg_max_rounds
        self.prm[e.P_GC_DEST] = -1 if p.gc_to_victim_handle else 0
        self.prm[e.P_SHIFT] = ppb.bit_length() - 1
        self._cnt = np.zeros(e.N_COUNTERS, dtype=np.int64)
        self._cnt[e.C_MIN_FREE] = units
        self._h = np.zeros((3, g.handles), dtype=np.int64)
        # Every handle opens a unit at once (FEMU's init).
        for h in range(g.handles):
            e._open(h, self.open_blk, self.open_wp, self.state, self.owner, self.free_q,
                    self.scal, self._cnt)

    # -- operations --------------------------------------------------------------------------
    def pages(self, ops: Ops) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The trace's commands in this device's pages and handles: (kind, first, count,
        handle). A write programs every page it touches; a deallocation unmaps the pages it
        covers whole (FEMU: ``slba / k`` and ``(nlb + 1) / k`` pages, its own rule)."""
        g, p = self.geometry, self.policy
        if g.page_bytes % ops.lba_bytes:
            raise ModelError(f"page_bytes={g.page_bytes} is not a multiple of the trace's "
                             f"LBA size {ops.lba_bytes}")
        k = g.page_bytes // ops.lba_bytes
        slba, nlb, kind = ops.slba, ops.nlb, ops.kind
        first = slba // k
        w, d = kind == e.OP_WRITE, kind == e.OP_DEALLOC
        count = np.zeros_like(slba)
        count[w] = (slba[w] + nlb[w] - 1) // k - first[w] + 1
        if p.dealloc_extra_lba:
            count[d] = (nlb[d] + 1) // k
        else:
            first[d] = -(-slba[d] // k)
            count[d] = (slba[d] + nlb[d]) // k - first[d]
        # A deallocation past the end of the modelled device is clipped (FEMU's map lookup
        # skips those pages too); a write there is an error the engine reports.
        end = np.minimum(first[d] + count[d], g.user_pages)
        first[d] = np.minimum(first[d], g.user_pages)
        count[d] = np.maximum(end - first[d], 0)
        if not g.placement:
            handle = np.zeros(len(slba), dtype=np.int64)
        elif p.handle_from_dspec_any_dtype:
            handle = np.minimum(ops.dspec & 0xFF, g.handles - 1)
        else:
            honoured = (ops.dtype == 2) & (ops.dspec < g.handles)
            handle = np.where(honoured, ops.dspec, 0)
        return kind, first, count, handle.astype(np.int64)

    def replay(self, ops: Ops) -> Counters:
        """Apply a trace; the counters of this replay alone (the state keeps what it did)."""
        kind, first, count, handle = self.pages(ops)
        if not self.deallocations:
            keep = kind != e.OP_DEALLOC
            kind, first, count, handle = kind[keep], first[keep], count[keep], handle[keep]
        return self._run(kind, first, count, handle, ops)

    def uniform_random(self, n_writes: int, seed: int = 1) -> Counters:
        """``n_writes`` single-page writes to uniformly random logical pages (handle 0)."""
        before = self.counters()
        self._cnt[e.C_MIN_FREE] = self.scal[e.S_FREE_COUNT]
        done = e.uniform_random_writes(n_writes, self.geometry.user_pages, seed, self.prm,
                                       self.l2p, self.p2l, self.vpc, self.state, self.owner,
                                       self.open_blk, self.open_wp, self.free_q, self.scal,
                                       self._cnt, self._h[0], self._h[1], self._h[2])
        self._raise_on_error(done, None)
        return self._delta(before)

    def write_sequential(self, first_page: int, n_pages: int, handle: int = 0,
                         pages_per_command: int = 64) -> Counters:
        """Write ``n_pages`` pages in order from ``first_page``, wrapping at the user capacity
        (a ring), as commands of ``pages_per_command`` pages on ``handle``."""
        g = self.geometry
        firsts, counts = [], []
        pos, left = first_page % g.user_pages, n_pages
        while left:  # one pass to the end of the device at a time, then wrap
            run = min(left, g.user_pages - pos)
            starts = np.arange(0, run, pages_per_command, dtype=np.int64)
            firsts.append(pos + starts)
            counts.append(np.minimum(pages_per_command, run - starts))
            pos, left = (pos + run) % g.user_pages, left - run
        firsts, counts = np.concatenate(firsts), np.concatenate(counts)
        return self._run(np.zeros(len(firsts), dtype=np.int8), firsts, counts,
                         np.full(len(firsts), handle, dtype=np.int64), None)

    def _run(self, kind, first, count, handle, ops: Ops | None) -> Counters:
        """The engine over page-level operations; the counters of this run alone."""
        before = self.counters()
        self._cnt[e.C_MIN_FREE] = self.scal[e.S_FREE_COUNT]
        done = e.replay(kind, first, count, handle, self.prm, self.l2p, self.p2l, self.vpc,
                        self.state, self.owner, self.open_blk, self.open_wp, self.free_q,
                        self.scal, self._cnt, self._h[0], self._h[1], self._h[2])
        self._raise_on_error(done, ops)
        return self._delta(before)

    # -- results -----------------------------------------------------------------------------
    def counters(self) -> Counters:
        c = self._cnt
        return Counters(
            host_pages=int(c[e.C_HOST_PAGES]), gc_pages=int(c[e.C_GC_PAGES]),
            erases=int(c[e.C_ERASES]), gc_foreground=int(c[e.C_GC_FOREGROUND]),
            gc_background=int(c[e.C_GC_BACKGROUND]), dealloc_pages=int(c[e.C_DEALLOC_PAGES]),
            dealloc_unmapped_pages=int(c[e.C_DEALLOC_UNMAPPED]),
            requests=int(c[e.C_REQUESTS]), min_free_units=int(c[e.C_MIN_FREE]),
            host_pages_per_handle=self._h[0].tolist(), gc_pages_per_handle=self._h[1].tolist(),
            erases_per_handle=self._h[2].tolist())

    def _delta(self, before: Counters) -> Counters:
        now = self.counters()
        out = _fieldwise(now, before, lambda a, b: a - b)
        out.min_free_units = now.min_free_units
        return out

    def valid_pages(self) -> int:
        return int(self.vpc.sum())

    def free_units(self) -> int:
        return int(self.scal[e.S_FREE_COUNT])

    def units_by_state(self) -> dict:
        return {"free": int((self.state == 0).sum()), "open": int((self.state == 1).sum()),
                "closed": int((self.state == 2).sum())}

    def _raise_on_error(self, done: int, ops: Ops | None) -> None:
        err = int(self.scal[e.S_ERROR])
        if err == 0:
            return
        i = int(self.scal[e.S_ERROR_OP])
        where = f"operation {i}" if ops is None else ops.describe(i)
        g = self.geometry
        self.scal[e.S_ERROR] = 0
        if err == 1:
            raise ModelError(
                f"the modelled device ran out of free reclaim units at {where}: "
                f"{g.physical_units} units of {g.ru_bytes} B with {g.handles} open ones hold "
                f"{self.valid_pages()} valid pages of {g.user_pages}; a real FTL would stall "
                "or fail here. Use a larger over-provisioning or smaller reclaim units")
        raise ModelError(f"{where} addresses pages beyond the modelled user capacity of "
                         f"{g.user_bytes} B: set the model's user capacity to the traced "
                         "namespace's size (--user-bytes)")
