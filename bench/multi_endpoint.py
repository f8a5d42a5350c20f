"""Benchmark: several llama-servers, fusion-tui's cache-aware placement against the baselines
users run in front of them, on the same sessions in the same run.

Two stock llama-servers on 127.0.0.1 stand for two machines (`llama-server -m MODEL -np 2 -c N`,
2 slots each, every other setting at the server's defaults: `_servers.py`; the demo model unless
--model). 6 sessions take a few turns each in a seeded random order (at most 4 open at once, a
session closes when it is done while others still wait to start); each request extends the
session's previous prompt exactly (token ids: prompt + generated tokens + the next user turn).

  fusion       fusion-tui's policy: `endpoints.placement` picks the endpoint and slot of a new
               session from `HealthWatcher` snapshots, pins it (id_slot per request), checks the
               pin before every turn and fails over when its server is gone.
  sticky-hash  a session always goes to the same server (what nginx `hash` or a consistent-hash
               proxy does), id_slot -1 there (llama-server's own similarity pick); when its
               server is gone, the next one on the ring.
  one-server   one stock llama-server with the same total slots (4, one unified KV pool of the
               same total context), id_slot -1: no balancer at all.
  round-robin  a generic load balancer: requests alternate servers, id_slot -1; a server that
               refuses connections is skipped.

Then (the two-server policies) one server is killed (SIGKILL) and every open session takes 2
more turns: the failover cost. Every server runs with the same thread count (`--threads`, 1: on
two cores two servers at -t 1 use what one at -t 2 would, and requests go one at a time, so each
request gets the same compute whichever policy sends it).

Prints prompt tokens the servers evaluated (`timings.prompt_n`) against the independent minimum
(each prompt less its longest common prefix with any earlier prompt plus answer of the run, on
token ids: `_minimum.py`), the first-token time (the median turn of a run), where new sessions
went, and for the failover the tokens re-read and the cost fusion stated. The policies run in
ABBA order across runs (run 1 in the order above, run 2 reversed, ...), fresh servers per policy
and run, the same seed for every policy of a run; medians of --runs runs (>= 3) with the spread.

    .venv/bin/python bench/multi_endpoint.py [--runs 3] [--turns 4] [--words 120]
        [--max-tokens 256] [--ctx-per-slot 2048] [--policies fusion,sticky-hash,...]
        [--model PATH] [--json] [--trace]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _minimum import Minimum
from _servers import Process, log_line, model_arg, shown, stock_argv, stop_on_sigterm

from fusion_tui.endpoints.health import HealthWatcher
from fusion_tui.endpoints.model import Endpoint
from fusion_tui.endpoints.placement import Pin, Placement, check_pin, failover, place_new
from fusion_tui.endpoints.registry import EndpointRegistry
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.http.sse import SSEParser
from fusion_tui.server.process.binary import find_llama_server
from fusion_tui.server.process.daemon import free_port

SESSIONS = 6
MAX_OPEN = 4
FAILOVER_TURNS = 2
POLICIES = ("fusion", "sticky-hash", "one-server", "round-robin")
SINGLE = frozenset({"one-server"})
"""Policies on one server: no failover phase (killing it leaves nothing)."""
WORDS = ["parser", "lexer", "token", "buffer", "module", "import", "cache", "slot", "layer"]


def opening(k: int, words: int) -> str:
    body = " ".join(f"{WORDS[(i * 5 + k) % len(WORDS)]}{(i * 3 + k) % 89}" for i in range(words))
    return (
        f"<|im_start|>system\nSession {k}. You are a concise coding assistant.<|im_end|>\n"
        f"<|im_start|>user\nRead these notes, then answer briefly.\n{body}<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def follow_up(k: int, r: int) -> str:
    return (
        f"<|im_end|>\n<|im_start|>user\nRound {r}: which item of session {k} matters most?"
        "<|im_end|>\n<|im_start|>assistant\n"
    )


def run_order(run: int, policies: Sequence[str]) -> list[str]:
    """ABBA across runs: the policies in order on even runs, reversed on odd ones, so a drift
    in the machine's load over the runs falls on all of them alike."""
    return list(policies) if run % 2 == 0 else list(reversed(policies))


# --- servers -----------------------------------------------------------------------------------


