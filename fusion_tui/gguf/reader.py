"""Provides `read_header`: a GGUF header and metadata key/value section, within a byte budget.

Pure Python (struct) so the app never needs the `gguf` package at run time. Tensor data is never
read. Every length and count is checked against what is left of the file and of the budget before
anything is read or allocated, so a hostile file fails fast with a one-line `GGUFError`.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

DEFAULT_BUDGET = 8 * 1024 * 1024
MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
MAX_DEPTH = 4
# Arrays longer than this are skipped by length (tokenizer tokens, merges, scores), not kept.
MATERIALISE_LIMIT = 4096
_CHUNK = 64 * 1024
# Smallest encoding of one tensor-info record (name len, n_dims, type, offset), used only to
# reject tensor counts that could not possibly fit the file.
_MIN_TENSOR_INFO = 8 + 4 + 4 + 8

# Value type codes (GGUF spec).
T_UINT8, T_INT8, T_UINT16, T_INT16, T_UINT32, T_INT32, T_FLOAT32, T_BOOL = range(8)
T_STRING, T_ARRAY, T_UINT64, T_INT64, T_FLOAT64 = 8, 9, 10, 11, 12

_SCALARS: dict[int, struct.Struct] = {
    T_UINT8: struct.Struct("<B"),
    T_INT8: struct.Struct("<b"),
    T_UINT16: struct.Struct("<H"),
    T_INT16: struct.Struct("<h"),
    T_UINT32: struct.Struct("<I"),
    T_INT32: struct.Struct("<i"),
    T_FLOAT32: struct.Struct("<f"),
    T_BOOL: struct.Struct("<?"),
    T_UINT64: struct.Struct("<Q"),
    T_INT64: struct.Struct("<q"),
    T_FLOAT64: struct.Struct("<d"),
}
TYPE_NAMES = {
    T_UINT8: "u8", T_INT8: "i8", T_UINT16: "u16", T_INT16: "i16", T_UINT32: "u32",
    T_INT32: "i32", T_FLOAT32: "f32", T_BOOL: "bool", T_STRING: "string", T_ARRAY: "array",
    T_UINT64: "u64", T_INT64: "i64", T_FLOAT64: "f64",
}  # fmt: skip
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")


class GGUFError(ValueError):
    """A file that is not a GGUF this reader can use; `str()` is a one-line reason."""

    def __init__(self, reason: str, offset: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.offset = offset


@dataclass(frozen=True)
class SkippedArray:
    """A large array that was walked past, not materialised: its element type and length."""

    item_type: int
    count: int

    def __len__(self) -> int:
        return self.count


MetaValue = int | float | bool | str | list["MetaValue"] | SkippedArray


@dataclass
class GGUFHeader:
    """What the header and metadata section hold, plus how much of the file it took to know it."""

    version: int
    tensor_count: int
    kv: dict[str, MetaValue]
    types: dict[str, int] = field(default_factory=dict)
    file_size: int = 0
    bytes_read: int = 0
    metadata_end: int = 0

    def get(self, key: str, default: MetaValue | None = None) -> MetaValue | None:
        return self.kv.get(key, default)


class _Window:
    """Sequential reads over a stream with a hard limit; counts every byte actually read."""

    def __init__(self, stream: BinaryIO, file_size: int, budget: int) -> None:
        self.stream = stream
        self.file_size = file_size
        self.budget = budget
        self.limit = min(file_size, budget)
        self.base = 0
        self.buf = b""
        self.bytes_read = 0

    def fail_past(self, pos: int, what: str) -> GGUFError:
        if pos > self.file_size:
            return GGUFError(f"truncated file: {what} runs past the end at byte {pos}", pos)
        return GGUFError(
            f"metadata exceeds the read budget of {self.budget} bytes ({what} at byte {pos})", pos
        )

    def check(self, pos: int, n: int, what: str) -> None:
        if n < 0 or pos + n > self.limit:
            raise self.fail_past(pos + max(n, 0), what)

    def get(self, pos: int, n: int, what: str) -> tuple[bytes, int]:
        """Bytes [pos, pos+n) as (buffer, offset into it)."""
        end = self.base + len(self.buf)
        if pos >= self.base and pos + n <= end:
            return self.buf, pos - self.base
        self.check(pos, n, what)
        keep = self.buf[pos - self.base :] if self.base <= pos < end else b""
        start = pos + len(keep)
        want = min(max(n - len(keep), _CHUNK), self.limit - start)
        self.stream.seek(start)
        data = self.stream.read(want)
        self.bytes_read += len(data)
        if len(data) < n - len(keep):
            raise GGUFError(f"truncated file: {what} runs past the end at byte {start}", start)
        self.base, self.buf = pos, keep + data
        return self.buf, 0


class _Parser:
    def __init__(self, win: _Window) -> None:
        self.win = win
        self.pos = 0

    def scalar(self, st: struct.Struct, what: str) -> int | float | bool:
        buf, off = self.win.get(self.pos, st.size, what)
        self.pos += st.size
        value: int | float | bool = st.unpack_from(buf, off)[0]
        return value

    def u32(self, what: str) -> int:
        return int(self.scalar(_U32, what))

    def u64(self, what: str) -> int:
        return int(self.scalar(_U64, what))

    def string(self, what: str, keep: bool = True) -> str:
        n = self.u64(f"{what} length")
        self.win.check(self.pos, n, what)
        if not keep:
            self.pos += n
            return ""
        buf, off = self.win.get(self.pos, n, what)
        self.pos += n
        return bytes(buf[off : off + n]).decode("utf-8", errors="replace")

    def value(self, vtype: int, what: str, depth: int, keep: bool = True) -> MetaValue:
        st = _SCALARS.get(vtype)
        if st is not None:
            if not keep:
                self.win.check(self.pos, st.size, what)
                self.pos += st.size
                return 0
            return self.scalar(st, what)
        if vtype == T_STRING:
            return self.string(what, keep)
        if vtype == T_ARRAY:
            return self.array(what, depth + 1, keep)
        raise GGUFError(f"unknown value type code {vtype} for {what}", self.pos)

    def array(self, what: str, depth: int, keep: bool) -> MetaValue:
        if depth > MAX_DEPTH:
            raise GGUFError(f"arrays nested too deep (> {MAX_DEPTH}) in {what}", self.pos)
        item_type = self.u32(f"{what} item type")
        count = self.u64(f"{what} count")
        st = _SCALARS.get(item_type)
        if st is None and item_type not in (T_STRING, T_ARRAY):
            raise GGUFError(f"unknown array item type code {item_type} in {what}", self.pos)
        min_size = st.size if st is not None else (8 if item_type == T_STRING else 12)
        room = self.win.limit - self.pos
        if count * min_size > room:
            raise self.win.fail_past(self.pos + count * min_size, f"{what} ({count} items)")
        if st is not None:
            if keep and count <= MATERIALISE_LIMIT:
                buf, off = self.win.get(self.pos, count * st.size, what)
                self.pos += count * st.size
                return list(struct.unpack_from(f"<{count}{st.format[1:]}", buf, off))
            self.pos += count * st.size
            return SkippedArray(item_type, count)
        if keep and count <= MATERIALISE_LIMIT:
            return [self.value(item_type, what, depth) for _ in range(count)]
        if item_type == T_STRING:
            self.skip_strings(count, what)
        else:
            for _ in range(count):
                self.value(item_type, what, depth, keep=False)
        return SkippedArray(item_type, count)

    def skip_strings(self, count: int, what: str) -> None:
        """Walk `count` strings by their length prefixes: the tokenizer's hot path."""
        win, pos, limit, unpack = self.win, self.pos, self.win.limit, _U64.unpack_from
        buf, base = win.buf, win.base
        end = base + len(buf)
        for _ in range(count):
            if pos + 8 > end:
                buf, off = win.get(pos, 8, f"{what} string length")
                base, end = pos - off, pos - off + len(buf)
            n = unpack(buf, pos - base)[0]
            pos += 8 + n
            if pos > limit:
                raise win.fail_past(pos, f"string in {what}")
        self.pos = pos


