"""Benchmark: prompt tokens evaluated and time to first token, fusion-tui's slot policy against a
plain OpenAI-style client (no `id_slot`, no pinning, no saved slots: what oterm, elia and
opencode send), on the real server (SmolLM2 unless --model), in the same run.

Workload per policy, each on a freshly launched daemon (same texts, so the runs are comparable):
  sequential   K sessions × R rounds, round robin, a side call (session title) after every turn
  concurrent   two sessions running at once for R rounds, each turn followed by its side call
  resume       a new app instance sends session 0's next turn on the same server
  restart      the daemon restarts (fusion-tui saves the slots first), then session 0 resumes

Prints per phase the prompt tokens the server evaluated (`timings.prompt_n`, side calls
included) and the mean time to first token of the session turns, and the ratios fusion / plain.

    .venv/bin/python bench/cache_reuse.py [--sessions 3] [--rounds 3] [--words 150]
        [--max-tokens 8] [--parallel 4] [--ctx-per-slot 2048] [--model PATH] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fusion_tui.chat.local import LocalBackend
from fusion_tui.chat.titles import TITLE_TOKENS, title_messages
from fusion_tui.config import Settings
from fusion_tui.config.settings import LLMSettings, LocalModelsSettings
from fusion_tui.demo_model import demo_model_path
from fusion_tui.paths import AppPaths
from fusion_tui.runtime import Connection
from fusion_tui.server.binary import find_llama_server
from fusion_tui.server.client import LlamaClient
from fusion_tui.server.daemon import ManagedDaemon
from fusion_tui.server.launch import LaunchSpec
from fusion_tui.server.records import LaunchRecord
from fusion_tui.server.types import StreamEnd, TextDelta
from fusion_tui.sessions.model import RequestRecord
from fusion_tui.status import ServerStatus

PHASES = ("sequential", "concurrent", "resume", "restart")
WORDS = [
    "parser",
    "lexer",
    "token",
    "buffer",
    "module",
    "import",
    "cache",
    "slot",
    "session",
    "prompt",
    "layer",
    "tensor",
]
SYSTEM = "You are a concise, careful coding assistant running on the user's own machine."


def opening(k: int, words: int) -> str:
    body = " ".join(f"{WORDS[(i * 5 + k) % len(WORDS)]}{(i * 3 + k) % 89}" for i in range(words))
    return f"Session {k}. Read these notes, then answer briefly.\n{body}"


def follow_up(k: int, r: int) -> str:
    return f"Round {r}: which item of session {k} matters most?"


@dataclass
class Tally:
    prompt_n: int = 0
    cache_n: int = 0
    requests: int = 0
    ttft_ms: list[float] = field(default_factory=list)

    def add(self, prompt_n: int, cache_n: int, ttft_ms: float | None) -> None:
        self.prompt_n += prompt_n
        self.cache_n += cache_n
        self.requests += 1
        if ttft_ms is not None:
            self.ttft_ms.append(ttft_ms)

    @property
    def mean_ttft(self) -> float:
        return sum(self.ttft_ms) / len(self.ttft_ms) if self.ttft_ms else 0.0


Result = dict[str, Tally]


class Server:
    def __init__(self, args: argparse.Namespace, home: Path) -> None:
        self.paths = AppPaths.default(env={"FUSION_TUI_HOME": str(home)})
        model = Path(args.model) if args.model else demo_model_path()
        if model is None:
            raise SystemExit("no model: pass --model or install the demo model")
        self.daemon = ManagedDaemon(self.paths, find_llama_server())
        self.spec = LaunchSpec(
            model=model,
            parallel=args.parallel,
            ctx=args.parallel * args.ctx_per_slot,
            threads=args.threads,
            slot_save_path=self.paths.slot_save_dir,
        )
        self.record: LaunchRecord | None = None

    async def launch(self) -> None:
        await self.daemon.stop()
        self.record = await self.daemon.launch(self.spec, probe=False)

    @property
    def url(self) -> str:
        assert self.record is not None
        return self.record.url

    def connector(self) -> Callable[..., Awaitable[Connection]]:
        async def connect(*_a: Any, **_kw: Any) -> Connection:
            client = LlamaClient(self.url)
            props = await client.props()
            return Connection(client, props, ServerStatus(state="ready"), self.record)

        return connect


def trace(args: argparse.Namespace, policy: str, phase: str, *row: object) -> None:
    """`--trace`: one line per request on stderr (policy, phase, slot, prompt_n, cache_n, side)."""
    if args.trace:
        print(policy, phase, *row, file=sys.stderr)


# --- fusion-tui's policy -----------------------------------------------------------------------


async def fusion(server: Server, args: argparse.Namespace) -> Result:
    result = {p: Tally() for p in PHASES}
    settings = Settings(
        local_models=LocalModelsSettings(progress_watch=False),
        llm=LLMSettings(temperature=0.0, max_tokens=args.max_tokens),
    )

    async def make(resume: str | None = None) -> LocalBackend:
        b = LocalBackend(settings, server.paths, resume=resume, connector=server.connector())
        await b.start(lambda _s: None)
        return b

    def count(phase: str, records: list[RequestRecord]) -> None:
        for r in records:
            result[phase].add(r.prompt_n, r.cache_n, None if r.side_call else r.ttft_ms)
            trace(args, "fusion", phase, r.id_slot, r.prompt_n, r.cache_n, r.side_call)

    async def step(phase: str, b: LocalBackend, text: str) -> None:
        n = len(b.session.requests)
        async for _ in b.reply(text):
            pass
        await b.make_title()  # the side call
        count(phase, b.session.requests[n:])

    sessions = [await make() for _ in range(args.sessions)]
    for r in range(args.rounds):
        for k, b in enumerate(sessions):
            await step("sequential", b, opening(k, args.words) if r == 0 else follow_up(k, r))
    for r in range(args.rounds):
        await asyncio.gather(
            *(step("concurrent", b, follow_up(k, 100 + r)) for k, b in enumerate(sessions[:2]))
        )
    for b in sessions:
        await b.close()  # leaving saves each session's slot
    again = await make(resume=sessions[0].session.id)
    n = len(again.session.requests)
    async for _ in again.reply(follow_up(0, 200)):
        pass
    count("resume", again.session.requests[n:])
    await again.close()
    await server.launch()  # the slots were saved when the sessions were left
    after = await make(resume=sessions[0].session.id)
    n = len(after.session.requests)
    async for _ in after.reply(follow_up(0, 300)):
        pass
    count("restart", after.session.requests[n:])
    await after.close()
    return result


# --- a plain OpenAI-style client ---------------------------------------------------------------


async def plain_request(url: str, messages: list[dict[str, str]], n: int) -> tuple[str, Any]:
    body = {"messages": messages, "max_tokens": n, "temperature": 0.0}
    started, first = time.monotonic(), None
    text: list[str] = []
    end: StreamEnd | None = None
    async with LlamaClient(url) as client:
        async for event in client.stream_chat(body):  # `verbose` only to read the timings
            if isinstance(event, TextDelta):
                first = first or time.monotonic()
                text.append(event.text)
            elif isinstance(event, StreamEnd):
                end = event
    assert end is not None
    ttft = ((first or time.monotonic()) - started) * 1000
    return "".join(text), (end.timings.prompt_n, end.timings.cache_n, ttft)


async def plain(server: Server, args: argparse.Namespace) -> Result:
    result = {p: Tally() for p in PHASES}
    histories = [[{"role": "system", "content": SYSTEM}] for _ in range(args.sessions)]

    async def step(phase: str, k: int, text: str, side: bool = True) -> None:
        history = histories[k]
        history.append({"role": "user", "content": text})
        answer, (p, c, ttft) = await plain_request(server.url, history, args.max_tokens)
        history.append({"role": "assistant", "content": answer})
        result[phase].add(p, c, ttft)
        trace(args, "plain", phase, -1, p, c, False)
        if side:
            _t, (p, c, _ttft) = await plain_request(
                server.url, title_messages(history[1]["content"]), TITLE_TOKENS
            )
            result[phase].add(p, c, None)
            trace(args, "plain", phase, -1, p, c, True)

    for r in range(args.rounds):
        for k in range(args.sessions):
            await step("sequential", k, opening(k, args.words) if r == 0 else follow_up(k, r))
    for r in range(args.rounds):
        await asyncio.gather(*(step("concurrent", k, follow_up(k, 100 + r)) for k in (0, 1)))
    await step("resume", 0, follow_up(0, 200), side=False)
    await server.launch()
    await step("restart", 0, follow_up(0, 300), side=False)
    return result


# --- report ------------------------------------------------------------------------------------


def ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def report(results: dict[str, Result], elapsed: dict[str, float], as_json: bool) -> None:
    f, p = results["fusion"], results["plain"]
    rows = []
    for phase in PHASES:
        rows.append(
            {
                "phase": phase,
                "fusion_prompt_n": f[phase].prompt_n,
                "plain_prompt_n": p[phase].prompt_n,
                "prompt_n_ratio": ratio(f[phase].prompt_n, p[phase].prompt_n),
                "fusion_ttft_ms": round(f[phase].mean_ttft, 1),
                "plain_ttft_ms": round(p[phase].mean_ttft, 1),
                "ttft_ratio": ratio(f[phase].mean_ttft, p[phase].mean_ttft),
            }
        )
    total_f = sum(f[ph].prompt_n for ph in PHASES)
    total_p = sum(p[ph].prompt_n for ph in PHASES)
    if as_json:
        print(json.dumps({"phases": rows, "elapsed_s": elapsed, "total_ratio": total_f / total_p}))
        return
    print(f"{'phase':<11} {'evaluated fusion/plain':>24} {'ratio':>7} {'TTFT ms fusion/plain':>22}")
    for row in rows:
        evaluated = f"{row['fusion_prompt_n']:,} / {row['plain_prompt_n']:,}"
        ttft = f"{row['fusion_ttft_ms']:.0f} / {row['plain_ttft_ms']:.0f}"
        print(
            f"{row['phase']:<11} {evaluated:>24} {row['prompt_n_ratio']:>7} "
            f"{ttft:>22} ({row['ttft_ratio']})"
        )
    print(
        f"all phases: fusion-tui evaluated {ratio(total_f, total_p)} of the plain client's tokens"
    )
    print(f"wall time: fusion {elapsed['fusion']:.0f} s, plain {elapsed['plain']:.0f} s")


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="fusion-bench-") as home:
        server = Server(args, Path(home))
        results: dict[str, Result] = {}
        elapsed: dict[str, float] = {}
        try:
            for name, policy in (("plain", plain), ("fusion", fusion)):
                await server.launch()  # a fresh daemon: both start cold
                t0 = time.monotonic()
                results[name] = await policy(server, args)
                elapsed[name] = time.monotonic() - t0
        finally:
            await server.daemon.stop()
    report(results, elapsed, args.json)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=3, help="K sessions (<= parallel - 1)")
    ap.add_argument("--rounds", type=int, default=3, help="R rounds per phase")
    ap.add_argument("--words", type=int, default=150, help="opening message size (~3 tok/word)")
    ap.add_argument("--max-tokens", type=int, default=8)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--ctx-per-slot", type=int, default=2048)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--trace", action="store_true", help="every request on stderr")
    args = ap.parse_args(argv)
    if not 2 <= args.sessions < args.parallel:
        ap.error("--sessions must be at least 2 and below --parallel (one slot for side calls)")
    return args


if __name__ == "__main__":
    asyncio.run(main(parse()))
