"""Benchmark: streaming tokens into the chat view, headless.

Pushes N tokens at a fixed high rate through `ChatMessage.append` (Textual's MarkdownStream, which
batches fragments when the widget falls behind) and, in the same run, through a naive view that
re-renders the whole Markdown on every token. Reports time per token, the worst event-loop lag
seen by a 5 ms ticker, and the ratio naive / streamed. The naive run is capped in time (its cost
grows with the text); a capped run reports the tokens it managed.

    .venv/bin/python bench/stream_ui.py [--tokens 1000 10000] [--rate 2000] [--cap 60]
"""

from __future__ import annotations

import argparse
import asyncio
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
        worst = 0.0
        stop = False

        async def ticker() -> None:
            nonlocal worst
            while not stop:
                t0 = time.perf_counter()
                await asyncio.sleep(0.005)
                worst = max(worst, time.perf_counter() - t0 - 0.005)

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
        await pilot.pause()
        elapsed = time.perf_counter() - start
        stop = True
        await tick
    return Result(sent, elapsed, worst * 1000, sent < n)


async def streamed_feed(message: ChatMessage, fragment: str) -> None:
    await message.append(fragment)


async def streamed_finish(message: ChatMessage) -> None:
    await message.finish("done")


async def naive_feed(message: ChatMessage, fragment: str) -> None:
    message._text += fragment  # the naive view keeps the whole text and redraws it
    await message.query_one(Markdown).update(message._text)


async def naive_finish(message: ChatMessage) -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--rate", type=float, default=2000.0, help="tokens per second pushed")
    parser.add_argument("--cap", type=float, default=30.0, help="seconds per naive run at most")
    args = parser.parse_args()
    print(f"{'tokens':>7} {'view':>9} {'sent':>6} {'µs/token':>9} {'worst lag ms':>13}")
    for n in args.tokens:
        fast = asyncio.run(measure(streamed_feed, streamed_finish, n, args.rate, float("inf")))
        slow = asyncio.run(measure(naive_feed, naive_finish, n, args.rate, args.cap))
        for name, r in (("streamed", fast), ("naive", slow)):
            capped = " (capped)" if r.capped else ""
            print(
                f"{n:>7} {name:>9} {r.tokens:>6} {r.us_per_token:>9.0f} "
                f"{r.worst_lag_ms:>13.1f}{capped}"
            )
        ratio = slow.us_per_token / fast.us_per_token
        lag = slow.worst_lag_ms / max(fast.worst_lag_ms, 0.1)
        print(f"{n:>7} ratio naive/streamed: time per token {ratio:.1f}x, worst lag {lag:.1f}x")


if __name__ == "__main__":
    main()
