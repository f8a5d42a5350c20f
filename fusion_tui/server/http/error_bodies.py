"""Provides the mapping from llama-server's error answers to the typed errors of `errors.py`.

The server always answers `{"error": {"code": int, "message": str, "type": str, ...}}`; a
context overflow adds `n_prompt_tokens` and `n_ctx`. Anything else (a proxy's HTML page, an empty
body) still becomes a `ServerHTTPError` with a short excerpt of the body as its message.
"""

from __future__ import annotations

import json
from typing import Any

from fusion_tui.server.errors import (
    ContextExceeded,
    ProtocolError,
    ServerError,
    ServerHTTPError,
    ServerLoading,
    SlotsUnavailable,
)
from fusion_tui.server.types import _int

CONTEXT_EXCEEDED = "exceed_context_size_error"


def error_from_object(err: Any, default_status: int) -> ServerError:
    """The typed error for one server error object (`{"code", "message", "type", ...}`)."""
    if not isinstance(err, dict):
        return ServerHTTPError(default_status, str(err)[:200] or "unknown error")
    status = err.get("code", default_status)
    if not isinstance(status, int) or isinstance(status, bool) or not 100 <= status <= 599:
        status = default_status
    message = str(err.get("message", "")) or "no message"
    kind = str(err.get("type", ""))
    if kind == CONTEXT_EXCEEDED:
        try:
            n_prompt = _int(err, "n_prompt_tokens")
            n_ctx = _int(err, "n_ctx")
        except ProtocolError:
            n_prompt, n_ctx = 0, 0
        return ContextExceeded(message, n_prompt, n_ctx, err)
    if status == 503 and message.lower().startswith("loading model"):
        return ServerLoading("llama-server is still loading the model")
    if status == 501:  # only the optional endpoints answer this: /slots, slot actions
        return SlotsUnavailable(status, message, err)
    return ServerHTTPError(status, message, err)


def error_from_body(status: int, body: bytes) -> ServerError:
    """The typed error for a non-2xx answer with raw `body`."""
    try:
        obj = json.loads(body.decode("utf-8", "replace")) if body else None
    except (ValueError, RecursionError):  # not JSON, or nested absurdly deep
        obj = None
    if isinstance(obj, dict) and isinstance(obj.get("error"), dict):
        return error_from_object(obj["error"], status)
    excerpt = body.decode("utf-8", "replace").strip().replace("\n", " ")[:200]
    if status == 503:
        return ServerLoading("llama-server answered 503 (still loading the model?)")
    return ServerHTTPError(status, excerpt or f"empty answer with status {status}")
