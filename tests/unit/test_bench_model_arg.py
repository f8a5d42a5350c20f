"""A bench's `--model` takes what the app's does: a short name or a path (a short name was
taken for a path and the bench died opening `coder-1.5b`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from _servers import model_arg

from fusion_tui.models.catalog import catalog_model


def test_a_short_name_is_the_catalogue_model(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    entry = catalog_model("coder-1.5b")
    assert entry is not None

    def fake_path(self: object, *_a: object, **_k: object) -> Path:
        seen.append(getattr(self, "short_name", ""))
        return Path("/models/qwen.gguf")

    monkeypatch.setattr(type(entry), "path", fake_path)
    assert model_arg("Coder-1.5B") == Path("/models/qwen.gguf")
    assert seen == ["coder-1.5b"]


def test_a_path_is_taken_as_it_is_and_a_missing_one_says_what_is_accepted(
    tmp_path: Path,
) -> None:
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert model_arg(str(gguf)) == gguf
    with pytest.raises(SystemExit, match=r"no such file; a path or one of coder-1\.5b"):
        model_arg(str(tmp_path / "gone.gguf"))
