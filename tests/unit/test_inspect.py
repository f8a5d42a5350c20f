"""`fusion-tui inspect`: JSON fields, the table, and exit code 2 on a bad file."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from fusion_tui.cli import inspect as inspect_command
from fusion_tui.cli.common import Context
from fusion_tui.paths import AppPaths
from tests.tinymodels import write_metadata


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="fusion-tui")
    inspect_command.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["inspect", *argv])
    return inspect_command.run(args, Context(AppPaths.default()))


@pytest.fixture
def gemma(tmp_path: Path) -> Path:
    return write_metadata(tmp_path / "g.gguf", "gemma3", {
        ".block_count": 6, ".context_length": 8192, ".embedding_length": 256,
        ".attention.head_count": 8, ".attention.head_count_kv": 2,
        ".attention.sliding_window": 64, ".attention.sliding_window_pattern": 3,
    })  # fmt: skip


def test_json_fields(gemma: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = _run([str(gemma), "--ctx", "4096", "--parallel", "2", "--swa-full", "off", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["architecture"] == "gemma3" and out["n_layers"] == 6
    assert out["trained_ctx"] == 8192 and out["ctx"] == 4096 and out["fitted_ctx"] >= 4096
    # 2 full layers x 4096 cells + 4 sliding layers x 2 slots x pad256(64+512), 256 B per cell
    assert out["kv_bytes_total"] == 256 * (2 * 4096 + 4 * 2 * 768)
    assert out["kv_bytes_per_token"] == 2 * 256
    assert out["swa_full"] is False and "off" in out["swa_full_reason"]
    assert out["prefix_reuse"] == "none"


def test_swa_full_on_and_unified(gemma: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _run(
        [
            str(gemma),
            "--ctx",
            "2048",
            "--parallel",
            "4",
            "--kv-unified",
            "--swa-full",
            "on",
            "--ubatch",
            "128",
            "--cache-type-k",
            "q8_0",
            "--cache-type-v",
            "q8_0",
            "--json",
        ]
    )
    out = json.loads(capsys.readouterr().out)
    assert out["swa_full"] is True and out["prefix_reuse"] == "full"
    assert out["kv_bytes_total"] == 6 * 2048 * 2 * (64 // 32 * 34)
    assert out["per_slot_ctx"] == 2048 and out["flash_attn"] is True


def test_table(gemma: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run([str(gemma), "--ctx", "4096"]) == 0
    text = capsys.readouterr().out
    assert "KV total" in text and "sliding layers" in text and "prefix reuse" in text


@pytest.mark.parametrize("content", [b"", b"not a gguf at all", b"GGUF\x03\0\0\0" + b"\xff" * 20])
def test_bad_file_exit_2(
    tmp_path: Path, content: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    assert _run([str(bad), "--json"]) == 2
    err = capsys.readouterr()
    assert err.out == "" and len(err.err.strip().splitlines()) == 1


def test_quantised_v_with_fa_off_exit_2(gemma: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run([str(gemma), "--cache-type-v", "q4_0", "--flash-attn", "off"]) == 2
    assert "flash attention" in capsys.readouterr().err


def test_subprocess_has_no_traceback(tmp_path: Path) -> None:
    missing = tmp_path / "missing.gguf"
    proc = subprocess.run(
        [sys.executable, "-m", "fusion_tui", "inspect", str(missing)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1
