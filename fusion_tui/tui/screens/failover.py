"""Provides `FailoverModal`: the session's endpoint went away; move it elsewhere, or wait?

Shown by `TuiApprover.ask_failover` when a request of the plain chat or of agent mode found its
endpoint gone (no answer, or the answer broke off) and another endpoint with the same model can
take the session. It states where the session would go and the cost: a cold re-read of its
prompt. Moving answers True; waiting answers False, and the turn ends with the message kept, to
be sent again when the endpoint is back.

It pops up in the middle of a turn, while the user may be typing the next message, so no typed
character answers it (`GuardedModal`: letters are kept and handed back to the prompt box, no
key counts within the grace period). Ctrl+Y moves, Enter presses the highlighted button (Wait
at first; Tab or the arrows move), Esc waits, or a click.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from fusion_tui.clock import Clock
from fusion_tui.endpoints.placement import Placement
from fusion_tui.tui.screens.guarded_modal import GuardedModal

KEYS_HINT = "ctrl+y move · tab/←→ choose · enter press · esc wait"


def question(placed: Placement) -> str:
    gone = placed.moved_from or "this session's endpoint"
    return f"{gone} is not answering. Move this session to {placed.endpoint}?"


def cost(placed: Placement) -> str:
    return (
        f"{placed.endpoint} has the same model; moving there re-reads the session's prompt "
        f"cold ({placed.cold_tokens:,} prompt tokens). Waiting keeps your message; send it "
        f"again when {placed.moved_from or 'the endpoint'} is back."
    )


class FailoverModal(GuardedModal[bool]):
    """Move (Ctrl+Y, with the stated cold cost) or wait (Esc)."""

    TYPED_ID = "failover-typed"
    BINDINGS = [
        Binding("escape", "wait", "Wait", show=False),
        Binding("ctrl+y", "move", "Move", show=False),
    ]

    DEFAULT_CSS = """
    FailoverModal { align: center middle; }
    FailoverModal > #failover-box {
        width: 90%;
        max-width: 90;
        height: auto;
        border: round $warning;
        border-title-color: $warning;
        border-subtitle-color: $text-muted;
        background: $surface;
        padding: 0 1;
    }
    FailoverModal #failover-heading { text-style: bold; margin: 0 0 1 0; }
    FailoverModal #failover-buttons { height: auto; margin: 1 0 0 0; }
    FailoverModal #failover-buttons Button { margin: 0 1 0 0; min-width: 10; }
    FailoverModal #failover-typed { color: $text-muted; display: none; }
    FailoverModal #failover-typed.-shown { display: block; }
    """

    def __init__(self, placed: Placement, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self.placed = placed

    def compose(self) -> ComposeResult:
        placed = self.placed
        with Vertical(id="failover-box") as box:
            box.border_title = "Endpoint gone"
            box.border_subtitle = KEYS_HINT
            yield Static(question(placed), id="failover-heading", markup=False)
            yield Static(cost(placed), id="failover-cost", markup=False)
            with Horizontal(id="failover-buttons"):
                label = f"Move to {placed.endpoint} ({placed.cold_tokens:,} tokens cold)"
                yield Button(label, id="move", variant="warning")
                yield Button("Wait", id="wait", variant="primary")
            yield Static("", id="failover-typed", markup=False)

    def on_mount(self) -> None:  # (GuardedModal's on_mount runs too: Textual walks the MRO)
        self.query_one("#wait", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if self.too_soon_for_a_click():
            return
        self.dismiss(event.button.id == "move")

    def action_move(self) -> None:
        self.dismiss(True)

    def action_wait(self) -> None:
        self.dismiss(False)
