"""Emulated SSD profiles (femu/*.yaml): loaded and checked when the plan is made."""

from __future__ import annotations

from pathlib import Path

import yaml

from .. import paths
from .cellplan import DeviceProfile
from .config import ConfigError

PROFILE_KEYS = {"emulator", "capacity_gib", "lba_size_bytes", "fdp", "reclaim_unit_size_mib",
                "reclaim_unit_handles", "reclaim_groups", "description", "femu"}
KEY = "testbeds.vm.device_profile"


def load_device_profile(name_or_path: str) -> DeviceProfile:
    """A device profile from femu/ (by name, e.g. ``qemu-fdp-smoke``, or by path)."""
    path = Path(name_or_path)
    if not path.suffix:
        path = paths.FEMU_DIR / f"{name_or_path}.yaml"
    elif not path.is_absolute():
        path = paths.REPO_ROOT / path
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in paths.FEMU_DIR.glob("*.yaml")))
        raise ConfigError(f"{KEY}: {name_or_path!r} not found ({path}); known profiles: "
                          f"{known}")
    profile = yaml.safe_load(path.read_text())
    unknown = set(profile) - PROFILE_KEYS
    missing = {"emulator", "capacity_gib", "lba_size_bytes", "fdp"} - set(profile)
    if unknown or missing:
        raise ConfigError(f"{KEY}: {path}: unknown keys {sorted(unknown)}, missing keys "
                          f"{sorted(missing)}; see femu/README.md")
    if profile["emulator"] not in ("qemu", "femu"):
        raise ConfigError(f"{KEY}: {path}: emulator {profile['emulator']!r} is neither qemu "
                          "nor femu")
    if profile["lba_size_bytes"] not in (512, 4096):
        raise ConfigError(f"{KEY}: {path}: lba_size_bytes {profile['lba_size_bytes']} must be "
                          "512 or 4096")
    if profile["fdp"]:
        for key in ("reclaim_unit_size_mib", "reclaim_unit_handles", "reclaim_groups"):
            if not isinstance(profile.get(key), int) or profile[key] < 1:
                raise ConfigError(f"{KEY}: {path}: FDP needs a positive integer {key}")
    rel = str(path.relative_to(paths.REPO_ROOT)) if path.is_relative_to(paths.REPO_ROOT) \
        else str(path)
    loaded = DeviceProfile(
        name=path.stem, path=rel, emulator=profile["emulator"],
        capacity_gib=profile["capacity_gib"], lba_size_bytes=profile["lba_size_bytes"],
        fdp=bool(profile["fdp"]), reclaim_unit_size_mib=profile.get("reclaim_unit_size_mib"),
        reclaim_unit_handles=profile.get("reclaim_unit_handles"),
        reclaim_groups=profile.get("reclaim_groups"),
        description=profile.get("description", ""),
        femu_options=tuple(f"{k}={v}" for k, v in sorted(profile.get("femu", {}).items())))
    if loaded.emulator == "femu":
        _check_femu(path, loaded)
    return loaded


def _check_femu(path: Path, profile: DeviceProfile) -> None:
    """A FEMU profile's FDP keys must be what its FEMU options build (the artifact's FTL
    decides the geometry: DeviceProfile.femu_geometry), and the handles FEMU reports
    (stream_number) and uses (handle_number) must be the profile's."""
    options = profile.femu()
    if options.get("femu_mode") != 6 or not profile.fdp:
        raise ConfigError(f"{KEY}: {path}: a FEMU profile here is the artifact's FDP FTL: "
                          "fdp: true and femu: {femu_mode: 6}")
    g = profile.femu_geometry()
    built = {"reclaim_unit_size_mib": g["reclaim_unit_mib"],
             "reclaim_groups": g["reclaim_groups"], "reclaim_unit_handles": g["handles"]}
    given = {k: getattr(profile, k) for k in built}
    if given != built or options.get("stream_number") != g["handles"]:
        raise ConfigError(
            f"{KEY}: {path}: its FEMU options build {built} ({g['dies']} dies of "
            f"{g['blocks_per_die']} blocks of {options.get('nand_block_size_mb', 4)} MiB, "
            f"{g['flash_mb']} MiB of flash) and report stream_number "
            f"{options.get('stream_number', 4)} handles, but the profile says {given}: make "
            "them agree (stream_number = handle_number)")
