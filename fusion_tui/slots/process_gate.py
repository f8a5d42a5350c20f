"""Provides the process-wide slot state every `SlotKeeper` of the process shares.

Why process-wide: the TUI's sessions, the bench's, an agent beside a chat each have a keeper, yet
they talk to the same servers. One gate per server makes all their requests (chat, agent, side
calls, saves) queue on the same per-slot locks, so a held lock proves the slot idle; one set of
sessions sent for per launch is the `exclusive` check's "ours".
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Set

from fusion_tui.slots.gate import SlotGate, SlotsFn, slots_busy_probe

_SENT_BY_THIS_PROCESS: dict[str, set[str]] = {}
"""Launch id → sessions this process has been answered for (every keeper of the process)."""
_GATES: weakref.WeakValueDictionary[str, SlotGate] = weakref.WeakValueDictionary()
"""One gate per server (and event loop) for the whole process."""


def process_gate(
    server: str, slots: SlotsFn, total: Callable[[], int], exclusive: Callable[[], bool]
) -> SlotGate:
    """The process's gate for `server` (its launch id, else its URL), its probe over `slots`
    and its exclusivity check bound to the newest connection (an earlier keeper's client may be
    closed by now)."""
    try:  # a gate's locks belong to one event loop (tests run many)
        loop = id(asyncio.get_running_loop())
    except RuntimeError:
        loop = 0
    key = f"{loop}:{server}"
    gate = _GATES.get(key)
    if gate is None:
        gate = _GATES[key] = SlotGate(total)
    gate.rebind(total, slots_busy_probe(slots), exclusive)
    return gate


def mark_sent(launch_id: str, session_id: str) -> None:
    """The server of `launch_id` answered `session_id` for this process."""
    _SENT_BY_THIS_PROCESS.setdefault(launch_id, set()).add(session_id)


def sent_by_this_process(launch_id: str) -> Set[str]:
    """The sessions this process has been answered for on `launch_id` (read-only)."""
    return _SENT_BY_THIS_PROCESS.get(launch_id, frozenset())
