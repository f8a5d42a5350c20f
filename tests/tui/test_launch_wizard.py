"""Pilot tests of the launch wizard: pick, check the fit (live re-fit), launch (fake launcher)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from textual.app import App, ComposeResult
from textual.widgets import Button, Input, OptionList, Static

from fusion_tui.config import Settings
from fusion_tui.config.settings import LocalModelsSettings, ManagedSettings, UISettings
from fusion_tui.models.registry import ModelsRegistry
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import DaemonStartError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.launch_choice import LaunchChoice
from fusion_tui.server.process.probe import ProbeResult
from fusion_tui.server.process.records import LaunchRecord
from fusion_tui.server.types import Props
from fusion_tui.status import ServerStatus
from fusion_tui.tui.screens.launch_wizard import LAUNCH, PICK, PLAN, GGUFTree, LaunchWizard
from fusion_tui.tui.themes import choose_theme, install_themes, load_themes

GIB = 1024**3
SETTINGS = Settings(
    local_models=LocalModelsSettings(managed=ManagedSettings(memory_bytes=4 * GIB)),
    ui=UISettings(cursor_blink=False),
)
STAGES = [
    ServerStatus(state="starting", model="SmolLM2-135M-Instruct", detail="planning the launch"),
    ServerStatus(state="loading", detail="starting llama-server on port 41234"),
    ServerStatus(state="loading", detail="loading the model"),
    ServerStatus(state="loading", detail="measuring throughput"),
    ServerStatus(state="loading", detail="ready"),
]


class _Client:
    closed = False

    async def aclose(self) -> None:
        self.closed = True


class FakeLauncher:
    """Shaped like `server.connect.connect`: reports stages, then returns a Connection, fails or
    hangs."""

    def __init__(
        self,
        *,
        stages: list[ServerStatus] | None = None,
        error: Exception | None = None,
        hold: bool = False,
        allocated: int | None = None,
        tok_s: float = 95.0,
    ) -> None:
        self.stages = STAGES if stages is None else stages
        self.error = error
        self.hold = hold
        self.allocated = allocated
        self.tok_s = tok_s
        self.calls: list[dict[str, Any]] = []
        self.cancelled = False

    async def __call__(
        self,
        settings: Settings,
        paths: AppPaths,
        report: Any = None,
        *,
        model: str | None = None,
        parallel: int | None = None,
        ctx: int | None = None,
    ) -> Connection:
        self.calls.append({"model": model, "parallel": parallel, "ctx": ctx})
        say = report or (lambda _s: None)
        for status in self.stages:
            say(status)
        if self.hold:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.cancelled = True
                raise
        if self.error is not None:
            raise self.error
        assert model is not None and parallel is not None
        from fusion_tui.fit.launch_plan import plan_launch

        plan = plan_launch(model, parallel, memory_bytes=4 * GIB, max_ctx=32768)
        record = LaunchRecord(
            pid=4242, argv=["llama-server"], model_path=model, host="127.0.0.1", port=41234,
            url="http://127.0.0.1:41234", started_at=0.0, ctx=plan.ctx, parallel=parallel,
            log_path="server.log", n_ctx_slot=plan.per_slot_ctx,
            kv_estimate_bytes=plan.kv_bytes_total,
            kv_allocated_bytes=plan.kv_bytes_total if self.allocated is None else self.allocated,
        )  # fmt: skip
        probe = ProbeResult(tok_s=self.tok_s, predicted_n=64, predicted_ms=64000 / self.tok_s)
        status = ServerStatus(state="ready", model="SmolLM2-135M-Instruct", slots=parallel,
                              n_ctx=plan.per_slot_ctx, tok_s=self.tok_s)  # fmt: skip
        props = Props(total_slots=parallel, model_path=model, n_ctx=plan.per_slot_ctx)
        client = cast(LlamaClient, _Client())
        return Connection(client, props, status, record, probe, launched=True)


def show_name(path: Path) -> str:
    """Paths as the snapshots show them: `…/name`, the same on every machine."""
    return f"…/{path.name}"


class WizardHost(App[None]):
    """Pushes one wizard over an empty screen, with the app's themes, and keeps its result."""

    def __init__(self, wizard: LaunchWizard) -> None:
        super().__init__()
        self.wizard = wizard
        self.results: list[LaunchChoice | None] = []

    def compose(self) -> ComposeResult:
        yield Static("main screen")

    def on_mount(self) -> None:
        install_themes(self, load_themes(None))
        choose_theme(self, "fusion-dark")
        self.push_screen(self.wizard, callback=self.results.append)


