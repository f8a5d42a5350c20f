"""Provides the schema upgrades of session files, one step per version.

`MIGRATIONS[n]` turns a version-`n` dict into a version-`n+1` dict. Schema 1 is the first
released layout; schema 2 added `pinned_endpoint`. When the layout changes, bump `SCHEMA_VERSION`
in `model.py` and add the step here. The store backs a file up before it rewrites it in a newer
schema, and refuses files from a newer app (it never downgrades or rewrites them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fusion_tui.sessions.model import SCHEMA_VERSION, SessionFileError

Migration = Callable[[dict[str, Any]], dict[str, Any]]


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2 pins a session to (endpoint, slot); a version-1 pin is on the default endpoint
    (the managed server, else the first configured), which is what `None` means."""
    data.setdefault("pinned_endpoint", None)
    return data


MIGRATIONS: dict[int, Migration] = {1: _v1_to_v2}


class FutureSchemaError(SessionFileError):
    """The file was written by a newer fusion-tui; this one must not read or rewrite it."""


def schema_of(data: Any, path: str = "") -> int:
    """The `schema_version` of a raw session dict, validated."""
    if not isinstance(data, dict):
        raise SessionFileError("the file does not hold a JSON object", path=path)
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SessionFileError(
            f"field 'schema_version' should be a positive integer, got {version!r}",
            field="schema_version",
            path=path,
        )
    return version


def upgrade(
    data: dict[str, Any],
    *,
    current: int = SCHEMA_VERSION,
    steps: Mapping[int, Migration] | None = None,
    path: str = "",
) -> dict[str, Any]:
    """Bring `data` to schema `current`; a newer schema raises `FutureSchemaError`."""
    chain = MIGRATIONS if steps is None else steps
    version = schema_of(data, path)
    if version > current:
        raise FutureSchemaError(
            f"written by a newer fusion-tui (schema {version}; this version reads up to "
            f"{current}). Upgrade fusion-tui to open it; the file is left untouched.",
            field="schema_version",
            path=path,
        )
    while version < current:
        step = chain.get(version)
        if step is None:
            raise SessionFileError(
                f"no migration from schema {version} to {version + 1}",
                field="schema_version",
                path=path,
            )
        data = step(dict(data))
        version += 1
        data["schema_version"] = version
    return data
