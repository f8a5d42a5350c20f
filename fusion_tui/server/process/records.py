"""Provides the managed daemon's files: the pid file, the pid-stamped launch record, atomic writes.

Layout under `AppPaths.daemon_dir`:

* `llama-server.pid` — the pid of the managed server (plain text).
* `launch-<pid>.json` — `LaunchRecord`: how that process was started and what it reported.
* `probe.json` — the throughput probe (see `probe.py`).
* `cpu-quirks.json` — start-up choices kept per binary and CPU (see `cpu_quirks.py`).
* `launch.lock` — held around check-adopt-or-launch (see `start_lock.py`).

Stamping the record with the pid means a record can never be mistaken for another process's, and
the pid's command line is compared with the recorded argv before we ever signal it.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fusion_tui.atomic import atomic_write

PID_FILE = "llama-server.pid"
RECORD_VERSION = 1


def write_atomic(path: Path, text: str, mode: int = 0o600) -> None:
    """Write `text` to `path` atomically: readers never see half a file."""
    atomic_write(path, text, mode=mode)


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def read_json(path: Path) -> Any | None:
    """The JSON in `path`, or None when it is missing or unreadable (a stale or torn file)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@dataclass
class LaunchRecord:
    """What we know about one managed llama-server process."""

    pid: int
    argv: list[str]
    model_path: str
    host: str
    port: int
    url: str
    started_at: float
    """Unix time of the launch."""
    ctx: int
    """Total context passed as `-c`."""
    parallel: int
    log_path: str
    n_ctx_slot: int = 0
    """Per-slot context as the server reports it in /props (0 until it is ready)."""
    spec: dict[str, Any] = field(default_factory=dict)
    fit: dict[str, Any] | None = None
    kv_estimate_bytes: int | None = None
    kv_allocated_bytes: int | None = None
    owner_pid: int = 0
    """The app process that stops this server when it quits (0: left running on purpose, as
    `fusion-tui launch` does)."""
    owner_start: str = ""
    """That process's start time (/proc/PID/stat), so a reused pid is not taken for the owner."""
    repack_off: bool = False
    """Started with `--no-repack` because this CPU traps on the repacked kernels."""
    note: str = ""
    """Said on the ready line and by `status`, e.g. "repacking off: this CPU traps on AMX"."""
    speculative: dict[str, Any] | None = None
    """What speculative decoding runs and why (`speculative.SpecDecision.to_json`)."""
    threads: str = ""
    """How `threads: auto` chose `-t`, and why ("-t 2: the machine was quiet at launch ...")."""
    version: int = RECORD_VERSION

    @property
    def binary(self) -> str:
        return self.argv[0] if self.argv else ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> LaunchRecord | None:
        """The record in `data`, or None when it is not a usable record."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                pid=int(data["pid"]),
                argv=[str(a) for a in data["argv"]],
                model_path=str(data["model_path"]),
                host=str(data["host"]),
                port=int(data["port"]),
                url=str(data["url"]),
                started_at=float(data["started_at"]),
                ctx=int(data["ctx"]),
                parallel=int(data["parallel"]),
                log_path=str(data["log_path"]),
                n_ctx_slot=int(data.get("n_ctx_slot") or 0),
                spec=dict(data.get("spec") or {}),
                fit=data.get("fit") if isinstance(data.get("fit"), dict) else None,
                kv_estimate_bytes=_opt_int(data.get("kv_estimate_bytes")),
                kv_allocated_bytes=_opt_int(data.get("kv_allocated_bytes")),
                owner_pid=int(data.get("owner_pid") or 0),
                owner_start=str(data.get("owner_start") or ""),
                repack_off=bool(data.get("repack_off", False)),
                note=str(data.get("note") or ""),
                speculative=(
                    data.get("speculative") if isinstance(data.get("speculative"), dict) else None
                ),
                threads=str(data.get("threads") or ""),
                version=int(data.get("version", RECORD_VERSION)),
            )
        except (KeyError, TypeError, ValueError):
            return None


def _opt_int(value: Any) -> int | None:
    return None if value is None else int(value)


class DaemonFiles:
    """Reads and writes the pid file and launch records in one folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def pid_file(self) -> Path:
        return self.folder / PID_FILE

    def record_file(self, pid: int) -> Path:
        return self.folder / f"launch-{pid}.json"

    def read_pid(self) -> int | None:
        try:
            text = self.pid_file.read_text(encoding="utf-8").strip()
        except OSError:
            return None
        return int(text) if text.isdigit() and int(text) > 1 else None

    def read_record(self, pid: int) -> LaunchRecord | None:
        record = LaunchRecord.from_json(read_json(self.record_file(pid)))
        return record if record is not None and record.pid == pid else None

    def write(self, record: LaunchRecord) -> None:
        """Write the record first, then point the pid file at it."""
        write_json(self.record_file(record.pid), record.to_json())
        write_atomic(self.pid_file, f"{record.pid}\n")

    def clear(self, pid: int | None) -> None:
        """Remove the pid file (if it names `pid`, or always when `pid` is None) and the record."""
        current = self.read_pid()
        if pid is None or current == pid:
            with contextlib.suppress(OSError):
                self.pid_file.unlink()
        if pid is not None:
            with contextlib.suppress(OSError):
                self.record_file(pid).unlink()
