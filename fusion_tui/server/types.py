"""Provides the typed views of what llama-server answers: props, slots, timings, stream events.

Parsing is defensive (the server's README examples are stale for this build, and fields come and
go between versions): every `from_json` tolerates missing optional fields and raises
`ProtocolError` only when the answer is unusable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from fusion_tui.server.errors import ProtocolError

MAX_SANE_INT = 1 << 40  # counts above this are a broken or hostile answer, not a real server


def _int(obj: dict[str, Any], key: str, default: int = 0) -> int:
    value = obj.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProtocolError(f"field {key!r} should be a number, got {type(value).__name__}")
    if isinstance(value, float) and value != value:  # NaN
        raise ProtocolError(f"field {key!r} is NaN")
    if abs(value) > MAX_SANE_INT:
        raise ProtocolError(f"field {key!r} has an absurd value {value}")
    return int(value)


def _count(obj: dict[str, Any], key: str, default: int = 0, minimum: int = 0) -> int:
    """A count or size: an `_int` that is never below `minimum` (negative sizes are absurd)."""
    value = _int(obj, key, default)
    if value < minimum:
        raise ProtocolError(f"field {key!r} has an absurd value {value}")
    return value


def _float(obj: dict[str, Any], key: str, default: float = 0.0) -> float:
    value = obj.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ProtocolError(f"field {key!r} should be a number, got {type(value).__name__}")
    if not math.isfinite(value):  # NaN or infinity would poison telemetry and session files
        raise ProtocolError(f"field {key!r} is not a finite number: {value}")
    return float(value)


@dataclass(frozen=True)
class Props:
    """What `/props` tells about the running server."""

    total_slots: int
    model_path: str
    n_ctx: int
    """Per-slot context (`default_generation_settings.n_ctx`)."""
    build_info: str = ""
    model_alias: str = ""

    @classmethod
    def from_json(cls, data: Any) -> Props:
        if not isinstance(data, dict):
            raise ProtocolError("/props did not answer a JSON object")
        settings = data.get("default_generation_settings") or {}
        if not isinstance(settings, dict):
            raise ProtocolError("/props default_generation_settings is not an object")
        total = _int(data, "total_slots", 1)
        if total < 1 or total > 4096:
            raise ProtocolError(f"/props total_slots is out of range: {total}")
        return cls(
            total_slots=total,
            model_path=str(data.get("model_path", "")),
            n_ctx=_count(settings, "n_ctx", 0),
            build_info=str(data.get("build_info", "")),
            model_alias=str(data.get("model_alias", "")),
        )


@dataclass(frozen=True)
class SlotState:
    """One entry of `GET /slots`."""

    id: int
    n_ctx: int
    is_processing: bool
    id_task: int = -1
    n_prompt_tokens: int = 0
    """Tokens held in the slot's cache (prompt plus generated)."""
    n_prompt_tokens_processed: int = 0
    n_prompt_tokens_cache: int = 0
    n_decoded: int = 0
    n_remain: int = -1

    @classmethod
    def from_json(cls, data: Any) -> SlotState:
        if not isinstance(data, dict):
            raise ProtocolError("a /slots entry is not an object")
        nxt = data.get("next_token") or {}
        if isinstance(nxt, list):  # this build: a one-element list; older: an object
            nxt = nxt[0] if nxt else {}
        if not isinstance(nxt, dict):
            raise ProtocolError("a /slots entry has a malformed next_token")
        return cls(
            id=_count(data, "id", -1, minimum=-1 if "id" not in data else 0),
            n_ctx=_count(data, "n_ctx"),
            is_processing=bool(data.get("is_processing", False)),
            id_task=_count(data, "id_task", -1, minimum=-1),
            n_prompt_tokens=_count(data, "n_prompt_tokens"),
            n_prompt_tokens_processed=_count(data, "n_prompt_tokens_processed"),
            n_prompt_tokens_cache=_count(data, "n_prompt_tokens_cache"),
            n_decoded=_count(nxt, "n_decoded"),
            n_remain=_count(nxt, "n_remain", -1, minimum=-1),
        )


@dataclass(frozen=True)
class Timings:
    """The server's own measurements of one request (`timings` on the final event)."""

    prompt_n: int = 0
    """Prompt tokens evaluated by this request."""
    cache_n: int = 0
    """Prompt tokens reused from the slot's cache."""
    prompt_ms: float = 0.0
    prompt_per_second: float = 0.0
    predicted_n: int = 0
    predicted_ms: float = 0.0
    predicted_per_second: float = 0.0
    draft_n: int = 0
    """Tokens drafted by speculative decoding for this request (0 when it is off)."""
    draft_n_accepted: int = 0
    """Of those, the ones the model accepted."""

    @classmethod
    def from_json(cls, data: Any) -> Timings:
        if not isinstance(data, dict):
            raise ProtocolError("timings is not an object")
        return cls(
            prompt_n=_int(data, "prompt_n"),
            cache_n=_int(data, "cache_n"),
            prompt_ms=_float(data, "prompt_ms"),
            prompt_per_second=_float(data, "prompt_per_second"),
            predicted_n=_int(data, "predicted_n"),
            predicted_ms=_float(data, "predicted_ms"),
            predicted_per_second=_float(data, "predicted_per_second"),
            draft_n=_int(data, "draft_n"),
            draft_n_accepted=_int(data, "draft_n_accepted"),
        )


# --- stream events -------------------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    """A piece of generated text; `tokens`, how many tokens it is when the server says (the
    native stream's `tokens_predicted` step; None on the chat endpoint)."""

    text: str
    tokens: int | None = None


@dataclass(frozen=True)
class PromptProgress:
    """`return_progress`: how far the server is through the prompt."""

    total: int
    cache: int
    processed: int
    time_ms: float


@dataclass(frozen=True)
class StreamEnd:
    """The final event of a stream: the slot that served it and the server's timings."""

    id_slot: int
    timings: Timings
    stop_type: str = ""
    truncated: bool = False
    tokens_cached: int = 0
    finish_reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


StreamEvent = TextDelta | PromptProgress | StreamEnd
