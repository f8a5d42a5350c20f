"""The chat backend in a process of its own, for the kill tier (`test_kill_tier.py`).

    python -m tests.fault.kill_driver SESSION_ID|new TURNS

Settings come from the environment (FUSION_TUI_HOME and FUSION_TUI_* overrides). It adopts the
managed daemon, runs TURNS short turns, then leaves the session (which saves its slot) and says
on stdout what it is doing, one line per event, so the test can kill it at a chosen moment and
knows what was confirmed on disk before the kill:

    open ID TURNS MESSAGES   the session as loaded (the resume check)
    phase stream             the first words of an answer arrived
    phase save               a session save starts
    saved TURNS MESSAGES     a session save finished (it is on disk)
    phase slot               a slot save starts
    slot saved               it finished
    done
"""

from __future__ import annotations

import os
import sys
from contextlib import aclosing
from typing import Any

import anyio

from fusion_tui.chat.local import LocalBackend
from fusion_tui.config import load_settings
from fusion_tui.config.loader import config_path
from fusion_tui.paths import AppPaths
from fusion_tui.server.types import TextDelta


def say(*words: object) -> None:
    sys.stdout.write(" ".join(str(w) for w in words) + "\n")
    sys.stdout.flush()


async def main(session: str, turns: int) -> None:
    paths = AppPaths.default()
    settings = load_settings(config_path(paths.config_file, os.environ))
    backend = LocalBackend(settings, paths, resume=None if session == "new" else session)
    s = backend.session
    say("open", s.id, len(s.turns), len(s.messages))
    real_save = backend.store.save

    def save(session: Any) -> Any:
        say("phase save")
        path = real_save(session)
        say("saved", len(session.turns), len(session.messages))
        return path

    backend.store.save = save  # type: ignore[method-assign]
    await backend.start(lambda _status: None)
    archive = backend.keeper.archive
    assert archive is not None, "the shared daemon has no --slot-save-path"
    real_slot_save = archive.save

    async def slot_save(*args: Any, **kw: Any) -> Any:
        say("phase slot")
        tag = await real_slot_save(*args, **kw)
        say("slot saved")
        return tag

    archive.save = slot_save  # type: ignore[method-assign]
    try:
        for n in range(turns):
            streaming = False
            async with aclosing(backend.reply(f"Name one colour ({len(s.turns) + n}).")) as events:
                async for event in events:
                    if isinstance(event, TextDelta) and not streaming:
                        streaming = True
                        say("phase stream")
    finally:
        await backend.close()
    say("done")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]))
