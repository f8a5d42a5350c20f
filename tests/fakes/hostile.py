"""Hostile answers for the fake llama-server: what an untrusted remote server could send.

Set `FakeLlamaServer.hostile = Hostile(kind, paths)`; matching requests get the hostile answer
and the connection is closed afterwards. Kinds:
- `huge_body`: 200 JSON with no Content-Length, zeros streamed until the client hangs up;
- `huge_declared`: a Content-Length of 1 TiB (then nothing);
- `endless_line`: an event stream whose one `data:` line never ends;
- `endless_event`: an event stream of short `data:` lines that never end the event;
- `drip`: a valid answer one byte every `drip_s` seconds;
- `drip_stream`: an event stream's bytes one at a time, never finishing a line;
- `redirect`: 302 to `location` (a key must never follow it).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

CHUNK = b"0" * 65536


@dataclass
class Hostile:
    kind: str
    paths: tuple[str, ...] = ("/props",)
    drip_s: float = 0.2
    location: str = ""

    def matches(self, path: str) -> bool:
        return path in self.paths

    async def serve(self, writer: asyncio.StreamWriter) -> None:
        try:
            await getattr(self, f"_{self.kind}")(writer)
        except (ConnectionError, asyncio.CancelledError):
            pass

    async def _head(self, writer: asyncio.StreamWriter, extra: str) -> None:
        writer.write(f"HTTP/1.1 200 OK\r\n{extra}Connection: close\r\n\r\n".encode())
        await writer.drain()

    async def _huge_body(self, writer: asyncio.StreamWriter) -> None:
        await self._head(writer, "Content-Type: application/json\r\n")
        writer.write(b"[")
        while True:
            writer.write(CHUNK)
            await writer.drain()

    async def _huge_declared(self, writer: asyncio.StreamWriter) -> None:
        await self._head(writer, f"Content-Type: application/json\r\nContent-Length: {1 << 40}\r\n")
        await asyncio.sleep(30)

    async def _endless_line(self, writer: asyncio.StreamWriter) -> None:
        await self._head(writer, "Content-Type: text/event-stream\r\n")
        writer.write(b'data: {"content": "')
        while True:
            writer.write(CHUNK)
            await writer.drain()

    async def _endless_event(self, writer: asyncio.StreamWriter) -> None:
        await self._head(writer, "Content-Type: text/event-stream\r\n")
        line = b"data: " + b"x" * 1000 + b"\n"
        while True:
            writer.write(line * 64)
            await writer.drain()

    async def _drip(self, writer: asyncio.StreamWriter) -> None:
        body = b'{"total_slots": 1, "model_path": "/m.gguf", "default_generation_settings": {}}'
        await self._head(
            writer, f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        )
        for i in range(len(body)):
            writer.write(body[i : i + 1])
            await writer.drain()
            await asyncio.sleep(self.drip_s)

    async def _drip_stream(self, writer: asyncio.StreamWriter) -> None:
        await self._head(writer, "Content-Type: text/event-stream\r\n")
        while True:
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(self.drip_s)

    async def _redirect(self, writer: asyncio.StreamWriter) -> None:
        writer.write(
            f"HTTP/1.1 302 Found\r\nLocation: {self.location}\r\nContent-Length: 0\r\n"
            "Connection: close\r\n\r\n".encode()
        )
        await writer.drain()
