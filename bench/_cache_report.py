"""The figures and tables of bench/cache_reuse.py: per phase and side, from the rows of N runs.

Per phase and side: prompt tokens evaluated (every request: turns, titles, summaries and
read-aheads), the independent minimum (`_minimum.py`) and the ratio to it, the read-ahead's own
tokens and time, the titles' and summaries' tokens, the answers' length, first-token time from
Enter (median of the session turns: a turn's first request; in `agent` a turn is a task and its
later steps are `step_ttft_ms` in `--json`), the phase's whole wait (the sum of those first-token
times: the median lands on the typical turn, and in `long` the turns that compact, where the
sides differ most, are the few), the client's share of it (first-token time minus the
server's own prompt time, median: what a client adds, robust to a loaded box), refused turns and,
for `long`, the tokens of history each side still held at its last turn. Medians of the runs
with their spread (min-max).
"""

from __future__ import annotations

import statistics
from typing import Any

from _cache_common import Row, median_spread

KEYS = ("evaluated", "minimum", "vs_minimum", "readahead_tokens", "readahead_s", "keystroke_s",
        "side_tokens",
        "answer_tokens", "ttft_ms", "wait_ms", "step_ttft_ms", "client_ms", "refused", "held",
        "requests")  # fmt: skip


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def figures(rows: list[Row], phase: str) -> dict[str, float]:
    mine = [r for r in rows if r.label.phase == phase]
    turns = [r for r in mine if r.label.is_turn]
    # a turn's first token is its first request's (an agent task's first step, from the moment
    # the task was given; its later steps are the turn's own work); `step_ttft_ms`: every step
    firsts: dict[tuple[str, int, int], Row] = {}
    for r in turns:
        firsts.setdefault((r.label.session, r.label.turn, r.epoch), r)
    ttfts = [t for r in firsts.values() if not r.error and (t := r.ttft_ms) is not None]
    steps = [t for r in turns if not r.error and (t := r.ttft_ms) is not None]
    client = [(r.ttft_ms or 0) - r.prompt_ms for r in firsts.values() if not r.error and r.t_end]
    evaluated = sum(r.prompt_n for r in mine)
    minimum = sum(r.minimum for r in mine)
    answered = [r.predicted_n for r in turns if not r.error and r.t_end]
    last = max((r for r in turns if not r.error and r.t_end), key=lambda r: r.t0, default=None)
    return {
        "evaluated": evaluated,
        "minimum": minimum,
        "vs_minimum": evaluated / minimum if minimum else 0.0,
        "readahead_tokens": sum(r.prompt_n for r in mine if r.label.kind == "readahead"),
        "readahead_s": sum(r.seconds for r in mine if r.label.kind == "readahead"),
        "keystroke_s": sum(r.ahead_s for r in turns),
        "side_tokens": sum(r.prompt_n for r in mine if r.label.kind in ("side", "summary")),
        "answer_tokens": statistics.mean(answered) if answered else 0.0,
        "ttft_ms": _median(ttfts),
        "wait_ms": sum(ttfts),
        "step_ttft_ms": _median(steps),
        "client_ms": _median(client),
        "refused": sum(1 for r in firsts.values() if r.error),
        "held": last.total if last is not None else 0,
        "requests": len(mine),
    }


def _ratios(a: list[dict[str, float]], b: list[dict[str, float]], key: str) -> list[float]:
    return [x[key] / y[key] for x, y in zip(a, b, strict=True) if y[key]]


def summarize(runs: list[dict[str, list[Row]]], phases: list[str], sides: list[str],
              feature_phases: frozenset[str] = frozenset()) -> list[dict[str, Any]]:  # fmt: skip
    """One row per phase: each side's medians and spreads, fusion's ratios to the other sides.
    A phase in `feature_phases` compares different conversations: no token ratio for it."""
    out = []
    for phase in phases:
        per = {s: [figures(run[s], phase) for run in runs] for s in sides}
        row: dict[str, Any] = {"phase": phase, "feature": phase in feature_phases}
        for side, figs in per.items():
            for key in KEYS:
                med, lo, hi = median_spread([f[key] for f in figs])
                row[f"{side}_{key}"] = med
                row[f"{side}_{key}_spread"] = [lo, hi]
        for other in sides:
            if other == "fusion" or "fusion" not in per:
                continue
            for key, name in (("evaluated", "evaluated"), ("ttft_ms", "ttft"),
                              ("wait_ms", "wait"), ("step_ttft_ms", "step_ttft")):  # fmt: skip
                med, lo, hi = median_spread(_ratios(per["fusion"], per[other], key))
                row[f"{name}_ratio_{other}"], row[f"{name}_ratio_{other}_spread"] = med, [lo, hi]
        out.append(row)
    return out


