"""Hostile config and session files: a clear error naming the file and the place, the file kept
byte for byte, and a backup before any migration rewrites a file.

Only what the unit tests do not already cover: JSON and YAML nested deep enough to exhaust
Python's recursion, non-scalar values where text is expected, resuming through `LocalBackend`
past damaged and newer files, and `persist_setting` on a file it must refuse or migrate.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.config.loader import ConfigError, load_settings
from fusion_tui.config.persist import PersistError, persist_setting
from fusion_tui.paths import AppPaths
from fusion_tui.sessions.migrations import FutureSchemaError
from fusion_tui.sessions.model import Message, Session, SessionFileError
from fusion_tui.sessions.store import SessionStore, SessionStoreError


def snapshot(path: Path) -> tuple[bytes, int]:
    return path.read_bytes(), path.stat().st_mtime_ns


def saved(store: SessionStore, title: str = "t", now: float = 1_700_000_000.0) -> Session:
    s = Session.new(title=title, now=now)
    s.messages += [Message("user", "hello"), Message("assistant", "hi")]
    store.save(s)
    return s


# --- session files ---------------------------------------------------------------------------


def test_a_session_file_nested_absurdly_deep_is_damaged_not_a_crash(tmp_path: Path) -> None:
    store = SessionStore(tmp_path)
    s = saved(store)
    path = store.path_for(s.id)
    path.write_text('{"schema_version": 1, "messages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    before = snapshot(path)
    fresh = SessionStore(tmp_path)
    [entry] = fresh.list()
    assert entry.status == "damaged" and "nested too deeply" in entry.reason
    with pytest.raises(SessionFileError) as info:
        fresh.load(s.id)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
    with pytest.raises(SessionStoreError, match="refusing to overwrite"):
        fresh.save(s)
    assert snapshot(path) == before


@pytest.mark.parametrize(
    ("edit", "place"),
    [
        (lambda d: d["messages"][1].update(partial="yes"), "messages[1].partial"),
        (lambda d: d["messages"][0].update(content=None), "messages[0].content"),
        (lambda d: d.update(pinned_slot="2"), "pinned_slot"),
        (lambda d: d.update(server={"model_path": 5}), "server.model_path"),
        (lambda d: d.update(turns=[{"outcome": "exploded", "time": 1}]), "turns[0].outcome"),
        (lambda d: d.update(requests=[{"id_slot": 0}]), "requests[0].prompt_n"),
        (lambda d: d.update(created=float("nan")), "created"),
        (lambda d: d.update(schema_version="1"), "schema_version"),
    ],
)
def test_wrong_types_name_the_file_and_the_field_and_keep_the_bytes(
    tmp_path: Path, edit: object, place: str
) -> None:
    store = SessionStore(tmp_path)
    s = saved(store)
    path = store.path_for(s.id)
    data = json.loads(path.read_text())
    edit(data)  # type: ignore[operator]
    path.write_text(json.dumps(data, indent=1))
    before = snapshot(path)
    with pytest.raises(SessionFileError) as info:
        SessionStore(tmp_path).load(s.id)
    assert str(info.value).startswith(f"{path}: ") and repr(place) in str(info.value)
    assert snapshot(path) == before


def _home(tmp_path: Path) -> AppPaths:
    return AppPaths.default(env={"FUSION_TUI_HOME": str(tmp_path / "home")})


def test_resuming_the_latest_session_skips_damaged_and_newer_files_untouched(
    tmp_path: Path,
) -> None:
    paths = _home(tmp_path)
    store = SessionStore(paths.sessions_dir)
    good = saved(store, "good", now=1_700_000_000.0)
    torn = saved(store, "torn", now=1_800_000_000.0)  # newer, so it would be picked first
    future = saved(store, "future", now=1_900_000_000.0)
    torn_path, future_path = store.path_for(torn.id), store.path_for(future.id)
    torn_path.write_bytes(torn_path.read_bytes()[:50])
    data = json.loads(future_path.read_text())
    data["schema_version"] = 99
    future_path.write_text(json.dumps(data))
    before = files(paths.sessions_dir)

    backend = LocalBackend(Settings(), paths, resume="")
    assert backend.session.id == good.id
    with pytest.raises(FutureSchemaError) as info:
        LocalBackend(Settings(), paths, resume=future.id)
    assert str(future_path) in str(info.value) and "schema 99" in str(info.value)
    with pytest.raises(SessionFileError, match="not valid JSON"):
        LocalBackend(Settings(), paths, resume=torn.id)
    assert files(paths.sessions_dir) == before


def files(folder: Path) -> dict[str, object]:
    """The session files (a session lock's sidecar belongs to the open session, not to them)."""
    return {p.name: snapshot(p) for p in folder.iterdir() if not p.name.endswith(".lock")}


# --- config files ----------------------------------------------------------------------------


def write_config(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "config.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("ui:\n  theme: " + "[" * 50_000 + "]" * 50_000 + "\n", "nested too deeply"),
        (b"ui:\n  theme: \xff\xfe\n", "cannot read"),
        ("ui:\n  keys:\n    cancel: [ctrl+c, escape]\n", "ui.keys.cancel"),
        ("ui:\n  keys:\n    cancel: {a: 1}\n", "ui.keys.cancel"),
        ("localModels:\n  managed:\n    extraArgs: [--foo, 3]\n", "localModels.managed.extraArgs"),
        ("localModels:\n  managed:\n    parallel: -3\n", "localModels.managed.parallel"),
        ("llm:\n  temperature: .nan\n", "llm.temperature"),
        ("version: 99\n", "version 99"),
        ("- a\n- b\n", "top level"),
    ],
    ids=[
        "deep",
        "not-utf8",
        "key-list",
        "key-map",
        "extra-arg-number",
        "negative",
        "nan",
        "future",
        "list",
    ],
)
def test_bad_config_names_the_file_and_place_and_keeps_the_bytes(
    tmp_path: Path, text: str | bytes, needle: str
) -> None:
    path = write_config(tmp_path, text)
    before = snapshot(path)
    with pytest.raises(ConfigError) as info:
        load_settings(path, env={})
    message = str(info.value)
    assert message.startswith(str(path)) and needle in message and "\n" not in message
    with pytest.raises(PersistError) as refused:
        persist_setting(path, "ui.theme", "fusion-light")
    assert "unchanged" in str(refused.value) or "not saved" in str(refused.value)
    assert snapshot(path) == before
    assert sorted(os.listdir(tmp_path)) == ["config.yaml"]  # no backup, no temp file


def test_persisting_into_an_old_config_backs_it_up_before_the_rewrite(tmp_path: Path) -> None:
    original = "# mine\nversion: 1\nlocalModels:\n  managed:\n    parallel: 3\n"
    path = write_config(tmp_path, original)
    load_settings(path, env={})
    assert path.read_text() == original  # loading migrates in memory only
    done = persist_setting(path, "ui.theme", "fusion-light")
    assert done.backup is not None and done.backup.read_text() == original
    settings = load_settings(path, env={})
    assert settings.ui.theme == "fusion-light" and settings.local_models.managed.parallel == 3
    assert "# mine" in path.read_text()
