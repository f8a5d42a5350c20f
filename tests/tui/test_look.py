"""Pilot tests of the look and feel: help, themes (persisted, user files), keymap, palette, log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fusion_tui.config import Settings, load_settings
from fusion_tui.config.settings import UISettings
from fusion_tui.paths import AppPaths
from fusion_tui.tui.app import FusionApp, build_app
from fusion_tui.tui.commands import APP_COMMANDS, FusionCommands
from fusion_tui.tui.notices import notify_server_crashed, server_crashed_text
from fusion_tui.tui.screens.help import HelpScreen
from fusion_tui.tui.screens.server_log import ServerLogScreen
from fusion_tui.tui.widgets.chat_view import ChatView
from fusion_tui.tui.widgets.prompt_input import PromptInput
from tests.tui.scripted_backend import ScriptedBackend

CONFIG = "# mine\nversion: 2\nui:\n  theme: fusion-dark  # chosen\n  cursorBlink: false\n"


def make_paths(tmp_path: Path) -> AppPaths:
    root = tmp_path / "home"
    return AppPaths(root / "config", root / "data", root / "state", root / "log")


def make_app(tmp_path: Path, **ui: Any) -> tuple[FusionApp, list[dict[str, Any]]]:
    """An app on a temporary home; its notifications are captured in the returned list."""
    settings = Settings(ui=UISettings(cursor_blink=False, **ui))
    app = build_app(settings, ScriptedBackend(), autostart=False, paths=make_paths(tmp_path))
    notes: list[dict[str, Any]] = []
    real = app.notify

    def capture(message: str, **kwargs: Any) -> None:
        notes.append({"message": message, **kwargs})
        real(message, **kwargs)

    app.notify = capture  # type: ignore[method-assign]
    return app, notes


async def test_question_mark_opens_help_and_escape_closes_it(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.screen.query_one(ChatView).focus()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        help_screen = app.screen
        keys = {row.binding_id: row.keys for _, rows in help_screen.sections for row in rows}
        assert keys["server-log"] == "^o" and keys["help-question"] == "?"
        assert "Switch theme…" in [c.title for c in help_screen.commands]
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)


async def test_question_mark_in_a_prompt_with_text_is_just_a_character(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("w", "h", "y", "question_mark")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        assert app.screen.query_one(PromptInput).text == "why?"


async def test_switching_theme_in_the_palette_persists_it_in_config(tmp_path: Path) -> None:
    app, notes = make_app(tmp_path)
    config = app.paths.config_file if app.paths else None
    assert config is not None and app.config_file == config
    config.parent.mkdir(parents=True)
    config.write_text(CONFIG)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.theme == "fusion-dark"
        await pilot.press("ctrl+p", *"switch theme", "enter")
        await pilot.pause()
        await pilot.press(*"fusion-light", "enter")
        await pilot.pause()
        assert app.theme == "fusion-light"
    assert load_settings(config, env={}).ui.theme == "fusion-light"
    text = config.read_text()
    assert "# mine" in text and "theme: fusion-light  # chosen" in text
    assert config.with_name("config.yaml.bak").read_text() == CONFIG
    assert app.settings.ui.theme == "fusion-light"
    assert notes == []


async def test_a_theme_that_cannot_be_saved_is_used_and_explained_once(tmp_path: Path) -> None:
    app, notes = make_app(tmp_path)
    assert app.config_file is not None
    app.config_file.parent.mkdir(parents=True)
    app.config_file.write_text("ui: [broken\n")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        app.theme = "fusion-paper"
        await pilot.pause()
        app.theme = "fusion-dark"
        await pilot.pause()
        app.theme = "fusion-paper"
        await pilot.pause()
    assert app.config_file.read_text() == "ui: [broken\n"
    saved = [n for n in notes if "not saved" in n["message"]]
    assert len(saved) == 2  # one per distinct theme, never one per switch
    assert "invalid YAML" in saved[0]["message"]


async def test_a_bad_user_theme_is_reported_once_and_the_good_ones_load(tmp_path: Path) -> None:
    paths = make_paths(tmp_path)
    paths.themes_dir.mkdir(parents=True)
    (paths.themes_dir / "broken.yaml").write_text("name: broken\nprimary: a: b\n")
    (paths.themes_dir / "ugly.yaml").write_text("name: ugly\nprimary: '#zzzzzz'\n")
    (paths.themes_dir / "mine.yaml").write_text("name: mine\nprimary: '#336699'\ndark: false\n")
    app, notes = make_app(tmp_path, theme="mine")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "mine"
        assert "broken" not in app.available_themes and "ugly" not in app.available_themes
        app.theme = "fusion-dark"
        await pilot.pause()
    theme_notes = [n for n in notes if n.get("title") == "Theme files"]
    assert len(theme_notes) == 1
    message = theme_notes[0]["message"]
    assert "broken.yaml: line 2, column 11: invalid YAML" in message
    assert "ugly.yaml: 'primary': '#zzzzzz' is not a colour" in message
    assert theme_notes[0]["markup"] is False


async def test_an_unknown_configured_theme_falls_back_without_rewriting_config(
    tmp_path: Path,
) -> None:
    app, notes = make_app(tmp_path, theme="gone")
    assert app.config_file is not None
    app.config_file.parent.mkdir(parents=True)
    app.config_file.write_text("ui:\n  theme: gone\n")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "fusion-dark"
    assert app.config_file.read_text() == "ui:\n  theme: gone\n"
    assert [n["title"] for n in notes] == ["Theme"]
    assert "'gone' is not available" in notes[0]["message"]


async def test_the_keymap_from_config_moves_keys(tmp_path: Path) -> None:
    app, notes = make_app(tmp_path, keys={"help": "f9", "server-log": "f3", "nope": "f4"})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("f1")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f9")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert app.key_for("help") == "f9"
        await pilot.press("escape", "f3")
        await pilot.pause()
        assert isinstance(app.screen, ServerLogScreen)
    key_notes = [n for n in notes if n.get("title") == "Keys"]
    assert len(key_notes) == 1
    assert "ui.keys.nope: no such binding id" in key_notes[0]["message"]


def test_the_crash_notice_names_the_remapped_log_key() -> None:
    text = server_crashed_text("exited with code 1\nmore", "a\n\nb\nc\nd\ne\n", "f3")
    assert text.splitlines() == [
        "exited with code 1",
        "  b",
        "  c",
        "  d",
        "  e",
        "f3 shows the full server log.",
    ]


async def test_crash_notice_uses_the_apps_key(tmp_path: Path) -> None:
    app, notes = make_app(tmp_path, keys={"server-log": "f3"})
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        notify_server_crashed(app, "llama-server exited (code 134)", ["[x] GGML_ASSERT failed"])
    crash = notes[-1]
    assert crash["severity"] == "error" and crash["markup"] is False
    assert crash["message"].endswith("  [x] GGML_ASSERT failed\nf3 shows the full server log.")


async def test_the_palette_offers_every_app_command(tmp_path: Path) -> None:
    app, _notes = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        provider = FusionCommands(app.screen)
        titles = [hit.text async for hit in provider.discover()]
        assert titles == [c.title for c in APP_COMMANDS]
        for needed in (
            "New session",
            "Resume session…",
            "Launch model…",
            "Stop server",
            "Toggle slot map",
            "Show server log",
            "Switch theme…",
            "Open config file location",
        ):
            assert needed in titles
        await pilot.press("ctrl+p", *"launch model", "enter")
        await pilot.pause()
        assert type(app.screen).__name__ == "LaunchWizard"


async def test_the_server_log_follows_the_file_and_pauses_when_hidden(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    log_path = app.server_log_path
    assert log_path is not None
    log_path.parent.mkdir(parents=True)
    log_path.write_text("main: loading model\n")
    app.log_poll_seconds = 0.01
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+o")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ServerLogScreen)
        assert screen.following
        with log_path.open("a") as f:
            f.write("srv  update_slots: all slots are idle\n")
        await screen.read_once()
        assert screen.log_widget.lines == [
            "main: loading model",
            "srv  update_slots: all slots are idle",
        ]
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert not screen.following
        await pilot.press("escape")
        await pilot.pause()
        assert screen.following
        await pilot.press("ctrl+o")
        await pilot.pause()
        assert not isinstance(app.screen, ServerLogScreen)


async def test_the_server_log_screen_explains_a_missing_file(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    app.log_poll_seconds = None
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+o")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        empty = app.screen.query_one("#log-empty")
        assert empty.display and "No log yet" in str(empty.render())
        assert not app.screen.query_one("#log").display


async def test_open_config_location_names_the_file(tmp_path: Path) -> None:
    app, notes = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await app.run_action("open_config_location")
    assert str(app.config_file) in notes[-1]["message"]
