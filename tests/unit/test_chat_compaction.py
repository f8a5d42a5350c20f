"""The plain chat compacts a session that outgrows its slot: counted with `/tokenize`, older turns
summarised by a side call on another slot, the summary in the prompt, every message kept."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fusion_tui.chat.compaction import load_summary
from fusion_tui.chat.events import Compacted
from fusion_tui.chat.local import LocalBackend
from fusion_tui.config.settings import LLMSettings
from fusion_tui.paths import AppPaths
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.local_fake import connector_for, fast_settings, turn

N_CTX = 1200  # the fake's tokens are characters


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    return AppPaths(*(tmp_path / n for n in ("config", "data", "state", "log")))


def prompts(srv: FakeLlamaServer) -> list[tuple[int | None, str]]:
    return [(r.slot, str(r.body.get("prompt", ""))) for r in srv.completions()]


async def chat(srv: FakeLlamaServer, paths: AppPaths, resume: str | None = None) -> LocalBackend:
    settings = fast_settings()
    settings = replace(settings, llm=replace(LLMSettings(), max_tokens=64))
    b = LocalBackend(settings, paths, resume=resume, connector=connector_for(srv, None))
    await b.start(lambda _s: None)
    return b


async def test_an_answer_that_leaves_no_room_for_the_next_turn_compacts_right_after_it(
    paths: AppPaths,
) -> None:
    with FakeLlamaServer(total_slots=2, n_ctx=N_CTX) as srv:
        b = await chat(srv, paths)
        per_turn: list[list[object]] = []
        for i in range(8):  # each answer scripted; the summary gets the fake's default text
            srv.script(Reply(text=[f"answer {i}."]))  # messages within the next turn's room
            per_turn.append(list(await turn(b, f"topic {i}: " + "words " * 15)))
        await b.close()
        at = next(i for i, events in enumerate(per_turn) if any(
            isinstance(e, Compacted) for e in events))  # fmt: skip
        events = per_turn[at]
        kinds = [type(e).__name__ for e in events]
        done = kinds.index("ReplyDone")
        # after the answer: a notice while it runs, then the compaction; nothing after it
        assert kinds[done + 1 :] == ["Notice", "Compacted"], kinds
        assert str(getattr(events[done + 1], "text", "")).startswith("compacting the session")
        c = events[-1]
        assert isinstance(c, Compacted) and c.after < c.before
        assert c.before + 64 + 150 > N_CTX  # the next turn's room (an eighth) was short
        sent = prompts(srv)
        own_slot = sent[0][0]
        summary_at = at + 1  # requests: one per turn, then the summary
        assert [s for s, _ in sent[:summary_at]] == [own_slot] * summary_at
        side_slot, side_prompt = sent[summary_at]
        assert side_slot == 1 - own_slot  # no `full` prefix reuse here: the side slot
        assert "topic 0" in side_prompt and f"topic {at}" not in side_prompt
        following = sent[summary_at + 1][1]  # the next turn: the summary, the last exchange
        assert "Hello from the fake." in following and "topic 0" not in following
        assert f"topic {at}" in following and f"answer {at}." in following
        assert not any(isinstance(e, Compacted) for e in per_turn[at + 1][:2])
        for _slot, p in sent:
            assert len(p) + 64 <= N_CTX
        assert len([m for m in b.session.messages if m.role == "user"]) == 8  # all kept
        saved = load_summary(b.store, b.session.id)
        assert saved is not None and saved.text
        # a resumed session sends the compacted prompt, not the whole history
        again = await chat(srv, paths, resume=b.session.id)
        last = prompts(srv)[-1][1]
        await turn(again, "and?")
        await again.close()
        assert "topic 0" not in prompts(srv)[-1][1] and "Hello from the fake." in last


async def test_a_message_that_does_not_fit_compacts_before_its_request(paths: AppPaths) -> None:
    with FakeLlamaServer(total_slots=2, n_ctx=N_CTX) as srv:
        b = await chat(srv, paths)
        for i in range(3):  # small turns: the next turn's room stays
            events = await turn(b, f"topic {i}: " + "words " * 15)
            assert not any(isinstance(e, Compacted) for e in events)
        srv.script(Reply(text=["They discussed topics zero to two."]), Reply(text=["ok."]))
        events = await turn(b, "topic 3: " + "words " * 80)  # a paste: over the slot
        kinds = [type(e).__name__ for e in events]
        assert kinds.index("Compacted") < kinds.index("TextDelta")  # before the answer
        c = next(e for e in events if isinstance(e, Compacted))
        assert c.before + 64 > N_CTX > c.after and c.turns >= 1
        assert (
            c.text == f"compacted {c.turns} turn{'s' if c.turns > 1 else ''} into a summary · "
            f"{c.before:,} → {c.after:,} tokens"
        )
        await b.close()
        sent = prompts(srv)
        own_slot = sent[0][0]
        assert [s for s, _ in sent[:5]] == [own_slot] * 3 + [1 - own_slot, own_slot]
        assert "topic 0" in sent[3][1] and "topic 3" not in sent[3][1]  # the summary call
        answer_prompt = sent[4][1]
        assert "They discussed topics zero to two." in answer_prompt
        assert "topic 0" not in answer_prompt and "topic 3" in answer_prompt
        assert len(answer_prompt) + 64 <= N_CTX
        assert [r.side_call for r in b.session.requests][:5] == [False] * 3 + [True, False]


async def test_compact_on_demand(paths: AppPaths) -> None:
    with FakeLlamaServer(total_slots=2, n_ctx=8192) as srv:
        b = await chat(srv, paths)
        await turn(b, "first question")
        await turn(b, "second question")
        srv.script(Reply(text=["Two questions."]))
        note = await b.compact()
        assert note is not None and note.startswith("compacted 2 turns into a summary · ")
        await turn(b, "third")
        await b.close()
        last = prompts(srv)[-1][1]
        assert "Two questions." in last and "first question" not in last
        assert [m.content for m in b.session.messages if m.role == "user"] == [
            "first question", "second question", "third",
        ]  # fmt: skip
