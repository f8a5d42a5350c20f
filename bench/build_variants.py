"""Benchmark: prompt and decode speed of several llama-server builds, each with weight repacking
on and off (`--no-repack`), in the same run, with the ratio against the first build's default.

Why: the Makefile's `CMAKE_ARGS` decide which CPU code the server is built with (a
native build dies of SIGILL in the AMX kernel on a guest that advertises AMX). A build is kept
only if it is as fast as the default here; `--no-repack` rows show what the SIGILL recovery
(relaunch with repacking off) costs on this CPU.

Each configuration is one server (SmolLM2 unless --model, 1 slot, the product's launch flags from
`LaunchSpec.argv`), all started before the first run and measured round robin, so a change of
load on a shared machine hits every configuration alike. A run is one `/completion` with a
~1,000-token prompt (`cache_prompt: false`, so it is evaluated in full) and 128 generated tokens
(EOS ignored): prompt speed is `timings.prompt_per_second`, decode speed
`timings.predicted_per_second`. Printed: median over the runs, the spread (min-max, and its half
as a % of the median), and the ratio against the first row: the median (and range) over the runs
of each run's own ratio, since the rows of one run are measured within a minute of each other
and the load of a shared machine drifts between runs.

One thread (`-t 1`) by default: the builds differ in the code each thread runs, and on a shared
2-core machine under load two threads spend most of a decode step waiting for each other (measured
here: 0.8 tok/s at the server's default of 2 threads against 12.7 tok/s at `-t 1`, same build, a few
minutes apart). `--threads 0` leaves the server's own choice.

    .venv/bin/python bench/build_variants.py                       # the server fusion-tui uses
    .venv/bin/python bench/build_variants.py default=/a/llama-server noamx=/b/llama-server \
        [--runs 5] [--prompt-tokens 1000] [--predict 128] [--threads 1] [--no-norepack] [--json]

Every server it starts is killed before it exits (also on Ctrl+C and SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _servers import model_arg

from fusion_tui.server.process.binary import find_llama_server
from fusion_tui.server.process.daemon import free_port
from fusion_tui.server.process.launch import LaunchSpec
from tests.prompt_words import CODE_WORDS

LOAD_TIMEOUT_S = 180.0
REQUEST_TIMEOUT_S = 600.0
WORDS = (
    *CODE_WORDS,
    "matrix",
    "kernel",
    "thread",
    "socket",
)


@dataclass
class Config:
    """One server to measure: a build (label, binary) with repacking on or off."""

    label: str
    binary: Path
    repack: bool
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    log: Path | None = None
    prompt_tps: list[float] = field(default_factory=list)
    decode_tps: list[float] = field(default_factory=list)
    error: str | None = None

    @property
    def name(self) -> str:
        return self.label + ("" if self.repack else " --no-repack")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def parse_binaries(items: list[str]) -> list[tuple[str, Path]]:
    """`[LABEL=]PATH` items; with none, the llama-server fusion-tui would use, labelled default."""
    if not items:
        return [("default", find_llama_server())]
    out = []
    for i, item in enumerate(items, 1):
        label, sep, path = item.partition("=")
        if not sep:
            label, path = f"#{i}", item
        binary = Path(path).expanduser()
        if not binary.is_file():
            raise SystemExit(f"{binary}: no such llama-server binary")
        out.append((label, binary))
    return out


def post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=REQUEST_TIMEOUT_S) as resp:
        data: dict[str, Any] = json.loads(resp.read())
    return data


def exit_words(code: int) -> str:
    if code < 0:
        try:
            return f"died of {signal.Signals(-code).name}"
        except ValueError:
            return f"died of signal {-code}"
    return f"exited with code {code}"


def log_tail(cfg: Config, lines: int = 8) -> str:
    if cfg.log is None or not cfg.log.exists():
        return ""
    return "\n".join(cfg.log.read_text(errors="replace").splitlines()[-lines:])


def start(cfg: Config, spec: LaunchSpec, logdir: Path) -> None:
    cfg.port = free_port()
    cfg.log = logdir / f"{len(list(logdir.iterdir()))}.log"
    argv = spec.argv(cfg.binary, cfg.port) + ([] if cfg.repack else ["--no-repack"])
    with cfg.log.open("wb") as log:
        cfg.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)


def wait_ready(cfg: Config) -> None:
    """Wait for `/health` 200; on exit or time-out record the error (the row is then skipped)."""
    assert cfg.proc is not None
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    while time.monotonic() < deadline:
        code = cfg.proc.poll()
        if code is not None:
            cfg.error = f"{exit_words(code)} while starting"
            return
        try:
            with urllib.request.urlopen(cfg.url + "/health", timeout=5) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    cfg.error = f"not ready after {LOAD_TIMEOUT_S:.0f} s"


def stop(cfg: Config) -> None:
    if cfg.proc is None or cfg.proc.poll() is not None:
        return
    cfg.proc.terminate()
    try:
        cfg.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        cfg.proc.kill()
        cfg.proc.wait(timeout=15)


def make_prompt(url: str, n_tokens: int) -> list[int]:
    """Exactly `n_tokens` prompt tokens (the same for every server: the builds share a model)."""
    text = " ".join(f"{WORDS[(i * 7) % len(WORDS)]}{i % 97}" for i in range(n_tokens))
    tokens: list[int] = post(url, "/tokenize", {"content": text})["tokens"]
    if len(tokens) < n_tokens:
        raise SystemExit(f"the prompt text made only {len(tokens)} tokens")
    return tokens[:n_tokens]


def measure(cfg: Config, prompt: list[int], n_predict: int) -> None:
    body = {
        "prompt": prompt,
        "n_predict": n_predict,
        "ignore_eos": True,
        "cache_prompt": False,
        "temperature": 0.0,
    }
    try:
        timings = post(cfg.url, "/completion", body)["timings"]
    except (urllib.error.URLError, OSError, KeyError, ValueError) as exc:
        code = cfg.proc.poll() if cfg.proc else None
        cfg.error = exit_words(code) if code is not None else f"request failed: {exc}"
        return
    cfg.prompt_tps.append(float(timings["prompt_per_second"]))
    cfg.decode_tps.append(float(timings["predicted_per_second"]))


def summary(values: list[float]) -> dict[str, float]:
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return {"median": med, "min": lo, "max": hi, "spread_pct": 50 * (hi - lo) / med}


def report(configs: list[Config], as_json: bool) -> None:
    base = configs[0]
    rows: list[dict[str, Any]] = []
    for cfg in configs:
        row: dict[str, Any] = {"name": cfg.name, "binary": str(cfg.binary), "error": cfg.error}
        if cfg.prompt_tps and cfg.decode_tps:
            row["prompt"] = summary(cfg.prompt_tps)
            row["decode"] = summary(cfg.decode_tps)
            row["runs"] = len(cfg.decode_tps)
            if base.prompt_tps and base.decode_tps:
                for key, vals, bvals in (
                    ("prompt", cfg.prompt_tps, base.prompt_tps),
                    ("decode", cfg.decode_tps, base.decode_tps),
                ):
                    # per run: the rows of a run were measured within a minute of each other
                    paired = [v / b for v, b in zip(vals, bvals, strict=False)]
                    row[key]["ratio"] = statistics.median(paired)
                    row[key]["ratio_min"], row[key]["ratio_max"] = min(paired), max(paired)
        rows.append(row)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'configuration':<28} {'prompt tok/s (min-max, ±%)':>33} {'ratio (min-max)':>17}   "
          f"{'decode tok/s (min-max, ±%)':>33} {'ratio (min-max)':>17}")  # fmt: skip
    for row in rows:
        if "prompt" not in row:
            print(f"{row['name']:<28} FAILED: {row['error']}")
            continue
        cells = []
        for key in ("prompt", "decode"):
            s = row[key]
            cell = f"{s['median']:8.1f} ({s['min']:.1f}-{s['max']:.1f}, ±{s['spread_pct']:.0f}%)"
            ratio = (
                f"{s['ratio']:.2f} ({s['ratio_min']:.2f}-{s['ratio_max']:.2f})"
                if "ratio" in s
                else "-"
            )
            cells.append(f"{cell:>33} {ratio:>17}")
        note = f"  (stopped early: {row['error']})" if row["error"] else ""
        print(f"{row['name']:<28} {cells[0]}   {cells[1]}{note}")
    print(f"ratio = median over the runs of (row / {base.name!r} in the same run); "
          f"runs: {rows[0].get('runs', 0)}")  # fmt: skip


def on_sigterm(_signum: int, _frame: object) -> None:
    """SIGTERM (e.g. from `timeout`) leaves the way Ctrl+C does: through the `finally` that
    stops the servers."""
    raise KeyboardInterrupt


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("binaries", nargs="*", help="[LABEL=]PATH of llama-server; first = baseline")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--prompt-tokens", type=int, default=1000)
    ap.add_argument("--predict", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1, help="-t per server; 0 = the server's own")
    ap.add_argument("--model", default=None, help="short name or GGUF (default: the demo model)")
    ap.add_argument("--no-norepack", action="store_true", help="skip the --no-repack rows")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    model = model_arg(args.model)
    spec = LaunchSpec(
        model=model,
        parallel=1,
        ctx=args.prompt_tokens + args.predict + 256,
        threads=args.threads or None,
    )
    configs = [
        Config(label, binary, repack)
        for label, binary in parse_binaries(args.binaries)
        for repack in ((True,) if args.no_norepack else (True, False))
    ]
    signal.signal(signal.SIGTERM, on_sigterm)
    with tempfile.TemporaryDirectory(prefix="fusion-bench-builds-") as tmp:
        try:
            for cfg in configs:
                start(cfg, spec, Path(tmp))
            for cfg in configs:
                wait_ready(cfg)
                if cfg.error:
                    print(f"{cfg.name}: {cfg.error}\n{log_tail(cfg)}", file=sys.stderr)
            live = [c for c in configs if not c.error]
            if not live:
                report(configs, args.json)
                return 1
            prompt = make_prompt(live[0].url, args.prompt_tokens)
            for cfg in live:  # warm-up: first-touch of the weights, thread pools
                measure(cfg, prompt[:64], 8)
                cfg.prompt_tps.clear()
                cfg.decode_tps.clear()
            for i in range(args.runs):
                for cfg in live:
                    if not cfg.error:
                        measure(cfg, prompt, args.predict)
                print(f"run {i + 1}/{args.runs} done", file=sys.stderr)
        finally:
            for cfg in configs:
                stop(cfg)
        report(configs, args.json)
    return 0 if all(not c.error for c in configs) else 1


if __name__ == "__main__":
    sys.exit(main())
