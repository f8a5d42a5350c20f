"""Real server: a SmolLM2 agent step is visible while it forms.

One task step on a managed one-slot daemon: the loop reports the request sent, the prompt read
(monotonic, ending at the total), and drafts of the reply whose last one is the reply whole; what
it calls is what runs; the task's first message shows the workspace's files.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent.approval import ApprovalGate, DenyAll
from fusion_tui.agent.events import (
    PromptProgressed,
    RequestDone,
    RequestSent,
    StepDraft,
    StepStarted,
    TaskOutcome,
    ToolStarted,
)
from fusion_tui.agent.loop import run_task
from fusion_tui.agent.prompt import MachineFacts, build_stable_prefix
from fusion_tui.agent.reply import parse_reply
from fusion_tui.agent.task import AgentConfig, AgentDeps
from fusion_tui.agent.tools.registry import CORE_TOOLS
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.template import TemplateFrame
from tests.server.real_backend import RealServer, server_fixture
from tests.unit.test_agent_fakes import FakeSlots

pytestmark = pytest.mark.server


server = server_fixture("live-home", parallel=1, ctx=4096, extra_args=("-b", "256"))


async def test_a_real_step_streams_progress_and_its_action_forming(
    server: RealServer, tmp_path: Path
) -> None:
    assert server.record is not None
    (tmp_path / "hello.py").write_text('print("hello, world")\n')
    (tmp_path / "util.py").write_text("def add(a, b):\n    return a + b\n")
    events: list[Any] = []
    bodies: list[dict[str, Any]] = []

    def completion(client: LlamaClient, body: dict[str, Any]) -> Any:
        bodies.append(body)
        return client.stream_completion(body)

    async with LlamaClient(server.record.url) as client:
        props = await client.props()
        frame = await TemplateFrame.probe(client.apply_template)
        facts = MachineFacts("SmolLM2-135M-Instruct", props.total_slots, props.n_ctx)
        deps = AgentDeps(
            completion=lambda body: completion(client, body),
            slots=FakeSlots(side=-1),
            gate=ApprovalGate(DenyAll()),
            workspace=Workspace(tmp_path),
            frame=frame,
            stable_prefix=build_stable_prefix(CORE_TOOLS, facts),
            n_ctx=props.n_ctx,
            on_event=events.append,
        )
        config = AgentConfig(
            max_steps=1, n_predict=96, finalize=False, sampling={"temperature": 0.0}
        )
        res = await run_task("read hello.py and tell me what it prints", session_id="live",
                             deps=deps, config=config)  # fmt: skip
    assert 'hello.py\n```python\nprint("hello, world")\n```' in bodies[0]["prompt"]  # in the chat
    step1 = [e for e in events if getattr(e, "step", None) == 1]
    assert isinstance(step1[0], StepStarted)
    assert isinstance(step1[1], RequestSent) and step1[1].purpose == "step"
    progress = [e for e in step1 if isinstance(e, PromptProgressed)]
    assert progress, "no prompt progress from the server"
    assert [p.processed for p in progress] == sorted(p.processed for p in progress)
    assert progress[-1].processed == progress[-1].total
    done = next(e for e in step1 if isinstance(e, RequestDone))
    assert done.ended == "ok"
    assert progress[-1].total == done.prompt_n + done.cache_n
    drafts = [e for e in step1 if isinstance(e, StepDraft)]
    assert drafts and drafts[-1].done
    final = drafts[-1]
    said = next(m.text for m in res.packer.messages if m.role == "assistant")
    assert final.text == said  # the live text is the reply, whole, at the stream's end
    for call in parse_reply(said).tool_calls:  # what the reply calls is what runs
        assert any(isinstance(e, ToolStarted) and e.name == call.name for e in step1)
    assert isinstance(events[-1], TaskOutcome)
    print(f"\nstep 1: {said[:200]!r} · {len(drafts)} drafts · {len(progress)} progress")
