"""Provides `settled_cut`: where a streaming Markdown text can be cut so the part above is final.

A chat answer streams into a live Markdown widget; every update lays out all of that widget's
blocks again, so the cost per frame grows with the answer. Cutting off the finished blocks into a
widget that is never updated again keeps the live part short. A cut must not change what the user
sees, so it is made only where rendering the two halves as separate documents is the same as
rendering the whole:

- at the start of a top-level block (the same parser as Textual's Markdown, "gfm-like"), so code
  fences, lists and quotes that span blank lines are never split;
- after a blank line, and only when the block that starts there is followed by another one: the
  blocks on both sides are closed, nothing streamed later can re-read them (a paragraph cannot
  turn into a setext heading or a table, "``" cannot turn into a fence);
- before a block with no top margin (paragraph, list, table, rule): Textual collapses the margins
  of neighbouring blocks in one document (max of the two), but not across two documents (sum).

Link reference definitions (`[x]: url`) act on the whole document; `has_link_definitions` lets
the caller render such an answer as one document once it is complete.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

MIN_BLOCKS = 8
"""Finished blocks a cut leaves above it at least: fewer, larger frozen pieces."""

NO_TOP_MARGIN = frozenset(
    {"paragraph_open", "bullet_list_open", "ordered_list_open", "table_open", "hr"}
)
"""Blocks whose Textual style has no top margin (see `textual.widgets._markdown` CSS)."""

_LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]\n]+\]:", re.MULTILINE)

_parser = MarkdownIt("gfm-like")  # what textual.widgets.Markdown uses without a parser_factory

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def source_lines(source: str) -> list[str]:
    """`source`'s lines with their ends, as markdown-it numbers them (`token.map`): broken at
    `\n`, `\r\n` and `\r` only, not at the other breaks `str.splitlines` knows (form feed,
    U+2028, ...), which would shift every line index after one of them."""
    return _LINE.findall(source)


def top_level_blocks(source: str) -> list[tuple[str, int, int]]:
    """(token type, first line, end line) of each top-level block of `source`."""
    return [
        (token.type, token.map[0], token.map[1])
        for token in _parser.parse(source)
        if token.level == 0 and token.nesting >= 0 and token.map is not None
    ]


def settled_cut(source: str, min_blocks: int = MIN_BLOCKS) -> int | None:
    """The line index of the latest safe cut with `min_blocks` blocks above it, or None."""
    blocks = top_level_blocks(source)
    lines = source_lines(source)
    for index in range(len(blocks) - 2, min_blocks - 1, -1):
        kind, start, _end = blocks[index]
        if kind in NO_TOP_MARGIN and start > 0 and not lines[start - 1].strip():
            return start
    return None


def has_link_definitions(source: str) -> bool:
    """Whether `source` may define a link reference (which can act on text above it)."""
    return _LINK_DEFINITION.search(source) is not None
