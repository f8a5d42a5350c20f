"""The pure parts of bench/decode.py: the file it asks to rewrite, the judge of a rewritten or
edited file, and the table. A judge that passes a wrong file would hide a broken drafter."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

import _decode_core as core

SOURCE = core.source_file()
RIGHT = SOURCE.replace(core.OLD_NAME, core.NEW_NAME)


def test_the_file_is_about_200_lines_of_valid_python_with_the_target_function() -> None:
    assert 190 <= SOURCE.count("\n") <= 220
    span = core.function_span(SOURCE, core.TARGET)
    assert span is not None and span[1] - span[0] >= 5
    assert core.source_file() == SOURCE  # the same file every run


def test_the_asked_rename_is_correct() -> None:
    assert core.judge_file(SOURCE, RIGHT).correct


def test_an_unchanged_file_is_not_correct() -> None:
    verdict = core.judge_file(SOURCE, SOURCE)
    assert not verdict.correct and "does not use" in verdict.why


def test_a_change_outside_the_function_is_caught() -> None:
    wrong = RIGHT.replace("return round(total, 3)", "return round(total, 2)")
    verdict = core.judge_file(SOURCE, wrong)
    assert not verdict.correct and "outside restock_plan" in verdict.why


def test_a_dropped_function_is_caught() -> None:
    lines = RIGHT.splitlines(keepends=True)
    span = core.function_span(RIGHT, "discount")
    assert span is not None
    wrong = "".join(lines[: span[0] - 1] + lines[span[1] :])
    assert not core.judge_file(SOURCE, wrong).correct


def test_a_file_that_does_not_parse_or_is_missing_is_not_correct() -> None:
    assert not core.judge_file(
        SOURCE, RIGHT.replace("def total_weight(", "def total_weight((")
    ).correct
    assert core.judge_file(SOURCE, None).why == "no file in the answer"


def test_the_file_is_read_from_the_longest_code_block() -> None:
    answer = f"Sure:\n```python\nx = 1\n```\nThe file:\n```python\n{RIGHT}```\nDone."
    assert core.extract_file(answer) == RIGHT
    assert core.extract_file("no code at all") is None


def test_a_search_replace_edit_is_applied_and_judged() -> None:
    span = core.function_span(SOURCE, core.TARGET)
    assert span is not None
    old = "\n".join(SOURCE.splitlines()[span[0] - 1 : span[1]])
    new = old.replace(core.OLD_NAME, core.NEW_NAME)
    answer = f"<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"
    assert core.judge_file(SOURCE, core.apply_edit(SOURCE, answer)).correct
    assert (
        core.apply_edit(SOURCE, "<<<<<<< SEARCH\nnot in the file\n=======\nx\n>>>>>>> REPLACE")
        is None
    )
    assert core.apply_edit(SOURCE, "no block") is None


def test_the_table_has_every_setting_with_ratios_to_the_first() -> None:
    cells = {
        ("off", "rewrite"): core.Cell([core.Sample(10.0, 100.0, 900, correct=True, load=0.2)]),
        ("ngram-simple", "rewrite"): core.Cell(
            [core.Sample(12.0, 80.0, 900, drafted=100, accepted=50, correct=False, load=1.4)]
        ),
        ("off", "humaneval"): core.Cell([core.Sample(9.0, 200.0, 2000, passed=11, of=20)]),
    }
    table = core.render_table(cells, ["off", "ngram-simple"], ["rewrite", "humaneval"], "off")
    row = "| rewrite | ngram-simple | 12.00 (12.00-12.00) | 1.20 | 80.0 (80.0-80.0) | 0.80 | 50% |"
    assert row + " 0/1 |" in table
    assert "| humaneval | off |" in table and "| 11/20 |" in table
    assert "1.4-1.4" in table  # the load of every figure


def test_an_edit_given_as_the_changed_function_replaces_it() -> None:
    span = core.function_span(SOURCE, core.TARGET)
    assert span is not None
    old = "\n".join(SOURCE.splitlines()[span[0] - 1 : span[1]])
    answer = f"```python\n{old.replace(core.OLD_NAME, core.NEW_NAME)}\n```"
    assert core.judge_file(SOURCE, core.apply_edit(SOURCE, answer)).correct
    assert not core.judge_file(SOURCE, core.apply_edit(SOURCE, f"```python\n{old}\n```")).correct
    assert core.apply_edit(SOURCE, "```python\nx = 1\n```") is None


def test_the_edit_prompt_names_the_block_form() -> None:
    prompt = core.edit_prompt(SOURCE)
    assert "<<<<<<< SEARCH" in prompt and ">>>>>>> REPLACE" in prompt
