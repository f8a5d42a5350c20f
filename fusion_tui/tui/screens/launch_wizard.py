"""Provides `LaunchWizard`: pick a GGUF, check the measured fit, launch it and see it proven.

Three steps in one modal (a `ContentSwitcher`): 1 pick a model (recent models, the installed
catalogue models, a path or short name, or a `.gguf`-only file tree); 2 the header facts, the
memory budget and fitted context, the `--swa-full` verdict and the prefix-reuse class, with an
editable slot count that re-fits live;
3 the launch, stage by stage, then the ready line with measured tok/s and the KV estimate against
the server's allocation. Header reads and fits run in workers on this screen (dismissing it
cancels them); the launcher is injected (`server.connect.connect` by default) so tests use a fake.
The words come from `fusion_tui.fit.summary`, which is tested without Textual. Step 3 is an
object the wizard holds (`launch_step.LaunchStep`), the model list's options in `model_options`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import reactive
from textual.screen import ModalScreen
from textual.widgets import Button, ContentSwitcher, DirectoryTree, Input, OptionList, Static

from fusion_tui.config import Settings
from fusion_tui.fit.launch_plan import LaunchPlan
from fusion_tui.fit.summary import (
    MAX_SLOTS,
    SummaryRow,
    check_model_path,
    display_path,
    one_line,
    parse_slots,
    plan_rows,
    step_titles,
)
from fusion_tui.models.catalog import CatalogModel, catalog_model
from fusion_tui.models.packaged import ModelFileError, progress_words
from fusion_tui.models.registry import ModelsRegistry
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import connect
from fusion_tui.server.launch_choice import LaunchChoice, Launcher, Planner, plan_with_settings
from fusion_tui.tui.screens.launch_step import LAUNCH, PICK, PLAN, LaunchStep
from fusion_tui.tui.screens.model_options import ModelPick, installed_models, model_options
from fusion_tui.tui.widgets.gguf_tree import GGUFTree

SLOTS_NOTE = f"1–{MAX_SLOTS}; the fit follows as you type · enter launches"
_STEP_IDS = {PICK: "step-pick", PLAN: "step-plan", LAUNCH: "step-launch"}


class LaunchWizard(ModalScreen[LaunchChoice | None]):
    """Pick → check → launch. Esc closes (after a launch: keeps it and closes)."""

    step: reactive[int] = reactive(PICK, init=False)
    """1 pick, 2 check the fit, 3 launch."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="close"),
    ]

    DEFAULT_CSS = """
    LaunchWizard { align: center middle; }
    LaunchWizard > #wizard-box {
        width: 96%;
        max-width: 120;
        height: auto;
        max-height: 100%;
        border: round $primary;
        border-title-color: $primary;
        border-subtitle-color: $text-muted;
        background: $surface;
        padding: 0 1;
    }
    LaunchWizard #wizard-steps { height: 1; margin-bottom: 1; }
    LaunchWizard ContentSwitcher { height: auto; }
    LaunchWizard .step { height: auto; }
    LaunchWizard .heading { color: $accent; text-style: bold; }
    LaunchWizard #models { height: auto; max-height: 8; border: none; padding: 0; }
    LaunchWizard #path-row { height: 1; margin-top: 1; }
    LaunchWizard #path { width: 1fr; background: $boost; }
    LaunchWizard #no-models { color: $text-muted; }
    LaunchWizard #browse { margin-left: 1; }
    LaunchWizard #tree { height: 10; border: none; }
    LaunchWizard .error { color: $warning; height: auto; }
    LaunchWizard #plan-scroll { height: auto; max-height: 16; scrollbar-size-vertical: 1; }
    LaunchWizard #slots-row { height: 1; margin-top: 1; }
    LaunchWizard #slots-label { width: auto; text-style: bold; padding-right: 1; }
    LaunchWizard #slots { width: 8; background: $boost; }
    LaunchWizard #slots-note { width: 1fr; color: $text-muted; padding-left: 1; }
    LaunchWizard #launch-stages { height: auto; }
    LaunchWizard #launch-result { height: auto; margin-top: 1; }
    LaunchWizard #launch-result.-ready { color: $success; text-style: bold; }
    LaunchWizard #launch-log {
        height: auto;
        max-height: 10;
        color: $text-muted;
        border-left: thick $error;
        padding-left: 1;
        display: none;
    }
    LaunchWizard #launch-log.-shown { display: block; }
    LaunchWizard #wizard-buttons { height: 1; margin-top: 1; align-horizontal: right; }
    LaunchWizard #wizard-buttons Button { margin-left: 2; }
    """

    def __init__(
        self,
        settings: Settings,
        paths: AppPaths | None = None,
        *,
        launcher: Launcher = connect,
        registry: ModelsRegistry | None = None,
        demo_path: Path | None = None,
        find_installed: bool = True,
        browse_root: Path | None = None,
        show_path: Callable[[Path], str] = display_path,
        planner: Planner | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings
        self.paths = paths
        self.launcher = launcher
        self.registry = registry or (ModelsRegistry(paths.models_file) if paths else None)
        self.installed = installed_models(demo_path, find_installed)
        """The catalogue models the list offers, each with its file when it is ready."""
        self.browse_root = browse_root or Path.home()
        self.show_path = show_path
        """How a path is shown (tests pass one that hides machine-specific folders)."""
        self.planner: Planner = planner or (lambda m, n: plan_with_settings(settings, m, n))
        self.choices: list[ModelPick] = []
        """What is behind the options of the model list, in order."""
        self.plan: LaunchPlan | None = None
        self.rows: list[SummaryRow] = []
        """The lines of step 2, as shown (see `fit.summary.plan_rows`)."""
        self.plan_error = ""
        """Why the current slot count cannot launch (empty: it can)."""
        self.launch = LaunchStep(self, settings, paths, launcher, self.registry)

    # --- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with Vertical(id="wizard-box") as box:
            box.border_title = "Launch a model"
            box.border_subtitle = "esc closes"
            yield Static(self._steps_text(), id="wizard-steps")
            with ContentSwitcher(initial=_STEP_IDS[PICK]):
                with Vertical(id="step-pick", classes="step"):
                    yield Static("Recent models", classes="heading")
                    options, self.choices = model_options(
                        self.registry, self.installed, self.show_path
                    )
                    yield OptionList(*options, id="models")
                    if not options:
                        yield Static("No recent models yet, and the demo model is not installed.",
                                     id="no-models")  # fmt: skip
                    with Horizontal(id="path-row"):
                        yield Input(placeholder="or the path of a .gguf file", id="path",
                                    compact=True)  # fmt: skip
                        yield Button("Browse…", id="browse", compact=True)
                    yield Static("", id="pick-error", classes="error", markup=False)
                with Vertical(id="step-plan", classes="step"):
                    with VerticalScroll(id="plan-scroll"):
                        yield Static("", id="plan-table")
                    with Horizontal(id="slots-row"):
                        yield Static("slot count", id="slots-label")
                        yield Input(id="slots", type="integer", max_length=3, compact=True)
                        yield Static(SLOTS_NOTE, id="slots-note", markup=False)
                    yield Static("", id="plan-error", classes="error", markup=False)
                with Vertical(id="step-launch", classes="step"):
                    yield Static("", id="launch-stages", markup=False)
                    yield Static("", id="launch-result", markup=False)
                    yield Static("", id="launch-log", markup=False)
            with Horizontal(id="wizard-buttons"):
                yield Button("Back", id="back", compact=True)
                yield Button("Next", id="next", variant="primary", compact=True)

    def on_mount(self) -> None:
        for field in self.query(Input):
            field.cursor_blink = self.settings.ui.cursor_blink
        self.sync_buttons()
        models = self.query_one("#models", OptionList)
        models.display = models.option_count > 0
        if models.option_count:
            models.highlighted = 0
            models.focus()
        else:
            self.query_one("#path", Input).focus()

    def _steps_text(self) -> Text:
        text = Text()
        for i, (name, current) in enumerate(step_titles(self.step)):
            if i:
                text.append("  ·  ", style="dim")
            text.append(name, style="bold reverse" if current else "dim")
        return text

    # --- step changes ---------------------------------------------------------------------------

    def watch_step(self, step: int) -> None:
        self.query_one(ContentSwitcher).current = _STEP_IDS[step]
        self.query_one("#wizard-steps", Static).update(self._steps_text())
        self.sync_buttons()
        if step == PLAN:
            self.query_one("#slots", Input).focus()
        elif step == LAUNCH:
            self.query_one("#next", Button).focus()

    def sync_buttons(self) -> None:
        back = self.query_one("#back", Button)
        primary = self.query_one("#next", Button)
        back.display = self.step != PICK and self.launch.state != "ready"
        back.disabled = self.launch.state == "launching"
        if self.step == PICK:
            primary.label, primary.disabled = "Next", False
        elif self.step == PLAN:
            primary.label = "Launch"
            primary.disabled = self.plan is None or bool(self.plan_error)
        else:
            labels = {"launching": "Cancel", "ready": "Done", "failed": "Retry"}
            primary.label = labels.get(self.launch.state, "Launch")
            primary.disabled = False

    def _set_plan_error(self, message: str) -> None:
        self.plan_error = message
        self.query_one("#plan-error", Static).update(message)
        self.sync_buttons()

    # --- step 3: launch (`launch_step.LaunchStep`) ------------------------------------------------

    def start_launch(self) -> None:
        if self.plan is None:
            return
        self.launch.begin(self.plan)
        self.step = LAUNCH
        self.sync_buttons()
        self.run_launch(self.plan)

    @work(exclusive=True, group="launch", exit_on_error=False, description="launch llama-server")
    async def run_launch(self, plan: LaunchPlan) -> None:
        await self.launch.run(plan)

    def cancel_launch(self) -> None:
        self.workers.cancel_group(self, "launch")
        self.launch.state = "idle"
        self.step = PLAN
        self._set_plan_error("launch cancelled")

    # --- step 1: pick ---------------------------------------------------------------------------

    @on(OptionList.OptionSelected, "#models")
    def _model_selected(self, event: OptionList.OptionSelected) -> None:
        self.choose_model(self.choices[event.option_index])

    @on(Input.Submitted, "#path")
    def _path_submitted(self, event: Input.Submitted) -> None:
        self._choose_typed_path(event.value)

    def _choose_typed_path(self, text: str) -> None:
        entry = catalog_model(text) if text.strip() else None
        if entry is not None:  # a short name typed in the path box
            self.choose_model(entry)
            return
        try:
            path = check_model_path(text)
        except ValueError as exc:
            self._pick_error(str(exc))
            return
        self.choose_model(path)

    @on(Button.Pressed, "#browse")
    async def _toggle_tree(self) -> None:
        """The tree is made on first use, so an unused picker reads no folders."""
        found = self.query("#tree")
        if not found:
            tree = GGUFTree(self.browse_root, id="tree")
            await self.query_one("#step-pick").mount(tree, after="#path-row")
            tree.focus()
            return
        tree = found.first(GGUFTree)
        tree.display = not tree.display
        if tree.display:
            tree.focus()

    @on(DirectoryTree.FileSelected, "#tree")
    def _tree_file(self, event: DirectoryTree.FileSelected) -> None:
        event.stop()
        self._choose_typed_path(str(event.path))

    def _pick_error(self, message: str) -> None:
        self.query_one("#pick-error", Static).update(message)

    def choose_model(self, pick: ModelPick) -> None:
        """Read the model's header and fit it (in a worker; a catalogue model not assembled yet
        is assembled first); on success show step 2."""
        if isinstance(pick, Path):
            self._pick_error(f"reading {pick.name}…")
            self.read_model(pick, self._initial_slots(pick))
        else:
            self._pick_error(f"preparing {pick.label}…")
            self.assemble_model(pick)

    @work(exclusive=True, group="gguf-read", exit_on_error=False, description="assemble a model")
    async def assemble_model(self, entry: CatalogModel) -> None:
        """The file of `entry`, assembled and verified in a thread, its progress shown under
        the list; then step 2 as for any file."""

        def progress(phase: str, done: int, total: int) -> None:
            words = f"{entry.short_name}: {progress_words(phase, done, total)}"
            self.app.call_from_thread(self._pick_error, words)

        try:
            path = await asyncio.to_thread(entry.path, progress)
        except ModelFileError as exc:
            self._pick_error(f"{exc} ({exc.fix})" if exc.fix else str(exc))
            return
        self.read_model(path, self._initial_slots(path))

    def _initial_slots(self, path: Path) -> int:
        entry = self.registry.get(path) if self.registry else None
        return (entry.parallel if entry and entry.parallel else None) or (
            self.settings.local_models.managed.parallel
        )

    @work(exclusive=True, group="gguf-read", exit_on_error=False, description="read GGUF header")
    async def read_model(self, path: Path, parallel: int) -> None:
        try:
            plan = await asyncio.to_thread(self.planner, path, parallel)
        except (OSError, ValueError) as exc:  # GGUFError and KVConfigError are ValueErrors
            self._pick_error(f"{path.name}: {one_line(exc)}")
            return
        self._pick_error("")
        self._show_plan(plan)
        slots = self.query_one("#slots", Input)
        with self.prevent(Input.Changed):
            slots.value = str(plan.parallel)
        self.step = PLAN

    # --- step 2: check the fit ------------------------------------------------------------------

    def _show_plan(self, plan: LaunchPlan) -> None:
        self.plan = plan
        table = Table.grid(padding=(0, 2))
        table.add_column(style="bold", no_wrap=True)
        table.add_column(ratio=1)
        self.rows = plan_rows(plan, self.show_path)
        warn = f"bold {self.app.current_theme.warning or 'yellow'}"
        for row in self.rows:
            table.add_row(row.label, Text(row.value, style=warn if row.warn else ""))
        self.query_one("#plan-table", Static).update(table)
        self._set_plan_error("")

    @on(Input.Changed, "#slots")
    def _slots_changed(self, event: Input.Changed) -> None:
        if self.plan is None:
            return
        try:
            parallel = parse_slots(event.value)
        except ValueError as exc:
            self.workers.cancel_group(self, "fit")
            self._set_plan_error(str(exc))
            return
        if parallel != self.plan.parallel or self.plan_error:
            self.query_one("#slots-note", Static).update("re-fitting…")
            self.refit(self.plan.model_path, parallel)

    @on(Input.Submitted, "#slots")
    def _slots_submitted(self) -> None:
        self.action_primary()

    @work(exclusive=True, group="fit", exit_on_error=False, description="re-fit the context")
    async def refit(self, path: Path, parallel: int) -> None:
        try:
            plan = await asyncio.to_thread(self.planner, path, parallel)
        except (OSError, ValueError) as exc:
            self.query_one("#slots-note", Static).update(SLOTS_NOTE)
            self._set_plan_error(one_line(exc))
            return
        self.query_one("#slots-note", Static).update(SLOTS_NOTE)
        self._show_plan(plan)

    # --- buttons and keys -----------------------------------------------------------------------

    @on(Button.Pressed, "#next")
    def _next_pressed(self) -> None:
        self.action_primary()

    @on(Button.Pressed, "#back")
    def _back_pressed(self) -> None:
        self.action_back()

    def action_primary(self) -> None:
        """Next / Launch / Cancel / Retry / Done, by step."""
        if self.step == PICK:
            path_text = self.query_one("#path", Input).value
            models = self.query_one("#models", OptionList)
            if path_text.strip() or models.highlighted is None:
                self._choose_typed_path(path_text)
            else:
                self.choose_model(self.choices[models.highlighted])
        elif self.step == PLAN:
            if not self.query_one("#next", Button).disabled:
                self.start_launch()
        elif self.launch.state == "launching":
            self.cancel_launch()
        elif self.launch.state == "ready":
            self.dismiss(self.launch.choice)
        else:
            self.start_launch()

    def action_back(self) -> None:
        if self.step == PLAN:
            self.workers.cancel_group(self, "fit")
            self.step = PICK
        elif self.step == LAUNCH and self.launch.state == "failed":
            self.launch.state = "idle"
            self.step = PLAN

    def action_close(self) -> None:
        """Esc: cancel a running launch; after a launch, keep it; otherwise close with None."""
        if self.step == LAUNCH and self.launch.state == "launching":
            self.cancel_launch()
        elif self.launch.state == "ready":
            self.dismiss(self.launch.choice)
        else:
            self.dismiss(None)
