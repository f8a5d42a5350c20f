"""Provides the session-title side call's prompt and the cleanup of what the model answers.

Kept cheap on purpose. Where the model's prefix reuse is `full`, the title is asked as a
continuation of the session's own cached prompt on its own slot (`TITLE_ASK` after the answer):
a few dozen new tokens, no other slot touched, and the next turn still reuses the whole prompt
and answer (it diverges only after them). Elsewhere only the first user message (cut to
`TITLE_INPUT_CHARS`) is sent on a slot no session holds, with a short `n_predict`.
"""

from __future__ import annotations

import re

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


def clean_title(raw: str) -> str:
    """The first non-empty line, without a `Title:` label, quotes, markup or a final stop."""
    line = next((ln.strip() for ln in raw.splitlines() if ln.strip()), "")
    line = re.sub(r"^(session\s+)?title\s*[:\-]\s*", "", line, flags=re.IGNORECASE)
    for _ in range(2):  # `"Title".` and `**Title**`: strip marks and stops in any order
        line = line.strip(" \t\"'`*#_").rstrip(".!:;,")
    line = " ".join(line.split())
    if len(line) > TITLE_MAX_CHARS:
        line = line[:TITLE_MAX_CHARS].rsplit(" ", 1)[0] or line[:TITLE_MAX_CHARS]
    return line
