"""`agent.maxTokens`: the longest reply one agent step may write."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.agent.session_run import agent_config
from fusion_tui.config import Settings
from fusion_tui.config.loader import ConfigError, load_settings


def _settings(tmp_path: Path, **env: str) -> Settings:
    return load_settings(tmp_path / "config.yaml", env=env)


def test_by_default_a_step_has_room_for_a_whole_file(tmp_path: Path) -> None:
    assert agent_config(_settings(tmp_path)).n_predict == 2048
    raised = _settings(tmp_path, FUSION_TUI_LLM__MAXTOKENS="4096")
    assert agent_config(raised).n_predict == 4096


def test_the_agent_key_caps_a_step_below_the_chat_setting(tmp_path: Path) -> None:
    capped = _settings(tmp_path, FUSION_TUI_AGENT__MAXTOKENS="300")
    assert agent_config(capped).n_predict == 300
    assert agent_config(capped).summary_n_predict == 300  # the closing summary is a reply too


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_a_bound_that_allows_no_reply_is_refused_by_name(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"agent\.maxTokens"):
        _settings(tmp_path, FUSION_TUI_AGENT__MAXTOKENS=value)
