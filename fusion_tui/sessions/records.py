"""The records a session keeps: transcript entries, the server a pin is for, request telemetry
and how each turn ended. Each has `to_dict` and a strict `from_dict` (see `fields.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

from fusion_tui.sessions.fields import (
    read_bool,
    read_choice,
    read_int,
    read_num,
    read_obj,
    read_opt_str,
    read_str,
)

Role = Literal["system", "user", "assistant", "tool"]
Outcome = Literal[
    "completed",
    "cancelled",
    "time_ceiling",
    "max_steps",
    "error",
    "stuck",
    "no_answer",
    "no_change",
    "tests_failed",
]
"""How an agent task ends (docs/cli.md): `stuck`, the loop guard stopped a repeat; `no_answer`,
no real answer; `no_change`, a change task changed no file; `tests_failed`, files changed but the
test command still fails after the last round."""
ROLES: tuple[str, ...] = get_args(Role)
OUTCOMES: tuple[str, ...] = get_args(Outcome)


@dataclass
class Message:
    """One transcript entry. `partial` marks a turn cut short (cancelled, crash, stall)."""

    role: Role
    content: str
    tool_name: str | None = None
    tool_arguments: dict[str, Any] | None = None
    tool_result: str | None = None
    partial: bool = False
    partial_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_name is not None:
            d["tool_name"] = self.tool_name
        if self.tool_arguments is not None:
            d["tool_arguments"] = self.tool_arguments
        if self.tool_result is not None:
            d["tool_result"] = self.tool_result
        if self.partial:
            d["partial"] = True
            d["partial_reason"] = self.partial_reason or ""
        return d

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> Message:
        d = read_obj(raw, where)
        args = d.get("tool_arguments")
        if args is not None:
            args = read_obj(args, f"{where}.tool_arguments")
        return cls(
            role=read_choice(d, "role", where, ROLES),  # type: ignore[arg-type]
            content=read_str(d, "content", where),
            tool_name=read_opt_str(d, "tool_name", where),
            tool_arguments=args,
            tool_result=read_opt_str(d, "tool_result", where),
            partial=read_bool(d, "partial", where, default=False),
            partial_reason=read_opt_str(d, "partial_reason", where),
        )


@dataclass(frozen=True)
class ServerIdentity:
    """Which server a pin is valid for: a different model or launch means a cold cache."""

    model_path: str
    launch_id: str | None
    total_slots: int

    def same_server(self, other: ServerIdentity | None) -> bool:
        """Same model and same launch (the slot count is checked by the pool on its own)."""
        return (
            other is not None
            and other.model_path == self.model_path
            and other.launch_id == self.launch_id
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "model_path": self.model_path,
            "launch_id": self.launch_id,
            "total_slots": self.total_slots,
        }

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> ServerIdentity:
        d = read_obj(raw, where)
        return cls(
            model_path=read_str(d, "model_path", where),
            launch_id=read_opt_str(d, "launch_id", where),
            total_slots=read_int(d, "total_slots", where),
        )


@dataclass(frozen=True)
class RequestRecord:
    """Telemetry of one request to the server (the `request` event of `run --json`)."""

    id_slot: int
    prompt_n: int
    cache_n: int
    ttft_ms: float
    predicted_per_second: float
    time: float
    side_call: bool = False
    endpoint: str | None = None
    """Label of the endpoint that served it (None: the only one)."""
    moved_from: str | None = None
    """The endpoint the session left for this request (failover), if any."""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id_slot": self.id_slot,
            "prompt_n": self.prompt_n,
            "cache_n": self.cache_n,
            "ttft_ms": self.ttft_ms,
            "predicted_per_second": self.predicted_per_second,
            "time": self.time,
            "side_call": self.side_call,
        }
        if self.endpoint is not None:
            out["endpoint"] = self.endpoint
        if self.moved_from is not None:
            out["moved_from"] = self.moved_from
        return out

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> RequestRecord:
        d = read_obj(raw, where)
        return cls(
            id_slot=read_int(d, "id_slot", where),
            prompt_n=read_int(d, "prompt_n", where),
            cache_n=read_int(d, "cache_n", where),
            ttft_ms=read_num(d, "ttft_ms", where),
            predicted_per_second=read_num(d, "predicted_per_second", where),
            time=read_num(d, "time", where),
            side_call=read_bool(d, "side_call", where, default=False),
            endpoint=read_opt_str(d, "endpoint", where),
            moved_from=read_opt_str(d, "moved_from", where),
        )


@dataclass(frozen=True)
class TurnRecord:
    """How one user turn ended."""

    outcome: Outcome
    time: float
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "time": self.time, "detail": self.detail}

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> TurnRecord:
        d = read_obj(raw, where)
        detail = read_opt_str(d, "detail", where) or ""
        return cls(
            outcome=read_choice(d, "outcome", where, OUTCOMES),  # type: ignore[arg-type]
            time=read_num(d, "time", where),
            detail=detail,
        )
