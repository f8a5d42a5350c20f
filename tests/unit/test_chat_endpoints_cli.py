"""`fusion-tui chat` over two endpoints, against two fake llama-servers: `--json`
request lines carry `endpoint` and, after a move, `moved_from` (as `run --json` does); a move is
said on stderr in both modes; a server killed mid-answer moves the turn to the other endpoint and
sends it again (the partial answer dropped, nothing the user wrote lost), while with one endpoint
a broken answer stays an error with the message kept."""

from __future__ import annotations

import json

import pytest

from fusion_tui import cli
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.cli_support import call_cli, request_events


def chat(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return call_cli(capsys, "chat", *argv)


def session_of(out: str) -> str:
    return str(json.loads(out.splitlines()[-1])["session"])


def completions(srv: FakeLlamaServer) -> int:
    return sum(1 for r in srv.completions())


def test_chat_json_request_lines_carry_the_endpoint_and_a_move_is_said_and_marked(
    cli_two_servers: tuple[FakeLlamaServer, FakeLlamaServer],
    app_home: AppPaths,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, _b = cli_two_servers
    code, out, err = chat(capsys, "hello", "--json")
    assert code == 0, err
    first = request_events(out)
    assert [r["endpoint"] for r in first] == ["alpha"]
    assert "moved_from" not in first[0]
    sid = session_of(out)

    a.stop()
    code, out, err = chat(capsys, "are you there", "--session", sid, "--json")
    assert code == 0, err
    second = request_events(out)
    assert (second[0]["endpoint"], second[0]["moved_from"]) == ("beta", "alpha")
    moves = [ln for ln in err.splitlines() if "moving to beta" in ln]
    assert len(moves) == 1 and moves[0].startswith("fusion-tui chat: alpha is unreachable")
    assert "cold re-read of" in moves[0] and "prompt tokens" in moves[0]
    saved = SessionStore.default(app_home).load(sid)
    assert [m.content for m in saved.messages if m.role == "user"] == ["hello", "are you there"]
    assert saved.pinned_endpoint == "beta"


def test_a_server_killed_mid_answer_moves_the_turn_and_sends_it_again(
    cli_two_servers: tuple[FakeLlamaServer, FakeLlamaServer],
    app_home: AppPaths,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = cli_two_servers
    code, out, err = chat(capsys, "hello", "--json")
    assert code == 0, err
    sid = session_of(out)
    a.script(Reply(text=["Half", " an", " answer", " lost"], disconnect_after=2, then_die=True))
    b.script(Reply(text=["The", " whole", " answer."]))
    code, out, err = chat(capsys, "tell me more", "--session", sid)
    assert code == 0, err
    assert "the answer broke off; sending the turn again on beta" in err
    assert "alpha is unreachable" in err and "moving to beta" in err
    assert out.strip().endswith("The whole answer.")
    assert completions(b) == 1
    saved = SessionStore.default(app_home).load(sid)
    assert [m.content for m in saved.messages] == [
        "hello", "Hello from the fake.", "tell me more", "The whole answer.",
    ]  # fmt: skip
    assert not saved.messages[-1].partial
    assert saved.turns[-1].outcome == "completed"
    assert (saved.requests[-1].endpoint, saved.requests[-1].moved_from) == ("beta", "alpha")


def test_a_broken_answer_on_a_healthy_endpoint_stays_an_error_with_the_message_kept(
    cli_two_servers: tuple[FakeLlamaServer, FakeLlamaServer],
    app_home: AppPaths,
    capsys: pytest.CaptureFixture[str],
) -> None:
    a, b = cli_two_servers
    a.script(Reply(text=["Half", " an", " answer"], disconnect_after=1))  # alpha stays up
    code, out, err = chat(capsys, "keep my words", "--json")
    assert code == 1
    assert completions(b) == 0 and "moving" not in err
    saved = SessionStore.default(app_home).load(session_of(out))
    assert [m.content for m in saved.messages if m.role == "user"] == ["keep my words"]
    assert saved.turns[-1].outcome == "error"


def test_with_one_endpoint_a_server_killed_mid_answer_is_an_error_and_the_message_is_kept(
    app_home: AppPaths, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with FakeLlamaServer(total_slots=2, n_ctx=8192) as srv:
        monkeypatch.setenv("FUSION_TUI_SERVER__MODE", "external")
        monkeypatch.setenv("FUSION_TUI_SERVER__URL", srv.url)
        srv.script(Reply(text=["Half", " an", " answer"], disconnect_after=1, then_die=True))
        code, out, err = chat(capsys, "keep my words", "--json")
    assert code == 1 and "broke" in err
    saved = SessionStore.default(app_home).load(session_of(out))
    assert [m.content for m in saved.messages if m.role == "user"] == ["keep my words"]
    assert saved.turns[-1].outcome == "error"
    assert saved.messages[-1].role == "assistant" and saved.messages[-1].content == "Half"


def test_stop_with_a_remote_endpoint_says_it_stops_only_the_managed_server_here(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    app_home.config_dir.mkdir(parents=True, exist_ok=True)
    app_home.config_file.write_text(
        "version: 3\nserver:\n  endpoints:\n    - managed: true\n      label: here\n"
        "    - url: http://127.0.0.1:9\n      label: gpu-box\n"
    )
    assert cli.main(["stop"]) == 0
    out = capsys.readouterr().out.strip()
    assert out == "no managed llama-server was running; gpu-box is a remote endpoint: not stopped"


def test_a_move_note_stays_on_one_line_even_when_the_server_error_has_line_breaks() -> None:
    import io

    from fusion_tui.cli.printer import Printer

    err = io.StringIO()
    out = Printer(json_mode=True, prog="fusion-tui chat", stdout=io.StringIO(), stderr=err)
    out.note("alpha is unreachable (boom\nTraceback ...); moving to beta slot 0: a cold re-read")
    assert err.getvalue().count("\n") == 1
    assert err.getvalue().startswith("fusion-tui chat: alpha is unreachable (boom Traceback")
