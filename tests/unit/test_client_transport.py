"""LlamaClient's transport rules: keep-alive retry, early close, stalls, typed errors."""

from __future__ import annotations

import asyncio
import gc
import json
from typing import Any

import anyio
import httpx
import pytest

from fusion_tui.server.errors import (
    ProtocolError,
    ServerHTTPError,
    ServerLoading,
    ServerUnreachable,
    SlotsUnavailable,
    StreamStalled,
)
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.types import StreamEnd, TextDelta
from tests.data.streams.replay import Replay, recorded

BASE = "http://127.0.0.1:9"


def sse(*payloads: Any) -> bytes:
    return b"".join(
        b"data: " + (p if isinstance(p, str) else json.dumps(p)).encode() + b"\n\n"
        for p in payloads
    )


def answer(status: int, body: bytes, content_type: str = "application/json") -> httpx.Response:
    return httpx.Response(status, headers={"content-type": content_type}, content=body)


class Flaky:
    """Fails the first `failures` calls with `error` before any byte, then replays `name`."""

    def __init__(self, error: Exception, failures: int = 1, name: str = "native_completion"):
        self.error = error
        self.failures = failures
        self.replay = Replay(name)
        self.calls = 0

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return self.replay.handle(request)


@pytest.mark.parametrize(
    "error",
    [
        httpx.RemoteProtocolError("Server disconnected without sending a response."),
        httpx.ConnectError("connection refused"),
        httpx.ReadError("connection reset by peer"),
    ],
)
async def test_a_request_that_died_before_any_byte_is_retried_once(error: Exception) -> None:
    flaky = Flaky(error)
    async with LlamaClient(BASE, transport=httpx.MockTransport(flaky)) as client:
        events = [e async for e in client.stream_completion({"prompt": "x"})]
    assert flaky.calls == 2
    assert isinstance(events[-1], StreamEnd)


async def test_two_failures_before_any_byte_are_unreachable() -> None:
    flaky = Flaky(httpx.ConnectError("connection refused"), failures=5)
    async with LlamaClient(BASE, transport=httpx.MockTransport(flaky)) as client:
        with pytest.raises(ServerUnreachable, match="cannot reach llama-server"):
            await client.health()
    assert flaky.calls == 2


async def test_a_stream_that_breaks_after_bytes_arrived_is_not_retried() -> None:
    replay = Replay("native_completion", break_after=40)
    async with LlamaClient(BASE, transport=replay.transport) as client:
        with pytest.raises(ServerUnreachable, match="broke mid-answer"):
            async for _ in client.stream_completion({"prompt": "x"}):
                pass
    assert replay.calls == 1


async def test_a_body_that_breaks_after_the_status_line_is_not_retried() -> None:
    replay = Replay("props", break_after=10)
    async with LlamaClient(BASE, transport=replay.transport) as client:
        with pytest.raises(ServerUnreachable):
            await client.props()
    assert replay.calls == 1


async def test_aclose_after_the_first_event_closes_the_response() -> None:
    replay = Replay("native_completion", chunk=3)
    async with LlamaClient(BASE, transport=replay.transport) as client:
        stream = client.stream_completion({"prompt": "x"})
        first = await stream.__anext__()
        assert isinstance(first, TextDelta)
        assert not replay.streams[0].closed
        await stream.aclose()
        assert replay.streams[0].closed
        assert replay.streams[0].sent < len(replay.body)


async def test_break_closes_the_response() -> None:
    replay = Replay("chat", chunk=3)
    async with LlamaClient(BASE, transport=replay.transport) as client:
        async for event in client.stream_chat({"messages": []}):
            if isinstance(event, TextDelta):
                break
        for _ in range(50):  # the event loop finalises the abandoned generator
            gc.collect()
            await asyncio.sleep(0)
            if replay.streams[0].closed:
                break
        assert replay.streams[0].closed


async def test_cancelling_the_consumer_closes_the_response() -> None:
    _, body = recorded("native_completion")
    replay = Replay("native_completion", stall_after=body.index(b"\n\n") + 9)
    got: list[object] = []
    async with LlamaClient(BASE, transport=replay.transport) as client:

        async def consume() -> None:
            async for event in client.stream_completion({"prompt": "x"}):
                got.append(event)

        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            while not got:
                await asyncio.sleep(0)
            tg.cancel_scope.cancel()
    assert replay.streams[0].closed


async def test_idle_timeout_after_the_first_byte_raises_stream_stalled() -> None:
    replay = Replay("native_completion", stall_after=20)
    async with LlamaClient(BASE, transport=replay.transport) as client:
        with pytest.raises(StreamStalled, match="sent nothing"):
            async for _ in client.stream_completion({"prompt": "x"}, idle_timeout=0.01):
                pass
    assert replay.streams[0].closed


