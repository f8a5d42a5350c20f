"""Provides the session store: one JSON file per session, written atomically, versioned.

Why this shape: a session is the user's work, so a crash, a kill or a full disk must leave either
the old or the new file, never a torn one (temp file in the same folder, fsync, rename, fsync of
the folder). Files the app cannot read are listed as damaged and left alone: the app never
deletes or overwrites a file it did not understand, and never rewrites a file from a newer app.
"""

from __future__ import annotations

import builtins
import contextlib
import errno
import json
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fusion_tui.atomic import atomic_write
from fusion_tui.paths import AppPaths
from fusion_tui.sessions import lock as session_lock
from fusion_tui.sessions.errors import SessionLocked, SessionNotFound, SessionStoreError
from fusion_tui.sessions.migrations import (
    FutureSchemaError,
    Migration,
    schema_of,
    upgrade,
)
from fusion_tui.sessions.model import (
    SCHEMA_VERSION,
    Session,
    SessionFileError,
    is_session_id,
)

SUFFIX = ".json"


@dataclass(frozen=True)
class SessionEntry:
    """One line of `list()`: a readable session's summary, or a damaged file and why."""

    id: str
    path: Path
    status: Literal["ok", "damaged", "newer"]
    reason: str = ""
    title: str = ""
    created: float = 0.0
    updated: float = 0.0
    messages: int = 0
    workspace: str | None = None
    pinned_slot: int | None = None
    last_outcome: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "path": str(self.path),
            "status": self.status,
            "reason": self.reason,
            "title": self.title,
            "created": self.created,
            "updated": self.updated,
            "messages": self.messages,
            "workspace": self.workspace,
            "pinned_slot": self.pinned_slot,
            "last_outcome": self.last_outcome,
        }

    @classmethod
    def of(cls, session: Session, path: Path) -> SessionEntry:
        return cls(
            id=session.id,
            path=path,
            status="ok",
            title=session.title,
            created=session.created,
            updated=session.updated,
            messages=len(session.messages),
            workspace=session.workspace,
            pinned_slot=session.pinned_slot,
            last_outcome=session.last_outcome,
        )


def _describe(exc: OSError) -> str:
    reasons = {
        errno.ENOSPC: "the disk is full",
        errno.EDQUOT: "the disk quota is exhausted",
        errno.EROFS: "the folder is on a read-only file system",
        errno.EACCES: "permission denied",
        errno.EPERM: "permission denied",
    }
    return reasons.get(exc.errno or 0, exc.strerror or str(exc))


