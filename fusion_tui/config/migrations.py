"""Provides `migrate`: bring a config mapping from any older schema version to the current one.

Migrations work on the in-memory mapping only; the user's file is never rewritten by loading.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fusion_tui.config.settings import SCHEMA_VERSION


def _v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """Version 2 added `localModels.managed.swaFull`; older files behave as `auto`."""
    local = raw.setdefault("localModels", {})
    if isinstance(local, dict):
        managed = local.setdefault("managed", {})
        if isinstance(managed, dict):
            managed.setdefault("swaFull", "auto")
    return raw


def _v2_to_v3(raw: dict[str, Any]) -> dict[str, Any]:
    """Version 3 added `server.endpoints` and `localModels.managed.rpc`; older files get both
    empty, which means the one server `server.mode` / `server.url` describe, as before."""
    server = raw.setdefault("server", {})
    if isinstance(server, dict):
        server.setdefault("endpoints", [])
    local = raw.setdefault("localModels", {})
    if isinstance(local, dict):
        managed = local.setdefault("managed", {})
        if isinstance(managed, dict):
            managed.setdefault("rpc", [])
    return raw


MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate(raw: dict[str, Any]) -> dict[str, Any]:
    version = raw.get("version", SCHEMA_VERSION if not raw else 1)
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError(f"version should be a whole number from 1 to {SCHEMA_VERSION}")
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"version {version} is newer than this fusion-tui understands ({SCHEMA_VERSION}); "
            "upgrade fusion-tui or edit the file"
        )
    out = dict(raw)
    while version < SCHEMA_VERSION:
        out = MIGRATIONS[version](out)
        version += 1
    out["version"] = SCHEMA_VERSION
    return out
