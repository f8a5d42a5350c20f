"""The pure parts of bench/decode.py: the task texts, the judges, the figures and the table.

Nothing here talks to a server, so tests/unit/test_bench_decode.py checks it in milliseconds.

The file the model rewrites is made here, always the same: 20 small functions of an inventory
module, 211 lines. `rewrite` asks for the whole file back with one local variable renamed in one
function; `edit` asks for the same change as one search/replace block. A result is correct when
the file it gives differs from the original only inside the asked function and that function did
change as asked (speculative decoding must not change what greedy decoding writes in substance;
the bytes may differ, since a verified batch and a single step round differently).
"""

from __future__ import annotations

import ast
import difflib
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

TARGET = "restock_plan"
OLD_NAME = "shortfall"
NEW_NAME = "missing_units"

SOURCE = '''\
"""Inventory helpers: weights, shelves, prices and restocking for a small shop."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date


@dataclass
class Item:
    sku: str
    name: str
    shelf: str
    count: int
    price: float
    weight: float
    best_before: date | None = None


def total_weight(items):
    """Total weight."""
    total = 0.0
    for item in items:
        total += item.weight * item.count
    if total < 0:
        raise ValueError('negative weight')
    return round(total, 3)


def heaviest_item(items):
    """Heaviest item."""
    best = None
    for item in items:
        if best is None or item.weight > best.weight:
            best = item
    if best is None:
        raise LookupError('no items')
    return best


def count_by_shelf(items):
    """Count by shelf."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.shelf] = counts.get(item.shelf, 0) + item.count
    ordered = sorted(counts.items())
    return dict(ordered)


def find_sku(items, sku):
    """Find sku."""
    wanted = sku.strip().upper()
    for item in items:
        if item.sku.upper() == wanted:
            return item
    raise KeyError(f'no item with sku {sku!r}')


def expired(items, today):
    """Expired."""
    stale = []
    for item in items:
        if item.best_before is not None and item.best_before < today:
            stale.append(item)
    stale.sort(key=lambda i: i.best_before)
    return stale


def restock_plan(items, minimum):
    """Restock plan."""
    plan = []
    for item in items:
        shortfall = minimum - item.count
        if shortfall > 0:
            plan.append((item.sku, shortfall))
    plan.sort(key=lambda pair: -pair[1])
    return plan


def shelf_value(items, shelf):
    """Shelf value."""
    value = 0.0
    for item in items:
        if item.shelf == shelf:
            value += item.price * item.count
    return round(value, 2)


def merge_stock(left, right):
    """Merge stock."""
    merged = {item.sku: item for item in left}
    for item in right:
        if item.sku in merged:
            merged[item.sku].count += item.count
        else:
            merged[item.sku] = item
    return list(merged.values())


def price_bands(items, width):
    """Price bands."""
    bands: dict[int, list[str]] = {}
    for item in items:
        band = int(item.price // width)
        bands.setdefault(band, []).append(item.sku)
    return {k: sorted(v) for k, v in sorted(bands.items())}


def cheapest_per_shelf(items):
    """Cheapest per shelf."""
    best: dict[str, object] = {}
    for item in items:
        current = best.get(item.shelf)
        if current is None or item.price < current.price:
            best[item.shelf] = item
    return best


def reserve(items, sku, amount):
    """Reserve."""
    item = find_sku(items, sku)
    if amount <= 0:
        raise ValueError('amount must be positive')
    if item.count < amount:
        raise ValueError(f'only {item.count} of {sku} left')
    item.count -= amount
    return item.count


def label_lines(items):
    """Label lines."""
    lines = []
    for item in sorted(items, key=lambda i: i.sku):
        price = f'{item.price:.2f}'
        lines.append(f'{item.sku:<10} {item.name:<24} {price:>8}')
    return lines


def average_price(items):
    """Average price."""
    if not items:
        return 0.0
    total = sum(item.price for item in items)
    return round(total / len(items), 2)


def split_by_weight(items, limit):
    """Split by weight."""
    light, heavy = [], []
    for item in items:
        if item.weight <= limit:
            light.append(item)
        else:
            heavy.append(item)
    return light, heavy


def audit_counts(items, counted):
    """Audit counts."""
    problems = []
    for item in items:
        seen = counted.get(item.sku, 0)
        if seen != item.count:
            problems.append((item.sku, item.count, seen))
    return problems


def rename_shelf(items, old, new):
    """Rename shelf."""
    moved = 0
    for item in items:
        if item.shelf == old:
            item.shelf = new
            moved += 1
    return moved


def top_sellers(sales, n):
    """Top sellers."""
    totals: dict[str, int] = {}
    for sku, amount in sales:
        totals[sku] = totals.get(sku, 0) + amount
    ranked = sorted(totals.items(), key=lambda p: (-p[1], p[0]))
    return ranked[:n]


def discount(items, percent):
    """Discount."""
    if not 0 <= percent <= 100:
        raise ValueError('percent must be 0-100')
    factor = 1 - percent / 100
    for item in items:
        item.price = round(item.price * factor, 2)
    return items


def to_rows(items):
    """To rows."""
    rows = []
    for item in items:
        rows.append([item.sku, item.name, item.shelf, str(item.count)])
    rows.sort()
    return rows


def from_rows(rows):
    """From rows."""
    items = []
    for sku, name, shelf, count in rows:
        items.append(Item(sku, name, shelf, int(count), 0.0, 0.0))
    return items
'''
"""The 211-line module every run rewrites; `TARGET` uses `OLD_NAME` three times."""


