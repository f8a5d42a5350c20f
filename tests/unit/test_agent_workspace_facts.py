"""Prompts a small model can follow: real top-level names, real-path examples, closest paths."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent.approval import Decision
from fusion_tui.agent.events import ToolFinished
from fusion_tui.agent.loop import run_task
from fusion_tui.agent.tools.suggest import closest_paths
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.agent.workspace_facts import MAX_BYTES, MAX_ENTRIES, render, top_level
from tests.fakes.clock import FakeClock
from tests.unit.test_agent_fakes import Recorder, Script, act, make_deps


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "hello.py").write_text("print('hi')\n")
    (tmp_path / "util.py").write_text("def add(a, b):\n    return a + b\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "core.py").write_text("X = 1\n")
    (tmp_path / ".git").mkdir()
    return tmp_path


def system_message(prompt: str) -> str:
    return prompt.split("<|im_end|>")[0]


async def test_the_system_message_lists_real_files_and_examples_use_them(ws: Path) -> None:
    script = Script(FakeClock(), [act("finish", summary="ok")])
    await run_task("t", session_id="s", deps=make_deps(ws, script))
    system = system_message(script.bodies[0]["prompt"])
    assert "### workspace files (top level)\npkg/\nhello.py\nutil.py\n" in system
    assert ".git" not in system
    assert json.dumps({"tool": "read_file", "args": {"path": "hello.py"}}) in system
    assert json.dumps({"tool": "list_dir", "args": {"path": "pkg"}}) in system
    assert "path_to_file" not in system and "path/to" not in system


async def test_the_prefix_stays_byte_stable_when_the_task_adds_a_file(ws: Path) -> None:
    script = Script(
        FakeClock(),
        [
            act("write_file", path="new.py", content="x = 1\n"),
            act("list_dir"),
            act("finish", summary="wrote new.py"),
        ],
    )
    deps = make_deps(ws, script, approver=Recorder(Decision.ALLOW_ONCE))
    res = await run_task("t", session_id="s", deps=deps)
    assert res.outcome == "completed" and (ws / "new.py").exists()
    prompts = [b["prompt"] for b in script.bodies]
    for prev, cur in itertools.pairwise(prompts):
        assert cur.startswith(prev)
    assert "new.py" not in system_message(prompts[-1])  # computed once, at the task's start


def test_the_listing_is_bounded_in_count_and_bytes(tmp_path: Path) -> None:
    for i in range(300):
        (tmp_path / f"module_with_a_rather_long_name_{i:03d}.py").write_text("")
    top = top_level(Workspace(tmp_path))
    assert len(top.files) <= MAX_ENTRIES
    assert sum(len(n) + 1 for n in top.files) <= MAX_BYTES
    assert top.more == 300 - len(top.files)
    assert f"… {top.more} more entries" in render(top)
    assert render(top) == render(top_level(Workspace(tmp_path)))  # stable bytes


async def test_a_missing_path_error_names_the_closest_real_paths(ws: Path) -> None:
    events: list[Any] = []
    script = Script(
        FakeClock(),
        [
            act("read_file", path="helo.py"),
            act("read_file", path="src/core.py"),
            act("read_file", path="path_to_file"),
            act("finish", summary="ok"),
        ],
    )
    await run_task("t", session_id="s", deps=make_deps(ws, script, events=events))
    errors = [e.result for e in events if isinstance(e, ToolFinished)]
    assert errors[0].startswith("helo.py does not exist; closest real paths: hello.py")
    assert "pkg/core.py" in errors[1]
    assert "top level holds: hello.py, pkg/, util.py" in errors[2]


def test_closest_paths_is_bounded(tmp_path: Path) -> None:
    for i in range(50):
        (tmp_path / f"file{i}.py").write_text("")
    assert len(closest_paths(tmp_path, "file1.pyy")) <= 4
    assert closest_paths(tmp_path, "file1.pyy")[0] == "file1.py"


async def test_a_start_line_past_the_end_says_how_to_read_the_file(ws: Path) -> None:
    events: list[Any] = []
    script = Script(
        FakeClock(), [act("read_file", path="hello.py", start_line=5), act("finish", summary="x")]
    )
    await run_task("t", session_id="s", deps=make_deps(ws, script, events=events))
    (error,) = [e.result for e in events if isinstance(e, ToolFinished)]
    assert "hello.py has 1 line(s); leave out start_line and end_line" in error


async def test_list_dir_on_a_file_says_to_read_it(ws: Path) -> None:
    events: list[Any] = []
    script = Script(FakeClock(), [act("list_dir", path="hello.py"), act("finish", summary="x")])
    await run_task("t", session_id="s", deps=make_deps(ws, script, events=events))
    (error,) = [e.result for e in events if isinstance(e, ToolFinished)]
    assert error == (
        "hello.py is a file, not a directory; to see its content call read_file with path hello.py"
    )
