"""Client-side overhead per agent step and prefix stability over a 20-step scripted task.

The "server" is an in-process script that answers instantly, so all measured time is the
client's own (packing, schema, validation, tools, events). The baseline, measured in the same
run, is a naive packer that re-renders the whole history every step and keeps a clock line in
its system prompt (the classic way clients break llama.cpp's prefix reuse).

Run: .venv/bin/python bench/agent_steps.py [--steps 20] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fusion_tui.agent.approval import ApprovalGate, HeadlessApprover
from fusion_tui.agent.loop import run_task
from fusion_tui.agent.prompt import (
    MachineFacts,
    PromptPacker,
    build_stable_prefix,
)
from fusion_tui.agent.task import AgentConfig, AgentDeps
from fusion_tui.agent.tools.registry import CORE_TOOLS
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.server.template import TemplateFrame
from fusion_tui.server.types import StreamEnd, StreamEvent, TextDelta, Timings


class NaivePacker(PromptPacker):
    """Baseline: full re-render each request, a volatile clock line in the system prompt."""

    def prompt(self) -> str:
        f = self.frame
        text = f.start + self.stable + f"\n\n[now: {time.time():.6f}]" + f.system_to_user
        last = None
        for m in self.messages:
            if m.role == "assistant":
                text += f.user_to_assistant + m.text
            elif last == "assistant":
                text += f.assistant_to_user + m.text
            else:
                text += m.text
            last = m.role
        return text + f.user_to_assistant


class InstantServer:
    """Answers from a script at once; counts prefix reuse like a slot would (in chars)."""

    def __init__(self, replies: list[str]) -> None:
        self.replies = list(replies)
        self.prompts: list[str] = []
        self.held = ""
        self.cached = 0
        self.total = 0
        self.server_s = 0.0

    def __call__(self, body: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        return self._gen(body)

    async def _gen(self, body: dict[str, Any]) -> AsyncIterator[StreamEvent]:
        prompt = body["prompt"]
        self.prompts.append(prompt)
        text = self.replies.pop(0)
        t0 = time.perf_counter()
        common = lcp(self.held, prompt)
        self.server_s += time.perf_counter() - t0
        self.cached += common
        self.total += len(prompt)
        self.held = prompt + text
        for i in range(0, len(text), 8):
            yield TextDelta(text[i : i + 8])
        yield StreamEnd(2, Timings(prompt_n=len(prompt) - common, cache_n=common))


def lcp(a: str, b: str) -> int:
    """Common prefix length by binary search on slices (C-speed compares)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class Slots:
    def __init__(self) -> None:
        self.pins: dict[str, int] = {}

    def slot_for(self, session_id: str) -> int:
        return self.pins.get(session_id, -1)

    def pin(self, session_id: str, slot: int) -> None:
        self.pins[session_id] = slot

    def side_call_slot(self) -> int:
        return 3


def script(steps: int) -> list[str]:
    acts = []
    for i in range(steps - 1):
        if i % 3 == 0:
            acts.append({"tool": "list_dir", "args": {}})
        elif i % 3 == 1:
            acts.append({"tool": "read_file", "args": {"path": f"f{i % 5}.py"}})
        else:
            acts.append({"tool": "grep", "args": {"pattern": "def "}})
    acts.append({"tool": "finish", "args": {"summary": "done"}})
    return [json.dumps(a) for a in acts]


async def one_run(root: Path, steps: int, naive: bool) -> tuple[float, float, float]:
    server = InstantServer(script(steps))
    frame = TemplateFrame.chatml()
    stable = build_stable_prefix(CORE_TOOLS, MachineFacts("bench", 4, 8192, 100.0), "bench")
    deps = AgentDeps(
        completion=server,
        slots=Slots(),
        gate=ApprovalGate(HeadlessApprover(yes=True)),
        workspace=Workspace(root),
        frame=frame,
        stable_prefix=stable,
        n_ctx=1_000_000,
    )
    resume = NaivePacker(frame, stable) if naive else None
    t0 = time.perf_counter()
    res = await run_task(
        "explore", session_id="b", deps=deps, config=AgentConfig(max_steps=steps + 5),
        resume=resume,
    )  # fmt: skip
    elapsed = time.perf_counter() - t0 - server.server_s  # the fake server's own work is excluded
    assert res.outcome == "completed", res
    pairs = list(zip(server.prompts, server.prompts[1:], strict=False))
    stable_rate = sum(cur.startswith(prev) for prev, cur in pairs) / max(1, len(pairs))
    return elapsed / res.steps * 1000, stable_rate, server.cached / max(1, server.total)


async def main(steps: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for i in range(5):
            (root / f"f{i}.py").write_text(
                "".join(f"def fn{j}():\n    return {j}\n" for j in range(60))
            )
        ours, base = [], []
        for _ in range(rounds):
            ours.append(await one_run(root, steps, naive=False))
            base.append(await one_run(root, steps, naive=True))
    o_ms = statistics.median(r[0] for r in ours)
    b_ms = statistics.median(r[0] for r in base)
    print(f"steps per task: {steps}, rounds: {rounds}")
    print(f"client overhead per step: packer {o_ms:.2f} ms, naive re-render {b_ms:.2f} ms, "
          f"ratio {o_ms / b_ms:.2f}x")  # fmt: skip
    print(f"prefix stability (request extends previous exactly): packer {ours[-1][1]:.0%}, "
          f"naive {base[-1][1]:.0%}")  # fmt: skip
    print(f"prompt chars reused from the slot: packer {ours[-1][2]:.1%}, naive {base[-1][2]:.1%}, "
          f"ratio {ours[-1][2] / max(1e-9, base[-1][2]):.1f}x")  # fmt: skip


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    anyio.run(main, args.steps, args.rounds)
