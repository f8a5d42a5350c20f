"""The speculative trial's servers live only as long as the app that measures with them.

A TUI whose terminal closed during the trial (tmux kill-server) left both trial servers running,
orphaned and unknown to `fusion-tui stop`: they had been started in sessions of their own, which
a terminal's hangup does not reach. The managed server keeps its own session on purpose."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from fusion_tui.server.process import spec_trial
from fusion_tui.server.process.launch import LaunchSpec


class DeadChild:
    """A trial server that exits at once, so the trial gives up after starting them all."""

    pid = 0
    returncode = 1

    def __init__(self, argv: list[str], **kwargs: Any) -> None:
        STARTED.append(kwargs)

    def poll(self) -> int:
        return 1

    def wait(self, timeout: float | None = None) -> int:
        return 1


STARTED: list[dict[str, Any]] = []


def test_trial_servers_share_the_apps_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    STARTED.clear()
    monkeypatch.setattr(spec_trial.subprocess, "Popen", DeadChild)
    spec = LaunchSpec(model=tmp_path / "m.gguf", parallel=2, ctx=1024)
    with pytest.raises(spec_trial.TrialError):
        anyio.run(
            lambda: spec_trial.run_trial(
                spec, tmp_path / "llama-server", [("ngram-mod", ("--spec-type", "ngram-mod"))],
                tmp_path / "log",
            )
        )  # fmt: skip
    assert len(STARTED) == 2
    assert not any(kw.get("start_new_session") for kw in STARTED)
    assert STARTED[0]["stdin"] == subprocess.DEVNULL
