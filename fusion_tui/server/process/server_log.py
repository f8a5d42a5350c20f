"""Provides `ServerLog`: the managed server's log file, read and kept bounded by the daemon.

The server appends to it with O_APPEND; we rotate it at each launch (one previous run's log kept
as `.1`), read the current child's lines from the offset where it started, and empty it in place
past a size cap.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

LOG_NAME = "llama-server.log"
LOG_MAX_BYTES = 16 * 1024 * 1024
"""Past this, `trim` moves the log aside (about 5,000 requests at `-lv 4`)."""


class ServerLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def previous(self) -> Path:
        return self.path.with_name(self.path.name + ".1")

    def tail(self, lines: int = 40) -> str:
        """The last `lines` lines ("" when there is no log)."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - 256 * 1024))
                data = fh.read()
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:]) if lines > 0 else ""

    def since(self, offset: int) -> str:
        """The log from byte `offset` on (what the current child wrote)."""
        try:
            with self.path.open("rb") as fh:
                fh.seek(offset)
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def rotate(self) -> None:
        """Keep one previous log (`.1`); the running daemon appends to its own file."""
        if self.path.exists():
            with contextlib.suppress(OSError):
                os.replace(self.path, self.previous)

    def append(self, text: str) -> None:
        with self.path.open("a", encoding="utf-8") as log:
            log.write(text)

    def trim(self, max_bytes: int = LOG_MAX_BYTES) -> bool:
        """If the log is over `max_bytes`, copy it to `.1` and empty it in place; True if trimmed.

        The server opened the file with O_APPEND, so after the truncation its next line simply
        starts the file again. The KV allocation it logged at start-up is already in the record.
        """
        try:
            if self.path.stat().st_size <= max_bytes:
                return False
            with self.path.open("rb") as src, self.previous.open("wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            os.chmod(self.previous, 0o600)
            os.truncate(self.path, 0)
        except OSError:
            return False
        return True
