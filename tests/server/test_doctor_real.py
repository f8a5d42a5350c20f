"""`fusion-tui doctor` on the real llama-server and the demo model: every check passes, the
one-token start measures a rate, and the throwaway server is gone afterwards."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fusion_tui.cli.doctor_checks import passed, run_checks
from fusion_tui.paths import AppPaths
from tests.child_env import child_env
from tests.fault.realserver import processes_with

pytestmark = pytest.mark.server


async def test_doctor_passes_on_the_demo_model(
    app_home: AppPaths, llama_server_bin: Path, demo_model: Path
) -> None:
    app_home.config_dir.mkdir(parents=True)
    app_home.config_file.write_text(
        f"server:\n  binary: {llama_server_bin}\nlocalModels:\n  model: {demo_model}\n"
        "  managed:\n    threads: 2\n"
    )
    checks = await run_checks(app_home, {})
    found = {c.name: c for c in checks}
    assert passed(checks), [c for c in checks if not c.ok]
    assert all(c.ok for c in checks)
    assert "version" in found["llama-server"].detail
    assert "answered 1 token" in found["server start"].detail
    rate = float(found["tok/s"].detail.split()[0])
    assert rate > 0
    assert processes_with("fusion-doctor-") == []  # the throwaway server was stopped
    assert not app_home.daemon_dir.exists()  # the user's managed server files were not touched


def test_doctor_json_from_the_command_line(
    tmp_path: Path, llama_server_bin: Path, demo_model: Path
) -> None:
    env = child_env(
        tmp_path / "home",
        FUSION_TUI_SERVER__BINARY=str(llama_server_bin),
        FUSION_TUI_LOCALMODELS__MODEL=str(demo_model),
    )
    done = subprocess.run(
        [sys.executable, "-m", "fusion_tui", "doctor", "--json"],
        capture_output=True, text=True, timeout=300, env=env, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    checks = json.loads(done.stdout)
    assert [c["name"] for c in checks][-2:] == ["server start", "tok/s"]
    assert all(c["ok"] for c in checks)
