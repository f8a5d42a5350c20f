"""Provides the prompt-progress tracker: processed / total, tokens per second and an ETA.

Two sources, same numbers. `return_progress` events carry `total`, `cache`, `processed` and
`time_ms`, where `processed` counts the tokens in the slot so far, cached ones included, and
`time_ms` runs from the start of prompt processing (llama-server `send_partial_response`).
`/slots` carries `n_prompt_tokens_cache` and `n_prompt_tokens_processed` (newly evaluated only)
but no total, so the caller passes the prompt length it knows, and the rate comes from successive
polls.
"""

from __future__ import annotations

from dataclasses import dataclass

from fusion_tui.server.types import PromptProgress, SlotState


@dataclass(frozen=True)
class Progress:
    """How far the server is through a prompt: the one progress event, from the tracker below
    to the chat's events and the TUI's bar."""

    processed: int
    """Prompt tokens in the slot so far (reused from cache plus evaluated)."""
    total: int
    """Prompt length, 0 when unknown."""
    cache: int
    tokens_per_second: float | None = None
    """Evaluation rate of the new (uncached) tokens, None until it can be measured."""
    eta_s: float | None = None

    @property
    def fraction(self) -> float | None:
        if self.total <= 0:
            return None
        return min(1.0, self.processed / self.total)

    @property
    def evaluated(self) -> int:
        return max(0, self.processed - self.cache)

    @property
    def remaining(self) -> int | None:
        return None if self.total <= 0 else max(0, self.total - self.processed)

    def label(self) -> str:
        """One line for a status bar, e.g. `12,000 / 40,000 tokens · 310 tok/s · ETA 1:30`."""
        parts = [
            f"{self.processed:,} / {self.total:,} tokens"
            if self.total
            else f"{self.processed:,} tokens"
        ]
        if self.tokens_per_second:
            parts.append(f"{self.tokens_per_second:,.0f} tok/s")
        if self.eta_s is not None:
            minutes, seconds = divmod(round(self.eta_s), 60)
            parts.append(f"ETA {minutes}:{seconds:02d}")
        return " · ".join(parts)


def _eta(total: int, processed: int, rate: float | None) -> float | None:
    if not rate or total <= 0:
        return None
    return max(0, total - processed) / rate


class ProgressTracker:
    """Turns progress events or `/slots` entries of one request into `Progress`."""

    def __init__(self, total: int = 0) -> None:
        self.total = total
        self._first: tuple[float, int] | None = None
        self._task: int | None = None
        self.last: Progress | None = None

    def on_event(self, event: PromptProgress) -> Progress:
        total = event.total or self.total
        self.total = total
        new = event.processed - event.cache
        rate = new / (event.time_ms / 1000.0) if event.time_ms > 0 and new > 0 else None
        self.last = Progress(
            event.processed, total, event.cache, rate, _eta(total, event.processed, rate)
        )
        return self.last

    def on_slot(self, state: SlotState, now: float, total: int | None = None) -> Progress:
        """Progress from a `/slots` entry observed at `now` (seconds, any monotonic clock)."""
        if total:
            self.total = total
        if self._task != state.id_task:
            self._task = state.id_task
            self._first = None
        processed = state.n_prompt_tokens_cache + state.n_prompt_tokens_processed
        rate: float | None = None
        if self._first is None:
            self._first = (now, processed)
        else:
            t0, p0 = self._first
            if now > t0 and processed > p0:
                rate = (processed - p0) / (now - t0)
        self.last = Progress(
            processed,
            self.total,
            state.n_prompt_tokens_cache,
            rate,
            _eta(self.total, processed, rate),
        )
        return self.last
