"""Snapshots of the slot map grouped by endpoint: two endpoints, then one down."""

from __future__ import annotations

from typing import Any

from tests.tui.test_endpoint_slot_map import GONE, GPU, HERE, Host


def _run_before(host: Host, polls: int) -> Any:
    async def run_before(pilot: Any) -> None:
        for _ in range(polls):
            await host.slot_map.refresh_now()
        await pilot.pause()

    return run_before


def test_two_endpoints(snap_compare: Any) -> None:
    """140×36: on the right, "Slots · 2/4 busy", then "◆ here · ok · 1/2 busy · 41 tok/s" and
    the model under it, over slot 0 (Fix the parser bug, idle, 1,200 cached) and slot 1 (side,
    decoding); then "gpu-box · ok · 1/2 busy · 120 tok/s" and the model, over slot 0 (no owner:
    another client's prompt) and slot 1 idle. The status line starts "here · "."""
    host = Host([HERE, GPU])
    assert snap_compare(host, terminal_size=(140, 36), run_before=_run_before(host, 1))


def test_one_endpoint_down(snap_compare: Any) -> None:
    """140×36: the here group as above; gpu-box's header reads "gpu-box · down: connection
    refused" with no slots under it."""
    host = Host([HERE, GPU], [HERE, GONE])
    assert snap_compare(host, terminal_size=(140, 36), run_before=_run_before(host, 2))


def test_failover_question(snap_compare: Any) -> None:
    """90×20: a modal "Endpoint gone": "here is not answering. Move this session to gpu-box?",
    the cost (a cold re-read of 1,834 prompt tokens; waiting keeps the message), the buttons
    "Move to gpu-box (1,834 tokens cold)" and "Wait" (focused), and its keys in the bottom
    border: "ctrl+y move · tab/←→ choose · enter press · esc wait" (no letter answers it)."""
    from textual.app import App

    from fusion_tui.tui.screens.failover import FailoverModal
    from tests.tui.test_failover_modal import MOVE

    class Asking(App[None]):
        def on_mount(self) -> None:
            self.push_screen(FailoverModal(MOVE))

    assert snap_compare(Asking(), terminal_size=(90, 20))
