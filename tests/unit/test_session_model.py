"""Session model: round trip and strict validation naming the bad field."""

from __future__ import annotations

import copy
import math

import pytest

from fusion_tui.sessions.model import (
    Message,
    RequestRecord,
    ServerIdentity,
    Session,
    SessionFileError,
    TurnRecord,
    is_session_id,
    new_session_id,
)


def full_session() -> Session:
    s = Session.new(title="Fix the parser", workspace="/src/proj", now=1_700_000_000.25)
    s.messages = [
        Message("system", "You are a coding agent."),
        Message("user", "Fix it"),
        Message(
            "tool",
            "",
            tool_name="read_file",
            tool_arguments={"path": "a.py", "lines": [1, 20]},
            tool_result="print('x')",
        ),
        Message("assistant", "Half an ans", partial=True, partial_reason="cancelled"),
    ]
    s.pinned_slot = 2
    s.server = ServerIdentity("/models/smol.gguf", "launch-7", 4)
    s.prefix_hash = "sha256:abc"
    s.requests = [RequestRecord(2, 120, 3_900, 812.5, 41.2, 1_700_000_001.0)]
    s.turns = [TurnRecord("cancelled", 1_700_000_002.0, "Esc"), TurnRecord("completed", 3.0)]
    return s


def test_round_trip_keeps_every_field() -> None:
    s = full_session()
    again = Session.from_dict(copy.deepcopy(s.to_dict()))
    assert again == s
    assert again.last_outcome == "completed"


def test_ids_sort_by_creation_time_and_are_file_safe() -> None:
    a = new_session_id(1_700_000_000.001)
    b = new_session_id(1_700_000_000.002)
    c = new_session_id(1_800_000_000.0)
    assert a < b < c
    assert all(is_session_id(x) for x in (a, b, c))
    assert a.startswith("20231114-221320-001-")
    assert not is_session_id("../etc/passwd")


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda d: d.__setitem__("title", 5), "title", "should be a string, got int"),
        (lambda d: d.pop("created"), "created", "is missing"),
        (lambda d: d.__setitem__("pinned_slot", True), "pinned_slot", "should be an integer"),
        (lambda d: d.__setitem__("pinned_slot", "2"), "pinned_slot", "got str"),
        (lambda d: d["messages"][1].__setitem__("role", "robot"), "messages[1].role", "robot"),
        (
            lambda d: d["messages"][2].__setitem__("tool_arguments", [1]),
            "messages[2].tool_arguments",
            "object",
        ),
        (
            lambda d: d["requests"][0].__setitem__("cache_n", "3900"),
            "requests[0].cache_n",
            "integer",
        ),
        (
            lambda d: d["requests"][0].__setitem__("ttft_ms", math.nan),
            "requests[0].ttft_ms",
            "number",
        ),
        (
            lambda d: d["turns"][0].__setitem__("outcome", "won"),
            "turns[0].outcome",
            "expected one of",
        ),
        (lambda d: d["server"].__setitem__("total_slots", None), "server.total_slots", "got null"),
        (lambda d: d.__setitem__("messages", {}), "messages", "should be a list"),
        (lambda d: d.__setitem__("id", "x/y"), "id", "not a session id"),
    ],
)
def test_wrong_types_name_the_field(mutate, field: str, words: str) -> None:  # type: ignore[no-untyped-def]
    d = full_session().to_dict()
    mutate(d)
    with pytest.raises(SessionFileError) as info:
        Session.from_dict(d)
    assert info.value.field == field
    assert field in str(info.value) and words in str(info.value)


def test_not_an_object() -> None:
    with pytest.raises(SessionFileError, match="should be an object, got list"):
        Session.from_dict([])
