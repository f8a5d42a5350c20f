"""Provides `persist_setting`: write one setting (e.g. `ui.theme`) into config.yaml, safely.

The user's file is precious: an invalid file is never overwritten, the previous version is kept
as `config.yaml.bak`, the change is a small in-place edit (comments and the other settings stay
as written), the result is checked by loading it, and the write is atomic (temp file + rename).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fusion_tui.atomic import atomic_write
from fusion_tui.config.loader import ConfigError, load_settings
from fusion_tui.config.settings import SCHEMA_VERSION


class PersistError(Exception):
    """The setting was not saved; the message says why and that the file was left unchanged."""


@dataclass(frozen=True)
class Persisted:
    path: Path
    backup: Path | None
    """The copy of the previous file, or None when there was no file yet."""
    changed: bool
    """False when the file already said so (nothing was written)."""


def backup_path(path: Path) -> Path:
    return path.with_name(path.name + ".bak")


def persist_setting(path: Path, dotted: str, value: Any) -> Persisted:
    """Set `dotted` (config-file names, e.g. `ui.theme`) to `value` in the file at `path`."""
    keys = tuple(dotted.split("."))
    if not all(keys):
        raise PersistError(f"{dotted!r} is not a setting name")
    if not path.exists():
        text = yaml.safe_dump(_nest(keys, value, {"version": SCHEMA_VERSION}), sort_keys=False)
        _check(text, path, keys, value)
        _write_atomic(path, text)
        return Persisted(path, None, True)
    try:
        old = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PersistError(f"{path}: cannot read ({exc}); the setting was not saved") from None
    try:
        load_settings(path, env={})
    except ConfigError as exc:
        raise PersistError(f"{exc} — fix the file first; it was left unchanged") from None
    if _current(old, keys) == value:
        return Persisted(path, None, False)
    new = _edit_in_place(old, keys, value)
    if not _reads_back(new, keys, value):  # an odd layout: rewrite whole rather than guess
        new = yaml.safe_dump(_nest(keys, value, yaml.safe_load(old)), sort_keys=False)
    _check(new, path, keys, value)
    backup = backup_path(path)
    shutil.copy2(path, backup)
    _write_atomic(path, new)
    return Persisted(path, backup, True)


# --- editing ----------------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    """`value` as one YAML flow scalar, e.g. `fusion-dark`, `'yes'`, `true`."""
    dumped = yaml.safe_dump([value], default_flow_style=True, width=10_000).strip()
    return dumped[1:-1]


def _nest(keys: tuple[str, ...], value: Any, base: dict[str, Any]) -> dict[str, Any]:
    node = base
    for key in keys[:-1]:
        node = node.setdefault(key, {})
    node[keys[-1]] = value
    return base


def _current(text: str, keys: tuple[str, ...]) -> Any:
    node: Any = yaml.safe_load(text)
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            return _Missing
        node = node[key]
    return node


class _Missing:
    """Marks a setting that the file does not mention."""


def _edit_in_place(text: str, keys: tuple[str, ...], value: Any) -> str:
    """Change or add the one entry in block-style YAML; anything else is rewritten whole."""
    root = yaml.compose(text)
    if root is None:
        return yaml.safe_dump(_nest(keys, value, {}), sort_keys=False)
    node: yaml.Node = root
    for depth, key in enumerate(keys):
        if not isinstance(node, yaml.MappingNode) or node.flow_style:
            break
        child = next((v for k, v in node.value if k.value == key), None)
        if child is None:
            return _insert(text, node, keys[depth:], value, depth)
        if depth == len(keys) - 1:
            if (
                not isinstance(child, yaml.ScalarNode)
                or child.start_mark.line != child.end_mark.line
            ):
                break
            start, end = child.start_mark.index, child.end_mark.index
            return text[:start] + _scalar(value) + text[end:]
        node = child
    data = yaml.safe_load(text)
    return yaml.safe_dump(_nest(keys, value, data), sort_keys=False)


def _insert(
    text: str, parent: yaml.MappingNode, rest: tuple[str, ...], value: Any, depth: int
) -> str:
    """Add `rest` (missing keys) under `parent`: right after the parent's first line of entries."""
    if parent.value:
        indent = parent.value[0][0].start_mark.column
        at = _line_start(text, parent.value[0][0].start_mark.index)
    else:  # pragma: no cover - an empty block mapping has no block form
        indent, at = 2 * depth, len(text)
    lines = []
    for i, key in enumerate(rest):
        pad = " " * (indent + 2 * i)
        if i == len(rest) - 1:
            lines.append(f"{pad}{key}: {_scalar(value)}\n")
        else:
            lines.append(f"{pad}{key}:\n")
    if depth == 0:  # a new top-level section reads better at the end of the file
        body = text if text.endswith("\n") else text + "\n"
        return body + "".join(lines)
    return text[:at] + "".join(lines) + text[at:]


def _line_start(text: str, index: int) -> int:
    return text.rfind("\n", 0, index) + 1


# --- checking and writing ---------------------------------------------------------------------


def _reads_back(text: str, keys: tuple[str, ...], value: Any) -> bool:
    try:
        return bool(_current(text, keys) == value)
    except yaml.YAMLError:
        return False


def _check(text: str, path: Path, keys: tuple[str, ...], value: Any) -> None:
    """Load the new text exactly as the app will; refuse to write anything that does not."""
    with tempfile.TemporaryDirectory() as tmp:
        probe = Path(tmp) / path.name
        probe.write_text(text, encoding="utf-8")
        try:
            load_settings(probe, env={})
        except ConfigError as exc:
            raise PersistError(
                f"{path}: {'.'.join(keys)} = {value!r} would make the file "
                f"invalid ({exc}); it was left unchanged"
            ) from None
    if not _reads_back(text, keys, value):
        raise PersistError(f"{path}: could not set {'.'.join(keys)}; the file was left unchanged")


def _write_atomic(path: Path, text: str) -> None:
    """Keep the file's own permissions (a new file is 0600)."""
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    atomic_write(path, text, mode=mode)
