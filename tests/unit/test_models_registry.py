"""ModelsRegistry: recent models, per-model prefix-reuse profile, atomic and forgiving file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fusion_tui.models.registry import ModelEntry, ModelsRegistry, model_key


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def registry(tmp_path: Path, limit: int = 12) -> ModelsRegistry:
    return ModelsRegistry(tmp_path / "data" / "models.json", limit=limit, clock=Clock())


def gguf(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.write_bytes(b"GGUF")
    return path


def test_remember_orders_recent_first_and_keeps_the_profile(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    a, b = gguf(tmp_path, "a.gguf"), gguf(tmp_path, "b.gguf")
    reg.remember(a, parallel=4, ctx=8192, prefix_reuse="full", architecture="llama")
    reg.remember(b, parallel=2, prefix_reuse="none")
    assert [e.name for e in reg.recent()] == ["b.gguf", "a.gguf"]
    again = reg.remember(a, parallel=8)  # other fields kept from the last launch
    assert (again.parallel, again.ctx, again.prefix_reuse, again.architecture) == (
        8, 8192, "full", "llama",
    )  # fmt: skip
    assert [e.name for e in reg.recent()] == ["a.gguf", "b.gguf"]
    assert reg.prefix_reuse(a) == "full" and reg.prefix_reuse(b) == "none"
    assert reg.prefix_reuse(tmp_path / "never.gguf") is None


def test_keyed_by_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = registry(tmp_path)
    gguf(tmp_path, "m.gguf")
    monkeypatch.chdir(tmp_path)
    reg.remember("m.gguf", parallel=1)
    assert reg.entries()[0].path == str(tmp_path / "m.gguf") == model_key("m.gguf")
    assert reg.get(tmp_path / "m.gguf") is not None


def test_missing_files_are_hidden_from_recent_but_kept(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    gone = gguf(tmp_path, "gone.gguf")
    reg.remember(gone, prefix_reuse="none")
    gone.unlink()
    assert reg.recent() == []
    assert [e.name for e in reg.recent(existing_only=False)] == ["gone.gguf"]
    assert reg.prefix_reuse(gone) == "none"


def test_limit_drops_the_least_recent(tmp_path: Path) -> None:
    reg = registry(tmp_path, limit=3)
    for i in range(5):
        reg.remember(gguf(tmp_path, f"m{i}.gguf"))
    assert [e.name for e in reg.entries()] == ["m4.gguf", "m3.gguf", "m2.gguf"]


def test_set_prefix_reuse_does_not_count_as_a_use(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    a, b = gguf(tmp_path, "a.gguf"), gguf(tmp_path, "b.gguf")
    reg.remember(a)
    reg.remember(b)
    reg.set_prefix_reuse(a, "none")
    assert [e.name for e in reg.entries()] == ["b.gguf", "a.gguf"]
    assert reg.prefix_reuse(a) == "none"
    c = tmp_path / "c.gguf"  # a profile for a model never launched through the app
    entry = reg.set_prefix_reuse(c, "full")
    assert entry.last_used == 0.0 and reg.entries()[-1].path == str(c)
    with pytest.raises(ValueError, match="full or none"):
        reg.set_prefix_reuse(a, "partial")
    with pytest.raises(ValueError, match="full or none"):
        reg.remember(a, prefix_reuse="sometimes")


def test_forget(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    a = gguf(tmp_path, "a.gguf")
    reg.remember(a)
    assert reg.forget(a) and reg.entries() == []
    assert not reg.forget(a)


@pytest.mark.parametrize(
    "content",
    [
        "",
        "{not json",
        "[]",
        '{"models": "nope"}',
        '{"version": 1, "models": [1, null, {"path": ""}, {"nopath": 1}]}',
    ],
)
def test_a_torn_or_foreign_file_reads_as_empty_and_is_replaced(
    tmp_path: Path, content: str
) -> None:
    reg = registry(tmp_path)
    reg.path.parent.mkdir(parents=True)
    reg.path.write_text(content)
    assert reg.entries() == []
    reg.remember(gguf(tmp_path, "a.gguf"))
    data = json.loads(reg.path.read_text())
    assert data["version"] == 1 and [m["path"] for m in data["models"]] == [
        str(tmp_path / "a.gguf")
    ]


def test_bad_fields_are_dropped_not_raised(tmp_path: Path) -> None:
    entry = ModelEntry.from_json(
        {"path": "/m.gguf", "last_used": "x", "parallel": 2, "prefix_reuse": "full"}
    )
    assert entry is None  # a non-numeric time makes the entry unusable
    entry = ModelEntry.from_json(
        {"path": "/m.gguf", "parallel": -3, "ctx": True, "prefix_reuse": "maybe", "architecture": 7}
    )
    assert entry == ModelEntry("/m.gguf", 0.0, None, None, None, None)


def test_writes_are_atomic_and_private(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    reg.remember(gguf(tmp_path, "a.gguf"))
    assert os.stat(reg.path).st_mode & 0o777 == 0o600
    leftovers = [p.name for p in reg.path.parent.iterdir() if p.name != "models.json"]
    assert leftovers == []


def test_duplicate_entries_in_the_file_keep_the_first(tmp_path: Path) -> None:
    reg = registry(tmp_path)
    reg.path.parent.mkdir(parents=True)
    models = [
        {"path": "/x.gguf", "last_used": 5, "parallel": 2},
        {"path": "/x.gguf", "last_used": 9, "parallel": 7},
    ]
    reg.path.write_text(json.dumps({"version": 1, "models": models}))
    entries = reg.entries()
    assert len(entries) == 1 and entries[0].parallel == 2
