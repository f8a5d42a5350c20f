"""Speculative decoding on the real llama-server: the flags each choice becomes are ones this build
runs with, `auto` measures once and keeps its verdict, and a draft model's cache is counted."""

from __future__ import annotations

from pathlib import Path

import pytest

from fusion_tui.fit.launch_plan import plan_launch
from fusion_tui.paths import AppPaths
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.daemon import ManagedDaemon
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.spec_trial import TRIAL_LOG
from fusion_tui.server.process.speculative import SpecDecision
from fusion_tui.server.types import StreamEnd

pytestmark = pytest.mark.server

REPEATED = "The quick brown fox jumps over the lazy dog. " * 30


def spec(model: Path, speculative: str) -> LaunchSpec:
    return LaunchSpec(model=model, parallel=1, ctx=2048, threads=1, speculative=speculative)


async def drafted_tokens(url: str) -> int:
    """Tokens drafted for a greedy continuation of a text that repeats itself."""
    body = {"prompt": REPEATED, "n_predict": 24, "temperature": 0.0, "cache_prompt": False}
    async with LlamaClient(url) as client:
        async for event in client.stream_completion(body):
            if isinstance(event, StreamEnd):
                return event.timings.draft_n
    return 0


async def test_an_ngram_type_runs_and_drafts(
    app_home: AppPaths, llama_server_bin: Path, demo_model: Path
) -> None:
    daemon = ManagedDaemon(app_home, binary=llama_server_bin)
    try:
        rec = await daemon.ensure(spec(demo_model, "ngram-simple"), probe=False)
        assert rec.argv[rec.argv.index("--spec-type") + 1] == "ngram-simple"
        decision = SpecDecision.from_json(rec.speculative)
        assert decision is not None and decision.choice == "ngram-simple"
        assert await drafted_tokens(rec.url) > 0
    finally:
        await daemon.stop()


async def test_auto_measures_once_and_keeps_the_verdict(
    app_home: AppPaths, llama_server_bin: Path, demo_model: Path
) -> None:
    daemon = ManagedDaemon(app_home, binary=llama_server_bin)
    said: list[str] = []
    try:
        first = await daemon.ensure(spec(demo_model, "auto"), said.append, probe=False)
        decision = SpecDecision.from_json(first.speculative)
        assert decision is not None and decision.setting == "auto"
        assert [t.choice for t in decision.trial] == ["off", "ngram-mod"]
        assert all(t.copy_tok_s > 0 and t.free_tok_s > 0 for t in decision.trial)
        assert decision.reason  # why, in words
        assert any(s.startswith("choosing speculative decoding") for s in said)
        trial_log = (app_home.log_dir / TRIAL_LOG).read_text(errors="replace")
        await daemon.stop()
        said.clear()
        second = await daemon.ensure(spec(demo_model, "auto"), said.append, probe=False)
        again = SpecDecision.from_json(second.speculative)
        assert again is not None
        if not decision.load or float(decision.load) < 2:  # a busy trial is measured again,
            assert again.choice == decision.choice  # and may come out otherwise
            assert again.measured_at == decision.measured_at
            assert (app_home.log_dir / TRIAL_LOG).read_text(errors="replace") == trial_log
            assert not any(s.startswith("choosing speculative") for s in said)
    finally:
        await daemon.stop()


async def test_a_draft_models_cache_is_in_the_estimate_and_the_allocation(
    app_home: AppPaths, llama_server_bin: Path, demo_model: Path
) -> None:
    draft = f"draft:{demo_model}"  # the demo model drafts for itself: same vocabulary
    plan = plan_launch(demo_model, parallel=1, ctx=2048, draft_model_path=demo_model)
    assert plan.draft_estimate is not None
    assert plan.kv_bytes_total == 2 * plan.estimate.total_bytes
    daemon = ManagedDaemon(app_home, binary=llama_server_bin)
    try:
        rec = await daemon.ensure(
            spec(demo_model, draft), probe=False, kv_estimate_bytes=plan.kv_bytes_total
        )
        assert rec.argv[rec.argv.index("-md") + 1] == str(demo_model.resolve())
        assert rec.kv_allocated_bytes == plan.kv_bytes_total
        assert await drafted_tokens(rec.url) > 0
    finally:
        await daemon.stop()
