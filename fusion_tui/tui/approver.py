"""Provides `TuiApprover`: the agent's approvals (`ApprovalModal`) and the question whether a
session moves off a gone endpoint (`FailoverModal`), asked of the user.

The agent's task runs in a worker; `decide` pushes the modal and waits for the user's answer on
a future, so the step loop simply awaits it. A task cancelled while the modal is up (Esc on the
turn) takes the modal down with it; anything but a `Decision` counts as deny. Whatever the user
typed while either modal was up goes back into the prompt box when it closes (and is sent,
queued behind the turn, when the user ended it with Enter there).
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual.app import App

from fusion_tui.agent.approval import ApprovalRequest, Decision
from fusion_tui.clock import Clock
from fusion_tui.endpoints.placement import Placement
from fusion_tui.tui.screens.approval import ApprovalModal
from fusion_tui.tui.screens.failover import FailoverModal
from fusion_tui.tui.widgets.prompt_input import PromptInput


class TuiApprover:
    def __init__(self, app: App[Any], clock: Clock | None = None) -> None:
        self.app = app
        self.clock = clock
        """The modals' key clock (tests inject one; None: the keys' own stamps)."""

    async def decide(self, request: ApprovalRequest) -> Decision:
        answer: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()

        def done(decision: Decision | None) -> None:
            give_back_typing(self.app, modal.typed, send=modal.send_typed)
            if not answer.done():
                answer.set_result(decision if isinstance(decision, Decision) else Decision.DENY)

        modal = ApprovalModal(request, clock=self.clock)
        await self.app.push_screen(modal, callback=done)
        try:
            return await answer
        except asyncio.CancelledError:
            if modal.is_current:
                modal.dismiss(None)
            raise

    async def ask_failover(self, placed: Placement) -> bool:
        """The session's endpoint is gone: move it (True) or wait (False)?"""
        answer: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

        def done(move: bool | None) -> None:
            give_back_typing(self.app, modal.typed, send=modal.send_typed)
            if not answer.done():
                answer.set_result(move is True)

        modal = FailoverModal(placed, clock=self.clock)
        await self.app.push_screen(modal, callback=done)
        try:
            return await answer
        except asyncio.CancelledError:
            if modal.is_current:
                modal.dismiss(False)
            raise


def give_back_typing(app: App[Any], text: str, *, send: bool = False) -> None:
    """Text typed into a modal goes into the prompt box below it, at its cursor; ended with
    Enter there (`send`), the box's message is sent once the turn allows."""
    if not text:
        return
    for screen in reversed(app.screen_stack):
        for prompt in screen.query(PromptInput):
            prompt.insert(text)
            if send:
                prompt.post_message(PromptInput.SendWhenFree(prompt))
            return
