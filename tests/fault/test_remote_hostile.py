"""A remote server is untrusted input: too large, too slow or hostile answers get a typed error
within their deadline, and a key never leaves the endpoint it belongs to."""

from __future__ import annotations

import time

import anyio
import pytest

from fusion_tui.endpoints.model import Endpoint
from fusion_tui.endpoints.registry import EndpointRegistry
from fusion_tui.server.errors import (
    ResponseTooLarge,
    ResponseTooSlow,
    ServerHTTPError,
    StreamStalled,
)
from fusion_tui.server.http.client import MAX_BODY_BYTES, LlamaClient
from fusion_tui.server.http.sse import MAX_LINE_BYTES
from tests.fakes.fake_server import FakeLlamaServer
from tests.fakes.hostile import Hostile


async def test_an_oversized_body_stops_at_the_cap_with_a_typed_error() -> None:
    with FakeLlamaServer() as srv:
        srv.hostile = Hostile("huge_body", ("/props",))
        async with LlamaClient(srv.url) as client:
            t0 = time.monotonic()
            with anyio.fail_after(20), pytest.raises(ResponseTooLarge, match="more than"):
                await client.props()
    assert time.monotonic() - t0 < 20
    assert MAX_BODY_BYTES == 16 * 1024 * 1024


async def test_a_declared_huge_body_is_not_read_at_all() -> None:
    with FakeLlamaServer() as srv:
        srv.hostile = Hostile("huge_declared", ("/slots",))
        async with LlamaClient(srv.url) as client:
            with anyio.fail_after(5), pytest.raises(ResponseTooLarge, match="announced"):
                await client.slots()


@pytest.mark.parametrize("kind", ["endless_line", "endless_event"])
async def test_an_endless_sse_line_or_event_is_cut_at_the_line_cap(kind: str) -> None:
    with FakeLlamaServer() as srv:
        srv.hostile = Hostile(kind, ("/completion",))
        async with LlamaClient(srv.url) as client:
            with anyio.fail_after(30), pytest.raises(ResponseTooLarge, match="MiB"):
                async for _event in client.stream_completion({"prompt": "hi"}, idle_timeout=10):
                    pass
    assert MAX_LINE_BYTES == 16 * 1024 * 1024


async def test_a_slow_drip_body_fails_at_its_deadline_not_per_byte() -> None:
    with FakeLlamaServer() as srv:
        srv.hostile = Hostile("drip", ("/props",), drip_s=0.1)  # each byte well within a read
        async with LlamaClient(srv.url, timeout=1.0) as client:
            t0 = time.monotonic()
            with pytest.raises(ResponseTooSlow, match=r"within 1 s \(\d+ bytes arrived\)"):
                await client.props()
    assert 0.9 < time.monotonic() - t0 < 3.0


async def test_a_stream_dripping_bytes_without_a_line_is_stalled_at_the_idle_budget() -> None:
    with FakeLlamaServer() as srv:
        srv.hostile = Hostile("drip_stream", ("/completion",), drip_s=0.05)
        async with LlamaClient(srv.url) as client:
            t0 = time.monotonic()
            with pytest.raises(
                StreamStalled, match=r"sent nothing for 0\.5 s .* but part of a line"
            ):
                async for _event in client.stream_completion({"prompt": "hi"}, idle_timeout=0.5):
                    pass
    assert time.monotonic() - t0 < 3.0


async def test_a_redirect_is_an_error_and_the_key_never_reaches_the_other_host() -> None:
    with FakeLlamaServer() as evil, FakeLlamaServer() as remote:
        remote.hostile = Hostile("redirect", ("/props",), location=f"{evil.url}/props")
        env = {"GPU_BOX_KEY": "sekrit-123"}
        registry = EndpointRegistry(
            [
                Endpoint("here", None, managed=True),
                Endpoint("gpu", remote.url, False, "GPU_BOX_KEY"),
            ],
            env=env,
        )
        registry.bind("here", evil.url)
        try:
            with pytest.raises(ServerHTTPError, match="HTTP 302"):
                await registry.client("gpu").props()
            await registry.client("here").health()
            assert "sekrit" not in repr(registry) + repr(registry.client("gpu"))
        finally:
            await registry.aclose()
        assert remote.requests[-1].headers.get("authorization") == "Bearer sekrit-123"
        assert all("authorization" not in r.headers for r in evil.requests)
