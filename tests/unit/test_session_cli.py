"""`fusion-tui sessions list|show|rm`, driven through its own argparse registration."""

from __future__ import annotations

import argparse
import io
import json

from fusion_tui.cli import sessions as sessions_command
from fusion_tui.cli.common import Context
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.model import Message, RequestRecord, ServerIdentity, Session
from fusion_tui.sessions.store import SessionStore


def invoke(paths: AppPaths, *argv: str) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="fusion-tui")
    sessions_command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    out, err = io.StringIO(), io.StringIO()
    code = sessions_command.run(args, Context(paths, out=out, err=err))
    return code, out.getvalue(), err.getvalue()


def seed(paths: AppPaths) -> tuple[Session, str]:
    store = SessionStore.default(paths)
    s = Session.new(title="Refactor lexer", now=1_700_000_000.0)
    s.messages = [
        Message("user", "split the lexer"),
        Message("assistant", "done", partial=True, partial_reason="cancelled"),
    ]
    s.pinned_slot = 1
    s.server = ServerIdentity("/m/smol.gguf", "L1", 4)
    s.requests = [RequestRecord(1, 40, 3_000, 120.0, 55.5, 1_700_000_001.0)]
    store.save(s)
    bad = Session.new(title="broken", now=1_700_000_100.0)
    path = store.save(bad)
    path.write_text("{ torn")
    return s, bad.id


def test_list_shows_sessions_and_damaged_files(app_home: AppPaths) -> None:
    s, bad = seed(app_home)
    code, out, _ = invoke(app_home, "sessions", "list")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(s.id) and "Refactor lexer" in lines[0] and "slot  1" in lines[0]
    assert lines[1].startswith(f"{bad}  DAMAGED: ")
    assert "not valid JSON" in lines[1]
    code, out, _ = invoke(app_home, "sessions", "list", "--json")
    data = json.loads(out)
    assert [(d["id"], d["status"]) for d in data] == [(s.id, "ok"), (bad, "damaged")]


def test_show_text_and_json(app_home: AppPaths) -> None:
    s, bad = seed(app_home)
    code, out, _ = invoke(app_home, "sessions", "show", s.id)
    assert code == 0
    assert "Refactor lexer" in out and "split the lexer" in out
    assert "[partial: cancelled]" in out and "3,000" in out
    code, out, _ = invoke(app_home, "sessions", "show", s.id, "--json")
    assert Session.from_dict(json.loads(out)) == s
    code, _, err = invoke(app_home, "sessions", "show", bad)
    assert code == 1 and "is damaged" in err and "not valid JSON" in err


def test_rm_and_unknown_ids(app_home: AppPaths) -> None:
    s, bad = seed(app_home)
    code, out, _ = invoke(app_home, "sessions", "rm", s.id)
    assert code == 0 and "removed" in out
    code, _, err = invoke(app_home, "sessions", "show", s.id)
    assert code == 1 and "no session" in err
    code, _, err = invoke(app_home, "sessions", "rm", "nonsense")
    assert code == 1 and "not a session id" in err
    code, _, _ = invoke(app_home, "sessions", "rm", bad)  # the user may delete a damaged file
    assert code == 0
    code, out, _ = invoke(app_home, "sessions")
    assert code == 0 and "no saved sessions" in out
