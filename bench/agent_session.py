"""One agent session that outgrows its slot: six tasks on a small module, through `fusion-tui run`.

What it shows: whether a session keeps working after its transcript is compacted between tasks.
A small inventory module with a pytest file is written afresh; six tasks (a bug fix, then five
additions) run one after another in one session, each as `fusion-tui run TASK --session ID
--yes --json`, on the managed server of an app home of the bench's own (`FUSION_TUI_HOME`, two
slots of 4,096 tokens by default: the session outgrows its slot after three or four tasks), kept
running between tasks and stopped at the end. Per task: the outcome, the wall time, the prompt
tokens read and the first token of its first request, fresh attempts, and any compaction (the
transcript's tokens before it, the summary's length, the summary request's prompt tokens and
first token). At the end: the tests on the final files, and the methods the module defines.

No baseline runs in the same process: this is a behaviour check on a real model (done or not,
task by task), not a speed target. Compare two commits by running it on each (a worktree each).

Run: .venv/bin/python bench/agent_session.py [--model coder-1.5b] [--ctx 8192] [--parallel 2]
     [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FUSION = [sys.executable, "-m", "fusion_tui"]

MODULE = '''"""A small stock inventory."""


class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, name, count):
        self.items[name] = self.items.get(name, 0) + count

    def remove(self, name, count):
        self.items[name] = self.items.get(name, 0) - count

    def count(self, name):
        return self.items.get(name, 0)

    def total(self):
        return sum(self.items.values())
'''
TESTS = """import pytest

from inventory import Inventory


def test_add_and_count():
    inv = Inventory()
    inv.add("apple", 3)
    inv.add("apple", 2)
    assert inv.count("apple") == 5


def test_remove_more_than_held_raises():
    inv = Inventory()
    inv.add("pear", 1)
    with pytest.raises(ValueError):
        inv.remove("pear", 2)


def test_total():
    inv = Inventory()
    inv.add("a", 1)
    inv.add("b", 2)
    assert inv.total() == 3
"""
TASKS = (
    "remove in inventory.py must raise ValueError when asked to remove more than is held; "
    "make test_inventory.py pass",
    "Add a method names() to Inventory in inventory.py that returns the item names with a count "
    "above zero, sorted.",
    "Add a method most_stocked() to Inventory in inventory.py that returns the name with the "
    "highest count, or None when empty.",
    "Add a method to_dict() to Inventory in inventory.py that returns a copy of the counts, and "
    "a classmethod from_dict(data) that builds an Inventory from such a dict.",
    "Add a method clear(name) to Inventory in inventory.py that removes the item entirely and "
    "returns the count it had.",
    "Add type hints to every method of Inventory in inventory.py, keeping the behaviour the same.",
)


def events_of(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def report(n: int, events: list[dict[str, Any]], wall: float) -> str:
    requests = [e for e in events if e["event"] == "request"]
    outcome = next((e["outcome"] for e in events if e["event"] == "outcome"), "?")
    retries = sum(1 for e in events if e["event"] == "retry")
    first = requests[0] if requests else {}
    line = (
        f"task {n}: {outcome:<12} {wall:6.1f} s  first request {first.get('prompt_n', 0):>5} read"
        f" / {first.get('cache_n', 0):>5} cached, first token {float(first.get('ttft_ms', 0)):7.0f}"
        f" ms  fresh attempts {retries}"
    )
    for k, e in enumerate(events):
        if e["event"] == "compacted":
            asked: dict[str, Any] = next((r for r in reversed(requests) if events.index(r) < k), {})
            line += (
                f"\n        compacted after it: {e['before']} tokens -> a summary of "
                f"{e['summary_chars']} characters; its request read {asked.get('prompt_n', '?')}"
                f" tokens, first token {float(asked.get('ttft_ms', 0)):.0f} ms"
            )
    return line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="coder-1.5b")
    ap.add_argument("--ctx", type=int, default=8192, help="the server's total context")
    ap.add_argument("--parallel", type=int, default=2, help="slots")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="per task")
    ap.add_argument("--keep", action="store_true", help="keep the workspace and app home")
    a = ap.parse_args()
    keep = tempfile.mkdtemp(prefix="agent-session-") if a.keep else None
    with (
        contextlib.nullcontext(keep)
        if keep
        else tempfile.TemporaryDirectory(prefix="agent-session-") as tmp
    ):
        if keep:
            print(f"kept in {keep}")
        ws, home = Path(tmp) / "ws", Path(tmp) / "home"
        ws.mkdir()
        (ws / "inventory.py").write_text(MODULE)
        (ws / "test_inventory.py").write_text(TESTS)
        env = {
            **os.environ,
            "FUSION_TUI_HOME": str(home),
            "FUSION_TUI_LOCALMODELS__MANAGED__PARALLEL": str(a.parallel),
            "FUSION_TUI_LOCALMODELS__MANAGED__CTX": str(a.ctx),
            "FUSION_TUI_LOCALMODELS__MANAGED__KEEPRUNNING": "true",
            "PYTHONPATH": str(ROOT),
        }
        print(f"model {a.model}, {a.parallel} slots, ctx {a.ctx}, {len(TASKS)} tasks, one session")
        session = ["--new"]
        done = 0
        try:
            for n, task in enumerate(TASKS, 1):
                t0 = time.monotonic()
                argv = [*FUSION, "--model", a.model, "run", task, *session,
                        "--workspace", str(ws), "--yes", "--json"]  # fmt: skip
                ran = subprocess.run(argv, env=env, capture_output=True, text=True,
                                     timeout=a.timeout_s, check=False)  # fmt: skip
                events = events_of(ran.stdout)
                print(report(n, events, time.monotonic() - t0), flush=True)
                ids = [e["session"] for e in events if e["event"] == "outcome"]
                if not ids:
                    print(ran.stderr[-2000:], file=sys.stderr)
                    return 1
                session = ["--session", str(ids[0])]
                done += any(e.get("outcome") == "completed" for e in events)
        finally:
            subprocess.run([*FUSION, "stop"], env=env, capture_output=True, check=False)
        tests = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                               cwd=ws, capture_output=True, text=True, check=False)  # fmt: skip
        defs = [line.split("(")[0].split()[-1] for line in (ws / "inventory.py").read_text()
                .splitlines() if line.strip().startswith("def ")]  # fmt: skip
        print(
            f"completed {done} of {len(TASKS)}; tests at the end: "
            f"{tests.stdout.strip().splitlines()[-1] if tests.stdout.strip() else tests.stderr}"
        )
        print(f"methods: {', '.join(defs)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
