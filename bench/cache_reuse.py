"""Benchmark: prompt tokens evaluated and first-token time, fusion-tui's slot policy against a
plain OpenAI-style client (whole history every time, no `id_slot`, no pinning, no saved slots:
what oterm, elia and opencode send), on the real server, same launch settings (the product's
own plan: `server.connect.plan_for`), in the same run.

Phases (`--phases a,b`). Each policy has its own daemon, launched with the same settings; the
two run side by side and the policies take turns step by step (ABBA order, never two requests of
different policies at once), so load and clock drift on a shared machine fall on both alike.
  sequential      K sessions × R rounds, round robin; each session is titled (a side call) after
                  its first turn, as the TUI and plain clients do
  concurrent      two of those sessions at once for R rounds
  resume          a new app instance sends each session's next turn on the same server
  restart         the daemon restarts (fusion-tui saves the slots first), then session 0 resumes
  oversubscribed  8 sessions round robin on 4 slots, with the server's RAM prompt cache at its
                  default (`oversubscribed`) and with --cache-ram 0 (`oversubscribed-ram0`)
  long            one session that grows past its slot's context; the plain client drops its
                  oldest exchanges when a turn is refused and sends it again (a rolling
                  window, `--plain-overflow rolling`) or stops there (`stop`: refused turns
                  are counted)
  agent           agent tasks in two workspaces A and B alternating (`AgentHost`/`SessionRunner`)
  swa             `sequential` and `restart` on Gemma 3 270M (sliding window) without --swa-full

fusion-tui's driver runs each turn as the TUI does: the first keystroke of the message tells the
backend (`read_ahead`), which makes the session's slot ready (a restore, room made) and reads the
next prompt's opening (the last answer's end, the next user header) into it; the user is taken
to type for longer than that (about 40 ms here), and the first token counts from Enter. Those
read-aheads are requests of their own in the counts (`readahead` in the trace).

Per phase: prompt tokens evaluated (side calls and read-aheads included), the minimum (the tokens
new in each request), first-token time (median of the session turns: a turn's first request,
from the moment the turn is asked, gate, `/slots` polls and restores not done at the keystroke
included; in `agent` a turn is a task, its later steps are its own work and their median is
`step_ttft_ms` in `--json`), the client's share of it (first-token time minus
the server's own prompt time, median: what a policy adds, robust to a loaded box), refused
turns, and fusion / plain. `--runs N` repeats
everything N times and prints medians with the spread; `--trace` prints every request (session,
slot asked -> served, cached, evaluated, minimum, time before the send and in `/slots` polls,
server prompt time, first token, and why a re-read happened).

    .venv/bin/python bench/cache_reuse.py [--phases sequential,restart] [--runs 3] [--trace]
        [--sessions 3] [--rounds 3] [--words 150] [--max-tokens 8] [--parallel 4] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cache_common import (
    Recorder,
    Row,
    Server,
    ServerConfig,
    annotate,
    median_spread,
    print_trace,
)
from _cache_phases import (
    Driver,
    FusionDriver,
    PlainDriver,
    Step,
    agent,
    concurrent,
    leave,
    long,
    oversubscribed,
    relaunch,
    restart,
    resume,
    sequential,
)

from fusion_tui.demo_model import demo_model_path

ALL = ("sequential", "concurrent", "resume", "restart", "oversubscribed", "oversubscribed-ram0",
       "long", "agent", "swa-sequential", "swa-restart")  # fmt: skip
ALIASES = {"oversubscribed": ("oversubscribed", "oversubscribed-ram0"),
           "swa": ("swa-sequential", "swa-restart")}  # fmt: skip


def groups(args: argparse.Namespace) -> list[tuple[ServerConfig, list[str]]]:
    """Which daemons to launch for the chosen phases, and the phases each one serves."""
    demo = Path(args.model) if args.model else demo_model_path()
    if demo is None:
        raise SystemExit("no model: pass --model or install the demo model")
    out = []
    main = [p for p in (*ALL[:5], "long", "agent") if p in args.phases]
    if main:
        out.append((ServerConfig("demo", demo), main))
    if "oversubscribed-ram0" in args.phases:
        out.append((ServerConfig("demo-ram0", demo, cache_ram=0), ["oversubscribed-ram0"]))
    swa = [p for p in ("swa-sequential", "swa-restart") if p in args.phases]
    if swa:
        from tests.models import GEMMA3_INSTALL_HINT, assemble_gemma3

        gemma = assemble_gemma3()
        if gemma is None:
            raise SystemExit("the swa phases need Gemma 3 270M: " + GEMMA3_INSTALL_HINT)
        out.append((ServerConfig("gemma3", gemma, swa_full="off"), swa))
    return out


def steps_for(phases: list[str], args: argparse.Namespace, per_slot_ctx: int) -> list[Step]:
    """The group's phases as one list of steps (each later run on both policies in turn)."""
    chosen = set(phases)
    out: list[Step] = []
    if chosen & {"sequential", "concurrent", "resume", "restart"}:
        out += sequential(args)  # resume/restart continue these sessions (counted if chosen)
        if "concurrent" in chosen:
            out += concurrent(args)
        out += resume(args)
        out += restart(args)
    for phase in ("oversubscribed", "oversubscribed-ram0", "long", "agent"):
        if phase not in chosen:
            continue
        if out:
            out += relaunch(args)
        if phase == "long":
            out += long(args, per_slot_ctx)
        elif phase == "agent":
            out += agent(args)
        else:
            out += oversubscribed(args, phase)
    if "swa-sequential" in chosen or "swa-restart" in chosen:
        out += sequential(args, "swa-sequential", "w")
        out += leave(args)
        out += restart(args, "swa-restart", "w0")
    return out


