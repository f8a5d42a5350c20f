"""Fixtures shared by the unit tests that drive the CLI (see `cli_support.py`)."""

from __future__ import annotations

from collections.abc import Iterator

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
