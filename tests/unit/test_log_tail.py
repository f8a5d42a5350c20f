"""LogTail: new complete lines only, a budget on first read, and a restart on rotation."""

from __future__ import annotations

import os
from pathlib import Path

from fusion_tui.server.process.log_tail import LogTail


def test_a_missing_file_reads_nothing(tmp_path: Path) -> None:
    assert LogTail(tmp_path / "none.log").read_new() == []


def test_returns_appended_lines_and_holds_back_a_half_written_one(tmp_path: Path) -> None:
    path = tmp_path / "s.log"
    path.write_text("one\ntwo\nthr")
    tail = LogTail(path)
    assert tail.read_new() == ["one", "two"]
    assert tail.read_new() == []
    with path.open("a") as f:
        f.write("ee\r\nfour\n")
    assert tail.read_new() == ["three", "four"]


def test_the_first_read_starts_near_the_end_on_a_line_boundary(tmp_path: Path) -> None:
    path = tmp_path / "s.log"
    path.write_text("".join(f"line {i:04d}\n" for i in range(1000)))  # 10 bytes a line
    lines = LogTail(path, initial_bytes=95).read_new()
    assert lines == [f"line {i:04d}" for i in range(991, 1000)]


def test_a_replaced_file_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "s.log"
    path.write_text("old 1\nold 2\n")
    tail = LogTail(path)
    assert tail.read_new() == ["old 1", "old 2"]
    os.replace(path, tmp_path / "s.log.1")
    path.write_text("new 1\n")
    assert tail.read_new() == ["new 1"]


def test_a_truncated_file_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "s.log"
    path.write_text("a long first run\n")
    tail = LogTail(path)
    tail.read_new()
    with path.open("w") as f:
        f.write("b\n")
    assert tail.read_new() == ["b"]


def test_bad_bytes_are_replaced_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "s.log"
    path.write_bytes(b"ok \xff\xfe\n")
    assert LogTail(path).read_new() == ["ok \ufffd\ufffd"]


def test_one_call_reads_at_most_one_chunk(tmp_path: Path) -> None:
    path = tmp_path / "s.log"
    path.write_text("aaaa\nbbbb\ncccc\n")
    tail = LogTail(path, chunk=7)
    assert tail.read_new() == ["aaaa"]
    assert tail.read_new() == ["bbbb"]
    assert tail.read_new() == ["cccc"]
