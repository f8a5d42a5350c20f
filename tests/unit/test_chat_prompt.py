"""The chat's prompt is the model's template frame with the transcript concatenated: every
request extends the previous one exactly (prompt + answer + new text), and reaches `/completion`
as a `prompt`, also after a partial answer cut at maxTokens or a turn that got no answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.chat.chat_prompt import (
    ChatSummary,
    answer_as_held,
    chat_prompt,
    next_turn_opening,
)
from fusion_tui.chat.local import LocalBackend
from fusion_tui.chat.turn_content import SYSTEM_PROMPT
from fusion_tui.paths import AppPaths
from fusion_tui.server.template import TemplateFrame
from fusion_tui.server.types import TextDelta
from fusion_tui.sessions.model import Message
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.local_fake import connector_for, fast_settings, turn

FRAME = TemplateFrame.chatml()


def test_prompt_is_the_frame_around_each_turn() -> None:
    msgs = [Message("user", "hi"), Message("assistant", "hello"), Message("user", "more")]
    assert chat_prompt(FRAME, "SYS", msgs) == (
        "<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
        "<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\nmore<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_each_prompt_extends_the_previous_one_plus_the_answer() -> None:
    msgs = [Message("user", "a")]
    first = chat_prompt(FRAME, "S", msgs)
    msgs += [Message("assistant", " Ava, ava, ava,", partial=True), Message("user", "b")]
    assert chat_prompt(FRAME, "S", msgs).startswith(first + " Ava, ava, ava,")
    msgs += [Message("user", "c")]  # the turn for "b" got no answer at all
    third = chat_prompt(FRAME, "S", msgs)
    assert third.startswith(chat_prompt(FRAME, "S", msgs[:-1]))


def test_a_summary_replaces_the_covered_turns_in_the_system_text() -> None:
    msgs = [Message("user", "old"), Message("assistant", "older"), Message("user", "new")]
    text = chat_prompt(FRAME, "S", msgs, ChatSummary("we talked", covers=2))
    assert "we talked" in text and "old" not in text and text.count("<|im_start|>user") == 1


def test_the_next_turns_opening_is_the_next_prompt_up_to_the_users_text() -> None:
    msgs = [Message("user", "hi"), Message("assistant", "hello")]
    opening = next_turn_opening(FRAME, "S", msgs)
    assert opening.endswith("hello<|im_end|>\n<|im_start|>user\n")
    nxt = chat_prompt(FRAME, "S", [*msgs, Message("user", "more")])
    assert nxt == opening + "more" + FRAME.user_to_assistant
    summary = ChatSummary("we talked", covers=2)
    later = [*msgs, Message("user", "more"), Message("assistant", "ok")]
    assert chat_prompt(FRAME, "S", [*later, Message("user", "x")], summary).startswith(
        next_turn_opening(FRAME, "S", later, summary)
    )


def test_an_answer_cut_at_the_limit_leaves_out_a_last_whitespace_token_the_slot_never_read() -> (
    None
):
    cut = [TextDelta(" Ava,", 1), TextDelta("\n", 1)]
    assert answer_as_held(cut, "limit") == " Ava,"
    # ended by the model's end token: its whitespace was read into the slot, it stays
    assert answer_as_held(cut, "eos") == " Ava,\n"
    # a last piece of two tokens: one of them is in the slot; a word is kept whatever it is
    assert answer_as_held([TextDelta(" Ava,", 1), TextDelta(" \n", 2)], "limit") == " Ava, \n"
    assert answer_as_held([TextDelta(" Ava,", 1), TextDelta(" x\n", 1)], "limit") == " Ava, x\n"
    assert answer_as_held([TextDelta(" Ava,"), TextDelta("\n")], "limit") == " Ava,\n"  # unknown
    assert answer_as_held([], "limit") == ""


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    return AppPaths(*(tmp_path / n for n in ("config", "data", "state", "log")))


async def test_the_chat_sends_the_templated_prompt_to_completion(paths: AppPaths) -> None:
    with FakeLlamaServer(total_slots=2, n_ctx=4096) as srv:
        backend = LocalBackend(fast_settings(), paths, connector=connector_for(srv, None))
        await backend.start(lambda _s: None)
        srv.script(Reply(text=[" Ava,", " ava,", " ava,"], stop_type="limit"))
        await turn(backend, "say ava")
        await turn(backend, "again")
        await backend.close()
    bodies = [r.body for r in srv.completions()]
    assert len(bodies) == 2 and all("messages" not in b for b in bodies)
    first, second = bodies[0]["prompt"], bodies[1]["prompt"]
    assert first.startswith("<|im_start|>system\n" + SYSTEM_PROMPT)
    assert second.startswith(first + " Ava, ava, ava,")
    ends = [r for r in srv.completions()]
    assert ends[1].slot == ends[0].slot


async def test_a_cut_answers_unread_whitespace_is_not_read_by_the_next_prompt(
    paths: AppPaths,
) -> None:
    with FakeLlamaServer(total_slots=2, n_ctx=4096) as srv:
        backend = LocalBackend(fast_settings(), paths, connector=connector_for(srv, None))
        await backend.start(lambda _s: None)
        srv.script(Reply(text=[" Ava,", " ava", "\n"], stop_type="limit"))
        events = await turn(backend, "say ava")
        srv.script(Reply(text=[" ok", "\n"], stop_type="eos"))
        await turn(backend, "again")
        await turn(backend, "more")
        await backend.close()
    first, second, third = (r.body["prompt"] for r in srv.completions())
    assert second == f"{first} Ava, ava{FRAME.assistant_to_user}again{FRAME.user_to_assistant}"
    assert third.startswith(second + " ok\n" + FRAME.assistant_to_user)  # read: kept
    assert backend.session.messages[1].content == " Ava, ava"
    shown = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert shown == " Ava, ava\n"  # the user saw it as it streamed


async def test_the_next_message_started_reads_its_opening_into_the_sessions_slot(
    paths: AppPaths,
) -> None:
    with FakeLlamaServer(total_slots=3, n_ctx=4096) as srv:
        backend = LocalBackend(fast_settings(), paths, connector=connector_for(srv, None))
        await backend.start(lambda _s: None)
        await backend.read_ahead()  # no answer yet: nothing to read ahead of
        assert srv.completions(read_aheads=True) == []
        srv.script(Reply(text=[" first", " answer"]))
        await turn(backend, "say something")
        await backend.read_ahead()  # the user starts the next message
        await backend.read_ahead()  # and types on: once per turn
        sent = srv.completions(read_aheads=True)
        await turn(backend, "and now")
        await backend.close()
    asked, ahead = sent  # the turn, then the read-ahead: nothing generated
    assert ahead.body["n_predict"] == 0 and ahead.slot == asked.slot
    assert ahead.body["prompt"] == asked.body["prompt"] + " first answer" + FRAME.assistant_to_user
    last = srv.completions()[-1]
    assert last.slot == asked.slot
    assert last.body["prompt"] == ahead.body["prompt"] + "and now" + FRAME.user_to_assistant
    # read-aheads are no requests of the session: its records are its turns
    assert [r.side_call for r in backend.session.requests] == [False, False]
    assert backend.session.requests[-1].cache_n == len(ahead.body["prompt"])  # all of it reused
