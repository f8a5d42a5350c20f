"""The native `/completion` stream decoded into events: how many tokens each piece is comes from
the step of `tokens_predicted` (the chunk's `tokens` list holds only the last one when the server
held text back, an incomplete UTF-8 sequence say)."""

from __future__ import annotations

import json

from fusion_tui.server.http.events import NativeDecoder
from fusion_tui.server.types import StreamEnd, TextDelta


def chunk(content: str, predicted: int, **more: object) -> str:
    return json.dumps({"content": content, "tokens": [7], "tokens_predicted": predicted, **more})


def test_each_piece_counts_the_tokens_predicted_since_the_last_one() -> None:
    decoder = NativeDecoder()
    events = [
        e
        for payload in (
            chunk("Hi", 1),
            chunk(" \u3000", 3),  # two byte tokens held back, then sent as one piece
            chunk("\n", 4),
            chunk("", 4, stop=True, stop_type="limit", id_slot=0, timings={}),
        )
        for e in decoder.decode(payload)
    ]
    pieces = [e for e in events if isinstance(e, TextDelta)]
    assert [(p.text, p.tokens) for p in pieces] == [("Hi", 1), (" \u3000", 2), ("\n", 1)]
    assert isinstance(events[-1], StreamEnd) and events[-1].stop_type == "limit"


def test_a_chunk_without_a_count_says_nothing_about_its_tokens() -> None:
    decoder = NativeDecoder()
    (piece,) = decoder.decode(json.dumps({"content": "x"}))
    assert isinstance(piece, TextDelta) and piece.tokens is None
