"""The tools' specifications and the strict check of a call's arguments.

A reply is free text (`reply.py`); the calls in it name a tool and its arguments, which are
checked here against the tool's `ToolSpec` before anything runs, so a wrong call gets a one-line
reason the model can act on instead of a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

ArgType = Literal["string", "integer", "boolean", "string_list"]
ToolKind = Literal["read", "write", "shell", "finish", "delegate"]


@dataclass(frozen=True)
class ArgSpec:
    """One argument of a tool."""

    name: str
    type: ArgType
    description: str
    required: bool = True
    max_length: int | None = None
    minimum: int | None = None
    maximum: int | None = None
    max_items: int | None = None


@dataclass(frozen=True)
class ToolSpec:
    """What the model is told about a tool, and what the loop needs to run it safely."""

    name: str
    description: str
    kind: ToolKind
    args: tuple[ArgSpec, ...] = ()

    def arg_schema(self) -> dict[str, Any]:
        props: dict[str, Any] = {}
        for a in self.args:
            props[a.name] = _arg_schema(a)
        return {
            "type": "object",
            "properties": props,
            "required": [a.name for a in self.args if a.required],
            "additionalProperties": False,
        }

    def signature(self) -> str:
        """One line for the prompt: `read_file(path, start_line?, end_line?)`."""
        names = ", ".join(a.name + ("" if a.required else "?") for a in self.args)
        return f"{self.name}({names})"


def _arg_schema(a: ArgSpec) -> dict[str, Any]:
    if a.type == "string":
        s: dict[str, Any] = {"type": "string"}
        if a.max_length is not None:
            s["maxLength"] = a.max_length
        return s
    if a.type == "integer":
        s = {"type": "integer"}
        if a.minimum is not None:
            s["minimum"] = a.minimum
        if a.maximum is not None:
            s["maximum"] = a.maximum
        return s
    if a.type == "boolean":
        return {"type": "boolean"}
    s = {"type": "array", "items": {"type": "string"}, "minItems": 1}
    if a.max_items is not None:
        s["maxItems"] = a.max_items
    return s


@dataclass(frozen=True)
class Action:
    """A validated step: the tool to run and its arguments."""

    tool: str
    args: dict[str, Any] = field(default_factory=dict)


class StepInvalid(Exception):
    """The model's output is not a valid action; the message is shown to it for the repair."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw


def validate_args(spec: ToolSpec, args: dict[str, Any], raw: str = "") -> None:
    """Raise `StepInvalid` with a one-line reason when `args` do not fit the tool."""
    known = {a.name: a for a in spec.args}
    extra = sorted(set(args) - set(known))
    if extra:
        raise StepInvalid(f"{spec.name}: unknown argument(s) {extra}", raw)
    for a in spec.args:
        if a.name not in args:
            if a.required:
                raise StepInvalid(f"{spec.name}: missing argument {a.name!r}", raw)
            continue
        v = args[a.name]
        where = f"{spec.name}.{a.name}"
        if a.type == "string":
            if not isinstance(v, str):
                raise StepInvalid(f"{where} must be a string", raw)
            if a.max_length is not None and len(v) > a.max_length:
                raise StepInvalid(f"{where} is longer than {a.max_length} characters", raw)
        elif a.type == "integer":
            if isinstance(v, bool) or not isinstance(v, int):
                raise StepInvalid(f"{where} must be an integer", raw)
            if a.minimum is not None and v < a.minimum:
                raise StepInvalid(f"{where} must be >= {a.minimum}", raw)
            if a.maximum is not None and v > a.maximum:
                raise StepInvalid(f"{where} must be <= {a.maximum}", raw)
        elif a.type == "boolean":
            if not isinstance(v, bool):
                raise StepInvalid(f"{where} must be true or false", raw)
        else:
            if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
                raise StepInvalid(f"{where} must be a non-empty list of strings", raw)
            if a.max_items is not None and len(v) > a.max_items:
                raise StepInvalid(f"{where} has more than {a.max_items} items", raw)
