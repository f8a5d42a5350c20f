"""Real server: `fusion-tui run` follows the one slot policy. Two workspaces' sessions alternate
on two different slots of one kept-running daemon, and after `fusion-tui stop` / a new launch
both resume warm from their saved slots (the issue saw both on one slot and a cold re-read); the
second workspace's first request starts from the first one's cached system prompt and tools."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.paths import AppPaths
from fusion_tui.server.process.daemon import ManagedDaemon
from tests.child_env import managed_env

pytestmark = pytest.mark.server


def test_two_run_sessions_alternate_on_two_slots_and_resume_warm_after_a_restart(
    tmp_path: Path, llama_server_bin: Path, demo_model: Path
) -> None:
    home = tmp_path / "home"
    env = managed_env(
        home, llama_server_bin, demo_model, parallel=4, ctx=8192, threads=2, max_tokens=40,
        FUSION_TUI_LOCALMODELS__MANAGED__KEEPRUNNING="true",
        # SmolLM2 rambles to the bound: short steps keep the history uncompacted, so what the
        # slot held before the restart is all a prefix of what comes after it
        FUSION_TUI_AGENT__MAXTOKENS="40",
    )  # fmt: skip
    paths = AppPaths.default(env={"FUSION_TUI_HOME": str(home)})
    spaces = {}
    for name in ("A", "B"):
        spaces[name] = tmp_path / f"ws-{name}"
        spaces[name].mkdir()
        (spaces[name] / "notes.md").write_text(f"# workspace {name}\n")

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "fusion_tui", *argv]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)

    ids: dict[str, str] = {}
    requests: dict[str, list[list[dict[str, Any]]]] = {"A": [], "B": []}

    def task(name: str, text: str) -> None:
        argv = ["run", "--json", "--max-steps", "1", "--max-duration-ms", "300000"]
        argv += ["--session", ids[name]] if name in ids else ["--workspace", str(spaces[name])]
        proc = cli(*argv, text)
        events = [json.loads(line) for line in proc.stdout.splitlines()]
        assert events and events[-1]["event"] == "outcome", proc.stderr
        ids[name] = events[-1]["session"]
        own = ("step", "repair")
        steps = [e for e in events if e["event"] == "request" and e["purpose"] in own]
        requests[name].append(steps)  # a summary side call rides the side slot

    try:
        for r in range(2):
            for name in ("A", "B"):
                task(name, f"read notes.md ({r})")
        assert cli("stop").returncode == 0
        for name in ("A", "B"):
            task(name, "read notes.md again")
    finally:
        asyncio.run(ManagedDaemon(paths, binary=llama_server_bin).stop())
    print(json.dumps(requests, indent=1))
    slots = {n: {q["id_slot"] for turn in requests[n][:2] for q in turn} for n in ("A", "B")}
    assert len(slots["A"]) == len(slots["B"]) == 1 and slots["A"] != slots["B"], slots
    # B started warm: A's slot (the same system prompt and tools) was copied into B's empty one
    a0, b0 = requests["A"][0][0], requests["B"][0][0]
    assert a0["cache_n"] == 0 and b0["cache_n"] >= 0.8 * (a0["prompt_n"] - 64), (a0, b0)
    for name in ("A", "B"):  # resumed by a new process on the same server: all of it cached
        before, after = requests[name][0][-1], requests[name][1][0]
        assert after["cache_n"] >= before["prompt_n"] + before["cache_n"], (before, after)
    for name in ("A", "B"):
        before = requests[name][1][-1]
        after = requests[name][2][0]  # the first request after the restart
        total = after["prompt_n"] + after["cache_n"]
        assert after["cache_n"] >= before["prompt_n"] + before["cache_n"], (before, after)
        assert after["prompt_n"] <= 0.05 * total + 64, after  # warm, not a cold re-read
