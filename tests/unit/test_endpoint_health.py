"""Registry, health watcher and `status --json` endpoints against fake servers on 127.0.0.1."""

from __future__ import annotations

import json
import time

import anyio
import pytest

from fusion_tui.config.settings import EndpointSettings, ServerSettings, Settings
from fusion_tui.endpoints.health import HealthWatcher
from fusion_tui.endpoints.model import Endpoint
from fusion_tui.endpoints.placement import place_new
from fusion_tui.endpoints.registry import EndpointNotReady, EndpointRegistry, UnknownEndpoint
from fusion_tui.endpoints.status import endpoints_json
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.fakes.hostile import Hostile


def two(url_a: str, url_b: str) -> Settings:
    return Settings(
        server=ServerSettings(
            endpoints=(
                EndpointSettings(url=url_a, label="a"),
                EndpointSettings(url=url_b, label="b", api_key_env="B_KEY"),
            )
        )
    )


async def test_the_watcher_sees_both_servers_and_a_dead_one() -> None:
    with FakeLlamaServer(total_slots=2, n_ctx=1024) as a, FakeLlamaServer(total_slots=3) as b:
        registry = EndpointRegistry([Endpoint("a", a.url), Endpoint("b", b.url)])
        watcher = HealthWatcher(registry, timeout=2.0)
        try:
            first = await watcher.poll_once()
            assert [(h.label, h.healthy, h.total_slots, h.n_ctx) for h in first] == [
                ("a", True, 2, 1024), ("b", True, 3, 4096),
            ]  # fmt: skip
            assert first[0].model == "fake" and len(first[0].slots or ()) == 2
            b.stop()
            second = await watcher.poll_once()
            assert second[1].healthy is False and "cannot reach" in second[1].error
            assert watcher.changes({"a": True, "b": True}) == [second[1]]
        finally:
            await registry.aclose()


async def test_a_hanging_endpoint_is_unhealthy_at_the_probe_deadline() -> None:
    with FakeLlamaServer() as a:
        a.slots_hang = True
        registry = EndpointRegistry([Endpoint("a", a.url)])
        watcher = HealthWatcher(registry, timeout=0.5)
        try:
            t0 = time.monotonic()
            (h,) = await watcher.poll_once()
            assert time.monotonic() - t0 < 2.5
            assert not h.healthy and h.error
        finally:
            a.release()
            await registry.aclose()


async def test_hostile_props_make_an_endpoint_unhealthy_not_a_crash() -> None:
    with FakeLlamaServer() as a:
        a.hostile = Hostile("huge_body", ("/props",))
        registry = EndpointRegistry([Endpoint("a", a.url)])
        try:
            (h,) = await HealthWatcher(registry).poll_once()
        finally:
            await registry.aclose()
    assert not h.healthy and "bytes for /props" in h.error


async def test_views_mark_foreign_busy_slots_and_placement_avoids_them() -> None:
    with FakeLlamaServer(total_slots=2) as a, FakeLlamaServer(total_slots=2) as b:
        a.script(Reply(hang="prompt"))
        registry = EndpointRegistry([Endpoint("a", a.url), Endpoint("b", b.url)])
        watcher = HealthWatcher(registry)
        watcher.record_speed("a", 100.0)
        watcher.record_speed("b", 10.0)
        async with anyio.create_task_group() as tg:

            async def other_client() -> None:  # someone else's request on server a
                async with registry.client("a").http._http.stream(
                    "POST", "/completion", json={"prompt": "x", "id_slot": 0, "stream": True}
                ) as resp:
                    async for _ in resp.aiter_bytes():
                        break

            tg.start_soon(other_client)
            for _ in range(100):
                if a.slot_json()[0]["is_processing"]:
                    break
                await anyio.sleep(0.02)
            await watcher.poll_once()
            views = watcher.views(pinned={"a": {1}})
            assert views[0].foreign_busy == 1 and views[0].free_slots() == []
            d = place_new(views)
            assert (d.endpoint, d.slot) == ("b", 0)  # a is faster but has no free slot
            a.release()
            tg.cancel_scope.cancel()
        await registry.aclose()


async def test_keys_are_read_at_use_time_and_go_only_to_their_endpoint() -> None:
    with FakeLlamaServer() as a, FakeLlamaServer() as b:
        env: dict[str, str] = {}
        registry = EndpointRegistry(
            [Endpoint("a", a.url), Endpoint("b", b.url, False, "B_KEY")], env=env
        )
        try:
            await registry.client("b").health()
            env["B_KEY"] = "k-1"  # set while the app runs: picked up by the next call
            await registry.client("b").health()
            await registry.client("a").health()
            with pytest.raises(UnknownEndpoint, match="known: a, b"):
                registry.client("c")
        finally:
            await registry.aclose()
        assert [r.headers.get("authorization") for r in b.requests] == [None, "Bearer k-1"]
        assert all("authorization" not in r.headers for r in a.requests)
    with pytest.raises(EndpointNotReady):
        EndpointRegistry([Endpoint("here", None, True)]).client()


async def test_status_json_lists_every_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeLlamaServer(total_slots=2) as a:
        found = await endpoints_json(two(a.url, "http://127.0.0.1:9"), None, env={"B_KEY": "zz"})
    assert [(e["label"], e["url"], e["healthy"], e["total_slots"]) for e in found] == [
        ("a", a.url, True, 2), ("b", "http://127.0.0.1:9", False, None),
    ]  # fmt: skip
    assert found[0]["model"] == "fake" and "zz" not in json.dumps(found)
    (managed,) = await endpoints_json(Settings(), None)
    assert managed == {
        "label": "here", "url": None, "healthy": False, "model": None, "total_slots": None,
        "n_ctx": None, "tok_s": None, "error": "not running", "managed": True,
    }  # fmt: skip


async def test_watch_reports_an_endpoint_going_away() -> None:
    with FakeLlamaServer() as a, FakeLlamaServer() as b:
        registry = EndpointRegistry([Endpoint("a", a.url), Endpoint("b", b.url)])
        watcher = HealthWatcher(registry, timeout=5.0)  # a loaded box must not flap "a"
        seen: list[tuple[str, bool]] = []
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: watcher.watch(lambda h: seen.append((h.label, h.healthy)), interval=0.05)
            )
            with anyio.fail_after(10):
                while (h := watcher.latest("b")) is None or not h.healthy:
                    await anyio.sleep(0.05)
            b.stop()
            with anyio.fail_after(30):
                while not seen:
                    await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        await registry.aclose()
    assert seen == [("b", False)]


async def test_measure_uses_the_slot_it_is_given_and_records_the_speed() -> None:
    with FakeLlamaServer(total_slots=2) as a:
        a.script(Reply(text=["a", "b", "c", "d"], chunk_delay=0.01))
        registry = EndpointRegistry([Endpoint("a", a.url), Endpoint("down", "http://127.0.0.1:9")])
        watcher = HealthWatcher(registry)
        try:
            rate = await watcher.measure("a", 1)
            assert await watcher.measure("down", 0, timeout=5) is None
        finally:
            await registry.aclose()
        assert rate is not None and rate > 0 and watcher.speed("a") == rate
        assert a.requests[-1].body["id_slot"] == 1 and a.requests[-1].slot == 1
