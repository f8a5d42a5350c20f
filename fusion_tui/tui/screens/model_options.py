"""The launch wizard's model list: recent models first, then the installed catalogue models
(`coder-1.5b`, `coder-0.5b`, `smollm2`) that are not among them.

Kept apart from the screen so what the list offers (and what is behind each option) reads in one
place. A catalogue model not assembled yet has no file: its option stands for the entry, and
picking it assembles the file.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from rich.text import Text
from textual.widgets.option_list import Option

from fusion_tui.models.catalog import CATALOG, DEMO_MODEL, CatalogModel
from fusion_tui.models.registry import ModelsRegistry
from fusion_tui.server.process.probe import model_display_name

ModelPick = Path | CatalogModel
"""What an option of the list stands for: a file, or a catalogue model still to assemble."""

DEMO_DETAIL = "the demo model, shipped with fusion-tui"


def model_options(
    registry: ModelsRegistry | None,
    installed: Sequence[tuple[CatalogModel, Path | None]],
    show_path: Callable[[Path], str],
) -> tuple[list[Option], list[ModelPick]]:
    """The options of the model list and what is behind each, in the same order. `installed`:
    the catalogue models to offer, each with its file when it is ready."""
    choices: list[ModelPick] = []
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
    for model, file in installed:
        if file is not None and str(file.absolute()) in seen:
            continue
        if model.short_name == DEMO_MODEL:
            detail = DEMO_DETAIL
        else:
            detail = f"{model.short_name} · {model.summary}"
            if file is None:
                detail += " · assembled when picked"
        options.append(option(model.title, detail))
        choices.append(file or model)
    return options, choices


def installed_models(
    demo_path: Path | None = None, find: bool = True
) -> list[tuple[CatalogModel, Path | None]]:
    """The catalogue models installed here (`find`), each with its file when it is ready; a
    given `demo_path` stands for the demo model's file (tests pass theirs and `find=False`)."""
    found = [m for m in CATALOG.values() if m.available()] if find else []
    items = [(m, m.known_path() if m.ready() else None) for m in found]
    if demo_path is not None:
        items = [i for i in items if i[0].short_name != DEMO_MODEL]
        items.append((CATALOG[DEMO_MODEL], demo_path))
    return items
