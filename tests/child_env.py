"""The environment of a `fusion-tui` child process started by a test.

The caller's FUSION_TUI_* settings are left out (as the `app_home` fixture does in-process), the
child gets its own home, and this checkout comes first on PYTHONPATH so the child runs the code
under test. `managed_env` adds a managed SmolLM2 server of the given size at temperature 0.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
"""The checkout (the folder holding `fusion_tui/` and `tests/`)."""


def child_env(home: Path | str, **settings: str) -> dict[str, str]:
    """This process's environment minus FUSION_TUI_*, plus FUSION_TUI_HOME=`home`, the checkout
    on PYTHONPATH and `settings` (FUSION_TUI_* names → values)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSION_TUI_")}
    env["FUSION_TUI_HOME"] = str(home)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(settings)
    return env


def managed_env(
    home: Path | str,
    binary: Path,
    model: Path,
    *,
    parallel: int,
    ctx: int,
    threads: int,
    max_tokens: int,
    **settings: str,
) -> dict[str, str]:
    """`child_env` for a child that launches its own managed server: `binary` serving `model`
    with `parallel` slots over `ctx` tokens on `threads` threads, answers of up to `max_tokens`
    at temperature 0, without speculative decoding unless `settings` ask for it (the `auto`
    trial would run again in every fresh home: seconds to minutes a test)."""
    settings.setdefault("FUSION_TUI_LOCALMODELS__MANAGED__SPECULATIVE", "off")
    return child_env(
        home,
        FUSION_TUI_SERVER__BINARY=str(binary),
        FUSION_TUI_LOCALMODELS__MODEL=str(model),
        FUSION_TUI_LOCALMODELS__MANAGED__PARALLEL=str(parallel),
        FUSION_TUI_LOCALMODELS__MANAGED__CTX=str(ctx),
        FUSION_TUI_LOCALMODELS__MANAGED__THREADS=str(threads),
        FUSION_TUI_LLM__MAXTOKENS=str(max_tokens),
        FUSION_TUI_LLM__TEMPERATURE="0",
        **settings,
    )
