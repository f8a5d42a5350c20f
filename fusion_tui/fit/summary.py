"""Provides the launch wizard's words: facts, budget, verdict and KV-check lines from a LaunchPlan.

Pure text (no Textual), so the exact lines the wizard shows are unit-tested here, and the CLI can
print the same ones.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fusion_tui.fit.launch_plan import LaunchPlan
from fusion_tui.gguf.facts import ModelFacts
from fusion_tui.server.process.probe import model_display_name
from fusion_tui.status import ServerStatus

MAX_SLOTS = 64
KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
MEMORY_SOURCES = {
    "ram": "free RAM",
    "config": "configured",
    "gpu-config": "configured GPU memory",
    "unknown": "unknown memory",
}
REUSE_WORDS = {
    "full": "full — any cached prefix is reused",
    "none": "none — only whole-session extensions are reused (sessions stay append-only)",
}


@dataclass(frozen=True)
class SummaryRow:
    """One `label  value` line; `warn` rows are drawn in the warning colour."""

    label: str
    value: str
    warn: bool = False


def format_bytes(n: int) -> str:
    """`93.8 MiB`, `2.91 GiB`, `22.5 KiB`, `512 B`: three significant figures at most."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= size:
            value = n / size
            digits = 2 if abs(value) < 10 else 1 if abs(value) < 100 else 0
            return f"{value:,.{digits}f} {unit}"
    return f"{n} B"


def layer_layout(facts: ModelFacts) -> str:
    """`30 layers, all full attention` / `26 layers: 21 sliding (window 512), 5 full`."""
    full = sum(kv and not swa for kv, swa in zip(facts.kv_layers, facts.swa_layers, strict=True))
    sliding = sum(kv and swa for kv, swa in zip(facts.kv_layers, facts.swa_layers, strict=True))
    recurrent = sum(facts.recurrent_layers)
    n = facts.n_layer
    parts = []
    if sliding:
        parts.append(f"{sliding} sliding (window {facts.n_swa:,})")
    if full:
        parts.append(f"{full} full attention" if not sliding else f"{full} full")
    if recurrent:
        parts.append(f"{recurrent} recurrent")
    if len(parts) == 1 and (full == n or recurrent == n or sliding == n):
        return f"{n} layers, all {parts[0].split(' ', 1)[1]}"
    return f"{n} layers: " + ", ".join(parts)


def plan_rows(plan: LaunchPlan, show_path: Callable[[Path], str] = str) -> list[SummaryRow]:
    """Every line of the wizard's "check the fit" step, in order."""
    fit, est = plan.fit, plan.estimate
    rows = [SummaryRow("model", _model_line(plan)), SummaryRow("file", show_path(plan.model_path))]
    if plan.facts is not None:
        rows.append(
            SummaryRow(
                "layers", f"{layer_layout(plan.facts)} · trained context {fit.trained_ctx:,}"
            )
        )
    else:
        rows.append(
            SummaryRow(
                "header",
                f"unreadable ({plan.header_error}); sizes are a file-size guess",
                warn=True,
            )
        )
    source = MEMORY_SOURCES.get(fit.memory_source, fit.memory_source)
    rows.append(
        SummaryRow(
            "memory",
            f"{format_bytes(fit.available_bytes)} {source} − {format_bytes(fit.weights_bytes)} "
            f"weights − {format_bytes(fit.reserve_bytes)} reserve = "
            f"{format_bytes(fit.kv_budget_bytes)} for the KV cache",
        )
    )
    why = "set in config" if fit.manual else f"fitted, limited by {fit.limited_by}"
    rows.append(SummaryRow("context", f"{plan.ctx:,} tokens ({why})"))
    rows.append(SummaryRow("slots", slots_line(plan)))
    kv = f"{format_bytes(est.total_bytes)} · {format_bytes(est.bytes_per_token)} per token"
    rows.append(SummaryRow("KV cache", kv))
    for g in est.groups:
        cells = "state" if g.kind == "recurrent" else f"{g.cells:,} cells"
        rows.append(
            SummaryRow("", f"{g.kind}: {g.layers} layers × {cells} = {format_bytes(g.bytes)}")
        )
    if not fit.fits:
        rows.append(
            SummaryRow(
                "",
                f"does NOT fit: {format_bytes(est.total_bytes)} needed, "
                f"{format_bytes(fit.kv_budget_bytes)} budget",
                warn=True,
            )
        )
    rows.append(SummaryRow("--swa-full", swa_line(plan)))
    rows.append(SummaryRow("prefix reuse", REUSE_WORDS.get(plan.prefix_reuse, plan.prefix_reuse)))
    return rows


