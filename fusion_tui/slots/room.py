"""Provides the slot ledger and the choices for more sessions than slots.

`SlotLedger` (`owners.json` in the managed daemon's slot folder) says which session each slot of
a launch holds and when it was last used; every process that sends to that daemon (the TUI,
`fusion-tui chat`, `fusion-tui run`) writes it when the server answers a session on a slot and
reads it before naming one. One small file read per request, where scanning the session store
would parse every session file.

When a session needs a slot and none is free, the least recently used other session's slot is
saved to disk first (`choose_victim`), and a returning session whose slot another session took
is restored from its saved file when that is cheaper than reading its prompt again
(`restore_is_cheaper`, from the measured restore rate and prompt speed).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from fusion_tui.atomic import atomic_write

LEDGER_NAME = "owners.json"
DEFAULT_RESTORE_BYTES_PER_S = 200e6
"""Assumed until a restore was measured: a local disk read into the KV cache."""
DEFAULT_PROMPT_TOK_PER_S = 300.0
"""Assumed until a prompt was measured (a small model on a CPU)."""


@dataclass(frozen=True)
class Holder:
    session_id: str
    launch_id: str
    used: float


class SlotLedger:
    """Slot → the session holding it on a launch, shared by every process of this machine."""

    def __init__(self, folder: Path, now: Callable[[], float] = time.time) -> None:
        self.path = Path(folder) / LEDGER_NAME
        self._now = now

    def _read(self) -> dict[str, dict[str, object]]:
        try:
            data = json.loads(self.path.read_text("utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def holders(self, launch_id: str | None) -> dict[int, Holder]:
        """Who holds each slot on `launch_id` (entries of other launches are stale)."""
        out: dict[int, Holder] = {}
        if launch_id is None:
            return out
        for key, row in self._read().items():
            if not isinstance(row, dict) or row.get("launch") != launch_id:
                continue
            sid, used = row.get("session"), row.get("used")
            if key.isdigit() and isinstance(sid, str) and isinstance(used, int | float):
                out[int(key)] = Holder(sid, launch_id, float(used))
        return out

    def claim(self, slot: int, session_id: str, launch_id: str | None) -> None:
        """`session_id` is now in `slot` (the server answered it there)."""
        if launch_id is None or slot < 0:
            return
        data = self._read()
        for key in [k for k, r in data.items() if _session(r) == session_id]:
            del data[key]  # a session is in one slot at a time
        data[str(slot)] = {"session": session_id, "launch": launch_id, "used": self._now()}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write(self.path, json.dumps(data, indent=1))
        except OSError:
            pass  # the ledger is advice: a read-only folder only loses the hint


def _session(row: object) -> object:
    return row.get("session") if isinstance(row, dict) else None


def choose_victim(
    holders: Mapping[int, Holder], total_slots: int, blocked: Iterable[int], me: str
) -> int | None:
    """The slot of the least recently used other session (not `blocked`: in flight, pinned by
    this process), or None."""
    skip = set(blocked)
    rows = [
        (h.used, slot)
        for slot, h in holders.items()
        if 0 <= slot < total_slots and slot not in skip and h.session_id != me
    ]
    return min(rows)[1] if rows else None


def restore_is_cheaper(
    n_tokens: int,
    file_bytes: int,
    restore_bytes_per_s: float | None,
    prompt_tok_per_s: float | None,
) -> bool:
    """Restoring `file_bytes` beats reading `n_tokens` of prompt again (measured rates, else
    the defaults above)."""
    if n_tokens <= 0:
        return False
    restore_s = file_bytes / (restore_bytes_per_s or DEFAULT_RESTORE_BYTES_PER_S)
    reread_s = n_tokens / (prompt_tok_per_s or DEFAULT_PROMPT_TOK_PER_S)
    return restore_s < reread_s
