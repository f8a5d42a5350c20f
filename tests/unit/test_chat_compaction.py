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
    return [
        (r.slot, str(r.body.get("prompt", "")))
        for r in srv.requests
        if r.path.startswith("/completion")
    ]


async def chat(srv: FakeLlamaServer, paths: AppPaths, resume: str | None = None) -> LocalBackend:
    settings = fast_settings()
    settings = replace(settings, llm=replace(LLMSettings(), max_tokens=64))
    b = LocalBackend(settings, paths, resume=resume, connector=connector_for(srv, None))
    await b.start(lambda _s: None)
    return b


async def test_a_session_past_its_slot_is_compacted_and_the_turn_completes(
    paths: AppPaths,
) -> None:
    with FakeLlamaServer(total_slots=2, n_ctx=N_CTX) as srv:
        b = await chat(srv, paths)
        compacted: list[Compacted] = []
        for i in range(6):
            if i == 3:  # this turn's prompt would not fit: the summary side call comes first
                srv.script(Reply(text=["They discussed topics zero to four."]), Reply())
            events = await turn(b, f"topic {i}: " + "words " * 30)
            compacted += [e for e in events if isinstance(e, Compacted)]
        await b.close()
        assert len(compacted) == 1, [c.text for c in compacted]
        c = compacted[0]
        assert c.before + 64 > N_CTX > c.after and c.turns >= 3
        assert (
            c.text
            == f"compacted {c.turns} turns into a summary · {c.before:,} → {c.after:,} tokens"
        )
        sent = prompts(srv)
        own_slot = sent[0][0]
        assert [s for s, _ in sent] == [own_slot] * 3 + [1 - own_slot] + [own_slot] * 3
        side_prompt = sent[3][1]
        assert "topic 0" in side_prompt and "topic 3" not in side_prompt  # the summary call
        for _slot, p in sent[4:]:
            assert "They discussed topics zero to four." in p and "topic 0" not in p
            assert len(p) + 64 <= N_CTX
        last = sent[-1][1]
        assert "topic 5" in last and last.startswith(sent[4][1])  # exact extension again
        assert len([m for m in b.session.messages if m.role == "user"]) == 6  # all kept
        assert b.history()[0][1].startswith("topic 0")
        assert [r.side_call for r in b.session.requests] == [False] * 3 + [True] + [False] * 3
        saved = load_summary(b.store, b.session.id)
        assert saved is not None and saved.text == "They discussed topics zero to four."
        # a resumed session sends the compacted prompt, not the whole history
        again = await chat(srv, paths, resume=b.session.id)
        await turn(again, "and?")
        await again.close()
        assert prompts(srv)[-1][1].startswith(last)


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
