"""The device roofline: how fast the guest's NVMe namespace takes a plain sequential write.

Runs inside the guest, as root, after a cell's workload: one fio job writes the namespace
sequentially through NVMe passthru (``ioengine=io_uring_cmd`` on the ``/dev/ngXnY`` char
device, the path SlimIO itself uses), optionally into one FDP placement id. Its bandwidth is
the ceiling that the cell's own write rate is compared with. Standard library only: the
guest has python3 and nothing else from PyPI except redis-py.

FDP placement in fio (checked in fio 3.41's source, the pinned testbed/box/fio.yaml):
``fdp=1`` tags writes with the FDP directive, and ``fdp_pli`` (alias of ``plids``) lists
*indexes into the namespace's reclaim unit handle status list* (``nvme fdp status``, the
I/O Management Receive RUH status descriptors, in the device's order), not placement ids.
``init_ruh_info`` (``dataplacement.c`` line 43) rejects an index >= the number of
descriptors (line 101: "PID index %d must be smaller than %d") and keeps
``tmp->plis[i] = ruhs->plis[td->o.dp_ids[i]]`` (line 131), where ``engines/io_uring.c``
``fio_ioring_cmd_fetch_ruhs`` fills ``plis[i]`` with descriptor i's ``pid`` (line 1940);
``dp_fill_dspec_data`` (``dataplacement.c`` line 218) puts that pid in the write's DSPEC
(cdw13 bits 31:16, ``engines/nvme.c`` line 386). So :func:`fio_command`
takes the placement id the caller wants plus the namespace's placement ids in status-list
order, and passes fio the id's index.
"""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

from . import layout

# A passthru char device: /dev/ng<controller>n<namespace>.
# fio's passthru engine. pi_act defaults to 1, and fio then sets PRACT in every command's
# CDW12 whatever the namespace's format; ours carry no protection information, where QEMU
# ignores the bit and FEMU rejects the command (Invalid Field).
PASSTHRU_ENGINE = ("--ioengine=io_uring_cmd", "--cmd_type=nvme", "--pi_act=0")
NVME_CHAR_DEVICE = re.compile(r"/dev/ng\d+n\d+")
# Generous under TCG (~10x slower than a real machine); the job itself is bounded by size.
DEFAULT_TIMEOUT_S = 1800
JOB_NAME = "roofline"


class RooflineError(RuntimeError):
    """fio could not run the roofline job."""


