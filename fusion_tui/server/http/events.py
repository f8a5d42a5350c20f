"""Provides the decoders that turn llama-server's SSE payloads into typed stream events.

Two shapes share one event vocabulary (`TextDelta`, `PromptProgress`, `StreamEnd`):

* native `/completion`: every chunk has `content`; the last one has `stop: true` and carries the
  real `id_slot`, `timings`, `stop_type`, `truncated`, `tokens_cached` (partials say `id_slot: -1`).
  There is no `[DONE]`.
* OAI `/v1/chat/completions`: `choices[0].delta.content`; the final group carries
  `finish_reason`, `__verbose` (the native final object, when the request set `verbose`) and
  `timings` (on its last event); `[DONE]` ends it.

An error after the stream started arrives as `data: {"error": {...}}` and is raised as the same
typed error a plain HTTP error would be.
"""

from __future__ import annotations

import json
from typing import Any

from fusion_tui.server.errors import ProtocolError
from fusion_tui.server.http.error_bodies import error_from_object
from fusion_tui.server.types import (
    PromptProgress,
    StreamEnd,
    StreamEvent,
    TextDelta,
    Timings,
    _count,
    _float,
    _int,
)


def load_payload(payload: str) -> dict[str, Any]:
    """One SSE payload as a JSON object, or `ProtocolError`; server errors are raised typed."""
    try:
        obj = json.loads(payload)
    except ValueError as exc:
        raise ProtocolError(f"the server sent an event that is not JSON: {exc}") from None
    except RecursionError:
        raise ProtocolError("the server sent an event nested too deeply to be real") from None
    if not isinstance(obj, dict):
        raise ProtocolError(f"the server sent an event that is not a JSON object: {payload[:80]}")
    if "error" in obj:
        raise error_from_object(obj["error"], default_status=500)
    return obj


def progress_of(obj: dict[str, Any]) -> PromptProgress | None:
    raw = obj.get("prompt_progress")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ProtocolError("prompt_progress is not an object")
    progress = PromptProgress(
        total=_int(raw, "total"),
        cache=_int(raw, "cache"),
        processed=_int(raw, "processed"),
        time_ms=_float(raw, "time_ms"),
    )
    if min(progress.total, progress.cache, progress.processed) < 0:
        raise ProtocolError(f"prompt_progress has a negative count: {raw}")
    return progress


def _timings(obj: dict[str, Any]) -> Timings:
    raw = obj.get("timings")
    if raw is None:
        return Timings()
    timings = Timings.from_json(raw)
    if min(timings.prompt_n, timings.cache_n, timings.predicted_n) < 0:
        raise ProtocolError(f"timings has a negative count: {raw}")
    return timings


def _id_slot(obj: dict[str, Any]) -> int:
    slot = _int(obj, "id_slot", -1)
    if slot < -1 or slot > 65535:
        raise ProtocolError(f"id_slot is out of range: {slot}")
    return slot


class NativeDecoder:
    """Decodes `/completion` payloads; `end` is set once the final (`stop: true`) chunk arrived."""

    def __init__(self) -> None:
        self.end: StreamEnd | None = None
        self._predicted = 0
        """`tokens_predicted` of the last piece: a piece's tokens are the difference (its
        `tokens` list holds only the last one when the server held text back, e.g. an
        incomplete UTF-8 sequence)."""

    def _piece_tokens(self, obj: dict[str, Any]) -> int | None:
        predicted = obj.get("tokens_predicted")
        if not isinstance(predicted, int) or isinstance(predicted, bool):
            return None
        tokens, self._predicted = predicted - self._predicted, predicted
        return tokens if tokens > 0 else None

    def decode(self, payload: str) -> list[StreamEvent]:
        if self.end is not None:
            return []  # nothing follows the final chunk on this endpoint
        obj = load_payload(payload)
        events: list[StreamEvent] = []
        progress = progress_of(obj)
        if progress is not None:
            events.append(progress)
        content = obj.get("content", "")
        if not isinstance(content, str):
            raise ProtocolError("a /completion chunk has a non-string content")
        if content:
            events.append(TextDelta(content, self._piece_tokens(obj)))
        if obj.get("stop") is True:
            self.end = StreamEnd(
                id_slot=_id_slot(obj),
                timings=_timings(obj),
                stop_type=str(obj.get("stop_type", "")),
                truncated=bool(obj.get("truncated", False)),
                tokens_cached=_count(obj, "tokens_cached"),
                extra={
                    k: obj[k]
                    for k in ("tokens_predicted", "tokens_evaluated", "stopping_word", "model")
                    if k in obj
                },
            )
            events.append(self.end)
        return events


class ChatDecoder:
    """Decodes `/v1/chat/completions` payloads; call `finish()` at `[DONE]` (or end of body)."""

    def __init__(self) -> None:
        self.finish_reason = ""
        self.verbose: dict[str, Any] = {}
        self.timings: Timings | None = None
        self.usage: dict[str, Any] | None = None
        self.end: StreamEnd | None = None

    def decode(self, payload: str) -> list[StreamEvent]:
        obj = load_payload(payload)
        events: list[StreamEvent] = []
        progress = progress_of(obj)
        if progress is not None:
            events.append(progress)
        choices = obj.get("choices") or []
        if not isinstance(choices, list):
            raise ProtocolError("a chat chunk has a non-list choices")
        for choice in choices[:1]:
            if not isinstance(choice, dict):
                raise ProtocolError("a chat chunk has a malformed choice")
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise ProtocolError("a chat chunk has a malformed delta")
            content = delta.get("content")
            if content is not None and not isinstance(content, str):
                raise ProtocolError("a chat chunk has a non-string content")
            if content:
                events.append(TextDelta(content))
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = reason
        verbose = obj.get("__verbose")
        if isinstance(verbose, dict):
            self.verbose = verbose
        if "timings" in obj:
            self.timings = _timings(obj)
        if isinstance(obj.get("usage"), dict):
            self.usage = obj["usage"]
        return events

    @property
    def complete(self) -> bool:
        """The final group arrived (a finish reason was seen)."""
        return bool(self.finish_reason)

    def finish(self) -> StreamEnd:
        v = self.verbose
        timings = self.timings if self.timings is not None else _timings(v)
        extra: dict[str, Any] = {}
        if self.usage is not None:
            extra["usage"] = self.usage
        self.end = StreamEnd(
            id_slot=_id_slot(v),
            timings=timings,
            stop_type=str(v.get("stop_type", "")),
            truncated=bool(v.get("truncated", False)),
            tokens_cached=_count(v, "tokens_cached"),
            finish_reason=self.finish_reason,
            extra=extra,
        )
        return self.end
