"""The fake llama-server speaks the wire formats of the reference, and the watch works over it."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import httpx
import pytest

from fusion_tui.server.errors import SlotsUnavailable
from fusion_tui.server.types import Props, SlotState
from fusion_tui.slots.watch import FirstTokenStall, WatchConfig, WatchReport, watch_first_token
from tests.fakes.fake_server import FakeLlamaServer, Reply


@pytest.fixture
def srv() -> Iterator[FakeLlamaServer]:
    with FakeLlamaServer(total_slots=4, n_ctx=2048) as server:
        yield server


def stream(url: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    events = []
    with httpx.stream("POST", url + "/completion", json={**body, "stream": True}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream"
        for line in r.iter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line[6:]))
    return events


def test_health_props_and_fresh_slots(srv: FakeLlamaServer) -> None:
    assert httpx.get(srv.url + "/health").json() == {"status": "ok"}
    props = Props.from_json(httpx.get(srv.url + "/props").json())
    assert (props.total_slots, props.n_ctx, props.model_path) == (4, 2048, "/models/fake.gguf")
    slots = httpx.get(srv.url + "/slots").json()
    assert [s["id"] for s in slots] == [0, 1, 2, 3]
    assert set(slots[0]) == {"id", "n_ctx", "speculative", "is_processing"}
    srv.loading = True
    r = httpx.get(srv.url + "/health")
    assert r.status_code == 503 and r.json()["error"]["message"] == "Loading model"
    srv.loading = False
    srv.slots_enabled = False
    assert httpx.get(srv.url + "/slots").status_code == 501


def test_stream_with_progress_then_cache_reuse_on_the_same_slot(srv: FakeLlamaServer) -> None:
    srv.script(Reply(prompt_seconds=0.02, progress_steps=4), Reply())
    prompt = "x" * 400
    events = stream(srv.url, {"prompt": prompt, "return_progress": True})
    progress = [e["prompt_progress"] for e in events if "prompt_progress" in e]
    assert [p["processed"] for p in progress] == [0, 100, 200, 300, 400]
    assert all(p["total"] == 400 for p in progress)
    text = "".join(e["content"] for e in events if not e["stop"])
    assert text == "Hello from the fake."
    assert all(e["id_slot"] == -1 for e in events[:-1])
    final = events[-1]
    assert final["stop"] is True
    assert final["id_slot"] == 3  # a fresh server's LRU tie goes to the highest id
    assert final["timings"]["prompt_n"] + final["timings"]["cache_n"] == 400
    again = stream(srv.url, {"prompt": prompt + "y" * 100, "id_slot": -1})[-1]
    assert again["id_slot"] == 3
    assert again["timings"]["cache_n"] == 400 and again["timings"]["prompt_n"] == 100
    slot3 = httpx.get(srv.url + "/slots").json()[3]
    assert slot3["is_processing"] is False
    assert slot3["n_prompt_tokens"] == 500 + len("Hello from the fake.")


def test_named_slot_wraps_like_llama_server(srv: FakeLlamaServer) -> None:
    r = httpx.post(srv.url + "/completion", json={"prompt": "hi", "id_slot": 5})
    assert r.json()["id_slot"] == 1 and srv.requests[-1].slot == 1


def test_hang_in_prompt_shows_processing_until_released(srv: FakeLlamaServer) -> None:
    srv.script(Reply(hang="prompt"))
    result: dict[str, Any] = {}

    async def main() -> None:
        async with httpx.AsyncClient(base_url=srv.url) as client:

            async def request() -> None:
                r = await client.post("/completion", json={"prompt": "abc", "id_slot": 2})
                result["final"] = r.json()

            async with anyio.create_task_group() as tg:
                tg.start_soon(request)
                for _ in range(200):
                    slots = (await client.get("/slots")).json()
                    if slots[2]["is_processing"]:
                        break
                    await anyio.sleep(0.01)
                result["during"] = slots[2]
                srv.release()

    anyio.run(main)
    assert result["during"]["is_processing"] is True
    assert result["during"]["n_prompt_tokens_processed"] == 0
    assert result["final"]["id_slot"] == 2


def test_disconnect_mid_stream_frees_the_slot(srv: FakeLlamaServer) -> None:
    srv.script(Reply(disconnect_after=2))
    with (
        pytest.raises(httpx.RemoteProtocolError),
        httpx.stream("POST", srv.url + "/completion", json={"prompt": "p", "stream": True}) as r,
    ):
        list(r.iter_lines())
    assert not any(s["is_processing"] for s in httpx.get(srv.url + "/slots").json())


def test_scripted_http_error(srv: FakeLlamaServer) -> None:
    err = {"code": 400, "message": "too long", "type": "exceed_context_size_error"}
    srv.script(Reply(status=400, error=err))
    r = httpx.post(srv.url + "/completion", json={"prompt": "p", "stream": True})
    assert r.status_code == 400 and r.json()["error"]["type"] == "exceed_context_size_error"


def test_slot_save_restore_erase(srv: FakeLlamaServer) -> None:
    httpx.post(srv.url + "/completion", json={"prompt": "remember me", "id_slot": 0})
    saved = httpx.post(srv.url + "/slots/0?action=save", json={"filename": "s.bin"}).json()
    assert saved["n_saved"] > 0
    assert httpx.post(srv.url + "/slots/0?action=erase").json()["n_erased"] == saved["n_saved"]
    restored = httpx.post(srv.url + "/slots/1?action=restore", json={"filename": "s.bin"}).json()
    assert restored["n_restored"] == saved["n_saved"]
    final = httpx.post(srv.url + "/completion", json={"prompt": "remember me!", "id_slot": 1})
    assert final.json()["timings"]["cache_n"] == len("remember me")
    bad = httpx.post(srv.url + "/slots/1?action=restore", json={"filename": "../x"})
    assert bad.status_code == 400


async def _slots_over_http(client: httpx.AsyncClient) -> Sequence[SlotState]:
    r = await client.get("/slots")
    if r.status_code == 501:
        raise SlotsUnavailable(501, r.json()["error"]["message"])
    return [SlotState.from_json(s) for s in r.json()]


def _run_watch(srv: FakeLlamaServer, reply: Reply, cfg: WatchConfig) -> WatchReport | Exception:
    srv.script(reply)
    out: dict[str, WatchReport | Exception] = {}

    async def main() -> None:
        async with httpx.AsyncClient(base_url=srv.url) as client:
            first_byte = anyio.Event()

            async def request() -> None:
                body = {"prompt": "q" * 50, "id_slot": 1, "stream": True}
                async with client.stream("POST", "/completion", json=body) as r:
                    async for _ in r.aiter_bytes():
                        first_byte.set()

            async with anyio.create_task_group() as tg:
                tg.start_soon(request)
                try:
                    out["r"] = await watch_first_token(
                        lambda: _slots_over_http(client), 1, first_byte, config=cfg
                    )
                except FirstTokenStall as exc:
                    out["r"] = exc
                tg.cancel_scope.cancel()  # the stream is abandoned on a verdict

    anyio.run(main)
    return out["r"]


def test_watch_over_http_calls_a_lost_request_a_stall(srv: FakeLlamaServer) -> None:
    cfg = WatchConfig(
        poll_interval=0.05, poll_deadline=1, request_timeout=0.2, first_token_timeout=30
    )
    out = _run_watch(srv, Reply(hang="queued"), cfg)
    assert isinstance(out, FirstTokenStall) and out.slot == 1
    srv.release()


def test_watch_over_http_lets_a_slow_prompt_finish(srv: FakeLlamaServer) -> None:
    cfg = WatchConfig(
        poll_interval=0.05, poll_deadline=1, request_timeout=0.2, first_token_timeout=30
    )
    out = _run_watch(srv, Reply(prompt_seconds=1.0, progress_steps=10), cfg)
    assert isinstance(out, WatchReport)
    assert out.answered >= 1
