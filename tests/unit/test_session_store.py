"""Session store: round trip, atomic writes, permissions, damaged files, migrations."""

from __future__ import annotations

import errno
import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

from fusion_tui import atomic as atomic_mod
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.migrations import FutureSchemaError
from fusion_tui.sessions.model import SCHEMA_VERSION, Message, Session, SessionFileError
from fusion_tui.sessions.store import SessionNotFound, SessionStore, SessionStoreError


def make(title: str = "t", now: float = 1_700_000_000.0, text: str = "hello") -> Session:
    s = Session.new(title=title, now=now)
    s.messages = [Message("user", text), Message("assistant", "hi")]
    return s


@pytest.fixture
def store(app_home: AppPaths) -> SessionStore:
    return SessionStore.default(app_home)


def test_round_trip_and_permissions(store: SessionStore) -> None:
    s = make()
    path = store.save(s)
    assert path.parent == store.directory
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.directory.stat().st_mode) == 0o700
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION
    assert SessionStore(store.directory).load(s.id) == s
    assert [p.name for p in store.directory.iterdir()] == [path.name]  # no temp file left


def test_list_rename_search_remove(store: SessionStore) -> None:
    old = make("Old one", now=1_700_000_000.0, text="about the lexer")
    new = make("New one", now=1_700_000_500.0, text="about the parser")
    new.updated = 1_700_000_900.0
    store.save(old)
    store.save(new)
    assert [e.id for e in store.list()] == [new.id, old.id]
    assert store.list()[0].messages == 2 and store.list()[0].ok
    assert [e.id for e in store.search("PARSER")] == [new.id]
    assert [e.id for e in store.search("old")] == [old.id]
    assert store.rename(old.id, "  Renamed \n title ").title == "Renamed title"
    assert store.load(old.id).title == "Renamed title"
    with pytest.raises(SessionStoreError, match="empty"):
        store.rename(old.id, "   ")
    store.remove(old.id)
    assert [e.id for e in store.list()] == [new.id]
    with pytest.raises(SessionNotFound):
        store.remove(old.id)
    with pytest.raises(SessionNotFound):
        store.load(old.id)
    with pytest.raises(SessionNotFound, match="not a session id"):
        store.load("../../etc/passwd")


def test_damaged_files_are_listed_with_the_reason_and_never_touched(store: SessionStore) -> None:
    good = make("good")
    store.save(good)
    torn = make("torn", now=1_700_000_001.0)
    torn_path = store.save(torn)
    torn_bytes = torn_path.read_bytes()[:40]
    torn_path.write_bytes(torn_bytes)
    typed = make("typed", now=1_700_000_002.0)
    typed_path = store.save(typed)
    d = json.loads(typed_path.read_text())
    d["messages"][0]["role"] = 7
    typed_path.write_text(json.dumps(d))
    typed_bytes = typed_path.read_bytes()
    (store.directory / "notes.json").write_text("{}")

    fresh = SessionStore(store.directory)
    entries = {e.id: e for e in fresh.list()}
    assert entries[good.id].ok
    assert entries[torn.id].status == "damaged" and "not valid JSON" in entries[torn.id].reason
    assert entries[typed.id].status == "damaged"
    assert "messages[0].role" in entries[typed.id].reason
    assert entries["notes"].status == "damaged"
    assert [e.ok for e in fresh.list()] == [True, False, False, False]  # damaged come last

    with pytest.raises(SessionFileError, match=r"messages\[0\]\.role"):
        fresh.load(typed.id)
    with pytest.raises(SessionStoreError, match="refusing to overwrite"):
        fresh.save(typed)  # e.g. a stale in-memory copy: the damaged file must survive
    # the store that wrote the file also notices it changed behind its back
    with pytest.raises(SessionStoreError, match="refusing to overwrite"):
        store.save(torn)
    assert torn_path.read_bytes() == torn_bytes
    assert typed_path.read_bytes() == typed_bytes


