"""Tells a real finish summary from an empty one or one of the app's own placeholder texts.

A small model copies what it sees: a resumed session's history holds our placeholder finish
"(interrupted before this step was answered)", and a tool result may read "(empty)". An answer that
says only that is not one; the loop asks once more, then ends with the outcome `no_answer`. A task
that asks for a change and gets an answer without one is asked once more too, then ends
`no_change`; one the model declines ("I apologize, but I cannot ...") is asked afresh instead.
"""

from __future__ import annotations

import re

INTERRUPTED = "(interrupted before this step was answered)"
"""The finish the app writes for a step a previous task left unanswered (`session_run`)."""

PLACEHOLDERS = frozenset({INTERRUPTED, "(empty)", "(no change)", "(none)", "the summary"})
"""Texts the app itself writes where the model might copy them from."""

RETRY_NOTE = (
    "Your answer {problem}. That is not an answer. If the task is done, say in a few sentences "
    "what you did and found; otherwise go on: change the files or call a tool."
)
NO_CHANGE_NOTE = (
    "No file was changed, and the task asks for a change. Make it now: write the file's path on "
    "a line of its own, then its whole new content in a code block. If nothing needs to change, "
    "say why in one sentence."
)
"""Sent once when a reply ends a change task without changing anything: small models often
describe the fix, or show it in a block with no file, instead of writing it."""


def _norm(text: str) -> str:
    return " ".join(text.split()).strip().rstrip(".").lower()


_NORMALIZED = frozenset(_norm(p) for p in PLACEHOLDERS)


GUARD_WORDS = (
    "was not run: you made this exact call",
    "Repeating a call again ends the task",
    "Repeating it again ends the task",
)
"""Words of the loop guard's note (`loop_guard.py`): an answer that copies them is not one."""

_CHANGE = re.compile(
    r"\b(fix|implement|add|write|change|create|make|update|refactor|rename|remove|delete|"
    r"replace|edit|complete|modify|convert|move|correct|improve|optimi[sz]e|support|rewrite|"
    r"finish|handle|solve)\w*\b",
    re.I,
)
_QUESTION = re.compile(r"^\s*(what|why|how|where|which|who|when|explain|describe|show|list|is|"
                       r"are|does|do|can|could|should|tell)\b", re.I)  # fmt: skip


def wants_change(task: str) -> bool:
    """Whether a task asks for files to change (an answer alone does not do it): it names a
    change ("fix", "implement", "add" ...) and is not a question."""
    text = task.strip()
    if _QUESTION.match(text) and text.rstrip().endswith("?"):
        return False
    return bool(_CHANGE.search(text))


_DECLINE = re.compile(
    r"^\W*(i apologi[sz]e|i'?m sorry|i am sorry|sorry)\b[^.]{0,80}?\b("
    r"can(?:no|')t|unable|not able)\b",
    re.I,
)


def declines(prose: str) -> bool:
    """Whether a reply without code is the model declining the task ("I apologize, but I
    cannot provide a file ..."). Seen on the 1.5B coder, on Exercism's error-handling, twice in
    one task: asked again with the refusal in its own last turn, a small model refuses again,
    so the task is asked afresh instead (`loop.py`)."""
    return len(prose) < 600 and _DECLINE.search(prose) is not None


_PASS_CLAIM = re.compile(
    r"\b(?:tests?|they)\s+(?:(?:now|all|have|had|are|were|both)\s+)*"
    r"(?:pass(?:ed|es)?|passing|succeed(?:ed|s)?)\b",
    re.I,
)
_WISH = re.compile(r"\b(?:make|makes|making|get|gets|so that|until|ensure|if|once|when)\s+"
                   r"(?:(?:the|all|both)\s+)?$", re.I)  # fmt: skip


def claims_passing(summary: str) -> bool:
    """Whether a summary says the tests pass ("I ran the tests again after the fix and they
    passed"), not that they should ("to make the tests pass"). Seen on the 1.5B at the time
    limit, told in the question that the tests still failed."""
    return any(not _WISH.search(summary[: m.start()]) for m in _PASS_CLAIM.finditer(summary))


def finish_problem(summary: str) -> str | None:
    """Why `summary` is not a completed answer ("was empty", "is the app's placeholder ..."),
    or None when it is one."""
    if not summary.strip():
        return "was empty"
    if any(w in summary for w in GUARD_WORDS):
        return "copies the app's own note about a repeated call"
    if _norm(summary) in _NORMALIZED:
        return f"is the app's placeholder text {summary.strip()!r}, not yours"
    return None


def no_answer_reason(problem: str) -> str:
    return f"the model finished without an answer: its summary {problem} (asked twice)"
