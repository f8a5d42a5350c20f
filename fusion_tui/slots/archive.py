"""Provides `SlotArchive`: a session's slot KV saved to disk, so it resumes warm after a restart.

Why: a cold re-read of a long session costs minutes on a CPU; restoring its slot file costs a disk
read. llama-server writes the file itself (`POST /slots/{id}?action=save`, into its
`--slot-save-path`); this module names it after the session and writes a small JSON sidecar
next to it with what the KV is only valid for: the model file (path, size, mtime) and the per-slot
context (plus the KV cache types when known). A restore is refused, with the reason, when any of
them differs: the server would either reject the file or, worse, load KV computed by another model.
A size cap prunes the oldest saved slots (reference §4 for the wire format and errors).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from fusion_tui.atomic import atomic_write
from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import SlotState

SLOT_SUFFIX = ".kv"
TAG_SUFFIX = ".kv.json"
TAG_VERSION = 1
DEFAULT_MAX_BYTES = 4 << 30
"""Saved slots kept on disk (slot files plus sidecars); the oldest go first."""


class SlotClient(Protocol):
    """The part of `LlamaClient` the archive uses."""

    async def slot_action(
        self, slot_id: int, action: Any, filename: str | None = None, *, timeout: float = ...
    ) -> dict[str, Any]: ...


class ArchiveRefused(Exception):
    """A saved slot cannot be used; the message says why (shown as the cold-start note)."""


@dataclass(frozen=True)
class ModelIdentity:
    """A model file as it was when the slot was saved: same path, size and mtime = same KV."""

    path: str
    size: int = -1
    mtime_ns: int = -1

    @classmethod
    def of(cls, path: str) -> ModelIdentity:
        """Stat `path`; an unreadable path (an external server's file) keeps only the name."""
        try:
            st = os.stat(path)
        except OSError:
            return cls(path)
        return cls(path, st.st_size, st.st_mtime_ns)

    def difference(self, other: ModelIdentity) -> str | None:
        """Why a slot saved with `self` does not fit a server running `other` (None: it fits)."""
        same_stat = (self.size, self.mtime_ns) == (other.size, other.mtime_ns)
        moved = Path(self.path).name == Path(other.path).name and same_stat and self.size >= 0
        if self.path != other.path and not moved:
            return f"it was saved with another model ({Path(self.path).name})"
        if not same_stat:
            return f"the model file {Path(other.path).name} changed since the save"
        return None


@dataclass(frozen=True)
class ArchiveTag:
    """The sidecar of one saved slot."""

    session_id: str
    model: ModelIdentity
    n_ctx: int
    """Per-slot context of the server that saved it."""
    cache_types: str = ""
    """`f16/f16` etc. when known (managed launches); "" = unknown, not compared."""
    n_saved: int = 0
    n_bytes: int = 0
    saved_at: float = 0.0
    launch_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": TAG_VERSION,
            "session_id": self.session_id,
            "model": {
                "path": self.model.path,
                "size": self.model.size,
                "mtime_ns": self.model.mtime_ns,
            },
            "n_ctx": self.n_ctx,
            "cache_types": self.cache_types,
            "n_saved": self.n_saved,
            "n_bytes": self.n_bytes,
            "saved_at": self.saved_at,
            "launch_id": self.launch_id,
        }

    @classmethod
    def from_dict(cls, d: Any) -> ArchiveTag:
        """Strict: anything unexpected is a `ValueError` (the tag is then treated as missing)."""
        if not isinstance(d, dict) or d.get("version") != TAG_VERSION:
            raise ValueError("not a slot tag of this version")
        m = d["model"]
        launch = d.get("launch_id")
        return cls(
            session_id=str(d["session_id"]),
            model=ModelIdentity(str(m["path"]), int(m["size"]), int(m["mtime_ns"])),
            n_ctx=int(d["n_ctx"]),
            cache_types=str(d.get("cache_types") or ""),
            n_saved=int(d.get("n_saved") or 0),
            n_bytes=int(d.get("n_bytes") or 0),
            saved_at=float(d.get("saved_at") or 0.0),
            launch_id=None if launch is None else str(launch),
        )


@dataclass(frozen=True)
class ServerFacts:
    """What a saved slot must match on the server it is restored into."""

    model: ModelIdentity
    n_ctx: int
    cache_types: str = ""
    launch_id: str | None = None


