"""Provides `FusionCommands`, the command-palette provider, and `APP_COMMANDS`, its contents.

Each command runs an app action by name, so the palette, the key bindings and the help screen
all reach the same code. Actions whose screens are still being built are stubs on the app that
say "not available yet" (see `FusionApp.not_available`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from fusion_tui.tui import bindings as ids


@dataclass(frozen=True)
class AppCommand:
    title: str
    help: str
    action: str
    """An action of the app, e.g. `open_wizard` (runs `FusionApp.action_open_wizard`)."""
    binding_id: str | None = None
    """The binding that does the same, for the help screen's key column."""


APP_COMMANDS: tuple[AppCommand, ...] = (
    AppCommand(
        "New session",
        "Start a fresh chat; the current one stays saved",
        "new_session",
        ids.NEW_SESSION,
    ),
    AppCommand(
        "Resume session…",
        "Pick a saved session and continue it where it stopped",
        "open_sessions",
        ids.SESSIONS,
    ),
    AppCommand(
        "Compact session",
        "Summarise the older turns in the prompt (the chat and the session file keep them)",
        "compact_session",
    ),
    AppCommand(
        "Launch model…",
        "Choose a GGUF, see what fits in memory, start llama-server",
        "open_wizard",
        ids.LAUNCH_MODEL,
    ),
    AppCommand(
        "Stop server", "Stop the managed llama-server (its saved slots stay on disk)", "stop_server"
    ),
    AppCommand(
        "Toggle slot map",
        "Show or hide the slots and what each one holds",
        "toggle_slot_map",
        ids.TOGGLE_SLOT_MAP,
    ),
    AppCommand(
        "Show server log",
        "Live tail of llama-server's log file",
        "toggle_server_log",
        ids.SERVER_LOG,
    ),
    AppCommand(
        "Switch theme…", "Pick a colour theme; the choice is saved in config.yaml", "change_theme"
    ),
    AppCommand(
        "Open config file location",
        "Show where config.yaml and user themes live (path copied to the clipboard)",
        "open_config_location",
    ),
    AppCommand(
        "Keys and commands", "The help screen: every key and command", "toggle_help", ids.HELP
    ),
)


class FusionCommands(Provider):
    """The app's own commands, in a fixed order for the empty query, fuzzy-matched otherwise."""

    async def discover(self) -> Hits:
        for command in APP_COMMANDS:
            yield DiscoveryHit(command.title, self._runner(command), help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in APP_COMMANDS:
            score = matcher.match(command.title)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(command.title),
                    self._runner(command),
                    help=command.help,
                )

    def _runner(self, command: AppCommand) -> Callable[[], Awaitable[bool]]:
        return partial(self.app.run_action, command.action)
