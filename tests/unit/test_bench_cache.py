"""The pure parts of bench/cache_reuse.py: the independent minimum, the Enter-key clock, the
stock server's command line and the report's figures. A wrong minimum or clock here would make
every ratio of the cache tables a figure of the bench rather than of the policy."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

import _cache_report as report
import _keyboard as kb
import _minimum as mn
import _servers as srv
from _cache_common import Label, Row

# --- the minimum -----------------------------------------------------------------------------


def test_common_prefix_counts_the_shared_start_only() -> None:
    assert mn.common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert mn.common_prefix([], [1]) == 0
    assert mn.common_prefix([7, 8], [7, 8]) == 2
    assert mn.common_prefix([9, 1], [1, 9]) == 0


def test_minimum_is_the_prompt_past_its_longest_prefix_with_any_earlier_sequence() -> None:
    pool = mn.Minimum()
    assert pool.take([1, 2, 3], [1, 2, 3, 10, 11]) == 3  # nothing before: all of it is new
    # the next turn extends the prompt and its answer: only the new user turn is new
    assert pool.take([1, 2, 3, 10, 11, 20, 21], [1, 2, 3, 10, 11, 20, 21, 30]) == 2
    # another session sharing the system prefix [1, 2]: the shared part is not new
    assert pool.take([1, 2, 5, 6], [1, 2, 5, 6, 40]) == 2
    # the longest of several earlier sequences counts, not the latest
    assert pool.new([1, 2, 3, 10, 11, 20, 21, 30, 99]) == 1


def test_minimum_of_a_compacted_prompt_is_what_it_does_not_share() -> None:
    pool = mn.Minimum()
    pool.take([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6, 7, 8])
    # a summary replaced the history after the system prompt [1, 2]
    assert pool.new([1, 2, 50, 51, 52, 7, 8]) == 5


class _Row:
    def __init__(self, kind: str, request: Any, answer: str = "", error: str = "") -> None:
        self.label = Label("p", "s0", kind, 0)
        self.request, self.answer, self.error = request, answer, error
        self.minimum, self.prompt_tokens = -1, -1


def test_measure_counts_turns_only_with_the_servers_tokenizer() -> None:
    async def tokenize(text: str) -> list[int]:  # one token a character, as a tokenizer would
        return [ord(c) for c in text]

    async def render(messages: list[dict[str, Any]]) -> str:
        return "".join(f"<{m['role']}>{m['content']}" for m in messages)

    chat = [{"role": "user", "content": "hi"}]
    rows = [
        _Row("turn", "SYSab", answer="xy"),
        _Row("readahead", "SYSabxy<u>"),  # a client's choice: never in the minimum
        _Row("turn", "SYSabxy<u>cd"),
        _Row("side", "SYStitle"),
        _Row("summary", "SYSsum"),
        _Row("turn", chat),
        _Row("turn", "SYSzz", error="ContextExceeded"),
    ]
    asyncio.run(mn.measure(rows, tokenize, render))
    assert [r.minimum for r in rows] == [5, 0, 5, 0, 0, len("<user>hi"), 0]
    assert rows[2].prompt_tokens == len("SYSabxy<u>cd")
    assert rows[1].prompt_tokens == -1  # not measured


# --- the Enter-key clock ---------------------------------------------------------------------


def test_typing_takes_the_characters_at_70_wpm_and_a_paste_none() -> None:
    assert kb.typing_seconds("x" * 60, pasted=False) == pytest.approx(10.0)
    assert kb.typing_seconds("x" * 60, pasted=True) == 0.0


def test_enter_comes_after_the_typing_or_when_idle_work_ended() -> None:
    # the keystroke work ran past the typing: Enter at the end of the typing
    assert kb.enter_time(100.0, 5.0, 107.0) == 105.0
    # the work ended before: the idle rest of the typing is skipped
    assert kb.enter_time(100.0, 5.0, 101.0) == 101.0
    assert kb.enter_time(100.0, 5.0, None) == 105.0


def test_a_paste_presses_enter_at_once_and_leaves_the_work_running() -> None:
    async def scenario() -> tuple[kb.Typed, float, bool]:
        done = asyncio.Event()

        async def work() -> None:
            await asyncio.sleep(0.2)
            done.set()

        typed = await kb.type_message("notes " * 50, pasted=True, at_first_key=work)
        running = typed.pending is not None and not done.is_set()
        took = await typed.settle()
        return typed, took, running

    typed, took, running = asyncio.run(scenario())
    assert running  # the turn must wait for it: its first token counts that wait
    assert typed.typing_s == 0.0
    assert took == pytest.approx(0.2, abs=0.15)


def test_typing_hides_short_work_and_enter_is_when_it_ended() -> None:
    async def scenario() -> tuple[kb.Typed, float, float]:
        async def work() -> None:
            await asyncio.sleep(0.05)

        t0 = asyncio.get_running_loop().time()
        typed = await kb.type_message("x" * 600, pasted=False, at_first_key=work)  # 100 s typed
        return typed, t0, asyncio.get_running_loop().time()

    typed, t0, t1 = asyncio.run(scenario())
    assert typed.pending is None and typed.typing_s == pytest.approx(100.0)
    assert t1 - t0 < 5  # the idle typing was skipped, not slept
    assert typed.ended is not None and typed.enter == typed.ended


def test_work_longer_than_the_typing_runs_past_enter() -> None:
    async def scenario() -> tuple[kb.Typed, float]:
        async def work() -> None:
            await asyncio.sleep(0.5)

        typed = await kb.type_message("x" * 1, pasted=False, at_first_key=work)  # 1/6 s typed
        left = typed.pending is not None
        await typed.settle()
        return typed, float(left)

    typed, left = asyncio.run(scenario())
    assert left == 1.0
    assert typed.enter == pytest.approx(typed.started + 1 / 6)


# --- the stock server ------------------------------------------------------------------------


def test_stock_server_leaves_the_default_slot_count_unsaid() -> None:
    argv = srv.stock_argv("/bin/llama-server", Path("/m/model.gguf"), 8080, parallel=4, ctx=8192,
                          threads=2)  # fmt: skip
    assert "-np" not in argv  # an explicit -np splits the KV in this build
    assert argv[argv.index("-c") + 1] == "8192" and argv[argv.index("-t") + 1] == "2"
    assert "--no-kv-unified" not in argv and "--cache-ram" not in argv
    two = srv.stock_argv("llama-server", Path("/m/model.gguf"), 1, parallel=2, ctx=4096,
                         extra=("--cache-ram", "0"))  # fmt: skip
    assert two[two.index("-np") + 1] == "2" and two[-2:] == ["--cache-ram", "0"]
    assert "-t" not in two


def test_shown_names_the_binary_and_the_model_by_file() -> None:
    argv = ["/opt/bin/llama-server", "-m", "/very/long/SmolLM2.gguf", "--port", "1", "-c", "8"]
    assert srv.shown(argv) == "llama-server -m SmolLM2.gguf --port 1 -c 8"


def test_log_line_reads_the_servers_own_account_of_its_slots(tmp_path: Path) -> None:
    log = tmp_path / "s.log"
    log.write_text("x\nsrv    load_model: initializing, n_slots = 4, kv_unified = true\n")
    assert srv.log_line(log) == "n_slots = 4, kv_unified = true"
    assert srv.log_line(tmp_path / "missing.log") == ""


# --- the report ------------------------------------------------------------------------------


def _row(side: str, kind: str, turn: int, *, prompt_n: int, minimum: int, t_call: float,
         first: float, cache_n: int = 0, predicted_n: int = 256, ahead_s: float = 0.0,
         error: str = "", session: str = "s0") -> Row:  # fmt: skip
    r = Row(side, Label("sequential", session, kind, turn), -1, prompt_n=prompt_n,
            cache_n=cache_n, predicted_n=predicted_n, t0=t_call, t_call=t_call,
            t_first_text=first, t_end=first + 1.0, minimum=minimum, ahead_s=ahead_s,
            error=error)  # fmt: skip
    return r


def test_figures_count_every_request_but_time_only_turns() -> None:
    rows = [
        _row("fusion", "turn", 0, prompt_n=100, minimum=100, t_call=0.0, first=0.5),
        _row("fusion", "side", 0, prompt_n=40, minimum=0, t_call=1.0, first=1.1),
        _row("fusion", "readahead", 1, prompt_n=3, minimum=0, t_call=2.0, first=2.0, predicted_n=0),
        _row(
            "fusion",
            "turn",
            1,
            prompt_n=10,
            minimum=12,
            t_call=3.0,
            first=3.1,
            cache_n=200,
            ahead_s=0.25,
        ),
    ]
    f = report.figures(rows, "sequential")
    assert f["evaluated"] == 153 and f["minimum"] == 112
    assert f["vs_minimum"] == pytest.approx(153 / 112)
    assert f["readahead_tokens"] == 3 and f["side_tokens"] == 40
    assert f["readahead_s"] == pytest.approx(1.0) and f["keystroke_s"] == pytest.approx(0.25)
    assert f["ttft_ms"] == pytest.approx(300.0)  # median of 500 and 100
    assert f["wait_ms"] == pytest.approx(600.0)  # the whole wait: their sum
    assert f["answer_tokens"] == 256 and f["held"] == 210 and f["refused"] == 0


def test_summarize_gives_medians_spreads_and_fusion_ratios_per_side() -> None:
    def run(fusion_eval: int, plain_eval: int) -> dict[str, list[Row]]:
        return {
            "fusion": [
                _row("fusion", "turn", 0, prompt_n=fusion_eval, minimum=50, t_call=0, first=0.2)
            ],
            "plain": [
                _row("plain", "turn", 0, prompt_n=plain_eval, minimum=50, t_call=0, first=0.4)
            ],
        }

    table = report.summarize([run(50, 100), run(60, 100), run(70, 200)], ["sequential"],
                             ["fusion", "plain"])  # fmt: skip
    row = table[0]
    assert row["fusion_evaluated"] == 60 and row["fusion_evaluated_spread"] == [50, 70]
    assert row["evaluated_ratio_plain"] == pytest.approx(0.5)
    assert row["evaluated_ratio_plain_spread"] == pytest.approx([0.35, 0.6])
    assert row["ttft_ratio_plain"] == pytest.approx(0.5)
    assert row["wait_ratio_plain"] == pytest.approx(0.5)
    assert row["feature"] is False
    feature = report.summarize([run(50, 100)], ["sequential"], ["fusion", "plain"],
                               frozenset({"sequential"}))  # fmt: skip
    assert feature[0]["feature"] is True


def test_answer_lengths_line_up_the_sides_turn_by_turn() -> None:
    run = {
        "fusion": [
            _row("fusion", "turn", 0, prompt_n=1, minimum=1, t_call=0, first=0, predicted_n=31)
        ],
        "plain": [
            _row("plain", "turn", 0, prompt_n=1, minimum=1, t_call=0, first=0, predicted_n=29)
        ],
    }
    (line,) = report.answer_lengths(run, ["fusion", "plain"])
    assert line.split()[-3:] == ["31", "/", "29"]
