"""The independent minimum of bench/cache_reuse.py and bench/multi_endpoint.py: the prompt tokens
that are new given the conversation, whatever a client or a server did with its caches.

A prefix cache (llama-server's slots, its RAM prompt cache, a saved slot file) can only spare the
tokens a prompt shares from its start with something evaluated before: a turn's minimum is its
prompt, tokenized by the server's own `/tokenize`, less its longest common prefix with any
earlier turn's prompt plus answer in the same run. Any earlier turn, not only the session's own:
sessions share the system prompt and a policy may reuse it across them, and a minimum a policy
can beat is no minimum. (`--cache-reuse`, llama-server's shifting of chunks that are not a
prefix, is off in every launch of the benches.)

Only the conversation's turns count. Titles, summaries and read-aheads are a client's choices:
their tokens are in what the client evaluated and never in the minimum, so two clients holding
the same conversation have the same minimum and neither can evaluate fewer tokens than it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens `a` and `b` share from their start."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Minimum:
    """The earlier sequences of one run; `new` answers a prompt's minimum against them."""

    def __init__(self) -> None:
        self._seqs: list[tuple[int, ...]] = []

    def new(self, prompt: Sequence[int]) -> int:
        """Tokens of `prompt` past its longest common prefix with any earlier sequence."""
        held = max((common_prefix(prompt, s) for s in self._seqs), default=0)
        return len(prompt) - held

    def add(self, sequence: Sequence[int]) -> None:
        """A turn's prompt plus its answer: what a cache may hold after it."""
        self._seqs.append(tuple(sequence))

    def take(self, prompt: Sequence[int], answered: Sequence[int]) -> int:
        """`new(prompt)`, then `answered` (the prompt plus the answer) kept for later turns."""
        n = self.new(prompt)
        self.add(answered)
        return n


Tokenize = Callable[[str], Awaitable[list[int]]]
"""The server's `/tokenize` of a prompt, special tokens parsed and added as a request's are."""
Render = Callable[[list[dict[str, Any]]], Awaitable[str]]
"""The server's `/apply-template` of chat messages (what it tokenizes for a chat request)."""


async def measure(rows: Iterable[Any], tokenize: Tokenize, render: Render) -> None:
    """Sets `minimum` and `prompt_tokens` on each of one side's rows (in the order they were
    sent) that is a conversation turn; other rows get 0 (see the module docstring). A row's
    `request` is its `/completion` prompt or its chat messages, `answer` the text it got."""
    pool = Minimum()
    for row in rows:
        row.minimum = 0
        if not row.label.is_turn or row.error or row.request is None:
            continue
        text = row.request if isinstance(row.request, str) else await render(row.request)
        prompt = await tokenize(text)
        row.prompt_tokens = len(prompt)
        row.minimum = pool.take(prompt, await tokenize(text + row.answer) if row.answer else prompt)