class SessionStore:
    """Sessions as `<id>.json` files in one folder. Not shared-writer safe beyond atomicity."""

    def __init__(
        self,
        directory: Path,
        *,
        schema_version: int = SCHEMA_VERSION,
        migrations: Mapping[int, Migration] | None = None,
    ) -> None:
        self.directory = directory
        self.schema_version = schema_version
        self._migrations = migrations
        self._known: dict[str, tuple[int, int, int]] = {}
        """Stat signature of each file as we last read or wrote it (skips re-validation)."""
        self._stale: set[str] = set()
        """Ids whose file on disk is still in an older schema (back it up before a save)."""

    @classmethod
    def default(cls, paths: AppPaths | None = None) -> SessionStore:
        return cls((paths or AppPaths.default()).sessions_dir)

    # --- paths -------------------------------------------------------------------------------

    def path_for(self, session_id: str) -> Path:
        if not is_session_id(session_id):
            raise SessionNotFound(f"{session_id!r} is not a session id (see `sessions list`)")
        return self.directory / f"{session_id}{SUFFIX}"

    def _ensure_dir(self) -> None:
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise SessionStoreError(
                f"cannot create the sessions folder {self.directory}: {_describe(exc)}"
            ) from exc

    @staticmethod
    def _signature(path: Path) -> tuple[int, int, int] | None:
        try:
            st = path.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    # --- reading -----------------------------------------------------------------------------

    def _read_raw(self, path: Path) -> dict[str, Any]:
        try:
            data = path.read_bytes()
        except FileNotFoundError as exc:
            raise SessionNotFound(f"no session {path.stem} in {self.directory}") from exc
        except OSError as exc:
            raise SessionFileError(
                f"cannot read the file: {_describe(exc)}", path=str(path)
            ) from exc
        try:
            raw = json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise SessionFileError("the file is not UTF-8 text", path=str(path)) from exc
        except RecursionError:
            raise SessionFileError(
                "not a session: JSON nested too deeply", path=str(path)
            ) from None
        except json.JSONDecodeError as exc:
            raise SessionFileError(
                f"not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})",
                path=str(path),
            ) from exc
        schema_of(raw, str(path))
        return dict(raw)

    def _parse(self, path: Path, raw: dict[str, Any]) -> Session:
        data = upgrade(raw, current=self.schema_version, steps=self._migrations, path=str(path))
        try:
            session = Session.from_dict(data)
        except SessionFileError as exc:
            raise SessionFileError(str(exc), field=exc.field, path=str(path)) from exc
        if session.id != path.stem:
            raise SessionFileError(
                f"field 'id' is {session.id!r} but the file is named {path.name}",
                field="id",
                path=str(path),
            )
        return session

    def load(self, session_id: str) -> Session:
        """The session; an older schema is upgraded (after a backup) and rewritten."""
        path = self.path_for(session_id)
        sig = self._signature(path)
        raw = self._read_raw(path)
        old_version = schema_of(raw, str(path))
        session = self._parse(path, raw)
        self._known[session_id] = sig or (0, 0, 0)
        if old_version < self.schema_version:
            self._stale.add(session_id)
            with contextlib.suppress(SessionStoreError):
                self.save(session)  # backs up first; a read-only store still loads
        return session

    def list(self) -> list[SessionEntry]:
        """Every session file, newest first; unreadable files come last, marked damaged."""
        if not self.directory.is_dir():
            return []
        good: list[SessionEntry] = []
        bad: list[SessionEntry] = []
        for path in sorted(self.directory.glob(f"*{SUFFIX}")):
            if path.name.startswith("."):
                continue
            stem = path.stem
            if not is_session_id(stem):
                bad.append(SessionEntry(stem, path, "damaged", "not a session file name"))
                continue
            try:
                session = self._parse(path, self._read_raw(path))
            except FutureSchemaError as exc:
                bad.append(SessionEntry(stem, path, "newer", str(exc)))
            except SessionFileError as exc:
                bad.append(SessionEntry(stem, path, "damaged", str(exc)))
            except SessionNotFound:
                continue  # removed while we listed
            else:
                good.append(SessionEntry.of(session, path))
        good.sort(key=lambda e: (e.updated, e.id), reverse=True)
        return good + bad

    def search(self, text: str) -> builtins.list[SessionEntry]:
        """Readable sessions whose title, workspace or messages contain `text` (any case)."""
        needle = text.casefold()
        found: list[SessionEntry] = []
        for entry in self.list():
            if not entry.ok:
                continue
            if needle in entry.title.casefold() or needle in (entry.workspace or "").casefold():
                found.append(entry)
                continue
            try:
                session = self._parse(entry.path, self._read_raw(entry.path))
            except (SessionFileError, SessionNotFound):
                continue
            if any(needle in m.content.casefold() for m in session.messages):
                found.append(entry)
        return found

    # --- writing -----------------------------------------------------------------------------

    def _guard_overwrite(self, session_id: str, path: Path) -> None:
        """Refuse to overwrite a file we did not write or read as valid (damaged or newer)."""
        sig = self._signature(path)
        if sig is None or self._known.get(session_id) == sig:
            return
        try:
            raw = self._read_raw(path)
            old_version = schema_of(raw, str(path))
            self._parse(path, raw)
        except SessionNotFound:
            return
        except SessionFileError as exc:
            raise SessionStoreError(
                f"refusing to overwrite session {session_id}: the file on disk is unreadable "
                f"({exc}); move it away to save this session"
            ) from exc
        if old_version < self.schema_version:
            self._stale.add(session_id)

    def _backup(self, path: Path, version: int) -> Path:
        n = 0
        while True:
            suffix = f".schema{version}.bak" if n == 0 else f".schema{version}.{n}.bak"
            backup = path.with_name(path.name + suffix)
            if not backup.exists():
                break
            n += 1
        try:
            shutil.copy2(path, backup)
            os.chmod(backup, 0o600)
        except BaseException:  # a torn copy (full disk) must not pass for a backup later
            with contextlib.suppress(OSError):
                backup.unlink()
            raise
        return backup

    def claim(self, session_id: str) -> None:
        """Open the session to write: `SessionLocked` (a `SessionStoreError`) when another
        process has it open; held until `release` or the end of the process (crash included).
        A folder that cannot hold the lock (read-only, missing) is no refusal: saving there
        fails anyway, with its own message, and reading still works."""
        path = self.path_for(session_id)
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            session_lock.claim(path, session_id)
        except OSError:
            return

    def release(self, session_id: str) -> None:
        session_lock.release(self.path_for(session_id))

    def save(self, session: Session) -> Path:
        """Write the session atomically; on failure the previous file is intact. A session
        another process has claimed is refused (`SessionLocked`): its file is left as it is."""
        path = self.path_for(session.id)
        self._ensure_dir()
        holder = session_lock.held_elsewhere(path)
        if holder is not None:
            raise SessionLocked(session.id, holder or None)
        self._guard_overwrite(session.id, path)
        payload = {"schema_version": self.schema_version, **session.to_dict()}
        data = json.dumps(payload, ensure_ascii=False, indent=1).encode("utf-8")
        try:
            if session.id in self._stale and path.exists():
                old = schema_of(json.loads(path.read_bytes()), str(path))
                self._backup(path, old)
            atomic_write(path, data)
        except OSError as exc:
            raise SessionStoreError(
                f"could not save session {session.id} in {self.directory}: {_describe(exc)}; "
                "the previous version of the file is intact"
            ) from exc
        self._stale.discard(session.id)
        self._known[session.id] = self._signature(path) or (0, 0, 0)
        return path

    def try_save(self, session: Session) -> str | None:
        """`save`, with a failure returned as its message (the session stays in memory)."""
        try:
            self.save(session)
        except SessionStoreError as exc:
            return str(exc)
        return None

    def sweep_temp_files(self, older_than_s: float = 3600.0, now: float | None = None) -> int:
        """Delete temp files left by killed writers (only old ones: another writer may be live)."""
        if not self.directory.is_dir():
            return 0
        limit = (time.time() if now is None else now) - older_than_s
        removed = 0
        for tmp in self.directory.glob(f".*{SUFFIX}.*.tmp"):
            with contextlib.suppress(OSError):
                if tmp.stat().st_mtime < limit:
                    tmp.unlink()
                    removed += 1
        return removed

    def rename(self, session_id: str, title: str) -> Session:
        title = " ".join(title.split())
        if not title:
            raise SessionStoreError("a session title cannot be empty")
        session = self.load(session_id)
        session.title = title
        self.save(session)
        return session

    def remove(self, session_id: str) -> None:
        """Delete the session file and its migration backups (only on the user's request)."""
        path = self.path_for(session_id)
        try:
            path.unlink()
        except FileNotFoundError as exc:
            raise SessionNotFound(f"no session {session_id} in {self.directory}") from exc
        except OSError as exc:
            raise SessionStoreError(f"could not remove {path}: {_describe(exc)}") from exc
        for backup in self.directory.glob(f"{path.name}.schema*.bak"):
            with contextlib.suppress(OSError):
                backup.unlink()
        self.release(session_id)
        self._known.pop(session_id, None)
        self._stale.discard(session_id)