class Servers:
    """The stock llama-servers of one policy's run (labels `a`, `b`, ...); killed at its end."""

    def __init__(self, args: argparse.Namespace, home: Path, *, count: int, slots: int) -> None:
        self.model = model_arg(args.model)
        self.procs: dict[str, Process] = {}
        binary = find_llama_server()
        for label in "ab"[:count]:
            port = free_port()
            argv = stock_argv(binary, self.model, port, parallel=slots,
                              ctx=slots * args.ctx_per_slot, threads=args.threads)  # fmt: skip
            self.procs[label] = Process(argv, home / f"{label}-{port}.log", port)

    @property
    def urls(self) -> dict[str, str]:
        return {label: p.url for label, p in self.procs.items()}

    def described(self) -> list[str]:
        return [f"{shown(p.argv)}  [{log_line(p.log)}]" for p in self.procs.values()]

    async def start(self) -> None:
        await asyncio.gather(*(p.start() for p in self.procs.values()))

    def kill(self, label: str) -> None:
        self.procs[label].kill()

    def stop(self) -> None:
        for p in self.procs.values():
            p.stop()


# --- one request -------------------------------------------------------------------------------


@dataclass
class Answer:
    prompt_n: int
    cache_n: int
    tokens_cached: int
    ttft_ms: float
    generated: list[int]
    tok_s: float


class Refused(Exception):
    """The server is gone (connection refused or cut)."""


async def complete(url: str, prompt: list[int], id_slot: int, n: int) -> Answer:
    body = {
        "prompt": prompt, "n_predict": n, "temperature": 0.0, "ignore_eos": True,
        "cache_prompt": True, "id_slot": id_slot, "stream": True,
    }  # fmt: skip
    started = time.monotonic()
    first: float | None = None
    generated: list[int] = []
    parser = SSEParser()
    try:
        async with (
            httpx.AsyncClient(timeout=120.0, trust_env=False) as http,
            http.stream("POST", f"{url}/completion", json=body) as resp,
        ):
            if resp.status_code != 200:
                raise SystemExit(f"{url}: HTTP {resp.status_code}: {(await resp.aread())[:200]!r}")
            async for chunk in resp.aiter_bytes():
                for payload in parser.feed(chunk):
                    data = json.loads(payload)
                    if data.get("stop"):
                        t = data["timings"]
                        return Answer(
                            t["prompt_n"], t["cache_n"], data["tokens_cached"],
                            ((first or time.monotonic()) - started) * 1000, generated,
                            t.get("predicted_per_second", 0.0),
                        )  # fmt: skip
                    if data.get("tokens"):
                        first = first or time.monotonic()
                        generated += data["tokens"]
    except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError) as exc:
        raise Refused(str(exc)) from None
    raise Refused("the stream ended without its final event")


# --- sessions and the schedule -------------------------------------------------------------------


@dataclass
class Session:
    k: int
    prompt: list[int]
    turns: int = 0
    pin: Pin | None = None


@dataclass
class Tally:
    evaluated: int = 0
    minimum: int = 0
    ttft_ms: list[float] = field(default_factory=list)
    stated: int = 0
    moves: int = 0
    placed: dict[str, int] = field(default_factory=dict)
    """Where each new session's first turn went (server label -> sessions)."""
    evicted: int = 0
    """fusion: new sessions put on a slot holding another prompt while an empty one stood."""

    def add(self, answer: Answer, minimum: int) -> None:
        self.evaluated += answer.prompt_n
        self.minimum += minimum
        self.ttft_ms.append(answer.ttft_ms)

    @property
    def ratio(self) -> float:
        return self.evaluated / self.minimum if self.minimum else 0.0

    @property
    def median_ttft_ms(self) -> float:
        return statistics.median(self.ttft_ms) if self.ttft_ms else 0.0


def schedule(seed: int, turns: int) -> tuple[list[int], list[int]]:
    """The order of turns (session ids) and which sessions are still open at the end."""
    rng = random.Random(seed)
    left = dict.fromkeys(range(SESSIONS), turns)
    open_: list[int] = []
    nxt = 0
    order: list[int] = []
    while any(left.values()):
        live = [k for k in open_ if left[k]]
        choices: list[int | None] = [
            *live,
            *([None] if nxt < SESSIONS and len(open_) < MAX_OPEN else []),
        ]
        pick = rng.choice(choices)
        if pick is None:
            pick, nxt = nxt, nxt + 1
            open_.append(pick)
        order.append(pick)
        left[pick] -= 1
        if not left[pick] and nxt < SESSIONS:
            open_.remove(pick)  # done, and someone is waiting for its slot
    return order, open_


def ring_order(key: str, labels: Sequence[str]) -> list[str]:
    """A consistent-hash proxy's choice for `key`: its server first, then the next ones on the
    ring (where the session goes when its server is down)."""
    start = zlib.crc32(key.encode()) % len(labels)
    return [labels[(start + i) % len(labels)] for i in range(len(labels))]


# --- the policies --------------------------------------------------------------------------------


