"""A full disk or a read-only data folder while a session is saved: a clear error, old file kept.

The read-only case uses a real read-only folder (mode 0500; as root, whom modes do not stop, the
folder is made immutable with `chattr +i` when the file system allows it). The full disk is an
`ENOSPC` from `os.write` once some bytes of the new file went out, as a real disk does it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import fusion_tui.sessions.store as store_mod
from fusion_tui.sessions.model import SCHEMA_VERSION, Message, Session
from fusion_tui.sessions.store import SessionStore, SessionStoreError


def session(title: str = "work") -> Session:
    s = Session.new(title=title, now=1_700_000_000.0)
    s.messages += [Message("user", "hello"), Message("assistant", "hi there")]
    return s


def grow(s: Session) -> None:
    s.title = "changed"
    s.messages.append(Message("user", "y" * 200_000))


@contextlib.contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """Make `folder` refuse new entries for real, also for root."""
    folder.chmod(0o500)
    immutable = False
    try:
        if os.geteuid() == 0:
            done = subprocess.run(["chattr", "+i", str(folder)], capture_output=True, check=False)
            if done.returncode != 0:
                pytest.skip("running as root and the file system has no immutable attribute")
            immutable = True
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=False)
        folder.chmod(0o700)


def test_a_read_only_sessions_folder_is_a_clear_error_and_the_old_file_survives(
    tmp_path: Path,
) -> None:
    store = SessionStore(tmp_path / "sessions")
    s = session()
    path = store.save(s)
    before = path.read_bytes()
    grow(s)
    with read_only(store.directory):
        with pytest.raises(SessionStoreError) as info:
            store.save(s)
        assert sorted(p.name for p in store.directory.iterdir()) == [path.name]
    message = str(info.value)
    assert "\n" not in message
    assert f"could not save session {s.id}" in message and str(store.directory) in message
    assert "permission denied" in message and "previous version of the file is intact" in message
    assert path.read_bytes() == before
    assert SessionStore(store.directory).load(s.id).title == "work"


def test_a_read_only_parent_cannot_create_the_sessions_folder(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    store = SessionStore(data / "sessions")
    with read_only(data), pytest.raises(SessionStoreError, match="cannot create the sessions"):
        store.save(session())


@pytest.fixture
def disk_full_after(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[int]]:
    """`os.write` to files in `tmp_path` writes up to 4 KiB in all, then fails with ENOSPC."""
    real_write = os.write
    written = [0]
    root = str(tmp_path)

    def write(fd: int, data: bytes | memoryview) -> int:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if not target.startswith(root):
            return real_write(fd, data)
        room = 4096 - written[0]
        if room <= 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = real_write(fd, bytes(data[:room]))
        written[0] += n
        return n

    monkeypatch.setattr(store_mod.os, "write", write)
    yield written


def test_disk_full_mid_write_is_a_clear_error_and_the_old_file_survives(
    tmp_path: Path, disk_full_after: list[int]
) -> None:
    store = SessionStore(tmp_path / "sessions")
    s = session()
    disk_full_after[0] = -(10**9)  # the first save has room
    path = store.save(s)
    before = path.read_bytes()
    disk_full_after[0] = 0
    grow(s)
    with pytest.raises(SessionStoreError) as info:
        store.save(s)
    assert disk_full_after[0] == 4096  # some bytes of the new version did reach the disk
    assert "the disk is full" in str(info.value) and "intact" in str(info.value)
    assert path.read_bytes() == before
    assert [p.name for p in store.directory.iterdir()] == [path.name]  # no temp file left
    assert SessionStore(store.directory).load(s.id).messages[-1].content == "hi there"


def test_disk_full_while_backing_up_before_a_migration_leaves_the_file_and_no_torn_backup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = SessionStore(tmp_path / "sessions")
    s = session()
    path = old.save(s)
    v1 = path.read_bytes()

    def copy_then_fail(src: str | Path, dst: str | Path) -> None:
        with open(src, "rb") as fi, open(dst, "wb") as fo:
            fo.write(fi.read(100))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store_mod.shutil, "copy2", copy_then_fail)
    now = SCHEMA_VERSION  # what `old` wrote; `newer` is one version ahead
    newer = SessionStore(old.directory, schema_version=now + 1, migrations={now: lambda d: d})
    loaded = newer.load(s.id)  # the upgrade is in memory; the rewrite waits for room
    assert loaded.title == "work"
    assert path.read_bytes() == v1
    assert [p.name for p in old.directory.iterdir()] == [path.name], "a torn backup was left"
    with pytest.raises(SessionStoreError, match="the disk is full"):
        newer.save(loaded)
    assert path.read_bytes() == v1

    monkeypatch.undo()  # room again
    newer.save(loaded)
    backup = path.with_name(path.name + f".schema{now}.bak")
    assert backup.read_bytes() == v1
