"""Provides `endpoints_json`: the `endpoints` list of `status --json`, one probe per endpoint."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fusion_tui.config import Settings
from fusion_tui.endpoints.health import PROBE_TIMEOUT, HealthWatcher
from fusion_tui.endpoints.model import endpoints_from_settings
from fusion_tui.endpoints.registry import EndpointRegistry


async def endpoints_json(
    settings: Settings,
    managed_url: str | None,
    *,
    managed_tok_s: float | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = PROBE_TIMEOUT,
) -> list[dict[str, Any]]:
    """Every configured endpoint (`label`, `url`, `healthy`, `model`, `total_slots`, plus
    `n_ctx`, `tok_s`, `error`, `managed`), probed at once; the managed one at `managed_url` (None:
    not running)."""
    registry = EndpointRegistry(endpoints_from_settings(settings), env=env)
    for ep in registry.endpoints:
        if ep.managed and managed_url:
            registry.bind(ep.label, managed_url)
    watcher = HealthWatcher(registry, timeout=timeout)
    for ep in registry.endpoints:
        if ep.managed:
            watcher.record_speed(ep.label, managed_tok_s)
    try:
        found = await watcher.poll_once(with_slots=False)
    finally:
        await registry.aclose()
    by_label = {ep.label: ep for ep in registry.endpoints}
    return [
        {**h.to_json(watcher.speed(h.label)), "managed": by_label[h.label].managed} for h in found
    ]
