"""tests/models.py: the chunks are concatenated once, checked against the shipped SHA-256, reused
through the stamp, and a wrong hash leaves no file behind."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests import models


def _chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, digest: str | None = None) -> bytes:
    parts = [bytes([i]) * (1000 + i) for i in range(4)]
    paths = []
    for i, data in enumerate(parts):
        p = tmp_path / "site" / f"{models.GEMMA3_FILE}.part{i:02d}"
        p.parent.mkdir(exist_ok=True)
        p.write_bytes(data)
        paths.append(p)
    whole = b"".join(parts)
    monkeypatch.setattr(models, "gemma3_chunks", lambda: paths)
    want = digest or hashlib.sha256(whole).hexdigest()
    monkeypatch.setattr(models, "gemma3_expected_sha256", lambda: want)
    return whole


def test_assembles_verifies_and_reuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    whole = _chunks(tmp_path, monkeypatch)
    path = models.assemble_gemma3(tmp_path / "cache")
    assert path is not None and path.read_bytes() == whole
    mtime = path.stat().st_mtime_ns
    again = models.assemble_gemma3(tmp_path / "cache")  # the stamp matches: not rewritten
    assert again == path and path.stat().st_mtime_ns == mtime
    path.write_bytes(whole[:-1])  # damaged after the stamp: assembled afresh
    assert models.assemble_gemma3(tmp_path / "cache") == path and path.read_bytes() == whole


def test_wrong_hash_is_an_error_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _chunks(tmp_path, monkeypatch, digest="0" * 64)
    with pytest.raises(models.ModelAssemblyError, match="reinstall"):
        models.assemble_gemma3(tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()) == []


def test_not_installed_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "gemma3_chunks", lambda: None)
    assert models.assemble_gemma3(tmp_path) is None
