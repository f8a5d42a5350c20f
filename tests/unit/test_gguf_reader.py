"""The budgeted GGUF header reader: every value type, v2/v3, skipped arrays, hostile input."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import gguf
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusion_tui.gguf.reader import (
    MATERIALISE_LIMIT,
    MAX_DEPTH,
    GGUFError,
    GGUFHeader,
    SkippedArray,
    read_header,
    read_header_stream,
)
from tests.tinymodels import write_metadata

V = gguf.GGUFValueType


class SpyStream(io.BytesIO):
    """Counts bytes handed out and the largest single read request."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.total = 0
        self.largest = 0

    def read(self, n: int | None = -1) -> bytes:
        assert n is not None and n >= 0, "the reader must always bound its reads"
        self.largest = max(self.largest, n)
        out = super().read(n)
        self.total += len(out)
        return out


def parse(data: bytes, budget: int = 8 * 1024 * 1024) -> tuple[GGUFHeader | GGUFError, SpyStream]:
    spy = SpyStream(data)
    try:
        return read_header_stream(spy, len(data), budget), spy
    except GGUFError as exc:
        return exc, spy


def s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack("<Q", len(raw)) + raw


def raw_header(kvs: list[bytes], version: int = 3, tensors: int = 0) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", version, tensors, len(kvs)) + b"".join(kvs)


def kv_u32(key: str, value: int) -> bytes:
    return s(key) + struct.pack("<II", V.UINT32, value)


def test_every_value_type_round_trips(tmp_path: Path) -> None:
    w = gguf.GGUFWriter(str(tmp_path / "t.gguf"), "llama")
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -30000)
    w.add_uint32("t.u32", 4_000_000_000)
    w.add_int32("t.i32", -2_000_000_000)
    w.add_float32("t.f32", 0.5)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "héllo")
    w.add_uint64("t.u64", 2**63)
    w.add_int64("t.i64", -(2**62))
    w.add_float64("t.f64", 1e300)
    w.add_array("t.arr_i", [1, 2, 3])
    w.add_array("t.arr_s", ["a", "bb", ""])
    w.add_array("t.nested", [[1, 2], [3]])
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    h = read_header(tmp_path / "t.gguf")
    assert h.version == 3 and h.tensor_count == 0
    assert h.kv["general.architecture"] == "llama"
    expected = {
        "t.u8": 200, "t.i8": -5, "t.u16": 60000, "t.i16": -30000, "t.u32": 4_000_000_000,
        "t.i32": -2_000_000_000, "t.f32": 0.5, "t.bool": True, "t.str": "héllo",
        "t.u64": 2**63, "t.i64": -(2**62), "t.f64": 1e300, "t.arr_i": [1, 2, 3],
        "t.arr_s": ["a", "bb", ""], "t.nested": [[1, 2], [3]],
    }  # fmt: skip
    for key, value in expected.items():
        assert h.kv[key] == value, key
    assert h.types["t.f64"] == V.FLOAT64 and h.types["t.nested"] == V.ARRAY
    assert h.metadata_end == (tmp_path / "t.gguf").stat().st_size


def test_version_2_is_read() -> None:
    h, _ = parse(raw_header([kv_u32("a.b", 7)], version=2))
    assert not isinstance(h, GGUFError)
    assert h.version == 2 and h.kv == {"a.b": 7}


def test_large_arrays_are_skipped_with_their_length(tmp_path: Path) -> None:
    n = MATERIALISE_LIMIT + 1000
    path = write_metadata(
        tmp_path / "big.gguf",
        "llama",
        {"tok.tokens": [f"tok{i}" for i in range(n)], "tok.small": ["x", "y"]},
    )
    w = gguf.GGUFWriter(str(tmp_path / "f.gguf"), "llama")
    w.add_array("tok.scores", np.zeros(50_000, dtype=np.float32).tolist())
    w.add_uint32("after", 9)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()
    h = read_header(path)
    tokens = h.kv["tok.tokens"]
    assert isinstance(tokens, SkippedArray) and len(tokens) == n and tokens.item_type == V.STRING
    assert h.kv["tok.small"] == ["x", "y"]
    h2 = read_header(tmp_path / "f.gguf")
    assert h2.kv["tok.scores"] == SkippedArray(V.FLOAT32, 50_000)
    assert h2.kv["after"] == 9
    # fixed-size arrays are skipped by seeking: their bytes are never read
    assert h2.bytes_read < 50_000 * 4 / 2


def test_demo_model_header_reads_far_less_than_the_file(demo_model: Path) -> None:
    h = read_header(demo_model)
    assert h.kv["general.architecture"] == "llama"
    assert h.tensor_count > 0
    assert h.bytes_read <= h.metadata_end < h.file_size / 10


def _small_header() -> bytes:
    arr = s("arr") + struct.pack("<IIQ", V.ARRAY, V.STRING, 2) + s("ab") + s("c")
    nested = s("n") + struct.pack("<IIQ", V.ARRAY, V.ARRAY, 1) + struct.pack("<IQ", V.UINT8, 2)
    nested += b"\x01\x02"
    return raw_header([kv_u32("x.y", 1), s("name") + struct.pack("<I", V.STRING) + s("z"), arr,
                       nested])  # fmt: skip


