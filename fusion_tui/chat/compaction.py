"""Provides the plain chat's compaction: older turns summarised when the prompt outgrows the slot.

Before a request, the prompt is counted with the server's own tokenizer (`/tokenize`; skipped
while its byte length plus the reply budget cannot reach the slot's context, since a token is at
least one byte). When it would not fit, the turns before a recent tail are summarised by a side
call and replaced in the prompt by that summary
(`ChatSummary`, in the system text). Where prefix reuse is `full` the summary is asked as a
continuation of the session's own cached prompt on its own slot (only the question is read; the
last exchange stays verbatim); elsewhere, or when that does not fit, the transcript is sent to the
side-call slot, never the session's. The session keeps every message; the summary and how many
messages it covers live beside the session file (`<sessions>/chat/<id>.json`), so a resumed
session sends the same prompt.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fusion_tui.atomic import atomic_write
from fusion_tui.chat.chat_prompt import ChatSummary, chat_prompt, chat_turns, next_turn_opening
from fusion_tui.chat.events import Compacted
from fusion_tui.endpoints.context_fit import Counter, fits
from fusion_tui.endpoints.context_fit import reply_reserve as reply_reserve  # kept importable here
from fusion_tui.server.template import TemplateFrame
from fusion_tui.sessions.model import Message, Session
from fusion_tui.sessions.store import SessionStore

SUMMARY_TOKENS = 320
"""`n_predict` of the summary side call (at most `llm.maxTokens`)."""
MIN_CONTINUED_SUMMARY = 128
"""A summary asked as a continuation may be capped below `summary_tokens` to fit the slot, down
to this many tokens: seen with the coder model on 2,048-token slots, a turn of ~1,800 tokens left
no room for a 320-token cap, so every compaction re-read the conversation on the side slot
(~1,750 tokens, 23 s on the two cores) where the continuation reads the ~40-token question; the
coder's summaries there ran 44–58 tokens."""
KEEP_SHARE = 0.25
"""After a compaction the recent turns kept verbatim take at most this share of the context."""
SUMMARY_SYSTEM = (
    "You summarise conversations between a user and a coding assistant so the conversation can "
    "go on without them. Keep facts, names, code identifiers, decisions and open questions. "
    "Write plain prose, at most 200 words."
)
SUMMARY_ASK = (
    "Summarise our conversation so far so that it can go on without it. Keep facts, names, code "
    "identifiers, decisions and open questions. Plain prose, at most 200 words."
)
"""The summary asked as a continuation of the session's own cached prompt."""
SideCall = Callable[[dict[str, Any]], Awaitable[str]]
"""A side call's body (`prompt`, `n_predict`, ...) → the text it answered."""


def summary_path(store: SessionStore, session_id: str) -> Path:
    return store.path_for(session_id).parent / "chat" / f"{session_id}.json"


