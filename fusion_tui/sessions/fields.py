"""Strict readers for the fields of a session file, and the error they raise.

Each reader takes the dict, the key and where it sits (`messages[3]`) and returns the value with
its type checked, or raises `SessionFileError` naming the field: a hand-edited or torn file gets a
message, never a traceback. Shared by `records.py` and `model.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class SessionFileError(ValueError):
    """A session (file or dict) is malformed; the message names the field and the file."""

    def __init__(self, message: str, *, field: str = "", path: str = "") -> None:
        self.field = field
        self.path = path
        where = f"{path}: " if path else ""
        super().__init__(f"{where}{message}")


def type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def read_checked(
    d: dict[str, Any], key: str, where: str, check: Callable[[Any], bool], what: str
) -> Any:
    name = f"{where}.{key}" if where else key
    if key not in d:
        raise SessionFileError(f"field {name!r} is missing", field=name)
    value = d[key]
    if not check(value):
        raise SessionFileError(
            f"field {name!r} should be {what}, got {type_name(value)}", field=name
        )
    return value


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v: Any) -> bool:
    return (isinstance(v, int | float) and not isinstance(v, bool)) and v == v


def read_str(d: dict[str, Any], key: str, where: str = "") -> str:
    return str(read_checked(d, key, where, lambda v: isinstance(v, str), "a string"))


def read_opt_str(d: dict[str, Any], key: str, where: str = "") -> str | None:
    if d.get(key) is None:
        return None
    return read_str(d, key, where)


def read_int(d: dict[str, Any], key: str, where: str = "") -> int:
    return int(read_checked(d, key, where, is_int, "an integer"))


def read_opt_int(d: dict[str, Any], key: str, where: str = "") -> int | None:
    if d.get(key) is None:
        return None
    return read_int(d, key, where)


def read_num(d: dict[str, Any], key: str, where: str = "") -> float:
    return float(read_checked(d, key, where, is_num, "a number"))


def read_bool(d: dict[str, Any], key: str, where: str = "", default: bool | None = None) -> bool:
    if default is not None and key not in d:
        return default
    return bool(read_checked(d, key, where, lambda v: isinstance(v, bool), "true or false"))


def read_list(d: dict[str, Any], key: str, where: str = "") -> list[Any]:
    if key not in d:
        return []
    return list(read_checked(d, key, where, lambda v: isinstance(v, list), "a list"))


def read_obj(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise SessionFileError(
            f"field {name!r} should be an object, got {type_name(value)}", field=name
        )
    return value


def read_choice(d: dict[str, Any], key: str, where: str, allowed: tuple[str, ...]) -> str:
    value = read_str(d, key, where)
    if value not in allowed:
        name = f"{where}.{key}" if where else key
        raise SessionFileError(
            f"field {name!r} is {value!r}, expected one of {', '.join(allowed)}", field=name
        )
    return value
