"""Provides `plan_launch`: the values a managed llama-server launch should use, with reasons.

Ties the header facts, the KV estimate, the context fit and the swaFull verdict together so the
daemon, the wizard and `fusion-tui inspect` agree on one plan and one launch record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fusion_tui.fit.context import COMPUTE_RESERVE, DEFAULT_MIN_CTX, FitResult, fit_context
from fusion_tui.fit.kv import (
    DEFAULT_UBATCH,
    KVConfig,
    KVConfigError,
    KVEstimate,
    estimate_kv,
    fallback_estimate,
    flash_attn_requirement,
)
from fusion_tui.fit.memory import Memory, available_memory
from fusion_tui.fit.swa import PrefixReuse, SwaMode, decide_swa_full, prefix_reuse
from fusion_tui.gguf.facts import ModelFacts, read_model_facts
from fusion_tui.gguf.reader import GGUFError

_MODES: tuple[SwaMode, ...] = ("auto", "on", "off")


@dataclass(frozen=True)
class LaunchPlan:
    """What to pass to llama-server and why."""

    model_path: Path
    ctx: int
    per_slot_ctx: int
    parallel: int
    kv_unified: bool
    ubatch: int
    type_k: str
    type_v: str
    flash_attn: bool
    swa_full: bool
    swa_full_reason: str
    prefix_reuse: PrefixReuse
    estimate: KVEstimate
    fit: FitResult
    facts: ModelFacts | None
    header_error: str | None = None
    draft_path: Path | None = None
    """A speculative draft model: its cache has the main one's context and slots."""
    draft_estimate: KVEstimate | None = None

    @property
    def fallback(self) -> bool:
        return self.facts is None

    @property
    def kv_bytes_total(self) -> int:
        """What the server will allocate: KV cache plus recurrent state (the draft's too)."""
        draft = self.draft_estimate.total_bytes if self.draft_estimate else 0
        return self.estimate.total_bytes + draft

    def to_dict(self) -> dict[str, Any]:
        """Same as `record()`: the launch-record entry."""
        return self.record()

    def server_args(self) -> list[str]:
        """The KV-relevant llama-server flags for this plan."""
        args = ["-c", str(self.ctx), "-np", str(self.parallel), "-ub", str(self.ubatch)]
        args += [
            "-ctk",
            self.type_k,
            "-ctv",
            self.type_v,
            "-fa",
            "on" if self.flash_attn else "off",
        ]
        args.append("--kv-unified" if self.kv_unified else "--no-kv-unified")
        if self.swa_full:
            args.append("--swa-full")
        return args

    def record(self) -> dict[str, Any]:
        """The launch-record entry: fit numbers, flag decision, reuse verdict, estimate."""
        return {
            "model_path": str(self.model_path),
            "ctx": self.ctx,
            "per_slot_ctx": self.per_slot_ctx,
            "parallel": self.parallel,
            "kv_unified": self.kv_unified,
            "ubatch": self.ubatch,
            "cache_type_k": self.type_k,
            "cache_type_v": self.type_v,
            "flash_attn": self.flash_attn,
            "swa_full": self.swa_full,
            "swa_full_reason": self.swa_full_reason,
            "prefix_reuse": self.prefix_reuse,
            "kv_estimate_bytes": self.kv_bytes_total,
            "kv_estimate": self.estimate.to_dict(),
            "draft_model_path": str(self.draft_path) if self.draft_path else None,
            "draft_kv_estimate_bytes": (
                self.draft_estimate.total_bytes if self.draft_estimate else None
            ),
            "fit": self.fit.to_dict(),
            "fallback": self.fallback,
            "header_error": self.header_error,
        }


