"""The slot model of the fake llama-server: caches, selection, `/slots` JSON.

Tokens are characters (`ord(c)`), so a prompt of N characters is N tokens and prefix reuse is
the common prefix in characters. Slot choice mirrors llama-server (reference §3): a named id
wraps modulo the slot count and waits while that slot is busy; `-1` takes the idle slot with the
best prefix similarity above 0.1, else the least recently used idle slot (ties: highest id).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


def error(code: int, message: str, kind: str) -> tuple[int, dict[str, Any]]:
    """An error answer in llama-server's format."""
    return code, {"error": {"code": code, "message": message, "type": kind}}


def tokenize(text: str) -> list[int]:
    return [ord(c) for c in text]


def detokenize(tokens: list[int]) -> str:
    return "".join(chr(t) for t in tokens)


def common_prefix(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


@dataclass
class FakeSlot:
    id: int
    n_ctx: int
    cached: list[int] = field(default_factory=list)
    used: bool = False
    is_processing: bool = False
    id_task: int = -1
    n_prompt_tokens_processed: int = 0
    n_prompt_tokens_cache: int = 0
    n_decoded: int = 0
    n_remain: int = -1
    t_last_used: int = -1
    in_flight: int = 0
    """Tokens of the current task already in the cache (grows during the prompt)."""

    def to_json(self) -> dict[str, Any]:
        base: dict[str, Any] = {
            "id": self.id,
            "n_ctx": self.n_ctx,
            "speculative": False,
            "is_processing": self.is_processing,
        }
        if not self.used:
            return base  # a slot that never ran a task has only these fields
        base.update(
            id_task=self.id_task,
            n_prompt_tokens=self.in_flight if self.is_processing else len(self.cached),
            n_prompt_tokens_processed=self.n_prompt_tokens_processed,
            n_prompt_tokens_cache=self.n_prompt_tokens_cache,
            params={"n_predict": -1, "stream": True},
            next_token=[
                {
                    "has_next_token": self.is_processing,
                    "has_new_line": False,
                    "n_remain": self.n_remain,
                    "n_decoded": self.n_decoded,
                }
            ],
        )
        return base

    def start(self, task: int, cache_n: int) -> None:
        self.used = True
        self.is_processing = True
        self.id_task = task
        self.n_prompt_tokens_cache = cache_n
        self.n_prompt_tokens_processed = 0
        self.n_decoded = 0
        self.in_flight = cache_n

    def release(self, cached: list[int], tick: int) -> None:
        self.cached = cached
        self.is_processing = False
        self.n_prompt_tokens_processed = 0
        self.n_prompt_tokens_cache = 0
        self.n_decoded = 0
        self.n_remain = -1
        self.in_flight = 0
        self.t_last_used = tick


class SlotTable:
    """The slots of one fake server (used from the server's event loop only)."""

    def __init__(self, total: int, n_ctx: int, similarity: float = 0.1) -> None:
        self.slots = [FakeSlot(i, n_ctx) for i in range(total)]
        self.similarity = similarity
        self.tick = 0
        self.task = 0

    def named(self, id_slot: int) -> FakeSlot:
        """llama-server reduces any id other than -1 modulo the slot count (unsigned)."""
        return self.slots[(id_slot % (1 << 64)) % len(self.slots)]

    def pick(self, tokens: list[int]) -> FakeSlot | None:
        idle = [s for s in self.slots if not s.is_processing]
        if not idle:
            return None
        best: FakeSlot | None = None
        best_sim = self.similarity
        for s in idle:
            if not s.cached or not tokens:
                continue
            sim = common_prefix(s.cached, tokens) / len(tokens)
            if sim > best_sim:
                best, best_sim = s, sim
        if best is not None:
            return best
        return min(idle, key=lambda s: (s.t_last_used, -s.id))

    def action(
        self, sent_id: str, action: str, name: Any, saved: dict[str, list[int]]
    ) -> tuple[int, dict[str, Any]]:
        """`POST /slots/{id}?action=save|restore|erase`; files are kept in `saved`."""
        try:
            sent = int(sent_id)
        except ValueError:
            return error(400, "Invalid slot ID", "invalid_request_error")
        slot = self.named(sent)  # the answer echoes the id as sent
        if action == "erase":
            n, slot.cached = len(slot.cached), []
            return 200, {"id_slot": sent, "n_erased": n}
        if action not in ("save", "restore"):
            return error(400, "Invalid action", "invalid_request_error")
        if not isinstance(name, str) or not name or "/" in name or ".." in name:
            return error(400, "Invalid filename", "invalid_request_error")
        if action == "save":
            saved[name] = list(slot.cached)
            n = len(slot.cached)
            timings: dict[str, float] = {"save_ms": 1.0}
            return 200, {"id_slot": sent, "filename": name, "n_saved": n, "n_written": n * 100,
                         "timings": timings}  # fmt: skip
        if name not in saved:
            return error(400, "Unable to restore slot: file not found", "invalid_request_error")
        slot.cached = list(saved[name])
        slot.used = True
        n = len(slot.cached)
        return 200, {"id_slot": sent, "filename": name, "n_restored": n, "n_read": n * 100,
                     "timings": {"restore_ms": 1.0}}  # fmt: skip

    def next_task(self) -> int:
        self.task += 1
        return self.task

    def next_tick(self) -> int:
        self.tick += 1
        return self.tick

    def to_json(self) -> list[dict[str, Any]]:
        return [s.to_json() for s in self.slots]
