"""How fast, and how well, the coding agent fixes a bug in a long module: the module shown in part
(the functions the task and the failing tests name, `agent.longFilesInPart`, the default) next to
the module shown whole (the setting off: the baseline, what the agent did before), same server.

The modules are real code: pure-Python modules of the standard library of the Python that runs
the bench (textwrap, shlex, string, fnmatch: 6 to 20 kB each), copied into a fresh workspace
under another name, with one planted bug and a short pytest file that catches it. The task is
what a user would type, with `--test-cmd` (the tests run before the first step, as a user's
test command does). Both arms run each task in turn (interleaved), `--runs N` times.
Per arm: tasks passed, median and total seconds, the server's prompt and predicted tokens.

Run: .venv/bin/python bench/agent_long_files.py --model coder-1.5b [--runs 1]
         [--only wraptext,shellwords] [--timeout-s 600] [--json-out FILE] [--keep]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import difflib
import importlib
import json
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _agent_server import bench_server, counters, machine
from _humaneval_clients import check_fusion, run_fusion
from _humaneval_core import tail

ROOT = Path(__file__).resolve().parents[1]
ARMS = {"in part": "true", "whole": "false"}
"""Arm → `agent.longFilesInPart`."""


@dataclasses.dataclass(frozen=True)
class Task:
    name: str
    """The module's name in the workspace."""
    stdlib: str
    """The standard-library module it is a copy of."""
    bug: tuple[str, str]
    """(the text as it is, the text planted): must occur exactly once."""
    message: str
    tests: str


TASKS = [
    Task(
        "wraptext", "textwrap",
        ("yield (prefix + line if predicate(line) else line)",
         "yield (line + prefix if predicate(line) else line)"),
        "the tests fail; fix wraptext.py",
        "from wraptext import dedent, indent\n\n\n"
        "def test_indent():\n"
        "    assert indent('a\\nb\\n', '> ') == '> a\\n> b\\n'\n"
        "    assert indent('a\\n\\nb', '  ') == '  a\\n\\n  b'\n\n\n"
        "def test_dedent():\n"
        "    assert dedent('  a\\n    b\\n') == 'a\\n  b\\n'\n",
    ),
    Task(
        "shellwords", "shlex",
        ("""s.replace("'", "'\\"'\\"'")""", """s.replace("'", "\\\\'")"""),
        "fix quote in shellwords.py so the tests pass",
        "import shlex as real\n\nfrom shellwords import quote, split\n\n\n"
        "def test_quote():\n"
        "    for s in ['plain', 'two words', \"it's\", '', \"a'b'c\"]:\n"
        "        assert real.split(quote(s)) == [s]\n"
        "    assert quote(\"it's\") == \"'it'\\\"'\\\"'s'\"\n\n\n"
        "def test_split():\n"
        "    assert split('a \"b c\" d') == ['a', 'b c', 'd']\n",
    ),
    Task(
        "strtools", "string",
        ("map(str.capitalize, s.split(sep))", "map(str.title, s.split(sep))"),
        "capwords gives a wrong result; fix strtools.py",
        "from strtools import Template, capwords\n\n\n"
        "def test_capwords():\n"
        "    assert capwords(\"hello o'neil\") == \"Hello O'neil\"\n"
        "    assert capwords('ABC def-ghi') == 'Abc Def-ghi'\n\n\n"
        "def test_template():\n"
        "    assert Template('$a-$b').substitute(a=1, b=2) == '1-2'\n",
    ),
    Task(
        "globmatch", "fnmatch",
        ("return match(name) is not None", "return match(name) is None"),
        "fnmatchcase answers the opposite; fix globmatch.py",
        "from globmatch import filter, fnmatchcase\n\n\n"
        "def test_fnmatchcase():\n"
        "    assert fnmatchcase('a.py', '*.py')\n"
        "    assert not fnmatchcase('a.txt', '*.py')\n\n\n"
        "def test_filter():\n"
        "    assert filter(['a.py', 'b.txt'], '*.py') == ['a.py']\n",
    ),
]  # fmt: skip


def module_text(task: Task) -> str:
    """The standard-library module's source with the bug planted."""
    module = importlib.import_module(task.stdlib)
    source = Path(str(module.__file__)).read_text()
    old, new = task.bug
    if source.count(old) != 1:
        raise SystemExit(f"{task.stdlib}: the text to plant the bug in is not there once: {old}")
    return source.replace(old, new)


def judge(ws: Path, task: Task) -> tuple[bool, str]:
    """The task's tests, put back as they were, on what the workspace holds."""
    (ws / f"test_{task.name}.py").write_text(task.tests)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"test_{task.name}.py"],
        cwd=ws, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return proc.returncode == 0, tail(proc.stdout + proc.stderr, 1500)


