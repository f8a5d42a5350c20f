"""Provides `ApprovalModal`: the user decides whether the agent may write a file or run a command.

It shows what would happen (the unified diff of the write, or the whole command line) and offers
"allow once", "always allow this command prefix in this session" (shell commands with a simple
prefix only) and "deny". The answer is a `Decision`; the model never sees this screen.

The modal pops up while the user may be typing the next message, so no typed character answers
it: letters (and space) are text, kept in `typed` and handed back to the prompt box when the
modal closes. Decisions take deliberate keys: Ctrl+Y allows once, Enter presses the highlighted
button (Deny at first; Tab or the arrows move among the buttons only), Esc denies, or a click.
The diff or command above the buttons scrolls with PageUp/PageDown and is not in the Tab chain:
a Tab that landed on it made the Enter after it press nothing. None counts within
`APPROVAL_GRACE_S` of the modal appearing or of a key it took as typing, so an Enter or Esc
that was still on its way from the prompt box decides nothing either.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Static

from fusion_tui.agent.approval import ApprovalRequest, Decision
from fusion_tui.clock import Clock
from fusion_tui.tui.screens.guarded_modal import GuardedModal
from fusion_tui.tui.widgets.tool_call import diff_text

KEYS_HINT = "ctrl+y allow once · tab/←→ choose · enter press · esc deny"


def heading(request: ApprovalRequest) -> str:
    """The question; an undo of the agent's own is asked as one (its `why` shown below)."""
    if request.kind == "shell":
        return "Run this command in the workspace?"
    if request.why:
        return f"Put {request.target} back?"
    return f"Write {request.target}?"


def box_title(request: ApprovalRequest) -> str:
    if request.why:
        return "The agent wants to undo its changes"
    return f"The agent wants to use {request.tool}"


class ApprovalModal(GuardedModal[Decision]):
    """Allow once (Ctrl+Y), always allow this prefix (shell), or deny (Esc)."""

    TYPED_ID = "approval-typed"
    BINDINGS = [
        Binding("escape", "deny", "Deny", show=False),
        Binding("ctrl+y", "allow_once", "Allow once", show=False),
        Binding("pageup", "scroll_detail(-1)", show=False),
        Binding("pagedown", "scroll_detail(1)", show=False),
    ]

    DEFAULT_CSS = """
    ApprovalModal { align: center middle; }
    ApprovalModal > #approval-box {
        width: 90%;
        max-width: 100;
        height: auto;
        max-height: 90%;
        border: round $warning;
        border-title-color: $warning;
        border-subtitle-color: $text-muted;
        background: $surface;
        padding: 0 1;
    }
    ApprovalModal #approval-heading { text-style: bold; margin: 0 0 1 0; }
    ApprovalModal .-why #approval-heading { margin: 0; }
    ApprovalModal #approval-why { margin: 0 0 1 0; }
    ApprovalModal .-why #approval-detail { max-height: 11; }
    ApprovalModal #approval-detail {
        height: auto;
        max-height: 14;
        background: $background;
        padding: 0 1;
        scrollbar-size-vertical: 1;
    }
    ApprovalModal #approval-buttons { height: auto; margin: 1 0 0 0; }
    ApprovalModal #approval-buttons Button { margin: 0 1 0 0; min-width: 10; }
    ApprovalModal #approval-typed { color: $text-muted; display: none; }
    ApprovalModal #approval-typed.-shown { display: block; }
    """

    def __init__(self, request: ApprovalRequest, *, clock: Clock | None = None) -> None:
        super().__init__(clock=clock)
        self.request = request

    @property
    def offers_prefix(self) -> bool:
        return self.request.kind == "shell" and bool(self.request.prefix)

    def compose(self) -> ComposeResult:
        req = self.request
        with Vertical(id="approval-box", classes="-why" if req.why else "") as box:
            box.border_title = box_title(req)
            box.border_subtitle = KEYS_HINT
            yield Static(heading(req), id="approval-heading", markup=False)
            # the why's lines come off the diff: at 80×24 the buttons must stay on screen
            if req.why:
                yield Static(req.why, id="approval-why", markup=False)
            with VerticalScroll(id="approval-detail", can_focus=False):
                if req.kind == "shell":
                    yield Static(f"$ {req.detail or req.target}", markup=False)
                else:
                    yield Static(diff_text(req.detail) if req.detail else "(no changes)")
            with Horizontal(id="approval-buttons"):
                yield Button("Allow once", id="allow-once", variant="primary")
                if self.offers_prefix:
                    label = f"Always allow “{req.prefix}” here"
                    yield Button(label, id="allow-prefix", variant="warning")
                yield Button("Deny", id="deny", variant="error")
            yield Static("", id="approval-typed", markup=False)

    def on_mount(self) -> None:  # (GuardedModal's on_mount runs too: Textual walks the MRO)
        self.query_one("#deny", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if self.too_soon_for_a_click():
            return
        actions = {
            "allow-once": Decision.ALLOW_ONCE,
            "allow-prefix": Decision.ALLOW_PREFIX,
            "deny": Decision.DENY,
        }
        self.dismiss(actions.get(event.button.id or "", Decision.DENY))

    def action_scroll_detail(self, pages: int) -> None:
        detail = self.query_one("#approval-detail", VerticalScroll)
        if pages < 0:
            detail.scroll_page_up()
        else:
            detail.scroll_page_down()

    def action_allow_once(self) -> None:
        self.dismiss(Decision.ALLOW_ONCE)

    def action_deny(self) -> None:
        self.dismiss(Decision.DENY)
