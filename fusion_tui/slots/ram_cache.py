"""Provides `RamCacheModel`: whose prompts llama-server's host-RAM prompt cache holds, per launch.

Why: with more sessions than slots and the server's RAM cache on (`--cache-ram`, 8,192 MiB by
default), a request sent to a slot that holds another session's prompt makes the server move
that prompt into its RAM cache and load the best match from it (shared/reference/llama-server.md,
"Explicit id_slot": the `f_keep < 0.5` step) — a copy in the server's memory. Restoring our saved
file instead is a disk read and a round trip on the first token (4–8 ms on the demo model, where
the whole first token is ~150 ms). So a returning session rides the RAM cache while this model
says the server still has its prompt there: the server moved it to RAM when another session was
sent into its slot without a restore, and everything moved to RAM after it fits half the budget.
Only where a miss is cheap (its prompt re-read in under `MAX_MISS_S`), and only while no miss was
seen on the launch: the first answer that reuses less than expected turns the model off, and
saved slots are restored from disk from then on.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

DEFAULT_CACHE_RAM_MIB = 8192
"""llama-server's `--cache-ram` default."""
MAX_MISS_S = 5.0
"""A session rides the RAM cache only when reading its prompt again would take less than this."""
BUDGET_SHARE = 0.5
"""What counts as still held: the bytes moved to RAM since the session's fit in this share."""

_MODELS: dict[str, RamCacheModel] = {}
"""Launch id → the model of that server's RAM cache (one per process, as the slot gate)."""


def cache_ram_bytes(argv: Sequence[str]) -> int | None:
    """The RAM prompt cache budget a launch's arguments give (None: off; -1: unbounded)."""
    value: str | None = None
    for i, arg in enumerate(argv):
        if arg in ("--cache-ram", "-cram") and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--cache-ram="):
            value = arg.split("=", 1)[1]
    try:
        mib = int(value) if value is not None else DEFAULT_CACHE_RAM_MIB
    except ValueError:
        return None
    if mib == 0:
        return None
    return -1 if mib < 0 else mib * 1024 * 1024


class RamCacheModel:
    """Sessions the server moved to its RAM cache, oldest first, with their state's bytes."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.enabled = True
        self._pushed: OrderedDict[str, int] = OrderedDict()

    def pushed(self, session_id: str, n_bytes: int) -> None:
        """The server moved `session_id`'s prompt to RAM (another session took its slot)."""
        self._pushed.pop(session_id, None)
        self._pushed[session_id] = max(0, n_bytes)

    def loaded(self, session_id: str) -> None:
        """`session_id` is back in a slot (the next push of it is a new entry)."""
        self._pushed.pop(session_id, None)

    def holds(self, session_id: str) -> bool:
        """Whether the server's RAM cache very likely still has `session_id`'s prompt."""
        if not self.enabled or session_id not in self._pushed:
            return False
        if self.budget_bytes < 0:
            return True
        keys = list(self._pushed)
        since = sum(self._pushed[k] for k in keys[keys.index(session_id) :])
        return since <= self.budget_bytes * BUDGET_SHARE

    def missed(self) -> None:
        """An answer reused less than the model promised: trust disk restores from now on."""
        self.enabled = False
        self._pushed.clear()


def ram_cache_for(launch_id: str | None, argv: Sequence[str]) -> RamCacheModel | None:
    """The process's model of `launch_id`'s RAM cache; None for an unknown launch (an external
    server: its arguments are not ours to read) or a cache that is off."""
    if not launch_id:
        return None
    model = _MODELS.get(launch_id)
    if model is None:
        budget = cache_ram_bytes(argv)
        if budget is None:
            return None
        model = _MODELS[launch_id] = RamCacheModel(budget)
    return model


def rides_ram(
    model: RamCacheModel | None, session_id: str, n_tokens: int, rate: float | None
) -> bool:
    """Whether a returning session should ride the RAM cache instead of a disk restore: the
    model holds it and a miss would cost a re-read shorter than `MAX_MISS_S`."""
    if model is None or not model.holds(session_id) or not rate or rate <= 0:
        return False
    return n_tokens / rate <= MAX_MISS_S
