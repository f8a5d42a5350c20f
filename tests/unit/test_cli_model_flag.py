"""`--model` and a command's own MODEL: whichever is given is the model used (a subcommand's
default never overwrites the top-level flag), two different ones are refused, short names work,
and a flag before the command that the command does not read is refused, never ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusion_tui.cli import build_parser
from fusion_tui.paths import AppPaths
from tests.tinymodels import write_header
from tests.unit.cli_support import call_cli


def test_the_top_level_model_reaches_launch(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = call_cli(capsys, "--model", "/nowhere/x.gguf", "launch")
    assert code == 1 and "no model file at /nowhere/x.gguf" in err


def test_parsed_model_of_launch_and_inspect() -> None:
    parser = build_parser()
    assert parser.parse_args(["--model", "a.gguf", "launch"]).model == "a.gguf"
    assert parser.parse_args(["--model", "a.gguf", "inspect", "--json"]).model == "a.gguf"
    assert parser.parse_args(["launch", "b.gguf"]).model == "b.gguf"
    assert parser.parse_args(["launch"]).model is None


@pytest.mark.parametrize("command", ["launch", "inspect"])
def test_two_different_models_are_refused(
    command: str, app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = call_cli(capsys, "--model", "a.gguf", command, "b.gguf")
    assert code == 2
    assert f"fusion-tui {command}: two models given: --model a.gguf and b.gguf; give one" in err


def test_the_same_model_twice_is_fine(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = str(write_header(tmp_path / "m.gguf", "llama"))
    code, out, _err = call_cli(capsys, "--model", model, "inspect", model, "--json")
    assert code == 0 and json.loads(out)["architecture"] == "llama"


def test_inspect_reads_the_top_level_model(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    model = str(write_header(tmp_path / "m.gguf", "llama"))
    code, out, _err = call_cli(capsys, "--model", model, "inspect", "--json")
    assert code == 0 and json.loads(out)["architecture"] == "llama"
    code, _out, err = call_cli(capsys, "--model", "/nowhere/y.gguf", "inspect")
    assert code == 2 and "no model file at /nowhere/y.gguf" in err


def test_an_unknown_short_name_lists_the_names(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = call_cli(capsys, "inspect", "coder-7b")
    assert code == 2
    assert "no model file at coder-7b" in err and "coder-1.5b, coder-0.5b, smollm2" in err


@pytest.mark.parametrize(
    ("argv", "flag", "command"),
    [
        (["--model", "m.gguf", "status"], "--model", "status"),
        (["--model", "m.gguf", "stop"], "--model", "stop"),
        (["--resume", "abc", "launch"], "--resume", "launch"),
        (["--workspace", ".", "inspect", "m.gguf"], "--workspace", "inspect"),
    ],
)
def test_a_root_flag_the_command_does_not_read_is_refused(
    argv: list[str], flag: str, command: str, app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = call_cli(capsys, *argv)
    assert code == 2 and f"fusion-tui: {flag} does nothing with `{command}`" in err


def test_models_lists_the_three_and_refuses_an_unknown_name(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _err = call_cli(capsys, "models", "--json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and [r["name"] for r in rows] == ["coder-1.5b", "coder-0.5b", "smollm2"]
    assert {r["state"] for r in rows} <= {"ready", "installed", "missing"}
    assert rows[0]["size"] == 1_117_320_768 and "no licence of their own" in rows[0]["licence"]
    code, _out, err = call_cli(capsys, "models", "coder-7b")
    assert code == 2 and "not a model name: coder-7b (known: coder-1.5b, coder-0.5b" in err
