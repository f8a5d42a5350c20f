"""Replays recorded llama-server answers through `httpx.MockTransport` (test helper)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx

HERE = Path(__file__).resolve().parent


def recorded(name: str) -> tuple[dict[str, Any], bytes]:
    meta = json.loads((HERE / f"{name}.meta.json").read_text())
    return meta, (HERE / f"{name}.body").read_bytes()


class ChunkStream(httpx.AsyncByteStream):
    """A response body sent in small pieces; can stall, break, and records being closed."""

    def __init__(
        self,
        body: bytes,
        chunk: int = 7,
        *,
        stall_after: int | None = None,
        break_after: int | None = None,
    ) -> None:
        self.body = body
        self.chunk = chunk
        self.stall_after = stall_after
        self.break_after = break_after
        self.sent = 0
        self.closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for start in range(0, len(self.body), self.chunk):
            if self.break_after is not None and start >= self.break_after:
                raise httpx.RemoteProtocolError("peer closed connection mid-body")
            if self.stall_after is not None and start >= self.stall_after:
                await anyio.sleep_forever()
            piece = self.body[start : start + self.chunk]
            self.sent += len(piece)
            yield piece
            await anyio.sleep(0)

    async def aclose(self) -> None:
        self.closed = True


class Replay:
    """A transport that answers with recorded bodies; counts calls and keeps the last request."""

    def __init__(self, name: str, **stream_args: Any) -> None:
        self.meta, self.body = recorded(name)
        self.stream_args = stream_args
        self.calls = 0
        self.requests: list[httpx.Request] = []
        self.streams: list[ChunkStream] = []
        self.transport = httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        self.requests.append(request)
        stream = ChunkStream(self.body, **self.stream_args)
        self.streams.append(stream)
        return httpx.Response(
            self.meta["status"],
            headers={"content-type": self.meta["content_type"]},
            stream=stream,
        )

    def last_json(self) -> Any:
        return json.loads(self.requests[-1].content)
