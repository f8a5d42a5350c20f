"""Provides `load_settings`: config.yaml plus `FUSION_TUI_*` overrides, validated and migrated.

An invalid file is reported with its path, line and column and is never overwritten.
"""

from __future__ import annotations

import dataclasses
import math
import os
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from fusion_tui.config.checks import CheckError, check_settings
from fusion_tui.config.migrations import migrate
from fusion_tui.config.settings import SCHEMA_VERSION, Settings

ENV_PREFIX = "FUSION_TUI_"
CHOICES: dict[tuple[str, ...], tuple[str, ...]] = {
    ("server", "mode"): ("managed", "external"),
    ("localModels", "managed", "swaFull"): ("auto", "on", "off"),
    ("localModels", "managed", "flashAttn"): ("auto", "on", "off"),
    ("localModels", "managed", "threads"): ("auto",),
}
CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "turbo3")
CHOICES[("localModels", "managed", "cacheTypeK")] = CACHE_TYPES
CHOICES[("localModels", "managed", "cacheTypeV")] = CACHE_TYPES
ON_OFF_TEXT = {("localModels", "managed", "speculative")}
"""Free-text settings where `off` is a value: YAML 1.1 reads a bare `off` as false."""
RESERVED_ENV = {"FUSION_TUI_HOME", "FUSION_TUI_CONFIG", "FUSION_TUI_API_KEY"}


class ConfigError(Exception):
    """The config file (or an override) is unusable; the message names the file and place."""


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def config_path(default: Path, env: Mapping[str, str]) -> Path:
    override = env.get("FUSION_TUI_CONFIG")
    return Path(override).expanduser() if override else default


def load_settings(path: Path, env: Mapping[str, str] | None = None) -> Settings:
    """Read `path` (missing file: defaults), apply migrations and environment overrides."""
    env = os.environ if env is None else env
    raw: dict[str, Any] = {}
    text = ""
    if path.exists():
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read: {exc}") from exc
        try:
            loaded = yaml.safe_load(text)
        except RecursionError:
            raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise ConfigError(f"{path}{where}: invalid YAML: {problem}") from exc
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(f"{path}:1:1: the top level must be a mapping of settings")
        raw = loaded
    try:
        raw = migrate(raw)
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from exc
    _apply_env(raw, env)
    try:
        settings: Settings = _build(Settings, raw, ())
        try:
            check_settings(settings)
        except CheckError as exc:
            raise _FieldError(exc.path, exc.reason) from None
        return settings
    except _FieldError as exc:
        raise ConfigError(f"{path}{_locate(text, exc.path)}: {exc.dotted}: {exc.reason}") from None


# --- environment overrides -----------------------------------------------------------------


def _apply_env(raw: dict[str, Any], env: Mapping[str, str]) -> None:
    """`FUSION_TUI_LOCALMODELS__MANAGED__PARALLEL=2` sets localModels.managed.parallel."""
    for key, value in sorted(env.items()):
        if not key.startswith(ENV_PREFIX) or key in RESERVED_ENV:
            continue
        parts = key[len(ENV_PREFIX) :].lower().split("__")
        node: Any = Settings
        target = raw
        names: list[str] = []
        for i, part in enumerate(parts):
            fields = {camel(f.name).lower(): f for f in dataclasses.fields(node)}
            if part not in fields:
                raise ConfigError(f"environment {key}: no setting {part!r} here")
            name = camel(fields[part].name)
            names.append(name)
            if i == len(parts) - 1:
                target[name] = yaml.safe_load(value) if value else None
            else:
                node = _dataclass_of(_hints(node)[fields[part].name])
                if node is None:
                    raise ConfigError(f"environment {key}: {'.'.join(names)} is not a section")
                child = target.get(name)
                if not isinstance(child, dict):
                    child = target[name] = {}
                target = child


# --- building the dataclasses ---------------------------------------------------------------


