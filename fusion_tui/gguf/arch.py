"""Per-architecture rules mirroring llama.cpp: which layers slide, which are recurrent.

Facts copied from the reference (../shared/reference/llama-server.md §5, §6), which reads them from
`src/llama-arch.cpp`, `src/llama-hparams.cpp` and `src/models/*.cpp` of llama.cpp.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RECURRENT_ARCHS = frozenset({"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"})
HYBRID_ARCHS = frozenset(
    {
        "jamba", "falcon-h1", "plamo2", "granitehybrid", "lfm2", "lfm2moe", "nemotron_h",
        "nemotron_h_moe", "qwen3next", "kimi-linear", "bailingmoe3", "kimi-k3", "glm5-next",
        "qwen35", "qwen35moe", "qwen4exp", "deepseek4", "minimax-01",
    }
)  # fmt: skip

# How a hybrid marks its recurrent layers.
RecurrentRule = Literal["kv_zero", "kv_and_ff_zero", "interval", "all_both"]
_KV_ZERO = (
    "jamba",
    "plamo2",
    "granitehybrid",
    "lfm2",
    "lfm2moe",
    "kimi-linear",
    "kimi-k3",
    "glm5-next",
    "bailingmoe3",
)
HYBRID_RECURRENT_RULE: dict[str, RecurrentRule] = {
    **{a: "kv_zero" for a in _KV_ZERO},
    "nemotron_h": "kv_and_ff_zero",
    "nemotron_h_moe": "kv_and_ff_zero",
    **{a: "interval" for a in ("qwen3next", "qwen35", "qwen35moe", "qwen4exp", "minimax-01")},
    "falcon-h1": "all_both",
}
DEFAULT_FULL_ATTENTION_INTERVAL = 4

# Architectures whose cache this estimator does not model exactly (compressed/indexer caches).
APPROXIMATE_ARCHS = frozenset({"deepseek4", "deepseek32", "glm-dsa", "minimax-m3", "glm5-next"})

# When SWA is on: always; when the window key is > 0; unless the window key is present and 0;
# never; or the exaone4 special (only its 64-layer variant).
SwaEnable = Literal["always", "window", "not_zero", "never", "exaone4"]


@dataclass(frozen=True)
class SwaRule:
    """One row of the per-architecture SWA table."""

    enable: SwaEnable
    pattern: int | None = None  # default period when the file has no pattern key; None = array
    dense_first: bool = False
    window_default: int | None = None  # used when the window key is absent
    window_forced: int | None = None  # overrides the file's value
    all_attention_layers: bool = False  # lfm2: every attention layer slides


SWA_RULES: dict[str, SwaRule] = {
    "gemma2": SwaRule("always", 2, window_default=4096),
    "gemma3": SwaRule("window", 6),
    "gemma3n": SwaRule("always", 5),
    "gemma4": SwaRule("always", None),
    "gemma-embedding": SwaRule("always", 6),
    "cohere2": SwaRule("always", 4),
    "cohere2moe": SwaRule("always", 4, dense_first=True),
    "llama4": SwaRule("not_zero", 4, window_forced=8192),
    "gpt-oss": SwaRule("always", 2),
    "phi3": SwaRule("never"),
    "exaone4": SwaRule("exaone4", 4, window_default=4096),
    "exaone-moe": SwaRule("always", 4, window_default=128),
    "olmo2": SwaRule("window", 4),
    "afmoe": SwaRule("window", 4),
    "mellum": SwaRule("window", 4),
    "muse-glimmer": SwaRule("window", 4),
    "smallthinker": SwaRule("window", 4, dense_first=True, window_forced=4096),
    "laguna": SwaRule("window", 4, dense_first=True),
    "plamo3": SwaRule("window", 8),
    "modern-bert": SwaRule("not_zero", 3, dense_first=True),
    "granite_swa": SwaRule("always", None),
    "gemma4-assistant": SwaRule("always", None),
    "step35": SwaRule("always", None),
    "mimo2": SwaRule("always", None),
    "maple": SwaRule("always", None),
    "spark2-5": SwaRule("always", None),
    "dots3note": SwaRule("always", None),
    "lfm2": SwaRule("window", all_attention_layers=True),
    "lfm2moe": SwaRule("window", all_attention_layers=True),
}
# gemma3n: only the first 20 layers own a KV cache (hard-coded in llama.cpp).
GEMMA3N_KV_LAYERS = 20


def pattern_layers(n_layer: int, period: int, dense_first: bool) -> list[bool]:
    """llama.cpp's scalar pattern rule: True = sliding layer."""
    if period == 0:
        return [True] * n_layer
    if dense_first:
        return [il % period != 0 for il in range(n_layer)]
    return [il % period < period - 1 for il in range(n_layer)]


def swa_enabled(rule: SwaRule, window_key: int | None, n_layer: int) -> bool:
    """Whether this architecture turns sliding attention on for this file."""
    if rule.enable == "always":
        return True
    if rule.enable == "never":
        return False
    if rule.enable == "window":
        return bool(window_key)
    if rule.enable == "not_zero":
        return window_key is None or window_key > 0
    return n_layer == 64  # exaone4: only the 32B variant


def interval_recurrent(n_layer: int, interval: int) -> list[bool]:
    """Hybrids without a recurrent_layers array: every `interval`-th layer attends."""
    interval = interval or DEFAULT_FULL_ATTENTION_INTERVAL
    return [(il + 1) % interval != 0 for il in range(n_layer)]
