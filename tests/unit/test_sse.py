"""The incremental SSE parser, on hand-made edge cases and on bodies recorded from llama-server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fusion_tui.server.errors import ProtocolError
from fusion_tui.server.http.sse import SSEParser, parse_all

STREAMS = Path(__file__).resolve().parents[1] / "data" / "streams"


def feed_in_pieces(body: bytes, cuts: list[int]) -> list[str]:
    parser = SSEParser()
    out: list[str] = []
    last = 0
    for cut in sorted(set(cuts)):
        out += parser.feed(body[last:cut])
        last = cut
    out += parser.feed(body[last:])
    if not parser.done:
        out += parser.close()
    return out


def test_data_lines_become_payloads_and_comments_are_ignored() -> None:
    body = b': ping\n\ndata: {"a": 1}\n\n:\n\ndata: {"b": 2}\n\n'
    assert parse_all(body) == ['{"a": 1}', '{"b": 2}']


def test_multi_line_data_is_joined_with_newlines() -> None:
    assert parse_all(b"data: one\ndata: two\ndata:three\n\n") == ["one\ntwo\nthree"]


@pytest.mark.parametrize("eol", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(eol: bytes) -> None:
    body = b"data: x" + eol + eol + b": c" + eol + b"data: y" + eol + eol
    assert parse_all(body) == ["x", "y"]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: x\r") == []
    assert parser.feed(b"\n\r") == ["x"]  # LF completes the CRLF; the lone CR ends the event
    assert parser.feed(b"\ndata: y\r\n\r\n") == ["y"]  # this LF belongs to that CR


def test_done_ends_the_stream_and_later_bytes_are_ignored() -> None:
    parser = SSEParser()
    out = parser.feed(b"data: a\n\ndata: [DONE]\n\ndata: b\n\n")
    assert out == ["a", "[DONE]"]
    assert parser.done
    assert parser.feed(b"data: c\n\n") == []


def test_other_fields_are_skipped_and_no_space_after_colon_is_fine() -> None:
    assert parse_all(b"event: message\nid: 3\nretry: 10\ndata:{}\n\n") == ["{}"]


def test_a_utf8_character_split_across_chunks_survives() -> None:
    body = "data: héllo ✓\n\n".encode()
    split = body.index("✓".encode()) + 1
    assert feed_in_pieces(body, [split]) == ["héllo ✓"]


def test_invalid_utf8_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        parse_all(b"data: \xff\xfe\n\n")


def test_close_flushes_complete_lines_and_drops_a_cut_line() -> None:
    parser = SSEParser()
    assert parser.feed(b"data: whole\n") == []
    assert parser.close() == ["whole"]
    parser = SSEParser()
    assert parser.feed(b'data: {"cut') == []
    assert parser.close() == []


def test_empty_events_are_not_payloads() -> None:
    assert parse_all(b"\n\n\n\ndata: a\n\n\n\n") == ["a"]


def recorded_bodies() -> list[Path]:
    return sorted(p for p in STREAMS.glob("*.body") if _meta(p)["content_type"].startswith("text/"))


def _meta(body: Path) -> dict[str, object]:
    meta: dict[str, object] = json.loads(body.with_suffix(".meta.json").read_text())
    return meta


@pytest.mark.parametrize("body_file", recorded_bodies(), ids=lambda p: p.stem)
def test_recorded_streams_parse_to_json_payloads(body_file: Path) -> None:
    payloads = parse_all(body_file.read_bytes())
    assert payloads, "a recorded stream has at least one event"
    is_chat = "chat" in str(_meta(body_file)["path"])
    assert (payloads[-1] == "[DONE]") == is_chat  # only the OAI endpoint sends [DONE]
    for payload in payloads[:-1] if is_chat else payloads:
        assert isinstance(json.loads(payload), dict)


def test_recorded_streams_exist() -> None:
    names = {p.stem for p in recorded_bodies()}
    assert {"native_completion", "native_progress", "chat", "chat_progress_usage"} <= names


@given(cuts=st.lists(st.integers(min_value=0, max_value=4000), max_size=40))
def test_any_chunking_gives_the_same_payloads(cuts: list[int]) -> None:
    body = (STREAMS / "chat_progress_usage.body").read_bytes().replace(b"\n", b"\r\n")
    assert feed_in_pieces(body, [c % (len(body) + 1) for c in cuts]) == parse_all(body)
