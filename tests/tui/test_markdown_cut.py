"""Where a streaming answer may be cut into frozen pieces: never inside a block, never where the
two halves would render differently from the whole."""

from __future__ import annotations

from fusion_tui.tui.widgets.markdown_cut import (
    has_link_definitions,
    settled_cut,
    top_level_blocks,
)


def _paragraphs(n: int) -> str:
    return "".join(f"paragraph {i} says something\n\n" for i in range(n))


def test_the_cut_is_the_latest_paragraph_start_with_a_block_after_it() -> None:
    text = _paragraphs(5) + "still streaming"
    lines = text.splitlines(keepends=True)
    cut = settled_cut(text, min_blocks=2)
    assert cut is not None
    assert lines[cut] == "paragraph 4 says something\n"  # the 5th; the 6th is the open tail
    assert settled_cut(_paragraphs(2) + "tail", min_blocks=2) is None  # too few blocks above


def test_the_block_at_the_cut_must_be_followed_by_another_one() -> None:
    # "``" could still grow into a code fence (which has a top margin): not a safe cut yet
    text = _paragraphs(3) + "``"
    lines = text.splitlines(keepends=True)
    cut = settled_cut(text, min_blocks=1)
    assert cut is not None and lines[cut].startswith("paragraph 2")


def test_a_code_fence_with_blank_lines_is_never_split() -> None:
    fence = "```python\ndef f():\n\n    return 1\n\n\nprint(f())\n```\n\n"
    text = _paragraphs(2) + fence + _paragraphs(2) + "tail"
    lines = text.splitlines(keepends=True)
    fence_lines = range(4, 4 + fence.count("\n") - 1)
    for min_blocks in range(1, 5):
        cut = settled_cut(text, min_blocks=min_blocks)
        assert cut is not None and cut not in fence_lines
        assert not lines[cut].startswith("```")
    unclosed = _paragraphs(2) + "```python\nx = 1\n\n\ny = 2\n\nmore\n"
    assert [kind for kind, *_ in top_level_blocks(unclosed)][-1] == "fence"
    cut = settled_cut(unclosed, min_blocks=1)
    assert cut is not None and unclosed.splitlines()[cut] == "paragraph 1 says something"


def test_no_cut_before_a_block_with_a_top_margin_or_without_a_blank_line() -> None:
    # headings, fences and quotes have a top margin that two documents would not collapse
    text = "one\n\ntwo\n\n# Title\n\n> quote\n\n```\ncode\n```\n\ntail"
    cut = settled_cut(text, min_blocks=1)
    assert cut is not None and text.splitlines()[cut] == "two"
    # a list that interrupts a paragraph (no blank line) is not a cut either
    assert settled_cut("intro\n- a\n- b\n\ntail", min_blocks=1) is None


def test_a_list_with_blank_lines_between_items_stays_whole() -> None:
    text = "intro\n\n- a\n\n- b\n\n- c\n\nafter\n\ntail"
    cut = settled_cut(text, min_blocks=1)
    assert cut is not None and text.splitlines()[cut] == "after"


def test_link_definitions_are_seen() -> None:
    assert has_link_definitions("see [the docs][d]\n\n[d]: https://example.org\n")
    assert not has_link_definitions("a [link](https://example.org) and [brackets] only\n")