PAUSE_S = 0.2
"""Between two policies' steps: the other daemon's worker threads stop spinning first."""


async def run_group(drivers: list[Driver], steps: list[Step]) -> None:
    """Both policies, step by step, in ABBA order: load and clock drift on a shared machine fall
    on both alike (each policy has its own daemon; their requests never overlap)."""
    for i, step in enumerate(steps):
        order = drivers if i % 2 == 0 else drivers[::-1]
        for d in order:
            await step(d)
            await asyncio.sleep(PAUSE_S)
    for d in drivers:
        await d.close()


async def one_run(args: argparse.Namespace) -> dict[str, list[Row]]:
    rows: dict[str, list[Row]] = {"plain": [], "fusion": []}
    recorders: list[Recorder] = []
    for cfg, phases in groups(args):
        with contextlib.ExitStack() as stack:
            drivers: list[Driver] = []
            servers: list[Server] = []
            for policy, cls in (("plain", PlainDriver), ("fusion", FusionDriver)):
                tmp = tempfile.TemporaryDirectory(prefix="fusion-bench-")
                home = Path(stack.enter_context(tmp))
                server = Server(home, cfg, args)
                rec = Recorder(policy)
                servers.append(server)
                drivers.append(cls(server, rec, args, home))
                recorders.append(rec)
            try:
                for server, d in zip(servers, drivers, strict=True):
                    await server.launch()
                    d.rec.epoch += 1
                await run_group(drivers, steps_for(phases, args, servers[0].plan.per_slot_ctx))
            finally:
                for server in servers:
                    await server.stop()
            for d in drivers:
                rows[d.rec.policy] += d.rec.rows
    best_side: dict[tuple[str, str, str, int], int] = {}
    firsts = set()
    for row in rows["plain"] + rows["fusion"]:
        first = row.label.is_turn and (row.policy, row.label.session) not in firsts
        firsts.add((row.policy, row.label.session))
        if (row.label.kind == "side" or first) and not row.error:
            lab = row.label
            key = (lab.phase, lab.session, lab.kind, lab.turn)
            best_side[key] = min(best_side.get(key, row.prompt_n), row.prompt_n)
    for policy_rows in rows.values():
        annotate(policy_rows, best_side)
    if args.trace:
        print_trace(rows["plain"] + rows["fusion"], recorders)
    return rows