async def test_first_byte_timeout_raises_stream_stalled_and_is_not_retried() -> None:
    calls = 0

    async def never(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        await anyio.sleep_forever()
        raise AssertionError

    async with LlamaClient(BASE, transport=httpx.MockTransport(never)) as client:
        with pytest.raises(StreamStalled, match="did not start answering"):
            async for _ in client.stream_chat({"messages": []}, first_byte_timeout=0.01):
                pass
    assert calls == 1


async def test_health_503_is_loading_and_other_errors_carry_the_server_object() -> None:
    loading = b'{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}'
    async with LlamaClient(
        BASE, transport=httpx.MockTransport(lambda r: answer(503, loading))
    ) as client:
        with pytest.raises(ServerLoading):
            await client.health()
    body = b'{"error":{"code":500,"message":"boom","type":"server_error"}}'
    async with LlamaClient(BASE, transport=httpx.MockTransport(lambda r: answer(500, body))) as c:
        with pytest.raises(ServerHTTPError) as info:
            await c.props()
    assert (info.value.status, info.value.message, info.value.type) == (500, "boom", "server_error")
    assert info.value.error["code"] == 500


async def test_a_non_json_error_page_is_still_a_typed_http_error() -> None:
    page = b"<html><body>Bad Gateway</body></html>"
    transport = httpx.MockTransport(lambda r: answer(502, page, "text/html"))
    async with LlamaClient(BASE, transport=transport) as client:
        with pytest.raises(ServerHTTPError, match="Bad Gateway") as info:
            await client.props()
    assert info.value.status == 502 and info.value.error == {}


async def test_slots_501_is_slots_unavailable() -> None:
    body = (
        b'{"error":{"code":501,"message":"This server does not support slots endpoint.",'
        b'"type":"not_supported_error"}}'
    )
    async with LlamaClient(BASE, transport=httpx.MockTransport(lambda r: answer(501, body))) as c:
        with pytest.raises(SlotsUnavailable):
            await c.slots()
        with pytest.raises(SlotsUnavailable):
            await c.slot_action(0, "erase")


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (b"not json", "did not answer JSON"),
        (b"[1, 2]", "not answer a JSON object"),
        (b'{"total_slots": 99999999999999999}', "absurd"),
        (b'{"total_slots": "four"}', "should be a number"),
    ],
)
async def test_malformed_props_are_protocol_errors(body: bytes, match: str) -> None:
    async with LlamaClient(BASE, transport=httpx.MockTransport(lambda r: answer(200, body))) as c:
        with pytest.raises(ProtocolError, match=match):
            await c.props()


@pytest.mark.parametrize(
    ("stream", "match"),
    [
        (sse("{not json"), "not JSON"),
        (sse('"a string"'), "not a JSON object"),
        (sse({"content": "a", "stop": False}), "ended before its final event"),
        (sse({"content": 5}), "non-string content"),
        (sse({"content": "", "stop": True, "id_slot": 10**15}), "absurd"),
        (sse({"content": "", "stop": True, "id_slot": 0, "timings": {"prompt_n": -3}}), "negative"),
    ],
)
async def test_malformed_native_streams_are_protocol_errors(stream: bytes, match: str) -> None:
    transport = httpx.MockTransport(lambda r: answer(200, stream, "text/event-stream"))
    async with LlamaClient(BASE, transport=transport) as client:
        with pytest.raises(ProtocolError, match=match):
            async for _ in client.stream_completion({"prompt": "x"}):
                pass


async def test_chat_stream_without_a_finish_is_a_protocol_error() -> None:
    body = sse({"choices": [{"delta": {"content": "hi"}}]}, "[DONE]")
    transport = httpx.MockTransport(lambda r: answer(200, body, "text/event-stream"))
    async with LlamaClient(BASE, transport=transport) as client:
        with pytest.raises(ProtocolError, match="chat stream ended"):
            async for _ in client.stream_chat({"messages": []}):
                pass


async def test_an_error_event_mid_stream_is_raised_typed_after_the_text() -> None:
    error = {"code": 500, "message": "Context size has been exceeded.", "type": "server_error"}
    body = sse({"content": "par", "stop": False}, {"error": error})
    transport = httpx.MockTransport(lambda r: answer(200, body, "text/event-stream"))
    got: list[object] = []
    async with LlamaClient(BASE, transport=transport) as client:
        with pytest.raises(ServerHTTPError, match="Context size has been exceeded"):
            async for event in client.stream_completion({"prompt": "x"}):
                got.append(event)
    assert got == [TextDelta("par")]


async def test_pings_and_crlf_do_not_disturb_a_stream() -> None:
    _, body = recorded("native_completion")
    noisy = b":\r\n\r\n" + body.replace(b"\n\n", b"\n\n:\n\n").replace(b"\n", b"\r\n")
    transport = httpx.MockTransport(lambda r: answer(200, noisy, "text/event-stream"))
    async with LlamaClient(BASE, transport=transport) as client:
        events = [e async for e in client.stream_completion({"prompt": "x"})]
    assert isinstance(events[-1], StreamEnd) and events[-1].timings.predicted_n == 12


async def test_api_key_is_sent_as_bearer_and_omitted_without_one() -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("authorization"))
        return answer(200, b'{"status":"ok"}')

    async with LlamaClient(BASE, "s3cret", transport=httpx.MockTransport(handler)) as client:
        await client.health()
    async with LlamaClient(BASE, transport=httpx.MockTransport(handler)) as client:
        await client.health()
    assert seen == ["Bearer s3cret", None]


async def test_slot_actions_send_the_action_and_file_name() -> None:
    seen: list[tuple[str, str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.path, request.url.params["action"], json.loads(request.content)))
        return answer(200, b'{"id_slot": 1, "n_saved": 12}')

    async with LlamaClient(BASE, transport=httpx.MockTransport(handler)) as client:
        assert (await client.slot_action(1, "save", "s1.bin"))["n_saved"] == 12
        await client.slot_action(1, "erase")
        with pytest.raises(ValueError, match="needs a file name"):
            await client.slot_action(1, "restore")
        with pytest.raises(ValueError, match="unknown slot action"):
            await client.slot_action(1, "wipe")  # type: ignore[arg-type]
    assert seen == [("/slots/1", "save", {"filename": "s1.bin"}), ("/slots/1", "erase", {})]
