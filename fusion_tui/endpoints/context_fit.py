"""Provides the context check of a prompt against a slot, and what a moved session is told.

Why here, below the chat and the agent: a session that moves to another endpoint
carries a prompt built for the first server's slot, and another machine may run a smaller context
per slot. Before a request is sent on the endpoint a session moved to, both the plain chat
(`chat.endpoint_turns`) and the agent (`agent.endpoint_run`) measure the prompt against that
slot with `fits` (the plain chat's compaction counts with it too), compact when it does not fit,
and when nothing helps raise `moved_too_large`: the server is never sent a prompt it must refuse,
and the sentence says what the user can do; nothing they wrote is lost.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from fusion_tui.server.errors import ContextExceeded, ServerError

Counter = Callable[[str], Awaitable[int]]
"""Tokens of a prompt as the server counts them."""


class Tokenizer(Protocol):
    """What counts a prompt: the server's `/tokenize` (`LlamaClient`)."""

    async def tokenize(self, text: str, *, add_special: bool = False) -> list[int]: ...


def reply_reserve(n_ctx: int, n_predict: int) -> int:
    """Context kept free for the answer."""
    return max(16, min(n_predict, n_ctx // 4))


async def fits(prompt: str, n_ctx: int, reserve: int, count: Counter) -> tuple[bool, int]:
    """Whether `prompt` plus the answer fits the slot, and its token count (the byte length as
    an upper bound when counting was not needed: a token is at least one byte)."""
    bound = len(prompt.encode("utf-8")) + 1
    if bound + reserve <= n_ctx:
        return True, bound
    tokens = await count(prompt)
    return tokens + reserve <= n_ctx, tokens


class MovedTooLarge(ContextExceeded):
    """A moved session's prompt does not fit its new endpoint's slot; raised here, before
    anything is sent (so its text is the sentence, with no HTTP status)."""

    def __str__(self) -> str:
        return self.message


def moved_too_large(tokens: int, n_ctx: int, label: str, moved_from: str) -> MovedTooLarge:
    """The prompt of a session that moved from `moved_from` to `label` does not fit `label`'s
    slot, even compacted: the error the turn ends with."""
    message = (
        f"this session's prompt needs {tokens:,} tokens and a slot on {label} holds {n_ctx:,} "
        f"(the session moved there from {moved_from}), even after compacting. Your words and "
        f"the session are kept: send it again once {moved_from} is back (the session returns "
        f"there), start a new session, or give {label} a larger context per slot"
    )
    error = {"code": 400, "type": "exceed_context_size_error", "message": message}
    return MovedTooLarge(message, tokens, n_ctx, error)


async def check_moved(
    client: Tokenizer, prompt: str, n_ctx: int, n_predict: int, label: str, moved_from: str
) -> None:
    """Before a request on the endpoint a session moved to (`label`, from `moved_from`):
    `MovedTooLarge` (nothing sent) when `prompt` and its answer do not fit a slot of `n_ctx`
    there. Not counted (a `ServerError`): nothing raised, the server itself says when it does
    not fit."""

    async def count(text: str) -> int:
        return len(await client.tokenize(text, add_special=True))

    try:
        ok, tokens = await fits(prompt, n_ctx, reply_reserve(n_ctx, n_predict), count)
    except ServerError:
        return
    if not ok:
        raise moved_too_large(tokens, n_ctx, label, moved_from)
