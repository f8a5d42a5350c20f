"""`fusion-tui doctor` with fakes: each broken thing is one ✘ line with its fix, and exit 1."""

from __future__ import annotations

import json
import signal
import stat
from pathlib import Path

import pytest

from fusion_tui import cli
from fusion_tui.cli.doctor_checks import Check, check_cpu, format_checks, passed, run_checks
from fusion_tui.cli.doctor_start import StartResult, signal_words
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from tests.tinymodels import write_metadata

LLAMA = {
    ".block_count": 4,
    ".context_length": 8192,
    ".embedding_length": 256,
    ".attention.head_count": 8,
    ".attention.head_count_kv": 2,
    "general.file_type": 15,
}


def write_tiny_llama(path: Path) -> Path:
    return write_metadata(path, "llama", LLAMA)


VERSION = "version: 11434 (abc1234)\nbuilt with cc (GCC) 12.2.0 for x86_64-linux-gnu\n"


def fake_binary(tmp: Path, body: str | None = None) -> Path:
    path = tmp / "llama-server"
    script = body or f"#!/bin/sh\nprintf '{VERSION}' >&2\n"
    path.write_text(script)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def write_config(paths: AppPaths, text: str) -> Path:
    paths.config_dir.mkdir(parents=True, exist_ok=True)
    paths.config_file.write_text(text)
    return paths.config_file


class Starter:
    """Scripted one-token starts; records the extra flags of each attempt."""

    def __init__(self, *results: StartResult) -> None:
        self.results = list(results)
        self.extras: list[tuple[str, ...]] = []

    async def __call__(
        self, binary: Path, model: Path, settings: Settings, extra: tuple[str, ...]
    ) -> StartResult:
        self.extras.append(extra)
        return self.results.pop(0)


OK = StartResult(True, "started in 1.0 s, answered 1 token, stopped", tok_s=42.0)
SIGILL = StartResult(False, "llama-server exited while starting (exit code -4)", -signal.SIGILL)


@pytest.fixture
def good(app_home: AppPaths, tmp_path: Path) -> AppPaths:
    """A config naming a runnable fake binary and a readable tiny GGUF."""
    binary = fake_binary(tmp_path)
    model = write_tiny_llama(tmp_path / "tiny.gguf")
    write_config(app_home, f"server:\n  binary: {binary}\nlocalModels:\n  model: {model}\n")
    return app_home


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


async def test_everything_works_with_a_good_setup(good: AppPaths) -> None:
    starter = Starter(OK)
    checks = await run_checks(good, {}, starter=starter)
    names = [c.name for c in checks]
    assert names == [
        "llama-server", "cpu", "model", "memory", "config", "folders", "server start", "tok/s",
    ]  # fmt: skip
    assert passed(checks), format_checks(checks)
    found = by_name(checks)
    assert "version 11434 (abc1234)" in found["llama-server"].detail
    assert "llama" in found["model"].detail and "tiny.gguf" in found["model"].detail
    assert "context" in found["memory"].detail
    assert found["tok/s"].detail == "42.0 tok/s single stream"
    assert starter.extras == [()]
    assert format_checks(checks).endswith("fusion-tui doctor: everything needed works")


async def test_a_bad_config_is_one_cross_with_file_line_and_the_fix(app_home: AppPaths) -> None:
    path = write_config(app_home, "server:\n  mode: managed\n   binary: [oops\n")
    checks = await run_checks(app_home, {}, start=False)
    config = by_name(checks)["config"]
    assert not config.ok
    assert f"{path}:3:" in config.detail
    assert str(path) in config.fix and "config show" in config.fix
    assert not passed(checks)
    assert "✘ config" in format_checks(checks)


