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


def test_a_file_put_back_as_it_was_is_not_left_changed() -> None:
    """A task whose attempts all failed and were undone ended "changed frac.py · ... they are
    as they were"."""
    files = TaskFiles()
    files.before.update({"frac.py": "old", "new.py": None, "b.py": "b"})
    files.wrote("frac.py", "attempt")
    files.wrote("new.py", "created")
    files.wrote("b.py", "b2")
    files.wrote("c.py", "no text known from before")
    files.texts["frac.py"] = "old"  # put back
    assert files.changed == ["frac.py", "new.py", "b.py", "c.py"]
    assert files.left_changed() == ["new.py", "b.py", "c.py"]
