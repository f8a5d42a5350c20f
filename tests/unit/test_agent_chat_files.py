"""The files shown with a task: the ones it names, a small workspace whole, the rest by name."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.agent.chat_files import (
    choose,
    file_block,
    fix_target,
    named_in,
    named_unlisted,
    workspace_files,
)
from fusion_tui.agent.tools.workspace import Workspace


def test_files_are_named_by_path_or_by_a_unique_base_name() -> None:
    files = ["src/a.py", "src/b.py", "tests/b.py", "README.md"]
    assert named_in("fix src/a.py and README.md.", files) == ["src/a.py", "README.md"]
    assert named_in("look at a.py", files) == ["src/a.py"]
    assert named_in("look at b.py", files) == []  # two files are called b.py


def test_hidden_and_tool_folders_are_left_out(tmp_path: Path) -> None:
    for rel in ["a.py", ".git/config", "node_modules/x.js", "pkg/__pycache__/m.pyc", "pkg/m.py"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    assert workspace_files(Workspace(tmp_path)) == ["a.py", "pkg/m.py"]


def test_a_small_workspace_is_shown_whole_within_the_budget() -> None:
    texts = {"a.py": "a = 1\n", "b.py": "b = 2\n", "data.bin": "\0"}
    chat = choose("tidy up", list(texts), texts.__getitem__, budget_chars=10_000)
    assert list(chat.shown) == ["a.py", "b.py"] and chat.others == ["data.bin"]
    tight = choose("fix b.py", list(texts), texts.__getitem__, budget_chars=8)
    assert list(tight.shown) == ["b.py"]  # the named file first, then what fits


def test_files_the_history_holds_unchanged_are_named_not_shown_again() -> None:
    texts = {"a.py": "a = 1\n", "b.py": "b = 2\n"}
    chat = choose("go on", list(texts), texts.__getitem__, budget_chars=10_000).without(["a.py"])
    text = chat.render()
    assert file_block("b.py", "b = 2\n") in text and file_block("a.py", "a = 1\n") not in text
    assert "Shown earlier in this chat, unchanged since: a.py" in text


def test_a_hidden_file_the_task_names_is_one_to_show() -> None:
    files = ["bowling.py", "bowling_test.py"]
    task = "Do what .docs/instructions.md says, in bowling.py (see ../secret.txt and /etc/x.conf)"
    assert named_unlisted(task, files) == [".docs/instructions.md"]


@pytest.mark.parametrize(
    ("task", "shown", "target"),
    [
        ("fix stats.py so the tests pass", ["stats.py", "test_stats.py"], "stats.py"),
        ("make the tests pass", ["stats.py", "test_stats.py"], "stats.py"),
        ("fix calc.py", ["calc.py", "check.py"], "calc.py"),
        ("make the tests pass", ["calc.py", "check.py"], None),
        ("fix it", ["tests/test_a.py"], None),
    ],
)
def test_the_file_a_fix_goes_to(task: str, shown: list[str], target: str | None) -> None:
    assert fix_target(task, shown) == target
