"""The placement policy (pure): new, resumed, foreign-busy slots and failover, with reasons."""

from __future__ import annotations

from fusion_tui.endpoints.placement import (
    ANY_SLOT,
    EndpointView,
    Pin,
    SlotLoad,
    check_pin,
    failover,
    model_key,
    place_new,
    place_resumed,
)

MODEL = "/models/SmolLM2-135M-Instruct-Q8_0.gguf"


def ep(label: str, *, tok_s: float | None = 50.0, busy: tuple[int, ...] = (),
       ours: tuple[int, ...] = (), n: int = 2, healthy: bool = True, model: str = MODEL,
       cached: dict[int, int] | None = None,
       queued: int = 0, pinned: frozenset[int] = frozenset(), slots_off: bool = False,
       error: str = "", files: frozenset[str] = frozenset()) -> EndpointView:  # fmt: skip
    slots = tuple(
        SlotLoad(i, i in busy or i in ours, i in ours, (cached or {}).get(i, 0)) for i in range(n)
    )
    return EndpointView(
        label, healthy, model, n, tok_s, None if slots_off else slots, queued, pinned,
        error=error, slot_files=files,
    )  # fmt: skip


def test_models_match_by_file_name_across_machines() -> None:
    assert model_key("/a/b/SmolLM2.gguf") == model_key("C:\\models\\smollm2.GGUF") == "smollm2"
    assert ep("a").serves("/elsewhere/SmolLM2-135M-Instruct-Q8_0.gguf")
    assert not ep("a").serves("/m/other.gguf")


def test_a_new_session_goes_to_the_fastest_endpoint_with_a_free_slot() -> None:
    d = place_new([ep("here", tok_s=40), ep("gpu", tok_s=120)], MODEL)
    assert (d.action, d.endpoint, d.slot, d.repinned) == ("use", "gpu", 0, True)
    assert d.reason == "gpu slot 0: ~120 tok/s, 0 queued (best of 2 endpoints serving the model)"


def test_an_unmeasured_endpoint_is_tried_rather_than_starved() -> None:
    d = place_new([ep("here", tok_s=40, queued=1), ep("gpu", tok_s=None)], MODEL)
    assert d.endpoint == "gpu" and "speed not measured yet" in d.reason


def test_queued_requests_share_the_speed() -> None:
    d = place_new([ep("here", tok_s=40), ep("gpu", tok_s=120, queued=3)], MODEL)
    assert d.endpoint == "here"  # 120 / 4 = 30 < 40


def test_never_used_slots_first_and_pinned_or_busy_slots_never() -> None:
    view = ep("a", n=4, cached={0: 500, 1: 0, 2: 0, 3: 20}, busy=(1,), pinned=frozenset({2}))
    assert place_new([view], MODEL).slot == 3  # 1 foreign-busy, 2 pinned, 3 holds least
    assert place_new([ep("a", n=2, busy=(0, 1))], MODEL).action == "wait"
    # every idle slot pinned to our other sessions: the server picks (as with one server)
    shared = place_new([ep("a", n=2, busy=(0,), pinned=frozenset({1}))], MODEL)
    assert (shared.action, shared.slot) == ("use", ANY_SLOT)
    assert "none is free: the server picks one" in shared.reason


def test_the_requested_model_and_health_decide_eligibility() -> None:
    views = [ep("a", model="/m/other.gguf", tok_s=999), ep("b", healthy=False), ep("c", tok_s=1)]
    assert place_new(views, MODEL).endpoint == "c"
    d = place_new(views[:2], MODEL)
    assert d.action == "wait" and "serves smollm2-135m-instruct-q8_0" in d.reason


def test_slots_off_means_let_the_server_choose() -> None:
    d = place_new([ep("a", slots_off=True)], MODEL)
    assert (d.endpoint, d.slot) == ("a", ANY_SLOT) and "its /slots is off" in d.reason


def test_a_resumed_session_goes_back_to_its_endpoint_and_slot() -> None:
    views = [ep("here", tok_s=500), ep("gpu", tok_s=10, files=frozenset({"s1"}))]
    d = place_resumed(Pin("gpu", 1), views, MODEL, session_id="s1", prompt_tokens=900)
    assert (d.action, d.endpoint, d.slot, d.cold_tokens) == ("use", "gpu", 1, 0)
    assert d.reason == "back to gpu slot 1, which holds its saved slot file"


def test_an_old_pin_without_endpoint_resumes_on_the_default() -> None:
    views = [ep("gpu", tok_s=500), ep("here")]
    d = place_resumed(Pin(None, 0), views, MODEL, default_endpoint="here")
    assert (d.endpoint, d.slot) == ("here", 0) and "holds its prompt" in d.reason


