"""The approval modal takes no decision from typing: letters go back to the prompt box, and no
key counts within the grace period after the modal appears or after a key taken as typing."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from textual import events
from textual.app import App, ComposeResult
from textual.widgets import Static

from fusion_tui.agent.approval import ApprovalRequest, Decision
from fusion_tui.tui.approver import TuiApprover
from fusion_tui.tui.screens.approval import KEYS_HINT, ApprovalModal
from tests.fakes.clock import FakeClock
from tests.tui import guarded_modal_support as guarded
from tests.tui.keys_support import burst

SHELL = ApprovalRequest("shell", "run_shell", "git status -s", "git status -s", "git status")


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield Static("host")


Opener = Callable[[App[Any], FakeClock], Awaitable[tuple[ApprovalModal, asyncio.Task[Decision]]]]


def opener(request: ApprovalRequest) -> Opener:
    """Opens the approval modal for `request` through a `TuiApprover`, on the test's clock."""

    async def open_it(app: App[Any], clock: FakeClock) -> tuple[ApprovalModal, Any]:
        approver = TuiApprover(app, clock=clock)
        return await guarded.open_guarded(
            app, approver.decide(request), ApprovalModal, "approval modal"
        )

    return open_it


open_modal = opener(SHELL)


async def test_keys_within_the_grace_period_decide_nothing() -> None:
    app = Host()
    async with guarded.modal_up(app, (80, 24), open_modal) as (pilot, modal, task, clock):
        answer = await guarded.check_grace_period(
            pilot, app, modal, task, clock, ("enter", "escape", "ctrl+y"), ("ctrl+y",)
        )
        assert answer is Decision.ALLOW_ONCE


async def test_letters_are_never_an_answer_and_are_kept() -> None:
    app = Host()
    async with guarded.modal_up(app, (80, 24), open_modal) as (pilot, modal, task, clock):
        clock.advance(5.0)  # long after it appeared: letters still are text
        await pilot.press(*"y and a d", "p", "n", "backspace")
        await pilot.pause()
        assert not task.done()
        assert modal.typed == "y and a dp"
        note = modal.query_one("#approval-typed", Static)
        assert note.display and "“y and a dp”" in str(note.render())
        clock.advance(1.0)
        await pilot.press("escape")
        assert await asyncio.wait_for(task, 5) is Decision.DENY


async def test_a_click_right_as_it_appears_is_ignored() -> None:
    app = Host()
    async with guarded.modal_up(app, (80, 24), open_modal) as (pilot, _modal, task, clock):
        answer = await guarded.check_early_click(pilot, task, clock, "#deny", "#allow-once")
        assert answer is Decision.ALLOW_ONCE


async def test_the_modal_shows_its_keys() -> None:
    app = Host()
    async with guarded.modal_up(app, (80, 24), open_modal) as (pilot, modal, task, _clock):
        await pilot.pause()
        box = modal.query_one("#approval-box")
        assert box.border_subtitle == KEYS_HINT
        assert "ctrl+y allow once" in KEYS_HINT and "esc deny" in KEYS_HINT
        task.cancel()


async def test_typing_that_hit_the_modal_lands_back_in_the_prompt_box() -> None:
    backend = guarded.AskingBackend(
        lambda approver: approver.decide(SHELL), lambda d: f"decided: {d.value}"
    )
    await guarded.check_typing_lands_back(
        backend, ApprovalModal, (80, 24), "run it", "and then? y",
        f"decided: {Decision.ALLOW_ONCE.value}",
    )  # fmt: skip


async def test_a_message_typed_into_the_modal_and_entered_goes_next() -> None:
    """Seen in a trial: typed as the test run's approval popped up and ended with Enter 0.5 s
    later, the message pressed Deny, and the task ended "not tested"."""
    backend = guarded.AskingBackend(
        lambda approver: approver.decide(SHELL), lambda d: f"decided: {d.value}"
    )
    await guarded.check_typed_and_entered_goes_next(
        backend, ApprovalModal, (80, 24), "run it", "and then the docs"
    )


async def test_tab_moves_among_the_buttons_only() -> None:
    """From Deny (focused first) Tab wraps to Allow once, so Tab then Enter presses a button."""
    app = Host()
    async with guarded.modal_up(app, (80, 24), open_modal) as (pilot, _modal, task, clock):
        await pilot.pause()
        clock.advance(5.0)
        visited = []
        for _ in range(3):
            await pilot.press("tab")
            visited.append(app.focused.id if app.focused else None)
        assert visited == ["allow-once", "allow-prefix", "deny"]
        await pilot.press("shift+tab", "enter")
        assert await asyncio.wait_for(task, 5) is Decision.ALLOW_PREFIX


async def test_page_down_scrolls_a_long_diff() -> None:
    long_diff = "\n".join(f"+line {i}" for i in range(60))
    request = ApprovalRequest("write", "write_file", "big.py", long_diff)
    app = Host()
    async with guarded.modal_up(app, (80, 24), opener(request)) as (pilot, modal, task, clock):
        await pilot.pause()
        clock.advance(5.0)
        detail = modal.query_one("#approval-detail")
        assert detail.scroll_y == 0
        await pilot.press("pagedown")
        await pilot.pause()
        assert detail.scroll_y > 0
        assert app.focused is not None and app.focused.id == "deny"
        task.cancel()


async def test_a_paste_into_the_modal_keeps_its_lines_and_is_not_sent() -> None:
    """Seen in a trial: a two-line task pasted while the approval was up lost its line break
    and was queued to send at the end of its first line."""
    app = Host()
    async with guarded.modal_up(app, (80, 24), open_modal) as (pilot, modal, task, clock):
        clock.advance(5.0)
        burst(app, "add mode:\rthe smallest on a tie")  # every key at once: no bracketed paste
        await pilot.pause()
        assert modal.typed == "add mode:\nthe smallest on a tie"
        assert not modal.send_typed and not task.done()
        paste = events.Paste("\nand a test")  # what the driver makes of a bracketed paste
        paste.set_sender(app)
        assert app._driver is not None
        app._driver.send_message(paste)
        await pilot.pause()
        assert modal.typed == "add mode:\nthe smallest on a tie\nand a test"
        assert not modal.send_typed
        clock.advance(0.2)
        await pilot.press("enter")  # by hand, after the paste: ends the message
        assert modal.send_typed and not task.done()
        clock.advance(1.0)
        await pilot.press("escape")
        assert await asyncio.wait_for(task, 5) is Decision.DENY


async def test_an_undo_with_a_long_diff_keeps_its_buttons_on_an_80x24_screen() -> None:
    """Seen in a trial: the undo's two lines of why pushed the buttons off the bottom."""
    long_diff = "--- a/stats.py\n+++ b/stats.py\n@@ -1,40 +1,1 @@\n" + "".join(
        f"-line {i}\n" for i in range(40)
    )
    why = ("The agent undoes its attempt (the fix changed nothing of the code that failed its "
           "checks) and tries afresh.")  # fmt: skip
    request = ApprovalRequest("write", "put_back", "stats.py", long_diff, why=why)
    app = Host()
    async with guarded.modal_up(app, (80, 24), opener(request)) as (pilot, modal, task, _clock):
        await pilot.pause()
        box = modal.query_one("#approval-box").region
        for button in ("#allow-once", "#deny"):
            region = modal.query_one(button).region
            assert region.height > 0 and box.y <= region.y and region.bottom <= box.bottom - 1
        task.cancel()
