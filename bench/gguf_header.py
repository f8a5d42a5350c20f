"""Header read time and bytes read: fusion_tui.gguf.reader vs gguf.GGUFReader, same file, same run.

Usage: .venv/bin/python bench/gguf_header.py [MODEL.gguf ...]   (default: the demo model)
GGUFReader memory-maps the whole file and parses every key and tensor record; we read only the
header and metadata (tokenizer arrays walked by length) within a byte budget.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import gguf

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from fusion_tui.gguf.reader import read_header
from fusion_tui.models.demo import demo_model_path


def _time(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench(path: Path, repeat: int = 5) -> None:
    ours = _time(lambda: read_header(path), repeat)
    theirs = _time(lambda: gguf.GGUFReader(path), max(1, repeat // 2))
    h = read_header(path)
    ref = gguf.GGUFReader(path)
    size = path.stat().st_size
    print(f"{path.name}  ({size / 2**20:.1f} MiB, {len(h.kv)} keys, {h.tensor_count} tensors)")
    print(f"  fusion_tui.read_header : {ours * 1000:8.1f} ms, read {h.bytes_read:>12,} B")
    print(f"  gguf.GGUFReader        : {theirs * 1000:8.1f} ms, parsed {ref.data_offset:>10,} B "
          f"(mapped {size:,} B)")  # fmt: skip
    print(
        f"  speed-up {theirs / ours:.1f}x; bytes read / parsed {h.bytes_read / ref.data_offset:.2f}"
    )


def main(argv: list[str]) -> int:
    paths = [Path(a) for a in argv] or [p for p in [demo_model_path()] if p]
    if not paths:
        print("no model given and the demo model is not installed", file=sys.stderr)
        return 2
    for p in paths:
        bench(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