def plan_launch(
    model_path: str | os.PathLike[str],
    parallel: int = 1,
    ctx: int | None = None,
    ubatch: int = DEFAULT_UBATCH,
    type_k: str = "f16",
    type_v: str = "f16",
    kv_unified: bool = False,
    swa_full_mode: SwaMode | str = "auto",
    min_ctx: int = DEFAULT_MIN_CTX,
    memory: Memory | None = None,
    *,
    max_ctx: int | None = None,
    memory_bytes: int | None = None,
    flash_attn: str = "auto",
    reserve_bytes: int = COMPUTE_RESERVE,
    allow_fallback: bool = True,
    draft_model_path: str | os.PathLike[str] | None = None,
) -> LaunchPlan:
    """Plan a launch. Raises `KVConfigError` for a configuration the server would refuse, and
    `GGUFError` for an unreadable header unless `allow_fallback` (then a file-size estimate).
    `memory_bytes` overrides the measured memory; `max_ctx` lowers the 262,144 ceiling.
    `draft_model_path`: a speculative draft model, whose weights and cache (same context and
    slots, the main cache's types) are fitted with the main model's."""
    path = Path(model_path)
    mode = _mode(swa_full_mode)
    fa_on, refusal = flash_attn_requirement(type_v, flash_attn)
    if refusal:
        raise KVConfigError(refusal)
    facts: ModelFacts | None
    header_error: str | None = None
    try:
        facts = read_model_facts(path)
    except GGUFError as exc:
        if not allow_fallback or not path.is_file():
            raise
        facts, header_error = None, str(exc)
    file_size = facts.file_size if facts else path.stat().st_size
    mem = memory or available_memory(override_bytes=memory_bytes)
    cfg = KVConfig(
        ctx=0, parallel=parallel, unified=kv_unified, ubatch=ubatch, type_k=type_k,
        type_v=type_v, flash_attn=fa_on,
    )  # fmt: skip

    draft_facts: ModelFacts | None = None
    extra_kv = None
    if draft_model_path is not None:
        try:
            draft_facts = read_model_facts(Path(draft_model_path))
        except GGUFError as exc:
            raise KVConfigError(f"draft model {draft_model_path}: {exc}") from None
        reserve_bytes += draft_facts.file_size
        dfacts = draft_facts

        def extra_kv(total_ctx: int) -> int:
            return estimate_kv(dfacts, replace(cfg, ctx=total_ctx)).total_bytes

    if facts is None:
        fit = fit_context(None, cfg, mem, file_size=file_size, min_ctx=min_ctx, manual_ctx=ctx,
                          reserve_bytes=reserve_bytes, max_ctx=max_ctx,
                          extra_kv=extra_kv)  # fmt: skip
        est = fallback_estimate(file_size, replace(cfg, ctx=fit.ctx))
        return LaunchPlan(
            path, fit.ctx, est.n_ctx_seq, parallel, kv_unified, est.n_ubatch, type_k, type_v,
            fa_on, False, "header unreadable: no --swa-full", "none", est, fit, None, header_error,
            _draft_path(draft_model_path), _draft_estimate(draft_facts, cfg, fit.ctx),
        )  # fmt: skip

    want_full = mode == "on" and decide_swa_full(facts, "on").swa_full
    fit = fit_context(facts, replace(cfg, swa_full=want_full), mem, min_ctx=min_ctx,
                      manual_ctx=ctx, reserve_bytes=reserve_bytes, max_ctx=max_ctx,
                      extra_kv=extra_kv)  # fmt: skip
    if mode == "auto":
        full = estimate_kv(facts, replace(cfg, ctx=fit.ctx, swa_full=True)).total_bytes
        verdict = decide_swa_full(facts, "auto", full, fit.kv_budget_bytes)
    else:
        verdict = decide_swa_full(facts, mode)
    est = estimate_kv(facts, replace(cfg, ctx=fit.ctx, swa_full=verdict.swa_full))
    if verdict.swa_full != want_full:
        fit = replace(fit, kv_bytes=est.total_bytes, kv_bytes_per_token=est.bytes_per_token,
                      fits=est.total_bytes <= fit.kv_budget_bytes)  # fmt: skip
    return LaunchPlan(
        model_path=path,
        ctx=fit.ctx,
        per_slot_ctx=est.n_ctx_seq,
        parallel=parallel,
        kv_unified=kv_unified,
        ubatch=est.n_ubatch,
        type_k=type_k,
        type_v=type_v,
        flash_attn=fa_on,
        swa_full=verdict.swa_full,
        swa_full_reason=verdict.reason,
        prefix_reuse=prefix_reuse(facts, verdict.swa_full),
        estimate=est,
        fit=fit,
        facts=facts,
        draft_path=_draft_path(draft_model_path),
        draft_estimate=_draft_estimate(draft_facts, cfg, fit.ctx),
    )


def _draft_path(path: str | os.PathLike[str] | None) -> Path | None:
    return Path(path) if path is not None else None


def _draft_estimate(facts: ModelFacts | None, cfg: KVConfig, ctx: int) -> KVEstimate | None:
    return estimate_kv(facts, replace(cfg, ctx=ctx)) if facts is not None else None


def _mode(value: str) -> SwaMode:
    for mode in _MODES:
        if value == mode:
            return mode
    raise KVConfigError(f"swaFull must be auto, on or off, not {value!r}")
