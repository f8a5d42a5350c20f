"""Provides the warm-resume plumbing around `SlotArchive`: server facts, saving before a stop,
and the stream's first event raced against the first-token watch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from fusion_tui.clock import Clock
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, make_daemon
from fusion_tui.server.errors import ServerError, StreamStalled
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.types import StreamEvent
from fusion_tui.sessions.store import SessionStore, SessionStoreError
from fusion_tui.slots.archive import (
    DEFAULT_MAX_BYTES,
    ModelIdentity,
    ServerFacts,
    SlotArchive,
    owners_by_slot,
)
from fusion_tui.slots.watch import SlotsFn, WatchConfig, watch_first_token
from fusion_tui.status import ServerStatus

SAVE_DEADLINE = 120.0
"""Seconds a slot save may take when leaving or exiting before it is given up."""


def watch_config(settings: Settings) -> WatchConfig:
    lm = settings.local_models
    return WatchConfig(
        poll_interval=lm.progress_poll_ms / 1000,
        request_timeout=lm.request_timeout_ms / 1000,
        first_token_timeout=lm.first_token_timeout_ms / 1000,
        enabled=lm.progress_watch,
    )


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


async def first_event(
    it: AsyncIterator[StreamEvent],
    slots_fn: SlotsFn,
    slot: int,
    config: WatchConfig,
    clock: Clock,
) -> StreamEvent | None:
    """The stream's first event (None: it ended empty), with `watch_first_token` polling
    `/slots` meanwhile; the watch's stall or timeout cancels the read and is raised."""
    first_byte = anyio.Event()
    got: list[StreamEvent | None] = []
    failed: list[Exception] = []
    async with anyio.create_task_group() as tg:

        async def read() -> None:
            try:
                got.append(await anext(it, None))
            except Exception as exc:
                failed.append(exc)
            first_byte.set()

        async def watch() -> None:
            try:
                await watch_first_token(slots_fn, slot, first_byte, config=config, clock=clock)
            except StreamStalled as exc:
                failed.append(exc)
                tg.cancel_scope.cancel()

        tg.start_soon(read)
        tg.start_soon(watch)
    if failed:
        raise failed[0]
    return got[0] if got else None
