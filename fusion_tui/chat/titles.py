"""Provides `Titler`, the session-title side call, its prompt and the cleanup of the answer.

Kept cheap on purpose. Where the model's prefix reuse is `full`, the title is asked as a
continuation of the session's own cached prompt on its own slot (`TITLE_ASK` after the answer):
a few dozen new tokens, no other slot touched, and the next turn still reuses the whole prompt
and answer (it diverges only after them). Elsewhere only the first user message (cut to
`TITLE_INPUT_CHARS`) is sent on a slot no session holds, with a short `n_predict`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fusion_tui.chat.chat_prompt import ChatSummary, chat_prompt
from fusion_tui.chat.compaction import load_summary
from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import ServerError
from fusion_tui.server.template import TemplateFrame
from fusion_tui.sessions.model import Message
from fusion_tui.sessions.store import SessionStore
from fusion_tui.slots.keeper import SlotKeeper
from fusion_tui.slots.side_calls import SideCallQueue

TITLE_TOKENS = 16
TITLE_INPUT_CHARS = 600
TITLE_MAX_CHARS = 60
TITLE_SYSTEM = (
    "You name chat sessions. Answer with a title of at most six words for the user's request. "
    "No quotes, no punctuation at the end, nothing else."
)


TITLE_ASK = (
    "Name this conversation so far with a title of at most six words. "
    "No quotes, no punctuation at the end, nothing else."
)
"""The title question asked as a continuation of the session's own cached prompt."""


def title_messages(first_user_message: str) -> list[dict[str, str]]:
    text = " ".join(first_user_message.split())[:TITLE_INPUT_CHARS]
    return [{"role": "system", "content": TITLE_SYSTEM}, {"role": "user", "content": text}]


META_LINE = re.compile(
    r"^(here('s| is)|sure|okay|ok|certainly)\b.*\btitle\b[^a-z0-9]*$"
    r"|^(session\s+)?title\s*[:\-]?\s*$",
    re.IGNORECASE,
)
"""A line about the title, not a title ("Here's a possible title:", "Title:")."""
TITLE_MAX_WORDS = 10
"""More words than this is an answer, not a title (small models chat instead): none is kept."""


def clean_title(raw: str) -> str:
    """The first line that is not about the title, without a `Title:` label, quotes, markup or
    a final stop; "" when the model answered something that is not a title."""
    lines = [ln.strip() for ln in raw.splitlines() if ln.strip()]
    line = next((ln for ln in lines if not META_LINE.match(ln.strip(" \t\"'`*#_"))), "")
    if len(line.split()) > TITLE_MAX_WORDS:
        return ""
    line = re.sub(r"^(session\s+)?title\s*[:\-]\s*", "", line, flags=re.IGNORECASE)
    for _ in range(2):  # `"Title".` and `**Title**`: strip marks and stops in any order
        line = line.strip(" \t\"'`*#_").rstrip(".!:;,")
    line = " ".join(line.split())
    if len(line) > TITLE_MAX_CHARS:
        line = line[:TITLE_MAX_CHARS].rsplit(" ", 1)[0] or line[:TITLE_MAX_CHARS]
    return line


def continuation_slot(conn: Connection, own: int | None) -> int | None:
    """The session's own slot when a title can continue its cached prompt (the launch's fit says
    prefix reuse `full`; unknown counts as not); None: a side slot."""
    fit = conn.record.fit if conn.record is not None else None
    if own is None or not isinstance(fit, dict) or fit.get("prefix_reuse") != "full":
        return None
    return own


def title_body(
    frame: TemplateFrame | None,
    first: str,
    messages: Sequence[Message],
    summary: ChatSummary | None,
    system: str,
) -> dict[str, Any]:
    """The title request: the session's own prompt + `TITLE_ASK` (a continuation) with a frame,
    else the short stand-alone messages."""
    if frame is None:
        return {"messages": title_messages(first), "n_predict": TITLE_TOKENS, "temperature": 0}
    asked = [*messages, Message(role="user", content=TITLE_ASK)]
    prompt = chat_prompt(frame, system, asked, summary)
    return {"prompt": prompt, "n_predict": TITLE_TOKENS, "temperature": 0.0}


class Titler:
    """Titles a session once, after its first turn, by a side call that costs no session its
    cache, queued behind the session's turns (`SideCallQueue`: a turn that starts cuts it short
    and it runs again after). The frame, the session's own slot and the side call are the
    backend's (`TurnContent.frame`, `TurnContent.own_slot`, `RequestRunner.side_call`)."""

    def __init__(
        self,
        store: SessionStore,
        keeper: SlotKeeper,
        queue: SideCallQueue,
        *,
        frame: Callable[[], Awaitable[TemplateFrame | None]],
        own_slot: Callable[[], int | None],
        side_call: Callable[..., Awaitable[str]],
        save: Callable[[], None],
        system: str,
    ) -> None:
        self.store = store
        self.keeper = keeper
        self.queue = queue
        self.frame = frame
        self.own_slot = own_slot
        self.side_call = side_call
        self.save = save
        self.system = system

    async def make_title(self) -> str | None:
        """The title side call, queued behind the session's turns."""
        return await self.queue.submit(self._make_title)

    async def _make_title(self) -> str | None:
        """A continuation of the session's own prompt where prefix reuse is `full`, else a slot
        no session holds; saves the session. None when there is nothing to title from, no such
        slot, or the model said nothing usable."""
        keeper, gate = self.keeper, self.keeper.gate
        if keeper.conn is None or gate is None:
            raise ServerError("the server is not connected yet")
        session = keeper.session
        first = next((m.content for m in session.messages if m.role == "user"), "")
        if not first.strip():
            return None
        if session.title and session.title != " ".join(first.split())[:60]:
            return session.title  # titled already (a resumed session): no side call
        slot = self.own_slot()
        if slot is None:
            slot = keeper.side_slot_for(free_only=True)
        if slot is None:  # every slot holds a session: a title is not worth evicting one
            return None
        raw = await self.side_call(await self._body(first), slot=slot)
        title = clean_title(raw)
        if not title:
            return None
        session.title = title
        self.save()
        return title

    async def _body(self, first: str) -> dict[str, Any]:
        frame = await self.frame()
        session = self.keeper.session
        if frame is None or self.own_slot() is None:
            return title_body(None, first, [], None, self.system)
        summary = load_summary(self.store, session.id)
        return title_body(frame, first, session.messages, summary, self.system)