def read_header_stream(
    stream: BinaryIO, file_size: int, budget: int = DEFAULT_BUDGET
) -> GGUFHeader:
    """Parse the header from an open binary stream of `file_size` bytes, reading < `budget`."""
    if budget <= 0:
        raise GGUFError("the read budget must be positive")
    win = _Window(stream, file_size, budget)
    p = _Parser(win)
    if file_size < 4:
        raise GGUFError("not a GGUF file: shorter than the 4-byte magic", 0)
    buf, off = win.get(0, 4, "magic")
    magic = bytes(buf[off : off + 4])
    p.pos = 4
    if magic != MAGIC:
        raise GGUFError(f"not a GGUF file: magic is {magic!r}, expected b'GGUF'", 0)
    version = p.u32("version")
    if version not in SUPPORTED_VERSIONS:
        swapped = int.from_bytes(version.to_bytes(4, "little"), "big")
        if swapped in (1, 2, 3):
            raise GGUFError("big-endian GGUF files are not supported", 4)
        raise GGUFError(f"unsupported GGUF version {version} (supported: 2, 3)", 4)
    tensor_count = p.u64("tensor count")
    kv_count = p.u64("metadata count")
    if tensor_count * _MIN_TENSOR_INFO > file_size:
        raise GGUFError(f"tensor count {tensor_count} cannot fit a {file_size}-byte file", 8)
    if kv_count * 13 > win.limit - p.pos:  # key length + type + 1 byte value, at least
        raise win.fail_past(p.pos + kv_count * 13, f"metadata count {kv_count}")
    kv: dict[str, MetaValue] = {}
    types: dict[str, int] = {}
    for i in range(kv_count):
        key = p.string(f"key #{i}")
        vtype = p.u32(f"type of {key!r}")
        kv[key] = p.value(vtype, repr(key), 0)
        types[key] = vtype
    return GGUFHeader(
        version=version,
        tensor_count=tensor_count,
        kv=kv,
        types=types,
        file_size=file_size,
        bytes_read=win.bytes_read,
        metadata_end=p.pos,
    )


def read_header(path: str | os.PathLike[str], budget: int = DEFAULT_BUDGET) -> GGUFHeader:
    """Read a GGUF file's header and metadata; `GGUFError` for anything unusable."""
    p = Path(path)
    try:
        size = p.stat().st_size
        if not p.is_file():
            raise GGUFError(f"not a regular file: {p}")
        with p.open("rb") as f:
            return read_header_stream(f, size, budget)
    except OSError as exc:
        raise GGUFError(f"cannot read {p}: {exc.strerror or exc}") from exc