class Fusion:
    name = "fusion"

    def __init__(self, servers: Servers) -> None:
        eps = [Endpoint(label, url) for label, url in servers.urls.items()]
        self.registry = EndpointRegistry(eps)
        self.watcher = HealthWatcher(self.registry, timeout=3.0)
        self.model = str(servers.model)
        self.urls = servers.urls
        self.open: dict[int, Session] = {}

    async def place(self, s: Session, tally: Tally, trace: bool) -> tuple[str, int]:
        await self.watcher.poll_once()
        pinned: dict[str, set[int]] = {}
        for other in self.open.values():
            if other is not s and other.pin and other.pin.endpoint and other.pin.slot is not None:
                pinned.setdefault(other.pin.endpoint, set()).add(other.pin.slot)
        views = self.watcher.views(pinned=pinned)
        decision: Placement
        if s.pin is None:
            decision = place_new(views, self.model)
        else:
            home = next(v for v in views if v.label == s.pin.endpoint)
            if home.healthy:
                decision = check_pin(s.pin, home, prompt_tokens=len(s.prompt))
            else:
                decision = failover(s.pin, views, self.model, prompt_tokens=len(s.prompt))
        if decision.action == "wait" or decision.endpoint is None:
            raise SystemExit(f"session {s.k}: {decision.reason}")
        if s.pin is None:  # the rule checked: an empty slot anywhere before a held one
            empty = any(not sl.processing and sl.n_tokens == 0 and sl.id not in v.pinned
                        for v in views if v.healthy for sl in v.slots or ())  # fmt: skip
            chosen = next((sl for v in views if v.label == decision.endpoint
                           for sl in v.slots or () if sl.id == decision.slot), None)  # fmt: skip
            if empty and chosen is not None and chosen.n_tokens > 0:
                tally.evicted += 1
        if decision.action == "move":
            tally.stated += decision.cold_tokens
            tally.moves += 1
            print(f"  fusion: session {s.k}: {decision.reason}", file=sys.stderr)
        elif trace and decision.reason != "pinned":
            print(f"  fusion: session {s.k}: {decision.reason}", file=sys.stderr)
        s.pin = Pin(decision.endpoint, decision.slot)
        return decision.endpoint, decision.slot

    async def send(self, s: Session, n: int, tally: Tally, trace: bool) -> tuple[str, Answer]:
        label, slot = await self.place(s, tally, trace)
        answer = await complete(self.urls[label], s.prompt, slot, n)
        self.watcher.record_turn(label, answer.tok_s)
        return label, answer

    async def close(self) -> None:
        await self.registry.aclose()


class Balancer:
    """The baselines: a proxy in front of the servers that picks one per request (never a
    slot: id_slot -1, the server's own similarity pick); a server refusing connections is
    taken out of the pool, as a health check would."""

    name = "balancer"

    def __init__(self, servers: Servers, seed: int) -> None:
        self.urls = servers.urls
        self.labels = list(self.urls)
        self.down: set[str] = set()
        self.seed = seed
        self.open: dict[int, Session] = {}

    def candidates(self, s: Session) -> list[str]:
        raise NotImplementedError

    async def send(self, s: Session, n: int, tally: Tally, trace: bool) -> tuple[str, Answer]:
        for label in self.candidates(s):
            if label in self.down:
                continue
            try:
                return label, await complete(self.urls[label], s.prompt, -1, n)
            except Refused:
                self.down.add(label)
        raise SystemExit(f"{self.name}: no server left")

    async def close(self) -> None:
        pass


class StickyHash(Balancer):
    name = "sticky-hash"

    def candidates(self, s: Session) -> list[str]:
        return ring_order(f"{self.seed}:session-{s.k}", self.labels)  # a session id per run


class OneServer(Balancer):
    name = "one-server"

    def candidates(self, s: Session) -> list[str]:
        return self.labels


class RoundRobin(Balancer):
    name = "round-robin"

    def __init__(self, servers: Servers, seed: int) -> None:
        super().__init__(servers, seed)
        self.turn = 0

    def candidates(self, s: Session) -> list[str]:
        start, self.turn = self.turn, self.turn + 1
        return [self.labels[(start + i) % len(self.labels)] for i in range(len(self.labels))]


Policy = Fusion | Balancer


def make_policy(kind: str, servers: Servers, seed: int) -> Policy:
    if kind == "fusion":
        return Fusion(servers)
    cls = {"sticky-hash": StickyHash, "one-server": OneServer, "round-robin": RoundRobin}[kind]
    return cls(servers, seed)


