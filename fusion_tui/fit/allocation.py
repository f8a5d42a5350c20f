"""Provides `parse_allocated_kv_bytes`: what llama-server says it allocated for KV and state.

The size lines are libllama INFO messages, visible only with `-lv 4` (reference §6). Values are
printed in MiB with two decimals, so a parsed figure is exact only to ±0.005 MiB per line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIB = 1024 * 1024
# Half of the last printed digit (0.01 MiB), per line.
ROUNDING_PER_LINE_BYTES = int(0.005 * MIB)

_SIZE = re.compile(
    r"(llama_kv_cache|llama_memory_recurrent):\s+size\s*=\s*([0-9]+(?:\.[0-9]+)?)\s*MiB"
)
# A new model load starts a new block of size lines; a speculative draft model's load does not
# (its cache is the same server's, counted with the main model's).
_LOAD_START = re.compile(r"llama_model_loader: loaded meta data|load_model: loading model")
_DRAFT_LOAD = "loading draft model"


@dataclass(frozen=True)
class Allocation:
    """The last load's size lines: total bytes and how far rounding can put them off."""

    kv_bytes: int
    recurrent_bytes: int
    lines: int

    @property
    def total_bytes(self) -> int:
        return self.kv_bytes + self.recurrent_bytes

    @property
    def tolerance_bytes(self) -> int:
        return self.lines * ROUNDING_PER_LINE_BYTES


def parse_allocation(log_text: str) -> Allocation | None:
    """Size lines after the last model-load marker (or in the whole text without one)."""
    starts: list[int] = []
    previous = 0
    for m in _LOAD_START.finditer(log_text):
        if not (starts and _DRAFT_LOAD in log_text[previous : m.start()]):
            starts.append(m.start())  # else: the draft model's loader, in the main one's block
        previous = m.start()
    tail = log_text[starts[-1] :] if starts else log_text
    kv = rec = 0.0
    n = 0
    for m in _SIZE.finditer(tail):
        value = float(m.group(2)) * MIB
        if m.group(1) == "llama_kv_cache":
            kv += value
        else:
            rec += value
        n += 1
    if n == 0:
        return None
    return Allocation(round(kv), round(rec), n)


def parse_allocated_kv_bytes(log_text: str) -> int | None:
    """Sum of `llama_kv_cache: size = … MiB` and `llama_memory_recurrent: size = … MiB` lines
    of the last model load in `log_text`, in bytes; None when the log has no such line."""
    alloc = parse_allocation(log_text)
    return alloc.total_bytes if alloc else None


def matches(estimate_bytes: int, alloc: Allocation) -> bool:
    """True when the estimate equals the allocation to the log's printed precision."""
    return abs(estimate_bytes - alloc.total_bytes) <= alloc.tolerance_bytes