def figures(rows: list[Row], phase: str) -> dict[str, float]:
    mine = [r for r in rows if r.label.phase == phase]
    turns = [r for r in mine if r.label.is_turn]
    # a turn's first token is its first request's (an agent task's first step, from the moment
    # the task was given; its later steps are the turn's own work); `step_ttft_ms`: every step
    firsts: dict[tuple[str, int, int], Row] = {}
    for r in turns:
        firsts.setdefault((r.label.session, r.label.turn, r.epoch), r)
    ttfts = sorted(t for r in firsts.values() if not r.error and (t := r.ttft_ms) is not None)
    steps = sorted(t for r in turns if not r.error and (t := r.ttft_ms) is not None)
    mid = ttfts[len(ttfts) // 2] if ttfts else 0.0
    if ttfts and len(ttfts) % 2 == 0:
        mid = (ttfts[len(ttfts) // 2 - 1] + ttfts[len(ttfts) // 2]) / 2
    client = sorted((r.ttft_ms or 0) - r.prompt_ms for r in turns if not r.error and r.t_end)
    return {
        "client_ms": client[len(client) // 2] if client else 0.0,
        "evaluated": sum(r.prompt_n for r in mine),
        "minimum": sum(r.minimum for r in mine),
        "ttft_ms": mid,
        "step_ttft_ms": steps[len(steps) // 2] if steps else 0.0,
        "refused": sum(1 for r in turns if r.error),
        "requests": len(mine),
    }


def summarize(runs: list[dict[str, list[Row]]], phases: list[str]) -> list[dict[str, Any]]:
    out = []
    for phase in phases:
        per = {p: [figures(run[p], phase) for run in runs] for p in ("fusion", "plain")}
        row: dict[str, Any] = {"phase": phase}
        for policy, figs in per.items():
            for key in ("evaluated", "minimum", "ttft_ms", "step_ttft_ms", "client_ms", "refused"):
                med, lo, hi = median_spread([f[key] for f in figs])
                row[f"{policy}_{key}"] = med
                row[f"{policy}_{key}_spread"] = [lo, hi]
        ratios_e = [f["evaluated"] / p["evaluated"] for f, p in zip(per["fusion"], per["plain"],
                    strict=True) if p["evaluated"]]  # fmt: skip
        ratios_t = [f["ttft_ms"] / p["ttft_ms"] for f, p in zip(per["fusion"], per["plain"],
                    strict=True) if p["ttft_ms"]]  # fmt: skip
        row["evaluated_ratio"], *row["evaluated_ratio_spread"] = median_spread(ratios_e)
        row["ttft_ratio"], *row["ttft_ratio_spread"] = median_spread(ratios_t)
        ratios_s = [f["step_ttft_ms"] / p["step_ttft_ms"] for f, p in zip(per["fusion"],
                    per["plain"], strict=True) if p["step_ttft_ms"]]  # fmt: skip
        row["step_ttft_ratio"], *row["step_ttft_ratio_spread"] = median_spread(ratios_s)
        minimum = row["fusion_minimum"]
        row["fusion_vs_minimum"] = row["fusion_evaluated"] / minimum if minimum else None
        out.append(row)
    return out


def print_table(rows: list[dict[str, Any]], runs: int) -> None:
    def spread(row: dict[str, Any], key: str, fmt: str) -> str:
        lo, hi = row[f"{key}_spread"]
        return "" if runs == 1 else f" [{lo:{fmt}}–{hi:{fmt}}]"

    print(f"{'phase':<20} {'evaluated fusion / plain (min)':>32} {'ratio':>7} "
          f"{'1st token ms fusion / plain':>28} {'ratio':>7} {'client ms f/p':>14} "
          "refused f/p")  # fmt: skip
    for r in rows:
        ev = f"{r['fusion_evaluated']:,.0f} / {r['plain_evaluated']:,.0f}"
        ev += f" ({r['fusion_minimum']:,.0f})"
        tt = f"{r['fusion_ttft_ms']:,.0f} / {r['plain_ttft_ms']:,.0f}"
        print(
            f"{r['phase']:<20} {ev:>32} {r['evaluated_ratio']:>7.3f} {tt:>28} "
            f"{r['ttft_ratio']:>7.2f}{spread(r, 'ttft_ratio', '.2f')} "
            f"{r['fusion_client_ms']:>6.0f}/{r['plain_client_ms']:<6.0f} "
            f"{r['fusion_refused']:.0f}/{r['plain_refused']:.0f}"
        )


async def main(args: argparse.Namespace) -> None:
    runs = []
    t0 = time.monotonic()
    for i in range(args.runs):
        rows = await one_run(args)
        runs.append(rows)
        if args.trace:
            print(f"--- run {i + 1} done", file=sys.stderr)
    phases = [p for p in ALL if p in args.phases]
    table = summarize(runs, phases)
    if args.json:
        print(json.dumps({"phases": table, "runs": args.runs, "elapsed_s": time.monotonic() - t0}))
        return
    print_table(table, args.runs)
    print(f"{args.runs} run(s), {time.monotonic() - t0:.0f} s; ratios are medians of the runs "
          "[min–max]; (min) is the fusion run's minimum possible")  # fmt: skip


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", default="sequential,concurrent,resume,restart,oversubscribed,"
                    "long,agent,swa", help="comma-separated; `oversubscribed` and `swa` are both "
                    "of their variants")  # fmt: skip
    ap.add_argument("--runs", type=int, default=1, help="repeat N times; medians with spread")
    ap.add_argument("--sessions", type=int, default=3, help="K sessions (<= parallel - 1)")
    ap.add_argument("--rounds", type=int, default=3, help="R rounds per phase")
    ap.add_argument("--words", type=int, default=150, help="opening message size (~3 tok/word)")
    ap.add_argument("--over-sessions", type=int, default=8, help="sessions in oversubscribed")
    ap.add_argument("--long-words", type=int, default=600, help="words per turn in long")
    ap.add_argument("--long-turns", type=int, default=0, help="turns in long (0: past the slot)")
    ap.add_argument("--agent-tasks", type=int, default=2, help="tasks per workspace in agent")
    ap.add_argument("--agent-steps", type=int, default=2, help="steps per agent task")
    ap.add_argument("--plain-overflow", choices=("rolling", "stop"), default="rolling",
                    help="what the plain client does when a turn would not fit its slot (long):"
                    " drop the oldest exchanges and send again (a rolling window),"
                    " or stop (the turn is refused)")  # fmt: skip
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=None, help="instead of the demo model")
    ap.add_argument("--exclusive-gate", action="store_true", help="fusion: one gate per server "
                    "that skips the /slots busy probe (SlotGate(exclusive=...))")  # fmt: skip
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--trace", action="store_true", help="every request on stderr")
    args = ap.parse_args(argv)
    chosen: list[str] = []
    for name in (p.strip() for p in args.phases.split(",") if p.strip()):
        if name not in ALL and name not in ALIASES:
            ap.error(f"unknown phase {name!r}; choose from {', '.join(ALL)}, swa")
        chosen += ALIASES.get(name, (name,))
    args.phases = chosen
    if not 2 <= args.sessions < args.parallel:
        ap.error("--sessions must be at least 2 and below --parallel (one slot for side calls)")
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))
