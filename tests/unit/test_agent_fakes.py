"""Scripted stand-ins for the server client and the slot pool (shared by the agent tests)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from fusion_tui.agent.approval import ApprovalGate, ApprovalRequest, Decision
from fusion_tui.agent.prompt import MachineFacts, build_stable_prefix
from fusion_tui.agent.task import AgentDeps
from fusion_tui.agent.tools.registry import CORE_TOOLS
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.server.template import TemplateFrame
from fusion_tui.server.types import StreamEnd, StreamEvent, TextDelta, Timings
from tests.fakes.clock import FakeClock


@dataclass
class Say:
    """One scripted reply: text chunks, optionally hanging first or after (the clock moves)."""

    text: str = ""
    chunks: int = 3
    hang_before: float | None = None
    hang_after: float | None = None
    slot: int = 2
    on_start: Any = None


def call_text(tool: str, **args: Any) -> str:
    """A tool call as Qwen2.5 writes it (its chat template's format)."""
    return "<tool_call>\n" + json.dumps({"name": tool, "arguments": args}) + "\n</tool_call>"


def act(tool: str, **args: Any) -> Say:
    """A reply that is one tool call (`act("finish", summary=...)`: the habit of models that
    finish with a call; the loop reads its summary as the answer)."""
    return Say(call_text(tool, **args))


def edit(path: str, content: str, prose: str = "") -> Say:
    """A reply that writes a whole file: its path on a line, its content in a fenced block."""
    block = f"{path}\n```python\n{content.rstrip(chr(10))}\n```"
    return Say(f"{prose}\n\n{block}" if prose else block)


@dataclass
class Script:
    clock: FakeClock
    replies: list[Say]
    bodies: list[dict[str, Any]] = field(default_factory=list)
    closed: int = 0
    slot_text: dict[int, str] = field(default_factory=dict)

    def __call__(self, body: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        self.bodies.append(body)
        if not self.replies:
            raise AssertionError("script ran out of replies")
        return self._gen(self.replies.pop(0), body)

    async def _gen(self, say: Say, body: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        try:
            if say.on_start is not None:
                say.on_start()
            if say.hang_before is not None:
                self.clock.advance(say.hang_before)
                await anyio.sleep_forever()
            n = max(1, say.chunks)
            step = max(1, len(say.text) // n + 1)
            for i in range(0, len(say.text), step):
                yield TextDelta(say.text[i : i + step])
                await anyio.sleep(0)
            if say.hang_after is not None:
                self.clock.advance(say.hang_after)
                await anyio.sleep_forever()
            slot = body["id_slot"] if body["id_slot"] >= 0 else say.slot
            prompt = body["prompt"]
            held = self.slot_text.get(slot, "")
            common = 0
            for a, b in zip(held, prompt, strict=False):
                if a != b:
                    break
                common += 1
            self.slot_text[slot] = prompt + say.text
            timings = Timings(
                prompt_n=len(prompt) - common, cache_n=common, predicted_n=len(say.text)
            )
            yield StreamEnd(id_slot=slot, timings=timings)
        finally:
            self.closed += 1


class FakeSlots:
    def __init__(self, side: int = 3) -> None:
        self.pins: dict[str, int] = {}
        self.side = side

    def slot_for(self, session_id: str) -> int:
        return self.pins.get(session_id, -1)

    def pin(self, session_id: str, slot: int) -> None:
        self.pins[session_id] = slot

    def side_call_slot(self) -> int:
        return self.side


class Recorder:
    """An approver that answers from a list and records what it was asked."""

    def __init__(self, *answers: Decision) -> None:
        self.answers = list(answers)
        self.asked: list[ApprovalRequest] = []

    async def decide(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request)
        return self.answers.pop(0) if self.answers else Decision.DENY


def make_deps(
    root: Path, script: Script, approver: Any = None, events: list[Any] | None = None, **kw: Any
) -> AgentDeps:
    facts = MachineFacts("SmolLM2-135M", 4, 2048, 120.0)
    sink = events.append if events is not None else (lambda e: None)
    return AgentDeps(
        completion=script,
        slots=kw.pop("slots", FakeSlots()),
        gate=ApprovalGate(approver or Recorder()),
        workspace=Workspace(root),
        frame=TemplateFrame.chatml(),
        stable_prefix=build_stable_prefix(CORE_TOOLS, facts, "a tiny test project"),
        n_ctx=kw.pop("n_ctx", 100_000),
        clock=script.clock,
        on_event=sink,
        **kw,
    )
