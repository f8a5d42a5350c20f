"""The phases of bench/cache_reuse.py: each a sequence of steps, every step run once per side
(`run_group` interleaves the sides step by step), written against `Driver` (`_cache_drivers.py`).

Who types what: an opening message (notes to read) and a `long` turn are pasted, a follow-up
question is typed (`_keyboard.py`); an agent task is given at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from _cache_common import Label, follow_up, opening
from _cache_drivers import Driver

AGENT_TASKS = (
    "List the files in this folder, read notes.txt and say in one line what it is about.",
    "Read notes.txt again and name the most important item in it.",
    "Which file here is the largest? Answer in one line.",
)
NOTITLE_BASE = 40
"""Opening texts of `sequential-notitle` (sessions of their own: no text shared with others)."""
OVER_BASE = 10
"""Opening texts of the oversubscribed phases."""

Step = Callable[[Driver], Awaitable[None]]
"""One unit of a phase, run on one driver; the runner interleaves the sides step by step."""


def turn_step(label: Label, text: str, *, pasted: bool, title: bool = False,
              plain_title: bool = True) -> Step:  # fmt: skip
    """A turn, then (`title`) the session's title: by every client, or (`plain_title` False)
    only by a client that titles every session (fusion-tui's TUI)."""

    async def step(d: Driver) -> None:
        await d.turn(label, text, pasted=pasted)
        if title and (plain_title or d.titles_always):
            await d.side(label)

    return step


def sequential(a: Any, phase: str = "sequential", prefix: str = "s", base: int = 0,
               plain_title: bool = True) -> Iterator[Step]:  # fmt: skip
    """K sessions round robin; each session is titled after its first turn (as the TUI does;
    the plain client too unless `plain_title` is False)."""
    for r in range(a.rounds):
        for k in range(a.sessions):
            first = r == 0
            text = opening(base + k, a.words) if first else follow_up(base + k, r)
            label = Label(phase, f"{prefix}{k}", "turn", r)
            yield turn_step(label, text, pasted=first, title=first, plain_title=plain_title)


def concurrent(a: Any) -> Iterator[Step]:
    for r in range(a.rounds):

        async def both(d: Driver, r: int = r) -> None:
            await asyncio.gather(
                *(d.turn(Label("concurrent", f"s{k}", "turn", r), follow_up(k, 100 + r))
                  for k in (0, 1))
            )  # fmt: skip

        yield both


def resume(a: Any) -> Iterator[Step]:
    async def leave(d: Driver) -> None:
        await d.leave()  # a new app instance on the same server

    yield leave
    for k in range(a.sessions):  # each session's next turn (one turn alone is all server noise)
        yield turn_step(Label("resume", f"s{k}", "turn", 200), follow_up(k, 200), pasted=False)


def restart(_a: Any, phase: str = "restart", session: str = "s0") -> Iterator[Step]:
    async def step(d: Driver) -> None:
        await d.restart()  # fusion-tui saved the slots when the sessions were left
        await d.turn(Label(phase, session, "turn", 300), follow_up(0, 300), pasted=False)

    yield step


def oversubscribed(a: Any, phase: str) -> Iterator[Step]:
    prefix = "o" if phase == "oversubscribed" else "z"
    for r in range(a.rounds):
        for k in range(a.over_sessions):
            first = r == 0
            text = opening(OVER_BASE + k, a.words) if first else follow_up(OVER_BASE + k, r)
            yield turn_step(Label(phase, f"{prefix}{k}", "turn", r), text, pasted=first)


def long_turns(a: Any, per_slot_ctx: int) -> int:
    """Turns of `long`: enough to outgrow the slot by about a third (at ~3 tokens a word plus
    the answer), at least 3; `--long-turns` says otherwise."""
    per_turn = a.long_words * 3 + a.max_tokens
    return a.long_turns or max(3, int(per_slot_ctx * 1.3 / per_turn) + 1)


def long(a: Any, per_slot_ctx: int) -> Iterator[Step]:
    for r in range(long_turns(a, per_slot_ctx)):
        yield turn_step(Label("long", "L", "turn", r), opening(20 + r, a.long_words), pasted=True)


def make_workspaces(root: Path) -> list[Path]:
    out = []
    for name in ("A", "B"):
        ws = root / f"ws-{name}"
        ws.mkdir(parents=True, exist_ok=True)
        (ws / "notes.txt").write_text(opening(ord(name), 60) + "\n")
        (ws / "main.py").write_text(f"print('workspace {name}')\n" * 20)
        out.append(ws)
    return out


def agent(a: Any) -> Iterator[Step]:
    for r, task in enumerate(AGENT_TASKS[: a.agent_tasks]):
        for name in ("A", "B"):

            async def step(d: Driver, name: str = name, r: int = r, task: str = task) -> None:
                ws = make_workspaces(d.root)[0 if name == "A" else 1]
                await d.agent(Label("agent", name, "agent", r), ws, task)

            yield step


def relaunch(_a: Any) -> Iterator[Step]:
    """Between phase kinds: every session left, a fresh daemon."""

    async def step(d: Driver) -> None:
        await d.restart()

    yield step


def leave(_a: Any) -> Iterator[Step]:
    async def step(d: Driver) -> None:
        await d.leave()

    yield step
