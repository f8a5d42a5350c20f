"""Provides `FailoverModal`: the session's endpoint went away; move it elsewhere, or wait?

Shown by `TuiApprover.ask_failover` when a request of the plain chat or of agent mode found its
endpoint gone (no answer, or the answer broke off) and another endpoint with the same model can
take the session (issue 14). It states where the session
would go and the cost: a cold re-read of its prompt. Moving answers True; waiting (Esc) answers
False, and the turn ends with the message kept, to be sent again when the endpoint is back.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from fusion_tui.endpoints.placement import Placement


def question(placed: Placement) -> str:
    gone = placed.moved_from or "this session's endpoint"
    return f"{gone} is not answering. Move this session to {placed.endpoint}?"


def cost(placed: Placement) -> str:
    return (
        f"{placed.endpoint} has the same model; moving there re-reads the session's prompt "
        f"cold ({placed.cold_tokens:,} prompt tokens). Waiting keeps your message; send it "
        f"again when {placed.moved_from or 'the endpoint'} is back."
    )


class FailoverModal(ModalScreen[bool]):
    """Move (with the stated cold cost) or wait (Esc)."""

    BINDINGS = [
        Binding("escape", "wait", "Wait", show=False),
        Binding("m", "move", "Move", show=False),
        Binding("w", "wait", "Wait", show=False),
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
    """

    def __init__(self, placed: Placement) -> None:
        super().__init__()
        self.placed = placed

    def compose(self) -> ComposeResult:
        placed = self.placed
        with Vertical(id="failover-box") as box:
            box.border_title = "Endpoint gone"
            box.border_subtitle = "m move · w/esc wait"
            yield Static(question(placed), id="failover-heading", markup=False)
            yield Static(cost(placed), id="failover-cost", markup=False)
            with Horizontal(id="failover-buttons"):
                label = f"Move to {placed.endpoint} ({placed.cold_tokens:,} tokens cold)"
                yield Button(label, id="move", variant="warning")
                yield Button("Wait", id="wait", variant="primary")

    def on_mount(self) -> None:
        self.query_one("#wait", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "move")

    def action_move(self) -> None:
        self.dismiss(True)

    def action_wait(self) -> None:
        self.dismiss(False)
