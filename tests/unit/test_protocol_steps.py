"""The constrained step format: schema shape and strict validation."""

from __future__ import annotations

import pytest

from fusion_tui.agent.protocol import StepInvalid, parse_step, step_schema
from fusion_tui.agent.tools.registry import CORE_TOOLS, FINISH


def test_schema_has_one_branch_per_tool_with_closed_args() -> None:
    schema = step_schema(CORE_TOOLS)
    branches = schema["oneOf"]
    assert [b["properties"]["tool"]["const"] for b in branches] == [t.name for t in CORE_TOOLS]
    read = branches[0]
    assert read["required"] == ["tool", "args"] and read["additionalProperties"] is False
    assert read["properties"]["args"]["required"] == ["path"]
    assert read["properties"]["args"]["additionalProperties"] is False
    assert step_schema((FINISH,))["properties"]["tool"] == {"const": "finish"}


def test_valid_step_parses() -> None:
    a = parse_step(' {"tool": "read_file", "args": {"path": "a.py", "end_line": 3}}\n', CORE_TOOLS)
    assert (a.tool, a.args) == ("read_file", {"path": "a.py", "end_line": 3})


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("", "empty"),
        ("{", "not valid JSON"),
        ("[1]", "JSON object"),
        ('{"tool": "rm", "args": {}}', "unknown tool"),
        ('{"tool": "read_file"}', "missing argument 'path'"),
        ('{"tool": "read_file", "args": {"path": 1}}', "must be a string"),
        ('{"tool": "read_file", "args": {"path": "a", "approved": true}}', "unknown argument"),
        ('{"tool": "read_file", "args": {"path": "a"}, "approve": true}', "unexpected keys"),
        ('{"tool": "read_file", "args": {"path": "a", "start_line": 0}}', ">= 1"),
        ('{"tool": "read_file", "args": {"path": "a", "start_line": true}}', "integer"),
        ('{"tool": "delegate", "args": {"tasks": []}}', "unknown tool"),
        ('{"tool": "finish", "args": {"summary": "a"}} trailing', "not valid JSON"),
    ],
)
def test_invalid_steps_are_refused_with_a_reason(raw: str, reason: str) -> None:
    with pytest.raises(StepInvalid, match=reason) as info:
        parse_step(raw, CORE_TOOLS)
    assert info.value.raw == raw
