"""Provides the session model: what a coding session remembers between turns and app runs.

A session keeps its transcript, the slot its prompt lives in and the server that slot belongs to,
so that a resumed session can land back on its warm KV cache. `from_dict` is strict: a file that
was edited by hand or torn gets a `SessionFileError` naming the bad field, never a traceback
(the readers are in `fields.py`; the records a session keeps, `Message` and the rest, in
`records.py`).
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

from fusion_tui.clock import WallClock
from fusion_tui.sessions.fields import (
    SessionFileError,
    read_list,
    read_num,
    read_obj,
    read_opt_int,
    read_opt_str,
    read_str,
)
from fusion_tui.sessions.records import (
    Message,
    Outcome,
    RequestRecord,
    ServerIdentity,
    TurnRecord,
)

__all__ = [
    "SCHEMA_VERSION",
    "Message",
    "Outcome",
    "RequestRecord",
    "ServerIdentity",
    "Session",
    "SessionFileError",
    "TurnRecord",
    "WallClock",
    "is_session_id",
    "new_session_id",
]
"""The session's records and its error live in `records.py` and `fields.py`; they are imported
from here by most of the code, so this module stays the one place to import the model from."""

SCHEMA_VERSION = 2
"""Version of the on-disk layout written by this code (see `migrations.py`). Version 2 added
`pinned_endpoint` (the label of the endpoint the pin belongs to; older files: the default)."""

SESSION_ID_RE = re.compile(r"^[0-9]{8}-[0-9]{6}-[0-9]{3}-[0-9a-f]{6}$")
"""`YYYYMMDD-HHMMSS-mmm-xxxxxx` (UTC): sorts by creation time and is safe as a file name."""


def new_session_id(now: float | None = None) -> str:
    """A sortable id: UTC creation time to the millisecond plus 24 random bits."""
    t = time.time() if now is None else now
    seconds, millis = divmod(round(t * 1000), 1000)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(seconds))
    return f"{stamp}-{millis:03d}-{secrets.token_hex(3)}"


def is_session_id(text: str) -> bool:
    return bool(SESSION_ID_RE.match(text))


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
    def brand_new(self) -> bool:
        """No request of its own was answered yet (side calls do not count): placed as a new
        session, wherever its turns may already be written."""
        return not any(not r.side_call for r in self.requests)

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
        d = read_obj(raw, "session")
        sid = read_str(d, "id")
        if not is_session_id(sid):
            raise SessionFileError(f"field 'id' is not a session id: {sid!r}", field="id")
        server = d.get("server")
        return cls(
            id=sid,
            title=read_str(d, "title"),
            created=read_num(d, "created"),
            updated=read_num(d, "updated"),
            workspace=read_opt_str(d, "workspace"),
            pinned_slot=read_opt_int(d, "pinned_slot"),
            pinned_endpoint=read_opt_str(d, "pinned_endpoint"),
            server=None if server is None else ServerIdentity.from_dict(server, "server"),
            prefix_hash=read_opt_str(d, "prefix_hash"),
            messages=[
                Message.from_dict(m, f"messages[{i}]")
                for i, m in enumerate(read_list(d, "messages"))
            ],
            requests=[
                RequestRecord.from_dict(r, f"requests[{i}]")
                for i, r in enumerate(read_list(d, "requests"))
            ],
            turns=[
                TurnRecord.from_dict(t, f"turns[{i}]") for i, t in enumerate(read_list(d, "turns"))
            ],
        )
