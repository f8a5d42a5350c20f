"""Shared fixtures: an isolated app home, and the real llama-server and demo model.

Under CI=true a missing llama-server, demo model, sliding-window test model or a coder model
fails the test; elsewhere it skips.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fusion_tui.models.demo import INSTALL_HINT, demo_model_path
from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import BinaryNotFound
from fusion_tui.server.process.binary import find_llama_server
from tests.models import (
    CODER_05B_INSTALL_HINT,
    CODER_15B_INSTALL_HINT,
    GEMMA3_INSTALL_HINT,
    assemble_coder,
    assemble_gemma3,
)

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _missing(what: str) -> None:
    if IN_CI:
        pytest.fail(f"{what} (CI=true: a missing server or model is a failure, never a skip)")
    pytest.skip(what)


@pytest.fixture
def app_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AppPaths:
    """Every app folder under a temporary root; no FUSION_TUI_* settings leak in."""
    for key in list(os.environ):
        if key.startswith("FUSION_TUI_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("FUSION_TUI_HOME", str(tmp_path / "home"))
    return AppPaths.default()


@pytest.fixture(scope="session")
def llama_server_bin() -> Path:
    try:
        return find_llama_server()
    except BinaryNotFound as exc:
        _missing(str(exc))
        raise


@pytest.fixture(scope="session")
def demo_model() -> Path:
    path = demo_model_path()
    if path is None:
        _missing("The demo model is not installed. " + INSTALL_HINT)
        raise AssertionError("unreachable")
    return path


@pytest.fixture(scope="session")
def gemma3_model() -> Path:
    """Gemma 3 270M Q4_K_M (15 of 18 layers slide over 512 tokens), assembled and verified once."""
    path = assemble_gemma3()
    if path is None:
        _missing("The sliding-window test model is not installed. " + GEMMA3_INSTALL_HINT)
        raise AssertionError("unreachable")
    return path


@pytest.fixture(scope="session")
def coder_15b_model() -> Path:
    """Qwen2.5-Coder-1.5B-Instruct Q4_K_M, the agent's default model, assembled and verified
    once (the agent's real-model tests)."""
    path = assemble_coder("coder-1.5b")
    if path is None:
        _missing("The 1.5B coder model is not installed. " + CODER_15B_INSTALL_HINT)
        raise AssertionError("unreachable")
    return path


@pytest.fixture(scope="session")
def coder_05b_model() -> Path:
    """Qwen2.5-Coder-0.5B-Instruct Q4_K_M, the smallest coder, assembled and verified once."""
    path = assemble_coder("coder-0.5b")
    if path is None:
        _missing("The 0.5B coder model is not installed. " + CODER_05B_INSTALL_HINT)
        raise AssertionError("unreachable")
    return path
