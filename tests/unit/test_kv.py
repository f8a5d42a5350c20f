"""KV sizing rules (reference §6, §7, §10) on hand-built facts and the demo model."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fusion_tui.fit.kv import (
    KVConfig,
    KVConfigError,
    context_cells,
    estimate_kv,
    fallback_estimate,
    flash_attn_requirement,
    row_bytes,
)
from fusion_tui.gguf.facts import ModelFacts, read_model_facts

MIB = 1024 * 1024


def make(n_layer: int = 32, kv: int = 8, dim: int = 128, swa: tuple[bool, ...] = (),
         n_swa: int = 0, **kw: object) -> ModelFacts:  # fmt: skip
    swa_layers = swa or (False,) * n_layer
    base: dict[str, object] = dict(
        architecture="test", name=None, file_size=4 * 2**30, file_type=None, quantization=None,
        trained_ctx=131072, n_layer=n_layer, n_layer_all=n_layer, n_embd=4096,
        n_head=(32,) * n_layer, n_head_kv=(kv,) * n_layer, head_dim_k=dim, head_dim_v=dim,
        head_dim_k_swa=dim, head_dim_v_swa=dim, n_swa=n_swa, swa_layers=swa_layers,
        recurrent_layers=(False,) * n_layer, kv_layers=(True,) * n_layer, is_recurrent=False,
        is_hybrid=False, mla=False, n_embd_r=0, n_embd_s=0, approximate=False,
    )  # fmt: skip
    base.update(kw)
    return ModelFacts(**base)  # type: ignore[arg-type]


def test_worked_example_full_attention() -> None:
    e = estimate_kv(make(), KVConfig(ctx=8192))
    assert e.bytes_per_token == 128 * 1024
    assert e.total_bytes == 1024 * MIB and e.recurrent_bytes == 0


def test_worked_example_iswa() -> None:
    f = make(swa=(True, True, True, False) * 8, n_swa=1024)
    e = estimate_kv(f, KVConfig(ctx=8192))
    groups = {g.kind: g for g in e.groups}
    assert groups["full"].bytes == 256 * MIB
    assert groups["sliding"].cells == 1536 and groups["sliding"].bytes == 144 * MIB
    assert e.total_bytes == 400 * MIB
    full = estimate_kv(f, KVConfig(ctx=8192, swa_full=True))
    assert full.total_bytes == 1024 * MIB and full.bytes_per_token == 128 * 1024


def test_small_window_is_dominated_by_ubatch() -> None:
    f = make(n_layer=2, swa=(True, False), n_swa=64)
    e = estimate_kv(f, KVConfig(ctx=8192, parallel=2))
    assert e.swa_cells == 2 * 768  # pad256(64 + 512) per stream, 2 streams
    unified = estimate_kv(f, KVConfig(ctx=8192, parallel=4, unified=True))
    assert unified.swa_cells == 768  # pad256(64 * 4 + 512)
    small_ub = estimate_kv(f, KVConfig(ctx=8192, ubatch=128))
    assert small_ub.swa_cells == 256
    tiny_ctx = estimate_kv(f, KVConfig(ctx=512, parallel=2))
    assert tiny_ctx.swa_cells == 2 * 256  # capped by n_ctx_seq


@pytest.mark.parametrize(
    ("ctx", "np", "unified", "expected"),
    [
        (4096, 2, False, (4096, 2048, 2)),
        (1024, 3, False, (1536, 512, 3)),  # 1024/3 = 341 → pad 512 per slot
        (1000, 1, False, (1024, 1024, 1)),
        (8192, 4, True, (8192, 8192, 1)),
        (300, 4, False, (1024, 256, 4)),
    ],
)
def test_context_cells(ctx: int, np: int, unified: bool, expected: tuple[int, int, int]) -> None:
    assert context_cells(KVConfig(ctx=ctx, parallel=np, unified=unified), 8192)[:3] == expected


def test_ubatch_capped_by_ctx_and_batch() -> None:
    assert context_cells(KVConfig(ctx=300, ubatch=512), 8192)[3] == 300
    assert context_cells(KVConfig(ctx=8192, ubatch=4096), 8192)[3] == 2048
    assert context_cells(KVConfig(ctx=0), 4096)[0] == 4096  # 0 = trained context


def test_cache_types() -> None:
    assert row_bytes(64, "q8_0") == 68 and row_bytes(64, "q4_0") == 36
    assert row_bytes(64, "turbo3") == 28  # 3.5 bits per element
    assert row_bytes(64, "bf16") == 128 and row_bytes(64, "f32") == 256
    with pytest.raises(KVConfigError, match="divisible by 32"):
        row_bytes(48, "q5_1")
    with pytest.raises(KVConfigError, match="unsupported cache type"):
        row_bytes(64, "q2_k")


def test_v_padding_without_flash_attention() -> None:
    f = make(n_layer=2, swa=(True, False), n_swa=128, head_dim_k_swa=64, head_dim_v_swa=64)
    fa = estimate_kv(f, KVConfig(ctx=1024, flash_attn=True))
    nofa = estimate_kv(f, KVConfig(ctx=1024, flash_attn=False))
    # without FA, the sliding layer's V row is padded to the widest (8 x 128)
    assert nofa.total_bytes - fa.total_bytes == 8 * 64 * 2 * 768


def test_mla_has_no_v_and_recurrent_state() -> None:
    mla = make(n_layer=2, kv=1, dim=576, mla=True)
    assert estimate_kv(mla, KVConfig(ctx=1024)).bytes_per_token == 2 * 576 * 2
    rec = make(n_layer=3, kv=0, recurrent_layers=(True,) * 3, kv_layers=(False,) * 3,
               is_recurrent=True, n_embd_r=864, n_embd_s=4096)  # fmt: skip
    e = estimate_kv(rec, KVConfig(ctx=4096, parallel=4))
    assert e.kv_bytes == 0 and e.recurrent_bytes == 4 * (864 + 4096) * 4 * 3
    assert e.groups[-1].kind == "recurrent"


def test_flash_attention_requirement() -> None:
    assert flash_attn_requirement("q8_0", "auto") == (True, None)
    on, reason = flash_attn_requirement("q4_0", "off")
    assert not on and reason is not None and "flash attention" in reason
    assert flash_attn_requirement("f16", "off") == (False, None)
    with pytest.raises(KVConfigError):
        flash_attn_requirement("f16", "maybe")


def test_fallback_is_flagged() -> None:
    e = fallback_estimate(4 * 2**30, KVConfig(ctx=8192))
    assert e.fallback and e.total_bytes > 0 and e.n_ctx == 8192


def test_bad_configs() -> None:
    with pytest.raises(KVConfigError):
        context_cells(KVConfig(ctx=1024, parallel=0), 4096)
    with pytest.raises(KVConfigError):
        context_cells(KVConfig(ctx=0), 0)


def test_demo_model_matches_reference(demo_model: Path) -> None:
    f = read_model_facts(demo_model)
    cfg = KVConfig(ctx=4096, parallel=2)
    e = estimate_kv(f, cfg)
    assert e.bytes_per_token == 23040 and e.total_bytes == 90 * MIB  # reference §10: 90.00 MiB
    q8 = estimate_kv(f, replace(cfg, type_k="q8_0", type_v="q8_0"))
    assert round(q8.total_bytes / MIB, 2) == 47.81
