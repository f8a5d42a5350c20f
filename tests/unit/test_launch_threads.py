"""Threads of the managed launch: `auto` by machine size and how busy it is at launch, an explicit
number, the user's `-t`."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from fusion_tui.config.loader import ConfigError, load_settings, settings_to_dict
from fusion_tui.config.settings import ManagedSettings
from fusion_tui.paths import AppPaths
from fusion_tui.server.process import daemon as daemon_module
from fusion_tui.server.process import launch
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.launch import LaunchSpec, auto_threads, busy_between, cpu_times


def threads_in(argv: list[str]) -> list[str]:
    """Every value given to -t/--threads, in order (llama.cpp takes the last)."""
    return [argv[i + 1] for i, a in enumerate(argv) if a in ("-t", "--threads")]


@pytest.mark.parametrize(
    ("cores", "expected"), [(1, 1), (2, 1), (3, 2), (4, 3), (5, None), (64, None)]
)
def test_auto_leaves_one_core_free_on_small_machines_only(cores: int, expected: int | None) -> None:
    assert auto_threads(cores) == expected


def test_auto_on_two_cores_launches_one_thread(tmp_path: Path) -> None:
    argv = LaunchSpec(model=tmp_path / "m.gguf").argv("llama-server", 1, cores=2, environ={})
    assert threads_in(argv) == ["1"]
    assert "-tb" not in argv  # batch threads follow -t


def test_auto_on_a_big_machine_leaves_llama_cpp_its_default(tmp_path: Path) -> None:
    argv = LaunchSpec(model=tmp_path / "m.gguf").argv("llama-server", 1, cores=16, environ={})
    assert threads_in(argv) == []


def test_explicit_threads_beat_auto(tmp_path: Path) -> None:
    argv = LaunchSpec(model=tmp_path / "m.gguf", threads=2).argv(
        "llama-server", 1, cores=2, environ={}
    )
    assert threads_in(argv) == ["2"]


@pytest.mark.parametrize("flag", ["-t", "--threads"])
@pytest.mark.parametrize("threads", [None, 2])
def test_the_users_extra_args_threads_win(tmp_path: Path, flag: str, threads: int | None) -> None:
    spec = LaunchSpec(model=tmp_path / "m.gguf", threads=threads, extra_args=(flag, "3"))
    argv = spec.argv("llama-server", 1, cores=2, environ={})
    assert threads_in(argv) == ["3"]


def test_extra_args_poll_is_passed_untouched_beside_auto_threads(tmp_path: Path) -> None:
    spec = LaunchSpec(model=tmp_path / "m.gguf", extra_args=("--poll", "0"))
    argv = spec.argv("llama-server", 1, cores=2, environ={})
    assert threads_in(argv) == ["1"]
    assert argv[-2:] == ["--poll", "0"]


def test_llama_arg_threads_in_the_environment_wins_over_auto(tmp_path: Path) -> None:
    spec = LaunchSpec(model=tmp_path / "m.gguf")
    env = {"LLAMA_ARG_THREADS": "2"}
    assert threads_in(spec.argv("llama-server", 1, cores=2, environ=env)) == []
    explicit = LaunchSpec(model=tmp_path / "m.gguf", threads=2)
    argv = explicit.argv("llama-server", 1, cores=2, environ={"LLAMA_ARG_THREADS": "4"})
    assert threads_in(argv) == ["2"]  # the config file's number is the user's choice too


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_config_threads_default_to_auto_and_accept_auto_null_or_a_number(tmp_path: Path) -> None:
    assert ManagedSettings().threads == "auto"
    assert ManagedSettings().thread_count is None
    for text, threads, count in (
        ("threads: auto", "auto", None),
        ("threads: null", None, None),
        ("threads: 2", 2, 2),
    ):
        path = write(tmp_path, f"localModels:\n  managed:\n    {text}\n")
        managed = load_settings(path, env={}).local_models.managed
        assert (managed.threads, managed.thread_count) == (threads, count)
    env = {"FUSION_TUI_LOCALMODELS__MANAGED__THREADS": "3"}
    assert load_settings(tmp_path / "none.yaml", env=env).local_models.managed.thread_count == 3


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("threads: many", r"localModels\.managed\.threads: should be one of auto, not 'many'"),
        ("threads: 0", r"localModels\.managed\.threads: should be auto or a number .* not 0"),
        ("threads: -2", r"localModels\.managed\.threads: should not be negative"),
        ("threads: true", r"localModels\.managed\.threads: should be a whole number"),
    ],
)
def test_bad_threads_are_named_with_file_line_and_column(
    tmp_path: Path, text: str, match: str
) -> None:
    path = write(tmp_path, f"localModels:\n  managed:\n    {text}\n")
    with pytest.raises(ConfigError, match=match) as info:
        load_settings(path, env={})
    assert f"{path}:3:14:" in str(info.value)


def test_config_show_prints_threads_auto(tmp_path: Path) -> None:
    path = write(tmp_path, "version: 3\n")
    shown = settings_to_dict(load_settings(path, env={}))
    assert shown["localModels"]["managed"]["threads"] == "auto"


@pytest.mark.parametrize(
    ("cores", "busy", "expected"),
    [
        (2, 0.1, 2),
        (2, 0.49, 2),
        (2, 0.5, 1),
        (2, 1.3, 1),
        (2, None, 1),
        (4, 0.0, 4),
        (8, 0.0, None),
    ],
)
def test_auto_takes_every_core_of_a_small_machine_only_when_it_is_quiet(
    cores: int, busy: float | None, expected: int | None
) -> None:
    assert auto_threads(cores, busy) == expected


def test_busy_cores_come_from_two_samples_of_proc_stat() -> None:
    before = cpu_times("cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3 4 5\n")
    after = cpu_times("cpu  150 0 150 1000 100 0 0 0 0 0\n")
    assert before == (200, 1000) and after == (300, 1400)
    assert busy_between(before, after, 2) == pytest.approx(0.5)  # 100 busy of 400 ticks
    assert busy_between(after, after, 2) is None
    # the app's own CPU time meanwhile is no neighbour's: 400 ticks on 2 cores are 200 ticks of
    # wall time; this process used 0.3 of a core of them
    wall_s = 200 / launch._CLOCK_TICKS
    assert busy_between(before, after, 2, own_s=0.3 * wall_s) == pytest.approx(0.2)
    assert busy_between(before, after, 2, own_s=wall_s) == 0.0  # never below nothing
    assert cpu_times("intr 1 2 3\n") is None


@pytest.mark.parametrize(("busy", "threads", "said"), [
    (0.1, 2, "-t 2 of 2 cores (0.1 of 2 cores busy at launch, a quiet machine)"),
    (1.2, 1, "-t 1 of 2 cores (1.2 of 2 cores busy at launch)"),
    (None, 1, "-t 1 of 2 cores (how busy the machine is could not be read)"),
])  # fmt: skip
def test_the_launch_decides_auto_threads_by_how_busy_the_machine_is(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    busy: float | None,
    threads: int,
    said: str,
) -> None:
    async def measured(_self: object, _cores: int) -> float | None:
        return busy

    monkeypatch.setattr(ManagedDaemon, "_busy_cores", measured)
    monkeypatch.setattr(daemon_module, "usable_cores", lambda: 2)
    monkeypatch.delenv("LLAMA_ARG_THREADS", raising=False)
    daemon = ManagedDaemon(AppPaths.default(env={"FUSION_TUI_HOME": str(tmp_path)}))
    heard: list[str] = []
    spec, note = anyio.run(
        daemon.resolve_threads, LaunchSpec(model=tmp_path / "m.gguf"), heard.append
    )
    assert (spec.threads, note) == (threads, said)
    assert heard == [f"threads: {said}"]
    assert threads_in(spec.argv("llama-server", 1, cores=2, environ={})) == [str(threads)]


def test_a_threads_setting_of_the_users_is_left_to_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def never(_self: object, _cores: int) -> float | None:
        raise AssertionError("measured although the user set the threads")

    monkeypatch.setattr(ManagedDaemon, "_busy_cores", never)
    monkeypatch.setattr(daemon_module, "usable_cores", lambda: 2)
    daemon = ManagedDaemon(AppPaths.default(env={"FUSION_TUI_HOME": str(tmp_path)}))
    for spec in (
        LaunchSpec(model=tmp_path / "m.gguf", threads=1),
        LaunchSpec(model=tmp_path / "m.gguf", extra_args=("-t", "2")),
    ):
        assert anyio.run(daemon.resolve_threads, spec, print) == (spec, "")
