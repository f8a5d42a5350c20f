"""The launch wizard's model list: recent models first, then the demo model if it is not one.

Kept apart from the screen so what the list offers (and the paths behind it) reads in one place.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.widgets.option_list import Option

from fusion_tui.demo_model import DEMO_NAME
from fusion_tui.models_registry import ModelsRegistry
from fusion_tui.server.probe import model_display_name


def model_options(
    registry: ModelsRegistry | None, demo_path: Path | None, show_path: Callable[[Path], str]
) -> tuple[list[Option], list[Path]]:
    """The options of the model list and the path behind each, in the same order."""
    choices: list[Path] = []
    options: list[Option] = []
    seen: set[str] = set()

    def option(name: str, detail: str) -> Option:
        text = Text.assemble((name, "bold"), "  ", (detail, "dim"))
        return Option(text, id=f"model-{len(choices)}")

    entries = registry.recent() if registry else []
    for entry in entries:
        path = Path(entry.path)
        detail = show_path(path)
        if entry.parallel:
            detail += f" · last {entry.parallel} slot" + ("s" if entry.parallel > 1 else "")
        options.append(option(model_display_name(path), detail))
        choices.append(path)
        seen.add(str(path.absolute()))
    if demo_path is not None and str(demo_path.absolute()) not in seen:
        options.append(option(DEMO_NAME, "the demo model, shipped with fusion-tui"))
        choices.append(demo_path)
    return options, choices