async def turn(policy: Policy, s: Session, args: argparse.Namespace, tally: Tally,
               tokenize: LlamaClient, pool: Minimum) -> None:  # fmt: skip
    minimum = pool.new(s.prompt)
    label, answer = await policy.send(s, args.max_tokens, tally, args.trace)
    pool.add(s.prompt + answer.generated)
    tally.add(answer, minimum)
    if s.turns == 0:
        tally.placed[label] = tally.placed.get(label, 0) + 1
    if args.trace:
        row = f"prompt={len(s.prompt)} evaluated={answer.prompt_n} min={minimum}"
        print(f"  {policy.name} s{s.k} t{s.turns} on {label}: {row} cache={answer.cache_n} "
              f"ttft={answer.ttft_ms:.0f} ms", file=sys.stderr)  # fmt: skip
    s.turns += 1
    s.prompt = s.prompt + answer.generated + await tokenize.tokenize(follow_up(s.k, s.turns))


async def run_policy(kind: str, seed: int, args: argparse.Namespace,
                     launches: dict[str, list[str]]) -> dict[str, Tally]:  # fmt: skip
    single = kind in SINGLE
    with tempfile.TemporaryDirectory(prefix="fusion-multi-") as tmp:
        servers = Servers(args, Path(tmp), count=1 if single else 2, slots=4 if single else 2)
        try:
            await servers.start()
            launches.setdefault(kind, servers.described())
            policy = make_policy(kind, servers, seed)
            main, fail = Tally(), Tally()
            pool = Minimum()
            order, still_open = schedule(seed, args.turns)
            async with LlamaClient(servers.urls["a"]) as tok:
                sessions: dict[int, Session] = {}
                for k in order:
                    if k not in sessions:
                        sessions[k] = Session(k, await tok.tokenize(opening(k, args.words)))
                        policy.open[k] = sessions[k]
                    await turn(policy, sessions[k], args, main, tok, pool)
                    if sessions[k].turns == args.turns and k not in still_open:
                        policy.open.pop(k, None)  # closed: its pin is released
                if not single:
                    servers.kill("b")
                    rng = random.Random(seed + 1000)
                    tail = [k for k in still_open for _ in range(FAILOVER_TURNS)]
                    rng.shuffle(tail)
                    for k in tail:
                        await turn(policy, sessions[k], args, fail, tok, pool)
            await policy.close()
            return {"main": main, "failover": fail}
        finally:
            servers.stop()


# --- report ------------------------------------------------------------------------------------


def spread(values: Sequence[float], fmt: str = ".3f") -> str:
    """`median (min-max)` of the runs; `-` when there is none."""
    if not values:
        return "-"
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def summarize(runs: list[dict[str, dict[str, Tally]]], policies: Sequence[str]) -> dict[str, Any]:
    """Per policy and phase, every run's figures (lists in run order), and fusion's ratios to
    each baseline per run (evaluated tokens, median first token)."""
    rows: dict[str, Any] = {}
    for policy in policies:
        for phase in ("main", "failover"):
            ts = [r[policy][phase] for r in runs]
            if not any(t.ttft_ms for t in ts):
                continue
            rows[f"{policy}/{phase}"] = {
                "evaluated": [t.evaluated for t in ts],
                "minimum": [t.minimum for t in ts],
                "ratio": [round(t.ratio, 4) for t in ts],
                "beyond_minimum": [t.evaluated - t.minimum for t in ts],
                "ttft_ms": [round(t.median_ttft_ms, 1) for t in ts],
                "moves": [t.moves for t in ts],
                "stated_cost": [t.stated for t in ts],
                "placed": [dict(sorted(t.placed.items())) for t in ts],
                "evicted_with_empty_slot": [t.evicted for t in ts],
            }
    vs: dict[str, Any] = {}
    for other in policies:
        if other == "fusion" or "fusion" not in policies:
            continue
        for phase in ("main", "failover"):
            f, o = rows.get(f"fusion/{phase}"), rows.get(f"{other}/{phase}")
            if f is None or o is None:
                continue
            vs[f"{other}/{phase}"] = {
                "evaluated": [
                    round(a / b, 4)
                    for a, b in zip(f["evaluated"], o["evaluated"], strict=True)
                    if b
                ],
                "ttft": [
                    round(a / b, 4) for a, b in zip(f["ttft_ms"], o["ttft_ms"], strict=True) if b
                ],
            }
    return {"rows": rows, "fusion_vs": vs}


def placed_text(placed: list[dict[str, int]]) -> str:
    """New sessions per server, run by run: `a4 b2, a3 b3, ...`."""
    return ", ".join(" ".join(f"{k}{v}" for k, v in p.items()) for p in placed)


