"""The launch wizard's words (fit.summary): facts, budget, verdict and KV-check lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.fit.launch_plan import plan_launch
from fusion_tui.fit.memory import Memory
from fusion_tui.fit.summary import (
    check_model_path,
    display_path,
    format_bytes,
    kv_check_line,
    layer_layout,
    one_line,
    parse_slots,
    plan_rows,
    slots_line,
    stage_lines,
    step_titles,
)
from fusion_tui.status import ServerStatus
from tests.tinymodels import write_header

MIB = 1024 * 1024
GIB = 1024 * MIB


def model(tmp_path: Path, arch: str, **extra: Any) -> Path:
    return write_header(tmp_path / f"{arch}.Q4_K_M.gguf", arch, **extra)


def rows(plan: Any) -> dict[str, str]:
    """label → value (continuation rows appended to the previous label)."""
    out: dict[str, str] = {}
    last = ""
    for row in plan_rows(plan, lambda p: f"…/{p.name}"):
        if row.label:
            last = row.label
            out[last] = row.value
        else:
            out[last] += "\n" + row.value
    return out


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (0, "0 B"),
        (512, "512 B"),
        (23_040, "22.5 KiB"),
        (98_362_432, "93.8 MiB"),
        (180 * MIB, "180 MiB"),
        (3_122_850_368, "2.91 GiB"),
        (4 * GIB, "4.00 GiB"),
    ],
)
def test_format_bytes(n: int, text: str) -> None:
    assert format_bytes(n) == text


def test_plain_model_rows(tmp_path: Path) -> None:
    path = model(tmp_path, "llama")
    size = path.stat().st_size
    plan = plan_launch(path, 4, memory=Memory(size + GIB + 2 * GIB, "ram"), max_ctx=2048)
    r = rows(plan)
    assert r["model"] == f"llama (llama, Q4_K_M) · {format_bytes(size)}"
    assert r["file"] == "…/llama.Q4_K_M.gguf"
    assert r["layers"] == "6 layers, all full attention · trained context 32,768"
    assert r["memory"] == (
        f"{format_bytes(size + 3 * GIB)} free RAM − {format_bytes(size)} weights − 1.00 GiB "
        "reserve = 2.00 GiB for the KV cache"
    )
    assert r["context"] == "8,192 tokens (fitted, limited by context cap)"
    assert r["slots"] == "4 × 2,048 tokens each (split cache)"
    # 6 layers × 2 heads × 32 dims × (K+V) × 2 B = 1,536 B per token; × 8,192 cells = 12 MiB
    assert r["KV cache"] == "12.0 MiB · 1.50 KiB per token\nfull: 6 layers × 8,192 cells = 12.0 MiB"
    assert r["--swa-full"] == "no — no sliding-window layers: the flag is not needed"
    assert r["prefix reuse"] == "full — any cached prefix is reused"
    assert not any(row.warn for row in plan_rows(plan))


def test_sliding_model_verdicts_and_manual_ctx(tmp_path: Path) -> None:
    path = model(tmp_path, "gemma3", attention__sliding_window=512)
    roomy = plan_launch(path, 2, memory=Memory(64 * GIB, "config"), max_ctx=8192)  # per slot
    r = rows(roomy)
    assert r["layers"].startswith("6 layers: 5 sliding (window 512), 1 full")
    assert r["--swa-full"].startswith("yes — auto: the full-size cache takes")
    assert r["prefix reuse"] == "full — any cached prefix is reused"
    assert "sliding: 5 layers × 16,384 cells" in r["KV cache"]
    off = plan_launch(path, 2, 8192, swa_full_mode="off", memory=Memory(64 * GIB, "config"))
    r = rows(off)
    assert r["context"] == "8,192 tokens (set in config)"
    assert r["--swa-full"] == "no — swaFull is off: sliding layers keep a window-sized cache"
    assert r["prefix reuse"].startswith("none — only whole-session extensions are reused")
    # per slot pad256(512 + ubatch 512) = 1,024 cells × 2 streams
    assert "sliding: 5 layers × 2,048 cells" in r["KV cache"]


def test_hybrid_and_recurrent_layouts(tmp_path: Path) -> None:
    hybrid = model(tmp_path, "lfm2", attention__head_count_kv=[0, 0, 2, 0, 2, 0],
                   shortconv__l_cache=3)  # fmt: skip
    plan = plan_launch(hybrid, 1, memory=Memory(8 * GIB, "config"), max_ctx=4096)
    assert plan.facts is not None
    assert layer_layout(plan.facts) == "6 layers: 2 full attention, 4 recurrent"
    r = rows(plan)
    assert "recurrent: 4 layers × state" in r["KV cache"]
    assert r["--swa-full"] == "no — hybrid/recurrent model: --swa-full does not apply"
    assert r["prefix reuse"].startswith("none")
    mamba = model(tmp_path, "mamba2", attention__head_count=0, attention__head_count_kv=0,
                  ssm__conv_kernel=4, ssm__inner_size=512, ssm__state_size=16,
                  ssm__group_count=2, ssm__time_step_rank=8)  # fmt: skip
    plan = plan_launch(mamba, 1, memory=Memory(8 * GIB, "config"), max_ctx=4096)
    assert plan.facts is not None and layer_layout(plan.facts) == "6 layers, all recurrent"


def test_does_not_fit_and_fallback_rows_warn(tmp_path: Path) -> None:
    path = model(tmp_path, "llama")
    tight = plan_launch(path, 1, memory=Memory(path.stat().st_size + GIB, "config"))
    warned = [row for row in plan_rows(tight) if row.warn]
    assert len(warned) == 1 and warned[0].value.startswith("does NOT fit: ")
    assert warned[0].value.endswith("0 B budget")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 100)
    fallback = plan_launch(bad, memory=Memory(64 * GIB, "config"))
    r = {row.label: row for row in plan_rows(fallback)}
    assert r["header"].warn and "file-size guess" in r["header"].value
    assert r["model"].value == "bad"


def test_unified_slots_line(tmp_path: Path) -> None:
    plan = plan_launch(model(tmp_path, "llama"), 4, 8192, kv_unified=True,
                       memory=Memory(8 * GIB, "config"))  # fmt: skip
    assert slots_line(plan) == "4 sharing 8,192 tokens (unified cache)"


@pytest.mark.parametrize(
    ("estimated", "allocated", "text"),
    [
        (180 * MIB, 180 * MIB, "KV cache: estimated 180 MiB · allocated 180 MiB · exact"),
        (
            100 * MIB,
            99 * MIB,
            "KV cache: estimated 100 MiB · allocated 99.0 MiB · estimate off by +1.01%",
        ),
        (
            1000 * MIB,
            1002 * MIB,
            "KV cache: estimated 1,000 MiB · allocated 1,002 MiB · estimate off by -0.20% "
            "(within 1%)",
        ),
        (
            180 * MIB,
            None,
            "KV cache: estimated 180 MiB · the server's allocation was not found in its log",
        ),
        (None, 4 * MIB, "KV cache: allocated 4.00 MiB (no estimate recorded)"),
        (None, None, "KV cache: no estimate and no allocation recorded"),
    ],
)
def test_kv_check_line(estimated: int | None, allocated: int | None, text: str) -> None:
    assert kv_check_line(estimated, allocated) == text


def test_step_titles_mark_the_current_step() -> None:
    assert [current for _, current in step_titles(2)] == [False, True, False]
    assert [name for name, _ in step_titles(1)] == [
        "1 Pick a model",
        "2 Check the fit",
        "3 Launch",
    ]


def test_check_model_path_reasons(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"GGUF")
    (tmp_path / "notes.txt").write_text("x")
    assert check_model_path(f"  {tmp_path / 'm.gguf'} ") == tmp_path / "m.gguf"
    with pytest.raises(ValueError, match="type the path"):
        check_model_path("  ")
    with pytest.raises(ValueError, match="is a folder"):
        check_model_path(str(tmp_path))
    with pytest.raises(ValueError, match=r"notes\.txt is not a \.gguf file"):
        check_model_path(str(tmp_path / "notes.txt"))
    with pytest.raises(ValueError, match="no file at"):
        check_model_path(str(tmp_path / "gone.gguf"))


def test_parse_slots_limits() -> None:
    assert parse_slots(" 8 ") == 8
    for bad in ("0", "65", "-1", "x", ""):
        with pytest.raises(ValueError, match="slots must be"):
            parse_slots(bad)


def test_display_path_and_one_line() -> None:
    assert display_path(Path.home() / "models" / "m.gguf") == "~/models/m.gguf"
    assert display_path(Path("/srv/m.gguf")) == "/srv/m.gguf"
    assert one_line(ValueError("first\nsecond")) == "first"
    assert one_line(KeyError()) == "KeyError"


def test_stage_lines_mark_the_current_stage() -> None:
    stages = [
        ServerStatus(state="starting", detail="planning the launch"),
        ServerStatus(state="loading", detail="loading the model"),
    ]
    head = (
        "Launching M with 1 slot: /health answers 503 while the model loads, 200 once it is ready."
    )
    assert stage_lines("M", 1, stages, "launching") == [
        head, "", "✓ planning the launch", "… loading the model",
    ]  # fmt: skip
    assert stage_lines("M", 1, stages, "failed")[-1] == "✗ loading the model"
    done = [*stages, ServerStatus(state="ready", detail="x")]
    assert stage_lines("M", 1, done, "ready")[2:] == [
        "✓ planning the launch",
        "✓ loading the model",
    ]
    assert stage_lines("M", 2, [], "launching")[2:] == ["… starting"]
    assert "with 2 slots" in stage_lines("M", 2, [], "idle")[0]
