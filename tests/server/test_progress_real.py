"""Prompt progress on the real server: a ~3,000-token prompt (SmolLM2, one slot, `-b 512` so
the server reports after every 512 tokens) yields monotonic progress events with a rate, and the
turn ends with the server's timings for the whole prompt."""

from __future__ import annotations

import pytest

from fusion_tui.chat.events import Progress, ReplyDone
from fusion_tui.chat.local import LocalBackend
from fusion_tui.server.types import PromptProgress, StreamEnd
from tests.server.real_backend import RealServer, long_text, server_fixture

pytestmark = pytest.mark.server


server = server_fixture("progress-home", parallel=1, ctx=4096, extra_args=("-b", "512"))


async def test_a_long_prompt_reports_monotonic_progress_and_ends_with_timings(
    server: RealServer,
) -> None:
    backend = LocalBackend(
        server.settings(max_tokens=4), server.paths, connector=server.connector()
    )
    await backend.start(lambda _s: None)
    events = [e async for e in backend.reply(long_text(950))]
    await backend.close()
    shown = [e for e in events if isinstance(e, Progress)]
    end = next(e for e in events if isinstance(e, StreamEnd))
    done = events[-1]
    assert isinstance(done, ReplyDone) and done.outcome == "completed"
    total = end.timings.prompt_n + end.timings.cache_n
    assert total > 2800
    assert len(shown) >= 5  # one event per server progress chunk, no raw duplicate
    assert not any(isinstance(e, PromptProgress) for e in events)
    processed = [p.processed for p in shown]
    assert processed == sorted(processed) and processed[-1] == total
    assert all(p.total == total for p in shown)
    rates = [p.tokens_per_second for p in shown[1:] if p.tokens_per_second]
    assert rates and all(r > 0 for r in rates)
    etas = [p.eta_s for p in shown if p.eta_s is not None]
    assert etas[-1] == 0 and etas[0] > 0
    assert end.timings.prompt_ms > 0 and end.timings.predicted_n >= 1
