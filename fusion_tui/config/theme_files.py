"""Provides `ThemeSpec` and the loaders for theme files: YAML in, plain dataclasses out.

Core on purpose (no Textual): a theme file is user input, so it is parsed and checked here with
one-line messages naming the file and the problem; `tui/themes.py` turns specs into Textual
themes. Loaders return `(specs, failures)` so one bad file never hides the good ones.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

import fusion_tui

COLOUR_FIELDS = (
    "primary",
    "secondary",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
    "warning",
    "error",
    "success",
)
"""Textual `Theme` colour fields; only `primary` is required."""

APP_VARIABLES: dict[str, str] = {
    "slot-idle": "#5C6773",
    "slot-processing": "#E6B450",
    "slot-side": "#B48EAD",
    "slot-pinned": "#59C2FF",
}
"""The app's own theme variables (used in TCSS as `$slot-idle` ...) and their defaults."""

TOP_LEVEL_KEYS = (
    "name",
    *COLOUR_FIELDS,
    "dark",
    "luminosity_spread",
    "text_alpha",
    "variables",
)
NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
VARIABLE_PATTERN = re.compile(r"^[a-z][a-z0-9-]*$")
MAX_THEME_BYTES = 64 * 1024


class ThemeFileError(ValueError):
    """A theme file cannot be used; the message is one line saying what is wrong."""


@dataclass(frozen=True)
class ThemeSpec:
    """One theme as written in its file, checked for shape but not yet for colour syntax."""

    name: str
    primary: str
    secondary: str | None = None
    accent: str | None = None
    foreground: str | None = None
    background: str | None = None
    surface: str | None = None
    panel: str | None = None
    boost: str | None = None
    warning: str | None = None
    error: str | None = None
    success: str | None = None
    dark: bool = True
    luminosity_spread: float = 0.15
    text_alpha: float = 0.95
    variables: dict[str, str] = field(default_factory=dict)
    """Textual's own variables (`footer-key-foreground` ...) and the app's (`slot-idle` ...)."""
    source: Path | None = None
    """The file it came from, for messages."""

    def colours(self) -> dict[str, str]:
        """The colour fields that are set, by field name."""
        return {n: v for n in COLOUR_FIELDS if (v := getattr(self, n)) is not None}


@dataclass(frozen=True)
class ThemeFailure:
    """A theme file that was skipped, and why."""

    path: Path
    problem: str

    def message(self) -> str:
        return f"{self.path.name}: {self.problem}"


def parse_theme(text: str, source: Path | None = None) -> ThemeSpec:
    """Parse one theme file's text; raises `ThemeFileError` with a one-line reason."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or "cannot be parsed"
        raise ThemeFileError(f"{where}invalid YAML ({problem})") from None
    if not isinstance(raw, dict):
        raise ThemeFileError("the top level must be a mapping of theme fields (name, primary, ...)")
    unknown = sorted(str(k) for k in raw if k not in TOP_LEVEL_KEYS)
    if unknown:
        raise ThemeFileError(f"unknown field {unknown[0]!r} (known: {', '.join(TOP_LEVEL_KEYS)})")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise ThemeFileError(
            f"'name' should be lower-case letters, digits and dashes (at most 40), not {name!r}"
        )
    colours = {key: _colour(raw, key) for key in COLOUR_FIELDS}
    primary = colours.pop("primary")
    if primary is None:
        raise ThemeFileError("'primary' is required (a colour such as '#4EA8DE')")
    return ThemeSpec(
        name=name,
        primary=primary,
        **colours,
        dark=_bool(raw, "dark", True),
        luminosity_spread=_fraction(raw, "luminosity_spread", 0.15),
        text_alpha=_fraction(raw, "text_alpha", 0.95),
        variables=_variables(raw.get("variables")),
        source=source,
    )


def load_theme_file(path: Path) -> ThemeSpec:
    """Read and parse one file; every problem becomes a `ThemeFileError`."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ThemeFileError(f"cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_THEME_BYTES:
        raise ThemeFileError(f"too large ({len(data):,} bytes; a theme is under 64 KiB)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ThemeFileError("not UTF-8 text") from None
    return parse_theme(text, path)


def theme_files(folder: Path) -> list[Path]:
    """The `*.yaml` / `*.yml` files of `folder`, sorted by name; none if it does not exist."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())


def load_theme_specs(paths: Iterable[Path]) -> tuple[list[ThemeSpec], list[ThemeFailure]]:
    """Parse every file; a later file with the same theme name replaces an earlier one."""
    specs: dict[str, ThemeSpec] = {}
    failures: list[ThemeFailure] = []
    for path in paths:
        try:
            spec = load_theme_file(path)
        except ThemeFileError as exc:
            failures.append(ThemeFailure(path, str(exc)))
            continue
        specs[spec.name] = spec
    return list(specs.values()), failures


def load_theme_dir(folder: Path) -> tuple[list[ThemeSpec], list[ThemeFailure]]:
    return load_theme_specs(theme_files(folder))


def builtin_themes_dir() -> Path:
    """Where the shipped themes are: `fusion_tui/themes` when installed as package data, else the
    top-level `themes/` beside the package (a source checkout or an editable install)."""
    package = Path(fusion_tui.__file__).resolve().parent
    for candidate in (package / "themes", package.parent / "themes"):
        if candidate.is_dir():
            return candidate
    return package / "themes"


# --- field checks --------------------------------------------------------------------------


def _colour(raw: dict[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ThemeFileError(f"{key!r} should be a colour such as '#4EA8DE', not {value!r}")
    return value.strip()


def _bool(raw: dict[str, Any], key: str, default: bool) -> bool:
    value = raw.get(key, default)
    if not isinstance(value, bool):
        raise ThemeFileError(f"{key!r} should be true or false, not {value!r}")
    return value


def _fraction(raw: dict[str, Any], key: str, default: float) -> float:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ThemeFileError(f"{key!r} should be a number from 0 to 1, not {value!r}")
    return float(value)


def _variables(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ThemeFileError("'variables' should be a mapping of name: value")
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not VARIABLE_PATTERN.match(key):
            raise ThemeFileError(f"variable name {key!r} should be like 'slot-idle'")
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ThemeFileError(f"variable {key!r} should be a CSS value, not {item!r}")
        out[key] = str(item).strip()
    return out
