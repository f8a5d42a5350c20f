"""Provides `FusionApp` and `build_app`, the one app factory used by the CLI and the tests."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
from pathlib import Path
from typing import ClassVar

from textual.app import App, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.theme import Theme

from fusion_tui.chat.backend import Backend, StatusCallback
from fusion_tui.chat.factory import BackendFactory, make_backend
from fusion_tui.config import Settings
from fusion_tui.config.loader import config_path
from fusion_tui.config.persist import PersistError, persist_setting
from fusion_tui.config.theme_files import APP_VARIABLES
from fusion_tui.models.catalog import short_name_of
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection
from fusion_tui.server.launch_choice import LaunchChoice
from fusion_tui.status import ServerStatus
from fusion_tui.tui import bindings as ids
from fusion_tui.tui.approver import TuiApprover
from fusion_tui.tui.bindings import APP_BINDINGS, CLOSE_BINDING, KeyRow, key_rows
from fusion_tui.tui.commands import APP_COMMANDS, FusionCommands
from fusion_tui.tui.screens.help import HelpScreen, KeySection
from fusion_tui.tui.screens.main import MainScreen
from fusion_tui.tui.screens.server_log import POLL_SECONDS, ServerLogScreen
from fusion_tui.tui.themes import choose_theme, failures_message, install_themes, load_themes
from fusion_tui.tui.widgets.prompt_input import PromptInput

LOG_NAME = "llama-server.log"


class FusionApp(App[None]):
    """Wiring only: settings and the backend come in; screens do the drawing."""

    TITLE = "fusion-tui"
    COMMANDS = App.COMMANDS | {FusionCommands}
    BINDINGS: ClassVar[list[BindingType]] = [
        *APP_BINDINGS,
        Binding("ctrl+c", "help_quit", show=False, system=True),
    ]
    inherit_bindings = False  # our quit binding has an id, so it can be remapped

    def __init__(
        self,
        settings: Settings,
        backend: Backend | None = None,
        *,
        autostart: bool = True,
        paths: AppPaths | None = None,
        config_file: Path | None = None,
        workspace: Path | str | None = None,
        model: str | None = None,
        resume: str | None = None,
        backend_factory: BackendFactory = make_backend,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.workspace = workspace
        """Agent mode's folder (None: plain chat); every backend this app builds gets it."""
        self.backend_factory = backend_factory
        self.approver = TuiApprover(self)
        """Writes and commands in agent mode are asked in a modal, for every backend built."""
        if backend is None:
            if paths is None:
                raise TypeError("build_app needs `paths` to build its own backend")
            backend = backend_factory(
                settings, paths, workspace=workspace, model=model, resume=resume,
                approver=self.approver,
            )  # fmt: skip
        self.backend = backend
        self.autostart = autostart
        self.cursor_blink = settings.ui.cursor_blink
        self.paths = paths
        """None (tests): no user themes, no persisted choices, no server log file."""
        self.config_file = config_file or (
            config_path(paths.config_file, os.environ) if paths else None
        )
        self.keymap, self._keymap_problems = ids.keymap_from_settings(settings.ui.keys)
        self.theme_catalog = load_themes(paths.themes_dir if paths else None)
        self._saved_theme = settings.ui.theme
        self._persist_problems: set[str] = set()
        self.log_poll_seconds: float | None = POLL_SECONDS
        """Server-log polling; tests set None to read the file once per showing."""
        self._backend_released = False
        """The wizard closed the old backend to launch another model."""

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(APP_VARIABLES)

    def on_mount(self) -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            # a closed terminal window quits as Ctrl+Q does; by default the hangup killed the
            # app on the spot, and the server it had started kept running, slots unsaved
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.exit)
        self.set_keymap(self.keymap)
        install_themes(self, self.theme_catalog)
        theme_problem = choose_theme(self, self.settings.ui.theme)
        self._saved_theme = self.theme
        self.theme_changed_signal.subscribe(self, self._persist_theme)
        self.push_screen(MainScreen(self.backend, autostart=self.autostart))
        if self.theme_catalog.failures:
            self.notify(
                failures_message(self.theme_catalog.failures),
                title="Theme files",
                severity="warning",
                timeout=20,
                markup=False,
            )
        if theme_problem:
            self.notify(theme_problem, title="Theme", severity="warning", markup=False)
        if self._keymap_problems:
            self.notify(
                "\n".join(self._keymap_problems),
                title="Keys",
                severity="warning",
                timeout=20,
                markup=False,
            )

    async def on_unmount(self) -> None:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
        await self.backend.close()

    # --- themes ---------------------------------------------------------------------------------

    def _persist_theme(self, theme: Theme) -> None:
        """The user picked a theme: write `ui.theme` (once per change; failures said once)."""
        if theme.name == self._saved_theme:
            return
        self._saved_theme = theme.name
        self.settings = dataclasses.replace(
            self.settings, ui=dataclasses.replace(self.settings.ui, theme=theme.name)
        )
        if self.config_file is None:
            return
        try:
            persist_setting(self.config_file, "ui.theme", theme.name)
        except (PersistError, OSError) as exc:
            message = f"Theme {theme.name!r} is used now but not saved: {exc}"
            if message not in self._persist_problems:
                self._persist_problems.add(message)
                self.notify(message, title="Theme", severity="warning", markup=False)

    def get_system_commands(self, screen: Screen[object]) -> list[SystemCommand]:
        # our "Switch theme…" replaces Textual's "Theme"
        return [c for c in super().get_system_commands(screen) if c.title != "Theme"]

    # --- keys and help --------------------------------------------------------------------------

    def key_for(self, binding_id: str) -> str:
        """The keys bound to `binding_id` as shown to the user (after the keymap)."""
        for row in [*self.help_sections()[0][1], *self._main_rows()]:
            if row.binding_id == binding_id:
                return row.keys
        return ""

    def _main_rows(self) -> list[KeyRow]:
        return key_rows(self, MainScreen.BINDINGS, self.keymap)

    def help_sections(self) -> list[KeySection]:
        everywhere = key_rows(self, [*APP_BINDINGS, CLOSE_BINDING], self.keymap)
        prompt = [
            KeyRow("enter", "Send the message", ""),
            *key_rows(self, PromptInput.BINDINGS, self.keymap),
        ]
        return [
            ("Everywhere", everywhere),
            ("Main screen", self._main_rows()),
            ("Prompt box", prompt),
        ]

    def action_toggle_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.screen.dismiss()
            return
        sections = self.help_sections()
        keys = {row.binding_id: row.keys for _, rows in sections for row in rows}
        self.push_screen(
            HelpScreen(sections, APP_COMMANDS, keys, keys.get(ids.COMMAND_PALETTE, ""))
        )

    # --- screens and commands -------------------------------------------------------------------

    @property
    def server_log_path(self) -> Path | None:
        return self.paths.log_dir / LOG_NAME if self.paths else None

    def action_toggle_server_log(self) -> None:
        if isinstance(self.screen, ServerLogScreen):
            self.screen.dismiss()
            return
        self.push_screen(ServerLogScreen(self.server_log_path, poll_seconds=self.log_poll_seconds))

    def action_open_config_location(self) -> None:
        if self.config_file is None or self.paths is None:
            self.notify("This app was started without a config folder.", title="Config")
            return
        self.copy_to_clipboard(str(self.config_file.parent))
        self.notify(
            f"Config file: {self.config_file}\nUser themes: {self.paths.themes_dir}\n"
            "(folder path copied to the clipboard)",
            title="Config",
            markup=False,
        )

    def not_available(self, what: str) -> None:
        self.notify(f"{what}: not available yet.", title="Not available yet")

    def _main_screen(self) -> MainScreen | None:
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen
        return None

    async def action_new_session(self) -> None:
        main = self._main_screen()
        if main is not None:
            await main.action_new_session()

    def action_compact_session(self) -> None:
        main = self._main_screen()
        if main is not None:
            main.compact_session()

    def action_open_sessions(self) -> None:
        main = self._main_screen()
        if main is not None:
            main.action_sessions()

    def action_open_wizard(self) -> None:
        from fusion_tui.tui.screens.launch_wizard import LaunchWizard

        if self.paths is None or self.settings.server.mode == "external":
            self.notify("Launching a model needs the managed server.", title="Launch model")
            return
        if not isinstance(self.screen, LaunchWizard):
            wizard = LaunchWizard(self.settings, self.paths, launcher=self._relaunch)
            self.push_screen(wizard, callback=self._on_launch_chosen)

    async def _relaunch(
        self,
        settings: Settings,
        paths: AppPaths,
        report: StatusCallback | None = None,
        *,
        model: str | None = None,
        parallel: int | None = None,
        ctx: int | None = None,
    ) -> Connection:
        """Close the current backend first: its close() stops the daemon it launched."""
        from fusion_tui.server.connect import connect

        await self.backend.close()
        self._backend_released = True
        main = self._main_screen()
        if main is not None:  # the map behind the wizard: the server coming, not the gone one
            await main.server.replaced(Path(model).name if model else "the model")

        def relay(status: ServerStatus) -> None:
            """Stages to the wizard and to the main screen's status line (the server being
            launched, also the probe's ready, which lands after the wizard closed)."""
            if report is not None:
                with contextlib.suppress(Exception):  # the wizard may be gone
                    report(status)
            main = self._main_screen()
            if main is not None:
                main.server.report(status)

        return await connect(settings, paths, relay, model=model, parallel=parallel, ctx=ctx)

    async def _on_launch_chosen(self, choice: LaunchChoice | None) -> None:
        main = self._main_screen()
        released, self._backend_released = self._backend_released, False
        if choice is None:
            if released and main is not None:  # a launch was tried, then abandoned
                main.start_server()
            return
        ctx = getattr(choice.plan, "ctx", None)
        managed = dataclasses.replace(
            self.settings.local_models.managed, parallel=choice.parallel,
            ctx=ctx if ctx else self.settings.local_models.managed.ctx,
        )  # fmt: skip
        local = dataclasses.replace(
            self.settings.local_models, model=str(choice.model_path), managed=managed
        )
        self.settings = dataclasses.replace(self.settings, local_models=local)
        self._persist_launch(choice.model_path, choice.parallel, ctx)
        assert self.paths is not None
        old = self.backend
        keep = old.current_session_id() if old.history() else None  # saved after every turn
        try:
            backend = self.backend_factory(
                self.settings, self.paths, workspace=self.workspace,
                model=str(choice.model_path), resume=keep, approver=self.approver,
            )  # fmt: skip
        except Exception as exc:  # e.g. the session file went away: a new one, and say so
            backend = self.backend_factory(
                self.settings, self.paths, workspace=self.workspace,
                model=str(choice.model_path), approver=self.approver,
            )  # fmt: skip
            self.notify(
                f"The session could not be reopened ({str(exc).splitlines()[0]}); a new one "
                f"started. {self.key_for(ids.SESSIONS) or 'Ctrl+R'} lists the saved sessions.",
                title="Launch model", severity="warning", markup=False,
            )  # fmt: skip
            keep = None
        try:
            status = await backend.adopt(choice.connection)
        except Exception:  # e.g. agent mode cannot probe the new model's template
            await choice.connection.client.aclose()
            self.backend = backend
            if main is not None:
                main.backend = backend
                main.start_server()  # connects again and explains the failure in the chat
            return
        self.backend = backend
        if main is not None:
            await main.use_backend(backend, status)
            await main.chat.add_message("notice", launch_note(choice, status, kept=keep))

    def _persist_launch(self, model: Path, parallel: int, ctx: int | None) -> None:
        """The wizard's model (a catalogue model by its short name), slots and context go into
        config.yaml, so the next start launches the same server (one setting per write, each
        atomic with a backup)."""
        if self.config_file is None:
            return
        values: list[tuple[str, object]] = [
            ("localModels.model", short_name_of(model) or str(model)),
            ("localModels.managed.parallel", parallel),
        ]
        if ctx:
            values.append(("localModels.managed.ctx", ctx))
        try:
            for dotted, value in values:
                persist_setting(self.config_file, dotted, value)
        except (PersistError, OSError) as exc:
            self.notify(
                f"The launch is used now but not saved for the next start: {exc}",
                title="Launch model", severity="warning", markup=False,
            )  # fmt: skip

    def action_toggle_slot_map(self) -> None:
        main = self._main_screen()
        if main is not None:
            main.action_toggle_slot_map()

    async def action_stop_server(self) -> None:
        main = self._main_screen()
        if main is not None:
            await main.action_stop_server()


