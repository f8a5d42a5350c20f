"""Benchmark: streaming tokens into the chat view, headless.

Pushes N tokens at a fixed high rate through `ChatMessage.append` (fragments batched when the
widget falls behind, finished blocks frozen into pieces, pieces far from the view parked) and, in
the same run, through a naive view that re-renders the whole Markdown on every token. Reports
time per token, the worst event-loop lag seen by a 5 ms ticker, and the ratio naive / streamed.
The naive run is capped in time (its cost grows with the text); a capped run reports the tokens
it managed.

The lag is measured twice: in wall time (what a user feels) and in this process's CPU time
between two ticks (the longest stretch of work the event loop did without yielding), which does
not depend on how many other processes share the cores. The window ends 50 ms after the last
fragment (the final frames are drawn in it), before the test harness's `Pilot.pause()`, which
calls back every widget on the screen at once. `--runs N` prints the median of N runs with the
spread [min–max].

    .venv/bin/python bench/stream_ui.py [--tokens 1000 10000] [--rate 2000] [--cap 60] [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from textual.app import App, ComposeResult
from textual.widgets import Markdown

from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.chat_view import ChatView

WORDS = [
    "the",
    "slot",
    "keeps",
    "its",
    "`prompt`",
    "cached",
    "so",
    "**each**",
    "turn",
    "is",
    "cheap",
]


def fragments(n: int) -> list[str]:
    """Prose shaped like a model's answer: a paragraph every 40 tokens, a short list every 200."""
    out = []
    for i in range(n):
        word = WORDS[i % len(WORDS)] + " "
        if i % 200 == 199:
            word += "\n\n- first point\n- second point\n\n"
        elif i % 40 == 39:
            word += "\n\n"
        out.append(word)
    return out


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield ChatView()


@dataclass
class Result:
    tokens: int
    seconds: float
    worst_lag_ms: float
    capped: bool
    worst_cpu_ms: float = 0.0

    @property
    def us_per_token(self) -> float:
        return self.seconds / max(self.tokens, 1) * 1e6


async def measure(
    feed: Callable[[ChatMessage, str], Awaitable[None]],
    finish: Callable[[ChatMessage], Awaitable[None]],
    n: int,
    rate: float,
    cap: float,
) -> Result:
    app = Host()
    async with app.run_test(size=(120, 40)) as pilot:
        view = app.query_one(ChatView)
        message = await view.add_message("assistant")
        await pilot.pause()
        worst = worst_cpu = 0.0
        stop = False

        async def ticker() -> None:
            nonlocal worst, worst_cpu
            while not stop:
                t0, c0 = time.perf_counter(), time.process_time()
                await asyncio.sleep(0.005)
                worst = max(worst, time.perf_counter() - t0 - 0.005)
                worst_cpu = max(worst_cpu, time.process_time() - c0)

        tick = asyncio.create_task(ticker())
        interval = 1.0 / rate
        start = time.perf_counter()
        sent = 0
        for i, fragment in enumerate(fragments(n)):
            await feed(message, fragment)
            sent = i + 1
            due = start + sent * interval
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            if time.perf_counter() - start > cap:
                break
        await finish(message)
        await asyncio.sleep(0.05)  # the app's own refresh timer draws the last frames
        stop = True
        await tick
        # outside the lag window: Pilot.pause() calls back every widget on the screen at once
        # (a burst that grows with the widget count and that no user of the app ever sees)
        await pilot.pause()
        elapsed = time.perf_counter() - start
    return Result(sent, elapsed, worst * 1000, sent < n, worst_cpu * 1000)


async def streamed_feed(message: ChatMessage, fragment: str) -> None:
    await message.append(fragment)


async def streamed_finish(message: ChatMessage) -> None:
    await message.finish("done")


async def naive_feed(message: ChatMessage, fragment: str) -> None:
    message._text += fragment  # the naive view keeps the whole text and redraws it
    await message.query_one(Markdown).update(message._text)


async def naive_finish(message: ChatMessage) -> None:
    return None


def _med(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:.1f}"
    return f"{statistics.median(values):.1f} [{min(values):.1f}–{max(values):.1f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rate", type=float, default=2000.0, help="tokens per second pushed")
    parser.add_argument("--cap", type=float, default=30.0, help="seconds per naive run at most")
    parser.add_argument("--runs", type=int, default=1, help="median of N runs with the spread")
    args = parser.parse_args()
    print(f"{'tokens':>7} {'view':>9} {'sent':>6}  µs/token · worst lag ms (wall) · (CPU)")
    for n in args.tokens:
        runs: dict[str, list[Result]] = {"streamed": [], "naive": []}
        for _ in range(args.runs):
            inf = float("inf")
            runs["streamed"].append(asyncio.run(measure(streamed_feed, streamed_finish, n,
                                                        args.rate, inf)))  # fmt: skip
            runs["naive"].append(asyncio.run(measure(naive_feed, naive_finish, n, args.rate,
                                                     args.cap)))  # fmt: skip
        for name, rs in runs.items():
            capped = " (capped)" if any(r.capped for r in rs) else ""
            print(
                f"{n:>7} {name:>9} {min(r.tokens for r in rs):>6}  "
                f"{_med([r.us_per_token for r in rs])} · {_med([r.worst_lag_ms for r in rs])} · "
                f"{_med([r.worst_cpu_ms for r in rs])}{capped}"
            )
        fast, slow = runs["streamed"], runs["naive"]
        ratio = [s.us_per_token / f.us_per_token for f, s in zip(fast, slow, strict=True)]
        lag = [s.worst_lag_ms / max(f.worst_lag_ms, 0.1) for f, s in zip(fast, slow, strict=True)]
        print(f"{n:>7} ratio naive/streamed: time per token {_med(ratio)}x, "
              f"worst lag {_med(lag)}x")  # fmt: skip


if __name__ == "__main__":
    main()
