"""A byte-for-byte TCP relay in front of a llama-server that notes when each request arrives.

A client run as a subprocess (aider) shows the bench nothing of its requests; through this relay
the bench sees when each one reached the server and reads the server's own `timings` from the
answer (`prompt_ms`: the time from the request to its first token), so the client's first token
can be placed on the same clock as its start: arrival + prompt time. The relay changes no byte in
either direction and adds one local hop (well under a millisecond).
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from dataclasses import dataclass, field

_REQUEST_START = (b"POST ", b"GET ")
_TIMING = re.compile(rb'"(prompt_n|cache_n|prompt_ms)":([0-9.]+)')


@dataclass
class Seen:
    """One request as the relay saw it: when it arrived (`time.monotonic`), its first line, and
    the answer's bytes (kept up to `KEEP` bytes from the end, where the timings are)."""

    arrived: float
    line: str
    answer: bytearray = field(default_factory=bytearray)

    KEEP = 65536

    def timings(self) -> dict[str, float]:
        """The last `prompt_n`, `cache_n` and `prompt_ms` in the answer (a streamed answer
        repeats them; the last are the final ones)."""
        found: dict[str, float] = {}
        for key, value in _TIMING.findall(bytes(self.answer)):
            found[key.decode()] = float(value)
        return found


class RecordingProxy:
    """`start()` listens on a free 127.0.0.1 port and relays to `target_port`; `seen` lists the
    requests in order of arrival; `stop()` closes it. Runs on a thread of its own so the bench's
    blocking code around it needs no event loop."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.url = ""
        self.seen: list[Seen] = []
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def start(self) -> str:
        self._thread.start()
        self._ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}"
        return self.url

    def stop(self) -> None:
        """Close the listener and every relayed connection, then the loop and its thread."""

        async def shut() -> None:
            if self._server is not None:
                self._server.close()
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def since(self, mark: int) -> list[Seen]:
        """The requests that arrived after `mark = len(proxy.seen)` was taken."""
        return self.seen[mark:]

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._relay, "127.0.0.1", 0)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _relay(self, down_r: asyncio.StreamReader, down_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            down_w.close()
            return
        current: list[Seen] = []  # the request this connection is answering

        async def upward() -> None:
            while chunk := await down_r.read(65536):
                if chunk.startswith(_REQUEST_START):
                    line = chunk.split(b"\r\n", 1)[0].decode(errors="replace")
                    seen = Seen(time.monotonic(), line)
                    self.seen.append(seen)
                    current[:] = [seen]
                up_w.write(chunk)
                await up_w.drain()
            up_w.close()

        async def downward() -> None:
            while chunk := await up_r.read(65536):
                if current:
                    answer = current[0].answer
                    answer += chunk
                    del answer[: max(0, len(answer) - Seen.KEEP)]
                down_w.write(chunk)
                await down_w.drain()
            down_w.close()

        try:
            await asyncio.gather(upward(), downward())
        except (ConnectionError, OSError):
            pass
        finally:
            for writer in (up_w, down_w):
                writer.close()