def load_summary(store: SessionStore, session_id: str) -> ChatSummary | None:
    """The session's compaction, None when it has none (a damaged file counts as none: the
    next compaction rewrites it, and the session file is never touched)."""
    try:
        data = json.loads(summary_path(store, session_id).read_text("utf-8"))
        return ChatSummary(str(data["summary"]), int(data["covers"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_summary(store: SessionStore, session_id: str, summary: ChatSummary) -> None:
    path = summary_path(store, session_id)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    data = {"summary": summary.text, "covers": summary.covers}
    atomic_write(path, json.dumps(data, ensure_ascii=False).encode("utf-8"))


def next_turn_room(n_ctx: int) -> int:
    """Room an answered session keeps for the next user message before it compacts ahead
    (an eighth of the slot: 256 tokens of 2,048, 1,024 of 8,192; at most 4,096)."""
    return max(64, min(4096, n_ctx // 8))


def split_for(messages: Sequence[Message], covers: int, keep_bytes: int) -> int:
    """How many chat messages to cover so that the rest (starting at a user message, ending with
    the newest one) is at most `keep_bytes`; never fewer than `covers` already summarised and
    never the newest user message."""
    turns = chat_turns(messages)
    starts = [i for i, m in enumerate(turns) if m.role == "user" and i >= covers]
    if not starts:
        return covers
    best = starts[-1]
    for i in reversed(starts):
        if sum(len(m.content.encode("utf-8")) + 32 for m in turns[i:]) > keep_bytes:
            break
        best = i
    if best == covers and len(starts) > 1:  # something must go, or nothing changes
        best = starts[1]
    return best


def covered_turns(messages: Sequence[Message], start: int, end: int) -> int:
    """User turns among chat messages `start:end` (for the notice)."""
    return sum(1 for m in chat_turns(messages)[start:end] if m.role == "user")


def summary_prompt(
    frame: TemplateFrame,
    previous: ChatSummary | None,
    messages: Sequence[Message],
    start: int,
    end: int,
    max_chars: int | None = None,
) -> str:
    """The side call's prompt: the earlier summary and the turns `start:end`, as a transcript
    (its oldest part cut to `max_chars` when it would not fit the side slot)."""
    lines = []
    for m in chat_turns(messages)[start:end]:
        who = "User" if m.role == "user" else "Assistant"
        lines.append(f"{who}: {m.content.strip()}")
    transcript = "\n\n".join(lines)
    if previous is not None and previous.text.strip():
        transcript = f"Summary of what came before:\n{previous.text.strip()}\n\n{transcript}"
    if max_chars is not None and len(transcript) > max_chars:
        transcript = "…" + (transcript[-max_chars:] if max_chars > 0 else "")
    ask = f"Summarise this conversation:\n\n{transcript}"
    return (
        frame.start
        + SUMMARY_SYSTEM
        + frame.system_to_user
        + ask
        + frame.user_to_assistant
        + "Summary:"
    )


@dataclass
class Compactor:
    """One request's prompt for a chat session, compacted when it would not fit the slot."""

    frame: TemplateFrame
    system: str
    count: Counter
    side_call: SideCall
    n_ctx: int
    reserve: int
    summary_tokens: int = SUMMARY_TOKENS
    own_call: SideCall | None = None
    """A side call on the session's own slot (prefix reuse `full`): the summary is asked as a
    continuation of the cached prompt, so only the question is read, not the transcript."""

    next_turn: int = 0
    """Room kept for the next user message when compacting ahead (`ahead`)."""

    async def prompt_for(
        self, store: SessionStore, session: Session, *, force: bool = False
    ) -> tuple[str, Compacted | None]:
        """The prompt (with the session's summary), and the compaction it took, if any."""
        return await self._prompt_for(store, session.id, session.messages, force, self.reserve)

    async def ahead_due(self, store: SessionStore, session: Session) -> bool:
        """After an answer: whether the next turn would likely not fit (the slot's prompt plus
        `next_turn` and the reply reserve), so compacting now beats compacting before it."""
        return await self.next_opening(store, session) is None

    async def next_opening(self, store: SessionStore, session: Session) -> str | None:
        """The next turn's opening (`next_turn_opening`, what a read-ahead reads), or None when
        the next turn would likely not fit and the session is due to compact (`ahead_due`)."""
        summary = load_summary(store, session.id)
        opening = next_turn_opening(self.frame, self.system, session.messages, summary)
        prompt = opening + self.frame.user_to_assistant  # the next prompt, its user text empty
        ok, _tokens = await fits(prompt, self.n_ctx, self.reserve + self.next_turn, self.count)
        return opening if ok else None

    async def ahead(self, store: SessionStore, session: Session) -> Compacted | None:
        """Compact after an answer (see `ahead_due`): while the slot still has room for the
        summary question, and off the next turn's first token. The next user message is an
        empty one here, so the last exchange stays verbatim when it leaves that room."""
        probe = [*session.messages, Message(role="user", content="")]
        headroom = self.reserve + self.next_turn
        _prompt, compacted = await self._prompt_for(store, session.id, probe, False, headroom)
        return compacted

    async def _prompt_for(
        self,
        store: SessionStore,
        session_id: str,
        messages: list[Message],
        force: bool,
        headroom: int,
    ) -> tuple[str, Compacted | None]:
        summary = load_summary(store, session_id)
        prompt = chat_prompt(self.frame, self.system, messages, summary)
        ok, before = await fits(prompt, self.n_ctx, headroom, self.count)
        if ok and not force:
            return prompt, None
        if force:
            before = await self.count(prompt)
        done = await self._compact(messages, summary, before, force, headroom)
        if done is None:
            return prompt, None
        summary, after, turns = done
        save_summary(store, session_id, summary)
        prompt = chat_prompt(self.frame, self.system, messages, summary)
        plural = "" if turns == 1 else "s"
        note = f"compacted {turns} turn{plural} into a summary · {before:,} → {after:,} tokens"
        return prompt, Compacted(note, turns=turns, before=before, after=after)

    async def _compact(
        self,
        messages: list[Message],
        summary: ChatSummary | None,
        before: int,
        force: bool,
        headroom: int,
    ) -> tuple[ChatSummary, int, int] | None:
        """Summarise older turns until the prompt leaves `headroom`: (summary, tokens after,
        turns covered); None when there is nothing left to summarise."""
        covers = first = summary.covers if summary is not None else 0
        if self.own_call is not None:
            done = await self._continued(messages, summary, first, force, headroom)
            if done is not None:
                return done
        total_bytes = max(1, sum(len(m.content.encode()) + 32 for m in chat_turns(messages)))
        per_byte = min(1.0, before / total_bytes)
        keep = 0 if force else int(self.n_ctx * KEEP_SHARE / max(per_byte, 0.05))
        after = before
        for _ in range(3):
            end = split_for(messages, covers, keep)
            if end <= covers:
                break
            text = await self._summarise(messages, summary, covers, end)
            summary, covers = ChatSummary(text, end), end
            after = await self.count(chat_prompt(self.frame, self.system, messages, summary))
            if after + headroom <= self.n_ctx or force:
                break
            keep //= 2
        if summary is None or covers == first:
            return None
        return summary, after, covered_turns(messages, first, covers)

    async def _continued(
        self,
        messages: list[Message],
        summary: ChatSummary | None,
        first: int,
        force: bool,
        headroom: int,
    ) -> tuple[ChatSummary, int, int] | None:
        """The summary as a continuation of the prompt the slot holds (every message before the
        newest user one, then `SUMMARY_ASK`), capped to the room the slot has left (down to
        `MIN_CONTINUED_SUMMARY`); the last exchange stays verbatim when it fits. None: it would
        not fit the slot, or the model said nothing (the side slot is next)."""
        last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
        turns = chat_turns(messages)
        users = [i for i, m in enumerate(turns) if m.role == "user"]
        if last_user < 0 or len(users) < 2 or users[-1] <= first:
            return None
        asked = [*messages[:last_user], Message(role="user", content=SUMMARY_ASK)]
        prompt = chat_prompt(self.frame, self.system, asked, summary)
        cap = min(self.summary_tokens, self.n_ctx - await self.count(prompt))
        if cap < min(MIN_CONTINUED_SUMMARY, self.summary_tokens):
            return None
        body = {"prompt": prompt, "n_predict": cap, "temperature": 0.0}
        text = (await self.own_call(body)).strip() if self.own_call is not None else ""
        if not text:
            return None
        for end in (users[-2], users[-1]):  # keep the last exchange, else only the new message
            if end <= first:
                continue
            new = ChatSummary(text, end)
            after = await self.count(chat_prompt(self.frame, self.system, messages, new))
            if after + headroom <= self.n_ctx or (force and end == users[-1]):
                return new, after, covered_turns(messages, first, end)
        return None

    async def _summarise(
        self, messages: list[Message], previous: ChatSummary | None, start: int, end: int
    ) -> str:
        """The summary side call; the transcript cut to fit the side slot."""
        prompt = summary_prompt(self.frame, previous, messages, start, end)
        budget = self.n_ctx - self.summary_tokens - 8
        bare = summary_prompt(self.frame, previous, messages, start, end, max_chars=0)
        chars = len(prompt) - len(bare) + 1  # the transcript's length ("…" stands for it there)
        for _ in range(3):
            n = await self.count(prompt)
            if n <= budget:
                break
            # cut the excess (in characters, at the prompt's own rate) off the transcript: the
            # instruction and the template around it stay, so scaling the whole would not shrink
            excess = int((n - budget) * len(prompt) / n * 1.1) + 1
            chars = max(0, chars - excess)
            prompt = summary_prompt(self.frame, previous, messages, start, end, max_chars=chars)
        body = {"prompt": prompt, "n_predict": self.summary_tokens, "temperature": 0.0}
        return (await self.side_call(body)).strip()