def launch_note(choice: LaunchChoice, status: ServerStatus, *, kept: str | None) -> str:
    """What the chat says after F2: the server now serving, and where the session is."""
    ctx = f" × {status.n_ctx:,} ctx" if status.n_ctx else ""
    slots = f"{choice.parallel} slot{'s' if choice.parallel != 1 else ''}"
    where = (
        "This session continues here; the new server reads it again on your next message."
        if kept
        else "A new session started; earlier ones are saved (Ctrl+R lists them)."
    )
    name = choice.model_path.name
    return f"Now serving `{name}` · {slots}{ctx}, saved for the next start. {where}"


def build_app(
    settings: Settings,
    backend: Backend | None = None,
    *,
    autostart: bool = True,
    paths: AppPaths | None = None,
    config_file: Path | None = None,
    workspace: Path | str | None = None,
    model: str | None = None,
    resume: str | None = None,
    backend_factory: BackendFactory = make_backend,
) -> FusionApp:
    """`paths` enables user themes, the persisted theme choice and the server log; the CLI
    passes `AppPaths.default()`. `config_file` defaults to the one the CLI loads.

    Without `backend` the app builds its own through `backend_factory` (agent mode when
    `workspace` is given), handing in its approver; a relaunch (F2) builds the next one the
    same way. Raises what the factory raises for a bad `resume` or `workspace`."""
    return FusionApp(
        settings, backend, autostart=autostart, paths=paths, config_file=config_file,
        workspace=workspace, model=model, resume=resume, backend_factory=backend_factory,
    )  # fmt: skip