def _positive(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return value


def _check_job(size_bytes: int, block_size_bytes: int, iodepth: int) -> None:
    _positive("size_bytes", size_bytes)
    _positive("block_size_bytes", block_size_bytes)
    _positive("iodepth", iodepth)
    if size_bytes % block_size_bytes:
        raise ValueError(f"size_bytes {size_bytes} is not a multiple of block_size_bytes "
                         f"{block_size_bytes}: fio would leave the tail unwritten")


def placement_index(placement_id: int, placement_ids: Sequence[int]) -> int:
    """The index fio's ``fdp_pli`` needs for ``placement_id``: its position in
    ``placement_ids``, the namespace's placement ids in RUH status order."""
    ids = list(placement_ids)
    if placement_id not in ids:
        raise ValueError(f"placement id {placement_id!r} is not one the namespace offers "
                         f"{ids} (nvme fdp status, in its order): choose one of those")
    return ids.index(placement_id)


def fio_command(fio_bin: str, device: str, *, size_bytes: int, block_size_bytes: int,
                iodepth: int, placement_id: int | None, output_json: str,
                placement_ids: Sequence[int] = ()) -> list[str]:
    """The fio command line of the roofline job: one sequential write of ``size_bytes`` from
    offset 0 of ``device`` in ``block_size_bytes`` blocks at queue depth ``iodepth``, through
    NVMe passthru, with fio's JSON report written to ``output_json``.

    ``device`` must be an NVMe passthru char device name (``/dev/ngXnY``). With
    ``placement_id`` set, every write carries that FDP placement id: ``placement_ids`` must
    then be the namespace's placement ids in RUH status order (fio wants an index into that
    list, see the module docstring). ``size_bytes`` must be a multiple of
    ``block_size_bytes``. Raises ValueError naming the bad value.
    """
    if not isinstance(device, str) or not NVME_CHAR_DEVICE.fullmatch(device):
        raise ValueError(f"device {device!r} is not an NVMe passthru char device "
                         f"(/dev/ngXnY, e.g. /dev/ng0n1): io_uring_cmd needs one")
    _check_job(size_bytes, block_size_bytes, iodepth)
    cmd = [fio_bin, f"--name={JOB_NAME}", f"--filename={device}", *PASSTHRU_ENGINE,
           "--rw=write", f"--bs={block_size_bytes}",
           f"--iodepth={iodepth}", f"--size={size_bytes}", "--offset=0", "--numjobs=1",
           "--group_reporting", "--output-format=json", f"--output={output_json}"]
    if placement_id is not None:
        if not placement_ids:
            raise ValueError(f"placement id {placement_id!r} needs placement_ids (the "
                             f"namespace's ids in `nvme fdp status` order): fio's fdp_pli "
                             f"takes an index into that list, not an id")
        cmd += ["--fdp=1", f"--fdp_pli={placement_index(placement_id, placement_ids)}"]
    return cmd


def _json_object(text: str) -> dict:
    """fio's JSON report; fio may print notes on lines before it."""
    start = text.find("\n{") + 1 if not text.lstrip().startswith("{") else 0
    try:
        data = json.loads(text[start:])
    except ValueError as exc:
        raise ValueError(f"fio output is not JSON ({exc}): run fio with "
                         f"--output-format=json") from None
    if not isinstance(data, dict):
        raise ValueError(f"fio output is a JSON {type(data).__name__}, not an object")
    return data


def _option_int(options: dict, key: str) -> int:
    value = options.get(key)
    if value is None or not re.fullmatch(r"\d+", str(value)):
        raise ValueError(f"fio job option {key}={value!r} is not a plain integer: parse "
                         f"reads the byte counts and depths that fio_command writes")
    return int(value)


def parse(fio_json_text: str, *, placement_ids: Sequence[int] = ()) -> dict:
    """Summarise fio's JSON report of the roofline job.

    Returns ``seq_write_bytes`` (jobs[0].write.io_bytes), ``seq_write_runtime_s``
    (write.runtime, which fio reports in ms), ``seq_write_mb_s`` (fio's write.bw_bytes in
    10^6 bytes/s), ``seq_write_iops`` (write.iops), ``fio_version``, ``block_size_bytes``
    and ``iodepth`` (the job options), ``placement_id`` (None without FDP) and
    ``fdp_placement_index`` (fio's fdp_pli, None without FDP). A job with FDP needs
    ``placement_ids`` (RUH status order) to turn fio's index back into the id.
    Raises ValueError on a report of more or fewer than one job, a job with an error, or a
    job that wrote nothing or took no measurable time.
    """
    data = _json_object(fio_json_text)
    jobs = data.get("jobs")
    if not isinstance(jobs, list) or len(jobs) != 1:
        raise ValueError(f"fio report has {len(jobs) if isinstance(jobs, list) else 'no'} "
                         f"jobs; the roofline runs exactly one (numjobs=1, group_reporting)")
    job = jobs[0]
    if job.get("error", 0) != 0:
        raise ValueError(f"fio job {job.get('jobname')!r} failed with error "
                         f"{job['error']} ({os.strerror(job['error'])}); see fio's stderr")
    write = job.get("write") or {}
    io_bytes, runtime_ms = int(write.get("io_bytes", 0)), int(write.get("runtime", 0))
    if io_bytes <= 0:
        raise ValueError(f"fio job {job.get('jobname')!r} wrote 0 bytes: not a write job, "
                         f"or the device rejected every write")
    if runtime_ms <= 0:
        raise ValueError(f"fio job {job.get('jobname')!r} wrote {io_bytes} bytes in 0 ms: "
                         f"too short to time, raise size_bytes")
    options = job.get("job options", {})
    index = None
    placement_id = None
    fdp = str(options.get("fdp", options.get("dataplacement", "0"))) in ("1", "fdp")
    if fdp:
        index_text = options.get("fdp_pli", options.get("plids"))
        if index_text is None or not re.fullmatch(r"\d+", str(index_text)):
            raise ValueError(f"fio job used FDP with fdp_pli={index_text!r}: the roofline "
                             f"writes to exactly one placement index")
        index = int(index_text)
        ids = list(placement_ids)
        if not ids:
            raise ValueError(f"fio job wrote to FDP placement index {index}: pass "
                             f"placement_ids (the namespace's ids in `nvme fdp status` "
                             f"order) to name its placement id")
        if index >= len(ids):
            raise ValueError(f"fio's placement index {index} is outside placement_ids {ids}")
        placement_id = ids[index]
    return {
        "seq_write_bytes": io_bytes,
        "seq_write_runtime_s": runtime_ms / 1000,
        "seq_write_mb_s": int(write["bw_bytes"]) / 1e6,
        "seq_write_iops": float(write["iops"]),
        "fio_version": str(data.get("fio version", "unknown")),
        "block_size_bytes": _option_int(options, "bs"),
        "iodepth": _option_int(options, "iodepth"),
        "placement_id": placement_id,
        "fdp_placement_index": index,
    }


def run(fio_bin: str, device: str, out_dir: str | Path, *, size_bytes: int,
        block_size_bytes: int, iodepth: int, placement_id: int | None = None,
        placement_ids: Sequence[int] = (), timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """Run the roofline job on ``device`` and return its summary (:func:`parse`).

    Writes ``<out_dir>/fio-roofline.json`` (fio's report) and ``<out_dir>/roofline.json``
    (the summary plus ``command``, the exact command line, and ``device``). The job
    OVERWRITES the first ``size_bytes`` of the namespace: run it where that data no longer
    matters. Raises ValueError on bad arguments, RooflineError when fio fails or times out.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = out / layout.RAW_FIO_ROOFLINE
    cmd = fio_command(fio_bin, device, size_bytes=size_bytes,
                      block_size_bytes=block_size_bytes, iodepth=iodepth,
                      placement_id=placement_id, output_json=str(report),
                      placement_ids=placement_ids)
    try:
        mode = os.stat(device).st_mode
    except OSError as exc:
        raise RooflineError(f"device {device}: {exc.strerror}; is the namespace there "
                            f"(nvme list) and is this the guest?") from None
    if not stat.S_ISCHR(mode):
        raise RooflineError(f"device {device} is not a character device: use the "
                            f"namespace's passthru node /dev/ngXnY")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise RooflineError(f"fio did not finish in {timeout_s} s: lower size_bytes or raise "
                            f"timeout_s ({' '.join(cmd)})") from None
    except OSError as exc:
        raise RooflineError(f"cannot run {fio_bin}: {exc.strerror}; is it the box's fio "
                            f"({layout.GUEST_FIO})?") from None
    if proc.returncode != 0:
        raise RooflineError(f"fio exited {proc.returncode}: "
                            f"{(proc.stderr or proc.stdout).strip()[-500:]} "
                            f"(command: {' '.join(cmd)})")
    summary = parse(report.read_text(), placement_ids=placement_ids)
    record = dict(summary, device=device, command=cmd)
    (out / layout.RAW_ROOFLINE).write_text(json.dumps(record, indent=2) + "\n")
    return summary


# The bench's device rates (slimio-repro bench): a sequential read or write of SlimIO's own
# device, the same target SlimIO's recovery reads and its snapshot writes: the passthru char
# device in a VM (io_uring_cmd), the device file on the bare testbed (io_uring, O_DIRECT).
RATE_JOB_NAME = "device-rate"


def rate_command(fio_bin: str, target: str, rw: str, *, size_bytes: int,
                 block_size_bytes: int, iodepth: int, output_json: str,
                 durable: bool = False) -> list[str]:
    """One sequential ``rw`` ("read" or "write") job of ``size_bytes`` from offset 0 of
    ``target`` in ``block_size_bytes`` blocks at ``iodepth``; fio's JSON report to
    ``output_json``. ``durable`` writes each block durably, as SlimIO writes an Always-Log
    batch: with FUA through passthru, with O_DSYNC on a file (O_DIRECT). Raises ValueError
    naming a bad value."""
    if rw not in ("read", "write"):
        raise ValueError(f"rw {rw!r}: the device rates are 'read' or 'write'")
    if durable and rw != "write":
        raise ValueError(f"rw {rw!r}: only writes are durable")
    _check_job(size_bytes, block_size_bytes, iodepth)
    passthru = bool(NVME_CHAR_DEVICE.fullmatch(target))
    engine = (list(PASSTHRU_ENGINE)
              if passthru else ["--ioengine=io_uring", "--direct=1"])
    if durable:
        engine.append("--writefua=1" if passthru else "--sync=dsync")
    return [fio_bin, f"--name={RATE_JOB_NAME}", f"--filename={target}", *engine,
            f"--rw={rw}", f"--bs={block_size_bytes}", f"--iodepth={iodepth}",
            f"--size={size_bytes}", "--offset=0", "--numjobs=1", "--group_reporting",
            "--output-format=json", f"--output={output_json}"]


def parse_rate(fio_json_text: str, rw: str) -> dict:
    """``bytes``, ``runtime_s``, ``mb_s`` (10^6 bytes/s) and ``lat_mean_ms`` (a command's
    mean latency, submission to completion) of the one ``rw`` job of a :func:`rate_command`
    report. Raises ValueError on anything else."""
    data = _json_object(fio_json_text)
    jobs = data.get("jobs")
    if not isinstance(jobs, list) or len(jobs) != 1:
        raise ValueError("fio report has not exactly one job")
    job = jobs[0]
    if job.get("error", 0) != 0:
        raise ValueError(f"fio job failed with error {job['error']} "
                         f"({os.strerror(job['error'])})")
    part = job.get(rw) or {}
    io_bytes, runtime_ms = int(part.get("io_bytes", 0)), int(part.get("runtime", 0))
    if io_bytes <= 0 or runtime_ms <= 0:
        raise ValueError(f"fio's {rw} job moved {io_bytes} bytes in {runtime_ms} ms: "
                         "nothing to take a rate from")
    return {"bytes": io_bytes, "runtime_s": runtime_ms / 1000,
            "mb_s": int(part["bw_bytes"]) / 1e6,
            "lat_mean_ms": float((part.get("lat_ns") or {}).get("mean", 0)) / 1e6 or None,
            "fio_version": str(data.get("fio version", "unknown"))}


def measure_rate(fio_bin: str, target: str, rw: str, out_json: Path, *, size_bytes: int,
                 block_size_bytes: int, iodepth: int, durable: bool = False,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> dict:
    """Run :func:`rate_command` and return :func:`parse_rate` plus its ``command``."""
    cmd = rate_command(fio_bin, target, rw, size_bytes=size_bytes,
                       block_size_bytes=block_size_bytes, iodepth=iodepth,
                       output_json=str(out_json), durable=durable)
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RooflineError(f"`{' '.join(cmd)}` did not run: {exc}") from None
    if proc.returncode != 0:
        raise RooflineError(f"`{' '.join(cmd)}` failed ({proc.returncode}): "
                            f"{proc.stderr.strip()[-500:]}")
    return {**parse_rate(out_json.read_text(), rw), "command": cmd}