class _FieldError(Exception):
    def __init__(self, path: tuple[str, ...], reason: str) -> None:
        super().__init__(reason)
        self.path = path
        self.reason = reason

    @property
    def dotted(self) -> str:
        """`server.endpoints[1].url`: list indexes in brackets."""
        out = ""
        for part in self.path:
            out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
        return out or "(top level)"


def _hints(cls: Any) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _dataclass_of(tp: Any) -> Any:
    return tp if dataclasses.is_dataclass(tp) else None


def _build(cls: Any, raw: Any, path: tuple[str, ...]) -> Any:
    if not isinstance(raw, dict):
        raise _FieldError(path, "should be a mapping")
    hints = _hints(cls)
    by_key = {camel(f.name): f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in by_key:
            known = ", ".join(sorted(by_key))
            raise _FieldError((*path, str(key)), f"unknown setting (known here: {known})")
        f = by_key[key]
        kwargs[f.name] = _convert(hints[f.name], value, (*path, key))
    return cls(**kwargs)


def _convert(tp: Any, value: Any, path: tuple[str, ...]) -> Any:
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None:
            return None
        if str in args and isinstance(value, str):  # `threads: auto` or a number
            return _convert(str, value, path)
        return _convert(args[0], value, path)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value if value is not None else {}, path)
    if origin is tuple and dataclasses.is_dataclass(typing.get_args(tp)[0]):
        if not isinstance(value, list):
            raise _FieldError(path, "should be a list (one `- ` entry per item)")
        item = typing.get_args(tp)[0]
        return tuple(_build(item, v, (*path, str(i))) for i, v in enumerate(value))
    if origin is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise _FieldError(path, "should be a list of strings")
        return tuple(value)
    if origin is dict:
        if not isinstance(value, dict):
            raise _FieldError(path, "should be a mapping")
        for k, v in value.items():
            if isinstance(v, bool) or not isinstance(v, str | int | float):
                raise _FieldError((*path, str(k)), f"should be text, not {v!r}")
        return {str(k): str(v) for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise _FieldError(path, f"should be true or false, not {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _FieldError(path, f"should be a whole number, not {value!r}")
        if value < 0:
            raise _FieldError(path, f"should not be negative, not {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _FieldError(path, f"should be a number, not {value!r}")
        if not math.isfinite(value):
            raise _FieldError(path, f"should be a finite number, not {value!r}")
        return float(value)
    if tp is str:
        choices = CHOICES.get(path)
        if isinstance(value, bool) and ((choices and "on" in choices) or path in ON_OFF_TEXT):
            value = "on" if value else "off"  # YAML 1.1 reads a bare on/off as a boolean
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise _FieldError(path, f"should be text, not {value!r}")
        if choices and str(value) not in choices:
            raise _FieldError(path, f"should be one of {', '.join(choices)}, not {value!r}")
        return str(value)
    raise _FieldError(path, f"unsupported setting type {tp!r}")  # pragma: no cover


def _locate(text: str, path: tuple[str, ...]) -> str:
    """`:line:column` of the YAML node at `path`, or '' when it is not in the file."""
    if not text:
        return ""
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return ""
    found = None
    for part in path:
        if isinstance(node, yaml.SequenceNode) and part.isdigit():
            if int(part) >= len(node.value):
                break
            found = node = node.value[int(part)]
            continue
        if not isinstance(node, yaml.MappingNode):
            break
        for key_node, value_node in node.value:
            if key_node.value == part:
                found, node = value_node, value_node
                break
        else:
            break
    if found is None:
        return ""
    return f":{found.start_mark.line + 1}:{found.start_mark.column + 1}"


def settings_to_dict(settings: Settings) -> dict[str, Any]:
    """The settings in config-file form (camelCase keys), for `config show`."""

    def conv(obj: Any) -> Any:
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return {camel(f.name): conv(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        if isinstance(obj, tuple):
            return [conv(item) for item in obj]
        if isinstance(obj, dict):
            return dict(obj)
        return obj

    out = conv(settings)
    assert isinstance(out, dict)
    out["version"] = SCHEMA_VERSION
    return out
