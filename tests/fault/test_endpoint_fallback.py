"""The managed start fails (binary missing, a crash) while a healthy remote endpoint serves the
same model: `chat` and `run` fall back to it and say so on stderr; with no remote
endpoint serving that model, the start fails as before. Fake binaries die on cue
(tests/fakes/crashing_server.py); the remote endpoint is the fake llama-server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fusion_tui.paths import AppPaths
from fusion_tui.sessions.store import SessionStore
from tests.fakes.crash_binaries import fake_binary, minimal_model
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.cli_support import call_cli, json_lines


@pytest.fixture
def remote() -> Iterator[FakeLlamaServer]:
    with FakeLlamaServer(total_slots=2, n_ctx=8192, model_path="/srv/models/tiny.gguf") as srv:
        yield srv


def configure(app_home: AppPaths, tmp_path: Path, binary: Path, remote: FakeLlamaServer) -> None:
    """The managed server (`binary`, a minimal model below `tmp_path`) and the remote endpoint."""
    model = minimal_model(tmp_path / "models" / "tiny.gguf")
    app_home.config_dir.mkdir(parents=True, exist_ok=True)
    app_home.config_file.write_text(
        f"version: 3\nlocalModels:\n  model: {model}\n  managed:\n    parallel: 2\n"
        f"    ctx: 1024\nserver:\n  binary: {binary}\n  endpoints:\n"
        "    - managed: true\n      label: here\n"
        f"    - url: {remote.url}\n      label: gpu-box\n"
    )


def test_chat_falls_back_to_the_remote_endpoint_when_the_managed_server_crashes(
    app_home: AppPaths,
    tmp_path: Path,
    remote: FakeLlamaServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure(app_home, tmp_path, fake_binary(tmp_path / "bin", "sigsegv"), remote)
    code, out, err = call_cli(capsys, "chat", "hello", "--json")
    assert code == 0, err
    said = [ln for ln in err.splitlines() if "did not start" in ln]
    assert len(said) == 1, err
    assert said[0].startswith("fusion-tui chat: the managed llama-server did not start (")
    assert said[0].endswith("using gpu-box instead, a remote endpoint serving tiny")
    request = next(e for e in json_lines(out) if e["event"] == "request")
    assert request["endpoint"] == "gpu-box"
    saved = SessionStore.default(app_home).load(json_lines(out)[-1]["session"])
    assert saved.pinned_endpoint == "gpu-box"


def test_run_falls_back_when_the_binary_is_missing(
    app_home: AppPaths,
    tmp_path: Path,
    remote: FakeLlamaServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure(app_home, tmp_path, tmp_path / "no-such" / "llama-server", remote)
    ws = tmp_path / "ws"
    ws.mkdir()
    finish = json.dumps({"tool": "finish", "args": {"summary": "done"}})
    remote.script(Reply(text=[finish]))
    code, out, err = call_cli(capsys, "run", "say done", "--workspace", str(ws), "--json")
    assert code == 0, err
    assert "fusion-tui run: the managed llama-server did not start (" in err
    assert "using gpu-box instead" in err
    assert [e["endpoint"] for e in json_lines(out) if e["event"] == "request"] == ["gpu-box"]


def test_without_a_remote_endpoint_serving_the_model_the_start_fails_as_before(
    app_home: AppPaths,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    with FakeLlamaServer(total_slots=2, model_path="/srv/models/other.gguf") as other:
        configure(app_home, tmp_path, tmp_path / "no-such" / "llama-server", other)
        code, out, err = call_cli(capsys, "chat", "keep me", "--json")
        completions = [r for r in other.requests if r.path.startswith("/completion")]
    assert code == 1 and "did not start" not in err and completions == []
    assert json_lines(out)[-1]["outcome"] == "error"
    saved = SessionStore.default(app_home).load(json_lines(out)[-1]["session"])
    assert [m.content for m in saved.messages if m.role == "user"] == ["keep me"]
