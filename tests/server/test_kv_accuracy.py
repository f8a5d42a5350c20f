"""The KV estimate against what the real llama-server allocates (its `-lv 4` size lines).

Tiny random-weight models (llama, gemma3 with a 64-token window, lfm2 hybrid, mamba2 recurrent)
and the demo SmolLM2, across slots, unified/split, ubatch, cache types and --swa-full. Each launch
loads in about a second; the servers are killed as soon as the model is loaded.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.fit.allocation import parse_allocation
from fusion_tui.fit.kv import KVConfig, estimate_kv
from fusion_tui.gguf.facts import read_model_facts
from tests.tinymodels import launch_and_read_log, server_kv_args, write_all

F16, Q8 = "f16", "q8_0"
CASES: list[tuple[str, KVConfig]] = [
    ("smollm2", KVConfig(ctx=4096, parallel=2)),
    ("smollm2", KVConfig(ctx=4096, parallel=2, type_k=Q8, type_v=Q8)),
    ("smollm2", KVConfig(ctx=8192, parallel=4, unified=True, ubatch=128, type_k="q4_0")),
    ("llama", KVConfig(ctx=2048, parallel=1)),
    ("llama", KVConfig(ctx=32768, parallel=4, unified=True)),
    ("llama", KVConfig(ctx=3000, parallel=4, unified=True, ubatch=128, type_k=Q8, type_v=Q8)),
    ("gemma3", KVConfig(ctx=4096, parallel=1)),
    ("gemma3", KVConfig(ctx=4096, parallel=2, ubatch=128)),
    ("gemma3", KVConfig(ctx=4096, parallel=4, unified=True)),
    ("gemma3", KVConfig(ctx=4096, parallel=2, swa_full=True)),
    ("gemma3", KVConfig(ctx=65536, parallel=2, type_k=Q8, type_v=Q8)),
    ("gemma3", KVConfig(ctx=2048, parallel=2, unified=True, type_k=Q8, type_v=Q8, swa_full=True)),
    ("gemma3", KVConfig(ctx=1024, parallel=3, flash_attn=False)),
    ("lfm2", KVConfig(ctx=2048, parallel=1)),
    ("lfm2", KVConfig(ctx=4096, parallel=4, unified=True, type_k=Q8, type_v=Q8)),
    ("lfm2", KVConfig(ctx=4096, parallel=2, ubatch=128)),
    ("lfm2swa", KVConfig(ctx=4096, parallel=2)),
    ("lfm2swa", KVConfig(ctx=4096, parallel=2, unified=True, swa_full=True)),
    ("mamba2", KVConfig(ctx=2048, parallel=1)),
    ("mamba2", KVConfig(ctx=2048, parallel=4)),
]


@pytest.fixture(scope="session")
def models(tmp_path_factory: pytest.TempPathFactory, demo_model: Path) -> dict[str, Path]:
    paths = write_all(tmp_path_factory.mktemp("tiny"), demo_model)
    return {**paths, "smollm2": demo_model}


def _id(case: tuple[str, KVConfig]) -> str:
    name, c = case
    mode = "uni" if c.unified else "split"
    extra = ("-swafull" if c.swa_full else "") + ("" if c.flash_attn else "-nofa")
    return f"{name}-c{c.ctx}-np{c.parallel}-{mode}-ub{c.ubatch}-{c.type_k}{extra}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_estimate_equals_allocation(
    case: tuple[str, KVConfig], models: dict[str, Path], llama_server_bin: Path, tmp_path: Path
) -> None:
    name, cfg = case
    facts = read_model_facts(models[name])
    estimate = estimate_kv(facts, cfg)
    log = launch_and_read_log(
        llama_server_bin, models[name], server_kv_args(cfg), tmp_path / "server.log"
    )
    alloc = parse_allocation(log)
    assert alloc is not None, "no size lines in the log:\n" + log[-3000:]
    # exact to the log's 2-decimal MiB rounding (and so well inside 1%)
    diff = abs(estimate.total_bytes - alloc.total_bytes)
    assert diff <= alloc.tolerance_bytes, (estimate.total_bytes, alloc)
    assert estimate.recurrent_bytes == pytest.approx(
        alloc.recurrent_bytes, abs=alloc.tolerance_bytes
    )
