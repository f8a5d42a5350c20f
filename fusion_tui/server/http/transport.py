"""Provides `ServerHTTP`: one llama-server's HTTP connection, bounded and with typed errors.

One `httpx.AsyncClient` per server (keep-alive, proxies from the environment ignored: the server
is on loopback or a configured URL). Every request goes through `_send`, which owns two rules:

* llama-server closes idle keep-alive connections, so a pooled connection can die just as we
  reuse it ("server disconnected without sending a response"). A request that fails before ANY
  response byte arrived is retried once; the dead connection has been dropped from the pool, so the
  retry gets a fresh one. Once the status line arrived we never retry: the server saw the request.
* Errors are typed (`errors.py`): nothing answers → `ServerUnreachable`; 503 while loading →
  `ServerLoading`; any other non-2xx → `ServerHTTPError` (or `ContextExceeded`, `SlotsUnavailable`)
  with the server's error object; unparseable answers → `ProtocolError`.
* A server may be remote and hostile, so every answer is bounded: a JSON body is read up to
  `max_body_bytes` within its request's timeout as a whole (`ResponseTooLarge`,
  `ResponseTooSlow`), an event-stream line or event up to `max_line_bytes`, and a stream that
  sends bytes but no complete line for `idle_timeout` is stalled (a drip keeps no stream alive).
  Redirects are never followed: a key goes only to the URL it was configured for.

`client.LlamaClient` holds one and builds the llama-server endpoints on it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import anyio
import httpx

from fusion_tui.server.errors import (
    ProtocolError,
    ResponseTooLarge,
    ResponseTooSlow,
    ServerUnreachable,
    StreamStalled,
)
from fusion_tui.server.http.error_bodies import error_from_body
from fusion_tui.server.http.sse import MAX_LINE_BYTES, SSEParser

DEFAULT_TIMEOUT = 30.0
MAX_BODY_BYTES = 16 * 1024 * 1024
"""Cap on a JSON answer (a 4,096-slot `/slots` is about 8 MiB); more is a broken server."""

_RETRYABLE = (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
"""Transport failures that, raised before the status line, mean the request was not answered."""


class ServerHTTP:
    """The HTTP connection to one server at `base_url`: send, read, stream, all bounded."""

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
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_body_bytes = max_body_bytes
        self.max_line_bytes = max_line_bytes
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            transport=transport,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            trust_env=False,
            follow_redirects=False,  # the key goes to this URL only
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    @property
    def is_closed(self) -> bool:
        """True once `aclose` ran (the app is done with this server)."""
        return self._http.is_closed

    # --- streams -----------------------------------------------------------------------------

    async def stream(
        self,
        path: str,
        body: dict[str, Any],
        idle_timeout: float | None,
        first_byte_timeout: float | None,
    ) -> AsyncGenerator[str, None]:
        """SSE payloads of one streaming POST; the response is closed however this generator
        ends (exhausted, error, `aclose`, cancellation)."""
        response = await self._send(
            "POST", path, json_body=body, timeout=None, first_byte_timeout=first_byte_timeout
        )
        try:
            if response.status_code >= 300:
                raise error_from_body(
                    response.status_code, await self._read(response, self.timeout)
                )
            parser = SSEParser(self.max_line_bytes)
            chunks = response.aiter_bytes().__aiter__()
            last_line = anyio.current_time()
            lines = 0
            dripped = False  # bytes arrived since the last whole line
            while not parser.done:
                budget = None
                if idle_timeout is not None:
                    budget = max(0.0, idle_timeout - (anyio.current_time() - last_line))
                chunk = await self._next_chunk(chunks, budget, idle_timeout, dripped)
                if chunk is None:
                    for payload in parser.close():
                        yield payload
                    return
                for payload in parser.feed(chunk):
                    yield payload
                dripped = True
                if parser.lines != lines:
                    lines, last_line, dripped = parser.lines, anyio.current_time(), False
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()

    async def _next_chunk(
        self,
        chunks: AsyncIterator[bytes],
        budget: float | None,
        idle_timeout: float | None,
        dripped: bool = False,
    ) -> bytes | None:
        """The next chunk within `budget` s (the idle budget left since the last whole line)."""
        try:
            if budget is None:
                return await chunks.__anext__()
            with anyio.fail_after(budget):
                return await chunks.__anext__()
        except StopAsyncIteration:
            return None
        except TimeoutError:
            if dripped:
                raise StreamStalled(
                    f"llama-server sent nothing for {idle_timeout:g} s in the middle of an answer "
                    f"but part of a line (a drip, not an answer; {self.base_url})"
                ) from None
            raise StreamStalled(
                f"llama-server sent nothing for {idle_timeout:g} s in the middle of an answer"
            ) from None
        except httpx.HTTPError as exc:
            raise ServerUnreachable(
                f"the connection to llama-server at {self.base_url} broke mid-answer: "
                f"{_describe(exc)}"
            ) from None

    # --- transport -----------------------------------------------------------------------------

    async def request_json(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json_body: dict[str, Any] | None = None,
        timeout: float | None,
    ) -> Any:
        response = await self._send(
            method, path, params=params, json_body=json_body, timeout=timeout
        )
        try:
            raw = await self._read(response, timeout)
        finally:
            with anyio.CancelScope(shield=True):
                await response.aclose()
        if response.status_code >= 300:
            raise error_from_body(response.status_code, raw)
        try:
            return json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: JSON nested absurdly deep
            excerpt = raw[:80].decode("utf-8", "replace")
            raise ProtocolError(f"{path} did not answer JSON: {excerpt!r}") from None

    async def _read(self, response: httpx.Response, deadline: float | None) -> bytes:
        """The whole body, at most `max_body_bytes`, within `deadline` s in total."""
        path = response.request.url.path
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise ResponseTooLarge(
                f"llama-server at {self.base_url} announced a {int(declared):,}-byte answer to "
                f"{path} (the cap is {self.max_body_bytes:,}); not read"
            )
        body = bytearray()
        try:
            with anyio.fail_after(deadline):
                async for chunk in response.aiter_bytes():
                    body += chunk
                    if len(body) > self.max_body_bytes:
                        raise ResponseTooLarge(
                            f"llama-server at {self.base_url} sent more than "
                            f"{self.max_body_bytes:,} bytes for {path}; stopped reading"
                        )
            return bytes(body)
        except TimeoutError:
            raise ResponseTooSlow(
                f"llama-server at {self.base_url} did not finish its answer to {path} within "
                f"{deadline:g} s ({len(body):,} bytes arrived)"
            ) from None
        except httpx.TimeoutException:
            raise ServerUnreachable(
                f"llama-server at {self.base_url} stopped answering {response.request.url.path}"
            ) from None
        except httpx.HTTPError as exc:
            raise ServerUnreachable(
                f"the connection to llama-server at {self.base_url} broke while reading "
                f"{response.request.url.path}: {_describe(exc)}"
            ) from None

    async def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        json_body: dict[str, Any] | None = None,
        timeout: float | None,
        first_byte_timeout: float | None = None,
    ) -> httpx.Response:
        """Send and wait for the status line; retry once if the request died before it.

        `timeout` bounds each read (None: unbounded, for streams, which watch their own time).
        """
        connect = min(self.timeout, 10.0)
        http_timeout = httpx.Timeout(timeout, connect=connect)
        for attempt in (1, 2):
            request = self._http.build_request(
                method, path, params=params, json=json_body, timeout=http_timeout
            )
            try:
                if first_byte_timeout is None:
                    return await self._http.send(request, stream=True)
                with anyio.fail_after(first_byte_timeout):
                    return await self._http.send(request, stream=True)
            except TimeoutError:
                raise StreamStalled(
                    f"llama-server did not start answering {path} within {first_byte_timeout:g} s"
                ) from None
            except _RETRYABLE as exc:
                if attempt == 1:
                    continue
                raise ServerUnreachable(
                    f"cannot reach llama-server at {self.base_url}: {_describe(exc)}"
                ) from None
            except httpx.TimeoutException as exc:
                raise ServerUnreachable(
                    f"llama-server at {self.base_url} did not answer {path} in time "
                    f"({_describe(exc)})"
                ) from None
            except httpx.HTTPError as exc:
                raise ServerUnreachable(
                    f"cannot reach llama-server at {self.base_url}: {_describe(exc)}"
                ) from None
        raise AssertionError("unreachable")


def _describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
