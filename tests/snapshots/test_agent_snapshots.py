"""Snapshots of agent mode at 80×24: tool-call blocks in the chat, and the approval modal.

Fed by scripted backends (no server, no clock, no blink), so every pixel is deterministic.
"""

from __future__ import annotations

from typing import Any

from fusion_tui.agent.approval import ApprovalRequest
from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.tui.app import build_app
from fusion_tui.tui.screens.approval import ApprovalModal
from tests.fakes.clock import FakeClock
from tests.tui.scripted_agent_backend import (
    DIFF,
    ScriptedAgentBackend,
    fix_with_tests,
    no_change,
)
from tests.tui.scripted_backend import ScriptedBackend

SETTINGS = Settings(ui=UISettings(cursor_blink=False))


async def _settle(pilot: Any) -> None:
    await pilot.app.screen.workers.wait_for_complete()
    await pilot.pause()
    pilot.app.clear_notifications()  # the "server ready" toast would cover the bottom right
    await pilot.pause()


def test_tool_call_blocks_in_the_chat(snap_compare: Any) -> None:
    """You should see the user's message, then three tool blocks: `✓ list_dir(path=.) · 3 ms`
    folded, `✓ edit_file(...) · 41 ms` open with its arguments, result and a coloured diff, and
    `✗ run_shell(command=pytest -q) · 1.2 s` folded with a red edge; the answer text is below
    (scroll position: anchored to the newest, so the top may be cut at 80×24)."""

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        await pilot.press(*"fix greeting", "enter")
        await _settle(pilot)

    app = build_app(SETTINGS, ScriptedAgentBackend())
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_a_fix_checked_by_the_tests(snap_compare: Any) -> None:
    """You should see `✗ tests(command=pytest -q test_stats.py) · failed (exit 1) · before
    edits` (scrolled off at 80×24), the step line, `✓ write_file(path=stats.py)` with its diff (`-    return sum(values)
    / (len(values) - 1)`, `+    return sum(values) / len(values)`), `✓ tests(...) · passed ·
    round 1`, the answer, and the end line naming stats.py."""

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        await pilot.press(*"fix stats.py so the tests pass", "enter")
        await _settle(pilot)

    app = build_app(SETTINGS, ScriptedAgentBackend([fix_with_tests()]))
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_a_change_task_that_changed_nothing(snap_compare: Any) -> None:
    """You should see the answer "I would divide by len(values)." and under it the end line
    `no_change · 2 steps · no file was changed`; the status line says `last turn no_change`."""

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        await pilot.press(*"fix stats.py", "enter")
        await _settle(pilot)

    app = build_app(SETTINGS, ScriptedAgentBackend([no_change()]))
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_approval_modal_for_a_write(snap_compare: Any) -> None:
    """You should see a modal titled "The agent wants to use edit_file", the question
    "Write app.py?", the diff with one red and one green line, and two buttons: "Allow once"
    and "Deny" (focused); no "always allow" button for a write."""

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        await pilot.app.push_screen(
            ApprovalModal(ApprovalRequest("write", "edit_file", "app.py", DIFF))
        )
        await pilot.pause()

    app = build_app(SETTINGS, ScriptedBackend())
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_approval_modal_for_an_undo(snap_compare: Any) -> None:
    """You should see a modal titled "The agent wants to undo its changes", the question "Put
    app.py back?" over the two lines that say why ("The agent undoes its attempt (the checks
    still fail after 1 round(s) of fixes) and tries afresh."), the top of a long diff (lines
    taken out), and below it, still on the 80×24 screen, "Allow once" and "Deny" (focused)."""

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        why = "The agent undoes its attempt (the checks still fail after 1 round(s) of fixes) "
        diff = "--- a/app.py\n+++ b/app.py\n@@ -1,30 +1,1 @@\n" + "".join(
            f"-line {i}\n" for i in range(30)
        )
        request = ApprovalRequest("write", "put_back", "app.py", diff, why=why + "and tries afresh.")
        await pilot.app.push_screen(ApprovalModal(request))
        await pilot.pause()

    app = build_app(SETTINGS, ScriptedBackend())
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_approval_modal_for_a_command(snap_compare: Any) -> None:
    """You should see "Run this command in the workspace?", the line `$ git status -s`, and three
    buttons: "Allow once", "Always allow “git status” here" and "Deny" (focused)."""

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        request = ApprovalRequest(
            "shell", "run_shell", "git status -s", "git status -s", "git status"
        )
        await pilot.app.push_screen(ApprovalModal(request))
        await pilot.pause()

    app = build_app(SETTINGS, ScriptedBackend())
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_approval_modal_keeps_what_was_typed_into_it(snap_compare: Any) -> None:
    """You should see the command modal with its keys in the bottom border ("ctrl+y allow once ·
    tab/←→ choose · enter press · esc deny") and, under the buttons, the line `typed here, back
    to your message after this: “and the tests”`: letters never answer it."""

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        request = ApprovalRequest(
            "shell", "run_shell", "git status -s", "git status -s", "git status"
        )
        await pilot.app.push_screen(ApprovalModal(request, clock=FakeClock()))
        await pilot.press(*"and the tests")
        await pilot.pause()

    app = build_app(SETTINGS, ScriptedBackend())
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_a_live_step_being_written(snap_compare: Any) -> None:
    """You should see a finished `✓ read_file(path=util.py) · 4 ms` block, then a live block
    "step 2/30 · writing util.py · 31 tokens · 12.4 tok/s" with the file's code forming
    (`def add(a, b):` … `def mul(a, b):`) above the empty answer; the status line says
    "step 2/30 · 9m41s left"."""
    from tests.tui.live_step_backend import LIVE_TURN, LiveStepBackend

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        await pilot.press(*"add mul", "enter")
        for _ in range(4):
            await pilot.pause(0.15)
        pilot.app.clear_notifications()
        await pilot.pause()

    app = build_app(SETTINGS, LiveStepBackend([LIVE_TURN]))
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_the_loop_guard_and_the_stuck_outcome(snap_compare: Any) -> None:
    """You should see three `✗ list_dir(path=hello.txt) · 1 ms` blocks, then
    `✗ list_dir(path=hello.txt) · same error 3× · not run again` and `… · stuck`,
    and below the answer the footnote "stuck · 5 steps · list_dir …" in the
    warning colour."""
    from tests.tui.live_step_backend import GUARD_TURN, LiveStepBackend

    async def run_before(pilot: Any) -> None:
        from fusion_tui.tui.widgets.chat_view import ChatView

        await _settle(pilot)
        await pilot.press(*"list it", "enter")
        await _settle(pilot)
        pilot.app.screen.query_one(ChatView).scroll_end(animate=False)
        await pilot.pause()

    # Tall enough for the whole turn: at 80×24 the scrollbar's position raced the layout.
    app = build_app(SETTINGS, LiveStepBackend([GUARD_TURN]))
    assert snap_compare(app, terminal_size=(80, 44), run_before=run_before)
