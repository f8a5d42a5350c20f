"""Near the context limit the loop compacts deliberately, on the side slot, and says so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.agent.events import TranscriptCompacted
from fusion_tui.agent.loop import AHEAD_ASK, EARLIER_WORK, compact_ahead, run_task
from tests.fakes.clock import FakeClock
from tests.unit.test_agent_fakes import Say, Script, act, make_deps


@pytest.mark.parametrize(
    ("reuse", "note"),
    [("none", "compaction costs a full re-read"), ("full", "stable prefix stays cached")],
)
async def test_compaction_is_a_side_call_and_restarts_on_the_stable_prefix(
    tmp_path: Path, reuse: str, note: str
) -> None:
    (tmp_path / "big.txt").write_text("word " * 400)
    clock = FakeClock(start=1000.0)
    script = Script(
        clock,
        [
            act("read_file", path="big.txt"),
            Say("read big.txt, nothing else"),
            act("finish", summary="done"),
        ],
    )
    events: list[Any] = []
    deps = make_deps(tmp_path, script, events=events, n_ctx=4000, prefix_reuse=reuse)
    res = await run_task("summarize big.txt", session_id="s", deps=deps)
    assert res.outcome == "completed"
    side = script.bodies[1]
    assert side["id_slot"] == 3 and side["cache_prompt"] is False and "json_schema" not in side
    compacted = [e for e in events if isinstance(e, TranscriptCompacted)]
    assert len(compacted) == 1 and note in compacted[0].note
    after = script.bodies[2]["prompt"]
    assert after.startswith(script.bodies[0]["prompt"].split("summarize big.txt")[0])
    assert "### summary of the work so far\nread big.txt, nothing else" in after
    assert "word word" not in after  # the old history is gone from the prompt ...
    assert "word word" in str(res.archived[0])  # ... but kept for the session


async def test_the_summary_request_carries_only_as_much_of_the_log_as_the_slot_holds(
    tmp_path: Path,
) -> None:
    (tmp_path / "big.txt").write_text("word " * 2000)  # 10,000 characters: 2.5 slots
    clock = FakeClock(start=1000.0)
    script = Script(
        clock, [act("read_file", path="big.txt"), Say("read it"), act("finish", summary="done")]
    )
    deps = make_deps(tmp_path, script, n_ctx=4000)
    res = await run_task("summarize big.txt", session_id="s", deps=deps)
    assert res.outcome == "completed"
    side = script.bodies[1]["prompt"]
    assert "word word" in side and len(side) + 512 <= 4000  # its answer fits beside it


@pytest.mark.parametrize(("counted", "compacts"), [(1_500, False), (3_000, True)])
async def test_a_new_task_is_counted_by_the_server_before_it_is_compacted(
    tmp_path: Path, counted: int, compacts: bool
) -> None:
    """A long new task the estimate (2 characters a token) calls too big for a 4,096 slot is
    sent as it is when the server's count says it fits beside its answer, and compacted only
    when the count says it does not."""
    clock = FakeClock(start=1000.0)
    script = Script(clock, [Say("a summary"), act("finish", summary="done")])
    asked: list[str] = []

    async def count(text: str) -> int:
        asked.append(text)
        return counted if "plain words" in text else len(text) // 4

    events: list[Any] = []
    deps = make_deps(tmp_path, script, events=events, n_ctx=4096, count_tokens=count)
    task = "explain this: " + "plain words " * 500  # 6,000 characters: 3,000 "tokens" guessed
    res = await run_task(task, session_id="s", deps=deps)
    assert res.outcome == "completed"
    assert any(task in text for text in asked)  # counted before it was sent
    assert any(isinstance(e, TranscriptCompacted) for e in events) is compacts
    first = script.bodies[0]
    assert (first["id_slot"] == 3) is compacts  # the summary rides the side slot


@pytest.mark.parametrize(
    ("counted", "compacts", "reuse"),
    [(1_000, False, "full"), (3_000, True, "full"), (3_000, True, "none")],
)
async def test_a_task_that_leaves_no_room_for_the_next_compacts_after_its_outcome(
    tmp_path: Path, counted: int, compacts: bool, reuse: str
) -> None:
    """After a task, the transcript is compacted ahead when the next task's message would not
    fit beside it (counted by the server), so the next task's first step waits for no summary;
    the new transcript is the summary alone, carried into the next task's message (the old one
    archived): no reply of the model's in a shape other than its code for it to copy."""
    clock = FakeClock(start=1000.0)
    script = Script(
        clock,
        [Say("the answer: " + "long words " * 400), Say("it was explained"), Say("two, then")],
    )

    async def count(text: str) -> int:
        return counted if "long words" in text else len(text) // 4

    events: list[Any] = []
    deps = make_deps(
        tmp_path, script, events=events, n_ctx=4096, count_tokens=count, prefix_reuse=reuse
    )
    res = await run_task("explain the answer", session_id="s", deps=deps)
    assert not any(isinstance(e, TranscriptCompacted) for e in events)
    transcript = res.packer.text
    ahead = await compact_ahead(session_id="s", deps=deps, packer=res.packer)
    assert (ahead is not None) is compacts
    assert any(isinstance(e, TranscriptCompacted) for e in events) is compacts
    if ahead is not None:
        packer, archived = ahead
        asked = script.bodies[-1]
        if reuse == "full":  # the transcript's next question on its own slot: only it is read
            assert asked["id_slot"] == deps.slots.slot_for("s") == 2
            assert asked["cache_prompt"] is True and asked["prompt"].startswith(transcript)
            assert AHEAD_ASK in asked["prompt"]
        else:  # a model that cannot reuse a prefix in full: the log on the side slot
            assert asked["id_slot"] == 3 and asked["cache_prompt"] is False
        assert [(m.role, m.text) for m in packer.messages] == [
            ("user", f"{EARLIER_WORK}\nit was explained")
        ]
        assert ahead_events(events)[0].tokens_before == counted  # the transcript's tokens, counted
        assert "long words" in str(archived[0])
        assert not packer.awaiting_reply and packer.carries  # the next task takes it
        nxt = await run_task("and the next?", session_id="s", deps=deps, resume=packer)
        assert nxt.outcome == "completed"
        assert [(m.role, m.kind) for m in nxt.packer.messages] == [
            ("user", "task"),
            ("assistant", "action"),
        ]
        first = nxt.packer.messages[0].text
        assert first.startswith(f"{EARLIER_WORK}\nit was explained\n\nand the next?")
        assert "<|im_start|>assistant\nit was explained" not in str(script.bodies[-1]["prompt"])


def ahead_events(events: list[Any]) -> list[TranscriptCompacted]:
    return [e for e in events if isinstance(e, TranscriptCompacted)]
