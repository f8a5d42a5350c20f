"""A summary asked as a continuation of the session's own cached prompt fits the slot by a
smaller cap when the full one would not: the side call re-reads the whole conversation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fusion_tui.chat.compaction import MIN_CONTINUED_SUMMARY, SUMMARY_TOKENS, Compactor
from fusion_tui.server.template import TemplateFrame
from fusion_tui.sessions.model import Message, Session
from fusion_tui.sessions.store import SessionStore


async def count(text: str) -> int:
    return len(text) // 4  # a token is four characters here


def compactor(n_ctx: int, own: list[dict[str, Any]], side: list[dict[str, Any]]) -> Compactor:
    async def own_call(body: dict[str, Any]) -> str:
        own.append(body)
        return "We talked about a long paste."

    async def side_call(body: dict[str, Any]) -> str:
        side.append(body)
        return "A side summary."

    return Compactor(TemplateFrame.chatml(), "You are helpful.", count, side_call, n_ctx,
                     reserve=64, own_call=own_call, next_turn=n_ctx // 8)  # fmt: skip


def session(paste_tokens: int) -> Session:
    s = Session.new()
    s.messages += [Message(role="user", content="w " * (paste_tokens * 2)),
                   Message(role="assistant", content="An answer.")]  # fmt: skip
    s.messages += [Message(role="user", content="short"), Message(role="assistant", content="ok")]
    return s


async def asked(paste_tokens: int, tmp_path: Path) -> tuple[list[dict[str, Any]], list[Any]]:
    own: list[dict[str, Any]] = []
    side: list[dict[str, Any]] = []
    done = await compactor(2048, own, side).ahead(SessionStore(tmp_path), session(paste_tokens))
    assert done is not None
    return own, side


async def test_a_turn_that_leaves_less_than_the_full_cap_is_summarised_on_its_own_slot(
    tmp_path: Path,
) -> None:
    own, side = await asked(1800, tmp_path)
    assert side == []
    (body,) = own
    cap = body["n_predict"]
    assert MIN_CONTINUED_SUMMARY <= cap < SUMMARY_TOKENS
    assert await count(body["prompt"]) + cap <= 2048


async def test_with_no_room_for_a_useful_summary_the_side_slot_summarises(tmp_path: Path) -> None:
    own, side = await asked(1930, tmp_path)
    assert own == [] and len(side) >= 1
