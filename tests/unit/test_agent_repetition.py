"""An answer that goes round in a loop is stopped where the loop began, so it costs the step
one round of it instead of the whole token cap (the 1.5B wrote the same fix and the same invented
test output four times over, 8,860 characters, about 200 s of a 300 s try)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fusion_tui.agent.approval import Decision
from fusion_tui.agent.events import RequestDone
from fusion_tui.agent.loop import run_task
from fusion_tui.agent.request import REPEAT_WINDOW, repetition_start
from tests.fakes.clock import FakeClock
from tests.unit.test_agent_fakes import FakeSlots, Recorder, Say, Script, make_deps

FIX = (
    "Here is the corrected `recite` function:\n\n```python\ndef recite(start, take=1):\n"
    "    verses = []\n    for i in range(start, start - take, -1):\n"
    '        verses.append(f"{i} green bottles hanging on the wall,")\n'
    '        verses.append("And if one green bottle should accidentally fall,")\n'
    '        verses.append(f"There\'ll be {i - 1} green bottles hanging on the wall.")\n'
    '        verses.append("")\n    return verses\n```\n\n'
)
ROUND = (
    "After making this correction, the tests should pass. Here is the output:\n\n```\n"
    + "FAILED bottle_song_test.py::BottleSongTest::test_verse - AssertionError\n" * 5
    + "7 failed in 0.65s\n```\n\nIt seems that the tests are still failing. Let's review "
    "the function again.\n\n" + FIX
)


def test_a_loop_is_cut_where_its_first_repeat_began() -> None:
    text = "To fix the tests:\n\n" + FIX + ROUND * 3 + ROUND[:200]
    cut = repetition_start(text)
    assert cut is not None
    first = "To fix the tests:\n\n" + FIX + ROUND[: -len(FIX)]  # the fix, then what followed it
    assert text[:cut].rstrip() == first.rstrip()


def test_an_answer_that_does_not_repeat_itself_is_not_cut() -> None:
    verses = "".join(f"{n} green bottles hanging on the wall,\n" * 2 for n in range(40))
    assert repetition_start(verses) is None  # repetitive, but never 600 characters alike
    assert repetition_start(FIX) is None  # too short to judge
    assert repetition_start("x = 1\n" * 50) is None  # 300 characters: below the window
    assert repetition_start("x = 1\n" * 300) is not None  # one line, over and over


def test_a_loop_that_counts_is_cut_too() -> None:
    """scale-generator, the 1.5B: the same sixteen branches over and over, the numbers one
    higher each time, until the token cap."""
    names = ["M", "m", "A", "B", "C", "D", "E", "F", "G", "Bb", "Cb", "Db", "Eb", "Fb", "Gb", "Ab"]
    head = "```python\nclass Scale:\n    def interval(self, steps):\n        for i in steps:\n"
    branches = "".join(
        f'            elif i == "{name}":\n'
        f"                notes.append(notes[-1] + chr(97 + {10 + k}))\n"
        for k, name in enumerate(names * 4)
    )
    text = head + branches
    cut = repetition_start(text)
    assert cut is not None
    assert len(head) < cut <= len(head) + len(branches) // 4 + 100  # about one round kept
    primes = "PRIMES = [" + ", ".join(str(n) for n in range(11, 400)) + "]\n"
    assert repetition_start(primes) is None  # the same shape every few characters: no loop


async def test_a_step_that_loops_is_stopped_and_its_first_round_used(tmp_path: Path) -> None:
    (tmp_path / "song.py").write_text("def recite(start, take=1):\n    return []\n")
    looping = "song.py\n" + FIX.split("\n\n", 1)[1] + ROUND * 6
    clock = FakeClock(start=1000.0)
    script = Script(clock, [Say(looping, chunks=400), Say("Done: recite rewritten.")])
    slots = FakeSlots()
    slots.pin("s", 1)
    events: list[Any] = []
    allow = Recorder(*[Decision.ALLOW_ONCE] * 4)
    deps = make_deps(tmp_path, script, allow, events=events, slots=slots)
    res = await run_task("fix recite in song.py", session_id="s", deps=deps)
    done = [e for e in events if isinstance(e, RequestDone)]
    assert done[0].ended == "repeated"
    assert script.closed >= 1 and len(res.packer.messages[1].text) < len(looping) / 3
    assert "verses.append" in (tmp_path / "song.py").read_text()  # the first round was used
    assert len(looping) > 4 * REPEAT_WINDOW
