"""Provides `start_lock`: one app instance at a time checks, adopts or launches the daemon.

Two instances starting at once would otherwise both see no server and both launch one. An
exclusive `flock` on `daemon_dir/launch.lock` is held around check-adopt-or-launch; the second
instance waits (polling, so it stays cancellable), then finds the first one's server and adopts
it. The lock goes with the open file, so a killed holder releases it at once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

LOCK_NAME = "launch.lock"


@contextlib.asynccontextmanager
async def start_lock(
    folder: Path,
    sleep: Callable[[float], Awaitable[None]],
    on_wait: Callable[[], None] | None = None,
    interval: float = 0.1,
) -> AsyncIterator[None]:
    """Hold the exclusive lock; `on_wait` is called once when another holder makes us wait."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(folder / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        waited = False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not waited and on_wait is not None:
                    on_wait()
                waited = True
                await sleep(interval)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
