"""The CLI's own commands: names, exit codes and JSON shapes that scripts depend on."""

from __future__ import annotations

import json

import pytest

from fusion_tui import __version__
from fusion_tui.cli import build_parser, main
from fusion_tui.paths import AppPaths


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"fusion-tui {__version__}"


def test_config_path_and_show(app_home: AppPaths, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(app_home.config_file)
    assert main(["config", "show"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["version"] == 3
    assert shown["localModels"]["managed"]["swaFull"] == "auto"


def test_a_broken_config_exits_2_and_is_left_alone(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    app_home.config_file.parent.mkdir(parents=True)
    app_home.config_file.write_text("ui: [\n")
    assert main(["status"]) == 2
    err = capsys.readouterr().err
    assert f"{app_home.config_file}:" in err and "invalid YAML" in err
    assert app_home.config_file.read_text() == "ui: [\n"


def test_status_and_stop_with_no_server(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "running": False,
        "endpoints": [
            {
                "label": "here", "url": None, "healthy": False, "model": None,
                "total_slots": None, "n_ctx": None, "tok_s": None, "error": "not running",
                "managed": True,
            }
        ],
    }  # fmt: skip
    assert main(["stop"]) == 0
    assert "no managed llama-server was running" in capsys.readouterr().out


def test_launch_and_serve_options() -> None:
    parser = build_parser()
    args = parser.parse_args(["launch", "m.gguf", "--parallel", "2", "--ctx", "8192"])
    assert (args.model, args.parallel, args.ctx) == ("m.gguf", 2, 8192)
    serve = parser.parse_args(["serve"])
    assert (serve.host, serve.port) == ("127.0.0.1", 8000)


def test_launch_with_a_missing_model_says_so(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["launch", "/nowhere/model.gguf"]) == 1
    assert "no model file at /nowhere/model.gguf" in capsys.readouterr().err


def test_launch_settings_the_server_would_refuse_are_named_not_a_traceback(
    app_home: AppPaths, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = app_home.config_dir.parent / "m.gguf"
    model.parent.mkdir(parents=True, exist_ok=True)
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("FUSION_TUI_LOCALMODELS__MANAGED__CACHETYPEV", "q8_0")
    monkeypatch.setenv("FUSION_TUI_LOCALMODELS__MANAGED__FLASHATTN", "off")
    assert main(["launch", str(model)]) == 1
    err = capsys.readouterr().err
    assert "cannot launch with these settings" in err and "flash attention" in err
