"""`fusion-tui run` stopped by a signal keeps every finished step (fake server, real subprocess).

SIGTERM (what `timeout` sends), SIGINT and SIGHUP (the terminal closed) save the session, say
what was kept on stderr and exit 143 / 130 / 129; even SIGKILL finds every step that finished
before it on disk. A stop leaves the files of the attempt that failed fewest checks.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.sessions.store import SessionStore
from tests.child_env import child_env
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.cli_support import act, edit
from tests.unit.test_agent_retry import CHECK, HALF, WRONG

STEPS = 3
CALLS = (("list_dir", {}), ("find", {"pattern": "*.md"}), ("grep", {"pattern": "notes"}))
"""Three different calls: a repeated one would be refused by the loop guard."""


@pytest.fixture
def srv() -> Iterator[FakeLlamaServer]:
    with FakeLlamaServer(total_slots=2, n_ctx=8192) as server:
        yield server


def start_run(
    srv: FakeLlamaServer, tmp_path: Path, *args: str, files: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    for name, text in (files or {"notes.md": "# notes\n"}).items():
        (ws / name).write_text(text)
    env = child_env(
        tmp_path / "home", FUSION_TUI_SERVER__MODE="external", FUSION_TUI_SERVER__URL=srv.url
    )
    child = subprocess.Popen(
        [sys.executable, "-m", "fusion_tui", "run", *(args or ("look around",)), "--workspace",
         str(ws), "--json", "--max-steps", "20"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env,
    )  # fmt: skip
    return child, tmp_path / "home" / "data" / "sessions"


def wait_for_steps(srv: FakeLlamaServer, child: subprocess.Popen[str], n: int) -> None:
    """Until the (n+1)-th completion request hangs on the server: n steps are finished."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        asked = [r for r in srv.requests if r.path in ("/completion", "/completions")]
        if len(asked) > n:
            time.sleep(0.3)  # the request is in flight, the step before it is done
            return
        assert child.poll() is None, child.communicate()
        time.sleep(0.05)
    raise AssertionError("the run did not reach its hanging step")


def the_session(sessions: Path) -> Any:
    files = [p for p in sessions.glob("*.json") if not p.name.startswith(".")]
    assert len(files) == 1, files
    return SessionStore(sessions).load(files[0].stem)


@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130), (signal.SIGHUP, 129)]
)
def test_a_stop_signal_saves_every_finished_step_says_so_and_exits_128_plus(
    srv: FakeLlamaServer, tmp_path: Path, sig: int, code: int
) -> None:
    srv.script(*[act(name, **args) for name, args in CALLS], Reply(text=["{"], hang="first_token"))
    child, sessions = start_run(srv, tmp_path)
    try:
        wait_for_steps(srv, child, STEPS)
        child.send_signal(sig)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == code, err
    name = signal.Signals(sig).name
    assert f"stopped by {name}" in err and f"{STEPS} finished step(s)" in err, err
    assert "Traceback" not in err
    session = the_session(sessions)
    assert f"--session {session.id}" in err
    assert session.messages[0].role == "user" and session.messages[0].content == "look around"
    assert [m.tool_name for m in session.messages if m.role == "tool"] == [c[0] for c in CALLS]
    assert session.turns[-1].outcome == "cancelled"
    tools = [json.loads(line) for line in out.splitlines() if '"tool"' in line]
    assert len(tools) == STEPS


def test_sigkill_still_finds_each_finished_step_on_disk(
    srv: FakeLlamaServer, tmp_path: Path
) -> None:
    srv.script(act("list_dir"), act("find", pattern="*.md"), Reply(text=["{"], hang="first_token"))
    child, sessions = start_run(srv, tmp_path)
    try:
        wait_for_steps(srv, child, 2)
        child.kill()
        child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    session = the_session(sessions)
    assert [m.tool_name for m in session.messages if m.role == "tool"] == ["list_dir", "find"]
    assert session.turns == []  # the turn never ended, yet its steps are there


def test_a_stop_keeps_the_attempt_that_failed_fewest_checks(
    srv: FakeLlamaServer, tmp_path: Path
) -> None:
    """A harness that stops the run at its limit (SIGTERM) finds the best attempt's files, not
    the files as the last undo left them; without this, it judged the task's own broken code."""
    product = "def sub(a, b):\n    return a * b\n"  # fails both cases, as WRONG does
    srv.script(
        edit("calc.py", HALF), edit("calc.py", product), Reply(text=["{"], hang="first_token")
    )
    child, _ = start_run(
        srv, tmp_path, "fix calc.py", "--yes", "--test-cmd", f"{sys.executable} check.py",
        "--test-rounds", "0", "--retries", "3", files={"calc.py": WRONG, "check.py": CHECK},
    )  # fmt: skip
    try:
        wait_for_steps(srv, child, 2)
        child.send_signal(signal.SIGTERM)
        out, err = child.communicate(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 143, err
    assert (tmp_path / "ws" / "calc.py").read_text() == HALF
    restored = [json.loads(line) for line in out.splitlines() if '"restored"' in line]
    assert restored, out
