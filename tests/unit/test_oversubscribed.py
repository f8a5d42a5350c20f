"""More sessions than slots: a session that needs a slot another holds saves that slot first,
and a returning session is restored from disk instead of reading its prompt again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fusion_tui.chat.events import Notice
from fusion_tui.paths import AppPaths
from fusion_tui.slots.room import Holder, SlotLedger, choose_victim, restore_is_cheaper
from tests.fakes.fake_server import Reply
from tests.unit.local_fake import DiskFake, started, turn


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    return AppPaths(*(tmp_path / n for n in ("config", "data", "state", "log")))


async def test_six_sessions_on_two_slots_round_robin_come_back_from_disk(
    paths: AppPaths, slot_dir: Path
) -> None:
    with DiskFake(slot_dir, total_slots=2, n_ctx=8192) as srv:
        backends = [await started(srv, paths, slot_dir) for _ in range(6)]
        srv.script(*[Reply(prompt_seconds=0.02) for _ in range(18)])  # prompts cost time
        notes: list[list[str]] = []
        for r in range(3):
            for k, b in enumerate(backends):
                events = await turn(
                    b, f"session {k} round {r}: " + "context " * (40 if r == 0 else 2)
                )
                notes.append([e.text for e in events if isinstance(e, Notice)])
        mark = len(srv.requests)
        room = await backends[0].keeper.room()  # session 0 is on disk, both slots are held
        polls = [q.path for q in srv.requests[mark:] if q.path == "/slots"]
        saves = [q.path for q in srv.requests[mark:] if "action=save" in q.path]
        for b in backends:
            await b.close()
    # with every slot held, making room asks `/slots` nothing (the ledger knows who is where);
    # what is left is the gate's busy check before a save (this fake is not an exclusive daemon)
    assert room in (0, 1) and len(polls) == len(saves) <= 1, (polls, saves)
    took = [n for ns in notes for n in ns if n.startswith("took slot")]
    restores = [n for ns in notes for n in ns if n.startswith("restored the saved slot")]
    assert len(restores) == 6 * 2, "\n".join(str(n) for n in notes)
    # every turn but the first two took a slot whose session had been saved ahead, between
    # turns: no save on any first token
    assert len(took) == 6 * 3 - 2, "\n".join(str(n) for n in notes)
    assert not [n for ns in notes for n in ns if n.startswith("saved slot")]
    assert len([a for a in srv.actions if a[0] == "save"]) >= 6 * 3 - 2
    for b in backends:
        own = [r for r in b.session.requests if not r.side_call]
        first, *later = own
        for r in later:  # the whole previous prompt came back from disk: only new tokens read
            assert r.cache_n >= first.prompt_n, (b.session.id, own)
            assert r.prompt_n <= 120, own
    assert {b.session.pinned_slot for b in backends} <= {0, 1}


async def test_typing_brings_a_returning_session_back_once_and_its_turn_reads_only_new_words(
    paths: AppPaths, slot_dir: Path
) -> None:
    with DiskFake(slot_dir, total_slots=2, n_ctx=8192) as srv:
        backends = [await started(srv, paths, slot_dir) for _ in range(3)]
        for k, b in enumerate(backends):  # the third takes the first one's slot
            await turn(b, f"session {k}: " + "context " * 40)
        first = backends[0]
        await first.read_ahead()  # its slot was taken: a slot made ready now, its prompt in it
        mark = len(srv.requests)
        events = await turn(first, "back again")
        during = srv.requests[mark:]
        for b in backends:
            await b.close()
    notes = [e.text for e in events if isinstance(e, Notice)]
    assert [n.startswith("took slot") for n in notes].count(True) == 1, notes  # once
    sent_at = next(i for i, q in enumerate(during) if q.path.startswith("/completion"))
    assert not [q for q in during[:sent_at] if "action=" in q.path]  # none before its request
    ahead = srv.completions(read_aheads=True)[-2]
    assert ahead.body["n_predict"] == 0
    end = first.session.requests[-1]
    assert end.cache_n == len(ahead.body["prompt"])  # the turn read only the new words


def test_the_ledger_keeps_one_slot_per_session_and_ignores_other_launches(tmp_path: Path) -> None:
    clock = iter([1.0, 2.0, 3.0])
    ledger = SlotLedger(tmp_path, now=lambda: next(clock))
    ledger.claim(0, "a", "L1")
    ledger.claim(1, "b", "L1")
    ledger.claim(1, "a", "L1")  # a moved: slot 0 is no longer a's
    assert {s: h.session_id for s, h in ledger.holders("L1").items()} == {1: "a"}
    assert ledger.holders("L2") == {}


def test_victim_is_the_least_recently_used_other_session() -> None:
    holders = {0: Holder("a", "L", 5.0), 1: Holder("b", "L", 3.0), 2: Holder("me", "L", 1.0)}
    assert choose_victim(holders, 3, blocked=(), me="me") == 1
    assert choose_victim(holders, 3, blocked=(1,), me="me") == 0
    assert choose_victim({2: Holder("me", "L", 1.0)}, 3, blocked=(), me="me") is None


def test_restore_only_when_cheaper_than_reading_again() -> None:
    # 2,000 tokens at 100 tok/s = 20 s; 60 MB at 200 MB/s = 0.3 s
    assert restore_is_cheaper(2000, 60_000_000, 200e6, 100.0)
    # a slow disk and a fast prompt: read again
    assert not restore_is_cheaper(200, 60_000_000, 1e6, 5000.0)


async def test_the_slot_view_says_who_is_in_a_slot_and_who_on_disk(
    paths: AppPaths, slot_dir: Path
) -> None:
    with DiskFake(slot_dir, total_slots=1, n_ctx=8192) as srv:
        a = await started(srv, paths, slot_dir)
        await turn(a, "alpha session")
        b = await started(srv, paths, slot_dir)
        await turn(b, "beta session")  # takes slot 0, saving alpha's first
        view = b.slot_view()
        assert view.slot_owners() == {0: "beta session"}
        assert view.sessions_on_disk() == ["alpha session"]
        assert a.slot_view().slot_owners() == {0: "beta session"}
        await a.close()
        await b.close()


async def test_a_slot_saved_with_another_model_is_not_listed_on_disk(
    paths: AppPaths, slot_dir: Path
) -> None:
    """After a switch of models the slot folder still holds the sessions saved with the previous
    one: they stay for when it serves again, but this server cannot restore them."""
    with DiskFake(slot_dir, total_slots=1, n_ctx=8192) as srv:
        a = await started(srv, paths, slot_dir)
        await turn(a, "alpha session")
        b = await started(srv, paths, slot_dir)
        await turn(b, "beta session")  # takes slot 0, saving alpha's first
        view = b.slot_view()
        assert view.sessions_on_disk() == ["alpha session"]
        tag_path = next(slot_dir.glob("*.kv.json"))
        tag = json.loads(tag_path.read_text())
        tag["model"]["path"] = "/models/the-previous-model.gguf"
        tag_path.write_text(json.dumps(tag))
        assert view.sessions_on_disk() == []
        await a.close()
        await b.close()


async def test_the_gate_skips_its_busy_probe_only_while_no_other_process_uses_the_server(
    paths: AppPaths, slot_dir: Path
) -> None:
    with DiskFake(slot_dir, total_slots=2, n_ctx=8192) as srv:
        a = await started(srv, paths, slot_dir)
        assert a.conn is not None
        a.conn.launched = True  # this process launched the daemon
        await turn(a, "alone")
        assert a.keeper.exclusive()
        b = await started(srv, paths, slot_dir)  # a second session of this process
        assert b.keeper.gate is a.keeper.gate  # one gate per server for the whole process
        await turn(b, "me too")
        assert a.keeper.exclusive()
        assert a.keeper.ledger is not None
        a.keeper.ledger.claim(1, "another-process-session", a.conn.launch_id)
        assert not a.keeper.exclusive()  # another process sends to the daemon
        await a.close()
        await b.close()


async def test_no_restore_where_the_server_cannot_reuse_a_restored_slot(
    paths: AppPaths, slot_dir: Path
) -> None:
    """A sliding-window model without --swa-full (fit: prefix reuse `none`): llama-server drops
    a restored slot's window at its reuse test, so a returning session is not restored (a file
    read for nothing) and says why."""
    with DiskFake(slot_dir, total_slots=2, n_ctx=8192) as srv:
        backends = [await started(srv, paths, slot_dir) for _ in range(3)]
        for b in backends:
            assert b.conn is not None and b.conn.record is not None
            b.conn.record.fit = {"prefix_reuse": "none"}
        notes: list[str] = []
        for r in range(2):
            for k, b in enumerate(backends):
                events = await turn(b, f"session {k} round {r}: " + "context " * 20)
                notes += [e.text for e in events if isinstance(e, Notice)]
        for b in backends:
            await b.close()
    assert not [n for n in notes if n.startswith("restored the saved slot")], notes
    assert any("cannot reuse a restored slot" in n for n in notes), notes
    assert [a for a in srv.actions if a[0] == "restore"] == []
    assert [a for a in srv.actions if a[0] == "save"], (
        "slots are still saved (a --swa-full relaunch can use them)"
    )


async def test_a_new_session_starts_from_a_cached_session_with_the_same_stable_prefix(
    paths: AppPaths, slot_dir: Path
) -> None:
    """An agent's system prompt and tools are the same for every session: a brand-new session
    gets a copy of such a session's slot (saved, restored into its empty slot) instead of
    reading the shared prefix again; a session with another prefix is never copied."""
    with DiskFake(slot_dir, total_slots=4, n_ctx=8192) as srv:
        a = await started(srv, paths, slot_dir)
        await turn(a, "the first session " + "context " * 40)
        a.session.prefix_hash = "tools-v1"
        a.store.save(a.session)
        b = await started(srv, paths, slot_dir)
        slot = await b.keeper.next_slot()
        assert slot >= 0 and slot != a.session.pinned_slot
        assert await b.keeper.seed(slot, "other-prefix", 600) is None
        assert srv.actions == []
        note = await b.keeper.seed(slot, "tools-v1", 600)
        assert note is not None and f"copied into slot {slot}" in note, note
        assert [act for act, _name in srv.actions] == ["save", "restore"]
        await a.close()
        await b.close()