def make_wizard(
    *,
    launcher: FakeLauncher | None = None,
    registry: ModelsRegistry | None = None,
    demo: Path | None = None,
    settings: Settings = SETTINGS,
    browse_root: Path | None = None,
) -> LaunchWizard:
    return LaunchWizard(
        settings,
        None,
        launcher=launcher or FakeLauncher(),
        registry=registry,
        demo_path=demo,
        find_installed=False,
        browse_root=browse_root or Path("/nonexistent-browse-root"),
        show_path=show_name,
    )


async def settle(pilot: Any) -> None:
    for _ in range(3):
        await pilot.app.screen.workers.wait_for_complete()
        await pilot.pause()


async def model_chosen(pilot: Any, model: Path) -> LaunchWizard:
    """The host's wizard, settled, with `model` chosen (on to the plan) and settled again."""
    await settle(pilot)
    wizard: LaunchWizard = pilot.app.wizard
    wizard.choose_model(model)
    await settle(pilot)
    return wizard


async def launched(pilot: Any, model: Path) -> LaunchWizard:
    """`model_chosen`, then the launch started and settled."""
    wizard = await model_chosen(pilot, model)
    wizard.start_launch()
    await settle(pilot)
    return wizard


def text_of(wizard: LaunchWizard, selector: str) -> str:
    if selector == "#plan-table":
        return "\n".join(f"{row.label}  {row.value}" for row in wizard.rows)
    return str(wizard.query_one(selector, Static).render())


# --- pure helpers --------------------------------------------------------------------------------


def test_tree_shows_folders_and_gguf_only(tmp_path: Path) -> None:
    for name in ("a.gguf", "b.GGUF", "c.bin", ".hidden.gguf"):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "sub").mkdir()
    (tmp_path / ".git").mkdir()
    kept = sorted(p.name for p in GGUFTree.filter_paths(cast(Any, None), tmp_path.iterdir()))
    assert kept == ["a.gguf", "b.GGUF", "sub"]


# --- step 1 --------------------------------------------------------------------------------------


async def test_lists_recent_models_then_the_demo(tmp_path: Path, demo_model: Path) -> None:
    other = tmp_path / "other.Q8_0.gguf"
    other.write_bytes(demo_model.read_bytes()[:64])
    registry = ModelsRegistry(tmp_path / "models.json", clock=lambda: 1.0)
    registry.remember(other, parallel=2)
    registry.remember(tmp_path / "deleted.gguf")  # a file that is gone is not listed
    app = WizardHost(make_wizard(registry=registry, demo=demo_model))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        wizard = app.wizard
        assert wizard.choices == [other, demo_model]
        models = wizard.query_one("#models", OptionList)
        prompts = [str(models.get_option_at_index(i).prompt) for i in range(models.option_count)]
        assert prompts[0].startswith("other") and "last 2 slots" in prompts[0]
        assert prompts[1].startswith("SmolLM2-135M-Instruct") and "demo model" in prompts[1]


async def test_a_bad_gguf_shows_one_line_and_keeps_the_wizard_open(tmp_path: Path) -> None:
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"NOPE" + bytes(60))
    app = WizardHost(make_wizard())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        wizard = app.wizard
        wizard.query_one("#path", Input).value = str(bad)
        await pilot.press("enter")
        await settle(pilot)
        error = text_of(wizard, "#pick-error")
        assert error.startswith("broken.gguf: ") and "magic" in error
        assert "\n" not in error
        assert app.screen is wizard and wizard.step == PICK and wizard.plan is None
        assert app.results == []

        wizard.query_one("#path", Input).value = str(tmp_path / "model.bin")
        await pilot.press("enter")
        await settle(pilot)
        assert text_of(wizard, "#pick-error") == "model.bin is not a .gguf file"
        assert app.screen is wizard