def _model_line(plan: LaunchPlan) -> str:
    name = model_display_name(plan.model_path)
    f = plan.facts
    if f is None:
        return name
    kind = ", ".join(p for p in (f.architecture, f.quantization) if p)
    return f"{name} ({kind}) · {format_bytes(f.file_size)}"


def slots_line(plan: LaunchPlan) -> str:
    """`4 × 2,048 tokens each (split cache)` / `4 sharing 8,192 tokens (unified cache)`."""
    if plan.kv_unified:
        return f"{plan.parallel} sharing {plan.per_slot_ctx:,} tokens (unified cache)"
    return f"{plan.parallel} × {plan.per_slot_ctx:,} tokens each (split cache)"


def swa_line(plan: LaunchPlan) -> str:
    return f"{'yes' if plan.swa_full else 'no'} — {plan.swa_full_reason}"


def kv_check_line(estimated: int | None, allocated: int | None) -> str:
    """The estimate against what the server allocated, e.g.
    `KV cache: estimated 180 MiB · allocated 180 MiB · exact`."""
    if estimated is None:
        if allocated is None:
            return "KV cache: no estimate and no allocation recorded"
        return f"KV cache: allocated {format_bytes(allocated)} (no estimate recorded)"
    head = f"KV cache: estimated {format_bytes(estimated)}"
    if allocated is None:
        return f"{head} · the server's allocation was not found in its log"
    if allocated == estimated:
        verdict = "exact"
    else:
        off = 100 * (estimated - allocated) / allocated if allocated else float("inf")
        verdict = f"estimate off by {off:+.2f}%" + (" (within 1%)" if abs(off) <= 1 else "")
    return f"{head} · allocated {format_bytes(allocated)} · {verdict}"


def step_titles(current: int) -> list[tuple[str, bool]]:
    """The wizard's step names with which one is current (1-based)."""
    names = ["1 Pick a model", "2 Check the fit", "3 Launch"]
    return [(name, i + 1 == current) for i, name in enumerate(names)]


# --- the wizard's input rules and launch lines ---------------------------------------------------


def check_model_path(text: str) -> Path:
    """The GGUF named by `text`; `ValueError` with a one-line reason when it cannot be one."""
    raw = text.strip()
    if not raw:
        raise ValueError("type the path of a .gguf file")
    path = Path(raw).expanduser()
    if path.is_dir():
        raise ValueError(f"{raw} is a folder; pick a .gguf file inside it")
    if path.suffix.lower() != ".gguf":
        raise ValueError(f"{path.name} is not a .gguf file")
    if not path.is_file():
        raise ValueError(f"no file at {raw}")
    return path


def parse_slots(text: str) -> int:
    """The slot count in `text`; `ValueError` with a one-line reason when out of range."""
    try:
        n = int(text.strip())
    except ValueError:
        raise ValueError(f"slots must be a whole number from 1 to {MAX_SLOTS}") from None
    if not 1 <= n <= MAX_SLOTS:
        raise ValueError(f"slots must be from 1 to {MAX_SLOTS}")
    return n


def display_path(path: Path) -> str:
    """`~/...` for paths under the home folder: shorter, and the same for every user."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


def one_line(exc: BaseException) -> str:
    """The first line of an error's message (its type name when it has none)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def stage_lines(model: str, parallel: int, stages: list[ServerStatus], state: str) -> list[str]:
    """Step 3's progress: what /health means, then one line per reported stage; the last one is
    `…` while `state` is `launching`, `✗` once `failed`, `✓` otherwise."""
    lines = [
        f"Launching {model} with {parallel} slot{'' if parallel == 1 else 's'}: /health answers "
        "503 while the model loads, 200 once it is ready.",
        "",
    ]
    details = [s.detail or s.state for s in stages if s.state != "ready"]
    for i, detail in enumerate(details):
        mark = "✓"
        if i == len(details) - 1:
            mark = {"launching": "…", "failed": "✗"}.get(state, "✓")
        lines.append(f"{mark} {detail}")
    if not details and state == "launching":
        lines.append("… starting")
    return lines
