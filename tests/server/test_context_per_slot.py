"""The demo launch gives every slot the model's trained context: SmolLM2 (trained
8,192) with the default 4 slots gets -c 32768, and each slot's n_ctx in /slots is 8,192."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import plan_for, plan_spec
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.daemon import ManagedDaemon

pytestmark = pytest.mark.server


async def test_demo_launch_has_the_trained_context_per_slot(
    app_home: AppPaths, llama_server_bin: Path, demo_model: Path
) -> None:
    settings = Settings()
    plan = plan_for(settings, demo_model)
    assert plan.parallel == 4 and plan.facts is not None and plan.facts.trained_ctx == 8192
    if plan.fit.limited_by == "memory":  # a short machine: the reduced per-slot context is used
        assert plan.fit.fits and 2048 <= plan.per_slot_ctx < 8192
    else:
        assert plan.per_slot_ctx == 8192 and plan.ctx == 4 * 8192
    spec, fit, _estimate = plan_spec(settings, app_home, demo_model)
    assert fit["per_slot_ctx"] == plan.per_slot_ctx and spec.ctx == plan.ctx
    spec = replace(spec, threads=2)
    daemon = ManagedDaemon(app_home, binary=llama_server_bin)
    try:
        record = await daemon.launch(spec, probe=False)
        async with LlamaClient(record.url) as client:
            props = await client.props()
            slots = await client.slots()
        assert props.total_slots == 4 and props.n_ctx == plan.per_slot_ctx
        assert [s.n_ctx for s in slots] == [plan.per_slot_ctx] * 4
        assert record.kv_allocated_bytes == plan.kv_bytes_total
    finally:
        await daemon.stop()