def test_a_slot_busy_with_another_client_is_never_named_and_the_pin_adapts() -> None:
    view = ep("gpu", n=3, busy=(1,))
    d = check_pin(Pin("gpu", 1), view, prompt_tokens=1234)
    assert (d.action, d.slot, d.cold_tokens, d.repinned) == ("use", 0, 1234, True)
    assert d.reason == (
        "slot 1 on gpu is busy with another client's work; re-pinned to slot 0, "
        "a cold re-read of 1,234 prompt tokens"
    )
    assert check_pin(Pin("gpu", 1), ep("gpu", ours=(1,))).reason == "pinned"  # our own request
    full = check_pin(Pin("gpu", 1), ep("gpu", n=2, busy=(0, 1)))
    assert full.action == "wait" and "no other slot is free" in full.reason


def test_a_vanished_slot_re_pins() -> None:
    d = check_pin(Pin("gpu", 5), ep("gpu", n=2), prompt_tokens=10)
    assert d.slot == 0 and "slot 5 no longer exists on gpu (2 slots now)" in d.reason


def test_failover_moves_to_the_same_model_with_a_stated_cost() -> None:
    views = [
        ep("gpu", healthy=False, error="connection refused"),
        ep("here"),
        ep("c", model="/x.gguf"),
    ]
    d = failover(Pin("gpu", 1), views, MODEL, prompt_tokens=2048)
    assert (d.action, d.endpoint, d.slot, d.moved_from, d.cold_tokens) == (
        "move",
        "here",
        0,
        "gpu",
        2048,
    )
    assert d.reason == (
        "gpu is unreachable (connection refused); moving to here slot 0: "
        "a cold re-read of 2,048 prompt tokens"
    )
    assert place_resumed(Pin("gpu", 1), views, MODEL, prompt_tokens=2048) == d


def test_failover_waits_when_nothing_else_serves_the_model() -> None:
    views = [ep("gpu", healthy=False), ep("c", model="/x.gguf")]
    d = failover(Pin("gpu", 1), views, MODEL)
    assert (d.action, d.endpoint) == ("wait", "gpu")
    want = "gpu is unreachable; no other reachable endpoint serves smollm2-135m-instruct-q8_0"
    assert d.reason == want + ", waiting"
    busy = failover(Pin("gpu", 1), [ep("gpu", healthy=False), ep("here", busy=(0, 1))], MODEL)
    assert busy.action == "wait" and "every slot on here is taken" in busy.reason
    pinned = [ep("gpu", healthy=False), ep("here", pinned=frozenset({0, 1}))]
    moved = failover(Pin("gpu", 1), pinned, MODEL, prompt_tokens=5)
    assert (moved.action, moved.endpoint, moved.slot, moved.cold_tokens) == ("move", "here", -1, 5)


def test_a_home_serving_another_model_now_is_a_failover() -> None:
    views = [ep("gpu", model="/m/other.gguf"), ep("here")]
    d = place_resumed(Pin("gpu", 0), views, MODEL, prompt_tokens=7)
    assert d.action == "move" and d.reason.startswith(
        "gpu now serves /m/other.gguf; moving to here"
    )


def test_an_empty_slot_anywhere_comes_before_evicting_an_idle_session() -> None:
    # "a" is faster, but both its idle slots still hold sessions left earlier; "b" is empty
    views = [ep("a", tok_s=60, cached={0: 700, 1: 500}), ep("b", tok_s=50)]
    d = place_new(views, MODEL)
    assert (d.action, d.endpoint, d.slot) == ("use", "b", 0)
    # with no empty slot anywhere, the best endpoint's least-held slot is taken, as before
    full = [ep("a", tok_s=60, cached={0: 700, 1: 500}), ep("b", tok_s=50, cached={0: 9, 1: 9})]
    assert (place_new(full, MODEL).endpoint, place_new(full, MODEL).slot) == ("a", 1)


def test_four_new_sessions_one_after_another_fill_both_endpoints() -> None:
    """Each session is left before the next starts (its pin released, its prompt kept in the
    slot): the four go to the four slots instead of taking turns on the first endpoint's."""
    held: dict[str, dict[int, int]] = {"a": {}, "b": {}}
    placed = []
    for k in range(4):
        d = place_new([ep(label, cached=held[label]) for label in ("a", "b")], MODEL)
        assert d.endpoint is not None
        placed.append((d.endpoint, d.slot))
        held[d.endpoint][d.slot] = 400 + k  # the session's prompt stays in the slot
    assert sorted(placed) == [("a", 0), ("a", 1), ("b", 0), ("b", 1)]


def test_a_failover_prefers_an_empty_slot_on_any_other_endpoint() -> None:
    views = [ep("gpu", healthy=False), ep("here", tok_s=90, cached={0: 300, 1: 200}), ep("c")]
    d = failover(Pin("gpu", 1), views, MODEL, prompt_tokens=100)
    assert (d.action, d.endpoint, d.slot) == ("move", "c", 0)
