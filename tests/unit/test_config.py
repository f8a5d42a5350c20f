"""Config: defaults, validation with line and column, migrations, environment overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.config import SCHEMA_VERSION, ConfigError, Settings, load_settings
from fusion_tui.config.loader import settings_to_dict


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "none.yaml", env={})
    assert settings == Settings()
    assert settings.local_models.managed.swa_full == "auto"
    assert settings.agent.task.max_duration_ms == 7_200_000


def test_camel_case_keys_map_to_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "version: 2\nlocalModels:\n  firstTokenTimeoutMs: 5000\n  managed:\n"
        "    parallel: 2\n    kvUnified: true\nagent:\n  task:\n    finalizationMs: 10\n",
    )
    settings = load_settings(path, env={})
    assert settings.local_models.first_token_timeout_ms == 5000
    assert settings.local_models.managed.parallel == 2
    assert settings.local_models.managed.kv_unified is True
    assert settings.agent.task.finalization_ms == 10


def test_wrong_type_names_file_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, "version: 2\nlocalModels:\n  managed:\n    parallel: four\n")
    with pytest.raises(ConfigError) as err:
        load_settings(path, env={})
    assert str(err.value).startswith(f"{path}:4:15: localModels.managed.parallel")
    assert path.read_text().endswith("parallel: four\n")  # never overwritten


def test_invalid_yaml_is_reported_with_position(tmp_path: Path) -> None:
    path = write(tmp_path, "ui:\n  theme: [dark\n")
    with pytest.raises(ConfigError, match=r"config.yaml:\d+:\d+: invalid YAML"):
        load_settings(path, env={})


def test_unknown_key_and_bad_choice_are_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ui\.colour: unknown setting"):
        load_settings(write(tmp_path, "ui:\n  colour: red\n"), env={})
    with pytest.raises(ConfigError, match="should be one of auto, on, off"):
        load_settings(write(tmp_path, "localModels:\n  managed:\n    swaFull: maybe\n"), env={})


def test_version_1_file_migrates_swa_full_to_auto_and_keeps_the_rest(tmp_path: Path) -> None:
    path = write(tmp_path, "version: 1\nlocalModels:\n  managed:\n    parallel: 3\n")
    before = path.read_text()
    settings = load_settings(path, env={})
    assert settings.local_models.managed.swa_full == "auto"
    assert settings.local_models.managed.parallel == 3
    assert settings.version == SCHEMA_VERSION
    assert path.read_text() == before  # migrations never rewrite the file


def test_future_version_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="newer than this fusion-tui understands"):
        load_settings(write(tmp_path, f"version: {SCHEMA_VERSION + 1}\n"), env={})


def test_environment_overrides_win(tmp_path: Path) -> None:
    path = write(tmp_path, "localModels:\n  managed:\n    parallel: 3\n")
    env = {
        "FUSION_TUI_LOCALMODELS__MANAGED__PARALLEL": "6",
        "FUSION_TUI_UI__THEME": "fusion-light",
        "FUSION_TUI_HOME": "/ignored",
    }
    settings = load_settings(path, env=env)
    assert settings.local_models.managed.parallel == 6
    assert settings.ui.theme == "fusion-light"


def test_bad_environment_override_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="FUSION_TUI_UI__NOPE"):
        load_settings(tmp_path / "none.yaml", env={"FUSION_TUI_UI__NOPE": "1"})


def test_settings_to_dict_round_trips(tmp_path: Path) -> None:
    import yaml

    settings = Settings()
    path = write(tmp_path, yaml.safe_dump(settings_to_dict(settings)))
    assert load_settings(path, env={}) == settings


def test_bare_on_and_off_mean_the_words_not_booleans(tmp_path: Path) -> None:
    path = write(tmp_path, "localModels:\n  managed:\n    swaFull: off\n    flashAttn: on\n")
    managed = load_settings(path, env={}).local_models.managed
    assert (managed.swa_full, managed.flash_attn) == ("off", "on")
