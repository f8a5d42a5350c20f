"""Provides what the launch wizard needs from the core: the launcher shape, its result, and the
plan it shows (the same plan `server.connect.plan_spec` makes, without the file-size fallback)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from fusion_tui.config import Settings
from fusion_tui.fit.launch_plan import LaunchPlan
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, StatusReport, plan_for


class Launcher(Protocol):
    """What the wizard calls to launch: `server.connect.connect` or anything shaped like it."""

    def __call__(
        self,
        settings: Settings,
        paths: AppPaths,
        report: StatusReport | None = None,
        *,
        model: str | None = None,
        parallel: int | None = None,
        ctx: int | None = None,
    ) -> Awaitable[Connection]: ...


Planner = Callable[[Path, int], LaunchPlan]


@dataclass(frozen=True)
class LaunchChoice:
    """The wizard's result: the model and slot count that are now being served."""

    model_path: Path
    parallel: int
    plan: LaunchPlan
    connection: Connection
    """The ready connection the launcher returned (the caller owns its client from now on)."""


def plan_with_settings(settings: Settings, model: Path, parallel: int) -> LaunchPlan:
    """The plan `server.connect.plan_spec` makes for the same model and slots, without fallback: the
    wizard refuses an unreadable header with its reason rather than guessing."""
    return plan_for(settings, model, parallel=parallel, allow_fallback=False)
