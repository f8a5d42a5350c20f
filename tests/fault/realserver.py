"""Helpers of the fault tier for runs against the real llama-server (small, 2 threads, loopback).

Processes are found through /proc so a test can prove that nothing it started is left running.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from fusion_tui.config import Settings
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.pids import is_alive

SMALL = {"parallel": 2, "ctx": 4096, "threads": 2}


def small_spec(model: Path, **kw: object) -> LaunchSpec:
    """Two slots of 2048 tokens (room for twenty cut turns), two threads, no warm-up run: cheap
    enough to start twenty times (`-fit off`: the fit step alone doubles start-up)."""
    args: dict[str, object] = {**SMALL, "extra_args": ("--no-warmup", "-fit", "off"), **kw}
    return LaunchSpec(model=model, **args)  # type: ignore[arg-type]


def small_settings(
    binary: Path, model: Path, *, max_tokens: int = 200, parallel: int = 2, ctx: int = 4096
) -> Settings:
    """Settings for `LocalBackend` that adopt a daemon started with `small_spec`."""
    base = Settings()
    managed = replace(base.local_models.managed, parallel=parallel, ctx=ctx, threads=2)
    local = replace(base.local_models, model=str(model), managed=managed)
    return replace(
        base,
        server=replace(base.server, binary=str(binary)),
        local_models=local,
        llm=replace(base.llm, max_tokens=max_tokens, temperature=0.0),
    )


def children_of(pid: int) -> list[int]:
    """Live descendants of `pid` (any depth), from /proc/*/stat."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[-1].split()
        parents[int(entry.name)] = int(fields[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and is_alive(child):
                found.append(child)
                frontier.append(child)
    return found


def processes_with(needle: str | Path) -> list[int]:
    """Live pids whose command line contains `needle`."""
    raw = str(needle).encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and is_alive(int(entry.name)):
            try:
                if raw in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def listening_addresses(pid: int) -> list[tuple[str, int]]:
    """(ip, port) of every TCP socket `pid` listens on, read from /proc/net/tcp{,6}."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found: list[tuple[str, int]] = []
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            cols = line.split()
            local, state, inode = cols[1], cols[3], cols[9]
            if state != "0A" or inode not in inodes:  # 0A = LISTEN
                continue
            addr_hex, port_hex = local.split(":")
            found.append((_ip(addr_hex, width), int(port_hex, 16)))
    return found


def _ip(hex_addr: str, width: int) -> str:
    if width == 8:  # IPv4, little-endian 32-bit word
        return ".".join(str(b) for b in bytes.fromhex(hex_addr)[::-1])
    words = [bytes.fromhex(hex_addr[i : i + 8])[::-1] for i in range(0, 32, 8)]
    raw = b"".join(words)
    if raw == bytes(16):
        return "::"
    if raw[:12] == bytes(10) + b"\xff\xff":
        return ".".join(str(b) for b in raw[12:])
    return raw.hex(":", 2)
