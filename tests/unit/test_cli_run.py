"""`fusion-tui run` through `cli.main`, against the fake llama-server (external mode)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.paths import AppPaths
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.cli_support import act, call_cli, json_lines, workspace


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return workspace(tmp_path, {"notes.md": "# notes\n"})


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return call_cli(capsys, "run", *argv)


def test_json_lines_for_requests_tools_progress_and_the_outcome_last(
    cli_server: FakeLlamaServer, ws: Path, app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(act("list_dir"), act("finish", summary="one file: notes.md"))
    code, out, _ = run(capsys, "list the files", "--workspace", str(ws), "--json")
    assert code == 0
    events = json_lines(out)
    kinds = [e["event"] for e in events]
    assert kinds[-1] == "outcome" and kinds.count("outcome") == 1
    assert [e["event"] for e in events if e["event"] in ("request", "tool")] == [
        "request", "tool", "request",
    ]  # fmt: skip
    requests = [e for e in events if e["event"] == "request"]
    for r in requests:
        assert {"id_slot", "prompt_n", "cache_n", "ttft_ms", "predicted_per_second"} <= set(r)
    assert requests[1]["id_slot"] == requests[0]["id_slot"] >= 0
    assert requests[1]["cache_n"] > 0  # the second step rides the first one's cache
    tool = next(e for e in events if e["event"] == "tool")
    assert tool == {"event": "tool", "name": "list_dir", "ok": True}
    progress = [e for e in events if e["event"] == "prompt_progress"]
    assert progress and set(progress[0]) == {"event", "processed", "total", "cache"}
    outcome = events[-1]
    assert outcome["outcome"] == "completed"
    saved = SessionStore.default(app_home).load(outcome["session"])
    assert saved.turns[-1].outcome == "completed"
    assert saved.workspace == str(ws.resolve())


def test_without_json_the_summary_goes_to_stdout_and_progress_to_stderr(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(act("list_dir"), act("finish", summary="Found notes.md."))
    code, out, err = run(capsys, "list the files", "--workspace", str(ws))
    assert code == 0
    assert out == "Found notes.md.\n"
    assert "step 1/" in err and "list_dir" in err and "outcome: completed" in err


def test_a_session_continues_with_session_id(
    cli_server: FakeLlamaServer, ws: Path, app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(act("finish", summary="a"), act("finish", summary="b"))
    code, out, _ = run(capsys, "first", "--workspace", str(ws), "--json")
    sid = json_lines(out)[-1]["session"]
    code2, out2, _ = run(capsys, "second", "--session", sid, "--json")
    assert (code, code2) == (0, 0)
    assert json_lines(out2)[-1] == {"event": "outcome", "outcome": "completed", "session": sid}
    saved = SessionStore.default(app_home).load(sid)
    assert [m.content for m in saved.messages if m.role == "user"] == ["first", "second"]
    assert saved.workspace == str(ws.resolve())  # taken from the session the second time


def test_a_step_limit_gives_max_steps_and_exit_1(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(act("list_dir"), act("finish", summary="ran out of steps"))
    code, out, _ = run(capsys, "x", "--workspace", str(ws), "--max-steps", "1", "--json")
    assert code == 1
    assert json_lines(out)[-1]["outcome"] == "max_steps"


def test_writes_are_denied_without_yes_and_allowed_with_it(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write = act("write_file", path="new.txt", content="hi\n")
    refused = act("finish", summary="I could not write it.")
    cli_server.script(write, refused, refused)  # asked once more: a write task changed nothing
    code, out, _ = run(capsys, "write it", "--workspace", str(ws), "--json")
    assert (code, json_lines(out)[-1]["outcome"]) == (1, "no_change")
    assert not (ws / "new.txt").exists()
    cli_server.script(write)  # a write whose checks pass ends the task
    code, out, _ = run(capsys, "write it", "--workspace", str(ws), "--json", "--yes")
    assert code == 0
    assert (ws / "new.txt").read_text() == "hi\n"
    assert {"event": "tool", "name": "write_file", "ok": True} in json_lines(out)


@pytest.mark.parametrize("case", ["unknown", "damaged", "not-an-id", "workspace", "empty"])
def test_bad_input_exits_2_with_one_line(
    cli_server: FakeLlamaServer,
    ws: Path,
    app_home: AppPaths,
    case: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = SessionStore.default(app_home)
    argv = ["task", "--workspace", str(ws)]
    if case == "unknown":
        argv += ["--session", "20260101-000000-000-abcdef"]
    elif case == "damaged":
        s = Session.new()
        store.save(s).write_text("{ torn")
        argv += ["--session", s.id]
    elif case == "not-an-id":
        argv += ["--session", "../etc"]
    elif case == "workspace":
        argv = ["task", "--workspace", str(ws / "missing")]
    else:
        argv = ["   ", "--workspace", str(ws)]
    code, out, err = run(capsys, *argv, "--json")
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("fusion-tui run: ")
    assert not [r for r in cli_server.requests if r.path == "/completion"]


def test_an_unreachable_server_exits_1_and_keeps_the_users_words(
    app_home: AppPaths, ws: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    with FakeLlamaServer() as gone:
        url = gone.url
    monkeypatch.setenv("FUSION_TUI_SERVER__MODE", "external")
    monkeypatch.setenv("FUSION_TUI_SERVER__URL", url)
    code, out, err = run(capsys, "keep me", "--workspace", str(ws), "--json")
    assert code == 1
    outcome = json_lines(out)[-1]
    assert outcome["event"] == "outcome" and outcome["outcome"] == "error"
    assert "cannot reach" in err
    saved = SessionStore.default(app_home).load(outcome["session"])
    assert saved.messages[0].content == "keep me" and saved.turns[-1].outcome == "error"


def test_two_run_sessions_alternate_on_their_own_slots(
    cli_server: FakeLlamaServer, ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The chat's slot policy on `run` too: B's first task takes an empty slot, not the slot
    holding A's prompt (which shares the whole stable prefix with B's)."""
    other = tmp_path / "ws-b"
    other.mkdir()
    ids: dict[str, str] = {}
    slots: dict[str, set[int]] = {"A": set(), "B": set()}
    for r in range(2):
        for name, folder in (("A", ws), ("B", other)):
            cli_server.script(act("finish", summary=f"{name}{r}"))
            argv = [f"task {r} of {name}", "--json"]
            argv += ["--session", ids[name]] if name in ids else ["--workspace", str(folder)]
            code, out, _ = run(capsys, *argv)
            assert code == 0
            events = json_lines(out)
            ids[name] = events[-1]["session"]
            slots[name] |= {e["id_slot"] for e in events if e["event"] == "request"}
    assert len(slots["A"]) == len(slots["B"]) == 1 and slots["A"] != slots["B"], slots


