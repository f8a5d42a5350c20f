"""`fusion-tui` as a Unix command: no terminal → a refusal and exit 2; a reader that goes away →
quiet, exit 141. Real subprocesses, since both are about the process's own file descriptors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fusion_tui.cli.shell import EXIT_BROKEN_PIPE, needs_terminal
from tests.child_env import child_env


def env_for(home: Path) -> dict[str, str]:
    return child_env(home)


def test_the_app_without_a_terminal_says_so_and_exits_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fusion_tui"],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
        env=env_for(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "needs a terminal" in done.stderr
    for command in ("fusion-tui run", "launch", "status", "doctor"):
        assert command in done.stderr
    assert "\x1b[" not in done.stderr and "\x1b[" not in done.stdout  # no escape codes
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "log").exists()  # no server was started


def test_needs_terminal_reads_isatty() -> None:
    class Stream:
        def __init__(self, tty: bool) -> None:
            self.tty = tty

        def isatty(self) -> bool:
            return self.tty

    assert needs_terminal(Stream(True)) == ""
    assert "needs a terminal" in needs_terminal(Stream(False))


@pytest.mark.parametrize(
    "argv",
    [["config", "show"], ["--help"], ["sessions", "list"], ["doctor", "--no-start"]],
)
def test_a_closed_pipe_is_quiet(tmp_path: Path, argv: list[str]) -> None:
    """stdout is a pipe whose reader is already gone: no traceback, exit 141 (128 + SIGPIPE)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "fusion_tui", *argv],
            stdin=subprocess.DEVNULL, stdout=write_end, stderr=subprocess.PIPE, text=True,
            timeout=120, env=env_for(tmp_path), cwd=tmp_path,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr
    assert done.stderr == ""
    # argparse's --help swallows the write error itself and exits 0: quiet too
    assert done.returncode == (0 if argv == ["--help"] else EXIT_BROKEN_PIPE)


def test_head_1_in_a_shell_pipeline_is_quiet(tmp_path: Path) -> None:
    cmd = f"{sys.executable} -m fusion_tui config show | head -1"
    done = subprocess.run(
        ["sh", "-c", cmd], capture_output=True, text=True, timeout=60, env=env_for(tmp_path),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0
    assert done.stdout == "{\n"
    assert done.stderr == ""
