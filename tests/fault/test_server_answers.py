"""Hostile server answers: whatever bytes come back, `LlamaClient` raises a `ServerError`.

Absurd numbers in `/props` and `/slots` (negative, huge, NaN, infinite, wrong types), truncated
JSON, malformed SSE and JSON nested deep enough to blow Python's recursion limit all become a
`ProtocolError` (or another typed `ServerError` for a well-formed error object), never a crash.
The last tests feed random bytes and random JSON through the client: only `ServerError` escapes.
"""

from __future__ import annotations

import json
import math
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fusion_tui.server.errors import ProtocolError, ServerError, ServerUnreachable
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.types import StreamEnd
from tests.fakes.fake_server import FakeLlamaServer, Reply

BASE = "http://127.0.0.1:9"
DEEP = b"[" * 100_000


def respond(status: int, body: bytes, kind: str = "application/json") -> httpx.MockTransport:
    return httpx.MockTransport(
        lambda _r: httpx.Response(status, headers={"content-type": kind}, content=body)
    )


def sse(*payloads: Any) -> bytes:
    out = b""
    for p in payloads:
        text = p if isinstance(p, str) else json.dumps(p, allow_nan=True)
        out += b"data: " + text.encode() + b"\n\n"
    return out


def slot(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "id": 0,
        "n_ctx": 512,
        "is_processing": False,
        "id_task": -1,
        "n_prompt_tokens": 10,
        "next_token": [{"n_decoded": 3, "n_remain": -1}],
    }
    base.update(overrides)
    return base


def props(n_ctx: Any = 512, **overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "total_slots": 2,
        "model_path": "/m.gguf",
        "default_generation_settings": {"n_ctx": n_ctx},
    }
    base.update(overrides)
    return base


ABSURD = [math.nan, math.inf, -math.inf, -1, -(2**40), 2**62, 1e300, "512", True, None, [1], {}]
ABSURD_IDS = [repr(v) for v in ABSURD]


@pytest.mark.parametrize("value", ABSURD, ids=ABSURD_IDS)
async def test_absurd_props_context_is_a_protocol_error(value: Any) -> None:
    body = json.dumps(props(n_ctx=value), allow_nan=True).encode()
    async with LlamaClient(BASE, transport=respond(200, body)) as client:
        if value is None:  # a missing context is tolerated (0 = unknown), nothing else is
            assert (await client.props()).n_ctx == 0
            return
        with pytest.raises(ProtocolError):
            await client.props()


@pytest.mark.parametrize("value", [0, -2, 5000, math.nan, 1.5e12, "2", False], ids=repr)
async def test_absurd_props_slot_count_is_a_protocol_error(value: Any) -> None:
    body = json.dumps(props(total_slots=value), allow_nan=True).encode()
    async with LlamaClient(BASE, transport=respond(200, body)) as client:
        with pytest.raises(ProtocolError):
            await client.props()


@pytest.mark.parametrize(
    "field",
    ["id", "n_ctx", "n_prompt_tokens", "n_prompt_tokens_processed", "n_prompt_tokens_cache"],
)
@pytest.mark.parametrize("value", [v for v in ABSURD if v is not None], ids=repr)
async def test_absurd_slot_numbers_are_protocol_errors(field: str, value: Any) -> None:
    body = json.dumps([slot(**{field: value})], allow_nan=True).encode()
    async with LlamaClient(BASE, transport=respond(200, body)) as client:
        with pytest.raises(ProtocolError):
            await client.slots()


@pytest.mark.parametrize(
    "next_token",
    [
        [{"n_decoded": -5}],
        [{"n_decoded": math.nan}],
        [{"n_remain": -7}],
        [{"n_decoded": "3"}],
        ["x"],
        "x",
        [[1, 2]],
    ],
    ids=repr,
)
async def test_malformed_next_token_is_a_protocol_error(next_token: Any) -> None:
    body = json.dumps([slot(next_token=next_token)], allow_nan=True).encode()
    async with LlamaClient(BASE, transport=respond(200, body)) as client:
        with pytest.raises(ProtocolError):
            await client.slots()


async def test_a_sane_slot_still_parses() -> None:
    body = json.dumps([slot(), slot(id=1, is_processing=True, id_task=7)]).encode()
    async with LlamaClient(BASE, transport=respond(200, body)) as client:
        states = await client.slots()
    assert [(s.id, s.n_ctx, s.is_processing, s.n_decoded) for s in states] == [
        (0, 512, False, 3),
        (1, 512, True, 3),
    ]


@pytest.mark.parametrize(
    "body",
    [b'{"total_slots": 2, "default_generation_settings": {"n_ctx": 5', b"", b"\xff\xfe{}", DEEP],
    ids=["truncated", "empty", "not-utf8", "deeply-nested"],
)
async def test_truncated_or_nested_json_answers_are_protocol_errors(body: bytes) -> None:
    async with LlamaClient(BASE, transport=respond(200, body)) as client:
        with pytest.raises(ProtocolError):
            await client.props()
        with pytest.raises(ProtocolError):
            await client.slots()


