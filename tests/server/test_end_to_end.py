"""End to end: launch SmolLM2 (-np 2, small -c) once per module and stream through the client."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path

import httpx
import pytest

from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import ContextExceeded
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.records import LaunchRecord
from fusion_tui.server.types import PromptProgress, StreamEnd, StreamEvent, TextDelta

pytestmark = pytest.mark.server

SLOTS = 2
PROMPT = "The three primary colours are red, blue and"


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, llama_server_bin: Path, demo_model: Path
) -> Iterator[LaunchRecord]:
    home = tmp_path_factory.mktemp("e2e-home")
    paths = AppPaths.default(env={"FUSION_TUI_HOME": str(home)})
    daemon = ManagedDaemon(paths, binary=llama_server_bin)
    spec = LaunchSpec(model=demo_model, parallel=SLOTS, ctx=2048, threads=2)
    try:
        yield asyncio.run(daemon.ensure(spec, probe=False))
    finally:
        asyncio.run(daemon.stop())


async def run(client: LlamaClient, body: dict[str, object]) -> list[StreamEvent]:
    return [event async for event in client.stream_completion(body)]


def end_of(events: list[StreamEvent]) -> StreamEnd:
    assert isinstance(events[-1], StreamEnd)
    return events[-1]


async def test_stream_a_completion_with_timings_and_slot(server: LaunchRecord) -> None:
    async with LlamaClient(server.url) as client:
        props = await client.props()
        events = await run(client, {"prompt": PROMPT, "n_predict": 8, "temperature": 0})
    assert props.total_slots == SLOTS and props.n_ctx == 1024
    end = end_of(events)
    assert end.timings.prompt_n > 0
    assert end.timings.predicted_n == 8
    assert 0 <= end.id_slot < props.total_slots
    assert "".join(e.text for e in events if isinstance(e, TextDelta)).strip()


async def test_the_same_prompt_twice_on_one_slot_reuses_the_cache(server: LaunchRecord) -> None:
    body: dict[str, object] = {"prompt": PROMPT + " green. Also", "n_predict": 4, "temperature": 0}
    async with LlamaClient(server.url) as client:
        first = end_of(await run(client, body))
        second = end_of(await run(client, {**body, "id_slot": first.id_slot}))
    assert second.id_slot == first.id_slot
    prompt_len = first.timings.prompt_n + first.timings.cache_n
    assert second.timings.cache_n >= prompt_len - 1
    assert second.timings.prompt_n <= 1


async def test_chat_stream_reports_its_slot_and_finish_reason(server: LaunchRecord) -> None:
    body = {
        "messages": [{"role": "user", "content": "Say hi."}],
        "max_tokens": 6,
        "temperature": 0,
        "return_progress": True,
    }
    async with LlamaClient(server.url) as client:
        events = [e async for e in client.stream_chat(body)]
    end = end_of(events)
    assert 0 <= end.id_slot < SLOTS
    assert end.finish_reason in {"stop", "length"}
    assert end.timings.prompt_n + end.timings.cache_n > 0
    assert any(isinstance(e, PromptProgress) for e in events)


async def test_context_exceeded_is_typed_on_a_live_stream(server: LaunchRecord) -> None:
    async with LlamaClient(server.url) as client:
        long_prompt = " ".join(f"w{i}" for i in range(1500))
        with pytest.raises(ContextExceeded) as info:
            await run(client, {"prompt": long_prompt, "n_predict": 1})
    assert info.value.n_ctx == 1024
    assert info.value.n_prompt_tokens > 1024


async def test_closing_a_stream_early_frees_the_slot(server: LaunchRecord) -> None:
    async with LlamaClient(server.url) as client:
        body = {"prompt": "Tell me a long story.", "n_predict": 400, "ignore_eos": True}
        async with aclosing(client.stream_completion(body)) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    break
        for _ in range(200):  # the server notices the closed connection between tokens
            if not any(s.is_processing for s in await client.slots()):
                break
            await asyncio.sleep(0.05)
        slots = await client.slots()
    assert not any(s.is_processing for s in slots)
    assert max(s.n_prompt_tokens for s in slots) < 400  # it did not run to the end


async def test_tokenize_and_health(server: LaunchRecord) -> None:
    async with LlamaClient(server.url) as client:
        assert await client.health() == "ok"
        tokens = await client.tokenize(PROMPT)
    assert 5 < len(tokens) < 30


class CountingTransport(httpx.AsyncBaseTransport):
    """The real transport, noting every request that failed before its answer."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.failures: list[str] = []
        self.requests = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests += 1
        try:
            return await self.inner.handle_async_request(request)
        except httpx.TransportError as exc:
            self.failures.append(f"{request.url.path}: {exc!r}")
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_requests_after_a_stream_reuse_the_client_transparently(server: LaunchRecord) -> None:
    transport = CountingTransport()
    async with LlamaClient(server.url, transport=transport) as client:
        for _ in range(2):
            end_of(await run(client, {"prompt": PROMPT, "n_predict": 2}))
            assert (await client.props()).total_slots == SLOTS
            assert len(await client.slots()) == SLOTS
    print("failed before an answer (retried):", transport.failures)
    assert transport.requests == 6 + len(transport.failures)
    assert len(transport.failures) <= 6
