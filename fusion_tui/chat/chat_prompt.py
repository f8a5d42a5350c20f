"""Provides the plain chat's prompt: the model's template frame with the transcript concatenated.

Why not `/v1/chat/completions` with messages: the server re-renders the whole history through the
chat template on every request, and a template that trims or rewrites content (or a degenerate
answer cut at `maxTokens` that tokenizes differently once rendered) changes bytes the slot already
holds, so a restored or pinned slot is re-read from that point (seen: 53 of 1,088 tokens reused).
With the frame probed once per daemon (`agent.host.template_frame`) and our text placed
between its pieces, every request's prompt is the previous prompt, plus the model's own answer,
plus the new user text: an exact extension, as the agent's packer does.

A compaction (`ChatSummary`) replaces the first `covers` messages of the prompt by a summary in
the system message; the session keeps every message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fusion_tui.server.template import TemplateFrame
from fusion_tui.server.types import TextDelta
from fusion_tui.sessions.model import Message

SUMMARY_HEADER = "### the conversation so far (a summary of the earlier turns)"


@dataclass(frozen=True)
class ChatSummary:
    """The first `covers` chat messages, summarised (`text`)."""

    text: str
    covers: int


def chat_turns(messages: Sequence[Message]) -> list[Message]:
    """The messages a chat prompt is made of: user and assistant turns (empty ones included, so
    a failed turn's user text still gets the empty answer the slot saw)."""
    return [m for m in messages if m.role in ("user", "assistant")]


def system_text(system: str, summary: ChatSummary | None) -> str:
    if summary is None or not summary.text.strip():
        return system
    return f"{system}\n\n{SUMMARY_HEADER}\n{summary.text.strip()}"


def chat_prompt(
    frame: TemplateFrame,
    system: str,
    messages: Sequence[Message],
    summary: ChatSummary | None = None,
) -> str:
    """The prompt for the next answer: the frame around the system text and each turn, ending
    with the generation prompt. Two user messages in a row (a turn that got no answer) get the
    empty answer between them, which is what the slot holds after such a turn."""
    turns = chat_turns(messages)[summary.covers if summary is not None else 0 :]
    while turns and turns[0].role == "assistant":  # a summary boundary inside a turn
        turns = turns[1:]
    text = frame.start + system_text(system, summary) + frame.system_to_user
    last = None
    for m in turns:
        if m.role == "user":
            if last == "assistant":
                text += frame.assistant_to_user
            elif last == "user":
                text += frame.user_to_assistant + frame.assistant_to_user
            text += m.content
        else:
            if last == "assistant":  # never written by end_turn; keep alternation anyway
                text += frame.assistant_to_user
            text += frame.user_to_assistant + m.content
        last = m.role
    if last != "user":
        raise ValueError("the last chat message is not the user's; nothing to answer")
    return text + frame.user_to_assistant


def next_turn_opening(
    frame: TemplateFrame,
    system: str,
    messages: Sequence[Message],
    summary: ChatSummary | None = None,
) -> str:
    """What the next turn's prompt starts with, before the user's text: the transcript so far
    and the frame's next user header. Read into the session's slot while the user types, it
    takes those tokens off the next turn's first token (`ReadAhead.read_ahead`)."""
    probe = [*messages, Message(role="user", content="")]
    return chat_prompt(frame, system, probe, summary).removesuffix(frame.user_to_assistant)


def answer_as_held(pieces: Sequence[TextDelta], stop_type: str) -> str:
    """The answer as the session keeps it, and so as every later prompt carries it.

    An answer cut at the token limit ends in a token the slot never read (the last sampled
    token is not evaluated). When that token is whitespace alone, it is left out: the next
    prompt then extends the slot's tokens exactly and does not read it (a template that trims
    answers, as Gemma's does, leaves it out too). Only a last piece the server says is one
    token: any more, and some of them are in the slot. (With speculative decoding the last
    token may have been a draft the slot did read: then the next prompt reads it again, one
    token, as it would have anyway.)"""
    text = "".join(p.text for p in pieces)
    if stop_type != "limit" or not pieces:
        return text
    last = pieces[-1]
    if last.tokens != 1 or last.text.strip():
        return text
    return text.removesuffix(last.text)
