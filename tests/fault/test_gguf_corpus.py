"""GGUF reader against a byte-flip corpus over real headers, and the read budget as a hard bound.

The unit tests fuzz hand-built headers; here the inputs are headers written by the reference
writer (`gguf.GGUFWriter`) with the keys a llama model carries, and the demo model's own first
bytes. Every single-byte flip must give a `GGUFError` or a header, with no read past the budget.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import BinaryIO

import pytest

from fusion_tui.gguf.reader import GGUFError, GGUFHeader, read_header_stream
from tests.tinymodels import write_metadata

FLIPS = (0xFF, 0x01, 0x80)


class Spy:
    """Wraps a binary stream; counts the bytes handed out and the largest read asked for."""

    def __init__(self, inner: BinaryIO) -> None:
        self.inner = inner
        self.total = 0
        self.largest = 0

    def seek(self, pos: int, whence: int = 0) -> int:
        return self.inner.seek(pos, whence)

    def tell(self) -> int:
        return self.inner.tell()

    def read(self, n: int = -1) -> bytes:
        assert n >= 0, "the reader must always bound its reads"
        self.largest = max(self.largest, n)
        out = self.inner.read(n)
        self.total += len(out)
        return out


def parse(data: bytes, budget: int) -> tuple[GGUFHeader | GGUFError, Spy]:
    spy = Spy(io.BytesIO(data))
    try:
        return read_header_stream(spy, len(data), budget), spy  # type: ignore[arg-type]
    except GGUFError as exc:
        return exc, spy


@pytest.fixture(scope="module")
def real_header(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A llama-like header written by the reference writer: scalars, strings, small arrays."""
    path = tmp_path_factory.mktemp("gguf") / "small.gguf"
    kv = {
        "general.name": "tiny",
        ".context_length": 2048,
        ".embedding_length": 64,
        ".block_count": 2,
        ".attention.head_count": 4,
        ".attention.head_count_kv": 2,
        ".rope.freq_base": 10000.0,
        ".attention.layer_norm_rms_epsilon": 1e-5,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": [f"tok{i}" for i in range(24)],
        "tokenizer.ggml.scores": [float(i) for i in range(24)],
        "tokenizer.ggml.add_bos_token": True,
    }
    return write_metadata(path, "llama", kv).read_bytes()


def test_the_real_header_parses(real_header: bytes) -> None:
    header, spy = parse(real_header, budget=len(real_header))
    assert isinstance(header, GGUFHeader)
    assert header.kv["general.architecture"] == "llama"
    assert header.kv["llama.block_count"] == 2
    assert header.kv["tokenizer.ggml.tokens"][:2] == ["tok0", "tok1"]  # type: ignore[index]
    assert spy.total <= len(real_header)


def test_every_single_byte_flip_is_an_error_or_a_header_within_the_budget(
    real_header: bytes,
) -> None:
    budget = len(real_header) + 64
    outcomes = {"error": 0, "header": 0}
    for pos in range(len(real_header)):
        for mask in FLIPS:
            data = bytearray(real_header)
            data[pos] ^= mask
            result, spy = parse(bytes(data), budget)
            assert spy.total <= min(budget, len(data)), f"flip {mask:#x} at {pos} read too much"
            assert spy.largest <= budget
            if isinstance(result, GGUFError):
                assert str(result) and "\n" not in str(result)
                outcomes["error"] += 1
            else:
                assert result.metadata_end <= len(data)
                outcomes["header"] += 1
    # flips in lengths, counts and type codes fail; flips inside values still parse
    assert outcomes["error"] > 0 and outcomes["header"] > 0


def test_a_budget_smaller_than_the_header_is_never_exceeded(real_header: bytes) -> None:
    for budget in range(1, len(real_header), 7):
        result, spy = parse(real_header, budget)
        assert isinstance(result, GGUFError), f"budget {budget} parsed a bigger header"
        assert spy.total <= budget and spy.largest <= budget
        assert "budget" in str(result) or "magic" in str(result) or "truncated" in str(result)


def test_the_demo_models_header_within_small_budgets(demo_model: Path) -> None:
    size = demo_model.stat().st_size
    for budget in (4096, 65_536, 1_000_000):
        with demo_model.open("rb") as fh:
            spy = Spy(fh)
            with pytest.raises(GGUFError, match="budget"):
                read_header_stream(spy, size, budget)  # type: ignore[arg-type]
        assert spy.total <= budget and spy.largest <= budget


def test_byte_flips_in_the_demo_models_first_kilobytes(demo_model: Path) -> None:
    with demo_model.open("rb") as fh:
        prefix = fh.read(4096)
    budget = 4096
    for pos in range(0, len(prefix), 3):
        data = bytearray(prefix)
        data[pos] ^= 0xFF
        result, spy = parse(bytes(data), budget)
        assert isinstance(result, GGUFError)  # the prefix is cut inside the tokenizer
        assert spy.total <= budget
