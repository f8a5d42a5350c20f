"""Provides `LaunchStep`: the launch wizard's last step, the launch, as an object it holds.

Run the injected launcher, draw its stages as they are reported, then show the ready line
(measured tok/s, the KV estimate against the server's allocation) or the failure with the server
log's tail. The wizard keeps the layout, the plan (step 2), the buttons and the `@work` that
awaits `run`; this object reaches the wizard only through `LaunchHost`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from textual.widgets import Static

from fusion_tui.config import Settings
from fusion_tui.fit.launch_plan import LaunchPlan
from fusion_tui.fit.summary import kv_check_line, one_line, stage_lines
from fusion_tui.models.registry import ModelsRegistry
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import DaemonStartError
from fusion_tui.server.launch_choice import LaunchChoice, Launcher
from fusion_tui.server.process.probe import model_display_name, ready_line
from fusion_tui.status import ServerStatus

PICK, PLAN, LAUNCH = 1, 2, 3
"""The wizard's steps: 1 pick, 2 check the fit, 3 launch."""


class LaunchHost(Protocol):
    """What the launch step uses of the wizard that holds it."""

    @property
    def query_one(self) -> Callable[..., Any]: ...

    @property
    def notify(self) -> Callable[..., Any]: ...

    def sync_buttons(self) -> None:
        """Label and enable the wizard's buttons for its step and the launch's state."""


class LaunchStep:
    """The launch: its stages, its state (`idle`, `launching`, `ready`, `failed`), its
    error, and the choice the wizard closes with once it is ready."""

    def __init__(
        self,
        host: LaunchHost,
        settings: Settings,
        paths: AppPaths | None,
        launcher: Launcher,
        registry: ModelsRegistry | None,
    ) -> None:
        self.host = host
        self.settings, self.paths = settings, paths
        self.launcher, self.registry = launcher, registry
        self.plan: LaunchPlan | None = None
        self.stages: list[ServerStatus] = []
        self.state = "idle"
        self.error = ""
        self.choice: LaunchChoice | None = None

    def begin(self, plan: LaunchPlan) -> None:
        """Clear what an earlier launch showed; the wizard then runs `run(plan)`."""
        self.plan = plan
        self.stages = []
        self.state = "launching"
        self.error = ""
        result = self.host.query_one("#launch-result", Static)
        result.update("")
        result.remove_class("-ready")
        log = self.host.query_one("#launch-log", Static)
        log.update("")
        log.remove_class("-shown")
        self.draw_stages()

    def report(self, status: ServerStatus) -> None:
        """The launcher's status callback: one line per stage."""
        self.stages.append(status)
        self.draw_stages()
        if self.state == "ready" and self.choice is not None and status.tok_s:
            self.show_ready(self.choice.connection)  # the probe landed after the ready line

    def draw_stages(self) -> None:
        plan = self.plan
        name = model_display_name(plan.model_path) if plan else "the model"
        lines = stage_lines(name, plan.parallel if plan else 0, self.stages, self.state)
        self.host.query_one("#launch-stages", Static).update("\n".join(lines))

    async def run(self, plan: LaunchPlan) -> None:
        """Launch; every failure is shown and the wizard stays open (a cancel propagates)."""
        paths = self.paths or AppPaths.default()
        try:
            conn = await self.launcher(
                self.settings, paths, self.report, model=str(plan.model_path),
                parallel=plan.parallel,
            )  # fmt: skip
        except Exception as exc:
            self.failed(exc)
            return
        self.ready(plan, conn)

    def failed(self, exc: Exception) -> None:
        self.state = "failed"
        self.error = one_line(exc)
        self.draw_stages()
        self.host.query_one("#launch-result", Static).update(f"The launch failed: {self.error}")
        tail = exc.log_tail if isinstance(exc, DaemonStartError) else ""
        if tail:
            log = self.host.query_one("#launch-log", Static)
            log.update("last lines of the server log:\n" + tail)
            log.add_class("-shown")
        self.host.sync_buttons()

    def ready(self, plan: LaunchPlan, conn: Connection) -> None:
        self.state = "ready"
        self.choice = LaunchChoice(plan.model_path, plan.parallel, plan, conn)
        self.draw_stages()
        self.show_ready(conn)
        if self.registry is not None:
            try:
                self.registry.remember(
                    plan.model_path, parallel=plan.parallel, ctx=plan.ctx,
                    prefix_reuse=plan.prefix_reuse,
                    architecture=plan.facts.architecture if plan.facts else None,
                )  # fmt: skip
            except OSError as exc:
                self.host.notify(f"Recent models not saved: {one_line(exc)}", markup=False)
        self.host.sync_buttons()

    def show_ready(self, conn: Connection) -> None:
        """The ready line (with the probe's rate once it landed) and the KV check."""
        if conn.record is not None:
            lines = [ready_line(conn.record, conn.probe)]
            lines.append(kv_check_line(conn.record.kv_estimate_bytes,
                                       conn.record.kv_allocated_bytes))  # fmt: skip
        else:
            lines = [conn.status.summary()]
        result = self.host.query_one("#launch-result", Static)
        result.update("\n".join(lines))
        result.add_class("-ready")
