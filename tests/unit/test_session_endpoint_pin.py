"""Sessions pinned to (endpoint, slot): schema 2 adds `pinned_endpoint`, version-1 files load."""

from __future__ import annotations

import json

from fusion_tui.paths import AppPaths
from fusion_tui.sessions.model import SCHEMA_VERSION, Message, RequestRecord, Session
from fusion_tui.sessions.store import SessionStore


def test_a_version_1_file_loads_on_the_default_endpoint_and_is_backed_up(
    app_home: AppPaths,
) -> None:
    store = SessionStore.default(app_home)
    s = Session.new(title="old", now=1_700_000_000.0)
    s.messages = [Message("user", "hi")]
    s.pinned_slot = 2
    path = store.save(s)
    v1 = json.loads(path.read_text())
    del v1["pinned_endpoint"]
    v1["schema_version"] = 1
    path.write_text(json.dumps(v1))
    loaded = SessionStore(store.directory).load(s.id)
    assert (loaded.pinned_slot, loaded.pinned_endpoint) == (2, None)
    assert path.with_name(path.name + ".schema1.bak").exists()
    assert json.loads(path.read_text())["schema_version"] == SCHEMA_VERSION == 2


def test_an_endpoint_pin_and_request_endpoint_round_trip(app_home: AppPaths) -> None:
    store = SessionStore.default(app_home)
    s = Session.new(title="multi", now=1_700_000_000.0)
    s.pinned_slot, s.pinned_endpoint = 1, "gpu-box"
    s.requests = [
        RequestRecord(1, 40, 0, 12.0, 30.0, 1.0, endpoint="gpu-box", moved_from="here"),
        RequestRecord(0, 5, 35, 3.0, 30.0, 2.0),
    ]
    store.save(s)
    loaded = SessionStore(store.directory).load(s.id)
    assert loaded == s
    assert loaded.requests[0].to_dict()["moved_from"] == "here"
    # one endpoint: the request event is exactly what it was before (no new keys)
    assert set(loaded.requests[1].to_dict()) == {
        "id_slot", "prompt_n", "cache_n", "ttft_ms", "predicted_per_second", "time", "side_call",
    }  # fmt: skip
