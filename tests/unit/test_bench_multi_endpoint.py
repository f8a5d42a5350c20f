"""The pure parts of bench/multi_endpoint.py: the policies' order across runs, the sticky-hash
ring, the session schedule and the summary. A bias here (one policy always first, a ring that
moves sessions) would show up as a placement win or loss that is the bench's own."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

import multi_endpoint as me


def test_policies_alternate_abba_across_runs() -> None:
    policies = ("fusion", "sticky-hash", "one-server", "round-robin")
    assert me.run_order(0, policies) == list(policies)
    assert me.run_order(1, policies) == list(reversed(policies))
    assert me.run_order(2, policies) == list(policies)


def test_ring_keeps_a_session_on_its_server_and_moves_it_to_the_next_one() -> None:
    labels = ["a", "b"]
    first = me.ring_order("1:session-3", labels)
    assert sorted(first) == labels
    assert me.ring_order("1:session-3", labels) == first  # sticky: same key, same server
    homes = {me.ring_order(f"1:session-{k}", labels)[0] for k in range(20)}
    assert homes == {"a", "b"}  # sessions spread over both


def test_schedule_opens_at_most_four_sessions_and_gives_each_its_turns() -> None:
    order, still_open = me.schedule(seed=3, turns=4)
    assert sorted(order) == sorted(k for k in range(me.SESSIONS) for _ in range(4))
    open_: set[int] = set()
    left = dict.fromkeys(range(me.SESSIONS), 4)
    for k in order:
        open_.add(k)
        assert len(open_) <= me.MAX_OPEN
        left[k] -= 1
        if not left[k] and k not in still_open:
            open_.discard(k)
    assert set(still_open) <= set(range(me.SESSIONS))
    assert me.schedule(seed=3, turns=4) == (order, still_open)  # the same for every policy


def _tally(evaluated: int, minimum: int, ttfts: list[float], **kw: object) -> me.Tally:
    t = me.Tally(evaluated=evaluated, minimum=minimum, ttft_ms=ttfts)
    for k, v in kw.items():
        setattr(t, k, v)
    return t


def test_summary_takes_each_runs_median_first_token_and_fusions_ratios() -> None:
    runs = [
        {"fusion": {"main": _tally(100, 90, [10, 20, 90]), "failover": me.Tally()},
         "one-server": {"main": _tally(200, 90, [40, 40, 40]), "failover": me.Tally()}},
        {"fusion": {"main": _tally(110, 90, [30, 30, 30]), "failover": me.Tally()},
         "one-server": {"main": _tally(220, 90, [60]), "failover": me.Tally()}},
    ]  # fmt: skip
    table = me.summarize(runs, ["fusion", "one-server"])
    fus = table["rows"]["fusion/main"]
    assert fus["ttft_ms"] == [20.0, 30.0]  # per-run medians, not means
    assert fus["ratio"] == [pytest.approx(100 / 90, abs=1e-4), pytest.approx(110 / 90, abs=1e-4)]
    assert "fusion/failover" not in table["rows"]  # no turns there: not reported
    vs = table["fusion_vs"]["one-server/main"]
    assert vs["evaluated"] == [0.5, 0.5] and vs["ttft"] == [0.5, 0.5]


def test_spread_prints_median_and_range() -> None:
    assert me.spread([1.0, 3.0, 2.0], ".1f") == "2.0 (1.0-3.0)"
    assert me.spread([]) == "-"


def test_parse_rejects_an_unknown_policy() -> None:
    with pytest.raises(SystemExit):
        me.parse(["--policies", "fusion,nginx"])
    assert me.parse(["--policies", "round-robin,fusion"]).policies == ["fusion", "round-robin"]
