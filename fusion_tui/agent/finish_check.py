"""Tells a real finish summary from an empty one or one of the app's own placeholder texts.

A small model copies what it sees: a resumed session's history holds our placeholder finish
"(interrupted before this step was answered)", and a tool result may read "(empty)". A finish that
says only that is not an answer; the loop asks once more, then ends with the outcome `no_answer`.
"""

from __future__ import annotations

INTERRUPTED = "(interrupted before this step was answered)"
"""The finish the app writes for a step a previous task left unanswered (`session_run`)."""

PLACEHOLDERS = frozenset({INTERRUPTED, "(empty)", "(no change)", "(none)", "the summary"})
"""Texts the app itself writes where the model might copy them from."""

RETRY_NOTE = (
    "Your finish summary {problem}. That is not an answer. If the task is done, finish with a "
    "short summary of what you did and found; otherwise continue with a tool."
)


def _norm(text: str) -> str:
    return " ".join(text.split()).strip().rstrip(".").lower()


_NORMALIZED = frozenset(_norm(p) for p in PLACEHOLDERS)


def finish_problem(summary: str) -> str | None:
    """Why `summary` is not a completed answer ("was empty", "is the app's placeholder ..."),
    or None when it is one."""
    if not summary.strip():
        return "was empty"
    if _norm(summary) in _NORMALIZED:
        return f"is the app's placeholder text {summary.strip()!r}, not yours"
    return None


def no_answer_reason(problem: str) -> str:
    return f"the model finished without an answer: its summary {problem} (asked twice)"
