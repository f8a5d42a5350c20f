"""How well the coding agent solves Exercism's Python exercises in two tries, next to aider and the
bare model on the same server: another kind of task than HumanEval's single function.

aider's code-editing benchmark protocol (`_exercism_core.py`): a fresh workspace per exercise
holds the stub, the unit tests and the instructions; try 1 sends the instructions; the tests run;
when they fail, try 2 sends their output in the same conversation. The tests are put back before
every run. Three clients, interleaved per exercise, share ONE llama-server started as `fusion-tui
launch` starts it (`_agent_server.py`):
- `fusion`: `fusion-tui run MESSAGE --yes --workspace DIR --json`, `--new` for try 1 and
  `--session ID` (the id try 1 printed) for try 2; it finds and runs the workspace's tests itself,
  as it does for a user;
- `single-shot`: one `/v1/chat/completions` request per try with the message and the stub, its
  first python block written to the solution file (try 2 goes on with the same messages): the
  model's own ability;
- `aider`: aider-chat 0.86.2, whole-file edits, the solution file in the chat, try 2 with
  `--restore-chat-history` (the workspace keeps aider's chat file), temperature 0.
Per client: pass@1 and pass@2, median and total seconds per exercise (both tries, the judge's test
runs left out), the server's prompt and predicted tokens, the final verdict's class.

The exercises come from github.com/exercism/python (MIT) at `EXERCISM_COMMIT`, cloned on first
use into the bench cache (`--exercises DIR`: a checkout of your own).

Run: .venv/bin/python bench/agent_exercism.py --model coder-1.5b --sample 8 --seed 2
         [--only acronym,bob] [--clients fusion,single-shot,aider] [--runs 1]
         [--timeout-s 600] [--json-out FILE] [--fusion-cmd CMD] [--keep] [--exercises DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agent_server import Server, bench_server, counters, machine
from _exercism_core import (
    Exercise,
    Record,
    TestRun,
    classify,
    first_message,
    load_exercises,
    make_workspace,
    render_rows,
    render_table,
    run_tests,
    second_message,
    summarise,
)
from _humaneval_clients import (
    MAX_TOKENS,
    ClientRun,
    check_fusion,
    ensure_bench_venv,
    run_aider,
    run_fusion,
)
from _humaneval_core import extract_code, sample, tail

CLIENTS = ("fusion", "single-shot", "aider")
EXERCISM_REPO = "https://github.com/exercism/python"
EXERCISM_COMMIT = "9eb657d4507d91efef99f484e7f2a1f4074911b5"
"""The track as the published tables ran it (2026-06-29)."""
EXERCISM_CACHE = Path.home() / ".cache" / "fusion-tui" / "bench" / "exercism-python"
ROOT = Path(__file__).resolve().parents[1]
TRIES = 2


def exercism_checkout(cache: Path = EXERCISM_CACHE) -> Path:
    """The pinned checkout of the track, cloned into `cache` on first use."""
    if (cache / "exercises" / "practice").is_dir():
        return cache
    print(f"cloning {EXERCISM_REPO} at {EXERCISM_COMMIT[:12]} into {cache}", file=sys.stderr)
    part = cache.with_name(cache.name + ".part")
    shutil.rmtree(part, ignore_errors=True)
    try:
        subprocess.run(["git", "clone", "--quiet", EXERCISM_REPO, str(part)], check=True)
        subprocess.run(["git", "-C", str(part), "checkout", "--quiet", EXERCISM_COMMIT],
                       check=True)  # fmt: skip
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(
            f"could not clone {EXERCISM_REPO} ({exc}); clone it yourself and pass --exercises DIR"
        ) from None
    part.rename(cache)
    return cache


def single_shot_try(
    ex: Exercise, ws: Path, messages: list[dict[str, str]], message: str, url: str, timeout_s: float
) -> ClientRun:
    """One chat request; on try 1 the stub goes with the message. The answer's first python
    block becomes the solution file (an exercise of one solution file; else nothing is written)."""
    if not messages:
        stubs = "".join(
            f"\n{name}\n```python\n{(ws / name).read_text()}```\n" for name in ex.solution
        )
        message = f"{message}\n{stubs}\nReply with the whole new file in one python code block."
    messages.append({"role": "user", "content": message})
    body = {"messages": messages, "temperature": 0, "max_tokens": MAX_TOKENS}
    start = time.monotonic()
    try:
        resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=timeout_s)
        resp.raise_for_status()
        answer = resp.json()["choices"][0]["message"]["content"] or ""
    except httpx.TimeoutException:
        return ClientRun(time.monotonic() - start, True, {"error": "request timed out"})
    messages.append({"role": "assistant", "content": answer})
    if len(ex.solution) == 1:
        (ws / ex.solution[0]).write_text(extract_code(answer).rstrip() + "\n")
    return ClientRun(time.monotonic() - start, False, {"answer": tail(answer, 3000)})


def one(
    args: argparse.Namespace, server: Server, run: int, ex: Exercise, client: str, tmp: Path
) -> Record:
    """One client on one exercise in a fresh workspace, up to two tries, judged after each."""
    box = Path(tempfile.mkdtemp(prefix=f"{client}-", dir=tmp))
    ws, home = box / "ws", box / "home"
    home.mkdir(parents=True)
    stub = make_workspace(ex, ws)
    before = counters(server.url)
    message, session, messages = first_message(ex), None, []
    verdicts: list[str] = []
    tries: list[dict[str, Any]] = []
    wall = 0.0
    for attempt in range(1, TRIES + 1):
        if client == "fusion":
            ran = run_fusion(message, ws, args.server_home, args.model, args.fusion_cmd,
                             args.timeout_s, None, session)  # fmt: skip
            session = ran.detail.get("session")
        elif client == "single-shot":
            ran = single_shot_try(ex, ws, messages, message, server.url, args.timeout_s)
        else:
            ran = run_aider(message, ws, home, args.proxy, server.model, args.aider_files,
                            args.timeout_s, None, edit=ex.solution,
                            restore_chat=attempt > 1)  # fmt: skip
        wall += ran.wall_s
        test: TestRun | None = None if ran.timed_out else run_tests(ex, ws)
        verdict = classify(stub, ws, test, ran.timed_out)
        verdicts.append(verdict)
        tries.append(dict(ran.detail, wall_s=round(ran.wall_s, 2), verdict=verdict,
                          tests=tail(test.output, 1500) if test else ""))  # fmt: skip
        said = f"  ({ran.detail.get('outcome')})" if client == "fusion" else ""
        print(f"run {run + 1} {ex.slug:24} {client:11} try {attempt} {verdict:12} "
              f"{ran.wall_s:7.1f} s{said}", flush=True)  # fmt: skip
        if verdict == "pass" or ran.timed_out or test is None:
            break
        message = second_message(ex, test.output)
    after = counters(server.url)
    detail = {"tries": tries, "files": {n: (ws / n).read_text(errors="replace")
                                        for n in ex.solution if (ws / n).is_file()}}  # fmt: skip
    if not args.keep:
        shutil.rmtree(box, ignore_errors=True)
    return Record(run, ex.slug, client, verdicts, round(wall, 2), after[0] - before[0],
                  after[1] - before[1], detail)  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--exercises", type=Path, metavar="DIR",
                    help="a checkout of github.com/exercism/python (default: the pinned one, "
                    "cloned on first use)")  # fmt: skip
    ap.add_argument("--model", help="model short name or GGUF path (default: fusion's default)")
    ap.add_argument("--sample", type=int, default=8, help="exercises (default 8; 0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", metavar="SLUG,...", help="these exercises instead of a sample")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--timeout-s", type=float, default=600.0, help="per try per client")
    ap.add_argument("--json-out", type=Path, metavar="FILE", help="every per-exercise record")
    ap.add_argument("--fusion-cmd", default=str(ROOT / ".venv" / "bin" / "fusion-tui"))
    ap.add_argument("--keep", action="store_true", help="keep the workspaces (path printed)")
    args = ap.parse_args(argv)
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = sorted(set(clients) - set(CLIENTS))
    if unknown or not clients:
        ap.error(f"--clients: unknown {', '.join(unknown) or '(none)'}; pick from {CLIENTS}")
    folder = args.exercises.expanduser() if args.exercises else exercism_checkout()
    try:
        exercises = load_exercises(folder)
    except (OSError, ValueError, KeyError) as exc:
        ap.error(f"--exercises {args.exercises}: not a checkout of exercism/python ({exc})")
    if not exercises:
        ap.error(f"--exercises {args.exercises}: no exercise found (exercises/practice/*)")
    if args.only:
        wanted = {s.strip() for s in args.only.split(",") if s.strip()}
        missing = wanted - {e.slug for e in exercises}
        if missing or not wanted:
            ap.error(f"--only: no such exercise: {', '.join(sorted(missing)) or '(none)'}")
        exercises = [e for e in exercises if e.slug in wanted]
    else:
        exercises = sample(exercises, args.sample or None, args.seed)
    if "fusion" in clients:
        check_fusion(args.fusion_cmd, None)
    if "aider" in clients:
        ensure_bench_venv()
    command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    started = datetime.datetime.now().astimezone()
    load_before = machine()
    records: list[Record] = []
    with bench_server(args.model, "agent-exercism-", args.keep) as bench:
        server, tmp = bench.server, bench.folder
        args.server_home, args.aider_files, args.proxy = bench.home, bench.aider_files, bench.proxy
        header = {
            "command": f"`{command}`",
            "date": started.strftime("%Y-%m-%d %H:%M %Z"),
            "machine": load_before,
            "server": f"`{shlex.join(server.argv)}`",
            "exercises": f"{len(exercises)} ({'chosen' if args.only else f'seed {args.seed}'}): "
            + " ".join(e.slug for e in exercises),
            "limits": f"{args.timeout_s:g} s per try per client, {TRIES} tries",
        }
        for run in range(args.runs):
            for ex in exercises:
                for client in clients:
                    records.append(one(args, server, run, ex, client, tmp))
                    # written after every record: an exercise can take twenty minutes, and a
                    # run stopped half-way keeps what it measured
                    save(args.json_out, header, records)
    header["machine"] += f"; at the end {os.getloadavg()[0]:.2f}"
    save(args.json_out, header, records)
    print("\n" + render_table(summarise(records, clients), header))
    print("\n" + render_rows(records, clients))
    return 0


def save(path: Path | None, header: dict[str, str], records: list[Record]) -> None:
    if path is not None:
        data = {"header": header, "records": [dataclasses.asdict(r) for r in records]}
        path.write_text(json.dumps(data, indent=1) + "\n")


if __name__ == "__main__":
    started_at = time.monotonic()
    code = main()
    print(f"\n({time.monotonic() - started_at:.0f} s)", file=sys.stderr)
    sys.exit(code)
