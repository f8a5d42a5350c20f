"""ManagedDaemon on the real llama-server: start, health wait, adopt, stop, failures."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import DaemonStartError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.pids import is_alive
from fusion_tui.server.process.probe import ready_line

pytestmark = pytest.mark.server


def small_spec(model: Path, **kw: object) -> LaunchSpec:
    return LaunchSpec(model=model, parallel=2, ctx=1024, threads=2, **kw)  # type: ignore[arg-type]


def processes_using(path: Path) -> list[int]:
    """Pids whose command line mentions `path` (to prove nothing was left running)."""
    found = []
    needle = str(path).encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and is_alive(int(entry.name)):
            try:
                if needle in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


async def test_launch_adopt_and_stop(
    app_home: AppPaths, llama_server_bin: Path, demo_model: Path
) -> None:
    daemon = ManagedDaemon(app_home, binary=llama_server_bin)
    statuses: list[str] = []
    try:
        rec = await daemon.ensure(small_spec(demo_model), on_status=statuses.append)
        assert is_alive(rec.pid)
        assert os.getsid(rec.pid) == rec.pid  # own session: survives the app
        assert rec.n_ctx_slot == 512  # -c 1024 split over -np 2
        assert rec.kv_allocated_bytes == 23_040 * 1024  # SmolLM2: 23,040 B per token, f16
        assert rec.url == f"http://127.0.0.1:{rec.port}"
        assert rec.argv[rec.argv.index("-m") + 1] == str(demo_model.resolve())
        assert statuses[0].startswith("starting llama-server on port")
        assert statuses[-1] == "ready"

        pid_file = app_home.daemon_dir / "llama-server.pid"
        record_file = app_home.daemon_dir / f"launch-{rec.pid}.json"
        assert pid_file.read_text().strip() == str(rec.pid)
        saved = json.loads(record_file.read_text())
        assert (saved["ctx"], saved["parallel"], saved["n_ctx_slot"]) == (1024, 2, 512)
        assert saved["log_path"] == str(app_home.log_dir / "llama-server.log")
        for path in (pid_file, record_file):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert "llama_kv_cache" in daemon.log_tail(400) or "llama_kv_cache" in Path(
            rec.log_path
        ).read_text(errors="replace")  # -lv 4 shows the KV size lines

        probe = daemon.probe_result(rec)
        assert probe is not None and probe.tok_s > 0 and probe.pid == rec.pid
        assert probe.predicted_n >= 60 or probe.partial  # a loaded box hits the time bound
        assert ready_line(rec, probe).startswith(
            "ready · SmolLM2-135M-Instruct · 2 slots × 512 ctx"
        )
        probe_mtime = (app_home.daemon_dir / "probe.json").stat().st_mtime_ns

        other = ManagedDaemon(app_home, binary=llama_server_bin)  # a second app run
        adopted_status: list[str] = []
        again = await other.ensure(small_spec(demo_model), on_status=adopted_status.append)
        assert again.pid == rec.pid
        assert adopted_status and adopted_status[0].startswith("adopted")
        assert (app_home.daemon_dir / "probe.json").stat().st_mtime_ns == probe_mtime
        assert other.current() == again

        assert await other.stop() is True
        assert not is_alive(rec.pid)
        assert not pid_file.exists() and not record_file.exists()
        assert other.current() is None
        assert await other.stop() is False
    finally:
        await daemon.stop()


async def test_a_child_that_dies_at_start_gives_the_log_tail_and_leaves_nothing(
    app_home: AppPaths, llama_server_bin: Path, tmp_path: Path
) -> None:
    bad = tmp_path / "broken-model.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 64)
    daemon = ManagedDaemon(app_home, binary=llama_server_bin)
    with pytest.raises(DaemonStartError) as info:
        await daemon.ensure(small_spec(bad))
    assert "exited while starting" in str(info.value)
    assert info.value.log_tail.strip()
    assert "--- last lines of the server log ---" in str(info.value)
    assert processes_using(bad) == []
    assert daemon.current() is None
    assert not (app_home.daemon_dir / "llama-server.pid").exists()


async def test_a_start_deadline_kills_the_child(
    app_home: AppPaths, llama_server_bin: Path, demo_model: Path
) -> None:
    ticks = iter(range(10**6))
    daemon = ManagedDaemon(
        app_home,
        binary=llama_server_bin,
        start_timeout=3,
        poll_interval=0.001,
        clock=lambda: float(next(ticks)),  # each look at the clock is one "second"
    )
    spec = small_spec(demo_model, extra_args=("--alias", "deadline-test"))
    with pytest.raises(DaemonStartError, match="did not become ready within 3 s"):
        await daemon.ensure(spec, probe=False)
    assert [p for p in processes_using(demo_model) if b"deadline-test" in _cmd(p)] == []
    assert daemon.current() is None


def _cmd(pid: int) -> bytes:
    try:
        return (Path("/proc") / str(pid) / "cmdline").read_bytes()
    except OSError:
        return b""


async def test_ensure_replaces_our_daemon_when_the_model_differs(
    app_home: AppPaths, llama_server_bin: Path, demo_model: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.gguf"
    try:
        os.link(demo_model, copy)
    except OSError:
        copy.write_bytes(demo_model.read_bytes())
    daemon = ManagedDaemon(app_home, binary=llama_server_bin)
    try:
        first = await daemon.ensure(small_spec(demo_model), probe=False)
        second = await daemon.ensure(small_spec(copy), probe=False)
        assert second.pid != first.pid
        assert not is_alive(first.pid)
        async with LlamaClient(second.url) as client:
            assert Path((await client.props()).model_path) == copy.resolve()
    finally:
        await daemon.stop()


def test_headless_launch_waits_for_the_probe_and_prints_the_rate(
    app_home: AppPaths,
    llama_server_bin: Path,
    demo_model: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`fusion-tui launch` on the real server: ready at /health, the probe beside, and still the
    measured tok/s on the ready line before it exits; the server is left running, unowned."""
    from fusion_tui.cli import main

    monkeypatch.setenv("FUSION_TUI_SERVER__BINARY", str(llama_server_bin))
    monkeypatch.setenv("FUSION_TUI_LOCALMODELS__MANAGED__THREADS", "2")
    try:
        assert main(["launch", str(demo_model), "--parallel", "2", "--ctx", "1024"]) == 0
        captured = capsys.readouterr()
        line = captured.out.strip()
        assert line.startswith("ready · SmolLM2-135M-Instruct · 2 slots × 512 ctx · ~"), line
        assert "tok/s single stream" in line
        assert "measuring throughput" in captured.err
        daemon = ManagedDaemon(app_home)
        record = daemon.current()
        assert record is not None and record.owner_pid == 0
        assert daemon.probe_result(record) is not None
        assert main(["status", "--json"]) == 0
        info = json.loads(capsys.readouterr().out)
        assert info["tok_s"] > 0 and info["repack_off"] is record.repack_off
    finally:
        main(["stop"])
