"""Slot-affine sessions on the real server (SmolLM2, -np 4, launched once for the module):
interleaved sessions and side calls stay on their slots, a new app instance resumes warm, a
daemon restart resumes from the saved slot, a mismatched slot file is refused, and a request
never reaches a slot the server is busy with."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from fusion_tui.chat.events import Notice, ReplyDone
from fusion_tui.chat.local import LocalBackend
from fusion_tui.server.types import StreamEnd, StreamEvent
from fusion_tui.sessions.model import RequestRecord, ServerIdentity
from fusion_tui.sessions.store import SessionStore
from tests.server.real_backend import (
    RealServer,
    completed_turn,
    long_text,
    own_requests,
    server_fixture,
)

pytestmark = pytest.mark.server


server = server_fixture("sessions-home")  # isolated, like the app_home fixture


async def backend(srv: RealServer, resume: str | None = None, **kw: Any) -> LocalBackend:
    b = LocalBackend(srv.settings(), srv.paths, resume=resume, connector=srv.connector(), **kw)
    await b.start(lambda _s: None)
    return b


def share(r: RequestRecord) -> float:
    return r.cache_n / (r.cache_n + r.prompt_n)


async def test_two_sessions_and_side_calls_interleaved_stay_on_their_slots(
    server: RealServer,
) -> None:
    a, b = await backend(server), await backend(server)
    await completed_turn(a, long_text(480, seed=1))
    await completed_turn(b, long_text(220, seed=2))
    assert await a.make_title()
    await completed_turn(a, "Which module came first?")
    await b.make_title()
    await completed_turn(b, "Which module came last?")
    await completed_turn(a, "And the second one?")
    await completed_turn(b, "And the one before it?")
    slots = {a.session.pinned_slot, b.session.pinned_slot}
    assert None not in slots and len(slots) == 2
    for s in (a, b):
        first, *later = own_requests(s)
        assert first.prompt_n > 600  # cold
        for r in later:
            assert r.id_slot == s.session.pinned_slot
            assert share(r) >= 0.95, r
        side = [r for r in s.session.requests if r.side_call]
        assert len(side) == 1 and side[0].id_slot not in slots
    await a.close()
    await b.close()
    pytest.shared_a = a.session.id  # type: ignore[attr-defined]


async def test_a_new_app_instance_resumes_warm_on_the_same_server(server: RealServer) -> None:
    sid = pytest.shared_a  # type: ignore[attr-defined]
    before = SessionStore.default(server.paths).load(sid)
    again = await backend(server, resume=sid)
    events = await completed_turn(again, "ok?")
    await again.close()
    first = own_requests(again)[len([r for r in before.requests if not r.side_call])]
    assert first.id_slot == before.pinned_slot
    assert share(first) >= 0.99, first
    done = events[-1]
    assert isinstance(done, ReplyDone) and done.note.startswith(f"resumed on slot {first.id_slot}")


class Recording(LocalBackend):
    """Notes when each request is sent and which slot it names."""

    sent: list[tuple[float, int]]

    def _open_stream(self, body: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        self.sent.append((time.monotonic(), body["id_slot"]))
        return super()._open_stream(body)


async def test_a_request_never_reaches_a_busy_slot(server: RealServer) -> None:
    one = await backend(server)
    await completed_turn(one, "Count from one to ten.")
    slot = one.session.pinned_slot
    assert slot is not None
    other = Recording(server.settings(), server.paths, connector=server.connector())
    other.sent = []
    await other.start(lambda _s: None)
    other.pool.pin(other.session.id, slot)  # another session that believes it owns the slot
    one.settings = server.settings(max_tokens=120)
    ended: list[float] = []

    async def long_reply() -> None:
        async for e in one.reply("Now count slowly from one to one hundred."):
            if isinstance(e, StreamEnd):
                ended.append(time.monotonic())

    task = asyncio.create_task(long_reply())
    for _ in range(400):  # until the server is processing the slot
        states = await one.conn.client.slots()  # type: ignore[union-attr]
        if states[slot].is_processing:
            break
        await asyncio.sleep(0.01)
    await completed_turn(other, "hello")
    await task
    await one.close()
    await other.close()
    assert ended
    # The shared slot ledger knows `one` holds the slot, so `other`'s stale pin is dropped and it
    # goes to another slot; had it gone to `slot`, it must have waited until the slot was idle.
    assert other.sent[0][1] != slot or other.sent[0][0] >= ended[0]
    assert other.sent[0][1] != slot


async def test_resume_after_a_daemon_restart_restores_the_saved_slot(server: RealServer) -> None:
    c = await backend(server)
    await completed_turn(c, long_text(480, seed=3))
    cold = own_requests(c)[0]
    await c.close()  # leaving saves the slot
    assert (server.paths.slot_save_dir / f"{c.session.id}.kv").is_file()
    await server.restart()
    again = await backend(server, resume=c.session.id)
    events = await completed_turn(again, "ok?")
    await again.close()
    notes = [e.text for e in events if isinstance(e, Notice)]
    assert notes and notes[0].startswith("restored the saved slot into slot")
    warm = own_requests(again)[-1]
    assert warm.id_slot == again.session.pinned_slot
    assert share(warm) >= 0.99, warm
    assert warm.ttft_ms < 0.2 * cold.ttft_ms, (warm.ttft_ms, cold.ttft_ms)
    pytest.shared_c = c.session.id  # type: ignore[attr-defined]


async def test_a_mismatched_slot_file_is_refused(server: RealServer) -> None:
    sid = pytest.shared_c  # type: ignore[attr-defined]
    store = SessionStore.default(server.paths)
    session = store.load(sid)
    assert session.server is not None
    session.server = ServerIdentity(session.server.model_path, "old-launch", 4)
    store.save(session)  # as if it was last used on another daemon
    tag_path = server.paths.slot_save_dir / f"{sid}.kv.json"
    tag = json.loads(tag_path.read_text())
    tag["n_ctx"] = 8192
    tag_path.write_text(json.dumps(tag))
    again = await backend(server, resume=sid)
    events = await completed_turn(again, "fine?")
    await again.close()
    notes = [e.text for e in events if isinstance(e, Notice)]
    assert notes == [
        "cold start: the saved slot does not fit: it was saved with a 8,192-token slot "
        "context, the server now has 3,072"
    ]
    done = events[-1]
    assert isinstance(done, ReplyDone) and " cold on slot " in done.note
