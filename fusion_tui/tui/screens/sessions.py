"""Provides `SessionsScreen`: pick a saved session to resume; search, rename, delete.

It reads the backend's `SessionCatalog` (the store, for the real backends). That is plain
blocking file I/O, so every read and write runs in a thread worker and the
result comes back through `call_from_thread`; a generation counter drops answers that a newer
search has overtaken. Damaged files (and files from a newer app) are listed with their reason and
are never resumed, renamed or deleted from here: the app leaves files it cannot read alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from fusion_tui.chat.backend import SessionCatalog
from fusion_tui.sessions.store import SessionEntry


def age(seconds: float) -> str:
    """A short relative age, e.g. `just now`, `5 min ago`, `3 h ago`, `12 d ago`."""
    s = max(0.0, seconds)
    if s < 60:
        return "just now"
    if s < 3600:
        return f"{int(s // 60)} min ago"
    if s < 86400:
        return f"{int(s // 3600)} h ago"
    return f"{int(s // 86400)} d ago"


def reason_of(entry: SessionEntry) -> str:
    """Why a file is unreadable, without the file path the store's message starts with."""
    prefix = f"{entry.path}: "
    return entry.reason[len(prefix) :] if entry.reason.startswith(prefix) else entry.reason


def entry_content(entry: SessionEntry, now: float) -> Content:
    """Two lines: title and facts, then workspace and id (or, when damaged, the reason)."""
    if not entry.ok:
        label = "damaged" if entry.status == "damaged" else "newer app"
        return Content.assemble(
            (f"✗ {label} ", "bold $error"),
            (entry.path.name, "$text-muted"),
            "\n  ",
            (reason_of(entry), "$error"),
        )
    facts = [f"{entry.messages} msg", age(now - entry.updated)]
    if entry.pinned_slot is not None:
        facts.insert(1, f"slot {entry.pinned_slot}")
    if entry.last_outcome:
        facts.append(entry.last_outcome)
    return Content.assemble(
        (entry.title or "(untitled)", "bold"),
        ("  " + " · ".join(facts), "$text-muted"),
        "\n  ",
        (f"{entry.workspace or 'no workspace'} · {entry.id}", "$text-muted"),
    )


def matches(entry: SessionEntry, query: str) -> bool:
    """Title, workspace, id or file name contain `query` (any case)."""
    needle = query.casefold()
    hay = (entry.title, entry.workspace or "", entry.id, entry.path.name)
    return any(needle in text.casefold() for text in hay)


class RenameScreen(ModalScreen[str | None]):
    """Ask for a new title; dismisses with it, or None on Escape."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    RenameScreen { align: center middle; }
    RenameScreen > Vertical {
        width: 60; height: auto; padding: 1 2; border: round $primary; background: $surface;
    }
    """

    def __init__(self, title: str) -> None:
        super().__init__()
        self.old_title = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Rename session (Enter saves, Esc cancels)")
            yield Input(self.old_title, id="rename-input", select_on_focus=True)

    def on_mount(self) -> None:
        field = self.query_one(Input)
        field.cursor_blink = bool(getattr(self.app, "cursor_blink", True))
        field.focus()

    @on(Input.Submitted)
    def save(self, event: Input.Submitted) -> None:
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmDeleteScreen(ModalScreen[bool]):
    """Ask before a session file is deleted; dismisses True only on an explicit yes."""

    BINDINGS = [Binding("escape", "cancel", "Cancel"), Binding("y", "confirm", "Delete")]
    DEFAULT_CSS = """
    ConfirmDeleteScreen { align: center middle; }
    ConfirmDeleteScreen > Vertical {
        width: 64; height: auto; padding: 1 2; border: round $error; background: $surface;
    }
    ConfirmDeleteScreen Horizontal { height: auto; margin-top: 1; align-horizontal: right; }
    ConfirmDeleteScreen Button { margin-left: 2; }
    """

    def __init__(self, title: str) -> None:
        super().__init__()
        self.session_title = title

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"Delete “{self.session_title}”? Its file is removed for good.")
            with Horizontal():
                yield Button("Cancel", id="cancel")
                yield Button("Delete", id="delete", variant="error")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed)
    def pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "delete")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


@dataclass(frozen=True)
class _Listing:
    generation: int
    query: str
    entries: tuple[SessionEntry, ...]
    error: str = ""


