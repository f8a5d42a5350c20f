"""Provides `LlamaClient`: the async HTTP client for one llama-server, with typed errors.

The endpoints llama-server answers (`/health`, `/props`, `/slots`, `/tokenize`, slot actions,
`/apply-template`, the two streams), each parsed into `types.py`. How a request is sent, retried,
bounded and turned into a typed error is its connection's (`transport.ServerHTTP`).

Streams are async generators: leaving them early (`aclose`, `break`, cancellation) closes the HTTP
response, and llama-server cancels the task when its connection goes away. Prefer
`async with contextlib.aclosing(client.stream_chat(...)) as events:` so the close is immediate.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from types import TracebackType
from typing import Any, Literal

import httpx

from fusion_tui.server.errors import ProtocolError
from fusion_tui.server.http.events import ChatDecoder, NativeDecoder
from fusion_tui.server.http.sse import DONE, MAX_LINE_BYTES
from fusion_tui.server.http.transport import DEFAULT_TIMEOUT, MAX_BODY_BYTES, ServerHTTP
from fusion_tui.server.types import Props, SlotState, StreamEvent

__all__ = ["DEFAULT_TIMEOUT", "MAX_BODY_BYTES", "LlamaClient", "SlotAction"]
"""`MAX_BODY_BYTES` and `DEFAULT_TIMEOUT` live in `transport`; callers import them from here."""

HEALTH_TIMEOUT = 5.0
SLOT_ACTION_TIMEOUT = 600.0
"""Saving or restoring a multi-GB slot can take a while; the server also queues it behind work."""

SlotAction = Literal["save", "restore", "erase"]


class LlamaClient:
    """Talks to one llama-server at `base_url` (managed or external), over its `http`."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_body_bytes: int = MAX_BODY_BYTES,
        max_line_bytes: int = MAX_LINE_BYTES,
    ) -> None:
        self.http = ServerHTTP(
            base_url, api_key, transport=transport, timeout=timeout,
            max_body_bytes=max_body_bytes, max_line_bytes=max_line_bytes,
        )  # fmt: skip

    @property
    def base_url(self) -> str:
        return self.http.base_url

    @property
    def timeout(self) -> float:
        return self.http.timeout

    async def aclose(self) -> None:
        await self.http.aclose()

    @property
    def is_closed(self) -> bool:
        """True once `aclose` ran (the app is done with this server)."""
        return self.http.is_closed

    def __repr__(self) -> str:
        return f"LlamaClient({self.base_url!r})"  # never the headers: they may hold a key

    async def __aenter__(self) -> LlamaClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- plain requests ------------------------------------------------------------------------

    async def health(self) -> str:
        """ "ok" when the model is loaded; `ServerLoading` while loading; `ServerUnreachable`."""
        await self.http.request_json("GET", "/health", timeout=min(self.timeout, HEALTH_TIMEOUT))
        return "ok"

    async def props(self) -> Props:
        return Props.from_json(await self.http.request_json("GET", "/props", timeout=self.timeout))

    async def slots(self, timeout: float = 3.0) -> list[SlotState]:
        """`GET /slots` (501 on a `--no-slots` server → `SlotsUnavailable`)."""
        data = await self.http.request_json("GET", "/slots", timeout=timeout)
        if not isinstance(data, list):
            raise ProtocolError("/slots did not answer a JSON list")
        return [SlotState.from_json(item) for item in data]

    async def tokenize(self, text: str, *, add_special: bool = False) -> list[int]:
        data = await self.http.request_json(
            "POST",
            "/tokenize",
            json_body={"content": text, "add_special": add_special},
            timeout=self.timeout,
        )
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) and 0 <= t < 1 << 31 for t in tokens
        ):
            raise ProtocolError("/tokenize did not answer a list of token ids")
        return tokens

    async def slot_action(
        self,
        slot_id: int,
        action: SlotAction,
        filename: str | None = None,
        *,
        timeout: float = SLOT_ACTION_TIMEOUT,
    ) -> dict[str, Any]:
        """`POST /slots/{id}?action=...`; save and restore need a bare `filename`.

        The server wraps out-of-range ids silently, so the id is checked here against nothing but
        sign; callers validate it against `total_slots`.
        """
        if action not in ("save", "restore", "erase"):
            raise ValueError(f"unknown slot action {action!r} (save, restore or erase)")
        if slot_id < 0:
            raise ValueError(f"slot id must be >= 0, got {slot_id}")
        body: dict[str, Any] = {}
        if action != "erase":
            if not filename:
                raise ValueError(f"slot {action} needs a file name")
            body["filename"] = filename
        data = await self.http.request_json(
            "POST", f"/slots/{slot_id}", params={"action": action}, json_body=body, timeout=timeout
        )
        if not isinstance(data, dict):
            raise ProtocolError(f"slot {action} did not answer a JSON object")
        return data

    # --- streams -------------------------------------------------------------------------------

    async def stream_completion(
        self,
        body: dict[str, Any],
        *,
        idle_timeout: float | None = None,
        first_byte_timeout: float | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream native `/completion`: `TextDelta`s, `PromptProgress` (with `return_progress`),
        then one `StreamEnd` with the slot, timings, stop type and cached tokens."""
        request = {**body, "stream": True}
        decoder = NativeDecoder()
        stream = self.http.stream("/completion", request, idle_timeout, first_byte_timeout)
        async with aclosing(stream) as payloads:
            async for payload in payloads:
                for event in decoder.decode(payload):
                    yield event
                if decoder.end is not None:
                    return
        raise ProtocolError("the /completion stream ended before its final event")

    async def stream_chat(
        self,
        body: dict[str, Any],
        *,
        idle_timeout: float | None = None,
        first_byte_timeout: float | None = None,
    ) -> AsyncGenerator[StreamEvent, None]:
        """Stream `/v1/chat/completions` with `verbose` on (so the final group says which slot
        served it); same events as `stream_completion`, `StreamEnd.finish_reason` set."""
        request = {**body, "stream": True, "verbose": True}
        decoder = ChatDecoder()
        path = "/v1/chat/completions"
        async with aclosing(
            self.http.stream(path, request, idle_timeout, first_byte_timeout)
        ) as payloads:
            async for payload in payloads:
                if payload == DONE:
                    break
                for event in decoder.decode(payload):
                    yield event
        if not decoder.complete:
            raise ProtocolError("the chat stream ended before its final event")
        yield decoder.finish()

    # --- templates (added for the agent's template-frame probe) ----------------------------------

    async def apply_template(self, messages: list[dict[str, Any]]) -> str:
        """`POST /apply-template`: the server renders `messages` with the model's chat template
        (generation prompt included) and answers `{"prompt": ...}`; nothing is generated."""
        data = await self.http.request_json(
            "POST", "/apply-template", json_body={"messages": messages}, timeout=self.timeout
        )
        prompt = data.get("prompt") if isinstance(data, dict) else None
        if not isinstance(prompt, str):
            raise ProtocolError("/apply-template did not answer a prompt string")
        return prompt
