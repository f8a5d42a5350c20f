"""LocalBackend on the fake server: pins, the title side call, progress, the watch and the
one no-data retry, the idle timeout, and warm resume (same server, restore, refusal)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.chat.events import Notice, Progress, ReplyDone
from fusion_tui.chat.local import LocalBackend
from fusion_tui.paths import AppPaths
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.types import StreamEnd
from fusion_tui.sessions.store import SessionStore
from tests.fakes.fake_server import FakeLlamaServer, Reply
from tests.unit.local_fake import DiskFake, fast_settings, started, turn


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    root = tmp_path / "home"
    return AppPaths(root / "config", root / "data", root / "state", root / "log")


@pytest.fixture
def srv(slot_dir: Path) -> Iterator[DiskFake]:
    with DiskFake(slot_dir, total_slots=4, n_ctx=4096) as server:
        yield server


def completions(srv: FakeLlamaServer) -> list[int]:
    """`id_slot` of every completion request the fake received."""
    return [r.body.get("id_slot", -1) for r in srv.completions()]


def done(events: list[object]) -> ReplyDone:
    last = events[-1]
    assert isinstance(last, ReplyDone)
    return last


async def test_first_turn_on_an_empty_slot_then_every_turn_on_the_pinned_slot(
    srv: DiskFake, paths: AppPaths, slot_dir: Path
) -> None:
    backend = await started(srv, paths, slot_dir)
    first = await turn(backend, "hello there")
    second = await turn(backend, "and again")
    await backend.close()
    pinned = backend.session.pinned_slot
    assert pinned == 3 and completions(srv) == [3, 3]  # a new session takes an empty slot
    end = next(e for e in second if isinstance(e, StreamEnd))
    assert end.id_slot == pinned and end.timings.cache_n > 0
    assert done(first).outcome == done(second).outcome == "completed"
    assert done(second).note.startswith(f"slot {pinned} · ")


async def test_title_side_call_never_uses_the_sessions_slot(
    srv: DiskFake, paths: AppPaths, slot_dir: Path
) -> None:
    backend = await started(srv, paths, slot_dir)
    await turn(backend, "please refactor the parser module")
    own = backend.session.pinned_slot
    srv.script(Reply(text=['"Parser', " refactor", '."']))
    title = await backend.make_title()
    await backend.close()
    side = completions(srv)[-1]
    assert title == "Parser refactor"
    assert side != own and 0 <= side < 4
    body = [r.body for r in srv.completions()][-1]
    assert body["n_predict"] <= 32 and "<assistant>" in body["prompt"]
    assert len(body["prompt"]) < 600  # only the first message, not the session
    stored = SessionStore.default(paths).load(backend.session.id)
    assert stored.title == "Parser refactor"
    assert [r.side_call for r in stored.requests] == [False, True]
    assert stored.pinned_slot == own  # the side call did not move the pin


async def test_progress_events_carry_rate_and_eta(
    srv: DiskFake, paths: AppPaths, slot_dir: Path
) -> None:
    backend = await started(srv, paths, slot_dir)
    srv.script(Reply(prompt_seconds=0.2, progress_steps=4))
    events = await turn(backend, "x" * 800)
    await backend.close()
    progress = [e for e in events if isinstance(e, Progress)]
    assert len(progress) == 5
    processed = [p.processed for p in progress]
    assert processed == sorted(processed) and processed[-1] == progress[-1].total
    assert all(p.tokens_per_second and p.tokens_per_second > 0 for p in progress[1:])
    assert progress[1].eta_s is not None and progress[-1].eta_s == 0
    assert progress[1].label().startswith(f"{progress[1].processed:,} / ")


async def test_a_request_that_gets_no_data_is_retried_once_on_the_same_slot(
    srv: DiskFake, paths: AppPaths, slot_dir: Path
) -> None:
    backend = await started(srv, paths, slot_dir)
    await turn(backend, "first")
    pinned = backend.session.pinned_slot
    srv.script(Reply(hang="queued"), Reply(text=["ok"]))
    events = await turn(backend, "second")
    await backend.close()
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert completions(srv) == [pinned, pinned, pinned]
    assert len(notices) == 1 and f"retrying once on slot {pinned}" in notices[0]
    assert "no first token" in notices[0]
    assert done(events).outcome == "completed"


async def test_two_no_data_aborts_end_the_turn_without_a_third_try(
    srv: DiskFake, paths: AppPaths, slot_dir: Path
) -> None:
    backend = await started(srv, paths, slot_dir)
    await turn(backend, "first")
    pinned = backend.session.pinned_slot
    srv.script(Reply(hang="queued"), Reply(hang="queued"))
    events = await turn(backend, "second")
    srv.release()
    await backend.close()
    assert completions(srv) == [pinned, pinned, pinned]
    end = done(events)
    assert end.outcome == "error" and "after one retry" in end.note
    assert backend.session.turns[-1].outcome == "error"


async def test_a_stream_idle_after_its_first_bytes_ends_with_a_clear_message(
    srv: DiskFake, paths: AppPaths, slot_dir: Path
) -> None:
    backend = await started(srv, paths, slot_dir)
    srv.script(Reply(text=["partial", " rest"], hang="mid_stream"))
    events = await turn(backend, "tell me")
    srv.release()
    await backend.close()
    end = done(events)
    assert end.outcome == "error" and end.partial
    assert "no bytes from llama-server for 0.3 s" in end.note and "partial answer" in end.note
    assert completions(srv) == [3]  # data had arrived: no retry
    last = backend.session.messages[-1]
    assert (last.content, last.partial) == ("partial", True)


async def test_resume_on_the_same_server_names_the_slot_the_ledger_says_it_holds(
    srv: DiskFake, paths: AppPaths, slot_dir: Path
) -> None:
    one = await started(srv, paths, slot_dir)
    await turn(one, "a question about the build")
    await turn(one, "a follow-up")
    pinned = one.session.pinned_slot
    before = one.session.requests[-1]
    await one.close()
    two = await started(srv, paths, slot_dir, resume=one.session.id)
    events = await turn(two, "one more")
    await two.close()
    # not -1: the server would pick by similarity and can land on another session's slot
    assert completions(srv)[-1] == pinned
    end = next(e for e in events if isinstance(e, StreamEnd))
    # all of the previous prompt (and its answer) reused: only the new turn is read
    assert end.id_slot == pinned and end.timings.cache_n >= before.prompt_n + before.cache_n
    assert done(events).note.startswith(f"resumed on slot {pinned} · ")


async def left_on_a_daemon(
    paths: AppPaths, slot_dir: Path, text: str = "a question", **fake: Any
) -> LocalBackend:
    """A session answered once on a managed daemon (a `DiskFake`) and left: its slot saved."""
    with DiskFake(slot_dir, **fake) as old:
        one = await started(old, paths, slot_dir, pid=1)
        await turn(one, text)
        await one.close()
    return one


async def test_resume_on_a_new_daemon_restores_the_saved_slot_first(
    paths: AppPaths, slot_dir: Path
) -> None:
    one = await left_on_a_daemon(paths, slot_dir, "a question about the build", total_slots=4,
                                 n_ctx=4096)  # fmt: skip
    assert (slot_dir / f"{one.session.id}.kv").is_file()
    assert (slot_dir / f"{one.session.id}.kv.json").is_file()
    with DiskFake(slot_dir, total_slots=4, n_ctx=4096) as new:
        two = await started(new, paths, slot_dir, pid=2, resume=one.session.id)
        events = await turn(two, "one more")
        await two.close()
    restores = [r for r in new.requests if "action=restore" in r.path]
    assert len(restores) == 1
    slot = int(restores[0].path.split("/")[2].split("?")[0])
    assert completions(new) == [slot]  # named, not -1
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices[0].startswith(f"restored the saved slot into slot {slot}")
    end = next(e for e in events if isinstance(e, StreamEnd))
    before = one.session.requests[-1]
    assert end.timings.cache_n >= before.prompt_n + before.cache_n  # the whole old prompt
    assert done(events).note.startswith(f"resumed (restored from disk) on slot {slot} · ")


async def test_a_resumed_session_is_restored_when_the_user_starts_typing(
    paths: AppPaths, slot_dir: Path
) -> None:
    one = await left_on_a_daemon(paths, slot_dir, "a question about the build", total_slots=4,
                                 n_ctx=4096)  # fmt: skip
    with DiskFake(slot_dir, total_slots=4, n_ctx=4096) as new:
        two = await started(new, paths, slot_dir, pid=2, resume=one.session.id)
        await two.read_ahead()  # the first keystroke: restore, then read the opening ahead
        before_turn = [r.path for r in new.requests if r.method == "POST"]
        seen = len(new.requests)
        events = await turn(two, "one more")
        await two.close()
    restores = [p for p in before_turn if "action=restore" in p]
    assert len(restores) == 1 and before_turn[-1].startswith("/completion")
    slot = int(restores[0].split("/")[2].split("?")[0])
    assert [r.slot for r in new.completions(read_aheads=True)] == [slot, slot]
    assert not [r for r in new.requests[seen:] if "action=restore" in r.path]  # done before
    notices = [e.text for e in events if isinstance(e, Notice)]  # the turn still says so
    assert notices[0].startswith(f"restored the saved slot into slot {slot}")
    assert done(events).note.startswith(f"resumed (restored from disk) on slot {slot} · ")


async def test_a_slot_saved_with_another_context_is_refused_with_the_reason(
    paths: AppPaths, slot_dir: Path
) -> None:
    one = await left_on_a_daemon(paths, slot_dir, total_slots=4, n_ctx=4096)
    with DiskFake(slot_dir, total_slots=4, n_ctx=2048) as new:
        two = await started(new, paths, slot_dir, pid=2, resume=one.session.id)
        events = await turn(two, "again")
        await two.close()
    assert not [r for r in new.requests if "action=restore" in r.path]
    assert completions(new) == [-1]
    notice = next(e.text for e in events if isinstance(e, Notice))
    assert notice == (
        "cold start: the saved slot does not fit: it was saved with a 4,096-token slot "
        "context, the server now has 2,048"
    )
    assert " cold on slot " in done(events).note


async def left_before_a_model_change(
    paths: AppPaths, slot_dir: Path, tmp_path: Path
) -> tuple[LocalBackend, Path]:
    """A session left on a daemon, then its model file changed: its saved slot cannot be
    restored. The session and the model file."""
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 100)
    one = await left_on_a_daemon(paths, slot_dir, model_path=str(model))
    model.write_bytes(b"GGUF" + b"\0" * 200)
    return one, model


async def test_a_changed_model_file_is_refused(
    paths: AppPaths, slot_dir: Path, tmp_path: Path
) -> None:
    one, model = await left_before_a_model_change(paths, slot_dir, tmp_path)
    with DiskFake(slot_dir, model_path=str(model)) as new:
        two = await started(new, paths, slot_dir, pid=2, resume=one.session.id)
        events = await turn(two, "again")
        await two.close()
    notice = next(e.text for e in events if isinstance(e, Notice))
    assert (
        notice
        == "cold start: the saved slot does not fit: the model file m.gguf changed since the save"
    )
    assert completions(new) == [-1]


async def test_a_session_resumed_cold_is_read_again_while_the_user_types(
    paths: AppPaths, slot_dir: Path, tmp_path: Path
) -> None:
    one, model = await left_before_a_model_change(paths, slot_dir, tmp_path)
    with DiskFake(slot_dir, model_path=str(model)) as new:
        two = await started(new, paths, slot_dir, pid=2, resume=one.session.id)
        await two.read_ahead()
        events = await turn(two, "again")
        await two.close()
    ahead, asked = new.completions(read_aheads=True)
    assert ahead.body["n_predict"] == 0 and ahead.slot is not None and ahead.slot >= 0
    assert ahead.body["id_slot"] == ahead.slot  # a slot chosen as a new session's, not -1
    assert asked.body["id_slot"] == ahead.slot  # the turn went where its prompt was read
    end = next(e for e in events if isinstance(e, StreamEnd))
    assert end.timings.cache_n == len(ahead.body["prompt"])  # only the new words were read
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert notices[0].startswith("cold start: the saved slot does not fit")


async def test_an_external_server_resumes_cold_with_a_note(paths: AppPaths) -> None:
    with FakeLlamaServer() as old:
        one = await started(old, paths, None, pid=1)
        await turn(one, "a question")
        await one.close()
    with FakeLlamaServer() as new:
        two = await started(new, paths, None, pid=2, resume=one.session.id)
        events = await turn(two, "again")
        await two.close()
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "cold start: this server keeps no saved slots (not a managed launch)"
    ]


async def test_watch_off_still_completes(srv: DiskFake, paths: AppPaths, slot_dir: Path) -> None:
    backend = await started(srv, paths, slot_dir, settings=fast_settings(progress_watch=False))
    srv.script(Reply(queue_seconds=0.3))  # no headers for 0.3 s: the watch would poll ~15 times
    events = await turn(backend, "hi")
    polls = [r for r in srv.requests if r.path == "/slots"]
    await backend.close()
    assert done(events).outcome == "completed"
    assert len(polls) == 2  # choosing the empty slot, and the gate's busy check before sending


async def test_switching_sessions_saves_the_slot_and_the_map_hooks_answer(
    srv: DiskFake, paths: AppPaths, slot_dir: Path
) -> None:
    backend = await started(srv, paths, slot_dir)
    await turn(backend, "first session")
    srv.script(Reply(text=["First", " session"]))
    await backend.make_title()
    old, slot = backend.session.id, backend.session.pinned_slot
    assert slot is not None
    owners = backend.slot_view().slot_owners()
    assert owners[slot] == "First session" and "side" in owners.values()
    note = await backend.switch_session(None)
    assert note is not None and note.startswith(f"saved slot {slot} (")
    assert (slot_dir / f"{old}.kv").is_file()
    # the left session still holds its slot (the shared ledger says so): the map keeps it
    assert backend.session.id != old and backend.slot_view().slot_owners() == owners
    assert backend.slot_view().session_on_slot(slot) == old  # from the store, same launch
    assert len(await backend.slot_view().slots()) == 4
    await backend.close()


async def test_a_new_session_does_not_take_a_short_sessions_slot_by_similarity(
    srv: DiskFake, paths: AppPaths, slot_dir: Path
) -> None:
    one = await started(srv, paths, slot_dir)
    await turn(one, "short")
    two = await started(srv, paths, slot_dir)  # another app instance: its own pool
    await turn(two, "short too")  # shares most of its prompt with session one
    assert one.session.pinned_slot == 3 and two.session.pinned_slot == 2
    again = await turn(one, "still here?")
    await one.close()
    await two.close()
    end = next(e for e in again if isinstance(e, StreamEnd))
    assert end.id_slot == 3 and end.timings.cache_n > 40  # session one's cache survived


async def test_on_an_external_server_a_new_session_takes_an_idle_slot_no_session_holds(
    paths: AppPaths,
) -> None:
    # no saved slots there (nothing to evict with), and no empty slot: another client's prompt
    # sits in each free slot; `-1` would let the server pick session one's by similarity
    with FakeLlamaServer(total_slots=4) as srv:
        one = await started(srv, paths, None)
        await turn(one, "short")
        mine = one.session.pinned_slot
        async with LlamaClient(srv.url) as other:
            for slot in {0, 1, 2, 3} - {mine}:
                body = {"prompt": f"another client's words {slot}", "n_predict": 1, "id_slot": slot}
                async for _ in other.stream_completion(body):
                    pass
        two = await started(srv, paths, None)
        await turn(two, "short too")
        again = await turn(one, "still here?")
        await one.close()
        await two.close()
    assert two.session.pinned_slot not in (None, mine)
    end = next(e for e in again if isinstance(e, StreamEnd))
    assert end.id_slot == mine and end.timings.cache_n > 40  # session one's cache survived


async def test_on_an_external_server_a_resumed_session_keeps_the_slot_caching_its_prompt(
    paths: AppPaths,
) -> None:
    # the app restarted: no pin, no saved slots; an idle empty slot is no place to read into
    long = " ".join(f"word{i}" for i in range(300))
    with FakeLlamaServer(total_slots=4, n_ctx=8192) as srv:
        one = await started(srv, paths, None, pid=1)
        await turn(one, long)
        await one.close()
        two = await started(srv, paths, None, pid=1, resume=one.session.id)
        await two.read_ahead()  # the first keystroke
        events = await turn(two, "again")
        await two.close()
    end = next(e for e in events if isinstance(e, StreamEnd))
    assert end.id_slot == one.session.pinned_slot
    assert end.timings.cache_n > 300  # the whole earlier prompt, reused
    assert [r.body["n_predict"] for r in srv.completions(read_aheads=True)].count(0) == 0


async def test_a_session_past_its_context_says_what_to_do_and_keeps_the_message(
    srv: DiskFake, paths: AppPaths, slot_dir: Path
) -> None:
    backend = await started(srv, paths, slot_dir)
    srv.script(
        Reply(
            status=400,
            error={
                "code": 400,
                "message": "request (2155 tokens) exceeds the available context size (2048 tokens)",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 2155,
                "n_ctx": 2048,
            },
        )
    )
    events = await turn(backend, "one more question")
    await backend.close()
    end = done(events)
    assert end.outcome == "error" and end.partial
    assert "2,155 prompt tokens for a 2,048-token context" in end.note
    assert "start a new session (Ctrl+N)" in end.note
    saved = SessionStore(paths.sessions_dir).load(backend.session.id)
    assert saved.messages[-2].content == "one more question"
    assert saved.turns[-1].outcome == "error"