@dataclass(frozen=True)
class Restored:
    slot: int
    n_restored: int
    restore_ms: float
    tag: ArchiveTag


class SlotArchive:
    """Saved slots in one folder (the managed daemon's `--slot-save-path`)."""

    def __init__(
        self,
        folder: Path,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self._now = now

    # --- names ---------------------------------------------------------------------------------

    @staticmethod
    def file_name(session_id: str) -> str:
        """The bare name the server writes (session ids are safe file names)."""
        if not session_id or any(c in session_id for c in '/\\:*?"<>|') or ".." in session_id:
            raise ValueError(f"not a usable session id for a slot file: {session_id!r}")
        return session_id + SLOT_SUFFIX

    def slot_path(self, session_id: str) -> Path:
        return self.folder / self.file_name(session_id)

    def tag_path(self, session_id: str) -> Path:
        return self.folder / (session_id + TAG_SUFFIX)

    # --- tags ----------------------------------------------------------------------------------

    def read_tag(self, session_id: str) -> ArchiveTag | None:
        try:
            return ArchiveTag.from_dict(json.loads(self.tag_path(session_id).read_text("utf-8")))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _write_tag(self, tag: ArchiveTag) -> None:
        atomic_write(self.tag_path(tag.session_id), json.dumps(tag.to_dict(), indent=1))

    def check(self, session_id: str, facts: ServerFacts) -> ArchiveTag:
        """The tag when the saved slot fits `facts`; else `ArchiveRefused` with the reason."""
        tag = self.read_tag(session_id)
        if tag is None:
            raise ArchiveRefused("no saved slot for this session")
        if not self.slot_path(session_id).is_file():
            raise ArchiveRefused("the saved slot file is missing")
        if tag.session_id != session_id:
            raise ArchiveRefused("the saved slot's tag names another session")
        why = tag.model.difference(facts.model)
        if why:
            raise ArchiveRefused(f"the saved slot does not fit: {why}")
        if tag.n_ctx != facts.n_ctx:
            raise ArchiveRefused(
                f"the saved slot does not fit: it was saved with a {tag.n_ctx:,}-token slot "
                f"context, the server now has {facts.n_ctx:,}"
            )
        if tag.cache_types and facts.cache_types and tag.cache_types != facts.cache_types:
            raise ArchiveRefused(
                f"the saved slot does not fit: its KV cache is {tag.cache_types}, "
                f"the server now uses {facts.cache_types}"
            )
        return tag

    # --- actions -------------------------------------------------------------------------------

    async def save(
        self, client: SlotClient, slot: int, session_id: str, facts: ServerFacts
    ) -> ArchiveTag:
        """Ask the server to write `slot` to the session's file, tag it, prune the oldest."""
        name = self.file_name(session_id)
        answer = await client.slot_action(slot, "save", name)
        tag = ArchiveTag(
            session_id=session_id,
            model=facts.model,
            n_ctx=facts.n_ctx,
            cache_types=facts.cache_types,
            n_saved=_count(answer, "n_saved"),
            n_bytes=_count(answer, "n_written"),
            saved_at=self._now(),
            launch_id=facts.launch_id,
        )
        self._write_tag(tag)
        self.prune(keep=(session_id,))
        return tag

    async def restore(
        self, client: SlotClient, slot: int, session_id: str, facts: ServerFacts
    ) -> Restored:
        """Check the tag, then load the file into `slot`; `ArchiveRefused` says why not."""
        tag = self.check(session_id, facts)
        try:
            answer = await client.slot_action(slot, "restore", self.file_name(session_id))
        except ServerError as exc:
            raise ArchiveRefused(f"llama-server could not restore the saved slot: {exc}") from None
        timings = answer.get("timings")
        ms = timings.get("restore_ms", 0.0) if isinstance(timings, dict) else 0.0
        return Restored(slot, _count(answer, "n_restored"), float(ms) if _is_num(ms) else 0.0, tag)

    def remove(self, session_id: str) -> None:
        for path in (self.slot_path(session_id), self.tag_path(session_id)):
            with contextlib.suppress(OSError):
                path.unlink()

    # --- size cap ------------------------------------------------------------------------------

    def entries(self) -> list[tuple[str, float, int]]:
        """(session id, saved at, bytes on disk) of every saved slot, oldest first."""
        out: list[tuple[str, float, int]] = []
        try:
            files = list(self.folder.glob("*" + SLOT_SUFFIX))
        except OSError:
            return out
        for path in files:
            sid = path.name[: -len(SLOT_SUFFIX)]
            try:
                size, mtime = path.stat().st_size, path.stat().st_mtime
            except OSError:
                continue
            tag = self.read_tag(sid)
            with contextlib.suppress(OSError):
                size += self.tag_path(sid).stat().st_size
            out.append((sid, tag.saved_at if tag and tag.saved_at else mtime, size))
        out.sort(key=lambda e: (e[1], e[0]))
        return out

    def total_bytes(self) -> int:
        return sum(size for _sid, _t, size in self.entries())

    def prune(self, keep: Iterable[str] = ()) -> list[str]:
        """Remove the oldest saved slots until the folder is under `max_bytes`; never `keep`."""
        kept = set(keep)
        entries = self.entries()
        total = sum(size for _sid, _t, size in entries)
        removed: list[str] = []
        for sid, _t, size in entries:
            if total <= self.max_bytes:
                break
            if sid in kept:
                continue
            self.remove(sid)
            removed.append(sid)
            total -= size
        return removed


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _count(answer: dict[str, Any], key: str) -> int:
    value = answer.get(key, 0)
    return int(value) if _is_num(value) and value >= 0 else 0


# --- choosing slots (pure) ---------------------------------------------------------------------


def choose_restore_slot(
    states: Sequence[SlotState] | None,
    total_slots: int,
    pinned: Iterable[int] = (),
    held: Iterable[int] = (),
    avoid: Iterable[int] = (),
) -> int | None:
    """The slot to restore a saved session into, or None when none is free.

    Free: idle on the server (when `/slots` answered), not pinned to a session of ours, not held
    by a request of ours. Preference: an empty slot, then the one caching the fewest tokens, then
    the lowest id (a fresh server's `-1` requests go to the highest ids first); `avoid` (the
    side-call slot) only when nothing else is free.
    """
    taken = set(pinned) | set(held)
    avoided = set(avoid)
    known = {s.id: s for s in states or () if 0 <= s.id < total_slots}
    best: tuple[tuple[int, int, int], int] | None = None
    for slot in range(total_slots):
        if slot in taken:
            continue
        state = known.get(slot)
        if state is not None and state.is_processing:
            continue
        if states is not None and state is None:
            continue
        cached = state.n_prompt_tokens if state is not None else 0
        key = (slot in avoided, cached, slot)
        if best is None or key < best[0]:
            best = (key, slot)
    return None if best is None else best[1]


def owners_by_slot(
    sessions: Iterable[tuple[str, int | None, str | None, float]],
    launch_id: str | None,
    total_slots: int,
) -> dict[int, str]:
    """Which session most likely still holds each slot of the launch `launch_id`.

    `sessions` gives (id, pinned slot, launch id, updated). Of the sessions pinned to a slot on
    this launch, the most recently updated wins: a later session on the same slot displaced the
    earlier one's prompt.
    """
    best: dict[int, tuple[float, str]] = {}
    if launch_id is None:
        return {}
    for sid, slot, launch, updated in sessions:
        if slot is None or launch != launch_id or not 0 <= slot < total_slots:
            continue
        if slot not in best or updated > best[slot][0]:
            best[slot] = (updated, sid)
    return {slot: sid for slot, (_t, sid) in best.items()}


def choose_fresh_slot(
    states: Sequence[SlotState] | None, total_slots: int, taken: Iterable[int] = ()
) -> int | None:
    """An empty idle slot for a brand-new session's first request (highest id first, as the
    server's own LRU would), or None: then the request goes `-1`.

    Why not always `-1`: a new session shares only the system prompt with the others, yet that
    prefix can pass the server's similarity threshold (0.1) against a short session, which is
    then evicted from its slot (measured with `bench/cache_reuse.py`).
    """
    if states is None:
        return None
    blocked = set(taken)
    empty = [
        s.id
        for s in states
        if 0 <= s.id < total_slots
        and s.id not in blocked
        and not s.is_processing
        and s.n_prompt_tokens == 0
    ]
    return max(empty) if empty else None
