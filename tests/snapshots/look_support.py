"""Shared pieces of the look-and-feel snapshots: a temporary home and a settled, quiet app."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.paths import AppPaths
from fusion_tui.tui.app import FusionApp, build_app
from tests.tui.scripted_backend import ScriptedBackend

SIZES = [(80, 24), (160, 48)]
SIZE_IDS = ["80x24", "160x48"]
LOG_FIXTURE = Path(__file__).parent / "data" / "llama-server.log"
ANSWER = [
    "Use `sorted` with a key:\n\n",
    "```python\n",
    "sorted(words, key=len)\n",
    "```\n",
    "It is stable, so equal lengths keep their order.",
]


def home(tmp_path: Path) -> AppPaths:
    root = tmp_path / "home"
    return AppPaths(root / "config", root / "data", root / "state", root / "log")


def make_app(tmp_path: Path, theme: str = "fusion-dark", **kwargs: Any) -> FusionApp:
    settings = Settings(ui=UISettings(cursor_blink=False, theme=theme))
    app = build_app(settings, ScriptedBackend([ANSWER]), paths=home(tmp_path), **kwargs)
    app.log_poll_seconds = None  # read the log once: no timer races the screenshot
    return app


async def settle(pilot: Any) -> None:
    """Let every worker finish, then drop the toasts (their timeouts would race the shot)."""
    await pilot.app.screen.workers.wait_for_complete()
    await pilot.pause()
    pilot.app.clear_notifications()
    await pilot.pause()
