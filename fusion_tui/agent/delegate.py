"""delegate: sub-tasks fanned out to parallel workers, each a sub-session on its own slot.

Worker count: on a slot-affine (local) pool, a call naming no `max_workers` runs one
worker unless `llm.runMode.fusion.workers` is configured; an explicit `max_workers` is honoured up
to the pool less the reserved side slot. An endpoint that is not slot-affine keeps the configured
default. Never more workers than sub-tasks. The fan-out is ok when any worker produced a result.

The running task reaches this module through `SubTaskRunner` (the loop implements it), so the
delegate knows nothing of the loop's insides and the two modules import one way only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from fusion_tui.agent.events import AgentEvent, EventSink, WorkerEvent
from fusion_tui.agent.tools import ToolResult


@dataclass(frozen=True)
class DelegatePolicy:
    total_slots: int
    slot_affine: bool = True
    reserved_side_slot: bool = True
    configured_workers: int | None = None
    """`llm.runMode.fusion.workers`, when the user set it."""
    non_affine_default: int = 4
    worker_max_steps: int = 12


class SubTaskResult(Protocol):
    """What a worker's task ended with (the loop's `TaskResult`)."""

    @property
    def outcome(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def error(self) -> str: ...


class SubTaskRunner(Protocol):
    """What the delegate needs from the task that called it."""

    @property
    def session_id(self) -> str: ...
    @property
    def max_steps(self) -> int: ...

    def ms_left(self) -> int:
        """The parent's remaining task time; workers get no more."""
        ...

    def emit(self, event: AgentEvent) -> None:
        """Report to the parent's event sink."""
        ...

    async def run_sub_task(
        self,
        task: str,
        *,
        session_id: str,
        max_steps: int,
        max_duration_ms: int,
        on_event: EventSink,
    ) -> SubTaskResult:
        """Run `task` as a worker (no delegate of its own, no summary step, the parent's
        cancel)."""
        ...  # fmt: skip


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


def merge(results: list[tuple[int, str, SubTaskResult]]) -> ToolResult:
    blocks = []
    produced = False
    for idx, sub_task, res in sorted(results, key=lambda r: r[0]):
        text = res.summary.strip() or (f"(no result: {res.error})" if res.error else "(no result)")
        produced = produced or bool(res.summary.strip())
        blocks.append(f"### sub-task {idx + 1} ({res.outcome}): {sub_task}\n{text}")
    return ToolResult(produced, "\n\n".join(blocks) or "no sub-tasks")


async def run_delegate(
    parent: SubTaskRunner, policy: DelegatePolicy, args: dict[str, Any]
) -> ToolResult:
    """Run the sub-tasks; workers share the parent's cancel and its remaining task time."""
    tasks = [str(t) for t in args.get("tasks", []) if str(t).strip()]
    n = worker_count(policy, args.get("max_workers"), len(tasks))
    if n == 0:
        return ToolResult(False, "delegate needs at least one non-empty task")
    queue = list(enumerate(tasks))
    results: list[tuple[int, str, SubTaskResult]] = []
    max_steps = min(policy.worker_max_steps, parent.max_steps)
    max_duration_ms = max(0, parent.ms_left())

    async def worker(w: int) -> None:
        session_id = f"{parent.session_id}/w{w + 1}"

        def sink(event: AgentEvent) -> None:
            parent.emit(WorkerEvent(w + 1, session_id, event))

        while queue:
            idx, sub_task = queue.pop(0)
            res = await parent.run_sub_task(
                sub_task, session_id=session_id, max_steps=max_steps,
                max_duration_ms=max_duration_ms, on_event=sink,
            )  # fmt: skip
            results.append((idx, sub_task, res))
            if res.outcome in ("cancelled", "time_ceiling"):
                return

    async with anyio.create_task_group() as tg:
        for w in range(n):
            tg.start_soon(worker, w)
    out = merge(results)
    note = f"{n} worker(s), {len(results)} of {len(tasks)} sub-task(s) run\n"
    return ToolResult(out.ok, note + out.text)
