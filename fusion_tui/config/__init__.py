"""Provides versioned YAML settings with environment overrides.

`settings.py` holds the typed settings (the defaults), `loader.py` reads `config.yaml` (errors with
file:line:column, the file never overwritten) and applies `FUSION_TUI_...` environment overrides,
`migrations.py` brings an older file's version up to date, `checks.py` holds the cross-field rules
of `server.endpoints` and `localModels.managed.rpc`, `speculative.py` the values
`localModels.managed.speculative` may take, `persist.py` writes one setting back safely
(the theme, the wizard's launch), and `theme_files.py` reads the theme files (shipped, and the
user's beside the config file) into plain specs. The bottom layer: it imports only `atomic` (and
YAML); anything may import it.
"""

from fusion_tui.config.loader import ConfigError, load_settings, settings_to_dict
from fusion_tui.config.settings import SCHEMA_VERSION, Settings

__all__ = ["SCHEMA_VERSION", "ConfigError", "Settings", "load_settings", "settings_to_dict"]
