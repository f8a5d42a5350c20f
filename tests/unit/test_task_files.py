"""`TaskFiles`: the one record of a task's files that its loop, replies and checks share."""

from __future__ import annotations

from fusion_tui.agent.task import TaskFiles


def test_a_write_is_in_the_chat_known_and_changed_once_in_order() -> None:
    files = TaskFiles(texts={"a.py": "old\n"}, known={"a.py", "t.py"})
    files.wrote("b.py", "new\n")
    files.wrote("a.py", "x\n")
    files.wrote("b.py", "newer\n")
    assert files.texts == {"a.py": "x\n", "b.py": "newer\n"}
    assert files.known == {"a.py", "b.py", "t.py"}
    assert files.changed == ["b.py", "a.py"]
