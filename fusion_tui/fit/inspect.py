"""Provides `inspect_model` and `format_report`: the data and the table of `fusion-tui inspect`.

A thin face over `plan_launch` (no fallback: an unreadable header is an error here).
"""

from __future__ import annotations

import os
from typing import Any

from fusion_tui.fit.launch_plan import LaunchPlan, plan_launch
from fusion_tui.fit.memory import Memory
from fusion_tui.fit.swa import SwaMode

MIB = 1024 * 1024


def inspect_model(
    path: str | os.PathLike[str],
    *,
    ctx: int | None = None,
    parallel: int = 1,
    ubatch: int = 512,
    type_k: str = "f16",
    type_v: str = "f16",
    kv_unified: bool = False,
    swa_full_mode: SwaMode = "auto",
    flash_attn: str = "auto",
    min_ctx: int = 2048,
    memory: Memory | None = None,
    draft_model: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """The inspect report as a JSON-ready dict; raises GGUFError / KVConfigError. With
    `draft_model` (speculative decoding), its weights and cache are fitted in too."""
    plan = plan_launch(
        path, parallel, ctx, ubatch, type_k, type_v, kv_unified, swa_full_mode, min_ctx, memory,
        flash_attn=flash_attn, allow_fallback=False, draft_model_path=draft_model,
    )  # fmt: skip
    return report_from_plan(plan)


def report_from_plan(plan: LaunchPlan) -> dict[str, Any]:
    f = plan.facts
    assert f is not None
    return {
        "path": str(plan.model_path),
        "architecture": f.architecture,
        "name": f.name,
        "quantization": f.quantization,
        "file_size": f.file_size,
        "n_layers": f.n_layer,
        "trained_ctx": f.trained_ctx,
        "n_embd": f.n_embd,
        "n_head_kv": list(f.n_head_kv),
        "head_dim_k": f.head_dim_k,
        "head_dim_v": f.head_dim_v,
        "sliding_window": f.n_swa,
        "sliding_layers": sum(f.swa_layers),
        "recurrent_layers": sum(f.recurrent_layers),
        "kv_layers": sum(f.kv_layers),
        "hybrid": f.is_hybrid,
        "recurrent": f.is_recurrent,
        "ctx": plan.ctx,
        "fitted_ctx": plan.fit.fitted_ctx,
        "per_slot_ctx": plan.per_slot_ctx,
        "parallel": plan.parallel,
        "kv_unified": plan.kv_unified,
        "ubatch": plan.ubatch,
        "cache_type_k": plan.type_k,
        "cache_type_v": plan.type_v,
        "flash_attn": plan.flash_attn,
        "kv_bytes_total": plan.estimate.total_bytes,
        "kv_bytes_per_token": plan.estimate.bytes_per_token,
        "recurrent_bytes": plan.estimate.recurrent_bytes,
        "groups": [g.__dict__ for g in plan.estimate.groups],
        "swa_full": plan.swa_full,
        "swa_full_reason": plan.swa_full_reason,
        "prefix_reuse": plan.prefix_reuse,
        "approximate": plan.estimate.approximate,
        "fit": plan.fit.to_dict(),
        "server_args": plan.server_args(),
        "draft_model": str(plan.draft_path) if plan.draft_path else None,
        "draft_weights_bytes": _draft_weights(plan),
        "draft_kv_bytes": plan.draft_estimate.total_bytes if plan.draft_estimate else None,
        "kv_bytes_with_draft": plan.kv_bytes_total,
    }


def _draft_weights(plan: LaunchPlan) -> int | None:
    if plan.draft_path is None:
        return None
    try:
        return plan.draft_path.stat().st_size
    except OSError:
        return None


def _mib(n: int) -> str:
    return f"{n / MIB:,.2f} MiB"


def format_report(r: dict[str, Any]) -> str:
    """A readable two-column table."""
    fit = r["fit"]
    layout = f"{r['kv_layers']} with KV"
    if r["sliding_layers"]:
        layout += f", {r['sliding_layers']} sliding (window {r['sliding_window']})"
    if r["recurrent_layers"]:
        layout += f", {r['recurrent_layers']} recurrent"
    slots = f"{r['parallel']} ({'unified' if r['kv_unified'] else 'split'})"
    rows: list[tuple[str, str]] = [
        (
            "model",
            f"{r['name'] or os.path.basename(r['path'])} "
            f"({r['architecture']}, {r['quantization'] or '?'})",
        ),
        ("file", f"{r['path']} — {_mib(r['file_size'])}"),
        ("layers", f"{r['n_layers']}: {layout}"),
        ("trained context", f"{r['trained_ctx']:,}"),
        ("", ""),
        ("available memory", f"{_mib(fit['available_bytes'])} ({fit['memory_source']})"),
        ("− weights", _mib(fit["weights_bytes"])),
        *(
            [("− draft model weights", _mib(r["draft_weights_bytes"]))]
            if r.get("draft_weights_bytes")
            else []
        ),
        ("− compute reserve", _mib(fit["reserve_bytes"] - (r.get("draft_weights_bytes") or 0))),
        ("= KV budget", _mib(fit["kv_budget_bytes"])),
        ("fitted context", f"{r['fitted_ctx']:,} (limited by {fit['limited_by']})"),
        ("context (-c)", f"{r['ctx']:,}" + (" (manual)" if fit["manual"] else "")),
        ("slots", slots),
        ("per-slot context", f"{r['per_slot_ctx']:,}"),
        (
            "cache types",
            f"K {r['cache_type_k']}, V {r['cache_type_v']}, "
            f"flash attention {'on' if r['flash_attn'] else 'off'}",
        ),
        ("", ""),
        ("KV per token", f"{r['kv_bytes_per_token']:,} B"),
    ]
    for g in r["groups"]:
        rows.append((f"  {g['kind']} layers", f"{g['layers']} × {g['cells']:,} cells = "
                                              f"{_mib(g['bytes'])}"))  # fmt: skip
    rows += [
        ("KV total", _mib(r["kv_bytes_total"]) + ("" if fit["fits"] else "  (does NOT fit)")),
        *(
            [
                ("draft model KV", _mib(r["draft_kv_bytes"])),
                ("KV with the draft", _mib(r["kv_bytes_with_draft"])),
            ]
            if r.get("draft_kv_bytes") is not None
            else []
        ),
        ("--swa-full", f"{'yes' if r['swa_full'] else 'no'} — {r['swa_full_reason']}"),
        ("prefix reuse", r["prefix_reuse"]),
        ("server args", " ".join(r["server_args"])),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" if k else "" for k, v in rows)
