"""Context fit, swaFull verdict, prefix reuse, allocation parsing, memory and the launch plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.fit.allocation import (
    ROUNDING_PER_LINE_BYTES,
    matches,
    parse_allocated_kv_bytes,
    parse_allocation,
)
from fusion_tui.fit.context import fit_context
from fusion_tui.fit.kv import KVConfig, KVConfigError, estimate_kv
from fusion_tui.fit.launch_plan import plan_launch
from fusion_tui.fit.memory import Memory, available_memory, read_meminfo_available
from fusion_tui.fit.swa import decide_swa_full, prefix_reuse
from fusion_tui.gguf.reader import GGUFError
from tests.tinymodels import write_metadata
from tests.unit.test_kv import make

MIB = 1024 * 1024
GIB = 1024 * MIB


def mem_for(kv_bytes: int, weights: int = 4 * GIB, reserve: int = GIB) -> Memory:
    return Memory(kv_bytes + weights + reserve, "test")


def test_fit_is_largest_multiple_of_256_that_fits() -> None:
    f = make()  # 128 KiB per token, 4 GiB weights
    r = fit_context(f, KVConfig(ctx=0), mem_for(1000 * MIB))
    assert r.fitted_ctx == 7936 and r.ctx == 7936  # 8000 tokens fit; rounded down to 256
    assert r.limited_by == "memory" and r.fits and r.kv_bytes <= r.kv_budget_bytes
    assert estimate_kv(f, KVConfig(ctx=r.fitted_ctx + 256)).total_bytes > r.kv_budget_bytes
    assert r.kv_budget_bytes == 1000 * MIB and r.reserve_bytes == GIB
    assert r.to_dict()["weights_bytes"] == 4 * GIB


def test_fit_caps_at_trained_and_262144() -> None:
    r = fit_context(make(trained_ctx=4096), KVConfig(ctx=0), mem_for(100 * GIB))
    assert r.fitted_ctx == 4096 and r.limited_by == "trained context"
    big = fit_context(make(trained_ctx=1_048_576, kv=1), KVConfig(ctx=0), mem_for(500 * GIB))
    assert big.fitted_ctx == 262_144 and big.limited_by == "context cap"


def test_fit_floor_and_manual() -> None:
    r = fit_context(make(), KVConfig(ctx=0), mem_for(10 * MIB), min_ctx=4096)
    assert r.fitted_ctx == 4096 and not r.fits and "minimum" in r.limited_by
    m = fit_context(make(), KVConfig(ctx=0), mem_for(1000 * MIB), manual_ctx=2000)
    assert m.ctx == 2000 and m.manual and m.fitted_ctx == 7936 and m.limited_by == "memory"


def test_fit_per_slot() -> None:
    split = fit_context(make(trained_ctx=8192), KVConfig(ctx=0, parallel=4), mem_for(100 * GIB))
    assert split.ctx == 4 * 8192 and split.per_slot_ctx == 8192  # every slot its trained context
    assert split.cap_ctx == 4 * 8192 and split.limited_by == "trained context" and split.fits
    uni = fit_context(make(trained_ctx=8192), KVConfig(ctx=0, parallel=4, unified=True),
                      mem_for(100 * GIB))  # fmt: skip
    assert uni.ctx == 8192 and uni.per_slot_ctx == 8192  # one pool: no slot may outgrow trained
    odd = fit_context(make(), KVConfig(ctx=0, parallel=3), mem_for(1000 * MIB))
    assert odd.fitted_ctx % (256 * 3) == 0 and odd.fits


def test_fit_short_memory_lowers_the_per_slot_context() -> None:
    f = make(trained_ctx=8192)  # 128 KiB per token
    r = fit_context(f, KVConfig(ctx=0, parallel=4), mem_for(2000 * MIB))  # 16,000 tokens fit
    assert r.limited_by == "memory" and r.fits and r.ctx == 4 * 3840 and r.per_slot_ctx == 3840
    floor = fit_context(f, KVConfig(ctx=0, parallel=4), mem_for(100 * MIB), min_ctx=1024)
    assert floor.per_slot_ctx == 1024 and not floor.fits  # never below the minimum silently
    assert floor.limited_by == "minimum context (does not fit)"
    capped = fit_context(f, KVConfig(ctx=0, parallel=2), mem_for(100 * GIB), max_ctx=4096)
    assert capped.per_slot_ctx == 4096 and capped.ctx == 8192 and capped.limited_by == "context cap"


def test_fit_with_fallback() -> None:
    r = fit_context(None, KVConfig(ctx=0), Memory(64 * GIB, "test"), file_size=4 * GIB)
    assert r.fallback and r.fitted_ctx == 4096


def test_swa_verdicts() -> None:
    iswa = make(swa=(True, True, True, False) * 8, n_swa=1024)
    assert decide_swa_full(iswa, "on").swa_full
    assert not decide_swa_full(iswa, "off").swa_full
    yes = decide_swa_full(iswa, "auto", 40 * MIB, 100 * MIB)
    assert yes.swa_full and "40%" in yes.reason
    no = decide_swa_full(iswa, "auto", 60 * MIB, 100 * MIB)
    assert not no.swa_full and "60%" in no.reason
    assert not decide_swa_full(iswa, "auto").swa_full
    plain = make()
    assert not decide_swa_full(plain, "on").swa_full
    hybrid = make(n_layer=2, swa=(True, False), n_swa=64, is_hybrid=True,
                  recurrent_layers=(False, True))  # fmt: skip
    v = decide_swa_full(hybrid, "on")
    assert not v.swa_full and "hybrid" in v.reason
    with pytest.raises(ValueError):
        decide_swa_full(iswa, "sometimes")  # type: ignore[arg-type]


def test_prefix_reuse() -> None:
    iswa = make(swa=(True, False) * 16, n_swa=1024)
    assert prefix_reuse(make(), False) == "full"
    assert prefix_reuse(iswa, True) == "full" and prefix_reuse(iswa, False) == "none"
    rec = make(n_layer=1, is_recurrent=True, recurrent_layers=(True,), kv_layers=(False,))
    assert prefix_reuse(rec, False) == "none"


LOG = """
llama_model_loader: loaded meta data with 30 key-value pairs
llama_kv_cache:        CPU KV buffer size =    99.00 MiB
llama_kv_cache: size =   99.00 MiB (  1024 cells,  30 layers,  1/1 seqs), K (f16): 49.50 MiB
load_model: loading model '/m.gguf'
llama_model_loader: loaded meta data with 30 key-value pairs
llama_kv_cache_iswa: creating non-SWA KV cache, size = 4096 cells
llama_kv_cache:        CPU KV buffer size =     4.01 MiB
llama_kv_cache: size =    4.00 MiB (  4096 cells,   2 layers,  2/2 seqs), K (f16):    2.00 MiB
llama_kv_cache_iswa: creating     SWA KV cache, size = 1536 cells
llama_kv_cache: size =    3.00 MiB (  1536 cells,   4 layers,  2/2 seqs), K (f16):    1.50 MiB
llama_memory_recurrent:        CPU RS buffer size =     0.02 MiB
llama_memory_recurrent: size =    0.01 MiB (     2 cells,   3 layers,  2 seqs  0 rs_seq)
"""


def test_allocation_parses_last_load() -> None:
    a = parse_allocation(LOG)
    assert a is not None and a.lines == 3
    assert a.kv_bytes == 7 * MIB and a.recurrent_bytes == round(0.01 * MIB)
    assert parse_allocated_kv_bytes(LOG) == a.total_bytes
    assert a.tolerance_bytes == 3 * ROUNDING_PER_LINE_BYTES
    assert matches(7 * MIB + 10_000, a) and not matches(8 * MIB, a)
    assert parse_allocated_kv_bytes("no size lines here") is None


def test_memory_sources(tmp_path: Path) -> None:
    assert read_meminfo_available("MemTotal: 10 kB\nMemAvailable:    2048 kB\n") == 2 * MIB
    assert read_meminfo_available("nothing") is None
    fake = tmp_path / "meminfo"
    fake.write_text("MemAvailable: 1024 kB\n")
    assert available_memory(meminfo=fake) == Memory(MIB, "ram")
    assert available_memory(gpu_bytes=8 * GIB, meminfo=fake) == Memory(8 * GIB, "gpu-config")
    assert available_memory(override_bytes=5, meminfo=fake).source == "config"
    assert available_memory(meminfo=tmp_path / "none").available_bytes == 0


def _gemma(tmp_path: Path) -> Path:
    return write_metadata(tmp_path / "g.gguf", "gemma3", {
        ".block_count": 6, ".context_length": 32768, ".embedding_length": 256,
        ".attention.head_count": 8, ".attention.head_count_kv": 2,
        ".attention.sliding_window": 512,
    })  # fmt: skip


def test_plan_launch_auto_swa_full(tmp_path: Path) -> None:
    path = _gemma(tmp_path)
    roomy = plan_launch(path, parallel=2, memory=Memory(64 * GIB, "test"))
    assert roomy.swa_full and roomy.prefix_reuse == "full"
    assert roomy.ctx == 2 * 32768 and roomy.per_slot_ctx == 32768
    assert "--swa-full" in roomy.server_args()
    # per token, 6 layers x 2 heads x 32 dims x 2 (K+V) x 2 B = 1536 B
    assert roomy.estimate.bytes_per_token == 1536
    size = path.stat().st_size
    tight = plan_launch(path, memory=Memory(size + GIB + 20 * MIB, "test"), min_ctx=256)
    assert not tight.swa_full and tight.prefix_reuse == "none"
    assert "auto" in tight.swa_full_reason
    rec = tight.record()
    assert rec["fit"]["kv_budget_bytes"] == 20 * MIB and rec["kv_estimate_bytes"] > 0
    off = plan_launch(path, swa_full_mode="off", memory=Memory(64 * GIB, "test"))
    assert not off.swa_full and off.prefix_reuse == "none"


def test_plan_launch_refuses_quantised_v_without_fa(tmp_path: Path) -> None:
    with pytest.raises(KVConfigError, match="flash attention"):
        plan_launch(_gemma(tmp_path), type_v="q8_0", flash_attn="off")
    p = plan_launch(_gemma(tmp_path), type_k="q8_0", type_v="q8_0", memory=Memory(GIB * 8, "t"))
    assert p.flash_attn and "-fa" in p.server_args()


def test_plan_launch_fallback_on_unreadable_header(tmp_path: Path) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\xff" * 100)
    plan = plan_launch(bad, memory=Memory(64 * GIB, "t"))
    assert plan.fallback and plan.estimate.fallback and plan.header_error
    with pytest.raises(GGUFError):
        plan_launch(bad, allow_fallback=False)


def test_plan_launch_overrides(tmp_path: Path) -> None:
    path = _gemma(tmp_path)
    p = plan_launch(path, max_ctx=4096, memory_bytes=64 * GIB, swa_full_mode="off")
    assert p.ctx == 4096 and p.fit.memory_source == "config" and p.fit.limited_by == "context cap"
    assert p.kv_bytes_total == p.estimate.total_bytes and p.to_dict()["ctx"] == 4096
    with pytest.raises(KVConfigError, match="swaFull"):
        plan_launch(path, swa_full_mode="maybe")


DRAFT_LOG = """\
load_model: loading model '/m/coder-1.5b.gguf'
llama_model_loader: loaded meta data with 26 key-value pairs and 339 tensors
llama_kv_cache: size =  224.00 MiB (  8192 cells,  28 layers,  1/1 seqs), K (f16):  112.00 MiB
common_speculative_init_result: loading draft model '/m/coder-0.5b.gguf'
llama_model_loader: loaded meta data with 26 key-value pairs and 291 tensors
llama_kv_cache: size =   96.00 MiB (  8192 cells,  24 layers,  1/1 seqs), K (f16):   48.00 MiB
"""


def test_a_draft_models_cache_counts_with_the_main_ones() -> None:
    a = parse_allocation(DRAFT_LOG)
    assert a is not None and a.kv_bytes == 320 * MIB and a.lines == 2
    relaunch = (
        DRAFT_LOG
        + "load_model: loading model '/m/other.gguf'\n"
        + ("llama_kv_cache: size =   10.00 MiB (  512 cells)\n")
    )
    assert parse_allocated_kv_bytes(relaunch) == 10 * MIB  # a later launch is a new block
