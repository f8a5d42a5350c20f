"""Agent mode (the TUI's `AgentBackend`) over two endpoints, against two fake
llama-servers: the session runs on its endpoint, records carry it, and when that endpoint goes
away the next turn moves, says so in the chat and marks the request with `moved_from`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fusion_tui.chat.agent_backend import AgentBackend
from fusion_tui.chat.events import Notice, ReplyDone
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from tests.unit.cli_support import act
from tests.unit.endpoint_support import alpha_beta, two_servers


async def test_agent_turns_stay_on_their_endpoint_and_move_when_it_goes(
    paths: AppPaths, ws: Path
) -> None:
    with two_servers(8192) as (a, b):
        backend = AgentBackend(Settings(server=alpha_beta(a, b)), paths, ws)
        await backend.start(lambda _s: None)
        try:
            a.script(act("finish", summary="done here"))
            first = [e async for e in backend.reply("first task")]
            assert isinstance(first[-1], ReplyDone) and first[-1].outcome == "completed"
            assert backend.session.pinned_endpoint == "alpha"
            assert [r.endpoint for r in backend.session.requests] == ["alpha"]
            a.stop()
            b.script(act("finish", summary="done there"))
            second = [e async for e in backend.reply("second task")]
        finally:
            await backend.close()
    assert isinstance(second[-1], ReplyDone) and second[-1].outcome == "completed"
    notes = [e.text for e in second if isinstance(e, Notice)]
    assert any("alpha is unreachable" in n and "moving to beta" in n for n in notes), notes
    last = backend.session.requests[-1]
    assert (last.endpoint, last.moved_from) == ("beta", "alpha")
    assert backend.session.pinned_endpoint == "beta"
    said = [m.content for m in backend.session.messages if m.role == "user"]
    assert said == ["first task", "second task"]


class AskingApprover:
    """The TUI's approver's shape: writes denied, each failover question answered in turn."""

    def __init__(self, *answers: bool) -> None:
        self.answers = list(answers)
        self.asked: list[Any] = []

    async def decide(self, request: Any) -> Any:
        from fusion_tui.agent.approval import Decision

        return Decision.DENY

    async def ask_failover(self, placed: Any) -> bool:
        self.asked.append(placed)
        return self.answers.pop(0)


async def test_in_the_tui_agent_mode_asks_before_moving_and_waiting_keeps_the_words(
    paths: AppPaths, ws: Path
) -> None:
    from fusion_tui.sessions.store import SessionStore

    with two_servers(8192) as (a, b):
        settings = Settings(server=alpha_beta(a, b))
        approver = AskingApprover(False, True)
        backend = AgentBackend(settings, paths, ws, approver=approver)
        await backend.start(lambda _s: None)
        try:
            a.script(act("finish", summary="done here"))
            await _drain(backend, "first task")
            a.stop()
            waited = await _drain(backend, "my precious task")
            b_used = sum(1 for r in b.completions())
            b.script(act("finish", summary="done there"))
            moved = await _drain(backend, "try again")
        finally:
            await backend.close()
    assert [(p.action, p.moved_from, p.endpoint) for p in approver.asked] == [
        ("move", "alpha", "beta"), ("move", "alpha", "beta"),
    ]  # fmt: skip
    assert isinstance(waited[-1], ReplyDone) and waited[-1].outcome != "completed"
    assert b_used == 0  # waiting sent nothing to beta
    assert isinstance(moved[-1], ReplyDone) and moved[-1].outcome == "completed"
    last = backend.session.requests[-1]
    assert (last.endpoint, last.moved_from) == ("beta", "alpha")
    stored = SessionStore.default(paths).load(backend.session.id)
    said = [m.content for m in stored.messages if m.role == "user"]
    assert said == ["first task", "my precious task", "try again"]


async def test_a_resumed_agent_session_whose_endpoint_is_gone_is_asked_about_on_its_turn(
    paths: AppPaths, ws: Path
) -> None:
    from fusion_tui.sessions.store import SessionStore

    with two_servers(8192) as (a, b):
        settings = Settings(server=alpha_beta(a, b))
        first = AgentBackend(settings, paths, ws)
        await first.start(lambda _s: None)
        a.script(act("finish", summary="done here"))
        await _drain(first, "first task")
        sid = first.session.id
        await first.close()
        a.stop()
        approver = AskingApprover(False)
        again = AgentBackend(settings, paths, ws, resume=sid, approver=approver)
        await again.start(lambda _s: None)  # placed elsewhere, not asked yet
        asked_at_start = len(approver.asked)
        try:
            waited = await _drain(again, "keep this")
        finally:
            await again.close()
    assert asked_at_start == 0 and len(approver.asked) == 1
    assert isinstance(waited[-1], ReplyDone) and waited[-1].outcome == "error"
    assert "waiting (your message is kept)" in waited[-1].note
    assert not any(r.path.startswith("/completion") for r in b.requests)
    stored = SessionStore.default(paths).load(sid)
    assert [m.content for m in stored.messages if m.role == "user"] == ["first task", "keep this"]
    assert stored.pinned_endpoint == "alpha"


async def _drain(backend: AgentBackend, text: str) -> list[Any]:
    return [e async for e in backend.reply(text)]