def one(args: argparse.Namespace, url: str, task: Task, arm: str, run: int) -> dict[str, Any]:
    ws = Path(tempfile.mkdtemp(prefix=f"{task.name}-", dir=args.folder))
    buggy = module_text(task)
    (ws / f"{task.name}.py").write_text(buggy)
    (ws / f"test_{task.name}.py").write_text(task.tests)
    ok_before, _ = judge(ws, task)
    if ok_before:
        raise SystemExit(f"{task.name}: the tests pass on the planted bug; fix the bench")
    test_cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider test_{task.name}.py"
    before = counters(url)
    ran = run_fusion(
        task.message, ws, args.server_home, args.model, args.fusion_cmd, args.timeout_s,
        test_cmd, env={"FUSION_TUI_AGENT__LONGFILESINPART": ARMS[arm]},
    )  # fmt: skip
    after = counters(url)
    passed, output = judge(ws, task)
    text = (ws / f"{task.name}.py").read_text()
    record = {
        "run": run, "task": task.name, "arm": arm, "passed": passed,
        "wall_s": round(ran.wall_s, 1), "timed_out": ran.timed_out,
        "prompt_tokens": after[0] - before[0], "predicted_tokens": after[1] - before[1],
        "outcome": ran.detail.get("outcome"), "requests": ran.detail.get("requests"),
        "lines_changed": changed_lines(buggy, text), "tests": "" if passed else output,
    }  # fmt: skip
    print(f"run {run + 1} {task.name:10} {arm:7} {'pass' if passed else 'FAIL':4} "
          f"{ran.wall_s:6.1f} s  predicted {record['predicted_tokens']:5}  "
          f"({record['outcome']}, {record['lines_changed']} lines changed)",
          flush=True)  # fmt: skip
    if not args.keep:
        shutil.rmtree(ws, ignore_errors=True)
    return record


def changed_lines(old: str, new: str) -> int:
    """Lines that differ (a real fix here is one line; a rewrite changes many)."""
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
    return sum(1 for d in diff if d[:1] in "+-" and not d.startswith(("+++", "---")))


def table(records: list[dict[str, Any]], header: dict[str, str]) -> str:
    lines = [f"- {k}: {v}" for k, v in header.items()]
    lines += ["", "| arm | passed | median s | spread s | total s | prompt tokens | predicted |",
              "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for arm in ARMS:
        rs = [r for r in records if r["arm"] == arm]
        if not rs:
            continue
        walls = [r["wall_s"] for r in rs]
        lines.append(
            f"| {arm} | {sum(r['passed'] for r in rs)} / {len(rs)} | "
            f"{statistics.median(walls):.1f} | {min(walls):.0f}–{max(walls):.0f} | "
            f"{sum(walls):.0f} | {sum(r['prompt_tokens'] for r in rs):,} | "
            f"{sum(r['predicted_tokens'] for r in rs):,} |"
        )
    base = [r for r in records if r["arm"] == "whole"]
    part = [r for r in records if r["arm"] == "in part"]
    if base and part:
        ratio = sum(r["wall_s"] for r in part) / max(1e-9, sum(r["wall_s"] for r in base))
        lines.append(f"\ntotal wall, in part / whole: {ratio:.2f}×")
    lines += ["", "| run | task | arm | verdict | s | predicted | outcome | lines changed |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    lines += [
        f"| {r['run'] + 1} | {r['task']} | {r['arm']} | {'pass' if r['passed'] else 'fail'} | "
        f"{r['wall_s']} | {r['predicted_tokens']} | {r['outcome']} | {r['lines_changed']} |"
        for r in records
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="model short name or GGUF path (default: fusion's default)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", metavar="NAME,...", help="these tasks: " + ",".join(
        t.name for t in TASKS))  # fmt: skip
    ap.add_argument("--arms", default=",".join(ARMS), help="in part,whole (both by default)")
    ap.add_argument("--timeout-s", type=float, default=600.0, help="per task per arm")
    ap.add_argument("--json-out", type=Path, metavar="FILE")
    ap.add_argument("--fusion-cmd", default=str(ROOT / ".venv" / "bin" / "fusion-tui"))
    ap.add_argument("--keep", action="store_true", help="keep the workspaces (path printed)")
    args = ap.parse_args(argv)
    tasks = TASKS
    if args.only:
        wanted = {s.strip() for s in args.only.split(",") if s.strip()}
        tasks = [t for t in TASKS if t.name in wanted]
        if not tasks or len(tasks) != len(wanted):
            ap.error(f"--only: pick from {', '.join(t.name for t in TASKS)}")
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if not arms or set(arms) - set(ARMS):
        ap.error(f"--arms: pick from {', '.join(ARMS)}")
    check_fusion(args.fusion_cmd, "pytest")
    command = shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv]))
    started = datetime.datetime.now().astimezone()
    records: list[dict[str, Any]] = []
    with bench_server(args.model, "agent-long-files-", args.keep) as bench:
        args.server_home, args.folder = bench.home, bench.folder
        header = {
            "command": f"`{command}`",
            "date": started.strftime("%Y-%m-%d %H:%M %Z"),
            "machine": machine(),
            "server": f"`{shlex.join(bench.server.argv)}`",
            "modules": f"the standard library of Python {sys.version.split()[0]}",
            "limits": f"{args.timeout_s:g} s per task per arm",
        }
        for run in range(args.runs):
            for task in tasks:
                for arm in arms:
                    records.append(one(args, bench.server.url, task, arm, run))
                    if args.json_out:
                        args.json_out.write_text(json.dumps(
                            {"header": header, "records": records}, indent=1) + "\n")  # fmt: skip
    print("\n" + table(records, header))
    return 0


if __name__ == "__main__":
    started_at = time.monotonic()
    code = main()
    print(f"\n({time.monotonic() - started_at:.0f} s)", file=sys.stderr)
    sys.exit(code)
