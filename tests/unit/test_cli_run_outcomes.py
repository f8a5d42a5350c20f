"""`fusion-tui run`'s honest endings (`stuck`, `no_answer`, `no_change`) and tool errors in JSON."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui import cli
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer
from tests.unit.cli_support import act, json_lines, workspace


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return workspace(tmp_path, {"hello.txt": "hi\n"})


def test_a_repeated_failing_call_ends_stuck_with_exit_1_and_is_saved(
    cli_server: FakeLlamaServer, ws: Path, app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(*[act("list_dir", path="hello.txt")] * 3)
    code = cli.main(["run", "list it", "--workspace", str(ws), "--json", "--retries", "0"])
    out, _ = capsys.readouterr()
    assert code == 1
    events = json_lines(out)
    assert events[-1]["event"] == "outcome" and events[-1]["outcome"] == "stuck"
    tools = [e for e in events if e["event"] == "tool"]
    assert len(tools) == 1  # the repeats never ran
    session = SessionStore.default(app_home).load(events[-1]["session"])
    assert session.turns[-1].outcome == "stuck"


def test_json_tool_events_carry_the_error_the_human_output_shows(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [act("read_file", path="src/missing.ts"), act("finish", summary="gave up")]
    cli_server.script(*script)
    assert cli.main(["run", "read it", "--workspace", str(ws), "--json"]) == 0
    out, _ = capsys.readouterr()
    (tool,) = [e for e in json_lines(out) if e["event"] == "tool"]
    assert tool["ok"] is False
    assert tool["error"].startswith("src/missing.ts does not exist")
    cli_server.script(*script)
    assert cli.main(["run", "read it", "--workspace", str(ws)]) == 0
    _, err = capsys.readouterr()
    assert f"    {tool['error']}\n" in err
    cli_server.script(act("list_dir"), act("finish", summary="ok"))
    assert cli.main(["run", "list", "--workspace", str(ws), "--json"]) == 0
    out, _ = capsys.readouterr()
    (ok_tool,) = [e for e in json_lines(out) if e["event"] == "tool"]
    assert ok_tool == {"event": "tool", "name": "list_dir", "ok": True}


def test_a_placeholder_finish_is_not_completed(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    placeholder = "(interrupted before this step was answered)"
    cli_server.script(act("finish", summary=placeholder), act("finish", summary=placeholder))
    code = cli.main(["run", "what is in hello.txt?", "--workspace", str(ws)])
    out, err = capsys.readouterr()
    assert code == 1
    assert "outcome: no_answer" in err
    assert placeholder not in out


def test_a_change_task_that_changes_nothing_ends_no_change(
    cli_server: FakeLlamaServer, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_server.script(act("finish", summary="Fixed it."), act("finish", summary="Done."))
    code = cli.main(["run", "fix hello.txt", "--workspace", str(ws)])
    _, err = capsys.readouterr()
    assert code == 1
    assert "no file was changed" in err and "outcome: no_change" in err
