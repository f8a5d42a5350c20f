"""persist_setting: one setting changes; comments, other settings and invalid files are safe."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fusion_tui.config.loader import load_settings
from fusion_tui.config.persist import PersistError, backup_path, persist_setting
from fusion_tui.config.settings import SCHEMA_VERSION

USER_FILE = """\
# my settings, keep this comment
version: 2
server:
  mode: managed   # the app owns the server
ui:
  theme: fusion-dark  # picked in the palette
  keys:
    help: f9
"""


def _tidy(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_changes_the_one_value_in_place_and_keeps_everything_else(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(USER_FILE)
    result = persist_setting(path, "ui.theme", "fusion-light")
    assert result.changed
    assert path.read_text() == USER_FILE.replace("theme: fusion-dark", "theme: fusion-light")
    settings = load_settings(path, env={})
    assert settings.ui.theme == "fusion-light"
    assert settings.ui.keys == {"help": "f9"}


def test_backs_up_the_previous_file_and_leaves_no_temp_files(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(USER_FILE)
    os.chmod(path, 0o640)
    result = persist_setting(path, "ui.theme", "fusion-paper")
    assert result.backup == backup_path(path)
    assert backup_path(path).read_text() == USER_FILE
    assert _tidy(tmp_path) == ["config.yaml", "config.yaml.bak"]
    assert path.stat().st_mode & 0o777 == 0o640


def test_adds_the_setting_under_an_existing_section(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("version: 2\nui:\n  cursorBlink: false  # no blinking\n")
    persist_setting(path, "ui.theme", "fusion-light")
    text = path.read_text()
    assert "cursorBlink: false  # no blinking" in text
    settings = load_settings(path, env={})
    assert (settings.ui.theme, settings.ui.cursor_blink) == ("fusion-light", False)


def test_adds_a_missing_section_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("# top comment\nversion: 2\nllm:\n  temperature: 0.5\n")
    persist_setting(path, "ui.theme", "fusion-midnight")
    text = path.read_text()
    assert text.startswith("# top comment\nversion: 2\nllm:\n  temperature: 0.5\n")
    assert text.endswith("ui:\n  theme: fusion-midnight\n")
    assert load_settings(path, env={}).llm.temperature == 0.5


def test_a_missing_file_is_created_with_the_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "config.yaml"
    result = persist_setting(path, "ui.theme", "fusion-light")
    assert result.backup is None
    settings = load_settings(path, env={})
    assert settings.ui.theme == "fusion-light"
    assert f"version: {SCHEMA_VERSION}" in path.read_text()


def test_the_same_value_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(USER_FILE)
    result = persist_setting(path, "ui.theme", "fusion-dark")
    assert not result.changed
    assert _tidy(tmp_path) == ["config.yaml"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ui:\n  theme: [unclosed\n", "invalid YAML"),
        ("ui:\n  colour: red\n", "ui.colour: unknown setting"),
        ("version: 99\n", "newer than this fusion-tui"),
    ],
)
def test_an_invalid_file_is_never_overwritten(tmp_path: Path, text: str, expected: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(PersistError) as info:
        persist_setting(path, "ui.theme", "fusion-light")
    assert expected in str(info.value)
    assert "left unchanged" in str(info.value)
    assert path.read_text() == text
    assert _tidy(tmp_path) == ["config.yaml"]


def test_a_flow_style_file_is_rewritten_whole_but_keeps_the_values(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("{version: 2, ui: {keys: {help: f9}}, llm: {maxTokens: 64}}\n")
    persist_setting(path, "ui.theme", "fusion-light")
    settings = load_settings(path, env={})
    assert settings.ui.theme == "fusion-light"
    assert settings.ui.keys == {"help": "f9"}
    assert settings.llm.max_tokens == 64


def test_a_value_that_would_break_the_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(USER_FILE)
    with pytest.raises(PersistError, match="would make the file invalid"):
        persist_setting(path, "ui.cursorBlink", "sometimes")
    assert path.read_text() == USER_FILE


def test_values_that_look_like_other_yaml_types_stay_text(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(USER_FILE)
    persist_setting(path, "ui.theme", "yes")
    assert load_settings(path, env={}).ui.theme == "yes"