# --- step 2 --------------------------------------------------------------------------------------


async def test_picking_the_demo_shows_facts_and_verdicts(demo_model: Path) -> None:
    app = WizardHost(make_wizard(demo=demo_model))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("enter")  # the highlighted demo model
        await settle(pilot)
        wizard = app.wizard
        assert wizard.step == PLAN
        assert wizard.plan is not None and wizard.plan.parallel == 4
        table = text_of(wizard, "#plan-table")
        assert "SmolLM2-135M-Instruct (llama, Q4_1)" in table
        assert "4.00 GiB configured" in table
        assert "32,768 tokens (fitted, limited by trained context)" in table
        assert "4 × 8,192 tokens each (split cache)" in table
        assert "no — no sliding-window layers" in table
        assert "full — any cached prefix is reused" in table
        assert wizard.query_one("#slots", Input).value == "4"
        assert not wizard.query_one("#next", Button).disabled


async def test_changing_the_slot_count_refits_live(demo_model: Path) -> None:
    app = WizardHost(make_wizard(demo=demo_model))
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await model_chosen(pilot, demo_model)
        slots = wizard.query_one("#slots", Input)
        assert app.focused is slots
        await pilot.press("end", "backspace", "8")
        await settle(pilot)
        assert slots.value == "8", slots.value
        assert wizard.plan is not None and wizard.plan.parallel == 8
        assert wizard.plan.per_slot_ctx == 8192
        assert "8 × 8,192 tokens each" in text_of(wizard, "#plan-table")
        # out of range: a reason, Launch disabled, the last good plan kept
        slots.value = "99"
        await settle(pilot)
        assert text_of(wizard, "#plan-error") == "slots must be from 1 to 64"
        assert wizard.query_one("#next", Button).disabled
        slots.value = "1"
        await settle(pilot)
        assert wizard.plan.parallel == 1 and wizard.plan.per_slot_ctx == 8192
        assert text_of(wizard, "#plan-error") == ""
        assert not wizard.query_one("#next", Button).disabled


async def test_memory_limits_show_in_the_refit(demo_model: Path) -> None:
    tight = replace(
        SETTINGS,
        local_models=LocalModelsSettings(
            managed=ManagedSettings(memory_bytes=1024**3 + 500 * 1024**2)
        ),
    )
    app = WizardHost(make_wizard(demo=demo_model, settings=tight))
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.wizard.choose_model(demo_model)
        await settle(pilot)
        plan = app.wizard.plan
        assert plan is not None and plan.fit.limited_by == "memory"
        assert 4 * 2048 <= plan.ctx < 4 * 8192 and plan.ctx % (256 * 4) == 0
        assert plan.fit.fits and plan.per_slot_ctx == plan.ctx // 4
        assert "limited by memory" in text_of(app.wizard, "#plan-table")


# --- step 3 --------------------------------------------------------------------------------------


async def test_launch_reports_stages_then_the_ready_line(tmp_path: Path, demo_model: Path) -> None:
    launcher = FakeLauncher(tok_s=95.0)
    registry = ModelsRegistry(tmp_path / "models.json", clock=lambda: 5.0)
    app = WizardHost(make_wizard(launcher=launcher, demo=demo_model, registry=registry))
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await model_chosen(pilot, demo_model)
        wizard.query_one("#slots", Input).value = "2"
        await settle(pilot)
        await pilot.press("enter")  # submit the slot count = Launch
        await settle(pilot)
        assert launcher.calls == [{"model": str(demo_model), "parallel": 2, "ctx": None}]
        assert wizard.step == LAUNCH and wizard.launch.state == "ready"
        stages = text_of(wizard, "#launch-stages")
        assert "✓ planning the launch" in stages
        assert "✓ loading the model" in stages and "…" not in stages
        result = text_of(wizard, "#launch-result")
        assert "ready · SmolLM2-135M-Instruct · 2 slots × 8192 ctx · ~95 tok/s" in result
        assert "KV cache: estimated 360 MiB · allocated 360 MiB · exact" in result
        assert str(wizard.query_one("#next", Button).label) == "Done"
        entry = registry.get(demo_model)
        assert entry is not None and entry.parallel == 2 and entry.prefix_reuse == "full"
        await pilot.press("enter")  # Done has the focus
        await pilot.pause()
        assert len(app.results) == 1
        choice = app.results[0]
        assert choice is not None and choice.model_path == demo_model and choice.parallel == 2
        assert choice.connection.record is not None and choice.connection.record.pid == 4242


