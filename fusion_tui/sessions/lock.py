"""Provides the session lock: one writer per session file, across processes.

Why: two app instances on the same session would each save their own copy, and the last save
would silently drop the other's turns. The app that opens a session to write claims it: a POSIX
record lock (`fcntl.lockf`) on a sidecar `.<id>.lock` beside the file. The kernel drops it when
the process ends, also by SIGKILL or a crash, so a stale lock cannot exist. The holder's pid is
written into the sidecar so the refusal can name it.

POSIX locks belong to the process, not to a file handle: two stores in one process share a
claim (tests, the TUI's several backends), a forked child does not inherit it, and closing any
handle on the sidecar drops the lock. So each sidecar is opened once per process (`_HELD`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from fusion_tui.sessions.errors import SessionLocked

_HELD: dict[Path, int] = {}
"""Sidecars this process has locked → their open descriptor (one per path, never two)."""


def lock_path(session_file: Path) -> Path:
    return session_file.with_name(f".{session_file.stem}.lock")


def _holder(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def claim(session_file: Path, session_id: str) -> None:
    """Hold the session for this process (idempotent); `SessionLocked` when another holds it."""
    path = lock_path(session_file)
    if path in _HELD:
        return
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise SessionLocked(session_id, _holder(path)) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _HELD[path] = fd


def held_elsewhere(session_file: Path) -> int | None:
    """The pid of another process holding the session (0 if unknown), or None when free."""
    path = lock_path(session_file)
    if path in _HELD or not path.exists():
        return None
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return _holder(path) or 0
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def release(session_file: Path) -> None:
    """Let the session go (also done by the kernel when the process ends)."""
    fd = _HELD.pop(lock_path(session_file), None)
    if fd is not None:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)
