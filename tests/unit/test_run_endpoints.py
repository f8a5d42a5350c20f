"""`fusion-tui run` over two endpoints, against two fake llama-servers: request events
carry `endpoint`; a session whose endpoint is gone moves by default, says so on stderr, and marks
the request event with `moved_from`; the user's words are kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusion_tui.paths import AppPaths
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.cli_support import act, call_cli, request_events, workspace


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return workspace(tmp_path, {"notes.md": "# notes\n"})


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return call_cli(capsys, "run", *argv)


def test_request_events_carry_the_endpoint_and_a_move_is_said_and_marked(
    cli_two_servers: tuple[FakeLlamaServer, FakeLlamaServer],
    ws: Path,
    app_home: AppPaths,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = cli_two_servers
    a.script(act("list_dir"), act("finish", summary="one file"))
    code, out, err = run(capsys, "list the files", "--workspace", str(ws), "--json")
    assert code == 0, err
    first = request_events(out)
    assert [r["endpoint"] for r in first] == ["alpha", "alpha"]
    assert all("moved_from" not in r for r in first)
    sid = json.loads(out.splitlines()[-1])["session"]
    saved = SessionStore.default(app_home).load(sid)
    assert saved.pinned_endpoint == "alpha"
    assert [r.endpoint for r in saved.requests] == ["alpha", "alpha"]

    a.stop()
    b.script(act("finish", summary="still here"))
    code, out, err = run(capsys, "go on", "--session", sid, "--json")
    assert code == 0, err
    second = request_events(out)
    assert second[0]["endpoint"] == "beta" and second[0]["moved_from"] == "alpha"
    assert "moving to beta" in err and "cold re-read of" in err
    saved = SessionStore.default(app_home).load(sid)
    assert saved.pinned_endpoint == "beta"
    assert [m.content for m in saved.messages if m.role == "user"] == ["list the files", "go on"]
    assert (saved.requests[-1].endpoint, saved.requests[-1].moved_from) == ("beta", "alpha")


def test_a_server_killed_mid_answer_moves_the_run_and_sends_the_step_again(
    cli_two_servers: tuple[FakeLlamaServer, FakeLlamaServer],
    ws: Path,
    app_home: AppPaths,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = cli_two_servers
    broken = json.dumps({"tool": "finish", "args": {"summary": "never seen"}})
    a.script(Reply(text=[broken[:10], broken[10:20], broken[20:]], disconnect_after=2,
                   then_die=True))  # fmt: skip
    b.script(act("finish", summary="finished on beta"))
    code, out, err = run(capsys, "do it", "--workspace", str(ws), "--json")
    assert code == 0, err
    moves = [ln for ln in err.splitlines() if "moving to beta" in ln]
    assert len(moves) == 1 and moves[0].startswith("fusion-tui run: alpha is unreachable")
    assert "cold re-read of" in moves[0]
    events = request_events(out)
    assert [(e["endpoint"], e.get("moved_from")) for e in events] == [("beta", "alpha")]
    saved = SessionStore.default(app_home).load(json.loads(out.splitlines()[-1])["session"])
    assert [m.content for m in saved.messages if m.role == "user"] == ["do it"]
    assert saved.turns[-1].outcome == "completed" and "never seen" not in saved.messages[-1].content


def test_a_run_moved_to_a_smaller_slot_compacts_there_and_is_pinned_to_that_server(
    app_home: AppPaths, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    big = workspace(tmp_path, {"big.txt": "lorem ipsum " * 300})
    with (
        FakeLlamaServer(total_slots=2, n_ctx=16384) as a,
        FakeLlamaServer(total_slots=3, n_ctx=4096) as b,
    ):
        b.refuse_over_ctx = True  # as a real server: a prompt over the slot is refused
        app_home.config_dir.mkdir(parents=True, exist_ok=True)
        app_home.config_file.write_text(
            "version: 3\nserver:\n  endpoints:\n"
            f"    - url: {a.url}\n      label: alpha\n"
            f"    - url: {b.url}\n      label: beta\n"
        )
        a.script(act("read_file", path="big.txt"), act("finish", summary="read it"))
        code, out, err = run(capsys, "read big.txt", "--workspace", str(big), "--json")
        assert code == 0, err
        sid = json.loads(out.splitlines()[-1])["session"]
        a.stop()
        b.script(Reply(text=["We read big.txt."]), act("finish", summary="on beta"))
        code, out, err = run(capsys, "go on", "--session", sid, "--json")
        sent = [str(r.body.get("prompt", "")) for r in b.requests if r.path == "/completion"]
    assert code == 0, err
    assert len(sent) == 2 and all(len(p) < 4096 for p in sent)  # the summary, then the step
    saved = SessionStore.default(app_home).load(sid)
    assert saved.pinned_endpoint == "beta" and saved.turns[-1].outcome == "completed"
    assert saved.server is not None and saved.server.total_slots == 3  # beta's, not alpha's
