"""What a Textual screenshot (SVG) shows, cell by cell: character, its text style, background.

Two screenshots of the same screen can differ as SVG when Textual splits a row into styled runs
differently (a margin drawn by a parent or the same blank drawn by the block); the cells do not.
"""

from __future__ import annotations

import html
import re

CELL_WIDTH, LINE_HEIGHT = 12.2, 24.4

_STYLE = re.compile(r"\.(terminal-[\w-]+) \{([^}]*)\}")
_RECT = re.compile(r'<rect fill="([^"]+)" x="([\d.]+)" y="([\d.]+)" width="([\d.]+)"')
_TEXT = re.compile(
    r'<text class="([^"]+)" x="([\d.]+)" y="([\d.]+)" textLength="[\d.]+"[^>]*>(.*?)</text>', re.S
)

Cell = tuple[str | None, str, str]


def cells(svg: str) -> dict[tuple[int, int], Cell]:
    """(row, column) -> (background, character, text style); blanks carry no text style."""
    styles = {m.group(1): m.group(2).strip() for m in _STYLE.finditer(svg)}
    background: dict[tuple[int, int], str] = {}
    for fill, x, y, width in _RECT.findall(svg):
        row, first = round(float(y) / LINE_HEIGHT), round(float(x) / CELL_WIDTH)
        for column in range(first, first + round(float(width) / CELL_WIDTH)):
            background[(row, column)] = fill
    text: dict[tuple[int, int], tuple[str, str]] = {}
    for classes, x, y, body in _TEXT.findall(svg):
        row, first = round(float(y) / LINE_HEIGHT), round(float(x) / CELL_WIDTH)
        style = " ".join(sorted(styles.get(c, c) for c in classes.split()))
        for k, char in enumerate(html.unescape(body).replace("\n", "")):
            text[(row, first + k)] = (char, style if char.strip() else "")
    return {
        key: (background.get(key), *text.get(key, (" ", "")))
        for key in background.keys() | text.keys()
    }
