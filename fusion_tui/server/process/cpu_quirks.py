"""Provides the remembered start-up choice for one llama-server binary on one machine.

Some CPUs advertise instructions they trap on (a Firecracker guest advertising AMX died of SIGILL
in ggml's repacked AMX kernel). When a relaunch with weight repacking off (`--no-repack`) works,
the choice is kept in `daemon_dir/cpu-quirks.json` under a key made of the binary (resolved
path, size, mtime) and the CPU (model name and flags from /proc/cpuinfo), so later launches go
straight to the working flags and a rebuilt binary or another machine starts afresh.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusion_tui.server.process.records import read_json, write_json

QUIRKS_FILE = "cpu-quirks.json"
REPACK_OFF_FLAGS = ("--no-repack", "-nr")
REPACK_OFF_ARG = "--no-repack"
NOTE_AMX = "repacking off: this CPU traps on AMX"
NOTE_OTHER = "repacking off: this CPU traps on the repacked weight kernels"
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class CpuInfo:
    model: str
    flags: tuple[str, ...]

    @property
    def advertises_amx(self) -> bool:
        return any(flag.startswith("amx") for flag in self.flags)


def read_cpu(path: Path = CPUINFO) -> CpuInfo:
    """The first processor's model name and flags ("" and () where /proc/cpuinfo is absent)."""
    model = ""
    flags: tuple[str, ...] = ()
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return CpuInfo(model, flags)
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = tuple(sorted(value.split()))
        if model and flags:
            break
    return CpuInfo(model, flags)


def repack_note(cpu: CpuInfo) -> str:
    return NOTE_AMX if cpu.advertises_amx else NOTE_OTHER


def machine_key(binary: Path, cpu: CpuInfo) -> str:
    """A stable key for (this binary file, this CPU)."""
    resolved = binary.expanduser().resolve()
    try:
        st = resolved.stat()
        stamp = [st.st_size, st.st_mtime_ns]
    except OSError:
        stamp = [0, 0]
    ident = json.dumps([str(resolved), *stamp, cpu.model, " ".join(cpu.flags)])
    return hashlib.sha256(ident.encode()).hexdigest()[:24]


def has_repack_off(argv: list[str] | tuple[str, ...]) -> bool:
    return any(arg in REPACK_OFF_FLAGS for arg in argv)


class CpuQuirks:
    """Reads and writes the remembered choices in one folder."""

    def __init__(self, folder: Path, cpuinfo: Path = CPUINFO) -> None:
        self.path = folder / QUIRKS_FILE
        self.cpuinfo = cpuinfo

    def _load(self) -> dict[str, Any]:
        data = read_json(self.path)
        return data if isinstance(data, dict) else {}

    def repack_off(self, binary: Path) -> str | None:
        """The note to show when this binary on this CPU must run with repacking off."""
        entry = self._load().get(machine_key(binary, read_cpu(self.cpuinfo)))
        if isinstance(entry, dict) and entry.get("repack") is False:
            return str(entry.get("note") or NOTE_OTHER)
        return None

    def remember_repack_off(self, binary: Path, reason: str) -> str:
        """Keep the choice; returns the note for the ready line and `status`."""
        cpu = read_cpu(self.cpuinfo)
        note = repack_note(cpu)
        data = self._load()
        data[machine_key(binary, cpu)] = {
            "binary": str(binary.expanduser().resolve()),
            "cpu": cpu.model,
            "repack": False,
            "note": note,
            "reason": reason,
            "time": time.time(),
        }
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_json(self.path, data)
        return note
