"""Provides versioned YAML settings with environment overrides."""

from fusion_tui.config.loader import ConfigError, load_settings, settings_to_dict
from fusion_tui.config.settings import SCHEMA_VERSION, Settings

__all__ = ["SCHEMA_VERSION", "ConfigError", "Settings", "load_settings", "settings_to_dict"]
