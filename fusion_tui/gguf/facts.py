"""Provides `ModelFacts`: what a GGUF header says about a model's memory, layer by layer.

`ModelFacts.from_header` turns raw metadata into per-layer attention layout (KV heads, head dims,
sliding / full / recurrent), following the llama.cpp rules in `arch.py`, so `fit.kv` can size the
cache exactly as llama-server will allocate it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from fusion_tui.gguf import arch as A
from fusion_tui.gguf.reader import DEFAULT_BUDGET, GGUFError, GGUFHeader, MetaValue, read_header

FILE_TYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
    11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
    23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M",
    30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
}  # fmt: skip


@dataclass(frozen=True)
class ModelFacts:
    """Header facts; per-layer tuples have one entry per main layer (MTP layers excluded)."""

    architecture: str
    name: str | None
    file_size: int
    file_type: int | None
    quantization: str | None
    trained_ctx: int
    n_layer: int
    n_layer_all: int
    n_embd: int
    n_head: tuple[int, ...]
    n_head_kv: tuple[int, ...]
    head_dim_k: int
    head_dim_v: int
    head_dim_k_swa: int
    head_dim_v_swa: int
    n_swa: int
    swa_layers: tuple[bool, ...]
    recurrent_layers: tuple[bool, ...]
    kv_layers: tuple[bool, ...]
    is_recurrent: bool
    is_hybrid: bool
    mla: bool
    n_embd_r: int
    n_embd_s: int
    approximate: bool

    @property
    def has_swa(self) -> bool:
        return any(s and kv for s, kv in zip(self.swa_layers, self.kv_layers, strict=True))

    @property
    def has_recurrent(self) -> bool:
        return any(self.recurrent_layers)

    def head_dims(self, il: int) -> tuple[int, int]:
        """(key, value) head dims of layer `il`; MLA caches no V."""
        swa = self.swa_layers[il]
        k = self.head_dim_k_swa if swa else self.head_dim_k
        v = self.head_dim_v_swa if swa else self.head_dim_v
        return k, 0 if self.mla else v

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("n_head", "n_head_kv", "swa_layers", "recurrent_layers", "kv_layers"):
            d[key] = list(d[key])
        return d

    @classmethod
    def from_header(cls, header: GGUFHeader) -> ModelFacts:
        return _build(header)


def read_model_facts(path: str | os.PathLike[str], budget: int = DEFAULT_BUDGET) -> ModelFacts:
    """Read a GGUF header and derive its facts; `GGUFError` when unusable."""
    return ModelFacts.from_header(read_header(Path(path), budget))


def _u(kv: dict[str, MetaValue], key: str, default: int | None = None) -> int | None:
    v = kv.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
            return int(v[0])  # type: ignore[arg-type]
        raise GGUFError(f"metadata {key} should be an integer, got {type(v).__name__}")
    if v < 0:
        raise GGUFError(f"metadata {key} is negative ({v})")
    return v


def _per_layer(kv: dict[str, MetaValue], key: str, n: int, default: int) -> list[int]:
    v = kv.get(key)
    if v is None:
        return [default] * n
    if isinstance(v, list):
        ints = [x for x in v if isinstance(x, int) and not isinstance(x, bool)]
        if len(v) != n or len(ints) != n:
            raise GGUFError(f"metadata {key} has {len(v)} entries, expected {n} integers")
        return ints
    return [_u(kv, key) or 0] * n


def _bool_array(kv: dict[str, MetaValue], key: str) -> list[bool] | None:
    v = kv.get(key)
    if isinstance(v, list):
        return [bool(x) for x in v]
    return None


def _fit(flags: Sequence[bool], n: int) -> list[bool]:
    return [bool(flags[i]) if i < len(flags) else False for i in range(n)]


def _build(h: GGUFHeader) -> ModelFacts:
    kv = h.kv
    arch = kv.get("general.architecture")
    if not isinstance(arch, str) or not arch:
        raise GGUFError("metadata general.architecture is missing")
    p = arch + "."
    n_all = _u(kv, p + "block_count")
    if not n_all:
        raise GGUFError(f"metadata {p}block_count is missing")
    if n_all > 100_000:
        raise GGUFError(f"metadata {p}block_count is absurd ({n_all})")
    nextn = min(_u(kv, p + "nextn_predict_layers", 0) or 0, n_all)
    n = n_all - nextn
    n_embd = _u(kv, p + "embedding_length", 0) or 0
    n_head = _per_layer(kv, p + "attention.head_count", n_all, 0)
    n_head_kv = (
        _per_layer(kv, p + "attention.head_count_kv", n_all, 0)
        if p + "attention.head_count_kv" in kv
        else list(n_head)
    )
    h0 = n_head[0] if n_head else 0
    k_dim = _u(kv, p + "attention.key_length", n_embd // h0 if h0 else 0) or 0
    v_dim = _u(kv, p + "attention.value_length", n_embd // h0 if h0 else 0) or 0
    k_swa = _u(kv, p + "attention.key_length_swa", k_dim) or 0
    v_swa = _u(kv, p + "attention.value_length_swa", v_dim) or 0
    mla = p + "attention.key_length_mla" in kv

    recurrent = _recurrent_layers(arch, kv, p, n, n_head_kv)
    is_recurrent = arch in A.RECURRENT_ARCHS
    attends = [
        not is_recurrent and (not recurrent[i] or A.HYBRID_RECURRENT_RULE.get(arch) == "all_both")
        for i in range(n)
    ]
    n_swa, swa = _swa_layers(arch, kv, p, n, attends)

    owns = list(attends)
    if arch == "gemma3n":
        owns = [o and i < A.GEMMA3N_KV_LAYERS for i, o in enumerate(owns)]
    shared = _u(kv, p + "attention.shared_kv_layers", 0) or 0
    if shared:
        owns = [o and i < n_all - shared for i, o in enumerate(owns)]

    r, s = _state_sizes(kv, p, n_embd, n_head)
    ftype = _u(kv, "general.file_type")
    name = kv.get("general.name")
    return ModelFacts(
        architecture=arch,
        name=name if isinstance(name, str) else None,
        file_size=h.file_size,
        file_type=ftype,
        quantization=FILE_TYPE_NAMES.get(ftype) if ftype is not None else None,
        trained_ctx=_u(kv, p + "context_length", 0) or 0,
        n_layer=n,
        n_layer_all=n_all,
        n_embd=n_embd,
        n_head=tuple(n_head[:n]),
        n_head_kv=tuple(n_head_kv[:n]),
        head_dim_k=k_dim,
        head_dim_v=v_dim,
        head_dim_k_swa=k_swa,
        head_dim_v_swa=v_swa,
        n_swa=n_swa,
        swa_layers=tuple(swa),
        recurrent_layers=tuple(recurrent),
        kv_layers=tuple(owns),
        is_recurrent=is_recurrent,
        is_hybrid=arch in A.HYBRID_ARCHS,
        mla=mla,
        n_embd_r=r if any(recurrent) else 0,
        n_embd_s=s if any(recurrent) else 0,
        approximate=arch in A.APPROXIMATE_ARCHS,
    )


def _recurrent_layers(
    arch: str, kv: dict[str, MetaValue], p: str, n: int, n_head_kv: list[int]
) -> list[bool]:
    if arch in A.RECURRENT_ARCHS:
        return [True] * n
    rule = A.HYBRID_RECURRENT_RULE.get(arch)
    if rule == "kv_zero":
        return [n_head_kv[i] == 0 for i in range(n)]
    if rule == "kv_and_ff_zero":
        ff = _per_layer(kv, p + "feed_forward_length", len(n_head_kv), 0)
        return [n_head_kv[i] == 0 and ff[i] == 0 for i in range(n)]
    if rule == "interval":
        arr = _bool_array(kv, p + "attention.recurrent_layers")
        if arr is not None:
            return _fit(arr, n)
        interval = _u(kv, p + "full_attention_interval", A.DEFAULT_FULL_ATTENTION_INTERVAL)
        return A.interval_recurrent(n, interval or 0)
    if rule == "all_both":
        return [True] * n
    return [False] * n


def _swa_layers(
    arch: str, kv: dict[str, MetaValue], p: str, n: int, attends: list[bool]
) -> tuple[int, list[bool]]:
    rule = A.SWA_RULES.get(arch)
    window = _u(kv, p + "attention.sliding_window")
    if rule is None or not swa_on(rule, window, n):
        return 0, [False] * n
    n_swa = rule.window_forced or window or rule.window_default or 0
    if rule.all_attention_layers:
        return n_swa, list(attends)
    raw = kv.get(p + "attention.sliding_window_pattern")
    if isinstance(raw, list):
        layers = _fit([bool(x) for x in raw], n)
    elif isinstance(raw, int) and not isinstance(raw, bool):
        layers = A.pattern_layers(n, raw, rule.dense_first)
    elif rule.pattern is not None:
        layers = A.pattern_layers(n, rule.pattern, rule.dense_first)
    else:
        raise GGUFError(f"{arch} needs a per-layer {p}attention.sliding_window_pattern array")
    return n_swa, [s and a for s, a in zip(layers, attends, strict=True)]


def swa_on(rule: A.SwaRule, window: int | None, n: int) -> bool:
    return A.swa_enabled(rule, window, n)


def _state_sizes(
    kv: dict[str, MetaValue], p: str, n_embd: int, n_head: list[int]
) -> tuple[int, int]:
    """(n_embd_r, n_embd_s) per recurrent layer, as llama_hparams computes them."""
    wkv = _u(kv, p + "wkv.head_size", 0) or 0
    conv = _u(kv, p + "ssm.conv_kernel", 0) or 0
    if wkv:
        return (_u(kv, p + "token_shift_count", 2) or 0) * n_embd, n_embd * wkv
    l_cache = _u(kv, p + "shortconv.l_cache", 0) or 0
    if l_cache:
        return n_embd * (l_cache - 1), 0
    kda = _u(kv, p + "kda.head_dim", 0) or 0
    heads = n_head[0] if n_head else 0
    if kda:
        return 3 * (conv - 1 if conv > 0 else 3) * heads * kda, kda * kda * heads
    inner = _u(kv, p + "ssm.inner_size", 0) or 0
    state = _u(kv, p + "ssm.state_size", 0) or 0
    groups = _u(kv, p + "ssm.group_count", 0) or 0
    r = (conv - 1 if conv > 0 else 0) * (inner + 2 * groups * state)
    return r, state * inner
