"""Provides `relaunch_after_sigill`: the server died of SIGILL at a request; start it again now.

The backend has already remembered repacking off for this binary and CPU (`sigill_recovery`),
so the relaunch starts llama-server with `--no-repack`, as the start-up recovery does. The turn
that hit the crash stays in the chat, marked as failed; the user's message goes back into the
prompt box (when the box is empty), so Enter sends it again once the server is ready.
"""

from __future__ import annotations

import contextlib
from typing import Protocol

from fusion_tui.status import ServerStatus
from fusion_tui.tui.screens.server_panel import PanelHost, ServerPanel
from fusion_tui.tui.widgets.prompt_input import PromptInput


class RelaunchHost(PanelHost, Protocol):
    """What the relaunch uses of the main screen (a protocol: the screen imports this module)."""

    server: ServerPanel

    def start_server(self) -> object:
        """Connect again in the screen's worker (adopt or launch)."""


SAYING = (
    "**llama-server died of an illegal instruction (SIGILL) at this request.** Some CPUs "
    "advertise instructions they trap on; it is being started again with weight repacking off "
    "(`--no-repack`), and later launches on this machine keep that. {kept}"
)


async def relaunch_after_sigill(screen: RelaunchHost, text: str) -> None:
    prompt = screen.query_one(PromptInput)
    if not prompt.text.strip():
        prompt.load_text(text)
        prompt.move_cursor(prompt.document.end)
        kept = "Your message is back in the box: Enter sends it again once the server is ready."
    else:
        kept = "Your message is kept above; the box holds what you typed since."
    await screen.chat.add_message("notice", SAYING.format(kept=kept))
    screen.app.notify(
        "llama-server died of SIGILL; starting it again with repacking off (--no-repack).",
        title="Server crashed", severity="warning", markup=False,
    )  # fmt: skip
    screen.server.report(
        ServerStatus(state="starting", model=screen.server.status.model, detail="relaunching")
    )
    with contextlib.suppress(Exception):  # what is left of the dead server: nothing to save
        await screen.backend.close()
    screen.start_server()
