"""Killing a writer mid-save leaves the old or the new file, never a torn one.

A forked child saves the same session over and over (each version internally consistent: every
message carries the version number); the parent SIGKILLs it after a random pause, then loads the
file with a fresh store. 100 rounds.
"""

from __future__ import annotations

import os
import random
import signal
import sys
import time
from pathlib import Path

import pytest

from fusion_tui.sessions.model import Message, Session
from fusion_tui.sessions.store import SessionStore

ROUNDS = 100
N_MESSAGES = 40
BODY = "x" * 4000  # ~160 KB per file: big enough for the kill to land mid-write


def version_of(session: Session) -> int:
    n = int(session.title)
    assert len(session.messages) == N_MESSAGES
    for m in session.messages:
        assert m.content == f"{n}:{BODY}", "a message from another version: torn file"
    return n


def writer(directory: Path, session_id: str) -> None:
    store = SessionStore(directory)
    session = store.load(session_id)
    n = version_of(session)
    while True:
        n += 1
        session.title = str(n)
        session.messages = [Message("user", f"{n}:{BODY}") for _ in range(N_MESSAGES)]
        store.save(session)


@pytest.mark.skipif(sys.platform == "win32", reason="needs fork and SIGKILL")
def test_kill_mid_save_leaves_old_or_new(tmp_path: Path) -> None:
    directory = tmp_path / "sessions"
    store = SessionStore(directory)
    session = Session.new(title="0", now=1_700_000_000.0)
    session.messages = [Message("user", f"0:{BODY}") for _ in range(N_MESSAGES)]
    store.save(session)
    rng = random.Random(4)
    last = 0
    advanced = 0
    interrupted = 0
    for _ in range(ROUNDS):
        pid = os.fork()
        if pid == 0:  # child: write until killed
            try:
                writer(directory, session.id)
            finally:
                os._exit(1)
        time.sleep(rng.uniform(0.0, 0.02))  # when to kill, not an assertion on time
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        n = version_of(SessionStore(directory).load(session.id))  # a fresh reader each round
        assert n >= last
        advanced += n > last
        last = n
        leftovers = list(directory.glob(".*.tmp"))
        interrupted += bool(leftovers)
        for tmp in leftovers:
            tmp.unlink()
        assert [p.name for p in directory.iterdir()] == [f"{session.id}.json"]
    # the rounds really exercised both outcomes: some kills landed mid-write, some saves finished
    assert interrupted > 0
    assert advanced > 0
