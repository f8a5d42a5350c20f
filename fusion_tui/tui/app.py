"""Provides `FusionApp` and `build_app`, the one factory used by the CLI and the tests."""

from __future__ import annotations

from textual.app import App

from fusion_tui.chat.backend import Backend
from fusion_tui.config import Settings
from fusion_tui.tui.screens.main import MainScreen


class FusionApp(App[None]):
    """Wiring only: settings and the backend come in; screens do the drawing."""

    TITLE = "fusion-tui"

    def __init__(self, settings: Settings, backend: Backend, *, autostart: bool = True) -> None:
        super().__init__()
        self.settings = settings
        self.backend = backend
        self.autostart = autostart
        self.cursor_blink = settings.ui.cursor_blink

    def on_mount(self) -> None:
        self.push_screen(MainScreen(self.backend, autostart=self.autostart))

    async def on_unmount(self) -> None:
        await self.backend.close()


def build_app(settings: Settings, backend: Backend, *, autostart: bool = True) -> FusionApp:
    return FusionApp(settings, backend, autostart=autostart)
