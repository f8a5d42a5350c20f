"""What a running task reports, for the TUI and the headless CLI alike (plain data, no UI).

Consumers pass an `EventSink` callback to `run_task`; `to_json_line` gives the `--json` lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

# How a task ends (`Outcome`) is one list, kept with the session records that store it.
from fusion_tui.sessions.records import Outcome

RequestPurpose = Literal["step", "repair", "summary", "compaction", "chat"]
"""`chat`: a plain-chat turn (`fusion-tui chat`)."""
DraftKind = Literal["prose", "file", "call"]
"""What a reply being written is writing at its end (`reply_draft.py`)."""


@dataclass(frozen=True)
class StepStarted:
    step: int
    max_steps: int
    time_left_ms: int


@dataclass(frozen=True)
class TokenDelta:
    step: int
    text: str
    purpose: RequestPurpose = "step"


@dataclass(frozen=True)
class RequestSent:
    """A request of a step went out; until progress or a token arrives the step is waiting for
    the server (`id_slot` -1: for whichever slot the server picks)."""

    step: int
    purpose: RequestPurpose
    id_slot: int
    prompt_chars: int


@dataclass(frozen=True)
class PromptProgressed:
    step: int
    total: int
    cache: int
    processed: int
    tok_s: float | None = None
    """Prompt evaluation rate since the first progress report of this request (None at first)."""
    purpose: RequestPurpose = "step"


@dataclass(frozen=True)
class StepDraft:
    """The step's output so far, read as a draft (`reply_draft.py`); sent throttled while the
    model writes (at most every DRAFT_INTERVAL_S) and once more with `done` at the stream's end.

    `kind`: what the end of the output is (prose, a file's code block, a tool call); `name`: the
    file's path or the tool's name once written whole; `args`: a call's arguments so far; `body`:
    the code so far, or the prose; `text`: the raw output so far; `predicted_n`: tokens so far
    (one per streamed piece); `tok_s`: generation rate since the first token.
    """

    step: int
    purpose: RequestPurpose
    text: str
    kind: DraftKind
    name: str | None
    args: dict[str, Any]
    body: str
    predicted_n: int
    tok_s: float | None
    done: bool = False


@dataclass(frozen=True)
class RequestDone:
    """Telemetry of one completion request (also sent when it was cut short: `ended` says how)."""

    step: int
    purpose: RequestPurpose
    id_slot: int
    prompt_n: int
    cache_n: int
    predicted_n: int
    ttft_ms: float | None
    predicted_per_second: float
    duration_ms: float
    prompt_chars: int
    ended: Literal["ok", "time_ceiling", "cancelled", "error", "deadline", "repeated"] = "ok"
    endpoint: str | None = None
    """The label of the endpoint that served it (set only with several endpoints)."""
    moved_from: str | None = None
    """The endpoint the session left for this request (failover)."""


@dataclass(frozen=True)
class ToolStarted:
    step: int
    name: str
    args: dict[str, Any]


@dataclass(frozen=True)
class ToolFinished:
    step: int
    name: str
    args: dict[str, Any]
    ok: bool
    result: str
    duration_ms: float
    detail: str = ""


@dataclass(frozen=True)
class RepeatBlocked:
    """The loop guard refused to run a call made before since the workspace last changed (its
    result could not differ); `times`: how often it was made, this time included.

    `stuck` False: the model got the corrective message `message` instead of the call's result;
    True: it repeated the call after that, and the task is stuck: it ends so, unless a fresh
    attempt takes over (a `Retried` event follows).
    """

    step: int
    name: str
    args: dict[str, Any]
    error: str
    times: int
    message: str
    stuck: bool = False

    def shown(self) -> tuple[str, dict[str, Any]]:
        """The name and arguments a user reads: a whole reply given again is "the same edits",
        not the guard's key for it (a hash)."""
        if self.name == WHOLE_REPLY:
            return "the same edits", {}
        return self.name, dict(self.args)


WHOLE_REPLY = "reply"
"""The loop guard's name for a whole reply: one given again word for word, with nothing changed
since, is a loop like a repeated call (seen: thirty identical refused blocks)."""


@dataclass(frozen=True)
class StepFailed:
    """Two invalid replies in one step; `raw` is the last output, kept verbatim."""

    step: int
    error: str
    raw: str


@dataclass(frozen=True)
class TestRan:
    """The task's test command, or the docstring examples (`checks.py`), ran after the step's
    edits (`round` counts from 1; 0: the test command before any change)."""

    step: int
    command: str
    ok: bool
    exit: int | None
    tail: str
    round: int
    duration_ms: float


@dataclass(frozen=True)
class FileChanged:
    """A file of the workspace was written by the step (its diff, for the user to follow)."""

    step: int
    path: str
    diff: str
    how: str
    """whole, merged, view or search (`edits.ResolvedEdit.how`), restored (an undo) or removed
    (the undo of a file the agent created)."""


@dataclass(frozen=True)
class TranscriptCompacted:
    """The agent replaced its older steps in the prompt by a summary (the session keeps them)."""

    step: int
    tokens_before: int
    summary_chars: int
    note: str


@dataclass(frozen=True)
class Retried:
    """The attempt's fixes could not get past its failing checks: its files were put back and
    the step that wrote them is asked again, more varied (`retry.py`)."""

    step: int
    attempt: int
    """The fresh attempt about to start: 2 is the first retry."""
    attempts: int
    """Attempts allowed in all (the first and `agent.retries`)."""
    reason: str
    restored: tuple[str, ...]
    """Files put back as they were before the failed attempt."""


@dataclass(frozen=True)
class TaskOutcome:
    outcome: Outcome
    summary: str
    steps: int
    session_id: str
    error: str = ""
    workers: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class WorkerEvent:
    """An event of a delegate worker's sub-session, wrapped so the UI can group it."""

    worker: int
    session_id: str
    event: AgentEvent


AgentEvent = (
    StepStarted
    | TokenDelta
    | RequestSent
    | PromptProgressed
    | StepDraft
    | RequestDone
    | ToolStarted
    | ToolFinished
    | StepFailed
    | RepeatBlocked
    | TranscriptCompacted
    | Retried
    | TestRan
    | FileChanged
    | TaskOutcome
    | WorkerEvent
)
EventSink = Callable[[AgentEvent], None]


def first_line(text: str, limit: int = 300) -> str:
    """The first non-empty line of a tool's result, cut to `limit` characters."""
    for line in text.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def tool_error(event: ToolFinished) -> str:
    """Why a tool call failed, in one line: the same text in `run --json` and the human output."""
    return first_line(event.result) or "failed"


def retry_line(event: Retried) -> str:
    """Why the attempt was done over and what was put back, in words: the CLI and the TUI."""
    put_back = f"; {', '.join(event.restored)} put back as before" if event.restored else ""
    return f"{event.reason}{put_back}; the step is asked again, more varied"


def to_json_line(event: AgentEvent) -> dict[str, Any] | None:
    """The `fusion-tui run --json` line for an event, or None for events it does not print."""
    if isinstance(event, ToolFinished):
        line: dict[str, Any] = {"event": "tool", "name": event.name, "ok": event.ok}
        if not event.ok:
            line["error"] = tool_error(event)
        return line
    if isinstance(event, TaskOutcome):
        return {"event": "outcome", "outcome": event.outcome, "session": event.session_id}
    if isinstance(event, TestRan):
        return {"event": "test", "command": event.command, "ok": event.ok, "exit": event.exit,
                "tail": event.tail, "round": event.round}  # fmt: skip
    if isinstance(event, Retried):
        return {"event": "retry", "attempt": event.attempt, "attempts": event.attempts,
                "reason": event.reason, "restored": list(event.restored)}  # fmt: skip
    if isinstance(event, RequestDone):
        data = asdict(event)
        for key in ("endpoint", "moved_from"):  # one endpoint: the lines stay as they were
            if data[key] is None:
                del data[key]
        data["event"] = "request"
        return data
    return None
