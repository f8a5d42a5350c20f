"""`fusion-tui chat` through `cli.main`, against the fake llama-server (external mode): the same
JSON lines as `run`, the same session store, exit 0/1/2."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from fusion_tui import cli
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer, Reply


@pytest.fixture
def srv(app_home: AppPaths, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLlamaServer]:
    with FakeLlamaServer(total_slots=2, n_ctx=8192) as server:
        monkeypatch.setenv("FUSION_TUI_SERVER__MODE", "external")
        monkeypatch.setenv("FUSION_TUI_SERVER__URL", server.url)
        yield server


def chat(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["chat", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_json_lines_then_a_second_turn_on_the_same_session_rides_its_cache(
    srv: FakeLlamaServer, app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    srv.script(Reply(text=["Hi", " there."], prompt_seconds=0.01))
    code, out, _ = chat(capsys, "hello", "--json")
    assert code == 0
    events = lines(out)
    assert [e["event"] for e in events if e["event"] != "prompt_progress"] == [
        "request", "outcome",
    ]  # fmt: skip
    progress = [e for e in events if e["event"] == "prompt_progress"]
    assert progress and set(progress[0]) == {"event", "processed", "total", "cache"}
    first = events[-2]
    assert {"id_slot", "prompt_n", "cache_n", "ttft_ms", "predicted_per_second"} <= set(first)
    sid = events[-1]["session"]
    assert events[-1]["outcome"] == "completed"
    code, out, _ = chat(capsys, "more", "--session", sid, "--json")
    second = next(e for e in lines(out) if e["event"] == "request")
    assert code == 0 and second["cache_n"] >= first["prompt_n"] + first["cache_n"]
    saved = SessionStore.default(app_home).load(sid)
    assert [m.content for m in saved.messages] == [
        "hello",
        "Hi there.",
        "more",
        "Hello from the fake.",
    ]
    assert [t.outcome for t in saved.turns] == ["completed", "completed"]


def test_without_json_the_answer_goes_to_stdout(
    srv: FakeLlamaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    srv.script(Reply(text=["Plain", " answer."]))
    code, out, err = chat(capsys, "hello")
    assert code == 0 and out.strip() == "Plain answer." and "slot" in err


def test_bad_input_exits_2_and_a_failed_turn_exits_1(
    srv: FakeLlamaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = chat(capsys, "   ")
    assert code == 2 and "empty" in err
    code, _, err = chat(capsys, "hi", "--session", "no-such-session")
    assert code == 2 and "cannot open session no-such-session" in err
    srv.script(Reply(status=500, error={"code": 500, "message": "boom", "type": "server_error"}))
    code, out, _ = chat(capsys, "hi", "--json")
    assert code == 1 and lines(out)[-1]["outcome"] == "error"
