"""Provides `ModelsRegistry`: the recent models list and each model's profile, in one JSON file.

The launch wizard lists recent models from it; the agent's prompt packer reads a model's
prefix-reuse class from it (`full`: any cached prefix is reusable; `none`: keep the session
append-only). Entries are keyed by the model's absolute path, which is what llama-server reports
as `/props.model_path` for a managed launch. The file is written atomically; a missing, torn or
foreign file reads as empty and is replaced on the next write, never raised to the user.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from fusion_tui.server.process.records import read_json, write_json

REGISTRY_VERSION = 1
DEFAULT_LIMIT = 12
_REUSE = ("full", "none")


@dataclass(frozen=True)
class ModelEntry:
    """One model the user launched: when, how, and what we learned about it."""

    path: str
    """Absolute path of the GGUF (the key)."""
    last_used: float = 0.0
    """Unix time of the last launch through the app."""
    architecture: str | None = None
    parallel: int | None = None
    """Slots of the last launch."""
    ctx: int | None = None
    """Total context of the last launch."""
    prefix_reuse: str | None = None
    """`full` or `none` (see the module docstring); None when never planned."""

    @property
    def name(self) -> str:
        return Path(self.path).name

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> ModelEntry | None:
        """The entry in `data`, or None when it is not a usable entry."""
        if not isinstance(data, dict) or not isinstance(data.get("path"), str) or not data["path"]:
            return None
        reuse = data.get("prefix_reuse")
        try:
            return cls(
                path=data["path"],
                last_used=float(data.get("last_used") or 0.0),
                architecture=_opt_str(data.get("architecture")),
                parallel=_opt_int(data.get("parallel")),
                ctx=_opt_int(data.get("ctx")),
                prefix_reuse=reuse if reuse in _REUSE else None,
            )
        except (TypeError, ValueError):
            return None


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _opt_int(value: Any) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    number = int(value)
    return number if number > 0 else None


def model_key(path: str | Path) -> str:
    """The registry key of a model file: its absolute path, `~` expanded (no symlink resolving,
    so the key matches what the server was given and reports back)."""
    return str(Path(path).expanduser().absolute())


class ModelsRegistry:
    """Reads and writes `AppPaths.models_file`; every call re-reads, so two apps can share it."""

    def __init__(
        self,
        path: Path,
        *,
        limit: int = DEFAULT_LIMIT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.limit = limit
        """Most entries kept; the least recently used are dropped first."""
        self.clock = clock

    def entries(self) -> list[ModelEntry]:
        """Every stored entry, most recently used first."""
        data = read_json(self.path)
        raw = data.get("models") if isinstance(data, dict) else None
        if not isinstance(raw, list):
            return []
        seen: set[str] = set()
        out: list[ModelEntry] = []
        for item in raw:
            entry = ModelEntry.from_json(item)
            if entry is not None and entry.path not in seen:
                seen.add(entry.path)
                out.append(entry)
        out.sort(key=lambda e: e.last_used, reverse=True)
        return out

    def recent(self, *, existing_only: bool = True) -> list[ModelEntry]:
        """Recent models, newest first; by default only those whose file is still there."""
        return [e for e in self.entries() if not existing_only or Path(e.path).is_file()]

    def get(self, model_path: str | Path) -> ModelEntry | None:
        key = model_key(model_path)
        return next((e for e in self.entries() if e.path == key), None)

    def prefix_reuse(self, model_path: str | Path) -> str | None:
        """The stamped prefix-reuse class of `model_path` (`full`/`none`), None when unknown."""
        entry = self.get(model_path)
        return entry.prefix_reuse if entry else None

    def remember(
        self,
        model_path: str | Path,
        *,
        parallel: int | None = None,
        ctx: int | None = None,
        prefix_reuse: str | None = None,
        architecture: str | None = None,
    ) -> ModelEntry:
        """Record a launch of `model_path` (moves it to the top); returns the stored entry."""
        if prefix_reuse is not None and prefix_reuse not in _REUSE:
            raise ValueError(f"prefix reuse must be full or none, not {prefix_reuse!r}")
        key = model_key(model_path)
        entries = self.entries()
        old = next((e for e in entries if e.path == key), ModelEntry(key))
        entry = replace(
            old,
            last_used=self.clock(),
            parallel=parallel or old.parallel,
            ctx=ctx or old.ctx,
            prefix_reuse=prefix_reuse or old.prefix_reuse,
            architecture=architecture or old.architecture,
        )
        self._write([entry, *(e for e in entries if e.path != key)])
        return entry

    def set_prefix_reuse(self, model_path: str | Path, prefix_reuse: str) -> ModelEntry:
        """Stamp the profile without counting it as a use (keeps the recent order)."""
        if prefix_reuse not in _REUSE:
            raise ValueError(f"prefix reuse must be full or none, not {prefix_reuse!r}")
        key = model_key(model_path)
        entries = self.entries()
        old = next((e for e in entries if e.path == key), None)
        entry = replace(old or ModelEntry(key), prefix_reuse=prefix_reuse)
        rest = [e for e in entries if e.path != key]
        self._write(sorted([entry, *rest], key=lambda e: e.last_used, reverse=True))
        return entry

    def forget(self, model_path: str | Path) -> bool:
        key = model_key(model_path)
        entries = self.entries()
        kept = [e for e in entries if e.path != key]
        if len(kept) == len(entries):
            return False
        self._write(kept)
        return True

    def _write(self, entries: list[ModelEntry]) -> None:
        data = {"version": REGISTRY_VERSION, "models": [e.to_json() for e in entries[: self.limit]]}
        write_json(self.path, data)
