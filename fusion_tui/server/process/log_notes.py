"""Provides the lines fusion-tui adds to the server log: the launch plan and the KV check.

Whoever reads `llama-server.log` sees why the server got its context and flags, and whether the
estimate matched what the server allocated, next to the server's own lines.
"""

from __future__ import annotations

from typing import Any


def plan_note(fit: dict[str, Any] | None, estimate: int | None) -> str:
    """The launch decisions, written into the server log just before the server's own lines."""
    if not fit:
        return "fusion-tui: launch without a fit plan\n"
    budget = fit.get("fit") or {}
    mib = 1024 * 1024
    devices = "".join(f"fusion-tui: device {line}\n" for line in fit.get("device_lines") or ())
    return (
        f"fusion-tui: fitted ctx {fit.get('ctx')} ({fit.get('per_slot_ctx')} per slot, "
        f"{fit.get('parallel')} slots, limited by {budget.get('limited_by', '?')}); "
        f"budget {budget.get('available_bytes', 0) / mib:.0f} MiB available - "
        f"{budget.get('weights_bytes', 0) / mib:.0f} MiB weights - "
        f"{budget.get('reserve_bytes', 0) / mib:.0f} MiB reserve; "
        f"swa-full {'on' if fit.get('swa_full') else 'off'} ({fit.get('swa_full_reason')}); "
        f"prefix reuse {fit.get('prefix_reuse')}; "
        f"KV estimate {(estimate or 0) / mib:.2f} MiB\n"
    ) + devices


def allocation_note(estimate: int | None, allocated: int | None) -> str:
    """Estimate against what the server said it allocated, once it is ready."""
    if estimate is None or allocated is None:
        return "fusion-tui: KV allocation not compared (no estimate or no size line in the log)\n"
    mib = 1024 * 1024
    off = (estimate - allocated) / allocated * 100 if allocated else 0.0
    return (
        f"fusion-tui: KV estimate {estimate / mib:.2f} MiB vs allocated {allocated / mib:.2f} MiB "
        f"({off:+.2f}%)\n"
    )
