"""Benchmark: prompt tokens evaluated and first-token time, fusion-tui's slot policy against a
plain OpenAI-style client (whole history every time, no `id_slot`, no pinning, no saved slots:
what oterm, elia and opencode send), on real servers, in the same run.

Sides (`--sides`), each with a llama-server of its own, launched afresh per phase group:
  fusion      fusion-tui's client (`_cache_drivers.py`) on fusion's own launch plan
              (`server.connect.plan_for`: split KV, idle slots not copied to RAM, a slot save path)
  plain       the plain client (`_cache_plain.py`) on a stock server, started as its users start
              it (`_servers.py`: `llama-server -m MODEL -c N`, 4 slots, every other setting at
              the server's defaults: unified KV, RAM prompt cache, idle slots cached)
  plain@plan  the plain client on fusion's plan: fusion against it is what the policy adds,
              it against `plain` what the launch plan adds
Both command lines are printed. The sides take turns step by step (ABC, CBA, ...; never two
requests of different sides at once), so load and clock drift on a shared machine fall on all.

Phases (`--phases a,b`):
  sequential          K sessions × R rounds, round robin; each session titled (a side call)
                      after its first turn, by both clients
  sequential-notitle  the same on sessions of their own, the plain client sending no title
                      (fusion's TUI titles every session)
  concurrent          two of the sequential sessions at once for R rounds
  resume              a new app instance sends each session's next turn on the same server
  restart             the daemon restarts (fusion-tui saves the slots first), then session 0 resumes
  oversubscribed      8 sessions round robin on 4 slots, with the server's RAM prompt cache at
                      its default (`oversubscribed`) and with --cache-ram 0 on every side
                      (`oversubscribed-ram0`)
  long                one session that grows past its slot's context; both sides compact the same
                      way (the plain one by a summary request of its own, as aider does), or
                      (`--plain-overflow rolling|stop`) the plain client drops its oldest
                      exchanges or stops: then a feature comparison, not a token one
  agent               agent tasks in two workspaces A and B alternating (`AgentHost`,
                      `SessionRunner`)
  swa                 `sequential` and `restart` on Gemma 3 270M (sliding window), no --swa-full

Answers run to `--max-tokens` (256) on every side (`ignore_eos`; agent steps excepted), so both
sides read the same answers back; `--real-answers` keeps the model's own (temperature 0) and
prints every turn's answer length per side. The first token counts from Enter: a typed message
takes its typing time at 70 wpm from its first keystroke (a pasted one none), and what the client
does meanwhile (fusion's read-ahead: a restore, room made, the next prompt's opening read) is in
the turn's first token only as far as it runs past Enter (`_keyboard.py`).

Per phase and side (`_cache_report.py`): prompt tokens evaluated, the independent minimum (the
tokens new given the conversation, by the server's `/tokenize`, the same rule for every side:
`_minimum.py`) and each side's ratio to it, read-ahead tokens and time, titles' and summaries'
tokens, answer length, first-token time, the client's share of it, refused turns, and for `long`
the tokens of history each side still held. `--runs N` repeats everything N times and prints
medians with the spread; `--trace` prints every request (session, slot asked -> served, cached,
evaluated, minimum, time before the send and in `/slots` polls, server prompt time, first token,
typing and keystroke work, and why a re-read happened).

    .venv/bin/python bench/cache_reuse.py [--phases sequential,restart] [--runs 3] [--trace]
        [--sessions 3] [--rounds 3] [--words 150] [--max-tokens 256] [--real-answers]
        [--sides fusion,plain,plain@plan] [--parallel 4] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _cache_common import Recorder, Row, annotate, print_trace
from _cache_drivers import Driver, FusionDriver
from _cache_phases import (
    NOTITLE_BASE,
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
from _cache_plain import PlainDriver
from _cache_report import answer_lengths, print_tables, summarize
from _cache_servers import PlanServer, ServerConfig, StockServer
from _minimum import measure
from _servers import model_arg, shown, stop_on_sigterm

from fusion_tui.server.http.client import LlamaClient

ALL = ("sequential", "sequential-notitle", "concurrent", "resume", "restart", "oversubscribed",
       "oversubscribed-ram0", "long", "agent", "swa-sequential", "swa-restart")  # fmt: skip
ALIASES = {"oversubscribed": ("oversubscribed", "oversubscribed-ram0"),
           "swa": ("swa-sequential", "swa-restart")}  # fmt: skip
MAIN = ("sequential", "sequential-notitle", "concurrent", "resume", "restart", "oversubscribed",
        "long", "agent")  # fmt: skip
SIDES = {"fusion": (FusionDriver, PlanServer), "plain": (PlainDriver, StockServer),
         "plain@plan": (PlainDriver, PlanServer)}  # fmt: skip


def groups(args: argparse.Namespace) -> list[tuple[ServerConfig, list[str]]]:
    """Which daemons to launch for the chosen phases, and the phases each one serves."""
    demo = model_arg(args.model)
    out = []
    main = [p for p in MAIN if p in args.phases]
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
    """The group's phases as one list of steps (each later run on every side in turn)."""
    chosen = set(phases)
    out: list[Step] = []
    if chosen & {"sequential", "concurrent", "resume", "restart"}:
        out += sequential(args)  # resume/restart continue these sessions (counted if chosen)
        if "concurrent" in chosen:
            out += concurrent(args)
        out += resume(args)
        out += restart(args)
    for phase in ("sequential-notitle", "oversubscribed", "oversubscribed-ram0", "long", "agent"):
        if phase not in chosen:
            continue
        if out:
            out += relaunch(args)
        if phase == "sequential-notitle":
            out += sequential(args, phase, "n", NOTITLE_BASE, plain_title=False)
        elif phase == "long":
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
"""Between two sides' steps: the other daemon's worker threads stop spinning first."""