class SessionsScreen(ModalScreen[str | None]):
    """Saved sessions: type to search, Enter resumes, F2 renames, Ctrl+D deletes, Esc closes."""

    BINDINGS = [
        Binding("escape", "close", "Close"),
        Binding("f2", "rename", "Rename", priority=True),
        Binding("ctrl+d", "delete", "Delete", priority=True),
        Binding("down", "focus_list", "List", show=False),
    ]
    DEFAULT_CSS = """
    SessionsScreen { align: center middle; }
    SessionsScreen > #sessions-panel {
        width: 90%; max-width: 110; height: 90%;
        border: round $primary; border-title-color: $primary; background: $surface; padding: 0 1;
    }
    SessionsScreen #sessions-search { margin-bottom: 1; }
    SessionsScreen #sessions-list { height: 1fr; border: none; padding: 0; }
    SessionsScreen #sessions-note { height: auto; color: $text-muted; }
    SessionsScreen #sessions-note.-error { color: $error; }
    SessionsScreen #sessions-keys { height: 1; color: $text-muted; }
    """

    def __init__(
        self,
        store: SessionCatalog,
        *,
        clock: Callable[[], float] = time.time,
        full_text: bool = True,
    ) -> None:
        """`full_text` also searches message text (reads every file; runs in a thread)."""
        super().__init__()
        self.store = store
        self._clock = clock
        self.full_text = full_text
        self.entries: tuple[SessionEntry, ...] = ()
        """What the list shows now, in order."""
        self.query_text = ""
        self._generation = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="sessions-panel") as panel:
            panel.border_title = "Sessions"
            yield Input(placeholder="Search title, workspace, messages…", id="sessions-search")
            yield OptionList(id="sessions-list")
            yield Static("Reading sessions…", id="sessions-note")
            yield Static(
                "Enter resume · F2 rename · Ctrl+D delete · ↓ list · Esc close", id="sessions-keys"
            )

    def on_mount(self) -> None:
        search = self.query_one("#sessions-search", Input)
        search.cursor_blink = bool(getattr(self.app, "cursor_blink", True))
        search.focus()
        self.reload()

    # --- reading (thread workers) ----------------------------------------------------------

    def reload(self) -> None:
        """Read the store again for the current query."""
        self._generation += 1
        self._read(self._generation, self.query_text)

    @work(thread=True, exclusive=True, group="sessions-read", exit_on_error=False)
    def _read(self, generation: int, query: str) -> None:
        try:
            everything = self.store.list()
            if not query:
                found = everything
            else:
                hits = {e.id for e in everything if e.ok and matches(e, query)}
                if self.full_text:
                    hits |= {e.id for e in self.store.search(query)}
                found = [e for e in everything if e.id in hits or (not e.ok and matches(e, query))]
            listing = _Listing(generation, query, tuple(found))
        except Exception as exc:  # the store's errors say what to do; show them, never crash
            listing = _Listing(generation, query, (), str(exc).splitlines()[0])
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show, listing)

    def _show(self, listing: _Listing) -> None:
        if listing.generation != self._generation:
            return  # a newer search is on its way
        options = self.query_one("#sessions-list", OptionList)
        keep = self.selected.id if self.selected is not None else None
        self.entries = listing.entries
        now = self._clock()
        options.set_options(
            Option(entry_content(e, now), id=f"{i}") for i, e in enumerate(self.entries)
        )
        ids = [e.id for e in self.entries]
        if self.entries:
            options.highlighted = ids.index(keep) if keep in ids else 0
        note = self.query_one("#sessions-note", Static)
        note.set_class(bool(listing.error), "-error")
        if listing.error:
            note.update(listing.error)
        elif not self.entries:
            note.update(
                f"No session matches “{listing.query}”."
                if listing.query
                else "No saved sessions yet."
            )
        else:
            damaged = sum(1 for e in self.entries if not e.ok)
            text = f"{len(self.entries)} session{'s' if len(self.entries) != 1 else ''}"
            if damaged:
                text += f" · {damaged} unreadable (left untouched; move them away by hand)"
            note.update(text)

    @on(Input.Changed, "#sessions-search")
    def search(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        self.reload()

    # --- actions ---------------------------------------------------------------------------

    @property
    def selected(self) -> SessionEntry | None:
        index = self.query_one("#sessions-list", OptionList).highlighted
        if index is None or index >= len(self.entries):
            return None
        return self.entries[index]

    def _usable(self, verb: str) -> SessionEntry | None:
        """The highlighted entry if it can be acted on; else explain why not."""
        entry = self.selected
        if entry is None:
            return None
        if not entry.ok:
            self.notify(
                f"Cannot {verb} {entry.path.name}: {entry.reason}. The app leaves this file alone.",
                title="Unreadable session",
                severity="warning",
            )
            return None
        return entry

    @on(Input.Submitted, "#sessions-search")
    def submit_search(self) -> None:
        self.action_resume()

    @on(OptionList.OptionSelected, "#sessions-list")
    def picked(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_resume()

    def action_resume(self) -> None:
        entry = self._usable("resume")
        if entry is not None:
            self.dismiss(entry.id)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_focus_list(self) -> None:
        self.query_one("#sessions-list", OptionList).focus()

    def action_rename(self) -> None:
        entry = self._usable("rename")
        if entry is None:
            return

        def done(title: str | None) -> None:
            if title is not None and title.strip() and title.strip() != entry.title:
                self._write(lambda: self.store.rename(entry.id, title))

        self.app.push_screen(RenameScreen(entry.title), done)

    def action_delete(self) -> None:
        entry = self._usable("delete")
        if entry is None:
            return

        def done(yes: bool | None) -> None:
            if yes:
                self._write(lambda: self.store.remove(entry.id))

        self.app.push_screen(ConfirmDeleteScreen(entry.title or entry.id), done)

    @work(thread=True, group="sessions-write", exit_on_error=False)
    def _write(self, change: Callable[[], object]) -> None:
        try:
            change()
        except Exception as exc:
            message = str(exc).splitlines()[0]
            self.app.call_from_thread(self.notify, message, title="Sessions", severity="error")
        self.app.call_from_thread(self.reload)
