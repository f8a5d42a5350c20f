"""Fixtures shared by the unit tests that drive the CLI (see `cli_support.py`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from fusion_tui.paths import AppPaths
from tests.fakes.fake_server import FakeLlamaServer


@pytest.fixture
def cli_server(app_home: AppPaths, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeLlamaServer]:
    """A fake llama-server (2 slots, 8192 context) the CLI reaches in external mode."""
    with FakeLlamaServer(total_slots=2, n_ctx=8192) as server:
        monkeypatch.setenv("FUSION_TUI_SERVER__MODE", "external")
        monkeypatch.setenv("FUSION_TUI_SERVER__URL", server.url)
        yield server


@pytest.fixture
def cli_two_servers(app_home: AppPaths) -> Iterator[tuple[FakeLlamaServer, FakeLlamaServer]]:
    """Two fake llama-servers (2 slots, 8192 context each), the config file's endpoints alpha and
    beta, for the CLI."""
    with (
        FakeLlamaServer(total_slots=2, n_ctx=8192) as a,
        FakeLlamaServer(total_slots=2, n_ctx=8192) as b,
    ):
        app_home.config_dir.mkdir(parents=True, exist_ok=True)
        app_home.config_file.write_text(
            "version: 3\nserver:\n  endpoints:\n"
            f"    - url: {a.url}\n      label: alpha\n"
            f"    - url: {b.url}\n      label: beta\n"
        )
        yield a, b


@pytest.fixture
def paths(tmp_path: Path) -> AppPaths:
    """App folders below `tmp_path` (c, d, s, l); a test module may define its own."""
    return AppPaths(tmp_path / "c", tmp_path / "d", tmp_path / "s", tmp_path / "l")


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace folder `tmp_path/ws`; a test module may define its own."""
    (tmp_path / "ws").mkdir()
    return tmp_path / "ws"


@pytest.fixture
def slot_dir(tmp_path: Path) -> Path:
    """An empty folder for saved slots (a managed daemon's `--slot-save-path`)."""
    folder = tmp_path / "slots"
    folder.mkdir()
    return folder
