"""Provides the plain-text status facts shown by the app and printed by the CLI.

Pure formatting: the TUI's status line and `fusion-tui status` read the same words.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_tui.server.process.probe import format_rate
from fusion_tui.server.types import Timings


@dataclass(frozen=True)
class ServerStatus:
    """What the app knows about its server right now."""

    state: str = "starting"
    """`starting`, `building`, `loading`, `ready`, `error`, `stopped`."""
    model: str = ""
    slots: int = 0
    n_ctx: int = 0
    """Per-slot context."""
    tok_s: float | None = None
    """Single-stream decode speed measured by the start-up probe (kept for the record)."""
    detail: str = ""
    """While starting: the stage; when ready: what still runs beside (the probe)."""
    note: str = ""
    """A start-up choice worth knowing, e.g. "repacking off: this CPU traps on AMX"."""
    recent_tok_s: float | None = None
    """Decode speed measured on recent turns; shown instead of the probe once there is one."""
    speculative: str = ""
    """The speculative drafter running (`ngram-simple`, `draft`), "" when off."""
    acceptance: float | None = None
    """Share of drafted tokens the model accepted over recent turns (when speculative)."""
    fallback: str = ""
    """Several endpoints: the managed start failed and a remote endpoint with the
    model serves instead; the sentence that says so (headless: stderr; the TUI: the chat)."""

    def summary(self) -> str:
        if self.state != "ready":
            return " · ".join(p for p in (self.state, self.model, self.detail) if p)
        parts = ["ready", self.model, f"{self.slots} slots × {self.n_ctx} ctx"]
        if self.recent_tok_s:
            parts.append(f"~{format_rate(self.recent_tok_s)} tok/s recent turns")
        elif self.tok_s:
            parts.append(f"~{format_rate(self.tok_s)} tok/s single stream")
        if self.speculative:
            accepted = "" if self.acceptance is None else f" {self.acceptance:.0%} accepted"
            parts.append(f"{self.speculative}{accepted}")
        parts += [self.detail, self.note]
        return " · ".join(p for p in parts if p)


class RecentRates:
    """The decode rate of the last few turns (median), for the status line: the start-up probe
    on a busy machine says little about the turns that follow."""

    def __init__(self, keep: int = 5) -> None:
        self.keep = keep
        self._rates: list[float] = []

    def add(self, tok_s: float) -> float | None:
        """Record one finished turn's rate; returns the current median."""
        if tok_s > 0 and tok_s == tok_s:  # not NaN
            self._rates = [*self._rates, tok_s][-self.keep :]
        return self.median

    @property
    def median(self) -> float | None:
        if not self._rates:
            return None
        ordered = sorted(self._rates)
        mid = len(ordered) // 2
        return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


class Acceptance:
    """Drafted and accepted tokens of the last few turns that drafted, for the status line."""

    def __init__(self, keep: int = 5) -> None:
        self.keep = keep
        self._turns: list[tuple[int, int]] = []

    def add(self, drafted: int, accepted: int) -> float | None:
        if drafted > 0:
            self._turns = [*self._turns, (drafted, accepted)][-self.keep :]
        return self.rate

    @property
    def rate(self) -> float | None:
        drafted = sum(d for d, _ in self._turns)
        return sum(a for _, a in self._turns) / drafted if drafted else None


def turn_summary(timings: Timings, id_slot: int) -> str:
    """One line of telemetry for a finished request, e.g. for the status line and the chat."""
    total = timings.cache_n + timings.prompt_n
    return (
        f"slot {id_slot} · {timings.cache_n:,}/{total:,} prompt tokens cached · "
        f"{timings.prompt_n:,} evaluated · {timings.predicted_per_second:.1f} tok/s"
    )