def _spread(row: dict[str, Any], key: str, fmt: str, runs: int) -> str:
    lo, hi = row[f"{key}_spread"]
    return "" if runs == 1 else f" [{lo:{fmt}}-{hi:{fmt}}]"


def _by_side(row: dict[str, Any], sides: list[str], key: str, fmt: str) -> str:
    return " / ".join(f"{row[f'{s}_{key}']:{fmt}}" for s in sides)


def _vs(row: dict[str, Any], sides: list[str], name: str, runs: int) -> str:
    """fusion / each other side (median ratio of the runs, its spread)."""
    out = []
    for other in sides[1:]:
        key = f"{name}_ratio_{other}"
        spread = _spread(row, key, ".2f", runs) if key in row else ""
        out.append(f"{row.get(key, 0):.2f}{spread}")
    return " / ".join(out)


def print_tables(rows: list[dict[str, Any]], sides: list[str], runs: int) -> None:
    names = " / ".join(sides)
    others = " / ".join(f"f:{s}" for s in sides[1:])
    print(f"\nPrompt tokens evaluated; sides {names}; medians of {runs} run(s):")
    print(f"{'phase':<19} {'evaluated':>24} {'minimum':>18} {'vs minimum':>17} "
          f"{others:>24} {'read-ahead':>10} {'titles+summ.':>16} {'answer tok':>12}")  # fmt: skip
    for r in rows:
        feature = r["feature"]
        vs = "(feature)" if feature else _by_side(r, sides, "vs_minimum", ".2f")
        ratio = "(feature)" if feature else _vs(r, sides, "evaluated", runs)
        print(f"{r['phase']:<19} {_by_side(r, sides, 'evaluated', ',.0f'):>24} "
              f"{_by_side(r, sides, 'minimum', ',.0f'):>18} {vs:>17} {ratio:>24} "
              f"{r.get('fusion_readahead_tokens', 0):>10,.0f} "
              f"{_by_side(r, sides, 'side_tokens', ',.0f'):>16} "
              f"{_by_side(r, sides, 'answer_tokens', '.0f'):>12}")  # fmt: skip
    print(
        f"\nFirst token from Enter (ms, median turn; whole wait: the sum over the turns, s); "
        f"sides {names}; medians of {runs} run(s):"
    )
    print(f"{'phase':<19} {'first token':>20} {others:>24} {'whole wait s':>16} {others:>24} "
          f"{'client ms':>16} {'read-ahead s':>12} {'keystroke s':>11} {'refused':>9} "
          f"{'held tokens':>20}")  # fmt: skip
    for r in rows:
        held = _by_side(r, sides, "held", ",.0f") if r["phase"] == "long" else ""
        wait = " / ".join(f"{r[f'{s}_wait_ms'] / 1000:.1f}" for s in sides)
        print(f"{r['phase']:<19} {_by_side(r, sides, 'ttft_ms', ',.0f'):>20} "
              f"{_vs(r, sides, 'ttft', runs):>24} {wait:>16} {_vs(r, sides, 'wait', runs):>24} "
              f"{_by_side(r, sides, 'client_ms', '.0f'):>16} "
              f"{r.get('fusion_readahead_s', 0):>12.1f} {r.get('fusion_keystroke_s', 0):>11.1f} "
              f"{_by_side(r, sides, 'refused', '.0f'):>9} {held:>20}")  # fmt: skip


def answer_lengths(run: dict[str, list[Row]], sides: list[str]) -> list[str]:
    """Each turn's answer length per side (`--real-answers`: the model's own answers)."""
    keys: dict[tuple[str, str, int], dict[str, int]] = {}
    for side in sides:
        for r in run[side]:
            if r.label.is_turn and not r.error and r.t_end:
                lab = r.label
                keys.setdefault((lab.phase, lab.session, lab.turn), {})[side] = r.predicted_n
    out = []
    for (phase, session, turn), by in keys.items():
        lens = " / ".join(str(by.get(s, "-")) for s in sides)
        out.append(f"{phase:<20} {session:<4} t{turn:<4} {lens}")
    return out
