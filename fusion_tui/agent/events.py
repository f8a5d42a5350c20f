"""What a running task reports, for the TUI and the headless CLI alike (plain data, no UI).

Consumers pass an `EventSink` callback to `run_task`; `to_json_line` gives the `--json` lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Outcome = Literal["completed", "cancelled", "time_ceiling", "max_steps", "error"]
RequestPurpose = Literal["step", "repair", "summary", "compaction", "chat"]
"""`chat`: a plain-chat turn (`fusion-tui chat`)."""


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
class PromptProgressed:
    step: int
    total: int
    cache: int
    processed: int


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
    ended: Literal["ok", "time_ceiling", "cancelled", "error", "deadline"] = "ok"


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
class StepFailed:
    """Two invalid replies in one step; `raw` is the last output, kept verbatim."""

    step: int
    error: str
    raw: str


@dataclass(frozen=True)
class Compacted:
    step: int
    tokens_before: int
    summary_chars: int
    note: str


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
    | PromptProgressed
    | RequestDone
    | ToolStarted
    | ToolFinished
    | StepFailed
    | Compacted
    | TaskOutcome
    | WorkerEvent
)
EventSink = Callable[[AgentEvent], None]


def to_json_line(event: AgentEvent) -> dict[str, Any] | None:
    """The `fusion-tui run --json` line for an event, or None for events it does not print."""
    if isinstance(event, ToolFinished):
        return {"event": "tool", "name": event.name, "ok": event.ok}
    if isinstance(event, TaskOutcome):
        return {"event": "outcome", "outcome": event.outcome, "session": event.session_id}
    if isinstance(event, RequestDone):
        data = asdict(event)
        data["event"] = "request"
        return data
    return None
