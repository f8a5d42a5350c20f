"""delegate: sub-tasks fanned out to parallel workers, each a sub-session on its own slot.

Worker count (issue 5): on a slot-affine (local) pool, a call naming no `max_workers` runs one
worker unless `llm.runMode.fusion.workers` is configured; an explicit `max_workers` is honoured up
to the pool less the reserved side slot. An endpoint that is not slot-affine keeps the configured
default. Never more workers than sub-tasks. The fan-out is ok when any worker produced a result.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from fusion_tui.agent.events import AgentEvent, WorkerEvent
from fusion_tui.agent.tools import ToolResult

if TYPE_CHECKING:
    from fusion_tui.agent.loop import TaskResult, _Run


@dataclass(frozen=True)
class DelegatePolicy:
    total_slots: int
    slot_affine: bool = True
    reserved_side_slot: bool = True
    configured_workers: int | None = None
    """`llm.runMode.fusion.workers`, when the user set it."""
    non_affine_default: int = 4
    worker_max_steps: int = 12


def worker_count(policy: DelegatePolicy, requested: int | None, n_tasks: int) -> int:
    if n_tasks <= 0:
        return 0
    if policy.slot_affine:
        cap = max(1, policy.total_slots - (1 if policy.reserved_side_slot else 0))
        n = (policy.configured_workers or 1) if requested is None else requested
        n = min(n, cap)
    else:
        n = policy.configured_workers or policy.non_affine_default
    return max(1, min(n, n_tasks))


def merge(results: list[tuple[int, str, TaskResult]]) -> ToolResult:
    blocks = []
    produced = False
    for idx, sub_task, res in sorted(results, key=lambda r: r[0]):
        text = res.summary.strip() or (f"(no result: {res.error})" if res.error else "(no result)")
        produced = produced or bool(res.summary.strip())
        blocks.append(f"### sub-task {idx + 1} ({res.outcome}): {sub_task}\n{text}")
    return ToolResult(produced, "\n\n".join(blocks) or "no sub-tasks")


async def run_delegate(parent: _Run, args: dict[str, Any]) -> ToolResult:
    """Run the sub-tasks; workers share the parent's cancel and its remaining task time."""
    from fusion_tui.agent.loop import run_task

    policy: DelegatePolicy = parent.deps.delegate
    tasks = [str(t) for t in args.get("tasks", []) if str(t).strip()]
    n = worker_count(policy, args.get("max_workers"), len(tasks))
    if n == 0:
        return ToolResult(False, "delegate needs at least one non-empty task")
    queue = list(enumerate(tasks))
    results: list[tuple[int, str, TaskResult]] = []
    config = dataclasses.replace(
        parent.cfg,
        max_steps=min(policy.worker_max_steps, parent.cfg.max_steps),
        max_duration_ms=max(0, parent.ms_left()),
        finalize=False,
    )

    async def worker(w: int) -> None:
        session_id = f"{parent.sid}/w{w + 1}"

        def sink(event: AgentEvent) -> None:
            parent.deps.on_event(WorkerEvent(w + 1, session_id, event))

        deps = dataclasses.replace(parent.deps, delegate=None, on_event=sink)
        while queue:
            idx, sub_task = queue.pop(0)
            res = await run_task(sub_task, session_id=session_id, deps=deps, config=config,
                                 cancel=parent.cancel)  # fmt: skip
            results.append((idx, sub_task, res))
            if res.outcome in ("cancelled", "time_ceiling"):
                return

    async with anyio.create_task_group() as tg:
        for w in range(n):
            tg.start_soon(worker, w)
    out = merge(results)
    note = f"{n} worker(s), {len(results)} of {len(tasks)} sub-task(s) run\n"
    return ToolResult(out.ok, note + out.text)