def source_file() -> str:
    return SOURCE


def rewrite_prompt(source: str) -> str:
    return (
        f"Here is a Python file:\n```python\n{source}```\n"
        f"In the function `{TARGET}`, rename the local variable `{OLD_NAME}` to `{NEW_NAME}`. "
        "Change nothing else. Reply with the whole updated file in one ```python block and "
        "nothing after it."
    )


def edit_prompt(source: str) -> str:
    """The search/replace request. Qwen2.5-Coder 1.5B answers it with the changed function in a
    code block (judged as the edit it is); shown an example block, it returned the function
    unchanged, so the prompt names the form without one."""
    return (
        f"Here is a Python file:\n```python\n{source}```\n"
        f"In the function `{TARGET}`, rename the local variable `{OLD_NAME}` to `{NEW_NAME}`. "
        "Reply with one search/replace block and nothing else, in this form:\n"
        "<<<<<<< SEARCH\n(the exact lines to change, copied from the file)\n=======\n"
        "(the new lines)\n>>>>>>> REPLACE"
    )


def explain_prompt(source: str) -> str:
    return (
        f"Here is a Python file:\n```python\n{source}```\n"
        "Explain in about 200 words, as prose without code, what this module is for and how its "
        "functions work together."
    )


_FENCE = re.compile(r"```[ \t]*(?:python|py)?[ \t]*\n(.*?)(?:```|\Z)", re.S)
_BLOCK = re.compile(r"<<<<<<< SEARCH\n(.*?)\n?=======\n(.*?)\n?>>>>>>> REPLACE", re.S)


def extract_file(answer: str) -> str | None:
    """The longest fenced code block of an answer (the file), or None."""
    blocks = _FENCE.findall(answer)
    return max(blocks, key=len) if blocks else None


def apply_edit(source: str, answer: str) -> str | None:
    """`source` with the answer's edit applied: its first search/replace block (None when the
    search text is not in the file exactly once), else a code block holding the whole `TARGET`
    function, which replaces it (a model that answers with the changed function has made the
    edit too); None when the answer has neither."""
    m = _BLOCK.search(answer)
    if m is not None:
        search, replace = m.group(1), m.group(2)
        if not search.strip() or source.count(search) != 1:
            return None
        return source.replace(search, replace, 1)
    block = extract_file(answer)
    span = function_span(block, TARGET) if block else None
    old = function_span(source, TARGET)
    if block is None or span is None or old is None:
        return None
    new_lines = block.splitlines(keepends=True)[span[0] - 1 : span[1]]
    lines = source.splitlines(keepends=True)
    return "".join(lines[: old[0] - 1] + new_lines + lines[old[1] :])