def test_small_header_parses() -> None:
    h, _ = parse(_small_header())
    assert not isinstance(h, GGUFError)
    assert h.kv == {"x.y": 1, "name": "z", "arr": ["ab", "c"], "n": [[1, 2]]}


def test_truncation_at_every_offset_is_a_gguf_error() -> None:
    data = _small_header()
    for n in range(len(data)):
        result, spy = parse(data[:n])
        assert isinstance(result, GGUFError), f"cut at {n} parsed"
        assert spy.total <= n
        assert "\n" not in str(result)


def test_wrong_magic() -> None:
    result, _ = parse(b"GGML" + _small_header()[4:])
    assert isinstance(result, GGUFError) and "magic" in str(result)


@pytest.mark.parametrize(
    ("version_bytes", "needle"),
    [(struct.pack(">I", 3), "big-endian"), (struct.pack("<I", 1), "version 1"),
     (struct.pack("<I", 99), "version 99")],
)  # fmt: skip
def test_bad_versions(version_bytes: bytes, needle: str) -> None:
    data = _small_header()
    result, _ = parse(data[:4] + version_bytes + data[8:])
    assert isinstance(result, GGUFError) and needle in str(result)


@pytest.mark.parametrize(
    "data",
    [
        b"GGUF" + struct.pack("<IQQ", 3, 0, 2**63),  # kv count
        b"GGUF" + struct.pack("<IQQ", 3, 2**60, 1) + kv_u32("a", 1),  # tensor count
        raw_header([s("a") + struct.pack("<IIQ", V.ARRAY, V.UINT32, 2**40)]),  # array count
        raw_header([s("a") + struct.pack("<IIQ", V.ARRAY, V.STRING, 2**50)]),
        raw_header([struct.pack("<Q", 2**62) + b"key"]),  # string bomb in a key
        raw_header([s("a") + struct.pack("<IQ", V.STRING, 2**63 - 1) + b"x" * 10]),
        raw_header([s("a") + struct.pack("<IQ", V.STRING, 10**6) + b"x" * 100]),
    ],
)
def test_absurd_counts_fail_fast_without_big_reads(data: bytes) -> None:
    result, spy = parse(data)
    assert isinstance(result, GGUFError)
    assert spy.largest <= 64 * 1024 and spy.total <= len(data)


def test_unknown_type_codes() -> None:
    result, _ = parse(raw_header([s("a") + struct.pack("<I", 99) + b"\0" * 8]))
    assert isinstance(result, GGUFError) and "type code 99" in str(result)
    result, _ = parse(raw_header([s("a") + struct.pack("<IIQ", V.ARRAY, 77, 1) + b"\0" * 8]))
    assert isinstance(result, GGUFError) and "77" in str(result)


def test_deep_nesting_is_refused() -> None:
    depth = MAX_DEPTH + 3
    body = struct.pack("<IQ", V.ARRAY, 1) * (depth - 1) + struct.pack("<IQ", V.UINT8, 0)
    result, _ = parse(raw_header([s("deep") + struct.pack("<I", V.ARRAY) + body]))
    assert isinstance(result, GGUFError) and "nested too deep" in str(result)
    ok_body = struct.pack("<IQ", V.ARRAY, 1) * (MAX_DEPTH - 1) + struct.pack("<IQ", V.UINT8, 0)
    h, _ = parse(raw_header([s("ok") + struct.pack("<I", V.ARRAY) + ok_body]))
    assert not isinstance(h, GGUFError)


def test_budget_exceeded_reads_at_most_the_budget() -> None:
    data = raw_header([s("big") + struct.pack("<I", V.STRING) + s("x" * 200_000)])
    result, spy = parse(data, budget=100_000)
    assert isinstance(result, GGUFError) and "budget" in str(result)
    assert spy.total <= 100_000
    h, _ = parse(data, budget=300_000)
    assert not isinstance(h, GGUFError)


def test_skipped_string_array_respects_budget() -> None:
    items = b"".join(s("t" * 50) for _ in range(5000))
    data = raw_header([s("tokens") + struct.pack("<IIQ", V.ARRAY, V.STRING, 5000) + items])
    result, spy = parse(data, budget=100_000)
    assert isinstance(result, GGUFError) and "budget" in str(result)
    assert spy.total <= 100_000


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="cannot read"):
        read_header(tmp_path / "nope.gguf")
    with pytest.raises(GGUFError):
        read_header(tmp_path)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=0, max_value=200))
def test_random_bytes_never_escape_as_other_errors(tail: bytes, cut: int) -> None:
    for data in (b"GGUF" + tail, _small_header()[:cut] + tail):
        result, spy = parse(data, budget=4096)
        assert isinstance(result, GGUFError) or result.metadata_end <= len(data)
        assert spy.total <= 4096


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=200), st.integers(min_value=0, max_value=255))
def test_single_byte_mutations(pos: int, value: int) -> None:
    data = bytearray(_small_header())
    data[pos % len(data)] = value
    result, spy = parse(bytes(data), budget=1024)
    assert isinstance(result, GGUFError) or result.kv is not None
    assert spy.total <= 1024