async def run_group(drivers: list[Driver], steps: list[Step]) -> None:
    """Every side, step by step, the order reversed at every step (ABC, CBA): load and clock
    drift on a shared machine fall on all alike (each side has its own daemon; their requests
    never overlap)."""
    for i, step in enumerate(steps):
        order = drivers if i % 2 == 0 else drivers[::-1]
        for d in order:
            await step(d)
            await asyncio.sleep(PAUSE_S)
    for d in drivers:
        await d.close()


async def minimum_of(rows: list[Row], url: str) -> None:
    """Each turn's minimum by the side's own server's tokenizer (`_minimum.measure`)."""
    async with LlamaClient(url) as client:

        async def tokenize(text: str) -> list[int]:
            return await client.tokenize(text, add_special=True)

        await measure(rows, tokenize, client.apply_template)


async def one_run(args: argparse.Namespace, launches: dict[str, dict[str, str]]
                  ) -> dict[str, list[Row]]:  # fmt: skip
    rows: dict[str, list[Row]] = {side: [] for side in args.sides}
    recorders: list[Recorder] = []
    for cfg, phases in groups(args):
        with contextlib.ExitStack() as stack:
            drivers: list[Driver] = []
            servers: list[Any] = []
            for side in args.sides:
                driver_cls, server_cls = SIDES[side]
                tmp = tempfile.TemporaryDirectory(prefix="fusion-bench-")
                home = Path(stack.enter_context(tmp))
                server = server_cls(home, cfg, args)
                rec = Recorder(side, ignore_eos=not args.real_answers)
                servers.append(server)
                drivers.append(driver_cls(server, rec, args, home))
                recorders.append(rec)
            try:
                for server, d in zip(servers, drivers, strict=True):
                    await server.launch()
                    d.rec.epoch += 1
                    launches.setdefault(cfg.name, {})[d.rec.policy] = (
                        f"{shown(server.argv)}  [{server.slots_line}]")  # fmt: skip
                per_slot_ctx = servers[0].plan.per_slot_ctx
                await run_group(drivers, steps_for(phases, args, per_slot_ctx))
                for server, d in zip(servers, drivers, strict=True):
                    await minimum_of(d.rec.rows, server.url)
            finally:
                for server in servers:
                    await server.stop()
            for d in drivers:
                annotate(d.rec.rows)
                rows[d.rec.policy] += d.rec.rows
    if args.dump:
        with Path(args.dump).open("a", encoding="utf-8") as out:
            for side in args.sides:
                for r in rows[side]:
                    out.write(json.dumps(dump_row(r), ensure_ascii=False) + "\n")
    if args.trace:
        print_trace([r for side in args.sides for r in rows[side]], recorders)
    return rows