async def test_a_deeply_nested_error_body_is_still_a_typed_error() -> None:
    async with LlamaClient(BASE, transport=respond(500, DEEP)) as client:
        with pytest.raises(ServerError) as info:
            await client.props()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "stream",
    [
        sse("[" * 100_000),
        b"data: " + b'{"content": "a"' + b"\n\n",
        sse({"content": "a", "stop": True, "timings": {"predicted_per_second": math.nan}}),
        sse({"content": "a", "stop": True, "timings": {"prompt_ms": math.inf}}),
        sse({"content": "a", "stop": True, "timings": {"prompt_n": 1e300}}),
        sse({"content": "a", "stop": True, "tokens_cached": -1}),
        sse({"content": "a", "stop": True, "timings": "fast"}),
        sse({"content": "", "prompt_progress": {"total": math.nan}}),
        sse({"content": "", "prompt_progress": {"total": 5, "processed": -1}}),
        b"data: \xc3\x28\n\n",
        b"data: " + b"x" * 64 + b"\r",  # a cut connection: no final event
    ],
    ids=[
        "deep",
        "truncated-json",
        "nan-rate",
        "inf-ms",
        "huge-count",
        "negative-cached",
        "timings-string",
        "nan-progress",
        "negative-progress",
        "bad-utf8",
        "cut",
    ],
)
async def test_malformed_native_streams_raise_protocol_errors(stream: bytes) -> None:
    async with LlamaClient(BASE, transport=respond(200, stream, "text/event-stream")) as client:
        with pytest.raises(ProtocolError):
            async for _ in client.stream_completion({"prompt": "x"}):
                pass


@pytest.mark.parametrize(
    "stream",
    [
        sse("[" * 100_000, "[DONE]"),
        sse({"choices": "x"}, "[DONE]"),
        sse(
            {
                "choices": [{"delta": {"content": "a"}, "finish_reason": "stop"}],
                "__verbose": {"id_slot": 0, "timings": {"predicted_per_second": math.nan}},
            },
            "[DONE]",
        ),
        sse(
            {
                "choices": [{"delta": {"content": "a"}, "finish_reason": "stop"}],
                "timings": {"cache_n": -4},
            },
            "[DONE]",
        ),
    ],
    ids=["deep", "choices-string", "nan-verbose-rate", "negative-cache"],
)
async def test_malformed_chat_streams_raise_protocol_errors(stream: bytes) -> None:
    async with LlamaClient(BASE, transport=respond(200, stream, "text/event-stream")) as client:
        with pytest.raises(ProtocolError):
            async for _ in client.stream_chat({"messages": []}):
                pass


async def test_a_finite_stream_end_survives_a_session_round_trip() -> None:
    """What the client lets through must be storable: no NaN or infinity reaches a session."""
    stream = sse({"content": "a", "stop": True, "id_slot": 0, "timings": {"prompt_n": 3}})
    async with LlamaClient(BASE, transport=respond(200, stream, "text/event-stream")) as client:
        ends = [
            e async for e in client.stream_completion({"prompt": "x"}) if isinstance(e, StreamEnd)
        ]
    t = ends[0].timings
    assert all(math.isfinite(v) for v in (t.prompt_ms, t.predicted_ms, t.predicted_per_second))


# --- the fake server over real HTTP ----------------------------------------------------------


async def test_a_connection_cut_mid_stream_by_the_fake_is_unreachable_after_the_text() -> None:
    with FakeLlamaServer(total_slots=2, n_ctx=512) as srv:
        srv.script(Reply(text=["one", " two", " three"], disconnect_after=1))
        got: list[object] = []
        async with LlamaClient(srv.url) as client:
            with pytest.raises(ServerUnreachable, match="broke mid-answer"):
                async for event in client.stream_completion({"prompt": "hi"}):
                    got.append(event)
    assert [getattr(e, "text", None) for e in got] == ["one"]


# --- property-based: random bytes and random JSON ----------------------------------------------


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=st.binary(max_size=2000), chat=st.booleans())
async def test_random_bytes_as_an_sse_body_only_raise_server_errors(
    body: bytes, chat: bool
) -> None:
    await _consume(body, chat)


SSE_PIECES = st.sampled_from(
    [b"data: ", b"data:", b"\n", b"\r\n", b"\r", b":ping\n", b"[DONE]", b'{"content":"x"}',
     b'{"stop":true}', b'{"choices":[{"delta":{"content":"y"},"finish_reason":"stop"}]}',
     b'{"error":{"code":500}}', b'"id_slot":', b"-1", b"1e999", b"NaN", b"{", b"}", b"[", b"]",
     b"\xff", b"\xc3"]
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(SSE_PIECES, max_size=40), chat=st.booleans())
async def test_sse_shaped_garbage_only_raises_server_errors(parts: list[bytes], chat: bool) -> None:
    await _consume(b"".join(parts), chat)


async def _consume(body: bytes, chat: bool) -> None:
    transport = respond(200, body, "text/event-stream")
    async with LlamaClient(BASE, transport=transport) as client:
        stream = client.stream_chat({"messages": []}) if chat else client.stream_completion({})
        try:
            async for event in stream:
                if isinstance(event, StreamEnd):
                    t = event.timings
                    assert math.isfinite(t.predicted_per_second) and t.prompt_n >= 0
        except ServerError as exc:
            assert str(exc) and "\n" not in str(exc)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "id",
                    "n_ctx",
                    "total_slots",
                    "default_generation_settings",
                    "next_token",
                    "n_decoded",
                    "n_remain",
                    "is_processing",
                    "model_path",
                    "x",
                ]
            ),
            children,
            max_size=6,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=JSON)
async def test_random_json_for_props_and_slots_only_raises_protocol_errors(value: Any) -> None:
    body = json.dumps(value, allow_nan=True).encode()
    async with LlamaClient(BASE, transport=respond(200, body)) as client:
        try:
            p = await client.props()
            assert 1 <= p.total_slots <= 4096 and p.n_ctx >= 0
        except ProtocolError:
            pass
        try:
            for s in await client.slots():
                assert s.n_ctx >= 0 and s.n_prompt_tokens >= 0 and s.n_decoded >= 0
        except ProtocolError:
            pass
