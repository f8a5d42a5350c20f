"""SlotArchive: tagging, refusal reasons, pruning; restore-slot choice; title cleanup."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from fusion_tui.chat.titles import clean_title, title_messages
from fusion_tui.server.errors import ServerHTTPError
from fusion_tui.server.types import SlotState
from fusion_tui.slots.archive import (
    ArchiveRefused,
    ModelIdentity,
    ServerFacts,
    SlotArchive,
    choose_fresh_slot,
    choose_restore_slot,
    owners_by_slot,
)


class FakeSlots:
    """Writes `size` bytes per save, as llama-server would into its --slot-save-path."""

    def __init__(self, folder: Path, size: int = 1000) -> None:
        self.folder = folder
        self.size = size
        self.calls: list[tuple[int, str, str | None]] = []
        self.fail_restore: str | None = None

    async def slot_action(
        self, slot_id: int, action: Any, filename: str | None = None, *, timeout: float = 1.0
    ) -> dict[str, Any]:
        self.calls.append((slot_id, action, filename))
        assert filename is not None
        if action == "save":
            (self.folder / filename).write_bytes(b"x" * self.size)
            return {"id_slot": slot_id, "n_saved": 321, "n_written": self.size}
        if self.fail_restore:
            raise ServerHTTPError(400, self.fail_restore)
        return {"id_slot": slot_id, "n_restored": 321, "timings": {"restore_ms": 12.5}}


def model(tmp_path: Path, size: int = 64) -> ModelIdentity:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"\0" * size)
    return ModelIdentity.of(str(path))


async def test_save_tags_the_file_and_restore_checks_the_tag(tmp_path: Path) -> None:
    client = FakeSlots(tmp_path)
    archive = SlotArchive(tmp_path, now=lambda: 111.0)
    facts = ServerFacts(model(tmp_path), 2048, "f16/f16", "9-1")
    tag = await archive.save(client, 2, "20260101-000000-000-abcdef", facts)
    raw = json.loads((tmp_path / "20260101-000000-000-abcdef.kv.json").read_text())
    assert raw["model"]["size"] == 64 and raw["n_ctx"] == 2048 and raw["saved_at"] == 111.0
    assert (tag.n_saved, tag.n_bytes, tag.cache_types) == (321, 1000, "f16/f16")
    assert oct((tmp_path / "20260101-000000-000-abcdef.kv.json").stat().st_mode)[-3:] == "600"
    restored = await archive.restore(client, 1, "20260101-000000-000-abcdef", facts)
    assert (restored.slot, restored.n_restored, restored.restore_ms) == (1, 321, 12.5)
    assert client.calls == [
        (2, "save", "20260101-000000-000-abcdef.kv"),
        (1, "restore", "20260101-000000-000-abcdef.kv"),
    ]


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"n_ctx": 1024}, "saved with a 2,048-token slot context, the server now has 1,024"),
        ({"cache_types": "q8_0/q8_0"}, "its KV cache is f16/f16, the server now uses q8_0/q8_0"),
        ({"model": ModelIdentity("/other/qwen.gguf", 5, 5)}, "another model (model.gguf)"),
    ],
)
async def test_a_mismatched_saved_slot_is_refused_without_asking_the_server(
    tmp_path: Path, change: dict[str, Any], reason: str
) -> None:
    client = FakeSlots(tmp_path)
    archive = SlotArchive(tmp_path)
    facts = ServerFacts(model(tmp_path), 2048, "f16/f16")
    await archive.save(client, 0, "s1", facts)
    other = ServerFacts(**{**facts.__dict__, **change})
    with pytest.raises(ArchiveRefused) as info:
        await archive.restore(client, 0, "s1", other)
    assert reason in str(info.value)
    assert [c[1] for c in client.calls] == ["save"]


async def test_a_rewritten_model_file_is_refused(tmp_path: Path) -> None:
    client = FakeSlots(tmp_path)
    archive = SlotArchive(tmp_path)
    await archive.save(client, 0, "s1", ServerFacts(model(tmp_path, 64), 2048))
    with pytest.raises(ArchiveRefused, match=r"model\.gguf changed since the save"):
        archive.check("s1", ServerFacts(model(tmp_path, 65), 2048))


async def test_missing_file_missing_tag_and_server_refusal_are_refusals(tmp_path: Path) -> None:
    client = FakeSlots(tmp_path)
    archive = SlotArchive(tmp_path)
    facts = ServerFacts(model(tmp_path), 2048)
    with pytest.raises(ArchiveRefused, match="no saved slot for this session"):
        archive.check("s1", facts)
    await archive.save(client, 0, "s1", facts)
    client.fail_restore = "Unable to restore slot: Restored prompt does not fit"
    with pytest.raises(ArchiveRefused, match=r"could not restore the saved slot: .*does not fit"):
        await archive.restore(client, 0, "s1", facts)
    (tmp_path / "s1.kv").unlink()
    with pytest.raises(ArchiveRefused, match="the saved slot file is missing"):
        archive.check("s1", facts)
    (tmp_path / "s1.kv").write_bytes(b"x")
    (tmp_path / "s1.kv.json").write_text("{not json")
    with pytest.raises(ArchiveRefused, match="no saved slot"):
        archive.check("s1", facts)


async def test_the_size_cap_prunes_the_oldest_and_never_the_one_just_saved(
    tmp_path: Path,
) -> None:
    clock = iter(range(100, 200))
    client = FakeSlots(tmp_path, size=1000)
    archive = SlotArchive(tmp_path, max_bytes=4500, now=lambda: float(next(clock)))
    facts = ServerFacts(model(tmp_path), 2048)
    for sid in ("a", "b", "c"):
        await archive.save(client, 0, sid, facts)
    assert [e[0] for e in archive.entries()] == ["a", "b", "c"]
    await archive.save(client, 0, "d", facts)  # 4 × (1000 + tag) > 4500: the oldest goes
    assert [e[0] for e in archive.entries()] == ["b", "c", "d"]
    assert not (tmp_path / "a.kv").exists() and not (tmp_path / "a.kv.json").exists()
    await archive.save(client, 0, "b", facts)  # re-saving makes b the newest
    client.size = 5000
    await archive.save(client, 0, "e", facts)  # alone over the cap: kept, all others go
    assert [e[0] for e in archive.entries()] == ["e"]


def test_unsafe_session_ids_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        SlotArchive(tmp_path).file_name("../x")


def slot(i: int, busy: bool = False, cached: int = 0) -> SlotState:
    return SlotState(id=i, n_ctx=1024, is_processing=busy, n_prompt_tokens=cached)


def test_restore_goes_to_an_idle_unpinned_slot_preferring_an_empty_one() -> None:
    states = [slot(0, cached=50), slot(1, busy=True), slot(2, cached=0), slot(3, cached=10)]
    assert choose_restore_slot(states, 4) == 2
    assert choose_restore_slot(states, 4, pinned=[2]) == 3
    assert choose_restore_slot(states, 4, pinned=[2], held=[3]) == 0
    assert choose_restore_slot(states, 4, pinned=[0, 2, 3]) is None  # 1 is busy
    assert choose_restore_slot(states, 4, avoid=[2]) == 3
    assert choose_restore_slot(None, 3, pinned=[0]) == 1  # /slots unavailable


def test_owner_of_a_slot_is_the_latest_session_pinned_there_on_this_launch() -> None:
    rows = [
        ("a", 0, "L1", 10.0),
        ("b", 0, "L1", 20.0),
        ("c", 1, "L0", 30.0),
        ("d", 2, "L1", 5.0),
        ("e", 9, "L1", 50.0),
        ("f", None, "L1", 60.0),
    ]
    assert owners_by_slot(rows, "L1", 4) == {0: "b", 2: "d"}
    assert owners_by_slot(rows, None, 4) == {}


def test_title_cleanup_and_a_cheap_prompt() -> None:
    assert clean_title('Title: "Fix the flaky parser test".\nmore') == "Fix the flaky parser test"
    assert clean_title("\n\n**Refactor build**") == "Refactor build"
    assert len(clean_title("word " * 10)) <= 60
    assert clean_title("word " * 40) == ""  # an answer, not a title: none
    assert clean_title("Here's a possible title:\n**Reverse a string**") == "Reverse a string"
    assert clean_title("Here's a possible title") == ""
    assert clean_title("hey there, welcome to the world of code! i'm glad you're here") == ""
    messages = title_messages("x " * 2000)
    assert len(messages[1]["content"]) == 600


def test_a_new_session_gets_the_highest_empty_idle_slot_nobody_holds() -> None:
    states = [slot(0), slot(1, cached=30), slot(2), slot(3, busy=True)]
    assert choose_fresh_slot(states, 4) == 2
    assert choose_fresh_slot(states, 4, taken=[2]) == 0
    assert choose_fresh_slot(states, 4, taken=[0, 2]) is None  # then the request goes -1
    assert choose_fresh_slot(None, 4) is None
