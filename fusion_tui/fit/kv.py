"""Provides `estimate_kv`: the KV cache and recurrent state llama-server will allocate.

Rules from ../shared/reference/llama-server.md §6, §7 and §10 (llama.cpp `llama-context.cpp`,
`llama-kv-cache.cpp`, `llama-kv-cache-iswa.cpp`, `llama-memory-recurrent.cpp`): the total equals
the `llama_kv_cache: size = …` plus `llama_memory_recurrent: size = …` log lines.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from fusion_tui.gguf.facts import ModelFacts

PAD = 256
DEFAULT_UBATCH = 512
DEFAULT_BATCH = 2048
# (elements per block, bytes per block); turbo3 is the TurboQuant fork's 3.5-bit type.
CACHE_TYPES: dict[str, tuple[int, int]] = {
    "f32": (1, 4),
    "f16": (1, 2),
    "bf16": (1, 2),
    "q8_0": (32, 34),
    "q5_1": (32, 24),
    "q5_0": (32, 22),
    "q4_1": (32, 20),
    "q4_0": (32, 18),
    "iq4_nl": (32, 18),
    "turbo3": (32, 14),
}
UNQUANTISED = frozenset({"f32", "f16", "bf16"})
# When the header cannot be read: KV bytes per token per GiB of file, a rough f16 scale.
FALLBACK_BYTES_PER_TOKEN_PER_GIB = 48 * 1024


class KVConfigError(ValueError):
    """A launch configuration the server would refuse; `str()` is a one-line reason."""


def pad(n: int, to: int = PAD) -> int:
    return -(-n // to) * to


def row_bytes(n_elements: int, cache_type: str) -> int:
    """Bytes of one cache row of `n_elements` of `cache_type` (ggml_row_size)."""
    blck, size = _type(cache_type)
    if n_elements % blck:
        raise KVConfigError(
            f"cache type {cache_type} needs rows divisible by {blck}; this model has {n_elements}"
        )
    return n_elements // blck * size


def _type(name: str) -> tuple[int, int]:
    t = CACHE_TYPES.get(name.lower())
    if t is None:
        raise KVConfigError(f"unsupported cache type {name!r} (one of: {', '.join(CACHE_TYPES)})")
    return t


@dataclass(frozen=True)
class KVConfig:
    """The launch flags that decide the cache size. `ctx` is the total `-c` (0 = trained)."""

    ctx: int
    parallel: int = 1
    unified: bool = False
    ubatch: int = DEFAULT_UBATCH
    type_k: str = "f16"
    type_v: str = "f16"
    swa_full: bool = False
    flash_attn: bool = True  # `-fa auto` resolves to on for the CPU backend
    batch: int = DEFAULT_BATCH


@dataclass(frozen=True)
class GroupBytes:
    """One layer group's share: full attention, sliding attention, or recurrent state."""

    kind: str
    layers: int
    cells: int
    bytes: int


@dataclass(frozen=True)
class KVEstimate:
    """The estimate and the intermediate numbers the UI and launch record show."""

    total_bytes: int
    kv_bytes: int
    recurrent_bytes: int
    bytes_per_token: int
    n_ctx: int
    n_ctx_seq: int
    n_stream: int
    n_ubatch: int
    swa_cells: int
    groups: list[GroupBytes] = field(default_factory=list)
    fallback: bool = False
    approximate: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def flash_attn_requirement(type_v: str, flash_attn: str) -> tuple[bool, str | None]:
    """Whether a launch with V cache `type_v` and `-fa flash_attn` (on|off|auto) can run.

    Returns (flash attention on, refusal reason or None). A quantised V cache needs flash
    attention: `auto` turns it on, `off` makes llama-server fail at startup, so we refuse.
    """
    _type(type_v)
    fa = flash_attn.lower()
    if fa not in ("on", "off", "auto"):
        raise KVConfigError(f"flash attention must be on, off or auto, not {flash_attn!r}")
    if type_v.lower() in UNQUANTISED:
        return fa != "off", None
    if fa == "off":
        return False, (
            f"a {type_v} V cache needs flash attention; llama-server refuses to start with -fa off"
        )
    return True, None


