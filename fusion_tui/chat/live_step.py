"""Provides `LiveStep`: what the chat shows of the agent step in progress, updated in place.

`LiveStepTracker.fold` turns the loop's events (StepStarted, RequestSent, PromptProgressed,
StepDraft, ToolStarted) into one snapshot per change, so the TUI draws a single block that goes
"step 3/30 · waiting for slot 1" → "reading 1,204 of 3,310 tokens · 310 tok/s" → "writing
solution.py · 42 tokens · 12 tok/s" with the code as it arrives (or "calling read_file" with its
arguments, or "writing the answer" with the prose) → "running write_file".
Pure data (no textual): the widget only renders `title()` and `body()`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from fusion_tui.agent.events import (
    AgentEvent,
    DraftKind,
    PromptProgressed,
    RequestDone,
    RequestSent,
    StepDraft,
    StepStarted,
    ToolStarted,
)

Phase = Literal["waiting", "reading", "writing", "running"]
BODY_CHARS = 600
"""The body shows at most this much of the draft (its tail while it grows)..."""
BODY_LINES = 8
"""...and at most this many lines: a file being written must not push the chat off an 80×24
screen."""


@dataclass(frozen=True)
class LiveStep:
    step: int
    max_steps: int
    phase: Phase = "waiting"
    purpose: str = "step"
    slot: int = -1
    processed: int = 0
    total: int = 0
    cache: int = 0
    prompt_tok_s: float | None = None
    kind: DraftKind = "prose"
    """What the draft is writing at its end (`reply_draft.py`)."""
    name: str | None = None
    """The file being written, the tool being called or run."""
    args: dict[str, Any] = field(default_factory=dict)
    body_text: str = ""
    """The code or prose written so far."""
    predicted_n: int = 0
    tok_s: float | None = None

    def title(self) -> str:
        head = f"step {self.step}/{self.max_steps}"
        if self.purpose == "repair":
            head += " (repair)"
        elif self.purpose == "summary":
            head += " (summary)"
        elif self.purpose == "compaction":
            head += " (compacting the transcript)"
        if self.phase == "waiting":
            where = f"slot {self.slot}" if self.slot >= 0 else "the server"
            return f"{head} · waiting for {where}"
        if self.phase == "reading":
            parts = [f"{head} · reading {self.processed:,} of {self.total:,} tokens"]
            if self.cache:
                parts.append(f"{self.cache:,} cached")
            if self.prompt_tok_s:
                parts.append(f"{self.prompt_tok_s:,.0f} tok/s")
            return " · ".join(parts)
        if self.phase == "running":
            return f"{head} · running {self.name}"
        if self.kind == "call":
            what = f"calling {self.name or 'a tool'}"
        elif self.kind == "file":
            what = f"writing {self.name or 'code'}"
        else:
            what = "writing the answer"
        parts = [f"{head} · {what}", f"{self.predicted_n:,} tokens"]
        if self.tok_s:
            parts.append(f"{self.tok_s:,.1f} tok/s")
        return " · ".join(parts)

    def body(self) -> str:
        """What is forming: the code or prose so far, or `tool(arg=value, …)`."""
        if self.phase not in ("writing", "running"):
            return ""
        if self.kind != "call" and self.phase == "writing":
            return _tail(self.body_text)
        shown = []
        for key, value in self.args.items():
            text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            shown.append(f"{key}={text}")
        return _tail(f"{self.name or ''}({', '.join(shown)})")


def _tail(text: str) -> str:
    lines = text.split("\n")
    if len(lines) > BODY_LINES:
        text = "…\n" + "\n".join(lines[-BODY_LINES:])
    return text if len(text) <= BODY_CHARS else "…" + text[-(BODY_CHARS - 1) :]


class LiveStepTracker:
    """Folds agent events into `LiveStep` snapshots (one per visible change)."""

    def __init__(self) -> None:
        self.state: LiveStep | None = None
        self.slot = -1

    def fold(self, event: AgentEvent) -> list[LiveStep]:
        s = self.state
        if isinstance(event, StepStarted):
            s = LiveStep(event.step, event.max_steps, slot=self.slot)
        elif s is None:
            return []
        elif isinstance(event, RequestSent):
            self.slot = event.id_slot if event.id_slot >= 0 else self.slot
            s = LiveStep(s.step, s.max_steps, purpose=event.purpose, slot=self.slot)
        elif isinstance(event, PromptProgressed):
            s = replace(s, phase="reading", processed=event.processed, total=event.total,
                        cache=event.cache, prompt_tok_s=event.tok_s)  # fmt: skip
        elif isinstance(event, StepDraft):
            s = replace(s, phase="writing", purpose=event.purpose, kind=event.kind,
                        name=event.name, args=dict(event.args), body_text=event.body,
                        predicted_n=event.predicted_n, tok_s=event.tok_s)  # fmt: skip
        elif isinstance(event, ToolStarted):
            s = replace(s, phase="running", kind="call", name=event.name, args=dict(event.args))
        elif isinstance(event, RequestDone):
            if event.id_slot >= 0:
                self.slot = event.id_slot
            return []
        else:
            return []
        self.state = s
        return [s]
