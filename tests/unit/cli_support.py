"""Helpers for the tests that drive `fusion-tui run` / `chat` through `cli.main` against the fake
llama-server: a scripted agent action, one CLI call with its output, its JSON lines, a workspace.
The server itself is the `cli_server` fixture (tests/unit/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fusion_tui import cli
from tests.fakes.fake_server import Reply


def act(tool: str, **args: Any) -> Reply:
    """The fake server's reply for one agent step: the call `tool(args)` as Qwen2.5 writes it."""
    call = json.dumps({"name": tool, "arguments": args})
    return Reply(text=[f"<tool_call>\n{call}\n</tool_call>"], prompt_seconds=0.01)


def edit(path: str, content: str, prose: str = "") -> Reply:
    """The fake server's reply that writes a whole file: prose, the path, a fenced block."""
    block = f"{path}\n```\n{content.rstrip(chr(10))}\n```"
    return Reply(text=[f"{prose}\n\n{block}" if prose else block], prompt_seconds=0.01)


def call_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`cli.main(argv)` and what it printed: (exit code, stdout, stderr)."""
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def json_lines(out: str) -> list[dict[str, Any]]:
    """The events of `--json` output, one per line."""
    return [json.loads(line) for line in out.splitlines()]


def request_events(out: str) -> list[dict[str, Any]]:
    """The `request` events of `--json` output."""
    return [e for e in json_lines(out) if e["event"] == "request"]


def workspace(tmp_path: Path, files: dict[str, str]) -> Path:
    """A workspace folder `tmp_path/ws` holding `files` (name → text)."""
    root = tmp_path / "ws"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    return root
