"""Two app instances on one session: the second is refused with a clear message and never
writes over the first; the lock goes away with its process, also when it is SIGKILLed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fusion_tui import cli
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.model import Message, Session
from fusion_tui.sessions.store import SessionLocked, SessionStore

ROOT = Path(__file__).resolve().parents[2]


def holder(directory: Path, session_id: str) -> subprocess.Popen[str]:
    """Another process that opened the session to write (claim), until its stdin closes."""
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from fusion_tui.sessions.store import SessionStore
        store = SessionStore(Path({str(directory)!r}))
        store.claim({session_id!r})
        print("held", flush=True)
        sys.stdin.read()
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    assert child.stdout is not None and child.stdout.readline().strip() == "held"
    return child


def saved_session(directory: Path) -> Session:
    session = Session.new(title="first", now=1_700_000_000.0)
    session.messages.append(Message("user", "the first instance's words"))
    SessionStore(directory).save(session)
    return session


def test_a_second_process_is_refused_and_the_file_is_unchanged(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    session = saved_session(directory)
    before = (directory / f"{session.id}.json").read_bytes()
    first = holder(directory, session.id)
    try:
        second = SessionStore(directory)
        with pytest.raises(SessionLocked) as refused:
            second.claim(session.id)
        message = str(refused.value)
        assert f"session {session.id} is open in another fusion-tui (pid {first.pid})" in message
        assert "start a new session" in message
        loaded = second.load(session.id)  # reading is fine: read-only
        loaded.messages.append(Message("user", "the second instance's words"))
        with pytest.raises(SessionLocked):
            second.save(loaded)
        assert (directory / f"{session.id}.json").read_bytes() == before
    finally:
        first.stdin.close()  # type: ignore[union-attr]
        first.wait(10)
    # the first one is gone: the session is free again
    again = SessionStore(directory)
    again.claim(session.id)
    again.save(loaded)
    assert SessionStore(directory).load(session.id).messages[-1].content.startswith("the second")
    again.release(session.id)


def test_a_sigkilled_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    session = saved_session(directory)
    first = holder(directory, session.id)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(10)
    store = SessionStore(directory)
    store.claim(session.id)
    store.save(store.load(session.id))
    store.release(session.id)


def test_stores_of_one_process_share_the_claim(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    session = saved_session(directory)
    a, b = SessionStore(directory), SessionStore(directory)
    a.claim(session.id)
    b.claim(session.id)
    b.save(session)
    a.save(session)
    a.release(session.id)


def test_fusion_tui_run_on_a_session_open_elsewhere_exits_2_with_the_reason(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    session = saved_session(app_home.sessions_dir)
    first = holder(app_home.sessions_dir, session.id)
    try:
        code = cli.main(["run", "do something", "--session", session.id])
    finally:
        first.stdin.close()  # type: ignore[union-attr]
        first.wait(10)
    err = capsys.readouterr().err
    assert code == 2
    assert f"is open in another fusion-tui (pid {first.pid})" in err
    reloaded = SessionStore(app_home.sessions_dir).load(session.id)
    assert [m.content for m in reloaded.messages] == ["the first instance's words"]


def test_a_folder_that_cannot_hold_the_lock_is_no_refusal(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    data.chmod(0o500)
    try:
        store = SessionStore(data / "sessions")
        store.claim("20260101-000000-000-abcdef")  # read-only: nothing to lock, no error
    finally:
        data.chmod(0o700)
