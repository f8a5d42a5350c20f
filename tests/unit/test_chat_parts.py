"""The plain chat's parts each work alone, without a backend or a server: what a turn asks
(`TurnContent`), the read-ahead (`ReadAhead`) and the title (`Titler`) over one `SlotKeeper`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.chat.titles import Titler
from fusion_tui.chat.turn_content import SYSTEM_PROMPT, ReadAhead, TurnContent
from fusion_tui.config import Settings
from fusion_tui.server.errors import ServerError
from fusion_tui.sessions.model import Message, Session
from fusion_tui.sessions.store import SessionStore
from fusion_tui.slots.keeper import SlotKeeper
from fusion_tui.slots.side_calls import SideCallQueue


async def never_called(body: dict[str, Any], slot: int | None = None, **_: Any) -> str:
    raise AssertionError("no side call without a server")


def parts(tmp_path: Path) -> tuple[SlotKeeper, TurnContent, ReadAhead, Titler]:
    store = SessionStore(tmp_path)
    session = Session.new(title="parser")
    session.messages += [
        Message(role="user", content="fix the parser"),
        Message(role="assistant", content=""),  # a turn that never answered: not sent
        Message(role="assistant", content="done"),
    ]
    keeper = SlotKeeper(store, session)
    content = TurnContent(Settings(), store, keeper, never_called)
    ahead = ReadAhead(store, keeper, content, never_called)
    titler = Titler(
        store, keeper, SideCallQueue(), frame=content.frame, own_slot=content.own_slot,
        side_call=never_called, save=lambda: None, system=SYSTEM_PROMPT,
    )  # fmt: skip
    return keeper, content, ahead, titler


def test_the_messages_are_the_system_prompt_then_the_words_said(tmp_path: Path) -> None:
    _keeper, content, _ahead, _titler = parts(tmp_path)
    assert content.chat_messages() == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "fix the parser"},
        {"role": "assistant", "content": "done"},
    ]


async def test_without_a_server_nothing_is_sent_and_compact_and_title_say_so(
    tmp_path: Path,
) -> None:
    keeper, content, ahead, titler = parts(tmp_path)
    before = list(keeper.session.messages)
    await ahead.read_ahead(several_endpoints=False)  # not connected: nothing read
    assert ahead.take_notes() == []
    with pytest.raises(ServerError, match="not connected"):
        await content.compact()
    with pytest.raises(ServerError, match="not connected"):
        await titler.make_title()
    assert keeper.session.messages == before
