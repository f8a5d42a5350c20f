"""Provides `fit_context`: the largest context whose KV cache fits the memory budget.

Budget = available memory − weights (the GGUF file size) − a compute reserve (`COMPUTE_RESERVE`:
compute buffers, runtime and OS headroom; llama.cpp's own `--fit` keeps a 1 GiB margin too). The
context is the total `-c`. The caps are per slot: each slot gets up to min(trained context,
262,144, maxCtx) tokens, so a split cache asks for that times the slot count, and only a short
memory lowers the per-slot context (never below `min_ctx` per slot without `fits=False` and a
`limited_by` that says so). A unified cache is one pool every slot may fill, so its total is the
per-slot cap itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from fusion_tui.fit.kv import PAD, KVConfig, KVEstimate, estimate_kv, fallback_estimate
from fusion_tui.fit.memory import Memory
from fusion_tui.gguf.facts import ModelFacts

COMPUTE_RESERVE = 1024 * 1024 * 1024
CTX_CAP = 262_144
DEFAULT_MIN_CTX = 2048
FALLBACK_TRAINED_CTX = 4096


@dataclass(frozen=True)
class FitResult:
    """Every number of the fit, for the UI and the launch record."""

    ctx: int
    fitted_ctx: int
    per_slot_ctx: int
    manual: bool
    fits: bool
    limited_by: str
    trained_ctx: int
    cap_ctx: int
    min_ctx: int
    parallel: int
    unified: bool
    available_bytes: int
    memory_source: str
    weights_bytes: int
    reserve_bytes: int
    kv_budget_bytes: int
    kv_bytes: int
    kv_bytes_per_token: int
    fallback: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _estimate(facts: ModelFacts | None, cfg: KVConfig, file_size: int) -> KVEstimate:
    if facts is None:
        return fallback_estimate(file_size, cfg, FALLBACK_TRAINED_CTX)
    return estimate_kv(facts, cfg)


def _step(cfg: KVConfig) -> int:
    """Totals are multiples of 256 per slot, so the server's padding changes nothing."""
    return PAD if cfg.unified else PAD * cfg.parallel


def fit_context(
    facts: ModelFacts | None,
    cfg: KVConfig,
    memory: Memory,
    *,
    file_size: int | None = None,
    min_ctx: int = DEFAULT_MIN_CTX,
    manual_ctx: int | None = None,
    reserve_bytes: int = COMPUTE_RESERVE,
    max_ctx: int | None = None,
    extra_kv: Callable[[int], int] | None = None,
) -> FitResult:
    """Fit the context for `cfg` (its `ctx` is ignored); `facts=None` uses the file-size scale.
    `min_ctx` and `max_ctx` are per slot; the result's `ctx`, `fitted_ctx` and `cap_ctx` are
    totals (`-c`). `extra_kv(ctx)`: bytes another cache of the same context takes (a speculative
    draft model's), fitted together with this one; its weights belong in `reserve_bytes`."""
    weights = file_size if file_size is not None else (facts.file_size if facts else 0)
    trained = (facts.trained_ctx if facts else 0) or FALLBACK_TRAINED_CTX
    step = _step(cfg)
    slots = 1 if cfg.unified else cfg.parallel
    ceiling = min(CTX_CAP, max_ctx) if max_ctx else CTX_CAP
    per_slot_cap = max(PAD, min(trained, ceiling) // PAD * PAD)
    cap = per_slot_cap * slots
    floor = min(max(step, -(-min_ctx // PAD) * PAD * slots), cap)
    budget = max(0, memory.available_bytes - weights - reserve_bytes)

    def cost(ctx: int) -> int:
        own = _estimate(facts, replace(cfg, ctx=ctx), weights).total_bytes
        return own + (extra_kv(ctx) if extra_kv else 0)

    if cost(cap) <= budget:
        fitted, limited = cap, ("trained context" if trained <= ceiling else "context cap")
    elif cost(floor) > budget:
        fitted, limited = floor, "minimum context (does not fit)"
    else:
        lo, hi = floor // step, cap // step  # cost(lo) fits, cost(hi) does not
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if cost(mid * step) <= budget:
                lo = mid
            else:
                hi = mid
        fitted, limited = lo * step, "memory"
    ctx = manual_ctx if manual_ctx else fitted
    est = _estimate(facts, replace(cfg, ctx=ctx), weights)
    extra = extra_kv(ctx) if extra_kv else 0
    return FitResult(
        ctx=ctx,
        fitted_ctx=fitted,
        per_slot_ctx=est.n_ctx_seq,
        manual=bool(manual_ctx),
        fits=est.total_bytes + extra <= budget,
        limited_by=limited,
        trained_ctx=trained,
        cap_ctx=cap,
        min_ctx=min_ctx,
        parallel=cfg.parallel,
        unified=cfg.unified,
        available_bytes=memory.available_bytes,
        memory_source=memory.source,
        weights_bytes=weights,
        reserve_bytes=reserve_bytes,
        kv_budget_bytes=budget,
        kv_bytes=est.total_bytes,
        kv_bytes_per_token=est.bytes_per_token,
        fallback=est.fallback,
    )
