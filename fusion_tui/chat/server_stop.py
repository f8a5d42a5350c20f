"""Provides what "Stop server" does, for every backend (the plain chat and agent mode).

Stopping only ever stops the managed llama-server on this machine, and every session's slot on
it is saved first, so each one resumes warm. An external server (one fusion-tui did not launch)
is never stopped: that is said. With several endpoints and the session on a remote one, only the
managed server here is stopped and the sentence says so: the session keeps its endpoint.
"""

from __future__ import annotations

from fusion_tui.chat.backend import Unavailable
from fusion_tui.config import Settings
from fusion_tui.endpoints.model import not_stopped
from fusion_tui.endpoints.session_pins import EndpointPins
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, make_daemon
from fusion_tui.slots.keeper import SlotKeeper
from fusion_tui.slots.saving import save_before_daemon_stop

NOT_OURS = "this server was not launched by fusion-tui; it is not ours to stop"


async def stop_own_daemon(keeper: SlotKeeper, settings: Settings, paths: AppPaths) -> None:
    """The session is on the managed server (`keeper`'s connection): save its slot, then every
    other session's, let go of the connection and stop the daemon. `Unavailable` when the
    server is not ours (external, or not connected)."""
    conn = keeper.conn
    if conn is None or conn.record is None:
        raise Unavailable(NOT_OURS)
    await keeper.leave()
    await keeper.save_others()
    keeper.detach()
    await conn.client.aclose()
    await make_daemon(settings, paths).stop()


async def stop_beside_remote(
    settings: Settings, paths: AppPaths, pins: EndpointPins | None, conn: Connection | None
) -> str | None:
    """With several endpoints and the session's endpoint (`conn`) remote: only the managed
    server here is stopped (every session's slot on it saved first), and the sentence says
    what was done. None when the session is on the managed server (`stop_own_daemon`)."""
    if pins is None or conn is None or conn.record is not None:
        return None
    label = pins.label_of(conn) or conn.client.base_url
    remote = not_stopped([label])
    if not any(ep.managed for ep in pins.registry.endpoints):
        return f"{remote}; no managed llama-server is configured on this machine"
    daemon = make_daemon(settings, paths)
    if daemon.current() is not None:
        await save_before_daemon_stop(settings, paths)
    if await daemon.stop():
        return f"{remote}; stopped the managed llama-server here"
    return f"{remote}; no managed llama-server was running here"
