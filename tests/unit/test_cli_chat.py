"""`fusion-tui chat` through `cli.main`, against the fake llama-server (external mode): the same
JSON lines as `run`, the same session store, exit 0/1/2."""

from __future__ import annotations

import pytest

from fusion_tui.paths import AppPaths
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.cli_support import call_cli, json_lines


def chat(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return call_cli(capsys, "chat", *argv)


def test_json_lines_then_a_second_turn_on_the_same_session_rides_its_cache(
    cli_server: FakeLlamaServer, app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(Reply(text=["Hi", " there."], prompt_seconds=0.01))
    code, out, _ = chat(capsys, "hello", "--json")
    assert code == 0
    events = json_lines(out)
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
    second = next(e for e in json_lines(out) if e["event"] == "request")
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
    cli_server: FakeLlamaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(Reply(text=["Plain", " answer."]))
    code, out, err = chat(capsys, "hello")
    assert code == 0 and out.strip() == "Plain answer." and "slot" in err


def test_bad_input_exits_2_and_a_failed_turn_exits_1(
    cli_server: FakeLlamaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = chat(capsys, "   ")
    assert code == 2 and "empty" in err
    code, _, err = chat(capsys, "hi", "--session", "no-such-session")
    assert code == 2 and "cannot open session no-such-session" in err
    cli_server.script(
        Reply(status=500, error={"code": 500, "message": "boom", "type": "server_error"})
    )
    code, out, _ = chat(capsys, "hi", "--json")
    assert code == 1 and json_lines(out)[-1]["outcome"] == "error"