def dump_row(r: Row) -> dict[str, Any]:
    """One request for `--dump`: what was sent and answered, and the server's counts."""
    lab = r.label
    return {"side": r.policy, "phase": lab.phase, "session": lab.session, "kind": lab.kind,
            "turn": lab.turn, "epoch": r.epoch, "slot": r.slot, "cache_n": r.cache_n,
            "prompt_n": r.prompt_n, "predicted_n": r.predicted_n, "minimum": r.minimum,
            "prompt_tokens": r.prompt_tokens, "ttft_ms": r.ttft_ms, "error": r.error,
            "request": r.request, "answer": r.answer}  # fmt: skip


def machine() -> str:
    load = os.getloadavg()
    return f"{os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"


async def main(args: argparse.Namespace) -> None:
    runs = []
    launches: dict[str, dict[str, str]] = {}
    t0 = time.monotonic()
    before = machine()
    phases = [p for p in ALL if p in args.phases]
    feature = frozenset({"long"} if args.plain_overflow != "summary" else ())
    for i in range(args.runs):
        runs.append(await one_run(args, launches))
        print(f"--- run {i + 1} of {args.runs} done, {time.monotonic() - t0:.0f} s, "
              f"{machine()}", file=sys.stderr)  # fmt: skip
        if i + 1 < args.runs:  # the runs so far, in case the rest never comes (a killed bench)
            with contextlib.redirect_stdout(sys.stderr):
                print_tables(summarize(runs, phases, args.sides, feature), args.sides, i + 1)
    table = summarize(runs, phases, args.sides, feature)
    elapsed = time.monotonic() - t0
    if args.json:
        lengths = [answer_lengths(run, args.sides) for run in runs] if args.real_answers else []
        print(json.dumps({"phases": table, "runs": args.runs, "elapsed_s": elapsed,
                          "launches": launches, "machine_before": before,
                          "machine_after": machine(), "answer_lengths": lengths,
                          "args": {k: v for k, v in vars(args).items()}}))  # fmt: skip
        return
    print(f"machine: {before} at the start, {machine()} at the end")
    for group, sides in launches.items():
        for side, line in sides.items():
            print(f"{group:<10} {side:<11} {line}")
    print_tables(table, args.sides, args.runs)
    if args.real_answers:
        print(f"\nAnswer tokens per turn (run 1), {' / '.join(args.sides)}:")
        for line in answer_lengths(runs[0], args.sides):
            print(line)
    print(f"\n{args.runs} run(s), {elapsed:.0f} s; ratios are medians of the runs [min-max]; "
          "minimum: tokens new given each side's conversation (_minimum.py)")  # fmt: skip


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--phases", default="sequential,sequential-notitle,concurrent,resume,restart,"
                    "oversubscribed,long,agent,swa", help="comma-separated; `oversubscribed` and "
                    "`swa` are both of their variants")  # fmt: skip
    ap.add_argument("--sides", default="fusion,plain,plain@plan", help="comma-separated, of "
                    f"{', '.join(SIDES)}; fusion is always one")  # fmt: skip
    ap.add_argument("--runs", type=int, default=1, help="repeat N times; medians with spread")
    ap.add_argument("--sessions", type=int, default=3, help="K sessions (<= parallel - 1)")
    ap.add_argument("--rounds", type=int, default=3, help="R rounds per phase")
    ap.add_argument("--words", type=int, default=150, help="opening message size (~3 tok/word)")
    ap.add_argument("--over-sessions", type=int, default=8, help="sessions in oversubscribed")
    ap.add_argument("--long-words", type=int, default=600, help="words per turn in long")
    ap.add_argument("--long-turns", type=int, default=0, help="turns in long (0: past the slot)")
    ap.add_argument("--agent-tasks", type=int, default=2, help="tasks per workspace in agent")
    ap.add_argument("--agent-steps", type=int, default=2, help="steps per agent task")
    ap.add_argument("--plain-overflow", choices=("summary", "rolling", "stop"), default="summary",
                    help="what the plain client does when its conversation outgrows the slot "
                    "(long): a summary request of its own as aider does (the same conversation "
                    "as fusion's), drop the oldest exchanges and send again (a rolling window), "
                    "or stop (the turn is refused); the last two are a feature "
                    "comparison")  # fmt: skip
    ap.add_argument("--max-tokens", type=int, default=256, help="answer length (and the summary "
                    "budget, at most 320, as fusion's)")  # fmt: skip
    ap.add_argument("--real-answers", action="store_true", help="the model's own answers "
                    "(temperature 0) instead of answers run to --max-tokens; prints every "
                    "turn's answer length per side")  # fmt: skip
    ap.add_argument("--sleep-typing", action="store_true", help="sleep the typing time for real "
                    "even when the client is idle in it (see _keyboard.py)")  # fmt: skip
    ap.add_argument("--stock-np", action="store_true", help="write -np on the stock server's "
                    "command line even for its default 4 slots (this build then splits the "
                    "KV)")  # fmt: skip
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx", type=int, default=None, help="total context of fusion's plan and "
                    "of the stock server's -c (default: the plan's own fit; 8192 gives 4 slots "
                    "of 2,048, and a `long` phase a loaded box can run)")  # fmt: skip
    ap.add_argument("--threads", type=int, default=2, help="-t of every server")
    ap.add_argument("--model", default=None, help="short name or GGUF (default: the demo model)")
    ap.add_argument("--exclusive-gate", action="store_true", help="fusion: one gate per server "
                    "that skips the /slots busy probe (SlotGate(exclusive=...))")  # fmt: skip
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--trace", action="store_true", help="every request on stderr")
    ap.add_argument("--dump", metavar="FILE", help="append every request (prompt, answer, "
                    "counts, minimum) to FILE as JSON lines")  # fmt: skip
    args = ap.parse_args(argv)
    chosen: list[str] = []
    for name in (p.strip() for p in args.phases.split(",") if p.strip()):
        if name not in ALL and name not in ALIASES:
            ap.error(f"unknown phase {name!r}; choose from {', '.join(ALL)}, swa")
        chosen += ALIASES.get(name, (name,))
    args.phases = chosen
    sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if "fusion" not in sides or any(s not in SIDES for s in sides) or len(set(sides)) < 2:
        others = ", ".join(s for s in SIDES if s != "fusion")
        ap.error(f"--sides: fusion and at least one of {others}")
    args.sides = ["fusion", *[s for s in SIDES if s in sides and s != "fusion"]]
    if args.ctx is not None and args.ctx < 512 * args.parallel:
        ap.error(f"--ctx {args.ctx}: at least 512 tokens a slot ({512 * args.parallel})")
    if not 2 <= args.sessions < args.parallel:
        ap.error("--sessions must be at least 2 and below --parallel (one slot for side calls)")
    return args


if __name__ == "__main__":
    stop_on_sigterm()
    asyncio.run(main(parse()))
