"""Estimate vs allocation: the KV table for the configurations of tests/server/test_kv_accuracy.py.

Usage: .venv/bin/python bench/kv_accuracy.py
Launches the real llama-server (loopback, free port, `-lv 4`, killed once loaded) on the tiny
random-weight models and SmolLM2, and prints our estimate, the logged allocation, and the error.
Also prints what a naive "every layer holds the whole context" estimate would say, as a baseline.
"""

from __future__ import annotations

import sys
import tempfile
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fusion_tui.fit.allocation import MIB, matches, parse_allocation
from fusion_tui.fit.kv import estimate_kv
from fusion_tui.gguf.facts import read_model_facts
from fusion_tui.models.demo import demo_model_path
from fusion_tui.server.process.binary import find_llama_server
from tests.server.test_kv_accuracy import CASES, _id
from tests.tinymodels import launch_and_read_log, server_kv_args, write_all


def main() -> int:
    binary, demo = find_llama_server(), demo_model_path()
    if demo is None:
        print("the demo model is not installed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        models = {**write_all(root / "tiny", demo), "smollm2": demo}
        print(f"{'configuration':<48} {'estimate B':>11} {'logged':>10} {'error':>8} "
              f"{'verdict':>13} {'naive':>7}")  # fmt: skip
        worst, exact, total = 0.0, 0, 0
        for i, (name, cfg) in enumerate(CASES):
            facts = read_model_facts(models[name])
            est = estimate_kv(facts, cfg).total_bytes
            naive = estimate_kv(facts, replace(cfg, swa_full=True)).total_bytes
            log = launch_and_read_log(binary, models[name], server_kv_args(cfg), root / f"{i}.log")
            alloc = parse_allocation(log)
            if alloc is None:
                print(f"{_id((name, cfg)):<48} {est / MIB:>9.2f} MiB   (no size lines)")
                continue
            got = alloc.total_bytes
            err = (est - got) / got * 100
            worst = max(worst, abs(err))
            ok = matches(est, alloc)
            exact, total = exact + ok, total + 1
            verdict = "exact" if ok else "OFF"
            print(f"{_id((name, cfg)):<48} {est:>11,} {got / MIB:>6.2f}MiB {err:>+7.2f}% "
                  f"{verdict:>13} {naive / max(got, 1):>6.2f}x")  # fmt: skip
        print(
            f"{exact}/{total} equal to the allocation within the log's rounding (0.005 MiB per"
            f" size line); largest relative gap {worst:.2f}%, all of it print rounding on"
            " sub-MiB caches. naive = every layer holds the whole context."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