def function_span(source: str, name: str) -> tuple[int, int] | None:
    """1-based first and last line of the top-level function `name`."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node.lineno, node.end_lineno or node.lineno
    return None


@dataclass(frozen=True)
class Verdict:
    correct: bool
    why: str


def judge_file(original: str, result: str | None) -> Verdict:
    """Correct: `result` parses, differs from `original` only inside `TARGET`, and `TARGET` now
    uses `NEW_NAME` and not `OLD_NAME`."""
    if result is None:
        return Verdict(False, "no file in the answer")
    span = function_span(original, TARGET)
    assert span is not None
    try:
        ast.parse(result)
    except SyntaxError as exc:
        return Verdict(False, f"does not parse: {exc.msg} (line {exc.lineno})")
    a = original.rstrip("\n").splitlines()
    b = result.rstrip("\n").splitlines()
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, _j1, _j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        first, last = i1 + 1, max(i1 + 1, i2)  # 1-based lines of the original touched
        if first < span[0] or last > span[1]:
            return Verdict(False, f"changed lines {first}-{last}, outside {TARGET}")
    new_span = function_span(result, TARGET)
    if new_span is None:
        return Verdict(False, f"{TARGET} is gone")
    body = "\n".join(b[new_span[0] - 1 : new_span[1]])
    if re.search(rf"\b{OLD_NAME}\b", body) or not re.search(rf"\b{NEW_NAME}\b", body):
        return Verdict(False, f"{TARGET} does not use {NEW_NAME} in place of {OLD_NAME}")
    return Verdict(True, "only the asked function changed, as asked")


# --- figures ------------------------------------------------------------------------------------


@dataclass
class Sample:
    """One request: the server's decode rate, the client's time to the last token, drafts."""

    decode_tok_s: float
    ttlt_s: float
    predicted_n: int
    prompt_ms: float = 0.0
    drafted: int = 0
    accepted: int = 0
    correct: bool | None = None
    why: str = ""
    load: float = 0.0
    """1-minute load average when the request ended."""
    passed: int | None = None
    """HumanEval: problems whose check passed, of `of`."""
    of: int = 0
    answer: str = ""
    """The answer's text (rewrite, edit, explain), kept in the JSON to read a verdict by."""


@dataclass
class Cell:
    """Every sample of one (setting, task)."""

    samples: list[Sample] = field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in self.samples)

    def spread(self, attr: str) -> tuple[float, float]:
        values = [getattr(s, attr) for s in self.samples]
        return min(values), max(values)

    @property
    def acceptance(self) -> float | None:
        drafted = sum(s.drafted for s in self.samples)
        return sum(s.accepted for s in self.samples) / drafted if drafted else None

    @property
    def correct(self) -> tuple[int, int]:
        counted = [s for s in self.samples if s.passed is not None]
        if counted:
            return sum(s.passed or 0 for s in counted), sum(s.of for s in counted)
        judged = [s for s in self.samples if s.correct is not None]
        return sum(bool(s.correct) for s in judged), len(judged)

    def to_json(self) -> dict[str, Any]:
        return {
            "decode_tok_s": self.median("decode_tok_s"),
            "decode_spread": self.spread("decode_tok_s"),
            "ttlt_s": self.median("ttlt_s"),
            "ttlt_spread": self.spread("ttlt_s"),
            "predicted_n": self.median("predicted_n"),
            "acceptance": self.acceptance,
            "correct": self.correct,
            "loads": [s.load for s in self.samples],
            "samples": [s.__dict__ for s in self.samples],
        }


def render_table(
    cells: dict[tuple[str, str], Cell], settings: Sequence[str], tasks: Sequence[str], base: str
) -> str:
    """A markdown table: per task and setting, decode tok/s median (min-max) and its ratio to
    `base`, time to last token, acceptance, correct runs, load averages seen."""
    rows = [
        "| task | setting | decode tok/s | × off | time to last token s | × off | accepted "
        "| correct | tokens | load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task in tasks:
        b = cells.get((base, task))
        for s in settings:
            c = cells.get((s, task))
            if c is None or not c.samples:
                continue
            lo, hi = c.spread("decode_tok_s")
            tlo, thi = c.spread("ttlt_s")
            d = c.median("decode_tok_s")
            t = c.median("ttlt_s")
            dr = f"{d / b.median('decode_tok_s'):.2f}" if b and b.samples else ""
            tr = f"{t / b.median('ttlt_s'):.2f}" if b and b.samples else ""
            acc = c.acceptance
            acc_txt = "" if acc is None else f"{acc:.0%}"
            ok, n = c.correct
            loads = [x.load for x in c.samples]
            load_txt = f"{min(loads):.1f}-{max(loads):.1f}"
            rows.append(
                f"| {task} | {s} | {d:.2f} ({lo:.2f}-{hi:.2f}) | {dr} "
                f"| {t:.1f} ({tlo:.1f}-{thi:.1f}) | {tr} | {acc_txt} | {ok}/{n} "
                f"| {c.median('predicted_n'):.0f} | {load_txt} |"
            )
    return "\n".join(rows)
