"""Provides the app's folders (config, data, state, logs) under platformdirs.

`FUSION_TUI_HOME` puts every folder under one root: tests and scripts use it to keep a run
self-contained without touching the user's real folders.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import platformdirs

APP_NAME = "fusion-tui"


@dataclass(frozen=True)
class AppPaths:
    """Where fusion-tui keeps its files. Folders are created on demand by `ensure`."""

    config_dir: Path
    data_dir: Path
    state_dir: Path
    log_dir: Path

    @classmethod
    def default(cls, env: dict[str, str] | None = None) -> AppPaths:
        env = dict(os.environ) if env is None else env
        home = env.get("FUSION_TUI_HOME")
        if home:
            root = Path(home).expanduser()
            return cls(root / "config", root / "data", root / "state", root / "log")
        return cls(
            Path(platformdirs.user_config_dir(APP_NAME)),
            Path(platformdirs.user_data_dir(APP_NAME)),
            Path(platformdirs.user_state_dir(APP_NAME)),
            Path(platformdirs.user_log_dir(APP_NAME)),
        )

    @property
    def config_file(self) -> Path:
        return self.config_dir / "config.yaml"

    @property
    def sessions_dir(self) -> Path:
        return self.data_dir / "sessions"

    @property
    def themes_dir(self) -> Path:
        return self.config_dir / "themes"

    @property
    def daemon_dir(self) -> Path:
        """Pid file, launch record and probe result of the managed llama-server."""
        return self.state_dir / "daemon"

    @property
    def slot_save_dir(self) -> Path:
        """Where llama-server writes saved slot KV (`--slot-save-path`)."""
        return self.state_dir / "slots"

    @property
    def models_file(self) -> Path:
        """Recent models and their profiles (prefix-reuse class and so on)."""
        return self.data_dir / "models.json"

    def ensure(self, *dirs: Path) -> None:
        for d in dirs:
            d.mkdir(parents=True, exist_ok=True, mode=0o700)
