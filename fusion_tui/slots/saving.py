"""Provides the warm-resume plumbing around `SlotArchive`: what a saved slot must match (server
facts), the managed daemon's slot folder, and saving every session's slot before a stop.
"""

from __future__ import annotations

from pathlib import Path

import anyio

from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, make_daemon
from fusion_tui.server.errors import ServerError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.sessions.store import SessionStore, SessionStoreError
from fusion_tui.slots.archive import (
    DEFAULT_MAX_BYTES,
    ModelIdentity,
    ServerFacts,
    SlotArchive,
    owners_by_slot,
)
from fusion_tui.status import ServerStatus

SAVE_DEADLINE = 120.0
"""Seconds a slot save may take when leaving or exiting before it is given up."""


def server_facts(conn: Connection) -> ServerFacts:
    """What a saved slot must match: the model file, the per-slot context, the KV types."""
    spec = conn.record.spec if conn.record is not None else {}
    k, v = spec.get("cache_type_k"), spec.get("cache_type_v")
    types = f"{k}/{v}" if k and v else ""
    model = ModelIdentity.of(conn.props.model_path)
    return ServerFacts(model, conn.props.n_ctx, types, conn.launch_id)


def archive_for(conn: Connection, max_bytes: int = DEFAULT_MAX_BYTES) -> SlotArchive | None:
    """The managed daemon's slot folder; None for an external server (its files are not ours)."""
    folder = conn.record.spec.get("slot_save_path") if conn.record is not None else None
    return SlotArchive(Path(folder), max_bytes=max_bytes) if folder else None


async def save_sessions_before_stop(
    client: LlamaClient,
    archive: SlotArchive,
    store: SessionStore,
    facts: ServerFacts,
    total_slots: int,
    skip: frozenset[str] = frozenset(),
) -> list[str]:
    """Save the slot of every stored session that most likely still holds its slot on this
    launch (see `owners_by_slot`); returns the ids saved. Call it before the daemon stops."""
    rows = []
    for entry in store.list():
        if entry.ok and entry.id not in skip:
            try:
                s = store.load(entry.id)
            except (SessionStoreError, ValueError):
                continue
            launch = s.server.launch_id if s.server else None
            rows.append((s.id, s.pinned_slot, launch, s.updated))
    saved = []
    for slot, sid in sorted(owners_by_slot(rows, facts.launch_id, total_slots).items()):
        with anyio.move_on_after(SAVE_DEADLINE):
            try:
                await archive.save(client, slot, sid, facts)
                saved.append(sid)
            except (ServerError, OSError):
                continue
    return saved


async def save_before_daemon_stop(settings: Settings, paths: AppPaths) -> list[str]:
    """For `fusion-tui stop` and anything else about to stop the managed daemon."""
    record = make_daemon(settings, paths).current()
    if record is None or not record.spec.get("slot_save_path"):
        return []
    async with LlamaClient(record.url) as client:
        try:
            props = await client.props()
        except ServerError:
            return []
        conn = Connection(client, props, ServerStatus(state="ready"), record)
        archive = archive_for(conn)
        assert archive is not None
        store = SessionStore.default(paths)
        return await save_sessions_before_stop(
            client, archive, store, server_facts(conn), props.total_slots
        )
