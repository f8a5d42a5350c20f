"""Real server: SmolLM2 with the constrained protocol runs "list the files, then finish" headless.

`fusion-tui run --json` in a subprocess with an isolated FUSION_TUI_HOME launches its own managed
daemon (2 slots, small context, 2 threads) and stops it when done. We assert that every step
parsed (no repair request, no failed step in the saved session) and that the outcome line is
there with a valid outcome and the session recorded it; not the wisdom of the answer.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fusion_tui.paths import AppPaths
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.sessions.store import SessionStore
from tests.child_env import managed_env

pytestmark = pytest.mark.server

OUTCOMES = {"completed", "cancelled", "time_ceiling", "max_steps", "error", "stuck", "no_answer"}


def test_smollm2_lists_the_files_then_finishes(
    tmp_path: Path, llama_server_bin: Path, demo_model: Path
) -> None:
    home = tmp_path / "home"
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("# demo\n")
    (ws / "main.py").write_text("print('hello')\n")
    env = managed_env(
        home, llama_server_bin, demo_model, parallel=2, ctx=4096, threads=2, max_tokens=128,
        FUSION_TUI_AGENT__TASK__FINALIZATIONMS="120000",
        FUSION_TUI_AGENT__MAXTOKENS="128",  # SmolLM2 rambles to the bound: keep a step short
    )  # fmt: skip
    paths = AppPaths.default(env={"FUSION_TUI_HOME": str(home)})
    argv = [sys.executable, "-m", "fusion_tui", "run", "--json", "--workspace", str(ws)]
    argv += ["--max-steps", "2", "--max-duration-ms", "240000"]
    argv += ["list the files, then finish"]
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=540)
    finally:
        asyncio.run(ManagedDaemon(paths, binary=llama_server_bin).stop())
    assert proc.returncode in (0, 1), proc.stderr
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert events, proc.stderr
    last = events[-1]
    assert last["event"] == "outcome" and last["outcome"] in OUTCOMES, proc.stderr
    assert proc.returncode == (0 if last["outcome"] == "completed" else 1)
    requests = [e for e in events if e["event"] == "request"]
    assert requests, proc.stderr
    assert all(r["purpose"] != "repair" for r in requests), requests  # every step parsed
    steps = [r for r in requests if r["purpose"] == "step"]
    assert steps and all(r["ended"] in ("ok", "time_ceiling") for r in steps), steps
    # the steps keep the session's slot; a side call (compaction) may run on another
    assert all(r["id_slot"] == steps[0]["id_slot"] for r in steps), requests

    session = SessionStore.default(paths).load(last["session"])
    assert session.turns[-1].outcome == last["outcome"]
    # SmolLM2 writes code blocks the step's cap cuts off: such a step writes nothing, is kept as
    # partial, and the model is told why (a repair note); nothing else may fail to parse
    cut = "nothing of that block was written"
    invalid = [m for m in session.messages if (m.partial_reason or "").startswith("invalid")]
    assert all(m.partial and cut in (m.partial_reason or "") for m in invalid), invalid
    transcript = json.loads((paths.sessions_dir / "agent" / f"{session.id}.json").read_text())
    notes = [m for m in transcript["messages"] if m["kind"] in ("raw", "repair")]
    assert all(m["kind"] == "repair" and cut in m["text"] for m in notes), notes
    print(f"\n{last['outcome']} after {len(requests)} request(s); stderr:\n{proc.stderr}")