def context_cells(cfg: KVConfig, trained_ctx: int) -> tuple[int, int, int, int]:
    """(n_ctx, n_ctx_seq, n_stream, n_ubatch) as llama_context computes them."""
    if cfg.parallel < 1:
        raise KVConfigError("parallel slots must be at least 1")
    if cfg.ctx < 0:
        raise KVConfigError("context size cannot be negative")
    requested = cfg.ctx or trained_ctx
    if requested <= 0:
        raise KVConfigError("no context size given and the model states no trained context")
    n_batch = min(requested, cfg.batch)
    n_ubatch = min(n_batch, cfg.ubatch or n_batch)
    n_ctx = pad(requested)
    if cfg.unified:
        return n_ctx, n_ctx, 1, n_ubatch
    n_seq = pad(n_ctx // cfg.parallel)
    if n_seq == 0:
        raise KVConfigError(f"context {cfg.ctx} is too small for {cfg.parallel} slots")
    return n_seq * cfg.parallel, n_seq, cfg.parallel, n_ubatch


def estimate_kv(facts: ModelFacts, cfg: KVConfig) -> KVEstimate:
    """Bytes llama-server allocates for KV cache plus recurrent state for this launch."""
    n_ctx, n_seq, n_stream, n_ubatch = context_cells(cfg, facts.trained_ctx)
    swa_full = cfg.swa_full and facts.has_swa
    swa_seq = pad(min(n_seq, facts.n_swa * (cfg.parallel if cfg.unified else 1) + n_ubatch))
    if swa_full:
        swa_seq = n_seq
    v_max = max(
        (facts.n_head_kv[i] * facts.head_dims(i)[1] for i in range(facts.n_layer)), default=0
    )
    per_cell = {"full": 0, "sliding": 0}
    counts = {"full": 0, "sliding": 0}
    for il in range(facts.n_layer):
        if not facts.kv_layers[il]:
            continue
        k_dim, v_dim = facts.head_dims(il)
        heads = facts.n_head_kv[il]
        v_elems = 0 if facts.mla else (v_max if not cfg.flash_attn else heads * v_dim)
        cell = row_bytes(heads * k_dim, cfg.type_k) + (
            row_bytes(v_elems, cfg.type_v) if v_elems else 0
        )
        kind = "sliding" if facts.swa_layers[il] else "full"
        per_cell[kind] += cell
        counts[kind] += 1
    groups = []
    full_bytes = per_cell["full"] * n_seq * n_stream
    swa_bytes = per_cell["sliding"] * swa_seq * n_stream
    if counts["full"]:
        groups.append(GroupBytes("full", counts["full"], n_seq * n_stream, full_bytes))
    if counts["sliding"]:
        groups.append(GroupBytes("sliding", counts["sliding"], swa_seq * n_stream, swa_bytes))
    n_recr = sum(facts.recurrent_layers)
    rs_cells = max(1, cfg.parallel)
    recurrent = 4 * (facts.n_embd_r + facts.n_embd_s) * rs_cells * n_recr
    if n_recr:
        groups.append(GroupBytes("recurrent", n_recr, rs_cells, recurrent))
    # Per token: what one more token of context costs (sliding layers only while under the window).
    per_token = per_cell["full"] + (per_cell["sliding"] if swa_full else 0)
    return KVEstimate(
        total_bytes=full_bytes + swa_bytes + recurrent,
        kv_bytes=full_bytes + swa_bytes,
        recurrent_bytes=recurrent,
        bytes_per_token=per_token,
        n_ctx=n_ctx,
        n_ctx_seq=n_seq,
        n_stream=n_stream,
        n_ubatch=n_ubatch,
        swa_cells=swa_seq * n_stream if counts["sliding"] else 0,
        groups=groups,
        approximate=facts.approximate,
    )


def fallback_estimate(file_size: int, cfg: KVConfig, trained_ctx: int = 4096) -> KVEstimate:
    """File-size scale for when the header cannot be read; flagged `fallback=True`."""
    n_ctx, n_seq, n_stream, n_ubatch = context_cells(cfg, trained_ctx)
    per_token = max(1, int(file_size / 2**30 * FALLBACK_BYTES_PER_TOKEN_PER_GIB))
    kbpe = _type(cfg.type_k)[1] / _type(cfg.type_k)[0]
    vbpe = _type(cfg.type_v)[1] / _type(cfg.type_v)[0]
    per_token = int(per_token * (kbpe + vbpe) / 4)
    total = per_token * n_ctx
    return KVEstimate(
        total_bytes=total,
        kv_bytes=total,
        recurrent_bytes=0,
        bytes_per_token=per_token,
        n_ctx=n_ctx,
        n_ctx_seq=n_seq,
        n_stream=n_stream,
        n_ubatch=n_ubatch,
        swa_cells=0,
        groups=[GroupBytes("full", 0, n_ctx, total)],
        fallback=True,
    )
