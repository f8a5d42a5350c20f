"""Benchmark: several llama-servers, cache-aware placement against a round-robin balancer.

Two local llama-servers on 127.0.0.1 stand for two machines (2 slots each, the demo model unless
--model). 6 sessions take a few turns each in a seeded random order (at most 4 open at once, a
session closes when it is done while others still wait to start); each request extends the
session's previous prompt exactly (token ids: prompt + generated tokens + the next user turn).

  fusion      fusion-tui's policy: `endpoints.placement` picks the endpoint and slot of a new
              session from `HealthWatcher` snapshots, pins it (id_slot per request), checks the
              pin before every turn and fails over when its server is gone.
  round-robin what a generic load balancer does: requests alternate servers, id_slot -1; a
              server that refuses connections is skipped.

Then one server is killed (SIGKILL) and every open session takes 2 more turns: the failover cost.
Prints prompt tokens the servers evaluated (`timings.prompt_n`) against the minimum (the tokens
new in each request: the prompt less what the session's previous request left in a cache),
mean time to first token, and for the failover the tokens re-read and the cost fusion stated.
Median of --runs runs (different seeds, fresh servers per policy) with the spread (min-max).

    .venv/bin/python bench/multi_endpoint.py [--runs 3] [--turns 4] [--words 120]
        [--max-tokens 8] [--ctx-per-slot 2048] [--model PATH] [--json] [--trace]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from fusion_tui.demo_model import demo_model_path
from fusion_tui.endpoints.health import HealthWatcher
from fusion_tui.endpoints.model import Endpoint
from fusion_tui.endpoints.placement import Pin, Placement, check_pin, failover, place_new
from fusion_tui.endpoints.registry import EndpointRegistry
from fusion_tui.server.binary import find_llama_server
from fusion_tui.server.client import LlamaClient
from fusion_tui.server.daemon import free_port
from fusion_tui.server.launch import LaunchSpec
from fusion_tui.server.sse import SSEParser

SESSIONS = 6
MAX_OPEN = 4
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


# --- servers -----------------------------------------------------------------------------------


class Servers:
    """Two llama-servers on 127.0.0.1; killed when the run ends."""

    def __init__(self, args: argparse.Namespace, home: Path) -> None:
        model = Path(args.model) if args.model else demo_model_path()
        if model is None:
            raise SystemExit("no model: pass --model or install the demo model")
        self.model = model
        self.binary = find_llama_server()
        self.args = args
        self.home = home
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.urls: dict[str, str] = {}

    async def start(self) -> None:
        spec = LaunchSpec(model=self.model, parallel=2, ctx=2 * self.args.ctx_per_slot, threads=1)
        for label in ("a", "b"):
            port = free_port()
            log = (self.home / f"{label}-{port}.log").open("wb")
            self.procs[label] = subprocess.Popen(
                spec.argv(self.binary, port), stdout=log, stderr=subprocess.STDOUT
            )
            self.urls[label] = f"http://127.0.0.1:{port}"
        for label, url in self.urls.items():
            await wait_ready(url, self.procs[label])

    def kill(self, label: str) -> None:
        proc = self.procs.get(label)
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)

    def stop(self) -> None:
        for label in list(self.procs):
            self.kill(label)
        self.procs.clear()


async def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    async with LlamaClient(url, timeout=5.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"llama-server at {url} exited with {proc.returncode}")
            try:
                await client.health()
                return
            except Exception:
                await asyncio.sleep(0.3)
    raise SystemExit(f"llama-server at {url} was not ready in {timeout:g} s")


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
    cached_after: int = 0
    """`tokens_cached` of the previous request: what a warm slot holds of the next prompt."""
    turns: int = 0
    pin: Pin | None = None


@dataclass
class Tally:
    evaluated: int = 0
    minimum: int = 0
    ttft_ms: list[float] = field(default_factory=list)
    stated: int = 0
    moves: int = 0

    def add(self, answer: Answer, minimum: int) -> None:
        self.evaluated += answer.prompt_n
        self.minimum += minimum
        self.ttft_ms.append(answer.ttft_ms)

    @property
    def ratio(self) -> float:
        return self.evaluated / self.minimum if self.minimum else 0.0


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


# --- the two policies --------------------------------------------------------------------------


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
        if decision.action == "move":
            tally.stated += decision.cold_tokens
            tally.moves += 1
            print(f"  fusion: session {s.k}: {decision.reason}", file=sys.stderr)
        elif trace and decision.reason != "pinned":
            print(f"  fusion: session {s.k}: {decision.reason}", file=sys.stderr)
        s.pin = Pin(decision.endpoint, decision.slot)
        return decision.endpoint, decision.slot

    async def send(self, s: Session, n: int, tally: Tally, trace: bool) -> Answer:
        label, slot = await self.place(s, tally, trace)
        answer = await complete(self.urls[label], s.prompt, slot, n)
        self.watcher.record_turn(label, answer.tok_s)
        return answer

    async def close(self) -> None:
        await self.registry.aclose()


class RoundRobin:
    name = "round-robin"

    def __init__(self, servers: Servers) -> None:
        self.urls = list(servers.urls.values())
        self.down: set[str] = set()
        self.turn = 0
        self.open: dict[int, Session] = {}

    async def send(self, s: Session, n: int, tally: Tally, trace: bool) -> Answer:
        for _ in range(len(self.urls)):
            url = self.urls[self.turn % len(self.urls)]
            self.turn += 1
            if url in self.down:
                continue
            try:
                return await complete(url, s.prompt, -1, n)
            except Refused:
                self.down.add(url)  # health check failed: take it out of the pool
        raise SystemExit("round-robin: no server left")

    async def close(self) -> None:
        pass


async def turn(policy: Fusion | RoundRobin, s: Session, args: argparse.Namespace, tally: Tally,
               tokenize: LlamaClient) -> None:  # fmt: skip
    minimum = max(1, len(s.prompt) - s.cached_after)
    answer = await policy.send(s, args.max_tokens, tally, args.trace)
    tally.add(answer, minimum)
    if args.trace:
        row = f"prompt={len(s.prompt)} evaluated={answer.prompt_n} min={minimum}"
        print(f"  {policy.name} s{s.k} t{s.turns} {row} cache={answer.cache_n}", file=sys.stderr)
    s.cached_after = answer.tokens_cached
    s.turns += 1
    s.prompt = s.prompt + answer.generated + await tokenize.tokenize(follow_up(s.k, s.turns))


async def run_policy(kind: str, seed: int, args: argparse.Namespace) -> dict[str, Tally]:
    with tempfile.TemporaryDirectory(prefix="fusion-multi-") as tmp:
        servers = Servers(args, Path(tmp))
        try:
            await servers.start()
            policy: Fusion | RoundRobin = (
                Fusion(servers) if kind == "fusion" else RoundRobin(servers)
            )
            main, fail = Tally(), Tally()
            order, still_open = schedule(seed, args.turns)
            async with LlamaClient(servers.urls["a"]) as tok:
                sessions: dict[int, Session] = {}
                for k in order:
                    if k not in sessions:
                        sessions[k] = Session(k, await tok.tokenize(opening(k, args.words)))
                        policy.open[k] = sessions[k]
                    await turn(policy, sessions[k], args, main, tok)
                    if sessions[k].turns == args.turns and k not in still_open:
                        policy.open.pop(k, None)  # closed: its pin is released
                servers.kill("b")
                rng = random.Random(seed + 1000)
                tail = [k for k in still_open for _ in range(2)]
                rng.shuffle(tail)
                for k in tail:
                    await turn(policy, sessions[k], args, fail, tok)
            await policy.close()
            return {"main": main, "failover": fail}
        finally:
            servers.stop()


# --- report ------------------------------------------------------------------------------------


def med(values: list[float], digits: int = 3) -> str:
    f = f".{digits}f"
    return f"{statistics.median(values):{f}} ({min(values):{f}}-{max(values):{f}})"


def beyond(row: dict[str, Any]) -> float:
    return statistics.median(e - m for e, m in zip(row["evaluated"], row["minimum"], strict=True))


def report(runs: list[dict[str, dict[str, Tally]]], as_json: bool) -> None:
    rows: dict[str, Any] = {}
    for policy in ("fusion", "round-robin"):
        for phase in ("main", "failover"):
            ts = [r[policy][phase] for r in runs]
            rows[f"{policy}/{phase}"] = {
                "evaluated": [t.evaluated for t in ts],
                "minimum": [t.minimum for t in ts],
                "ratio": [round(t.ratio, 4) for t in ts],
                "ttft_ms": [round(statistics.mean(t.ttft_ms), 1) for t in ts],
                "moves": [t.moves for t in ts],
                "stated_cost": [t.stated for t in ts],
            }
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{len(runs)} runs · median (min-max) · 2 servers × 2 slots · {SESSIONS} sessions")
    print(f"{'phase':<22}{'evaluated / minimum':>22}{'ratio':>24}{'mean TTFT ms':>24}")
    for name, row in rows.items():
        ev = f"{statistics.median(row['evaluated']):,.0f} / "
        ev += f"{statistics.median(row['minimum']):,.0f}"
        print(f"{name:<22}{ev:>22}{med(row['ratio']):>24}{med(row['ttft_ms'], 0):>24}")
    fus, rr = rows["fusion/main"], rows["round-robin/main"]
    print(
        f"fusion vs minimum: {med(fus['ratio'])} (target <= 1.05); round-robin: {med(rr['ratio'])}"
    )
    ff, rf = rows["fusion/failover"], rows["round-robin/failover"]
    print(
        f"failover: fusion moved {statistics.median(ff['moves']):.0f} sessions, stated cost "
        f"{statistics.median(ff['stated_cost']):,.0f} tokens, re-read beyond the minimum "
        f"{beyond(ff):,.0f}; round-robin re-read beyond the minimum {beyond(rf):,.0f}"
    )


async def main(args: argparse.Namespace) -> None:
    runs = []
    for i in range(args.runs):
        seed = args.seed + i
        result = {kind: await run_policy(kind, seed, args) for kind in ("fusion", "round-robin")}
        f, r = result["fusion"]["main"], result["round-robin"]["main"]
        line = f"fusion {f.evaluated}/{f.minimum} = {f.ratio:.3f}, "
        line += f"round-robin {r.evaluated}/{r.minimum} = {r.ratio:.3f}"
        print(f"run {i + 1} (seed {seed}): {line}", file=sys.stderr)
        runs.append(result)
    report(runs, args.json)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--words", type=int, default=120)
    p.add_argument("--max-tokens", type=int, default=8)
    p.add_argument("--ctx-per-slot", type=int, default=2048)
    p.add_argument("--model")
    p.add_argument("--json", action="store_true")
    p.add_argument("--trace", action="store_true")
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse()))
