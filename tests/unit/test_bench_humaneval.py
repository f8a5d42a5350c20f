"""The pure parts of bench/agent_humaneval.py: reading a chat answer's code, judging what a client
left in solution.py, and the report table. A wrong verdict here would misjudge every client."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

import _humaneval_core as he

PROMPT = '''from typing import List


def add_all(xs: List[int]) -> int:
    """ Sum of xs.
    >>> add_all([1, 2])
    3
    """
'''
TEST = """

def check(candidate):
    assert candidate([1, 2]) == 3
    assert candidate([]) == 0
"""
PROBLEM = he.Problem("HumanEval/7", PROMPT, "add_all", TEST)
GOOD = PROMPT + "    return sum(xs)\n"


def test_extract_code_prefers_the_first_python_block() -> None:
    answer = "Here:\n```text\nnot code\n```\n```python\nx = 1\n```\nand\n```python\ny = 2\n```"
    assert he.extract_code(answer) == "x = 1\n"


def test_extract_code_falls_back_to_an_unlabelled_block_then_the_whole_answer() -> None:
    assert he.extract_code("So:\n```\nz = 3\n```\n") == "z = 3\n"
    assert he.extract_code("return 1") == "return 1"


def test_extract_code_keeps_a_block_cut_at_the_token_cap() -> None:
    assert he.extract_code("```py\ndef f():\n    return 1") == "def f():\n    return 1"


def test_assemble_keeps_a_whole_function_and_adds_the_prompts_imports() -> None:
    code = "def add_all(xs: List[int]) -> int:\n    return sum(xs)\n"
    out = he.assemble_solution(PROBLEM, code)
    assert out.startswith("from typing import List\n\n")
    assert out.endswith(code)


def test_assemble_prepends_the_prompt_to_a_bare_body() -> None:
    out = he.assemble_solution(PROBLEM, "    return sum(xs)\n")
    assert out == GOOD


def test_placeholder_file_compiles_and_only_raises() -> None:
    text = he.placeholder_file(PROBLEM)
    assert text.startswith(PROMPT.rstrip())
    assert text.endswith(he.PLACEHOLDER)
    compile(text, "solution.py", "exec")


@pytest.mark.parametrize(
    ("code", "verdict"),
    [
        (0, "pass"),
        (2, "broken_file"),
        (3, "wrong_answer"),
        (-9, "wrong_answer"),
        (None, "timeout"),
    ],
)
def test_classify_by_check_exit(code: int | None, verdict: str) -> None:
    assert he.classify("a", "b", he.TestRun(code)) == verdict


def test_classify_unchanged_gone_and_late() -> None:
    assert he.classify("a", "a", None) == "no_edit"
    assert he.classify("a", None, None) == "broken_file"
    assert he.classify("a", "b", he.TestRun(0), client_timed_out=True) == "timeout"


@pytest.mark.parametrize(
    ("source", "verdict"),
    [
        (GOOD, "pass"),
        (PROMPT + "    return 0\n", "wrong_answer"),
        (PROMPT + "    return sum(xs\n", "broken_file"),
        ("import no_such_module_here\n" + GOOD, "broken_file"),
        ("def other():\n    pass\n", "broken_file"),
        (PROMPT + '    raise NotImplementedError("todo")\n', "wrong_answer"),
        (PROMPT + "    while True:\n        pass\n", "timeout"),
    ],
)
def test_run_check_verdicts(tmp_path: Path, source: str, verdict: str) -> None:
    """The harness in a real interpreter: each exit code means what `classify` reads."""
    solution = tmp_path / "solution.py"
    solution.write_text(source)
    test = he.run_check(PROBLEM, solution, timeout_s=2.0)
    assert he.classify(he.placeholder_file(PROBLEM), source, test) == verdict


def test_run_check_skips_the_files_main_block(tmp_path: Path) -> None:
    solution = tmp_path / "solution.py"
    solution.write_text(GOOD + "\nif __name__ == '__main__':\n    raise SystemExit(5)\n")
    assert he.run_check(PROBLEM, solution, timeout_s=3.0).code == 0


def test_load_and_sample_are_fixed_by_the_seed(tmp_path: Path) -> None:
    data = tmp_path / "he.jsonl.gz"
    rows = [{"task_id": f"HumanEval/{i}", "prompt": PROMPT, "entry_point": "add_all",
             "test": TEST, "canonical_solution": ""} for i in range(20)]  # fmt: skip
    with gzip.open(data, "wt") as fh:
        fh.write("\n".join(json.dumps(r) for r in rows) + "\n")
    problems = he.load_problems(data)
    assert [p.number for p in problems] == list(range(20))
    picked = he.sample(problems, 5, seed=3)
    assert picked == he.sample(problems, 5, seed=3)
    assert [p.number for p in picked] == sorted(p.number for p in picked)
    assert he.sample(problems, None, seed=3) == problems


def test_parse_metrics_reads_the_token_counters() -> None:
    page = (
        "# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.\n"
        "# TYPE llamacpp:prompt_tokens_total counter\n"
        "llamacpp:prompt_tokens_total 1234\n"
        "llamacpp:tokens_predicted_total 56\n"
        'other{label="x"} 7.5\n'
    )
    values = he.parse_metrics(page)
    assert values[he.PROMPT_COUNTER] == 1234
    assert values[he.PREDICTED_COUNTER] == 56
    assert values["other"] == 7.5


def _rec(run: int, client: str, verdict: str, wall: float) -> he.Record:
    return he.Record(run, f"HumanEval/{run}", client, verdict, wall, 100, 10)


def test_summary_and_table() -> None:
    records = [
        _rec(0, "fusion", "pass", 10.0), _rec(0, "fusion", "wrong_answer", 30.0),
        _rec(1, "fusion", "pass", 12.0), _rec(1, "fusion", "pass", 14.0),
        _rec(0, "single-shot", "no_edit", 1.0), _rec(0, "single-shot", "timeout", 2.0),
        _rec(1, "single-shot", "broken_file", 1.0), _rec(1, "single-shot", "pass", 3.0),
    ]  # fmt: skip
    fusion, single = he.summarise(records, ["fusion", "single-shot"])
    assert fusion.pass_at_1 == [0.5, 1.0]
    assert fusion.median_wall_s == [20.0, 13.0]
    assert fusion.total_wall_s == [40.0, 26.0]
    assert fusion.prompt_tokens == [200, 200]
    assert fusion.classes["wrong_answer"] == 1 and fusion.problems == 2
    assert single.classes == {"pass": 1, "no_edit": 1, "broken_file": 1, "wrong_answer": 0,
                              "timeout": 1}  # fmt: skip
    table = he.render_table([fusion, single], {"command": "`x`", "date": "today"})
    lines = table.splitlines()
    assert lines[:2] == ["- command: `x`", "- date: today"]
    assert "| fusion | 2 | 75% (50%–100%) | 16.5 (13.0–20.0) | 33 (26–40) | 200 | 20 " in table
    assert lines[-3].startswith("| single-shot | 2 | 25% (0%–50%) |")
    assert lines[-3].endswith("| 1 | 1 | 0 | 1 |")
    assert "Medians of 2 runs" in lines[-1]


def test_spread_of_one_run_is_the_value_alone() -> None:
    assert he.spread([0.25], ".0%") == "25%"
    assert he.spread([3.0, 3.0], ".1f") == "3.0"
    assert he.spread([], ".1f") == "–"


def test_first_token_table_splits_the_first_task_from_the_rest() -> None:
    def rec(client: str, s: float, n: int, cached: int) -> he.Record:
        first = {"first_token_s": s, "first_request_s": s / 2, "first_prompt_tokens": n,
                 "first_cached_tokens": cached}  # fmt: skip
        return he.Record(0, "HumanEval/1", client, "pass", 1.0, 0, 0, first)

    records = [rec("fusion", 9.0, 900, 0), rec("fusion", 2.0, 950, 800),
               rec("fusion", 4.0, 990, 800), rec("fusion", 3.0, 1000, 800)]  # fmt: skip
    table = he.render_first_tokens(records, ["fusion", "aider"])
    assert "| fusion | 9.00 (4.50) | 900 (0) | 3.00 (2.00–4.00) | 1.50 | 990 (800) |" in table
    assert "| aider | – | – | – | – | – |" in table


async def test_the_relay_passes_bytes_through_and_notes_each_request() -> None:
    import asyncio

    import httpx
    from _recording_proxy import RecordingProxy

    answer = b'{"timings":{"cache_n":24,"prompt_n":6,"prompt_ms":72.5}}'

    async def server(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while await r.readuntil(b"\r\n\r\n"):
            await r.readexactly(2)  # the body: "{}"
            w.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(answer), answer))
            await w.drain()

    upstream = await asyncio.start_server(server, "127.0.0.1", 0)
    proxy = RecordingProxy(upstream.sockets[0].getsockname()[1])
    url = proxy.start()
    try:
        async with httpx.AsyncClient() as client:  # one kept-alive connection, two requests
            for _ in range(2):
                resp = await client.post(f"{url}/v1/chat/completions", content=b"{}")
                assert resp.content == answer
    finally:
        proxy.stop()
        upstream.close()
    assert [s.line for s in proxy.seen] == ["POST /v1/chat/completions HTTP/1.1"] * 2
    assert proxy.seen[1].timings() == {"cache_n": 24.0, "prompt_n": 6.0, "prompt_ms": 72.5}
    assert proxy.seen[0].arrived <= proxy.seen[1].arrived
