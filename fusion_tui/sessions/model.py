"""Provides the session model: what a coding session remembers between turns and app runs.

A session keeps its transcript, the slot its prompt lives in and the server that slot belongs to,
so that a resumed session can land back on its warm KV cache. `from_dict` is strict: a file that
was edited by hand or torn gets a `SessionFileError` naming the bad field, never a traceback.
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from fusion_tui.clock import WallClock

SCHEMA_VERSION = 2
"""Version of the on-disk layout written by this code (see `migrations.py`). Version 2 added
`pinned_endpoint` (the label of the endpoint the pin belongs to; older files: the default)."""

Role = Literal["system", "user", "assistant", "tool"]
Outcome = Literal[
    "completed", "cancelled", "time_ceiling", "max_steps", "error", "stuck", "no_answer"
]
ROLES: tuple[str, ...] = get_args(Role)
OUTCOMES: tuple[str, ...] = get_args(Outcome)

SESSION_ID_RE = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9]{3}-[0-9a-f]{6}$")
"""`YYYYMMDD-HHMMSS-mmm-xxxxxx` (UTC): sorts by creation time and is safe as a file name."""


class SessionFileError(ValueError):
    """A session (file or dict) is malformed; the message names the field and the file."""

    def __init__(self, message: str, *, field: str = "", path: str = "") -> None:
        self.field = field
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(f"{where}{message}")


def new_session_id(now: float | None = None) -> str:
    """A sortable id: UTC creation time to the millisecond plus 24 random bits."""
    t = time.time() if now is None else now
    seconds, millis = divmod(round(t * 1000), 1000)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(seconds))
    return f"{stamp}-{millis:03d}-{secrets.token_hex(3)}"


def is_session_id(text: str) -> bool:
    return bool(SESSION_ID_RE.match(text))


# --- strict field readers ------------------------------------------------------------------


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _get(d: dict[str, Any], key: str, where: str, check: Callable[[Any], bool], what: str) -> Any:
    name = f"{where}.{key}" if where else key
    if key not in d:
        raise SessionFileError(f"field {name!r} is missing", field=name)
    value = d[key]
    if not check(value):
        raise SessionFileError(
            f"field {name!r} should be {what}, got {_type_name(value)}", field=name
        )
    return value


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return (isinstance(v, int | float) and not isinstance(v, bool)) and v == v


def _str(d: dict[str, Any], key: str, where: str = "") -> str:
    return str(_get(d, key, where, lambda v: isinstance(v, str), "a string"))


def _opt_str(d: dict[str, Any], key: str, where: str = "") -> str | None:
    if d.get(key) is None:
        return None
    return _str(d, key, where)


def _int(d: dict[str, Any], key: str, where: str = "") -> int:
    return int(_get(d, key, where, _is_int, "an integer"))


def _opt_int(d: dict[str, Any], key: str, where: str = "") -> int | None:
    if d.get(key) is None:
        return None
    return _int(d, key, where)


def _num(d: dict[str, Any], key: str, where: str = "") -> float:
    return float(_get(d, key, where, _is_num, "a number"))


def _bool(d: dict[str, Any], key: str, where: str = "", default: bool | None = None) -> bool:
    if default is not None and key not in d:
        return default
    return bool(_get(d, key, where, lambda v: isinstance(v, bool), "true or false"))


def _list(d: dict[str, Any], key: str, where: str = "") -> list[Any]:
    if key not in d:
        return []
    return list(_get(d, key, where, lambda v: isinstance(v, list), "a list"))


def _obj(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SessionFileError(
            f"field {name!r} should be an object, got {_type_name(value)}", field=name
        )
    return value


def _choice(d: dict[str, Any], key: str, where: str, allowed: tuple[str, ...]) -> str:
    value = _str(d, key, where)
    if value not in allowed:
        name = f"{where}.{key}" if where else key
        raise SessionFileError(
            f"field {name!r} is {value!r}, expected one of {', '.join(allowed)}", field=name
        )
    return value


# --- the model -----------------------------------------------------------------------------


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
        d = _obj(raw, where)
        args = d.get("tool_arguments")
        if args is not None:
            args = _obj(args, f"{where}.tool_arguments")
        return cls(
            role=_choice(d, "role", where, ROLES),  # type: ignore[arg-type]
            content=_str(d, "content", where),
            tool_name=_opt_str(d, "tool_name", where),
            tool_arguments=args,
            tool_result=_opt_str(d, "tool_result", where),
            partial=_bool(d, "partial", where, default=False),
            partial_reason=_opt_str(d, "partial_reason", where),
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
        d = _obj(raw, where)
        return cls(
            model_path=_str(d, "model_path", where),
            launch_id=_opt_str(d, "launch_id", where),
            total_slots=_int(d, "total_slots", where),
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
        d = _obj(raw, where)
        return cls(
            id_slot=_int(d, "id_slot", where),
            prompt_n=_int(d, "prompt_n", where),
            cache_n=_int(d, "cache_n", where),
            ttft_ms=_num(d, "ttft_ms", where),
            predicted_per_second=_num(d, "predicted_per_second", where),
            time=_num(d, "time", where),
            side_call=_bool(d, "side_call", where, default=False),
            endpoint=_opt_str(d, "endpoint", where),
            moved_from=_opt_str(d, "moved_from", where),
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
        d = _obj(raw, where)
        detail = _opt_str(d, "detail", where) or ""
        return cls(
            outcome=_choice(d, "outcome", where, OUTCOMES),  # type: ignore[arg-type]
            time=_num(d, "time", where),
            detail=detail,
        )


@dataclass
class Session:
    """A coding session: transcript, pin, server identity, stable-prefix hash and telemetry."""

    id: str
    title: str = ""
    created: float = 0.0
    updated: float = 0.0
    workspace: str | None = None
    messages: list[Message] = field(default_factory=list)
    pinned_slot: int | None = None
    pinned_endpoint: str | None = None
    """Label of the endpoint `pinned_slot` is on; None: the default (managed, else first)."""
    server: ServerIdentity | None = None
    prefix_hash: str | None = None
    requests: list[RequestRecord] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)

    @classmethod
    def new(
        cls, title: str = "", workspace: str | None = None, now: float | None = None
    ) -> Session:
        t = time.time() if now is None else now
        return cls(id=new_session_id(t), title=title, created=t, updated=t, workspace=workspace)

    def touch(self, now: float | None = None) -> None:
        self.updated = time.time() if now is None else now

    # --- turn bookkeeping (the chat, the agent and `fusion-tui run` share it) -------------------

    def begin_turn(
        self, text: str, *, workspace: str | None = None, clock: WallClock = time.time
    ) -> None:
        """The user's words start a turn: kept first (an untitled session is named after them),
        so nothing that fails later loses them."""
        self.messages.append(Message(role="user", content=text))
        if not self.title:
            self.title = " ".join(text.split())[:60]
        if workspace is not None:
            self.workspace = workspace
        self.touch(clock())

    def end_turn(
        self, outcome: Outcome, answer: str | None, detail: str, clock: WallClock = time.time
    ) -> None:
        """How the turn ended. An unfinished turn keeps its partial answer, marked with the
        outcome; `answer=None` means no answer was ever asked for (the server never came up)."""
        partial = outcome != "completed"
        if answer is not None and (answer or partial):
            self.messages.append(
                Message(
                    role="assistant",
                    content=answer,
                    partial=partial,
                    partial_reason=outcome if partial else None,
                )
            )
        now = clock()
        self.turns.append(TurnRecord(outcome, now, detail))
        self.touch(now)

    def record_request(
        self,
        *,
        id_slot: int,
        prompt_n: int,
        cache_n: int,
        ttft_ms: float,
        predicted_per_second: float,
        side_call: bool = False,
        clock: WallClock = time.time,
    ) -> RequestRecord:
        """One request's telemetry, stamped with the wall clock, appended and returned."""
        record = RequestRecord(
            id_slot=id_slot,
            prompt_n=prompt_n,
            cache_n=cache_n,
            ttft_ms=round(ttft_ms, 1),
            predicted_per_second=round(predicted_per_second, 2),
            time=clock(),
            side_call=side_call,
        )
        self.requests.append(record)
        return record

    @property
    def last_outcome(self) -> str | None:
        return self.turns[-1].outcome if self.turns else None

    def to_dict(self) -> dict[str, Any]:
        """The on-disk form without `schema_version` (the store adds it)."""
        return {
            "id": self.id,
            "title": self.title,
            "created": self.created,
            "updated": self.updated,
            "workspace": self.workspace,
            "pinned_slot": self.pinned_slot,
            "pinned_endpoint": self.pinned_endpoint,
            "server": None if self.server is None else self.server.to_dict(),
            "prefix_hash": self.prefix_hash,
            "messages": [m.to_dict() for m in self.messages],
            "requests": [r.to_dict() for r in self.requests],
            "turns": [t.to_dict() for t in self.turns],
        }

    @classmethod
    def from_dict(cls, raw: Any) -> Session:
        """Parse the current schema; unknown keys are ignored, wrong types are refused."""
        d = _obj(raw, "session")
        sid = _str(d, "id")
        if not is_session_id(sid):
            raise SessionFileError(f"field 'id' is not a session id: {sid!r}", field="id")
        server = d.get("server")
        return cls(
            id=sid,
            title=_str(d, "title"),
            created=_num(d, "created"),
            updated=_num(d, "updated"),
            workspace=_opt_str(d, "workspace"),
            pinned_slot=_opt_int(d, "pinned_slot"),
            pinned_endpoint=_opt_str(d, "pinned_endpoint"),
            server=None if server is None else ServerIdentity.from_dict(server, "server"),
            prefix_hash=_opt_str(d, "prefix_hash"),
            messages=[
                Message.from_dict(m, f"messages[{i}]") for i, m in enumerate(_list(d, "messages"))
            ],
            requests=[
                RequestRecord.from_dict(r, f"requests[{i}]")
                for i, r in enumerate(_list(d, "requests"))
            ],
            turns=[TurnRecord.from_dict(t, f"turns[{i}]") for i, t in enumerate(_list(d, "turns"))],
        )
