"""`EndpointPins` over two fake llama-servers: a new session goes to the faster
endpoint (the ready-line probe, then recent turns), away from queued requests, never onto a side
slot or another session's pin; the first connection of a managed set-up is the connector's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fusion_tui.config import Settings
from fusion_tui.config.settings import EndpointSettings, ServerSettings
from fusion_tui.endpoints.session_pins import EndpointPins, wants_endpoints
from fusion_tui.server.connect import Connection
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.probe import ProbeResult
from fusion_tui.status import ServerStatus
from tests.fakes.fake_server import FakeLlamaServer


@pytest.fixture
def two() -> Iterator[tuple[FakeLlamaServer, FakeLlamaServer]]:
    with FakeLlamaServer(total_slots=2) as a, FakeLlamaServer(total_slots=2) as b:
        yield a, b


def remote(a: FakeLlamaServer, b: FakeLlamaServer) -> Settings:
    eps = (EndpointSettings(url=a.url, label="alpha"), EndpointSettings(url=b.url, label="beta"))
    return Settings(server=ServerSettings(endpoints=eps))


async def place(pins: EndpointPins, sid: str) -> tuple[str | None, int]:
    p = await pins.place(sid, pinned_endpoint=None, pinned_slot=None, resumed=False)
    return p.endpoint, p.slot


def test_one_endpoint_or_only_the_managed_one_needs_no_routing() -> None:
    assert not wants_endpoints(Settings())
    managed = Settings(server=ServerSettings(endpoints=(EndpointSettings(managed=True),)))
    assert not wants_endpoints(managed)
    one_url = Settings(server=ServerSettings(endpoints=(EndpointSettings(url="http://h:1"),)))
    assert wants_endpoints(one_url)


async def test_the_faster_endpoint_gets_the_new_session_then_the_less_busy(
    two: tuple[FakeLlamaServer, FakeLlamaServer],
) -> None:
    a, b = two
    pins = EndpointPins(remote(a, b))
    try:
        await pins.connect(None, None, None, None)  # type: ignore[arg-type]
        pins.watcher.record_turn("alpha", 10.0)
        pins.watcher.record_turn("beta", 40.0)
        assert (await place(pins, "s1"))[0] == "beta"
        with pins.using("beta", 1), pins.using("beta", 1), pins.using("beta", 1):
            # 40 / (1 + 3 queued) = 10 ties alpha's 10: fewer queued wins
            assert (await place(pins, "s2"))[0] == "alpha"
    finally:
        await pins.aclose()


async def test_pins_and_side_slots_are_not_given_to_a_new_session(
    two: tuple[FakeLlamaServer, FakeLlamaServer],
) -> None:
    a, b = two
    pins = EndpointPins(remote(a, b))
    try:
        await pins.connect(None, None, None, None)  # type: ignore[arg-type]
        first = await place(pins, "s1")
        pins.side_slot("alpha", 1 - first[1])
        assert first[0] == "alpha" and (await place(pins, "s2"))[0] == "beta"
    finally:
        await pins.aclose()


async def test_the_managed_endpoint_is_the_connectors_and_its_probe_speed_counts(
    two: tuple[FakeLlamaServer, FakeLlamaServer],
) -> None:
    a, b = two
    eps = (EndpointSettings(managed=True), EndpointSettings(url=b.url, label="beta"))
    pins = EndpointPins(Settings(server=ServerSettings(endpoints=eps)))
    client = LlamaClient(a.url)
    calls: list[Any] = []

    async def connector(*args: Any, **kw: Any) -> Connection:
        calls.append(kw)
        props = await client.props()
        probe = ProbeResult(tok_s=99.0, predicted_n=16, predicted_ms=160.0)
        return Connection(client, props, ServerStatus(state="ready"), probe=probe)

    try:
        conn = await pins.connect(connector, Settings(), None, None, model="m.gguf")
        assert calls == [{"model": "m.gguf"}] and await pins.connection("here") is conn
        assert pins.watcher.speed("here") == 99.0
        assert (await place(pins, "s1"))[0] == "here"
    finally:
        await pins.aclose()
        await client.aclose()


async def test_a_connection_made_elsewhere_is_bound_to_its_endpoint(
    two: tuple[FakeLlamaServer, FakeLlamaServer],
) -> None:
    a, b = two
    eps = (EndpointSettings(managed=True), EndpointSettings(url=b.url, label="beta"))
    pins = EndpointPins(Settings(server=ServerSettings(endpoints=eps)))
    client = LlamaClient(a.url)
    try:
        conn = Connection(client, await client.props(), ServerStatus(state="ready"))
        assert pins.adopt(conn) is conn and await pins.connection("here") is conn
        assert pins.registry.get("here").url == a.url
    finally:
        await pins.aclose()
        await client.aclose()
