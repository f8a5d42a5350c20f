"""Provides `atomic_write`: the one way fusion-tui replaces a file the user cares about.

Temp file in the same folder, every byte written, fsync, rename, fsync of the folder: a reader
(or a crash) sees the old bytes or the new ones, never half a file. Sessions, config, launch
records, slot tags and the models list all go through it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def _write_all(fd: int, data: bytes) -> None:
    """Write every byte (a seam tests replace to simulate a full disk)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def fsync_dir(directory: Path) -> None:
    """Make a rename in `directory` durable; a platform that cannot open folders is skipped."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes | str, *, mode: int = 0o600) -> None:
    """Replace `path` with `data` (text is UTF-8), creating its folder (0700) if needed."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    tmp = Path(tmp_name)
    try:
        try:
            os.fchmod(fd, mode)
            _write_all(fd, raw)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)
