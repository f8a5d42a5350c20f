"""A scriptable fake llama-server on real HTTP (127.0.0.1, free port, its own thread).

For what a real server cannot produce on demand: exact delays, stalls, hangs, disconnects, 503
while loading, `/slots` switched off or hanging. Wire formats follow the reference (§1-§4).

    with FakeLlamaServer(total_slots=4, n_ctx=4096) as srv:
        srv.script(Reply(text=["Hel", "lo"], prompt_seconds=0.2, progress_steps=4))
        ... httpx against srv.url ...
        srv.requests[-1].body["id_slot"]     # what the client sent
        srv.requests[-1].slot                # the slot that served it

Endpoints: `GET /health`, `GET /props`, `GET /slots` (`?fail_on_no_slot=1`), `POST /completion`
(alias `/completions`; `stream`, `return_progress`, `id_slot`, `cache_prompt`; prompt is a
string or a token list; tokens are characters), `POST /tokenize` (`{"content"}`), `POST
/apply-template` (ChatML), `POST
/slots/{id}?action=save|restore|erase` (kept in memory). Anything else: 404.

Knobs (plain attributes, set them from the test thread at any time):
- `loading`: every path answers 503 "Loading model".
- `slots_enabled`: False → `/slots` answers 501. `slot_actions_enabled`: False → 501 on actions.
- `slots_delay` (s) before `/slots` answers; `slots_hang`: `/slots` waits until `release()`.
- `default_reply`: used when the script queue is empty.
- `refuse_over_ctx`: True → a prompt of `n_ctx` tokens or more is refused with 400
  `exceed_context_size_error` (`n_prompt_tokens`, `n_ctx`), as the real server does; the
  scripted reply stays queued.

`Reply` (one per completion request, FIFO via `script()`): `text` chunks; `status` + `error` for
an HTTP error instead; `queue_seconds` before a slot is taken (no headers, slot idle);
`prompt_seconds` over `progress_steps` steps (slot processing, progress moving); `chunk_delay`;
`hang` = "queued" (no slot, no headers) | "prompt" (slot processing, nothing moving) |
"first_token" (prompt done) | "mid_stream" (after the first chunk), each until `release()` or
the client disconnects; `disconnect_after` = close the socket after N text chunks; `id_slot`,
`prompt_n`, `cache_n` override what the final event reports. A request with `n_predict: 0` reads
its prompt into the slot and generates nothing (stop type `limit`), as the real server does; it
takes no scripted reply.

A client disconnect cancels the task and frees the slot, as on the real server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.fakes.fake_slots import (
    FakeSlot,
    SlotTable,
    common_prefix,
    detokenize,
    error,
    tokenize,
)
from tests.fakes.hostile import Hostile


@dataclass
class Reply:
    text: list[str] = field(default_factory=lambda: ["Hello", " from", " the", " fake."])
    status: int = 200
    error: dict[str, Any] | None = None
    queue_seconds: float = 0.0
    prompt_seconds: float = 0.0
    progress_steps: int = 4
    chunk_delay: float = 0.0
    hang: str | None = None
    disconnect_after: int | None = None
    then_die: bool = False
    """With `disconnect_after`: the server goes away with the connection (killed mid-answer):
    it stops listening and drops every later request."""
    id_slot: int | None = None
    prompt_n: int | None = None
    cache_n: int | None = None
    stop_type: str = "eos"


@dataclass
class RecordedRequest:
    method: str
    path: str
    body: Any
    slot: int | None = None
    """Slot that served a completion (None when it never got one)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Request headers, lower-case names (to check where a key was sent)."""


def chatml(messages: list[dict[str, Any]]) -> str:
    """`/apply-template`: the messages in ChatML, with the generation prompt (SmolLM2's shape)."""
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


class _Disconnected(Exception):
    pass


class FakeLlamaServer:
    def __init__(
        self,
        total_slots: int = 4,
        n_ctx: int = 4096,
        model_path: str = "/models/fake.gguf",
        build_info: str = "b11434-fake",
        bind_port: int = 0,
    ) -> None:
        self.bind_port = bind_port
        """0 = any free port; else this one (as a real server's `--port`)."""
        self.total_slots = total_slots
        self.n_ctx = n_ctx
        self.model_path = model_path
        self.build_info = build_info
        self.loading = False
        self.slots_enabled = True
        self.slot_actions_enabled = True
        self.slots_delay = 0.0
        self.slots_hang = False
        self.default_reply = Reply()
        self.refuse_over_ctx = False
        self.hostile: Hostile | None = None
        self.dead = False
        """Gone after a `Reply(then_die=True)`: nothing answers any more."""
        """A hostile answer for some paths (tests/fakes/hostile.py)."""
        self.requests: list[RecordedRequest] = []
        self.saved: dict[str, list[int]] = {}
        self._queue: list[Reply] = []
        self._table = SlotTable(total_slots, n_ctx)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.base_events.Server | None = None
        self._released: asyncio.Event | None = None
        self._changed: asyncio.Condition | None = None
        self.port = 0
        self._headers: dict[str, str] = {}

    # --- control (test thread) ---------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, *replies: Reply) -> None:
        self._queue.extend(replies)

    def completions(self, *, read_aheads: bool = False) -> list[RecordedRequest]:
        """The completion requests in order; without the chat's read-aheads (`n_predict: 0`,
        the next turn's opening read into the slot after an answer) unless asked for."""
        return [
            r for r in self.requests
            if r.path.startswith("/completion")
            and (read_aheads or not isinstance(r.body, dict) or r.body.get("n_predict") != 0)
        ]  # fmt: skip

    def release(self) -> None:
        """End every current hang (queued, prompt, first token, mid-stream, `/slots`)."""
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._do_release)

    def slot_json(self) -> list[dict[str, Any]]:
        return self._table.to_json()

    def start(self) -> FakeLlamaServer:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("fake llama-server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None

    def __enter__(self) -> FakeLlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- loop --------------------------------------------------------------------------------

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._released = asyncio.Event()
        self._changed = asyncio.Condition()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.bind_port))
        self.port = sock.getsockname()[1]
        self._server = loop.run_until_complete(asyncio.start_server(self._client, sock=sock))
        ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    def _do_release(self) -> None:
        assert self._released is not None
        self._released.set()
        self._released = asyncio.Event()

    async def _hang(self, gone: asyncio.Event) -> None:
        assert self._released is not None
        released = asyncio.ensure_future(self._released.wait())
        lost = asyncio.ensure_future(gone.wait())
        await asyncio.wait({released, lost}, return_when=asyncio.FIRST_COMPLETED)
        released.cancel()
        lost.cancel()
        if gone.is_set():
            raise _Disconnected

    async def _notify(self) -> None:
        assert self._changed is not None
        async with self._changed:
            self._changed.notify_all()

    # --- HTTP --------------------------------------------------------------------------------

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip()
                    for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)
                }
                raw = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                self._headers = headers
                if not await self._dispatch(method, target, raw, reader, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError, _Disconnected, ValueError):
            pass
        finally:
            writer.close()

    async def _send_json(
        self, writer: asyncio.StreamWriter, status: int, obj: Any, close: bool = False
    ) -> None:
        body = json.dumps(obj).encode()
        conn = "Connection: close\r\n" if close else ""
        writer.write(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n{conn}"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        await writer.drain()

    async def _dispatch(
        self,
        method: str,
        target: str,
        raw: bytes,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Answer one request; False closes the connection (after every completion, so the
        disconnect watch never reads into a next request)."""
        parts = urlsplit(target)
        path, query = parts.path, parse_qs(parts.query)
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                await self._send_json(writer, *error(400, "invalid JSON", "invalid_request_error"))
                return True
        if self.dead:  # killed (`Reply.then_die`): a kept-alive connection is dropped too
            writer.transport.abort()
            return False
        record = RecordedRequest(method, target, body)
        self.requests.append(record)
        record.headers = dict(self._headers)
        if self.hostile is not None and self.hostile.matches(path):
            await self.hostile.serve(writer)
            return False
        if self.loading:
            await self._send_json(writer, *error(503, "Loading model", "unavailable_error"))
            return True
        if method == "GET" and path in ("/health", "/v1/health"):
            await self._send_json(writer, 200, {"status": "ok"})
        elif method == "GET" and path == "/props":
            await self._send_json(writer, 200, self._props())
        elif method == "GET" and path == "/slots":
            await self._slots(writer, query)
        elif method == "POST" and path.startswith("/slots/"):
            await self._send_json(writer, *self._slot_action(path, query, body))
        elif method == "POST" and path == "/tokenize" and isinstance(body, dict):
            await self._send_json(writer, 200, {"tokens": tokenize(str(body.get("content", "")))})
        elif method == "POST" and path == "/apply-template" and isinstance(body, dict):
            await self._send_json(writer, 200, {"prompt": chatml(body.get("messages", []))})
        elif method == "POST" and path in ("/completion", "/completions"):
            await self._completion(record, body if isinstance(body, dict) else {}, reader, writer)
            return False
        else:
            await self._send_json(writer, *error(404, "File Not Found", "not_found_error"))
        return True

    def _props(self) -> dict[str, Any]:
        return {
            "default_generation_settings": {"params": {}, "n_ctx": self.n_ctx},
            "total_slots": self.total_slots,
            "model_alias": "fake",
            "model_path": self.model_path,
            "build_info": self.build_info,
            "endpoint_slots": self.slots_enabled,
            "is_sleeping": False,
        }

    async def _slots(self, writer: asyncio.StreamWriter, query: dict[str, list[str]]) -> None:
        if not self.slots_enabled:
            msg = "This server does not support slots endpoint. Start it with `--slots`"
            await self._send_json(writer, *error(501, msg, "not_supported_error"))
            return
        if self.slots_delay:
            await asyncio.sleep(self.slots_delay)
        if self.slots_hang:
            await self._hang(asyncio.Event())
        if query.get("fail_on_no_slot") and all(s.is_processing for s in self._table.slots):
            await self._send_json(writer, *error(503, "no slot available", "unavailable_error"))
            return
        await self._send_json(writer, 200, self._table.to_json())

    def _slot_action(
        self, path: str, query: dict[str, list[str]], body: Any
    ) -> tuple[int, dict[str, Any]]:
        if not self.slot_actions_enabled:
            msg = "This server does not support slots action. Start it with `--slot-save-path`"
            return error(501, msg, "not_supported_error")
        name = body.get("filename") if isinstance(body, dict) else None
        action = (query.get("action") or [""])[0]
        return self._table.action(path.rsplit("/", 1)[1], action, name, self.saved)

    # --- completion --------------------------------------------------------------------------

    async def _take_slot(self, body: dict[str, Any], tokens: list[int]) -> FakeSlot:
        assert self._changed is not None
        id_slot = body.get("id_slot", -1)
        if not isinstance(id_slot, int) or isinstance(id_slot, bool):
            id_slot = -1  # lenient getter, as on the server
        async with self._changed:
            while True:
                if id_slot != -1:
                    slot: FakeSlot | None = self._table.named(id_slot)
                    if slot is not None and slot.is_processing:
                        slot = None  # deferred until it frees up
                else:
                    slot = self._table.pick(tokens)
                if slot is not None:
                    return slot
                await self._changed.wait()

    async def _completion(
        self,
        record: RecordedRequest,
        body: dict[str, Any],
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        if self.refuse_over_ctx:
            prompt = body.get("prompt", "")
            n = len(prompt) if isinstance(prompt, list) else len(tokenize(str(prompt)))
            if n >= self.n_ctx:
                message = (
                    f"request ({n} tokens) exceeds the available context size ({self.n_ctx} "
                    "tokens), try increasing it"
                )
                err = {"code": 400, "message": message, "type": "exceed_context_size_error",
                       "n_prompt_tokens": n, "n_ctx": self.n_ctx}  # fmt: skip
                await self._send_json(writer, 400, {"error": err}, close=True)
                return
        if body.get("n_predict") == 0:  # the prompt read into the slot, nothing generated
            reply = Reply(text=[], stop_type="limit")
        else:
            reply = self._queue.pop(0) if self._queue else self.default_reply
        if reply.status != 200:
            err = reply.error or {
                "code": reply.status,
                "message": "scripted",
                "type": "server_error",
            }
            await self._send_json(writer, reply.status, {"error": err}, close=True)
            return
        prompt = body.get("prompt", "")
        tokens = [int(t) for t in prompt] if isinstance(prompt, list) else tokenize(str(prompt))
        stream = bool(body.get("stream", False))
        progress = stream and bool(body.get("return_progress", False))
        gone = asyncio.Event()

        async def watch_eof() -> None:
            with contextlib.suppress(Exception):
                await reader.read(1)
            gone.set()

        eof = asyncio.ensure_future(watch_eof())
        slot: FakeSlot | None = None
        try:
            if reply.queue_seconds:
                await asyncio.sleep(reply.queue_seconds)
            if reply.hang == "queued":
                await self._hang(gone)
            slot = await self._take_slot(body, tokens)
            record.slot = slot.id
            cache_n = common_prefix(slot.cached, tokens) if body.get("cache_prompt", True) else 0
            cache_n = min(cache_n, max(0, len(tokens) - 1))
            slot.start(self._table.next_task(), cache_n)
            n_predict = body.get("n_predict", -1)
            slot.n_remain = n_predict if isinstance(n_predict, int) else -1
            t0 = time.monotonic()

            async def emit(obj: dict[str, Any]) -> None:
                if gone.is_set():
                    raise _Disconnected
                if stream:
                    data = f"data: {json.dumps(obj)}\n\n".encode()
                    writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    await writer.drain()

            if stream:
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                )
                await writer.drain()

            def progress_chunk() -> dict[str, Any]:
                return {
                    "index": 0,
                    "content": "",
                    "tokens": [],
                    "stop": False,
                    "id_slot": -1,
                    "tokens_predicted": 0,
                    "tokens_evaluated": len(tokens),
                    "prompt_progress": {
                        "total": len(tokens),
                        "cache": cache_n,
                        "processed": slot.in_flight,
                        "time_ms": int((time.monotonic() - t0) * 1000),
                    },
                }

            if progress:
                await emit(progress_chunk())
            todo = len(tokens) - cache_n
            steps = max(1, reply.progress_steps)
            for i in range(1, steps + 1):
                if reply.hang == "prompt" and i == 1:
                    await self._hang(gone)
                await asyncio.sleep(reply.prompt_seconds / steps)
                done = todo * i // steps
                slot.n_prompt_tokens_processed = done
                slot.in_flight = cache_n + done
                if progress:
                    await emit(progress_chunk())
            t_prompt = time.monotonic()
            if reply.hang == "first_token":
                await self._hang(gone)
            generated: list[int] = []
            for i, piece in enumerate(reply.text):
                if i and reply.chunk_delay:
                    await asyncio.sleep(reply.chunk_delay)
                if reply.disconnect_after is not None and i >= reply.disconnect_after:
                    if reply.then_die:
                        self.dead = True
                        if self._server is not None:
                            self._server.close()
                    writer.transport.abort()
                    raise _Disconnected
                generated += tokenize(piece)
                slot.n_decoded = i + 1
                slot.in_flight = len(tokens) + len(generated)
                await emit(
                    {
                        "index": 0,
                        "content": piece,
                        "tokens": tokenize(piece)[:1],
                        "stop": False,
                        "id_slot": -1,
                        "tokens_predicted": i + 1,
                        "tokens_evaluated": len(tokens),
                    }
                )
                if reply.hang == "mid_stream" and i == 0:
                    await self._hang(gone)
            t_end = time.monotonic()
            n_gen = len(reply.text)
            prompt_n = reply.prompt_n if reply.prompt_n is not None else len(tokens) - cache_n
            final_cache = reply.cache_n if reply.cache_n is not None else cache_n
            gen_ms = (t_end - t_prompt) * 1000
            timings = {
                "cache_n": final_cache,
                "prompt_n": prompt_n,
                "prompt_ms": (t_prompt - t0) * 1000,
                "prompt_per_token_ms": 0.0,
                "prompt_per_second": prompt_n / max(t_prompt - t0, 1e-6),
                "predicted_n": n_gen,
                "predicted_ms": gen_ms,
                "predicted_per_token_ms": 0.0,
                "predicted_per_second": (n_gen - 1) / (gen_ms / 1000)
                if n_gen > 1 and gen_ms
                else 0.0,
            }
            final = {
                "index": 0,
                "content": "" if stream else "".join(reply.text),
                "tokens": [],
                "id_slot": reply.id_slot if reply.id_slot is not None else slot.id,
                "stop": True,
                "model": "fake",
                "tokens_predicted": n_gen,
                "tokens_evaluated": len(tokens),
                "generation_settings": {},
                "prompt": detokenize(tokens),
                "has_new_line": False,
                "truncated": False,
                "stop_type": reply.stop_type,
                "stopping_word": "",
                "tokens_cached": len(tokens) + max(0, len(generated) - 1),
                "timings": timings,
            }
            slot.release(tokens + generated, self._table.next_tick())
            slot = None
            await self._notify()
            if stream:
                await emit(final)
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            else:
                await self._send_json(writer, 200, final, close=True)
        finally:
            eof.cancel()
            if slot is not None:  # cancelled: the slot keeps what it processed
                slot.release(tokens[: slot.in_flight], self._table.next_tick())
                await self._notify()