def print_report(table: dict[str, Any], runs: int) -> None:
    print(f"{runs} run(s) · median (min-max) of the runs · 2 servers x 2 slots (one-server: 1 x 4)"
          f" · {SESSIONS} sessions")  # fmt: skip
    print(f"{'policy/phase':<22}{'evaluated / minimum':>22}{'evaluated/minimum':>26}"
          f"{'first token ms':>22}  new sessions per server")  # fmt: skip
    for name, row in table["rows"].items():
        ev = f"{statistics.median(row['evaluated']):,.0f} / "
        ev += f"{statistics.median(row['minimum']):,.0f}"
        where = placed_text(row["placed"]) if name.endswith("/main") else ""
        print(f"{name:<22}{ev:>22}{spread(row['ratio']):>26}{spread(row['ttft_ms'], '.0f'):>22}"
              f"  {where}")  # fmt: skip
    print("\nfusion / baseline (median (min-max) of the per-run ratios):")
    print(f"{'baseline/phase':<22}{'evaluated':>26}{'first token':>26}")
    for name, r in table["fusion_vs"].items():
        print(f"{name:<22}{spread(r['evaluated']):>26}{spread(r['ttft']):>26}")
    fus = table["rows"].get("fusion/main")
    if fus is not None:
        print(f"\nfusion: new sessions put on a held slot while an empty one stood: "
              f"{', '.join(str(n) for n in fus['evicted_with_empty_slot'])} (per run)")  # fmt: skip
    ff = table["rows"].get("fusion/failover")
    if ff is not None:
        print(f"failover: fusion moved {statistics.median(ff['moves']):.0f} sessions, stated cost "
              f"{statistics.median(ff['stated_cost']):,.0f} tokens, re-read beyond the minimum "
              f"{statistics.median(ff['beyond_minimum']):,.0f}; beyond the minimum elsewhere: "
              + ", ".join(f"{n.split('/')[0]} {statistics.median(r['beyond_minimum']):,.0f}"
                          for n, r in table["rows"].items()
                          if n.endswith("/failover") and not n.startswith("fusion")))  # fmt: skip


def machine() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{os.cpu_count()} cores, load average {one:.2f} {five:.2f} {fifteen:.2f}"


async def main(args: argparse.Namespace) -> None:
    runs = []
    launches: dict[str, list[str]] = {}
    before, t0 = machine(), time.monotonic()
    for i in range(args.runs):
        seed = args.seed + i
        result = {}
        for kind in run_order(i, args.policies):
            result[kind] = await run_policy(kind, seed, args, launches)
        line = ", ".join(f"{k} {t['main'].evaluated}/{t['main'].minimum} = {t['main'].ratio:.3f}"
                         for k, t in result.items())  # fmt: skip
        print(f"run {i + 1} (seed {seed}, {' '.join(run_order(i, args.policies))}): {line}",
              file=sys.stderr)  # fmt: skip
        runs.append(result)
    table = summarize(runs, args.policies)
    after, elapsed = machine(), time.monotonic() - t0
    if args.json:
        print(json.dumps({**table, "launches": launches, "machine_before": before,
                          "machine_after": after, "elapsed_s": round(elapsed),
                          "args": vars(args)}, indent=2))  # fmt: skip
        return
    print(f"machine: {before} at the start, {after} at the end; {elapsed:.0f} s")
    for kind, lines in launches.items():
        for line in lines:
            print(f"{kind:<12} {line}")
    print_report(table, args.runs)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3, help="repeat N times (>= 3 for a table)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--words", type=int, default=120)
    p.add_argument("--max-tokens", type=int, default=256, help="answer length (ignore_eos)")
    p.add_argument("--ctx-per-slot", type=int, default=2048)
    p.add_argument("--threads", type=int, default=1, help="-t of every server")
    p.add_argument("--policies", default=",".join(POLICIES), help="comma-separated, of "
                   f"{', '.join(POLICIES)}")  # fmt: skip
    p.add_argument("--model")
    p.add_argument("--json", action="store_true")
    p.add_argument("--trace", action="store_true")
    args = p.parse_args(argv)
    chosen = [x.strip() for x in args.policies.split(",") if x.strip()]
    unknown = [x for x in chosen if x not in POLICIES]
    if unknown or not chosen:
        p.error(f"--policies: unknown {', '.join(unknown) or '(none given)'}; choose from "
                f"{', '.join(POLICIES)}")  # fmt: skip
    args.policies = [x for x in POLICIES if x in chosen]
    if args.runs < 1:
        p.error("--runs must be at least 1")
    return args


if __name__ == "__main__":
    stop_on_sigterm()
    asyncio.run(main(parse()))
