"""Provides process checks for the managed daemon: is a pid alive, and is it really ours?

A pid file can outlive its process, and the pid can be reused by anything. Before we adopt or
signal a pid we compare its command line with the argv we recorded when we started it; a
mismatch means a foreign process, which we never touch.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from pathlib import Path


def is_alive(pid: int) -> bool:
    """True when `pid` exists and is not a zombie."""
    if pid <= 1:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError):
        text = stat.read_text()
        state = text.rsplit(")", 1)[-1].split()[0]
        return state not in ("Z", "X")
    return True


def start_time(pid: int) -> str:
    """When `pid` started (field 22 of /proc/PID/stat, clock ticks since boot); "" if unknown."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = text.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


def owner_alive(pid: int, started: str) -> bool:
    """True when the app process `pid` that started at `started` still runs."""
    if pid <= 1 or not is_alive(pid):
        return False
    return not started or start_time(pid) in ("", started)


def cmdline(pid: int) -> list[str] | None:
    """The argv of `pid` (None when it is gone or unreadable)."""
    proc = Path(f"/proc/{pid}/cmdline")
    if proc.parent.parent.is_dir() and Path("/proc/self").exists():
        try:
            raw = proc.read_bytes()
        except OSError:
            return None
        if not raw:
            return None  # zombie or kernel thread
        return [part.decode("utf-8", "surrogateescape") for part in raw.rstrip(b"\0").split(b"\0")]
    try:  # no /proc (macOS): ps gives the command joined by spaces
        out = subprocess.run(
            ["ps", "-p", str(pid), "-o", "command="],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.split(" ") if out else None


def is_ours(pid: int, argv: list[str]) -> bool:
    """True when `pid` is alive and runs exactly the recorded `argv`."""
    if not argv or not is_alive(pid):
        return False
    actual = cmdline(pid)
    if actual is None:
        return False
    if actual == argv or actual[1:] == argv:  # a script binary runs under its interpreter
        return True
    # ps joins arguments with spaces, so compare the joined forms as a fallback
    return " ".join(actual) == " ".join(argv)


def signal_process(pid: int, sig: signal.Signals) -> bool:
    """Send `sig` to the process group led by `pid` (our daemon leads its own session), else to
    `pid` alone. False when it is already gone."""
    try:
        if os.getpgid(pid) == pid:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True
