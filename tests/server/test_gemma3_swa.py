"""The sliding-window test model (Gemma 3 270M Q4_K_M, tests/models.py) against the real server:
header facts as the model card states them, and the KV estimate equal to the allocation with and
without --swa-full (-c 16384 -np 2: 288.00 MiB and 78.00 MiB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.fit.allocation import parse_allocation
from fusion_tui.fit.kv import KVConfig, estimate_kv
from fusion_tui.fit.swa import prefix_reuse
from fusion_tui.gguf.facts import read_model_facts
from tests.tinymodels import launch_and_read_log, server_kv_args

MIB = 1024 * 1024


def test_gemma3_facts(gemma3_model: Path) -> None:
    facts = read_model_facts(gemma3_model)
    assert facts.architecture == "gemma3" and facts.n_layer == 18
    assert sum(facts.swa_layers) == 15 and facts.n_swa == 512
    assert facts.trained_ctx == 32768
    assert prefix_reuse(facts, False) == "none" and prefix_reuse(facts, True) == "full"


@pytest.mark.server
@pytest.mark.parametrize(("swa_full", "mib"), [(True, 288.0), (False, 78.0)], ids=["full", "swa"])
def test_gemma3_estimate_equals_allocation(
    swa_full: bool, mib: float, gemma3_model: Path, llama_server_bin: Path, tmp_path: Path
) -> None:
    cfg = KVConfig(ctx=16384, parallel=2, swa_full=swa_full)
    estimate = estimate_kv(read_model_facts(gemma3_model), cfg)
    log = launch_and_read_log(
        llama_server_bin, gemma3_model, server_kv_args(cfg), tmp_path / "server.log"
    )
    alloc = parse_allocation(log)
    assert alloc is not None, "no size lines in the log:\n" + log[-3000:]
    assert abs(estimate.total_bytes - alloc.total_bytes) <= alloc.tolerance_bytes
    assert abs(alloc.total_bytes - mib * MIB) <= alloc.tolerance_bytes, alloc
