"""delegate: worker-count rules, parallel sub-sessions, merged results."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent.delegate import DelegatePolicy, worker_count
from fusion_tui.agent.events import TaskOutcome, ToolFinished, WorkerEvent
from fusion_tui.agent.loop import run_task
from tests.fakes.clock import FakeClock
from tests.unit.test_agent_fakes import FakeSlots, Say, Script, act, make_deps


@pytest.mark.parametrize(
    ("policy", "requested", "n_tasks", "expected"),
    [
        (DelegatePolicy(total_slots=4), None, 5, 1),  # local pool, nothing asked: one worker
        (DelegatePolicy(total_slots=4, configured_workers=2), None, 5, 2),  # config set
        (DelegatePolicy(total_slots=4), 8, 5, 3),  # explicit: up to pool less the side slot
        (DelegatePolicy(total_slots=4), 2, 5, 2),
        (DelegatePolicy(total_slots=4, reserved_side_slot=False), 8, 5, 4),
        (DelegatePolicy(total_slots=1), 4, 5, 1),
        (DelegatePolicy(total_slots=4), 3, 2, 2),  # never more workers than tasks
        (DelegatePolicy(total_slots=1, slot_affine=False), None, 9, 4),  # remote: default
        (DelegatePolicy(total_slots=1, slot_affine=False, configured_workers=6), 2, 9, 6),
    ],
)
def test_worker_count_rules(
    policy: DelegatePolicy, requested: int | None, n_tasks: int, expected: int
) -> None:
    assert worker_count(policy, requested, n_tasks) == expected


class RoutedScript(Script):
    """Answers by which sub-task the prompt holds (workers run concurrently)."""

    def __call__(self, body: dict[str, Any]) -> Any:
        self.bodies.append(body)
        prompt = body["prompt"]
        last_user = prompt.rsplit("<|im_start|>user\n", 1)[-1]
        if "sub-task(s) run" in last_user:  # the delegate result came back
            say = act("finish", summary="merged")
        elif "sub A" in last_user:
            say = act("finish", summary="A found 3 files")
        elif "sub B" in last_user or "Reply again in the format" in last_user:
            say = Say("<tool_call>never valid</tool_call>")
        else:
            say = act("delegate", tasks=["sub A", "sub B"], max_workers=2)
        return self._gen(say, body)


async def test_fan_out_runs_sub_sessions_and_is_ok_when_any_worker_produced(
    tmp_path: Path,
) -> None:
    clock = FakeClock(start=1000.0)
    script = RoutedScript(clock, [])
    events: list[Any] = []
    slots = FakeSlots()
    deps = make_deps(tmp_path, script, events=events, slots=slots,
                     delegate=DelegatePolicy(total_slots=4))  # fmt: skip
    res = await run_task("split the work", session_id="p", deps=deps)
    assert res.outcome == "completed" and res.summary == "merged"
    tool = next(e for e in events if isinstance(e, ToolFinished) and e.name == "delegate")
    assert tool.ok
    assert "2 worker(s), 2 of 2 sub-task(s) run" in tool.result
    assert "A found 3 files" in tool.result and "(error)" in tool.result
    worker_sessions = {e.session_id for e in events if isinstance(e, WorkerEvent)}
    assert worker_sessions == {"p/w1", "p/w2"}
    outcomes = [e.event for e in events if isinstance(e, WorkerEvent)
                and isinstance(e.event, TaskOutcome)]  # fmt: skip
    assert sorted(o.outcome for o in outcomes) == ["completed", "error"]
    # workers open with the parent's system message, so its cached prefix serves them too
    worker_bodies = [
        b for b in script.bodies
        if b["prompt"].split("<|im_start|>user\n", 1)[1].startswith(("sub A", "sub B"))
    ]  # fmt: skip
    assert worker_bodies
    system = script.bodies[0]["prompt"].split("<|im_start|>user\n", 1)[0]
    assert all(b["prompt"].startswith(system) for b in worker_bodies)