def test_doctor_command_exits_1_on_a_bad_config_and_prints_json(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    write_config(app_home, "localModels:\n  managed:\n    parallel: many\n")
    code = cli.main(["doctor", "--json", "--no-start"])
    out = capsys.readouterr().out
    assert code == 1
    checks = json.loads(out)
    assert all(set(c) == {"name", "ok", "detail", "fix"} for c in checks)
    config = next(c for c in checks if c["name"] == "config")
    assert config["ok"] is False
    assert "localModels.managed.parallel" in config["detail"] and ":3:" in config["detail"]
    assert config["fix"]


async def test_a_missing_binary_says_how_to_get_one(app_home: AppPaths, tmp_path: Path) -> None:
    model = write_tiny_llama(tmp_path / "tiny.gguf")
    write_config(
        app_home, f"server:\n  binary: {tmp_path / 'nope'}\nlocalModels:\n  model: {model}\n"
    )
    starter = Starter()
    checks = await run_checks(app_home, {"PATH": ""}, starter=starter)
    found = by_name(checks)
    assert not found["llama-server"].ok
    assert "not an executable file" in found["llama-server"].detail
    assert "server.binary" in found["llama-server"].fix and "PATH" in found["llama-server"].fix
    assert not found["server start"].ok and "no llama-server" in found["server start"].detail
    assert starter.extras == []  # nothing was started
    assert not passed(checks)


async def test_a_binary_that_fails_its_version_is_a_cross(
    app_home: AppPaths, tmp_path: Path
) -> None:
    binary = fake_binary(tmp_path, "#!/bin/sh\necho 'libggml.so: cannot open' >&2\nexit 127\n")
    write_config(app_home, f"server:\n  binary: {binary}\n")
    checks = await run_checks(app_home, {}, start=False)
    found = by_name(checks)["llama-server"]
    assert not found.ok and "exited with code 127" in found.detail and "libggml" in found.detail


async def test_a_non_gguf_model_is_named_with_the_fix(app_home: AppPaths, tmp_path: Path) -> None:
    binary = fake_binary(tmp_path)
    fake = tmp_path / "fake.gguf"
    fake.write_text("this is not a model\n" * 10)
    write_config(app_home, f"server:\n  binary: {binary}\nlocalModels:\n  model: {fake}\n")
    starter = Starter()
    checks = await run_checks(app_home, {}, starter=starter)
    found = by_name(checks)
    assert not found["model"].ok
    assert "not a usable GGUF" in found["model"].detail and str(fake) in found["model"].detail
    assert "localModels.model" in found["model"].fix and "inspect" in found["model"].fix
    assert not found["memory"].ok and not found["server start"].ok
    assert starter.extras == []
    assert found["llama-server"].ok and found["config"].ok


async def test_sigill_retries_with_repacking_off_and_says_so(good: AppPaths) -> None:
    starter = Starter(SIGILL, OK)
    checks = await run_checks(good, {}, starter=starter)
    assert starter.extras == [(), ("--no-repack",)]
    start = by_name(checks)["server start"]
    assert start.ok and "repacking off" in start.detail and "AMX" in start.detail
    assert "--no-repack" in start.fix and "extraArgs" in start.fix
    assert passed(checks)


async def test_sigill_every_time_is_named_in_words_with_the_rebuild(good: AppPaths) -> None:
    starter = Starter(SIGILL, SIGILL)
    checks = await run_checks(good, {}, starter=starter)
    start = by_name(checks)["server start"]
    assert not start.ok
    assert "died of an illegal instruction (SIGILL)" in start.detail
    assert "CMAKE_ARGS=" in start.fix and "server.binary" in start.fix
    assert not by_name(checks)["tok/s"].ok
    assert not passed(checks)


def test_signal_words() -> None:
    assert signal_words(-4) == "an illegal instruction (SIGILL)"
    assert signal_words(-11) == "a segmentation fault (SIGSEGV)"
    assert signal_words(-9).startswith("SIGKILL")
    assert signal_words(1) == "" and signal_words(None) == ""


def test_cpu_names_amx_when_advertised(tmp_path: Path) -> None:
    info = tmp_path / "cpuinfo"
    info.write_text("processor: 0\nflags\t\t: fpu sse avx2 avx512f avx512bw amx_tile amx_int8\n")
    cpu = check_cpu(info)
    assert cpu.ok and not cpu.needed
    assert "avx2" in cpu.detail and "avx512 (2 flags)" in cpu.detail
    assert "AMX advertised (amx_int8, amx_tile)" in cpu.detail and "--no-repack" in cpu.detail
    info.write_text("flags: fpu sse\n")
    plain = check_cpu(info)
    assert "no avx2" in plain.detail and "no AMX" in plain.detail and "CMAKE_ARGS" in plain.fix


async def test_an_unwritable_data_folder_is_a_cross(good: AppPaths) -> None:
    good.data_dir.mkdir(parents=True)
    good.data_dir.chmod(0o500)
    try:
        checks = await run_checks(good, {}, start=False)
    finally:
        good.data_dir.chmod(0o700)
    folders = by_name(checks)["folders"]
    import os

    if os.geteuid() == 0:  # root writes anywhere: the check must still pass then
        assert folders.ok
    else:
        assert (
            not folders.ok and "not writable" in folders.detail and "FUSION_TUI_HOME" in folders.fix
        )
