"""LlamaClient against answers recorded from the real llama-server (tests/data/streams)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fusion_tui.server.errors import ContextExceeded, ServerHTTPError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.http.sse import parse_all
from fusion_tui.server.types import PromptProgress, StreamEnd, StreamEvent, TextDelta
from tests.data.streams.replay import Replay, recorded

BASE = "http://127.0.0.1:9"


def raw_events(name: str) -> list[dict[str, Any]]:
    _, body = recorded(name)
    return [json.loads(p) for p in parse_all(body) if p != "[DONE]"]


async def collect(replay: Replay, chat: bool = False, **body: Any) -> list[StreamEvent]:
    async with LlamaClient(BASE, transport=replay.transport) as client:
        stream = client.stream_chat(body) if chat else client.stream_completion(body)
        return [event async for event in stream]


def text_of(events: list[StreamEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


async def test_native_completion_yields_text_then_one_stream_end() -> None:
    replay = Replay("native_completion")
    events = await collect(replay, prompt="x")
    raw = raw_events("native_completion")
    assert text_of(events) == "".join(r["content"] for r in raw)
    assert text_of(events)  # the model did say something
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert sum(isinstance(e, StreamEnd) for e in events) == 1
    final = raw[-1]
    assert final["stop"] is True
    assert end.id_slot == final["id_slot"]
    assert 0 <= end.id_slot < 2  # recorded with -np 2
    assert end.timings.prompt_n == final["timings"]["prompt_n"] > 0
    assert end.timings.predicted_n == final["timings"]["predicted_n"] == 12
    assert end.stop_type == final["stop_type"] == "limit"
    assert end.tokens_cached == final["tokens_cached"] > 0
    assert end.truncated is False
    assert replay.last_json()["stream"] is True


async def test_native_stream_forces_stream_true_even_if_the_caller_said_false() -> None:
    replay = Replay("native_completion")
    await collect(replay, prompt="x", stream=False)
    assert replay.last_json()["stream"] is True


async def test_return_progress_yields_prompt_progress_before_text() -> None:
    events = await collect(Replay("native_progress"), prompt="x", return_progress=True)
    progress = [e for e in events if isinstance(e, PromptProgress)]
    assert progress, "the recorded stream has progress chunks"
    assert progress[-1].processed == progress[-1].total > 100
    assert [p.processed for p in progress] == sorted(p.processed for p in progress)
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextDelta | StreamEnd))
    assert all(isinstance(e, PromptProgress) for e in events[:first_text])
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.timings.prompt_n == progress[-1].total - progress[-1].cache


async def test_chat_stream_sets_verbose_and_reads_the_slot_from_verbose() -> None:
    replay = Replay("chat")
    events = await collect(replay, chat=True, messages=[])
    sent = replay.last_json()
    assert sent["verbose"] is True and sent["stream"] is True
    raw = raw_events("chat")
    deltas = [
        (c.get("delta") or {}).get("content") or "" for r in raw for c in r.get("choices", [])
    ]
    assert text_of(events) == "".join(deltas)
    end = events[-1]
    assert isinstance(end, StreamEnd)
    verbose = next(r["__verbose"] for r in raw if "__verbose" in r)
    assert end.id_slot == verbose["id_slot"]
    assert 0 <= end.id_slot < 2
    assert end.finish_reason in {"stop", "length"}
    timings = next(r["timings"] for r in reversed(raw) if "timings" in r)
    assert end.timings.predicted_n == timings["predicted_n"] > 0
    assert end.timings.prompt_n == timings["prompt_n"]


async def test_chat_with_usage_and_progress() -> None:
    events = await collect(Replay("chat_progress_usage"), chat=True, messages=[])
    assert any(isinstance(e, PromptProgress) for e in events)
    end = events[-1]
    assert isinstance(end, StreamEnd)
    assert end.finish_reason == "length"
    assert end.extra["usage"]["completion_tokens"] == end.timings.predicted_n == 8


@pytest.mark.parametrize("name", ["context_exceeded", "chat_context_exceeded"])
async def test_context_exceeded_on_a_stream_request_is_typed(name: str) -> None:
    meta, body = recorded(name)
    assert meta["status"] == 400
    error = json.loads(body)["error"]
    with pytest.raises(ContextExceeded) as info:
        await collect(Replay(name), chat=name.startswith("chat"), prompt="x")
    assert info.value.status == 400
    assert info.value.n_ctx == error["n_ctx"] == 512
    assert info.value.n_prompt_tokens == error["n_prompt_tokens"] > 512
    assert info.value.type == "exceed_context_size_error"
    assert isinstance(info.value, ServerHTTPError)


async def test_props_slots_health_and_tokenize_from_recordings() -> None:
    async with LlamaClient(BASE, transport=Replay("props").transport) as client:
        props = await client.props()
    assert props.total_slots == 2
    assert props.n_ctx == 512
    assert props.model_path.endswith("SmolLM2-135M-Instruct.Q4_1.gguf")
    async with LlamaClient(BASE, transport=Replay("slots_after").transport) as client:
        slots = await client.slots()
    assert [s.id for s in slots] == [0, 1]
    assert all(s.n_ctx == 512 and not s.is_processing for s in slots)
    assert max(s.n_prompt_tokens for s in slots) > 0  # the completion left its tokens behind
    async with LlamaClient(BASE, transport=Replay("health").transport) as client:
        assert await client.health() == "ok"
    replay = Replay("tokenize")
    async with LlamaClient(BASE, transport=replay.transport) as client:
        tokens = await client.tokenize("Hello world, this is a test.")
    assert tokens == json.loads(recorded("tokenize")[1])["tokens"]
    assert 3 < len(tokens) < 20
    assert replay.last_json() == {"content": "Hello world, this is a test.", "add_special": False}
