"""Kill -9 the real llama-server mid-answer, twenty times: nothing of the session is lost.

Each round adopts the managed daemon through `LocalBackend.start`, kills the server as soon as the
first words of the answer arrive, and checks what the user would see and what is on disk: the cut
turn is kept and marked partial, the session file loads, the error says the connection broke, and
a relaunch through `ManagedDaemon.ensure` brings the session back. The last round completes.
"""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import aclosing
from pathlib import Path

import pytest

from fusion_tui.chat.events import ReplyDone
from fusion_tui.chat.local import LocalBackend
from fusion_tui.paths import AppPaths
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.pids import is_alive
from fusion_tui.server.types import TextDelta
from fusion_tui.sessions.store import SessionStore
from tests.fault.realserver import small_settings, small_spec

pytestmark = pytest.mark.server

ROUNDS = 20
PROMPT = "Count from 1 to 200, one number per line."


async def _gone(pid: int, wait: float = 5.0) -> bool:
    """The killed server has exited (on a loaded box the kernel can take a while to finish it)."""
    for _ in range(int(wait / 0.05)):
        if not is_alive(pid):
            return True
        await asyncio.sleep(0.05)
    return not is_alive(pid)


async def _noop_report(_status: object) -> None:
    return None


async def test_kill_9_mid_stream_twenty_times_keeps_every_partial_turn(
    app_home: AppPaths, llama_server_bin: Path, demo_model: Path
) -> None:
    daemon = ManagedDaemon(app_home, binary=llama_server_bin, poll_interval=0.05)
    settings = small_settings(llama_server_bin, demo_model, max_tokens=200)
    # every answer runs its full 200 tokens: a short answer (the model may stop after a few
    # words) can arrive whole before the first words are read, and then there is nothing to cut
    spec = small_spec(demo_model, extra_args=("--no-warmup", "-fit", "off", "--ignore-eos"))
    store = SessionStore(app_home.sessions_dir)
    session_id: str | None = None
    pids: list[int] = []
    try:
        for round_no in range(ROUNDS):
            record = await daemon.ensure(spec, probe=False)  # relaunch after the kill
            assert record.pid not in pids, "a dead server was adopted"
            pids.append(record.pid)
            backend = LocalBackend(settings, app_home, resume=session_id)
            await backend.start(lambda _s: None)
            killed = False
            text: list[str] = []
            done: list[ReplyDone] = []
            try:
                async with aclosing(backend.reply(f"{PROMPT} (round {round_no})")) as events:
                    async for event in events:
                        if isinstance(event, TextDelta):
                            text.append(event.text)
                            if not killed:
                                os.kill(record.pid, signal.SIGKILL)
                                killed = True
                        elif isinstance(event, ReplyDone):
                            done.append(event)
            finally:
                await backend.close()
            session_id = backend.session.id

            # what the user is told
            assert killed, f"round {round_no}: no text arrived before the end"
            assert [d.outcome for d in done] == ["error"], f"round {round_no}: {done}"
            assert done[0].partial
            note = done[0].note
            assert "llama-server" in note and "broke mid-answer" in note, note
            assert "\n" not in note and "Traceback" not in note
            assert backend.save_error is None

            # what is on disk: the file loads, the cut turn is kept and marked
            assert daemon.current() is None and await _gone(record.pid)
            session = SessionStore(app_home.sessions_dir).load(session_id)
            assert len(session.turns) == round_no + 1
            assert session.turns[-1].outcome == "error"
            assert "broke mid-answer" in session.turns[-1].detail
            last = session.messages[-1]
            assert last.role == "assistant" and last.partial and last.partial_reason == "error"
            assert last.content == "".join(text) and last.content
            partials = [m for m in session.messages if m.partial]
            assert len(partials) == round_no + 1  # earlier cut turns are still there
            assert [m.role for m in session.messages[-2:]] == ["user", "assistant"]
            assert session.messages[-2].content.endswith(f"(round {round_no})")

        # the session resumes on a relaunched server and a turn completes
        record = await daemon.ensure(spec, probe=False)
        backend = LocalBackend(settings, app_home, resume=session_id)
        await backend.start(lambda _s: None)
        try:
            outcomes = [
                e.outcome async for e in backend.reply("Say OK.") if isinstance(e, ReplyDone)
            ]
        finally:
            await backend.close()
        assert outcomes == ["completed"]
        assert session_id is not None
        final = store.load(session_id)
        assert final.turns[-1].outcome == "completed"
        assert len([m for m in final.messages if m.partial]) == ROUNDS
        assert len(final.messages) == 2 * (ROUNDS + 1)
    finally:
        await daemon.stop()
    assert daemon.current() is None
    assert all(not is_alive(pid) for pid in pids)
