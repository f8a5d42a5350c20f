"""Provides `HelpScreen`: every key (after the user's keymap) and every palette command.

A modal over the current screen; `?`, F1 or Esc close it. Tables wrap rather than cut, so the
whole list stays readable at 80×24 by scrolling.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from fusion_tui.tui.bindings import CLOSE_BINDING, KeyRow
from fusion_tui.tui.commands import AppCommand

KeySection = tuple[str, Sequence[KeyRow]]
REMAP_HINT = """\
Remap a key in config.yaml by its id (the right-hand column), for example:
  ui:
    keys:
      server-log: f3          # several keys: "f3,ctrl+o"\
"""


class HelpScreen(ModalScreen[None]):
    """Keys grouped by where they work, the palette's commands, and how to remap keys."""

    BINDINGS = [CLOSE_BINDING]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > #help-box {
        width: 90%;
        max-width: 110;
        height: auto;
        border: round $primary;
        border-title-color: $primary;
        border-subtitle-color: $text-muted;
        background: $surface;
        padding: 0 1;
    }
    HelpScreen #help-scroll { height: auto; max-height: 80vh; scrollbar-size-vertical: 1; }
    HelpScreen .help-heading { color: $accent; text-style: bold; margin: 1 0 0 0; }
    HelpScreen .help-table { height: auto; }
    HelpScreen #help-remap { color: $text-muted; margin: 1 0 0 0; }
    """

    def __init__(
        self,
        sections: Sequence[KeySection],
        commands: Sequence[AppCommand],
        command_keys: dict[str, str],
        palette_key: str,
    ) -> None:
        super().__init__()
        self.sections = sections
        self.commands = commands
        self.command_keys = command_keys
        """binding id → keys as shown, for the commands' key column."""
        self.palette_key = palette_key

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box") as box:
            box.border_title = "Keys and commands"
            box.border_subtitle = "esc closes"
            with VerticalScroll(id="help-scroll"):
                for title, rows in self.sections:
                    yield Static(title, classes="help-heading")
                    yield Static(self._key_table(rows), classes="help-table")
                yield Static(f"Command palette ({self.palette_key})", classes="help-heading")
                yield Static(self._command_table(), classes="help-table")
                yield Static(Text(REMAP_HINT), id="help-remap")

    def _key_table(self, rows: Sequence[KeyRow]) -> Table:
        table = _table()
        table.add_column("keys", style="bold", no_wrap=True, min_width=12)
        table.add_column("does", ratio=1)
        table.add_column("id", style="dim", no_wrap=True, min_width=17)
        for row in rows:
            table.add_row(row.keys, row.description, row.binding_id)
        return table

    def _command_table(self) -> Table:
        table = _table()
        table.add_column("command", style="bold", no_wrap=True, min_width=12)
        table.add_column("does", ratio=1)
        table.add_column("key", style="dim", no_wrap=True)
        for command in self.commands:
            key = self.command_keys.get(command.binding_id, "") if command.binding_id else ""
            table.add_row(Text(command.title), Text(command.help), Text(key))
        return table

    def action_close(self) -> None:
        self.dismiss()


def _table() -> Table:
    return Table(box=None, show_header=False, expand=True, pad_edge=False, padding=(0, 2, 0, 0))
