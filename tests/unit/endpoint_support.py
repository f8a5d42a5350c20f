"""Helpers for the tests of two endpoints against two fake llama-servers: the servers,
the settings naming them alpha and beta, another client keeping a slot busy, and a failover
question answered the same way each time and recorded."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from fusion_tui.config.settings import EndpointSettings, ServerSettings
from fusion_tui.endpoints.placement import Placement
from tests.fakes.fake_server import FakeLlamaServer, Reply


@contextmanager
def two_servers(n_ctx: int) -> Iterator[tuple[FakeLlamaServer, FakeLlamaServer]]:
    """Two fake llama-servers of 2 slots each, `n_ctx` context, alpha's and beta's."""
    with (
        FakeLlamaServer(total_slots=2, n_ctx=n_ctx) as a,
        FakeLlamaServer(total_slots=2, n_ctx=n_ctx) as b,
    ):
        yield a, b


def alpha_beta(a: FakeLlamaServer, b: FakeLlamaServer) -> ServerSettings:
    """Server settings with the endpoints `a` (label alpha) and `b` (label beta)."""
    eps = (EndpointSettings(url=a.url, label="alpha"), EndpointSettings(url=b.url, label="beta"))
    return ServerSettings(endpoints=eps)


@contextmanager
def slot_kept_busy(srv: FakeLlamaServer, body: dict[str, Any]) -> Iterator[None]:
    """Another client's request `body` hangs in `srv`'s prompt phase for the `with` block (its slot
    busy with that work); on the way out it is released and the client joined."""
    srv.script(Reply(hang="prompt"))
    other = threading.Thread(
        target=lambda: httpx.post(f"{srv.url}/completion", json=body, timeout=10)
    )
    other.start()
    try:
        for _ in range(100):
            if any(s["is_processing"] for s in srv.slot_json()):
                break
            threading.Event().wait(0.02)
        yield
    finally:
        srv.release()
        other.join(10)


def failover_answer(answer: bool) -> tuple[list[Placement], Callable[[Placement], Awaitable[bool]]]:
    """An `ask_failover` that always answers `answer` (True: move), and the placements it was
    asked about."""
    asked: list[Placement] = []

    async def ask(placed: Placement) -> bool:
        asked.append(placed)
        return answer

    return asked, ask


class RecordingDaemon:
    """`ManagedDaemon`'s stop side: no process, the stops counted (`stop_server` must call it
    exactly when the managed server is the one to stop)."""

    def __init__(self, running: bool = True) -> None:
        self.running = running
        self.stops = 0

    def current(self) -> None:
        return None  # no launch record on disk: `save_before_daemon_stop` has nothing to read

    async def stop(self) -> bool:
        self.stops += 1
        was, self.running = self.running, False
        return was
