"""Test side of `crashing_server.py`: executable wrappers that run it in a given mode, and what
their starts were."""

from __future__ import annotations

import json
import sys
from pathlib import Path

SCRIPT = Path(__file__).with_name("crashing_server.py")
MINIMAL_GGUF = b"GGUF" + (3).to_bytes(4, "little") + bytes(16)
"""A header with no tensors and no metadata: our reader accepts it (the plan falls back to a
size estimate), and the fake binaries never read it."""


def fake_binary(folder: Path, mode: str) -> Path:
    """`folder/llama-server`: an executable Python script that behaves as `mode` (see
    crashing_server.py). Run by its interpreter, its command line is the argv the daemon gave
    plus the interpreter in front, which the daemon recognises as its own."""
    folder.mkdir(parents=True, exist_ok=True)
    binary = folder / "llama-server"
    binary.write_text(
        f"#!{sys.executable}\n"
        "import runpy, sys\n"
        f"sys.argv = [sys.argv[0], {mode!r}, {str(folder)!r}, *sys.argv[1:]]\n"
        f"runpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n"
    )
    binary.chmod(0o755)
    return binary


def starts(binary: Path) -> list[list[str]]:
    """The argv of every start of `binary`, oldest first."""
    log = binary.parent / "starts.jsonl"
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def repack_flags(binary: Path) -> list[bool]:
    """Per start: was `--no-repack` passed?"""
    return ["--no-repack" in argv for argv in starts(binary)]


def minimal_model(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(MINIMAL_GGUF)
    return path