async def test_a_failed_launch_shows_the_log_tail_and_can_go_back(demo_model: Path) -> None:
    tail = "llama_model_load: error loading model\nmain: exiting due to model loading error"
    error = DaemonStartError("llama-server exited while starting (exit code 1)", tail)
    launcher = FakeLauncher(stages=STAGES[:3], error=error)
    app = WizardHost(make_wizard(launcher=launcher, demo=demo_model))
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await launched(pilot, demo_model)
        assert wizard.launch.state == "failed" and app.screen is wizard
        assert text_of(wizard, "#launch-result") == (
            "The launch failed: llama-server exited while starting (exit code 1)"
        )
        log = text_of(wizard, "#launch-log")
        assert "main: exiting due to model loading error" in log
        assert wizard.query_one("#launch-log").display
        assert "✗ loading the model" in text_of(wizard, "#launch-stages")
        await pilot.click("#back")
        await pilot.pause()
        assert wizard.step == PLAN and app.results == []


async def test_escape_while_launching_cancels_the_launch(demo_model: Path) -> None:
    launcher = FakeLauncher(stages=STAGES[:3], hold=True)
    app = WizardHost(make_wizard(launcher=launcher, demo=demo_model))
    async with app.run_test(size=(80, 24)) as pilot:
        wizard = await model_chosen(pilot, demo_model)
        wizard.start_launch()
        await pilot.pause()
        assert wizard.launch.state == "launching"
        assert "… loading the model" in text_of(wizard, "#launch-stages")
        await pilot.press("escape")
        await settle(pilot)
        assert launcher.cancelled
        assert wizard.step == PLAN and text_of(wizard, "#plan-error") == "launch cancelled"
        assert app.screen is wizard
        await pilot.press("escape")
        await pilot.pause()
        assert app.results == [None]


async def test_escape_on_step_one_closes_with_none() -> None:
    app = WizardHost(make_wizard())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert app.wizard.step == PICK
        await pilot.press("escape")
        await pilot.pause()
        assert app.results == [None]


async def test_browse_picks_a_gguf_from_the_tree(tmp_path: Path) -> None:
    from tests.tinymodels import write_metadata

    write_metadata(tmp_path / "tiny.gguf", "llama", {
        ".block_count": 2, ".context_length": 4096, ".embedding_length": 64,
        ".attention.head_count": 2, ".attention.head_count_kv": 1,
    })  # fmt: skip
    (tmp_path / "readme.txt").write_text("not a model")
    app = WizardHost(make_wizard(browse_root=tmp_path))
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        wizard = app.wizard
        await pilot.click("#browse")
        tree = wizard.query_one("#tree", GGUFTree)
        for _ in range(200):  # the tree loads its folder in a thread
            if tree.root.children:
                break
            await pilot.pause(0.01)
        assert [str(node.label) for node in tree.root.children] == ["tiny.gguf"]
        tree.select_node(tree.root.children[0])
        await pilot.pause()
        for worker in [w for w in app.workers if w.group == "gguf-read"]:
            await worker.wait()
        await pilot.pause()
        assert wizard.step == PLAN and wizard.plan is not None
        assert wizard.plan.model_path == tmp_path / "tiny.gguf"
