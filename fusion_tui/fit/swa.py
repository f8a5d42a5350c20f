"""Provides `decide_swa_full` and `prefix_reuse`: the `--swa-full` verdict and the reuse class.

Without `--swa-full` a model with sliding layers reuses its cache only for strict extensions
(reference §5, §10); with it, any prefix is reusable at the price of a full-size cache for the
sliding layers. Hybrid and recurrent models never get the flag (their state cannot roll back).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from fusion_tui.gguf.facts import ModelFacts

SwaMode = Literal["auto", "on", "off"]
PrefixReuse = Literal["full", "none"]
# auto: take --swa-full only when the full-size cache uses at most this share of the KV budget.
AUTO_SHARE = 0.5


@dataclass(frozen=True)
class SwaVerdict:
    swa_full: bool
    reason: str


def decide_swa_full(
    facts: ModelFacts,
    mode: SwaMode,
    full_swa_bytes: int | None = None,
    kv_budget_bytes: int | None = None,
    share: float = AUTO_SHARE,
) -> SwaVerdict:
    """Verdict for `mode`; `full_swa_bytes` = cache size with `--swa-full` at the chosen ctx."""
    if mode not in ("auto", "on", "off"):
        raise ValueError(f"swaFull must be auto, on or off, not {mode!r}")
    if facts.has_recurrent or facts.is_hybrid or facts.is_recurrent:
        return SwaVerdict(False, "hybrid/recurrent model: --swa-full does not apply")
    if not facts.has_swa:
        return SwaVerdict(False, "no sliding-window layers: the flag is not needed")
    if mode == "off":
        return SwaVerdict(False, "swaFull is off: sliding layers keep a window-sized cache")
    if mode == "on":
        return SwaVerdict(True, "swaFull is on: sliding layers get a full-size cache")
    if full_swa_bytes is None or kv_budget_bytes is None or kv_budget_bytes <= 0:
        return SwaVerdict(False, "auto: no memory budget known, keeping the window-sized cache")
    pct = 100 * full_swa_bytes / kv_budget_bytes
    limit = round(share * 100)
    if full_swa_bytes <= share * kv_budget_bytes:
        return SwaVerdict(
            True, f"auto: the full-size cache takes {pct:.0f}% of the KV budget (<= {limit}%)"
        )
    return SwaVerdict(
        False, f"auto: the full-size cache would take {pct:.0f}% of the KV budget (> {limit}%)"
    )


def prefix_reuse(facts: ModelFacts, swa_full: bool) -> PrefixReuse:
    """`full`: any cached prefix is reusable; `none`: only whole extensions (keep append-only)."""
    if facts.has_recurrent or facts.is_recurrent:
        return "none"
    if facts.has_swa and not swa_full:
        return "none"
    return "full"