def test_a_task_that_fills_the_slot_compacts_before_its_outcome_and_the_next_starts_lean(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fake's tokens are characters: an answer of 7,000 leaves no room in an 8,192 slot for
    a next task, so the transcript is compacted after the task (a question on the session's
    own slot), before the outcome line, and the next task's first prompt holds the summary, not
    the answer."""
    long_answer = "the answer is " + "many words " * 640
    cli_server.script(
        act("finish", summary=long_answer),
        Reply(text=["the session explained the answer"]),
        act("finish", summary="ok"),
    )
    code, out, _ = run(capsys, "explain it", "--workspace", str(ws), "--json")
    assert code == 0
    kinds = [e["event"] for e in json_lines(out)]
    assert kinds[-2:] == ["compacted", "outcome"]
    sid = json_lines(out)[-1]["session"]
    code2, _out2, _ = run(capsys, "and now?", "--session", sid, "--json")
    assert code2 == 0
    bodies = [c.body for c in cli_server.completions()]
    asked = str(bodies[1]["prompt"])  # the summary asked as the transcript's next question ...
    assert asked.startswith(str(bodies[0]["prompt"])) and bodies[1]["cache_prompt"] is True
    assert "many words" in asked and asked.rstrip().endswith("<|im_start|>assistant")
    nxt = str(bodies[2]["prompt"])
    assert "the session explained the answer" in nxt and "many words" not in nxt  # ... not the next
