"""The managed daemon fails to start: a clear `DaemonStartError` with the log tail, nothing left.

Real llama-server runs for what only the real binary can tell (a non-GGUF model, a port already
taken, a KV cache that cannot be allocated); a bad binary or model path fails before any spawn.
After every failure no child of this process runs llama-server and no pid file or record is left.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

import fusion_tui.server.process.daemon as daemon_mod
from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import DaemonStartError
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.pids import cmdline
from tests.fault.realserver import children_of, processes_with, small_spec

pytestmark = pytest.mark.server


def assert_nothing_left(daemon: ManagedDaemon, model: Path, *, shared: bool = False) -> None:
    """No llama-server among our children; for a model only this test uses (not `shared`, like
    the demo model other tests may be serving), no process anywhere mentions it."""
    servers = [p for p in children_of(os.getpid()) if "llama-server" in " ".join(cmdline(p) or [])]
    assert servers == []
    if not shared:
        assert processes_with(model.resolve()) == []
    assert daemon.current() is None
    assert not daemon.files.pid_file.exists()
    assert list(daemon.files.folder.glob("launch-*.json")) == []


def one_line_head(exc: DaemonStartError) -> str:
    head = str(exc).split("\n--- last lines", 1)[0]
    assert "\n" not in head and head
    return head


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port with a live listener on 127.0.0.1 (what another program would hold)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield int(sock.getsockname()[1])


async def test_a_model_that_is_not_gguf(
    app_home: AppPaths, llama_server_bin: Path, tmp_path: Path
) -> None:
    model = tmp_path / "notes.gguf"
    model.write_text("these are my notes, not a model\n" * 50)
    daemon = ManagedDaemon(app_home, binary=llama_server_bin, poll_interval=0.05)
    with pytest.raises(DaemonStartError) as info:
        await daemon.ensure(small_spec(model), probe=False)
    assert "exited while starting (exit code 1)" in one_line_head(info.value)
    assert "model" in info.value.log_tail.lower()
    assert "--- last lines of the server log ---" in str(info.value)
    assert_nothing_left(daemon, model)


@pytest.mark.parametrize("kind", ["missing", "directory"])
async def test_a_bad_model_path_fails_before_any_spawn(
    app_home: AppPaths, llama_server_bin: Path, tmp_path: Path, kind: str
) -> None:
    model = tmp_path / "models" / "m.gguf"
    if kind == "directory":
        model.mkdir(parents=True)
    daemon = ManagedDaemon(app_home, binary=llama_server_bin)
    with pytest.raises(DaemonStartError, match="no model file at") as info:
        await daemon.ensure(small_spec(model))
    assert str(model) in one_line_head(info.value)
    assert_nothing_left(daemon, model)


@pytest.mark.parametrize("kind", ["missing", "not-executable", "a-directory"])
async def test_a_bad_binary_is_a_clear_start_error(
    app_home: AppPaths, demo_model: Path, tmp_path: Path, kind: str
) -> None:
    binary = tmp_path / "bin" / "llama-server"
    if kind == "not-executable":
        binary.parent.mkdir()
        binary.write_text("#!/bin/sh\nexit 0\n")
        binary.chmod(stat.S_IRUSR | stat.S_IWUSR)
    elif kind == "a-directory":
        binary.mkdir(parents=True)
    daemon = ManagedDaemon(app_home, binary=binary)
    with pytest.raises(DaemonStartError) as info:
        await daemon.ensure(small_spec(demo_model), probe=False)
    head = one_line_head(info.value)
    assert head.startswith(f"cannot run {binary}")
    if os.geteuid() != 0 or kind != "not-executable":  # root may run a 0600 script anyway
        assert daemon.current() is None
    assert_nothing_left(daemon, binary)


async def test_a_kv_cache_too_large_for_memory(
    app_home: AppPaths, llama_server_bin: Path, demo_model: Path
) -> None:
    """256 slots of 8192 f32 cells: ~90 GiB of KV cache, refused by the allocator at once."""
    overcommit = Path("/proc/sys/vm/overcommit_memory")
    mem_kib = _meminfo("MemTotal") + _meminfo("SwapTotal")
    if overcommit.read_text().strip() == "1" or mem_kib > 80 * 1024 * 1024:
        pytest.skip("this machine would try to allocate the cache (overcommit or huge RAM)")
    spec = small_spec(
        demo_model, parallel=256, ctx=256 * 8192, cache_type_k="f32", cache_type_v="f32"
    )
    daemon = ManagedDaemon(app_home, binary=llama_server_bin, poll_interval=0.05)
    with pytest.raises(DaemonStartError) as info:
        await daemon.ensure(spec, probe=False)
    assert "exited while starting (exit code 1)" in one_line_head(info.value)
    assert "failed to allocate" in info.value.log_tail
    assert_nothing_left(daemon, demo_model, shared=True)


async def test_a_taken_port_is_retried_and_the_start_recovers(
    app_home: AppPaths,
    llama_server_bin: Path,
    demo_model: Path,
    taken_port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ports = iter([taken_port])
    monkeypatch.setattr(daemon_mod, "free_port", lambda host="": next(ports, 0) or _free())
    daemon = ManagedDaemon(app_home, binary=llama_server_bin, poll_interval=0.05)
    said: list[str] = []
    try:
        record = await daemon.ensure(small_spec(demo_model), said.append, probe=False)
        starts = [s for s in said if s.startswith("starting llama-server on port")]
        assert starts[0].endswith(str(taken_port)) and len(starts) == 2
        assert record.port != taken_port
        assert "couldn't bind" in daemon.log_tail(400)
        servers = [p for p in children_of(os.getpid()) if p != record.pid]
        assert [p for p in servers if "llama-server" in " ".join(cmdline(p) or [])] == []
    finally:
        await daemon.stop()
    assert_nothing_left(daemon, demo_model, shared=True)


async def test_every_port_taken_gives_up_with_the_log_tail(
    app_home: AppPaths,
    llama_server_bin: Path,
    demo_model: Path,
    taken_port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(daemon_mod, "free_port", lambda host="": taken_port)
    daemon = ManagedDaemon(app_home, binary=llama_server_bin, poll_interval=0.05)
    with pytest.raises(DaemonStartError) as info:
        await daemon.ensure(small_spec(demo_model), probe=False)
    assert one_line_head(info.value) == "llama-server could not bind a free port"
    assert "couldn't bind" in info.value.log_tail
    assert_nothing_left(daemon, demo_model, shared=True)


async def test_a_model_failure_after_a_bind_retry_is_not_blamed_on_the_port(
    app_home: AppPaths,
    llama_server_bin: Path,
    tmp_path: Path,
    taken_port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The log is shared by the attempts: the first attempt's bind error must not make the
    second attempt's model error look like another bind failure."""
    model = tmp_path / "broken.gguf"
    model.write_bytes(b"GGUF" + b"\x00" * 64)
    ports = iter([taken_port])
    monkeypatch.setattr(daemon_mod, "free_port", lambda host="": next(ports, 0) or _free())
    daemon = ManagedDaemon(app_home, binary=llama_server_bin, poll_interval=0.05)
    said: list[str] = []
    with pytest.raises(DaemonStartError) as info:
        await daemon.ensure(small_spec(model), said.append, probe=False)
    assert "exited while starting (exit code 1)" in one_line_head(info.value)
    assert len([s for s in said if s.startswith("starting llama-server")]) == 2
    assert_nothing_left(daemon, model)


def _free() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _meminfo(key: str) -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0
