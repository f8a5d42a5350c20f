"""Snapshots of each launch-wizard step: no server (fake launcher), no clock, no blink, memory
pinned to 4 GiB so the fit does not depend on this machine, paths shown as `…/name`."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from fusion_tui.models.registry import ModelsRegistry
from fusion_tui.server.errors import DaemonStartError
from tests.tinymodels import write_gemma3
from tests.tui.test_launch_wizard import (
    SETTINGS,
    STAGES,
    FakeLauncher,
    WizardHost,
    make_wizard,
    settle,
)

SIZES = [(80, 24), (160, 48)]
size_ids = pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")


def _registry(tmp_path: Path, demo_model: Path) -> ModelsRegistry:
    """One recent model (a tiny gemma3 file) used earlier with 2 slots."""
    gemma = write_gemma3(tmp_path / "tiny-gemma3.F16.gguf", demo_model)
    registry = ModelsRegistry(tmp_path / "models.json", clock=lambda: 1.0)
    registry.remember(gemma, parallel=2)
    return registry


@size_ids
def test_step1_pick(
    snap_compare: Any, size: tuple[int, int], tmp_path: Path, demo_model: Path
) -> None:
    """You should see step 1 highlighted, a recent model `tiny-gemma3` (`…/tiny-gemma3.F16.gguf ·
    last 2 slots`) highlighted above the demo model, the path box and a Browse button, and
    Back hidden, Next on the right."""
    app = WizardHost(make_wizard(registry=_registry(tmp_path, demo_model), demo=demo_model))
    assert snap_compare(app, terminal_size=size, run_before=settle)


def test_step1_bad_gguf(snap_compare: Any, tmp_path: Path) -> None:
    """You should see step 1 still open with one warning line under the path box:
    `broken.gguf: not a GGUF file (bad magic …)` — the reason, no traceback."""
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"NOPE" + bytes(60))

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        pilot.app.wizard.query_one("#path", Input).value = f"…/{bad.name}"
        pilot.app.wizard._choose_typed_path(str(bad))
        await settle(pilot)

    app = WizardHost(make_wizard())
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


@size_ids
def test_step2_facts_demo(snap_compare: Any, size: tuple[int, int], demo_model: Path) -> None:
    """You should see step 2 for SmolLM2-135M-Instruct (llama, Q4_1, 93.8 MiB): 30 layers all full
    attention, `4.00 GiB configured − 93.8 MiB weights − 1.00 GiB reserve = 2.91 GiB`, context
    32,768 limited by the trained context, `4 × 8,192 tokens each` (every slot its trained
    context), KV 720 MiB, `--swa-full no —
    no sliding-window layers`, prefix reuse `full`, the slots box holding 4, Back and Launch."""

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        pilot.app.wizard.choose_model(demo_model)
        await settle(pilot)

    app = WizardHost(make_wizard(demo=demo_model))
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_step2_sliding_model_refit(snap_compare: Any, tmp_path: Path, demo_model: Path) -> None:
    """You should see step 2 for a tiny gemma3 file with sliding layers (swaFull off) after the
    slot count was changed to 2: `6 layers: 4 sliding (window 64), 2 full`, `2 × 8,192 tokens
    each`, KV groups `full: 2 layers × 16,384 cells` and `sliding: 4 layers × 1,536 cells` (per
    slot pad256(window 64 + ubatch 512) = 768), `--swa-full no — swaFull is off: …` and prefix
    reuse `none — only whole-session extensions are reused (sessions stay append-only)`."""
    registry = _registry(tmp_path, demo_model)
    gemma = Path(registry.entries()[0].path)

    async def run_before(pilot: Any) -> None:
        await settle(pilot)
        wizard = pilot.app.wizard
        wizard.choose_model(gemma)
        await settle(pilot)
        wizard.query_one("#slots", Input).value = "2"
        await settle(pilot)

    off = replace(SETTINGS, local_models=replace(SETTINGS.local_models, managed=replace(
        SETTINGS.local_models.managed, swa_full="off")))  # fmt: skip
    wizard = make_wizard(registry=registry, demo=demo_model, settings=off)
    assert snap_compare(WizardHost(wizard), terminal_size=(160, 48), run_before=run_before)


async def _to_launch(pilot: Any, demo_model: Path) -> None:
    await settle(pilot)
    wizard = pilot.app.wizard
    wizard.choose_model(demo_model)
    await settle(pilot)
    wizard.start_launch()
    await pilot.pause()
    await pilot.pause()


@size_ids
def test_step3_launching(snap_compare: Any, size: tuple[int, int], demo_model: Path) -> None:
    """You should see step 3 while the model loads: the /health 503 → 200 explanation, ticks for
    `planning the launch` and `starting llama-server on port 41234`, `… loading the model`
    as the current stage, and a Cancel button."""
    launcher = FakeLauncher(stages=STAGES[:3], hold=True)

    async def run_before(pilot: Any) -> None:
        await _to_launch(pilot, demo_model)

    app = WizardHost(make_wizard(launcher=launcher, demo=demo_model))
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@size_ids
def test_step3_ready(snap_compare: Any, size: tuple[int, int], demo_model: Path) -> None:
    """You should see step 3 after the launch: every stage ticked, then in the success colour
    `ready · SmolLM2-135M-Instruct · 4 slots × 8192 ctx · ~95 tok/s single stream` and
    `KV cache: estimated 720 MiB · allocated 720 MiB · exact`, and a Done button (no Back)."""

    async def run_before(pilot: Any) -> None:
        await _to_launch(pilot, demo_model)
        await settle(pilot)

    app = WizardHost(make_wizard(launcher=FakeLauncher(), demo=demo_model))
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_step3_failed(snap_compare: Any, demo_model: Path) -> None:
    """You should see step 3 after a failed launch: `✗ loading the model`, the one-line reason
    `The launch failed: llama-server exited while starting (exit code 1)`, the last lines of the
    server log in a box with a red left edge, and Back and Retry buttons."""
    tail = (
        "llama_model_load: error loading model: tensor 'blk.0.attn_q.weight' data is not "
        "within the file bounds\nllama_model_load_from_file_impl: failed to load model\n"
        "main: exiting due to model loading error"
    )
    error = DaemonStartError("llama-server exited while starting (exit code 1)", tail)

    async def run_before(pilot: Any) -> None:
        await _to_launch(pilot, demo_model)
        await settle(pilot)

    launcher = FakeLauncher(stages=STAGES[:3], error=error)
    app = WizardHost(make_wizard(launcher=launcher, demo=demo_model))
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
