"""The launch side of the server layer without a server: argv, records, probe files, ready line."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import DaemonStartError
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.launch import LaunchSpec, LaunchSpecError
from fusion_tui.server.process.probe import (
    ProbeResult,
    load_probe,
    model_display_name,
    ready_line,
    save_probe,
)
from fusion_tui.server.process.records import DaemonFiles, LaunchRecord


def record(pid: int = 4242, argv: list[str] | None = None, **kw: object) -> LaunchRecord:
    fields: dict[str, object] = dict(
        pid=pid,
        argv=argv or ["/bin/llama-server", "-m", "/m/SmolLM2-135M-Instruct.Q4_1.gguf"],
        model_path="/m/SmolLM2-135M-Instruct.Q4_1.gguf",
        host="127.0.0.1",
        port=8123,
        url="http://127.0.0.1:8123",
        started_at=1_700_000_000.0,
        ctx=16384,
        parallel=4,
        log_path="/tmp/llama-server.log",
        n_ctx_slot=4096,
    )
    fields.update(kw)
    return LaunchRecord(**fields)  # type: ignore[arg-type]


def test_argv_is_explicit_about_everything_that_matters(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    spec = LaunchSpec(model=model, parallel=2, ctx=2048, threads=2, extra_args=("--seed", "1"))
    argv = spec.argv("/opt/llama-server", 8123)
    assert argv[0] == "/opt/llama-server"

    def value(flag: str) -> str:
        return argv[argv.index(flag) + 1]

    assert value("-m") == str(model.resolve())
    assert value("--host") == "127.0.0.1"
    assert value("--port") == "8123"
    assert value("-np") == "2"
    assert value("-c") == "2048"
    assert value("-lv") == "4"
    assert value("-t") == "2"
    assert value("-fa") == "auto"
    assert "--no-ui" in argv and "--no-kv-unified" in argv and "--swa-full" not in argv
    assert argv[-2:] == ["--seed", "1"]


def test_quantised_v_cache_forces_flash_attention_on_and_refuses_off(tmp_path: Path) -> None:
    spec = LaunchSpec(model=tmp_path / "m.gguf", cache_type_k="q8_0", cache_type_v="q8_0")
    argv = spec.argv("llama-server", 1)
    assert argv[argv.index("-fa") + 1] == "on"
    off = LaunchSpec(model=tmp_path / "m.gguf", cache_type_v="q4_0", flash_attn="off")
    with pytest.raises(LaunchSpecError, match="quantised V cache"):
        off.argv("llama-server", 1)
    k_only = LaunchSpec(model=tmp_path / "m.gguf", cache_type_k="q8_0", flash_attn="off")
    assert k_only.argv("llama-server", 1)[argv.index("-fa") + 1] == "off"


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"parallel": 0}, "parallel"),
        ({"cache_type_k": "q3_k"}, "not a KV cache type"),
        ({"flash_attn": "yes"}, "on, off or auto"),
        ({"ctx": -1}, "ctx"),
    ],
)
def test_bad_specs_are_refused_with_a_message(
    tmp_path: Path, change: dict[str, object], match: str
) -> None:
    spec = LaunchSpec(model=tmp_path / "m.gguf", **change)  # type: ignore[arg-type]
    with pytest.raises(LaunchSpecError, match=match):
        spec.validate()


def test_records_are_written_atomically_private_and_read_back(tmp_path: Path) -> None:
    files = DaemonFiles(tmp_path / "daemon")
    rec = record(fit={"ctx": 4096}, kv_allocated_bytes=94_371_840)
    files.write(rec)
    assert files.read_pid() == rec.pid
    assert files.read_record(rec.pid) == rec
    for path in (files.pid_file, files.record_file(rec.pid)):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in files.folder.iterdir() if p.name.startswith(".")] == []
    files.record_file(rec.pid).write_text("{torn")
    assert files.read_record(rec.pid) is None
    files.clear(rec.pid)
    assert files.read_pid() is None


def test_probe_is_read_back_only_for_the_process_it_measured(tmp_path: Path) -> None:
    rec = record()
    result = ProbeResult(tok_s=95.4, predicted_n=64, predicted_ms=660.0, model=rec.model_path,
                         ctx=4096, slots=4, time=1.0, pid=rec.pid)  # fmt: skip
    save_probe(tmp_path, result)
    assert load_probe(tmp_path, rec) == result
    assert load_probe(tmp_path, record(pid=rec.pid + 1)) is None
    assert json.loads((tmp_path / "probe.json").read_text())["tok_s"] == 95.4


def test_ready_line_reads_like_the_issue_says() -> None:
    probe = ProbeResult(tok_s=95.4, predicted_n=64, predicted_ms=660.0)
    assert ready_line(record(), probe) == (
        "ready · SmolLM2-135M-Instruct · 4 slots × 4096 ctx · ~95 tok/s single stream"
    )
    assert ready_line(record(parallel=1, n_ctx_slot=512), None) == (
        "ready · SmolLM2-135M-Instruct · 1 slot × 512 ctx"
    )
    assert "~7.5 tok/s" in ready_line(record(), ProbeResult(7.49, 64, 1.0))


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/m/SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M-Instruct"),
        ("Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf", "Qwen2.5-Coder-7B-Instruct"),
        ("llama-3-8b.f16.gguf", "llama-3-8b"),
        ("gemma-3-1b-it-IQ4_XS.gguf", "gemma-3-1b-it"),
        ("plain.gguf", "plain"),
    ],
)
def test_model_display_name(path: str, name: str) -> None:
    assert model_display_name(path) == name


def home(tmp_path: Path) -> AppPaths:
    return AppPaths.default(env={"FUSION_TUI_HOME": str(tmp_path / "home")})


async def test_a_foreign_process_named_by_the_pid_file_is_never_touched(tmp_path: Path) -> None:
    paths = home(tmp_path)
    foreign = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        DaemonFiles(paths.daemon_dir).write(
            record(pid=foreign.pid, argv=["/opt/llama-server", "-m", "/m/x.gguf"])
        )
        daemon = ManagedDaemon(paths, binary=Path("/nonexistent/llama-server"))
        assert daemon.current() is None
        assert await daemon.stop() is False
        assert foreign.poll() is None  # still running
        assert DaemonFiles(paths.daemon_dir).read_pid() is None  # the stale pid file is gone
    finally:
        foreign.kill()
        foreign.wait()


async def test_missing_model_is_a_clear_start_error(tmp_path: Path) -> None:
    daemon = ManagedDaemon(home(tmp_path), binary=Path(sys.executable))
    with pytest.raises(DaemonStartError, match="no model file at"):
        await daemon.launch(LaunchSpec(model=tmp_path / "absent.gguf"))


async def test_a_binary_that_exits_at_once_gives_the_log_tail_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    script = tmp_path / "fake-server"
    script.write_text("#!/bin/sh\necho 'error: unknown argument: --frobnicate' >&2\nexit 1\n")
    script.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    paths = home(tmp_path)
    daemon = ManagedDaemon(paths, binary=script, poll_interval=0.001)
    with pytest.raises(DaemonStartError) as info:
        await daemon.ensure(LaunchSpec(model=model))
    assert "exit code 1" in str(info.value)
    assert "unknown argument: --frobnicate" in info.value.log_tail
    assert daemon.current() is None
    assert not DaemonFiles(paths.daemon_dir).pid_file.exists()
    assert [n for n in os.listdir(paths.daemon_dir) if n != "launch.lock"] == []


def test_trim_log_moves_a_big_log_aside_and_empties_it_in_place(tmp_path: Path) -> None:
    paths = home(tmp_path)
    paths.ensure(paths.log_dir)
    daemon = ManagedDaemon(paths)
    log = paths.log_dir / "llama-server.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)  # as the server holds it
    try:
        os.write(fd, b"x" * 2000)
        assert daemon.trim_log(max_bytes=4000) is False
        assert daemon.trim_log(max_bytes=1000) is True
        assert log.stat().st_size == 0
        os.write(fd, b"next line\n")
    finally:
        os.close(fd)
    assert log.read_bytes() == b"next line\n"  # the writer continues at the new end
    assert (paths.log_dir / "llama-server.log.1").read_bytes() == b"x" * 2000


def test_extra_args_cannot_take_over_the_address_model_or_port(tmp_path: Path) -> None:
    for flag in ("--host", "--port", "-m"):
        spec = LaunchSpec(model=tmp_path / "m.gguf", extra_args=(flag, "x"))
        with pytest.raises(LaunchSpecError, match="extraArgs may not set"):
            spec.validate()


def test_our_own_fit_replaces_llama_cpp_fit(tmp_path: Path) -> None:
    argv = LaunchSpec(model=tmp_path / "m.gguf").argv("llama-server", 8080)
    assert argv[argv.index("--fit") + 1] == "off"
    assert argv[argv.index("--host") + 1] == "127.0.0.1"


def test_idle_slots_are_not_copied_to_the_ram_cache_unless_extra_args_say(tmp_path: Path) -> None:
    argv = LaunchSpec(model=tmp_path / "m.gguf").argv("llama-server", 8080)
    assert "--no-cache-idle-slots" in argv
    own = LaunchSpec(model=tmp_path / "m.gguf", extra_args=("--cache-idle-slots",))
    argv = own.argv("llama-server", 8080)
    assert "--no-cache-idle-slots" not in argv and argv[-1] == "--cache-idle-slots"


def test_log_notes_state_the_plan_and_the_check() -> None:
    from fusion_tui.server.process.log_notes import allocation_note, plan_note

    fit = {
        "ctx": 8192,
        "per_slot_ctx": 2048,
        "parallel": 4,
        "swa_full": False,
        "swa_full_reason": "no sliding-window layers",
        "prefix_reuse": "full",
        "fit": {"limited_by": "trained context", "available_bytes": 8 << 30},
    }
    note = plan_note(fit, 180 << 20)
    assert "fitted ctx 8192 (2048 per slot, 4 slots, limited by trained context)" in note
    assert "swa-full off (no sliding-window layers)" in note
    assert note.endswith("KV estimate 180.00 MiB\n")
    assert allocation_note(180 << 20, 180 << 20).endswith("(+0.00%)\n")
    assert "not compared" in allocation_note(None, 1)