def test_future_schema_is_refused_and_never_rewritten(store: SessionStore) -> None:
    s = make()
    path = store.save(s)
    d = json.loads(path.read_text())
    d["schema_version"] = 99
    path.write_text(json.dumps(d))
    before = path.read_bytes()
    fresh = SessionStore(store.directory)
    with pytest.raises(FutureSchemaError, match="newer fusion-tui"):
        fresh.load(s.id)
    [entry] = fresh.list()
    assert entry.status == "newer" and "schema 99" in entry.reason
    with pytest.raises(SessionStoreError, match="refusing to overwrite"):
        fresh.save(s)
    assert path.read_bytes() == before


def test_migration_backs_up_then_rewrites(store: SessionStore) -> None:
    s = make("Named")
    path = store.save(s)
    v1 = json.loads(path.read_text())
    v1["name"] = v1.pop("title")  # the (test-only) current schema called it "name"
    path.write_text(json.dumps(v1))
    v1_bytes = path.read_bytes()

    def v1_to_v2(d: dict) -> dict:  # type: ignore[type-arg]
        d["title"] = d.pop("name")
        return d

    newer = SessionStore(
        store.directory, schema_version=SCHEMA_VERSION + 1, migrations={SCHEMA_VERSION: v1_to_v2}
    )
    loaded = newer.load(s.id)
    assert loaded.title == "Named"
    backup = path.with_name(path.name + f".schema{SCHEMA_VERSION}.bak")
    assert backup.read_bytes() == v1_bytes
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION + 1
    newer.load(s.id)
    assert sorted(p.name for p in store.directory.iterdir()) == [path.name, backup.name]
    assert [e.id for e in newer.list()] == [s.id]  # backups are not sessions
    # an old app cannot read the new file and says so
    with pytest.raises(FutureSchemaError):
        SessionStore(store.directory).load(s.id)


def test_missing_migration_step_is_a_clear_error(store: SessionStore) -> None:
    s = make()
    store.save(s)
    step = f"no migration from schema {SCHEMA_VERSION} to {SCHEMA_VERSION + 1}"
    with pytest.raises(SessionFileError, match=step):
        SessionStore(store.directory, schema_version=SCHEMA_VERSION + 1, migrations={}).load(s.id)


@pytest.mark.parametrize(
    ("err", "words"), [(errno.ENOSPC, "the disk is full"), (errno.EROFS, "read-only")]
)
def test_write_failure_keeps_the_previous_file(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch, err: int, words: str
) -> None:
    s = make("v1")
    path = store.save(s)
    before = path.read_bytes()
    s.title = "v2"
    s.messages.append(Message("user", "x" * 100_000))

    def failing_write(fd: int, data: bytes) -> None:
        os.write(fd, data[:1000])
        raise OSError(err, os.strerror(err))

    monkeypatch.setattr(atomic_mod, "_write_all", failing_write)
    with pytest.raises(SessionStoreError) as info:
        store.save(s)
    assert words in str(info.value) and "previous version" in str(info.value)
    assert path.read_bytes() == before
    assert [p.name for p in store.directory.iterdir()] == [path.name]


def test_read_only_folder_is_a_clear_error(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    s = make()
    path = store.save(s)
    before = path.read_bytes()

    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(SessionStoreError, match="read-only file system"):
        store.save(s)
    assert path.read_bytes() == before


def test_sweep_removes_only_old_temp_files(store: SessionStore) -> None:
    s = make()
    store.save(s)
    old = store.directory / f".{s.id}.json.abc.tmp"
    old.write_text("{")
    os.utime(old, (1_000, 1_000))
    live = store.directory / f".{s.id}.json.def.tmp"
    live.write_text("{")
    assert store.sweep_temp_files(older_than_s=60) == 1
    assert not old.exists() and live.exists()
    assert [e.id for e in store.list()] == [s.id]


def test_empty_store_lists_nothing(tmp_path: Path) -> None:
    assert SessionStore(tmp_path / "none").list() == []
