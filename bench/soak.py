"""Soak: turns across 4 sessions on the real llama-server, with random cancels, side calls and
one server restart half-way. Reports errors, prompt tokens re-evaluated beyond the minimum, and
how much this process's memory (RSS) grew.

The minimum for a turn is the part of its prompt the server has not seen for that session: the
whole prompt on a fresh server (the first turn, or the first after the restart), else the tokens
past the last prompt the server answered for the session. Anything evaluated beyond that is a
lost prefix (a slot taken over, a cleared cache). Sessions, pins and saves are `LocalBackend`'s
own (public API only: start, reply, close); the server is `ManagedDaemon`'s.

    .venv/bin/python bench/soak.py                         # small: ~24 turns, a few minutes
    .venv/bin/python bench/soak.py --turns 200 --json      # the full run: 200 turns
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import random
import sys
import tempfile
import time
from collections import Counter
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fusion_tui.chat.events import Compacted, ReplyDone
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import Settings
from fusion_tui.fit.swa import prefix_reuse
from fusion_tui.gguf.facts import read_model_facts
from fusion_tui.models.demo import demo_model_path
from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import ServerError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.binary import find_llama_server
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.records import LaunchRecord
from fusion_tui.server.types import TextDelta
from fusion_tui.sessions.store import SessionStore

PROMPTS = [
    "Name a Python data structure and say when to use it.",
    "Write a one-line shell command that counts files.",
    "What does a KV cache store?",
    "Give a short tip for naming variables.",
    "Explain recursion in one sentence.",
    "List two HTTP status codes and their meaning.",
]


@dataclass
class Tally:
    turns: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    side_calls: int = 0
    side_errors: list[str] = field(default_factory=list)
    prompt_evaluated: int = 0
    prompt_minimum: int = 0
    excess_turns: list[dict[str, Any]] = field(default_factory=list)
    compactions: list[dict[str, Any]] = field(default_factory=list)
    summary_evaluated: int = 0
    """Prompt tokens of the compaction summaries (side calls of the sessions)."""
    compacted_next: set[str] = field(default_factory=set)
    """Sessions compacted after their last answer: their next prompt is new text."""
    read_aheads: int = 0
    """`--typing`: read-aheads before turns (their tokens are not in the prompt counts)."""


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def make_settings(binary: Path, model: Path, sessions: int, ctx_slot: int, tokens: int) -> Settings:
    base = Settings()
    managed = replace(
        base.local_models.managed, parallel=sessions + 1, ctx=(sessions + 1) * ctx_slot, threads=2
    )
    return replace(
        base,
        server=replace(base.server, binary=str(binary)),
        local_models=replace(base.local_models, model=str(model), managed=managed),
        llm=replace(base.llm, max_tokens=tokens, temperature=0.7),
    )


async def start_backends(
    settings: Settings, paths: AppPaths, ids: list[str | None]
) -> list[LocalBackend]:
    backends = []
    for sid in ids:
        backend = LocalBackend(settings, paths, resume=sid)
        await backend.start(lambda _s: None)
        backends.append(backend)
    return backends


async def side_call(record: LaunchRecord, backends: list[LocalBackend], total: int) -> None:
    """A short completion on a slot no session is pinned to (what a title or summary call does)."""
    pinned = {b.session.pinned_slot for b in backends}
    slot = next((i for i in range(total) if i not in pinned), -1)
    body = {"prompt": "Summarise: soak test.", "n_predict": 8, "id_slot": slot}
    async with LlamaClient(record.url) as client:
        async for _ in client.stream_completion(body):
            pass


async def turn(
    backend: LocalBackend, text: str, cancel_after: int | None, last_total: dict[str, int],
    tally: Tally, turn_no: int,
) -> None:  # fmt: skip
    before = len(backend.session.requests)
    sid = backend.session.id
    deltas = 0
    answered = False
    compacted = sid in tally.compacted_next  # compacted after its last answer
    tally.compacted_next.discard(sid)
    async with aclosing(backend.reply(text)) as events:
        async for event in events:
            if isinstance(event, TextDelta):
                deltas += 1
                if cancel_after is not None and deltas >= cancel_after:
                    break
            elif isinstance(event, ReplyDone):
                answered = True
                tally.outcomes[event.outcome] += 1
                if event.outcome == "error":
                    tally.errors.append(event.note)
            elif isinstance(event, Compacted):
                tally.compactions.append({"turn": turn_no, "session": sid[-6:],
                    "ahead": answered, "before": event.before, "after": event.after})  # fmt: skip
                if answered:  # after the answer: the next turn sends the new prompt
                    tally.compacted_next.add(sid)
                else:
                    compacted = True
    if cancel_after is not None and deltas >= cancel_after:
        tally.outcomes["cancelled"] += 1
    tally.turns += 1
    new = backend.session.requests[before:]
    summaries = [r for r in new if r.side_call]
    tally.summary_evaluated += sum(r.prompt_n for r in summaries)
    for r in summaries:
        tally.compactions.append({"turn": turn_no, "session": sid[-6:], "slot": r.id_slot,
            "summary_prompt_n": r.prompt_n, "summary_cache_n": r.cache_n})  # fmt: skip
    own = [r for r in new if not r.side_call]
    if compacted and not own:  # no request reached the server: the next one is the new prompt
        tally.compacted_next.add(sid)
    if own:  # the server answered: account for what it evaluated
        req = own[-1]
        total = req.prompt_n + req.cache_n
        # compacted: the summary and what follows it are new text
        minimum = req.prompt_n if compacted else max(1, total - last_total.get(sid, 0))
        last_total[sid] = total
        tally.prompt_evaluated += req.prompt_n
        tally.prompt_minimum += min(minimum, req.prompt_n)
        if req.prompt_n > minimum:
            tally.excess_turns.append(
                {"turn": turn_no, "session": sid[-6:], "slot": req.id_slot,
                 "prompt_n": req.prompt_n, "minimum": minimum, "total": total}
            )  # fmt: skip


async def soak(args: argparse.Namespace) -> dict[str, Any]:
    home = Path(args.home or tempfile.mkdtemp(prefix="fusion-soak-"))
    os.environ["FUSION_TUI_HOME"] = str(home)
    paths = AppPaths.default()
    binary, model = find_llama_server(), demo_model_path()
    if model is None:
        raise SystemExit("the demo model is not installed")
    total_slots = args.sessions + 1
    spec = LaunchSpec(
        model=model, parallel=total_slots, ctx=total_slots * args.ctx_per_slot, threads=2,
        slot_save_path=paths.slot_save_dir, extra_args=("--no-warmup", "-fit", "off"),
    )  # fmt: skip  # as the app launches it: slots saved, and restored after the restart
    settings = make_settings(binary, model, args.sessions, args.ctx_per_slot, args.max_tokens)
    fit = {"prefix_reuse": prefix_reuse(read_model_facts(model), False)}  # as `launch` records
    rng = random.Random(args.seed)
    daemon = ManagedDaemon(paths, binary=binary, poll_interval=0.05)
    tally = Tally()
    last_total: dict[str, int] = {}
    restarted_at: int | None = None
    started = time.monotonic()
    record = await daemon.ensure(spec, fit=fit, probe=False)
    backends = await start_backends(settings, paths, [None] * args.sessions)
    gc.collect()
    rss_before = rss_kib()
    rss_peak = rss_before
    try:
        for n in range(args.turns):
            if n == args.turns // 2 and args.turns > 1:  # one restart, half-way
                # a session is on disk from its first turn on; an untouched one starts afresh
                ids: list[str | None] = [
                    b.session.id if b.session.turns else None for b in backends
                ]
                for b in backends:
                    await b.close()
                await daemon.stop()
                record = await daemon.ensure(spec, fit=fit, probe=False)
                backends = await start_backends(settings, paths, ids)
                last_total.clear()  # a fresh server: every prompt is new to it
                restarted_at = n
            backend = rng.choice(backends)
            cancel = rng.randint(1, 3) if rng.random() < args.cancel_rate else None
            text = f"{rng.choice(PROMPTS)} (turn {n})"
            if args.typing:  # the TUI's first keystroke: the slot made ready, the opening read
                await backend.read_ahead()
                tally.read_aheads += 1
            jobs = [turn(backend, text, cancel, last_total, tally, n)]
            if rng.random() < args.side_rate:
                tally.side_calls += 1
                jobs.append(side_call(record, backends, total_slots))
            results = await asyncio.gather(*jobs, return_exceptions=True)
            for result in results:
                if isinstance(result, ServerError):
                    tally.side_errors.append(f"{type(result).__name__}: {result}")
                elif isinstance(result, BaseException):
                    raise result
            rss_peak = max(rss_peak, rss_kib())
            if args.verbose:
                print(f"turn {n}: {dict(tally.outcomes)}", file=sys.stderr)
    finally:
        for b in backends:
            await b.close()
        await daemon.stop()
    gc.collect()
    rss_after = rss_kib()
    store = SessionStore(paths.sessions_dir)
    damaged = [e.id for e in store.list() if not e.ok]
    return {
        "turns": tally.turns,
        "sessions": args.sessions,
        "seconds": round(time.monotonic() - started, 1),
        "outcomes": dict(tally.outcomes),
        "turn_errors": tally.errors,
        "side_calls": tally.side_calls,
        "side_call_errors": tally.side_errors,
        "read_aheads": tally.read_aheads,
        "restart_at_turn": restarted_at,
        "prompt_tokens_evaluated": tally.prompt_evaluated,
        "prompt_tokens_minimum": tally.prompt_minimum,
        "prompt_tokens_beyond_minimum": tally.prompt_evaluated - tally.prompt_minimum,
        "turns_beyond_minimum": tally.excess_turns,
        "summary_tokens_evaluated": tally.summary_evaluated,
        "compactions": tally.compactions,
        "rss_kib_before": rss_before,
        "rss_kib_after": rss_after,
        "rss_kib_peak": rss_peak,
        "rss_growth_kib": rss_after - rss_before,
        "damaged_session_files": damaged,
        "home": str(home),
    }


def report(result: dict[str, Any]) -> str:
    beyond = result["prompt_tokens_beyond_minimum"]
    share = beyond / max(1, result["prompt_tokens_evaluated"])
    lines = [
        f"soak: {result['turns']} turns over {result['sessions']} sessions in "
        f"{result['seconds']} s; restart before turn {result['restart_at_turn']}",
        f"outcomes: {result['outcomes']}; side calls: {result['side_calls']} "
        f"({len(result['side_call_errors'])} failed); read-aheads: {result['read_aheads']}",
        f"turn errors: {len(result['turn_errors'])}"
        + "".join(f"\n  - {e}" for e in result["turn_errors"][:10]),
        f"prompt tokens: {result['prompt_tokens_evaluated']} evaluated, "
        f"{result['prompt_tokens_minimum']} minimum, {beyond} beyond ({share:.1%}) "
        f"in {len(result['turns_beyond_minimum'])} turns",
        f"compaction: {sum(1 for c in result['compactions'] if 'before' in c)} "
        f"({sum(1 for c in result['compactions'] if c.get('ahead'))} after an answer), "
        f"{result['summary_tokens_evaluated']} summary prompt tokens",
        f"RSS: {result['rss_kib_before']} KiB before, {result['rss_kib_after']} KiB after "
        f"({result['rss_growth_kib']:+d} KiB; peak {result['rss_kib_peak']} KiB)",
        f"damaged session files: {len(result['damaged_session_files'])}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--turns", type=int, default=24, help="turns in all (the full run: 200)")
    p.add_argument("--sessions", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=24, help="n_predict of each turn")
    p.add_argument("--ctx-per-slot", type=int, default=2048)
    p.add_argument("--cancel-rate", type=float, default=0.2)
    p.add_argument("--side-rate", type=float, default=0.25)
    p.add_argument("--seed", type=int, default=8)
    p.add_argument("--home", help="app home (default: a new temporary folder)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--verbose", action="store_true")
    p.add_argument(
        "--typing",
        action="store_true",
        help="before each turn, read ahead as the "
        "TUI does at the first keystroke (those tokens are not in the prompt counts)",
    )
    args = p.parse_args(argv)
    result = asyncio.run(soak(args))
    print(json.dumps(result, indent=1) if args.json else report(result))
    failed = result["turn_errors"] or result["side_call_errors"] or result["damaged_session_files"]
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
