"""Provides `available_memory`: the bytes a model launch may use (RAM, or configured GPU memory).

On a CPU machine that is `MemAvailable` from /proc/meminfo. GPU memory is not probed (no vendor
tools at run time); the user's configured figure is taken as is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MEMINFO = Path("/proc/meminfo")


@dataclass(frozen=True)
class Memory:
    """Available bytes and where the figure came from (`ram`, `gpu-config`, `config`)."""

    available_bytes: int
    source: str


def read_meminfo_available(text: str) -> int | None:
    """MemAvailable in bytes from /proc/meminfo text (kB values)."""
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def available_memory(
    gpu_bytes: int | None = None,
    override_bytes: int | None = None,
    meminfo: Path = MEMINFO,
) -> Memory:
    """Configured override, else configured GPU memory, else RAM MemAvailable (0 if unknown)."""
    if override_bytes is not None:
        return Memory(max(0, override_bytes), "config")
    if gpu_bytes is not None:
        return Memory(max(0, gpu_bytes), "gpu-config")
    try:
        value = read_meminfo_available(meminfo.read_text())
    except OSError:
        value = None
    return Memory(value or 0, "ram" if value else "unknown")
