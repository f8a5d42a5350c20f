"""The tools' argument check: a call's arguments are validated strictly before it runs."""

from __future__ import annotations

from typing import Any

import pytest

from fusion_tui.agent.protocol import StepInvalid, validate_args
from fusion_tui.agent.tools.registry import CORE_TOOLS

READ = next(t for t in CORE_TOOLS if t.name == "read_file")


def test_valid_arguments_pass() -> None:
    validate_args(READ, {"path": "a.py", "end_line": 3})


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({}, "missing argument 'path'"),
        ({"path": 1}, "must be a string"),
        ({"path": "a", "approved": True}, "unknown argument"),
        ({"path": "a", "start_line": 0}, ">= 1"),
        ({"path": "a", "start_line": True}, "integer"),
    ],
)
def test_invalid_arguments_are_refused_with_a_reason(args: dict[str, Any], reason: str) -> None:
    with pytest.raises(StepInvalid, match=reason):
        validate_args(READ, args)
