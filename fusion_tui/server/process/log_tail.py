"""Provides `LogTail`: read the lines appended to a log file since the last call.

Core (no Textual) so the server-log screen and tests share one reader. It starts near the end
of a big file (a budget, not the whole file), holds back a half-written last line, and starts
over when the file is replaced or truncated (the daemon rotates its log on every launch).
"""

from __future__ import annotations

import os
from pathlib import Path


class LogTail:
    """Incremental reader of one log file; blocking I/O, so call it from a thread."""

    def __init__(self, path: Path, *, initial_bytes: int = 256 * 1024, chunk: int = 1 << 20):
        self.path = path
        self.initial_bytes = initial_bytes
        """On first sight of a file, read at most this much of its end."""
        self.chunk = chunk
        """Most bytes read per call, so one call never stalls on a huge burst."""
        self._identity: tuple[int, int] | None = None
        self._offset = 0
        self._partial = b""

    @property
    def exists(self) -> bool:
        return self.path.is_file()

    def read_new(self) -> list[str]:
        """Complete lines appended since the last call ([] when the file is missing)."""
        try:
            with self.path.open("rb") as handle:
                stat = os.fstat(handle.fileno())
                identity = (stat.st_dev, stat.st_ino)
                if identity != self._identity or stat.st_size < self._offset:
                    self._start(identity, stat.st_size)
                handle.seek(self._offset)
                data = handle.read(self.chunk)
        except OSError:
            return []
        self._offset += len(data)
        data = self._partial + data
        cut = data.rfind(b"\n")
        if cut < 0:
            self._partial = data
            return []
        self._partial = data[cut + 1 :]
        text = data[:cut].decode("utf-8", errors="replace")
        return [line.rstrip("\r") for line in text.split("\n")]

    def _start(self, identity: tuple[int, int], size: int) -> None:
        first = self._identity is None
        self._identity = identity
        self._partial = b""
        self._offset = max(0, size - self.initial_bytes) if first else 0
        if self._offset:
            self._skip_partial_first_line()

    def _skip_partial_first_line(self) -> None:
        """Starting mid-file lands mid-line: skip to the next line start."""
        with self.path.open("rb") as handle:
            handle.seek(self._offset - 1)
            head = handle.read(min(self.initial_bytes, 64 * 1024) + 1)
        newline = head.find(b"\n")
        if newline >= 0:
            self._offset += newline
