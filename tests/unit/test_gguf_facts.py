"""ModelFacts: per-layer layout from headers written with the `gguf` package."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fusion_tui.gguf.facts import ModelFacts, read_model_facts
from fusion_tui.gguf.reader import GGUFError
from tests.tinymodels import write_header, write_metadata


def facts(tmp_path: Path, arch: str, **extra: Any) -> ModelFacts:
    return read_model_facts(write_header(tmp_path / f"{arch}.gguf", arch, **extra))


def test_plain_llama(tmp_path: Path) -> None:
    f = facts(tmp_path, "llama")
    assert (f.architecture, f.n_layer, f.trained_ctx, f.n_embd) == ("llama", 6, 32768, 256)
    assert f.n_head_kv == (2,) * 6 and f.n_head == (8,) * 6
    assert (f.head_dim_k, f.head_dim_v) == (32, 32)  # n_embd / head_count by default
    assert not f.has_swa and not f.has_recurrent and all(f.kv_layers)
    assert f.quantization == "Q4_K_M" and f.file_size > 0


def test_head_count_kv_defaults_to_head_count(tmp_path: Path) -> None:
    f = facts(tmp_path, "llama", attention__head_count_kv=None)
    assert f.n_head_kv == (8,) * 6


def test_per_layer_kv_heads_and_explicit_dims(tmp_path: Path) -> None:
    f = facts(tmp_path, "llama", attention__head_count_kv=[8, 4, 2, 1, 1, 1],
              attention__key_length=128, attention__value_length=64)  # fmt: skip
    assert f.n_head_kv == (8, 4, 2, 1, 1, 1)
    assert f.head_dims(0) == (128, 64)


def test_kv_head_array_of_wrong_length_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="expected 6"):
        facts(tmp_path, "llama", attention__head_count_kv=[2, 2])


def test_gemma2_default_pattern_and_window(tmp_path: Path) -> None:
    f = facts(tmp_path, "gemma2")
    assert f.swa_layers == (True, False) * 3 and f.n_swa == 4096


def test_gemma3_scalar_pattern(tmp_path: Path) -> None:
    f = facts(tmp_path, "gemma3", attention__sliding_window=512)
    # default period 6: layer 5 is full
    assert f.swa_layers == (True,) * 5 + (False,) and f.n_swa == 512
    g = facts(tmp_path, "gemma3", attention__sliding_window=512,
              attention__sliding_window_pattern=3)  # fmt: skip
    assert g.swa_layers == (True, True, False, True, True, False)


def test_gemma3_without_window_has_no_swa(tmp_path: Path) -> None:
    f = facts(tmp_path, "gemma3")
    assert not f.has_swa and f.n_swa == 0


def test_pattern_bool_array_and_swa_dims(tmp_path: Path) -> None:
    pattern = [True, True, False, True, True, False]
    f = facts(tmp_path, "gemma4", attention__sliding_window=1024,
              attention__sliding_window_pattern=pattern, attention__key_length=512,
              attention__value_length=512, attention__key_length_swa=256,
              attention__value_length_swa=256, attention__shared_kv_layers=2)  # fmt: skip
    assert f.swa_layers == tuple(pattern)
    assert f.head_dims(0) == (256, 256) and f.head_dims(2) == (512, 512)
    assert f.kv_layers == (True, True, True, True, False, False)


def test_gemma4_without_pattern_array_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="sliding_window_pattern"):
        facts(tmp_path, "gemma4", attention__sliding_window=1024)


def test_dense_first_and_forced_window(tmp_path: Path) -> None:
    f = facts(tmp_path, "cohere2moe", attention__sliding_window=4096, block_count=8)
    assert f.swa_layers == (False, True, True, True) * 2
    g = facts(tmp_path, "llama4", attention__sliding_window=100, block_count=8)
    assert g.n_swa == 8192 and g.swa_layers == (True, True, True, False) * 2
    h = facts(tmp_path, "llama4", attention__sliding_window=0, block_count=8)
    assert not h.has_swa


def test_phi3_ignores_window(tmp_path: Path) -> None:
    assert not facts(tmp_path, "phi3", attention__sliding_window=2048).has_swa


def test_lfm2_hybrid(tmp_path: Path) -> None:
    f = facts(tmp_path, "lfm2", attention__head_count_kv=[0, 0, 2, 0, 2, 0],
              shortconv__l_cache=3)  # fmt: skip
    assert f.is_hybrid and not f.is_recurrent
    assert f.recurrent_layers == (True, True, False, True, False, True)
    assert f.kv_layers == (False, False, True, False, True, False)
    assert (f.n_embd_r, f.n_embd_s) == (256 * 2, 0)
    g = facts(tmp_path, "lfm2", attention__head_count_kv=[0, 0, 2, 0, 2, 0],
              shortconv__l_cache=3, attention__sliding_window=128)  # fmt: skip
    assert g.swa_layers == g.kv_layers and g.n_swa == 128


def test_mamba2_recurrent_state(tmp_path: Path) -> None:
    f = facts(tmp_path, "mamba2", attention__head_count=0, attention__head_count_kv=0,
              ssm__conv_kernel=4, ssm__inner_size=512, ssm__state_size=16,
              ssm__group_count=2, ssm__time_step_rank=8)  # fmt: skip
    assert f.is_recurrent and all(f.recurrent_layers) and not any(f.kv_layers)
    assert f.n_embd_r == 3 * (512 + 2 * 2 * 16) and f.n_embd_s == 16 * 512


def test_rwkv_state(tmp_path: Path) -> None:
    f = facts(tmp_path, "rwkv7", wkv__head_size=64)
    assert (f.n_embd_r, f.n_embd_s) == (2 * 256, 256 * 64)


def test_qwen35_interval_and_array(tmp_path: Path) -> None:
    f = facts(tmp_path, "qwen35", block_count=8, full_attention_interval=4)
    assert f.recurrent_layers == (True, True, True, False) * 2
    assert f.kv_layers == (False, False, False, True) * 2
    g = facts(tmp_path, "qwen35", attention__recurrent_layers=[False, True] * 3)
    assert g.recurrent_layers == (False, True) * 3


def test_nextn_layers_are_excluded(tmp_path: Path) -> None:
    f = facts(tmp_path, "glm4moe", block_count=7, nextn_predict_layers=1,
              attention__head_count_kv=[2] * 7)  # fmt: skip
    assert f.n_layer == 6 and f.n_layer_all == 7 and len(f.kv_layers) == 6


def test_mla_caches_no_v(tmp_path: Path) -> None:
    f = facts(tmp_path, "deepseek2", attention__head_count_kv=1, attention__key_length=576,
              attention__value_length=512, attention__key_length_mla=192,
              attention__kv_lora_rank=512)  # fmt: skip
    assert f.mla and f.head_dims(0) == (576, 0)


def test_missing_architecture_keys(tmp_path: Path) -> None:
    with pytest.raises(GGUFError, match="block_count"):
        read_model_facts(write_metadata(tmp_path / "x.gguf", "llama", {}))


def test_demo_model_facts(demo_model: Path) -> None:
    f = read_model_facts(demo_model)
    assert (f.architecture, f.n_layer, f.n_head_kv[0], f.head_dim_k) == ("llama", 30, 3, 64)
    assert f.quantization == "Q4_1" and f.trained_ctx == 8192
    assert f.to_dict()["kv_layers"] == [True] * 30
