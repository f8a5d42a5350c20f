"""The packer: frame probing, byte-stable prefix, append-only history, resume, context meter."""

from __future__ import annotations

import pytest

from fusion_tui.agent.prompt import (
    ContextMeter,
    MachineFacts,
    PromptPacker,
    build_stable_prefix,
    volatile_tail,
)
from fusion_tui.agent.tools.registry import CORE_TOOLS
from fusion_tui.server.template import TemplateFrame, TemplateProbeError


def chatml_render(messages: list[dict[str, str]]) -> str:
    out = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return out + "<|im_start|>assistant\n"


async def test_probe_recovers_the_chatml_frame() -> None:
    async def apply(messages: list[dict[str, str]]) -> str:
        return chatml_render(messages)

    assert await TemplateFrame.probe(apply) == TemplateFrame.chatml()


def test_probe_cuts_a_template_that_merges_system_into_user() -> None:
    rendered = (
        "<bos><start_of_turn>user\nFUSIONSYSQ7\n\nFUSIONUSRQ1<end_of_turn>\n"
        "<start_of_turn>model\nFUSIONASTQ1<end_of_turn>\n"
        "<start_of_turn>user\nFUSIONUSRQ2<end_of_turn>\n<start_of_turn>model\n"
    )
    f = TemplateFrame.from_rendered(rendered)
    assert f.start == "<bos><start_of_turn>user\n" and f.system_to_user == "\n\n"
    assert f.user_to_assistant == "<end_of_turn>\n<start_of_turn>model\n"
    assert f.assistant_to_user == "<end_of_turn>\n<start_of_turn>user\n"


def test_probe_refuses_a_template_that_drops_messages() -> None:
    with pytest.raises(TemplateProbeError):
        TemplateFrame.from_rendered("FUSIONUSRQ1 FUSIONASTQ1 FUSIONUSRQ2")


def test_packer_matches_a_full_render_and_only_appends() -> None:
    frame = TemplateFrame.chatml()
    p = PromptPacker(frame, "SYS")
    p.add_user("task")
    first = p.prompt()
    p.add_assistant('{"tool": "list_dir", "args": {}}')
    p.add_user("result")
    second = p.prompt()
    assert second.startswith(first)
    assert second == chatml_render(
        [
            {"role": "system", "content": "SYS"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": '{"tool": "list_dir", "args": {}}'},
            {"role": "user", "content": "result"},
        ]
    )
    with pytest.raises(ValueError):
        p.add_user("two user messages in a row")


def test_stable_prefix_is_identical_for_equal_inputs_and_has_no_machine_facts() -> None:
    facts = MachineFacts("m.gguf", 4, 4096, 31.6, "none")
    a = build_stable_prefix(CORE_TOOLS, facts, "py project")
    b = build_stable_prefix(CORE_TOOLS, MachineFacts("m.gguf", 4, 4096, 31.6, "none"), "py project")
    assert a == b
    assert "machine facts" not in a and "m.gguf" not in a  # the model has no use for them
    assert "left]" not in a and "[step" not in a  # no volatile facts in the stable prefix
    assert "tok/s" not in a  # measured anew at each launch: it would break the prefix after one


def test_resume_from_dict_continues_the_same_prefix() -> None:
    p = PromptPacker(TemplateFrame.chatml(), "SYS")
    p.add_user("task")
    p.add_assistant("a1")
    p.add_user("obs")
    before = p.prompt()
    q = PromptPacker.from_dict(p.to_dict())
    assert q.prompt() == before
    q.add_assistant("a2")
    q.add_user("obs2")
    assert q.prompt().startswith(before)


def test_volatile_tail_format() -> None:
    assert volatile_tail(39, 40, 7_200_000) == "\n\n[step 39 of 40 · 2h00m left]"
    assert volatile_tail(1, 5, 59_000) == "\n\n[step 1 of 5 · 0m59s left]"


def test_the_budget_note_waits_until_the_task_is_nearly_out() -> None:
    assert volatile_tail(3, 40, 7_200_000) == ""
    assert volatile_tail(38, 40, 7_200_000) == ""
    assert volatile_tail(1, 5, 60_000) == ""


def test_context_meter_uses_server_counts() -> None:
    m = ContextMeter(n_ctx=1000)
    m.record(prompt_chars=2000, cache_n=100, prompt_n=400, predicted_n=20)
    assert m.used_tokens == 520
    assert m.estimate(2400) == 500 + 100 + 1  # 4 chars per token, learned from the server
    assert not m.near_limit(2400, reserve=100)
    assert m.near_limit(3600, reserve=100)
