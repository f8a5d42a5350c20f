"""Provides the theme wiring: shipped and user theme files → Textual `Theme`s on the app.

Files are parsed in core (`fusion_tui.config.theme_files`); here colours are checked with
Textual's own parser, so a theme that would break the stylesheet is skipped at load time instead
of failing when the user picks it. Failures are collected and shown in one notification.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from textual.app import App
from textual.color import Color, ColorParseError
from textual.theme import Theme

from fusion_tui.config.theme_files import (
    APP_VARIABLES,
    ThemeFailure,
    ThemeFileError,
    ThemeSpec,
    builtin_themes_dir,
    load_theme_dir,
)

DEFAULT_THEME = "fusion-dark"
"""Used when the configured theme is unknown (and the fallback of the fallback)."""
HIDDEN_BUILTINS = ("textual-ansi",)
"""Textual themes not offered: ANSI colours ignore the slot-state variables."""
TEXT_STYLES = frozenset(
    [
        "none",
        "bold",
        "dim",
        "italic",
        "underline",
        "underline2",
        "reverse",
        "strike",
        "blink",
        "overline",
        "not",
    ]
)
_ALPHA_SUFFIX = re.compile(r"^(?P<base>.+?)\s+(?P<alpha>\d{1,3}(\.\d+)?)%$")


@dataclass
class ThemeCatalog:
    """What loading found: usable themes (shipped first, then the user's) and skipped files."""

    themes: list[Theme] = field(default_factory=list)
    failures: list[ThemeFailure] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [t.name for t in self.themes]


def check_css_value(name: str, value: str) -> None:
    """A theme variable is a colour, optionally with `NN%` alpha (`auto 80%` too), or for
    `*-text-style` variables a list of styles (`bold reverse`)."""
    if name.endswith("text-style"):
        bad = [w for w in value.split() if w not in TEXT_STYLES]
        if bad or not value.split():
            raise ThemeFileError(f"{name!r}: {value!r} is not a text style (try 'bold')")
        return
    match = _ALPHA_SUFFIX.match(value)
    base = match.group("base") if match else value
    if match and float(match.group("alpha")) > 100:
        raise ThemeFileError(f"{name!r}: alpha {match.group('alpha')}% is over 100%")
    if base == "auto" and match:
        return
    try:
        Color.parse(base)
    except ColorParseError:
        raise ThemeFileError(f"{name!r}: {value!r} is not a colour (try '#4EA8DE')") from None


def to_textual_theme(spec: ThemeSpec) -> Theme:
    """Build a Textual theme, raising `ThemeFileError` if any colour or variable is unusable."""
    for name, value in spec.colours().items():
        check_css_value(name, value)
    for name, value in spec.variables.items():
        check_css_value(name, value)
    theme = Theme(
        name=spec.name,
        primary=spec.primary,
        secondary=spec.secondary,
        accent=spec.accent,
        foreground=spec.foreground,
        background=spec.background,
        surface=spec.surface,
        panel=spec.panel,
        boost=spec.boost,
        warning=spec.warning,
        error=spec.error,
        success=spec.success,
        dark=spec.dark,
        luminosity_spread=spec.luminosity_spread,
        text_alpha=spec.text_alpha,
        variables={**APP_VARIABLES, **spec.variables},
    )
    try:
        theme.to_color_system().generate()
    except Exception as exc:  # Textual raises several types here; all mean "unusable"
        raise ThemeFileError(f"Textual cannot use these colours ({exc})") from None
    return theme


def load_themes(user_dir: Path | None, builtin_dir: Path | None = None) -> ThemeCatalog:
    """Shipped themes, then the user's (a user theme may replace a shipped one by name)."""
    catalog = ThemeCatalog()
    by_name: dict[str, Theme] = {}
    folders = [builtin_dir or builtin_themes_dir()]
    if user_dir is not None:
        folders.append(user_dir)
    for folder in folders:
        specs, failures = load_theme_dir(folder)
        catalog.failures.extend(failures)
        for spec in specs:
            try:
                by_name[spec.name] = to_textual_theme(spec)
            except ThemeFileError as exc:
                catalog.failures.append(ThemeFailure(spec.source or folder, str(exc)))
    catalog.themes = list(by_name.values())
    return catalog


def failures_message(failures: Sequence[ThemeFailure]) -> str:
    """One notification body for every skipped file (plain text: show with markup=False)."""
    lines = [f.message() for f in failures]
    return "\n".join(lines) + "\nThese themes were skipped; fix the file and restart."


def install_themes(app: App[Any], catalog: ThemeCatalog) -> None:
    for name in HIDDEN_BUILTINS:
        app.unregister_theme(name)
    for theme in catalog.themes:
        app.register_theme(theme)


def choose_theme(app: App[Any], wanted: str) -> str | None:
    """Switch to `wanted`; if it is unknown, to the default. Returns a problem to show, or None."""
    if wanted in app.available_themes:
        app.theme = wanted
        return None
    fallback = DEFAULT_THEME if DEFAULT_THEME in app.available_themes else "textual-dark"
    app.theme = fallback
    return f"Theme {wanted!r} is not available (no such theme file?); using {fallback}."
