"""Provides `WizardLaunch`: the launch wizard's step numbers and its last step, the launch.

The base of `LaunchWizard` (a screen class, so Textual wires its workers): run the injected
launcher in a worker, draw its stages as they are reported, then show the ready line (measured
tok/s, the KV estimate against the server's allocation) or the failure with the server log's tail.
The wizard supplies the layout, the plan (step 2) and the buttons.
"""

from __future__ import annotations

import asyncio

from textual import work
from textual.reactive import reactive
from textual.screen import ModalScreen
from textual.widgets import Static

from fusion_tui.config import Settings
from fusion_tui.fit.launch_plan import LaunchPlan
from fusion_tui.fit.summary import kv_check_line, one_line, stage_lines
from fusion_tui.models_registry import ModelsRegistry
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import DaemonStartError
from fusion_tui.server.launch_choice import LaunchChoice, Launcher
from fusion_tui.server.process.probe import model_display_name, ready_line
from fusion_tui.status import ServerStatus

PICK, PLAN, LAUNCH = 1, 2, 3


class WizardLaunch(ModalScreen[LaunchChoice | None]):
    """Step 3 of the wizard and the state it shares with the other steps."""

    step: reactive[int] = reactive(PICK, init=False)
    """1 pick, 2 check the fit, 3 launch."""

    # Set by `LaunchWizard.__init__`.
    settings: Settings
    paths: AppPaths | None
    launcher: Launcher
    registry: ModelsRegistry | None
    plan: LaunchPlan | None
    stages: list[ServerStatus]
    launch_state: str
    """`idle`, `launching`, `ready`, `failed`."""
    launch_error: str
    choice: LaunchChoice | None

    def _sync_buttons(self) -> None:
        """Label and enable the buttons for the current step (the wizard's layout)."""
        raise NotImplementedError

    def _set_plan_error(self, message: str) -> None:
        """Show why the current slot count cannot launch (the wizard's step 2)."""
        raise NotImplementedError

    def start_launch(self) -> None:
        if self.plan is None:
            return
        self.stages = []
        self.launch_state = "launching"
        self.launch_error = ""
        self.query_one("#launch-result", Static).update("")
        self.query_one("#launch-result", Static).remove_class("-ready")
        log = self.query_one("#launch-log", Static)
        log.update("")
        log.remove_class("-shown")
        self._draw_stages()
        self.step = LAUNCH
        self._sync_buttons()
        self.run_launch(self.plan)

    def report(self, status: ServerStatus) -> None:
        """The launcher's status callback: one line per stage."""
        self.stages.append(status)
        self._draw_stages()
        if self.launch_state == "ready" and self.choice is not None and status.tok_s:
            self._show_ready(self.choice.connection)  # the probe landed after the ready line

    def _draw_stages(self) -> None:
        plan = self.plan
        name = model_display_name(plan.model_path) if plan else "the model"
        lines = stage_lines(name, plan.parallel if plan else 0, self.stages, self.launch_state)
        self.query_one("#launch-stages", Static).update("\n".join(lines))

    @work(exclusive=True, group="launch", exit_on_error=False, description="launch llama-server")
    async def run_launch(self, plan: LaunchPlan) -> None:
        paths = self.paths or AppPaths.default()
        try:
            conn = await self.launcher(
                self.settings, paths, self.report, model=str(plan.model_path),
                parallel=plan.parallel,
            )  # fmt: skip
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure is shown, the wizard stays open
            self._launch_failed(exc)
            return
        self._launch_ready(plan, conn)

    def _launch_failed(self, exc: Exception) -> None:
        self.launch_state = "failed"
        self.launch_error = one_line(exc)
        self._draw_stages()
        self.query_one("#launch-result", Static).update(f"The launch failed: {self.launch_error}")
        tail = exc.log_tail if isinstance(exc, DaemonStartError) else ""
        if tail:
            log = self.query_one("#launch-log", Static)
            log.update("last lines of the server log:\n" + tail)
            log.add_class("-shown")
        self._sync_buttons()

    def _launch_ready(self, plan: LaunchPlan, conn: Connection) -> None:
        self.launch_state = "ready"
        self.choice = LaunchChoice(plan.model_path, plan.parallel, plan, conn)
        self._draw_stages()
        self._show_ready(conn)
        if self.registry is not None:
            try:
                self.registry.remember(
                    plan.model_path, parallel=plan.parallel, ctx=plan.ctx,
                    prefix_reuse=plan.prefix_reuse,
                    architecture=plan.facts.architecture if plan.facts else None,
                )  # fmt: skip
            except OSError as exc:
                self.notify(f"Recent models not saved: {one_line(exc)}", markup=False)
        self._sync_buttons()

    def _show_ready(self, conn: Connection) -> None:
        """The ready line (with the probe's rate once it landed) and the KV check."""
        if conn.record is not None:
            lines = [ready_line(conn.record, conn.probe)]
            lines.append(kv_check_line(conn.record.kv_estimate_bytes,
                                       conn.record.kv_allocated_bytes))  # fmt: skip
        else:
            lines = [conn.status.summary()]
        result = self.query_one("#launch-result", Static)
        result.update("\n".join(lines))
        result.add_class("-ready")

    def cancel_launch(self) -> None:
        self.workers.cancel_group(self, "launch")
        self.launch_state = "idle"
        self.step = PLAN
        self._set_plan_error("launch cancelled")
