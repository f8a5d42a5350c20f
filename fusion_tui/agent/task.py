"""What one agent task is given and gives back: `AgentConfig`, `AgentDeps`, `TaskResult`; and
what its parts share while it runs: `TaskFiles` and `TaskScope`, built once by the step loop and
handed to its reply runner and its checks, so the three read and change one record of the files.

Kept apart from the step loop (`loop.py`) so the session runner, the benches and the tests can
build a task's inputs without reading the loop; `loop` imports them back for its callers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from fusion_tui.agent.approval import ApprovalGate
from fusion_tui.agent.deadline import (
    DEFAULT_FINALIZATION_MS,
    DEFAULT_MAX_DURATION_MS,
    CancelToken,
)
from fusion_tui.agent.delegate import DelegatePolicy
from fusion_tui.agent.events import EventSink, Outcome, RequestDone
from fusion_tui.agent.file_view import FileView
from fusion_tui.agent.prompt import PrefixReuse, PromptPacker
from fusion_tui.agent.protocol import ToolSpec
from fusion_tui.agent.request import CompletionFn, SlotChooser
from fusion_tui.agent.tools.registry import CORE_TOOLS, DELEGATE
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.clock import Clock, MonotonicClock
from fusion_tui.server.template import TemplateFrame


@dataclass(frozen=True)
class AgentConfig:
    max_steps: int = 40
    max_duration_ms: int = DEFAULT_MAX_DURATION_MS
    finalization_ms: int = DEFAULT_FINALIZATION_MS
    n_predict: int = 2048
    fit_whole_files: bool = True
    """Raise a step's `n_predict` to what the largest file in the chat needs to be given in
    full (`loop.step_n_predict`); off when the user set the cap (`agent.maxTokens`)."""
    long_files_in_part: bool = True
    """Show a long Python file in part: the definitions the task and the failing tests name
    in full, the others by name (`file_view.py`); off: every file whole."""
    summary_n_predict: int = 512
    max_failed_steps: int = 3
    compact_threshold: float = 0.85
    finalize: bool = True
    """Run the reserved summary step on time_ceiling/max_steps (workers don't)."""
    sampling: dict[str, Any] = field(default_factory=lambda: {"temperature": 0.2})
    shell_timeout_s: float = 120.0
    test_cmd: str | None = None
    """Run after every step that changed files; a failure goes back to the model."""
    test_rounds: int = 1
    """Replies sent back because the checks failed, at most, per attempt (then a fresh attempt,
    or `tests_failed`). One: on HumanEval the 1.5B coder's second fix of an attempt was nearly
    always its first given back; a fresh attempt is a new chance (`retry.py`)."""
    retries: int = 5
    """Fresh attempts after the first, when its fixes cannot pass the checks (`retry.py`). Five
    with one fix each cost at most the twelve replies three with two fixes did."""
    test_timeout_s: float = 300.0
    find_tests: bool = True
    """Without a test command: run the test files shown with the task, else the docstring
    examples of the Python files changed, as the tests (`checks.py`)."""


@dataclass
class AgentDeps:
    """Everything the loop talks to; all injected."""

    completion: CompletionFn
    slots: SlotChooser
    gate: ApprovalGate
    workspace: Workspace
    frame: TemplateFrame
    stable_prefix: str
    """From `prompt.build_stable_prefix(tools_for(...), machine_facts, project_facts)`."""
    n_ctx: int
    context_size: Callable[[], int] | None = None
    """The slot's context now, read before each step and compaction (it changes when the
    session moves to another endpoint); None: `n_ctx` throughout."""
    prefix_reuse: PrefixReuse = "full"
    clock: Clock = field(default_factory=MonotonicClock)
    on_event: EventSink = field(default=lambda e: None)
    tools: tuple[ToolSpec, ...] = CORE_TOOLS
    delegate: DelegatePolicy | None = None
    """When set, the `delegate` tool is offered (workers run under this policy)."""
    workspace_facts: bool = True
    """Show the task's files and the workspace's file names in the task's first message
    (`chat_files.py`); off: the task alone."""
    count_tokens: Callable[[str], Awaitable[int]] | None = None
    """The server's token count of a text (`/tokenize`), asked before compacting a prompt
    that has not been counted yet; None: the estimate decides."""


def tools_for(deps_tools: tuple[ToolSpec, ...], with_delegate: bool) -> tuple[ToolSpec, ...]:
    base = tuple(t for t in deps_tools if t.name != "delegate")
    return (*base, DELEGATE) if with_delegate else base


@dataclass
class TaskResult:
    outcome: Outcome
    summary: str
    steps: int
    session_id: str
    packer: PromptPacker
    """The whole transcript (append-only); persist `packer.to_dict()` with the session."""
    requests: list[RequestDone] = field(default_factory=list)
    error: str = ""
    slot: int = -1
    archived: list[dict[str, Any]] = field(default_factory=list)
    """Transcripts replaced by a compaction, oldest first (kept for the session, not the prompt)."""
    changed: list[str] = field(default_factory=list)
    """Files the task changed, in order."""
    checked: str = ""
    """What vouches for a completed change: "tests pass", "docstring examples pass" (either
    "tests and the task's examples pass" or "the task's examples pass" when the task gave
    examples), or "not tested" ("" for other outcomes)."""


def with_config(config: AgentConfig, **changes: Any) -> AgentConfig:
    return dataclasses.replace(config, **changes)


@dataclass
class TaskFiles:
    """What one task knows of its workspace's files."""

    texts: dict[str, str] = field(default_factory=dict)
    """The files in the chat (shown with the task, read or written since): path → text."""
    known: set[str] = field(default_factory=set)
    """Every file path of the workspace the task knows of."""
    changed: list[str] = field(default_factory=list)
    """Files this task wrote, in order."""
    before: dict[str, str | None] = field(default_factory=dict)
    """Each written file's text before the task first wrote it (None: it did not exist)."""
    views: dict[str, FileView] = field(default_factory=dict)
    """Long files shown in part with the task: path → what was shown (`file_view.py`)."""

    def wrote(self, path: str, text: str) -> None:
        """The task wrote `text` to `path`: in the chat as written, and changed by the task."""
        self.texts[path] = text
        self.known.add(path)
        if path not in self.changed:
            self.changed.append(path)

    def left_changed(self) -> list[str]:
        """The files the task leaves changed: written, and not put back as they were. Why: a
        task whose attempts all failed and were undone ended "changed frac.py · ... they are
        as they were"."""
        return [
            p for p in self.changed if p not in self.before or self.texts.get(p) != self.before[p]
        ]


@dataclass(frozen=True)
class TaskScope:
    """Where a task's parts send their events, and the task's clock, cancel and step."""

    emit: EventSink
    clock: Clock
    cancel: CancelToken
    step: Callable[[], int]
    """The step being run, read when an event goes out."""
