"""Which fusion_tui modules does one chat turn / one agent step touch at run time?

Run from the repo root with the project's venv, one scenario per process:

    PYTHONDONTWRITEBYTECODE=1 .venv/bin/python tools/walk.py SCENARIO

SCENARIO is one of:
  chat-backend  LocalBackend (made by chat.factory.make_backend) against the fake llama-server
                (tests/fakes/fake_server.py, external mode): one `reply(text)`, traced; then the
                title side call and a second turn, each traced on its own.
  chat-tui      the TUI alone: the app of tests/tui/test_main_screen.py
                ::test_prompt_streams_an_answer_and_shows_telemetry (ScriptedBackend); traced
                from the Enter key to the answer drawn (workers done).
  chat-app      both: the real app (tui.app.build_app, external mode) with its real LocalBackend
                against the fake server; traced from Enter to the answer drawn (turn 1, which
                ends with the title side call), then a second turn.
  agent-backend AgentBackend (make_backend with a workspace, `HeadlessApprover(yes=True)`,
                `agent.testCmd` set) against the fake server: one `reply(text)` whose one model
                reply writes calc.py, then the test command runs (the check) and the task ends.
  agent-app     the same step in the real app (agent mode, as tests/tui/test_agent_tui.py): Enter,
                the approval modal for the write (ctrl+y), the check, the answer drawn.

How: every fusion_tui module is imported first (so nothing is imported during the window), a
profile function (sys.setprofile + threading.setprofile) is installed, and only calls made between
`start()` and `stop()` are kept. A call counts for the module whose file holds the function's code;
a dataclass's generated method (`__init__`, `__eq__`, ...; its code has no file) counts for the
module of its class when fusion_tui code called it (not a test's scripted backend), and such a
module is marked "types only" (`*`) when that is all it showed.
Results: printed, and written to $TMPDIR/fusion-walk/<scenario>[-<window>].json.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import pkgutil
import sys
import tempfile
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
for key in list(os.environ):
    if key.startswith("FUSION_TUI_"):
        del os.environ[key]
HOME = Path(tempfile.mkdtemp(prefix="fusion-walk-home-"))
os.environ["FUSION_TUI_HOME"] = str(HOME)

import fusion_tui  # noqa: E402

PKG = str(Path(fusion_tui.__file__).parent) + os.sep
TESTS = str(REPO / "tests") + os.sep
OUT = Path(tempfile.gettempdir()) / "fusion-walk"


def import_everything() -> None:
    """Import-time work happens here, before any window opens."""
    for info in pkgutil.walk_packages(fusion_tui.__path__, "fusion_tui."):
        if info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)


def module_of(filename: str) -> str:
    rel = filename[len(PKG) :]
    parts = rel[:-3].split(os.sep)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["fusion_tui", *parts])


class Tracer:
    def __init__(self) -> None:
        self.active = False
        self.reset()

    def reset(self) -> None:
        self.calls: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.generated: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.entries: dict[str, set[str]] = defaultdict(set)
        """module -> the outermost fusion_tui frames (entry points) its calls came under."""
        self.imports: set[str] = set()

    def profile(self, frame: Any, event: str, arg: Any) -> None:
        if not self.active or event != "call":
            return
        code = frame.f_code
        filename = code.co_filename
        if filename.startswith(PKG):
            mod = module_of(filename)
            if code.co_name == "<module>":
                self.imports.add(mod)
                return
            self.calls[mod][code.co_qualname] += 1
            self.entries[mod].add(self.entry(frame))
        elif filename.startswith("<") and code.co_argcount:
            first = frame.f_locals.get(code.co_varnames[0])
            cls = first if isinstance(first, type) else type(first)
            mod = getattr(cls, "__module__", "") or ""
            if mod.startswith("fusion_tui") and self.called_from_package(frame):
                self.generated[mod][f"{cls.__qualname__}.{code.co_name}"] += 1

    @staticmethod
    def called_from_package(frame: Any) -> bool:
        """Whether the nearest caller that is fusion_tui or test code is fusion_tui (an event a
        test's scripted backend builds is the test's, not the package's)."""
        f = frame.f_back
        while f is not None:
            name = f.f_code.co_filename
            if name.startswith(PKG):
                return True
            if name.startswith(TESTS):
                return False
            f = f.f_back
        return False

    @staticmethod
    def entry(frame: Any) -> str:
        outer = None
        f = frame
        while f is not None:
            if f.f_code.co_filename.startswith(PKG):
                outer = f
            f = f.f_back
        assert outer is not None
        return f"{module_of(outer.f_code.co_filename)}:{outer.f_code.co_qualname}"

    def install(self) -> None:
        threading.setprofile(self.profile)  # threads started from now on
        sys.setprofile(self.profile)

    def start(self) -> None:
        self.reset()
        self.active = True

    def stop(self) -> None:
        self.active = False

    def report(self, name: str) -> dict[str, Any]:
        called = set(self.calls)
        types_only = set(self.generated) - called
        touched = sorted(called | types_only)
        top: dict[str, list[str]] = defaultdict(list)
        leaf: dict[str, list[str]] = defaultdict(list)
        for mod in touched:
            parts = mod.split(".")[1:]
            top[parts[0] + "/" if len(parts) > 1 else "(top level)"].append(mod)
            leaf["/".join(parts[:-1]) + "/" if len(parts) > 1 else "(top level)"].append(mod)
        result = {
            "window": name,
            "modules": len(touched),
            "modules_with_code_run": len(called),
            "types_only": sorted(types_only),
            "folders": len(top),
            "leaf_folders": len(leaf),
            "by_folder": {k: sorted(v) for k, v in sorted(top.items())},
            "functions": {m: dict(sorted(self.calls[m].items())) for m in sorted(called)},
            "generated": {m: dict(sorted(v.items())) for m, v in sorted(self.generated.items())},
            "entries": {m: sorted(v) for m, v in sorted(self.entries.items())},
            "imported_in_window": sorted(self.imports),
        }
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / f"{name}.json").write_text(json.dumps(result, indent=1))
        print(
            f"\n== {name}: {len(touched)} modules in {len(top)} folders "
            f"({len(leaf)} leaf folders); {len(types_only)} of them types only"
        )
        for folder, mods in sorted(top.items()):
            shown = ", ".join(
                m.split(".", 1)[1] + ("*" if m in types_only else "") for m in sorted(mods)
            )
            print(f"  {folder:12} {len(mods):2}  {shown}")
        if self.imports:
            print(f"  imported during the window (not counted): {sorted(self.imports)}")
        return result


TRACER = Tracer()


def paths_for(tag: str) -> Any:
    from fusion_tui.paths import AppPaths

    root = HOME / tag
    return AppPaths(root / "config", root / "data", root / "state", root / "log")


def fake_chat_endpoint() -> None:
    """The fake serves native `/completion` only: a chat-format body (the title side call when
    prefix reuse is not known to be `full`) is rendered into one prompt, as the unit tests'
    `FakeChatBackend._open_stream` (tests/unit/local_fake.py) does. The rest is the real code."""
    from fusion_tui.chat.local import LocalBackend
    from tests.unit.local_fake import render

    real = LocalBackend._open_stream

    def open_stream(self: Any, body: dict[str, Any]) -> Any:
        if "messages" not in body:
            return real(self, body)
        native = {k: v for k, v in body.items() if k != "messages"}
        native["prompt"] = render(body["messages"])
        idle = self.settings.local_models.request_timeout_ms / 1000
        return self.conn.client.stream_completion(native, idle_timeout=idle)

    LocalBackend._open_stream = open_stream  # type: ignore[method-assign]


def external(url: str, **kw: Any) -> Any:
    from fusion_tui.config import Settings
    from fusion_tui.config.settings import ServerSettings, UISettings

    return Settings(
        server=ServerSettings(mode="external", url=url), ui=UISettings(cursor_blink=False), **kw
    )


# --- chat ---------------------------------------------------------------------------------------


async def chat_backend() -> None:
    from fusion_tui.chat.factory import make_backend
    from tests.fakes.fake_server import FakeLlamaServer, Reply

    fake_chat_endpoint()
    with FakeLlamaServer(total_slots=4, n_ctx=4096) as srv:
        backend = make_backend(external(srv.url), paths_for("chat-backend"))
        await backend.start(lambda _s: None)

        async def turn(n: int, text: str, answer: list[str]) -> None:
            srv.script(Reply(text=answer))
            TRACER.start()
            events = [e async for e in backend.reply(text)]
            TRACER.stop()
            last = events[-1]
            print(f"turn {n} ended with", type(last).__name__, getattr(last, "outcome", ""))
            TRACER.report(f"chat-backend-turn{n}")

        try:
            await turn(1, "hello there", ["Hel", "lo", " there", "."])
            srv.script(Reply(text=['"Greeting"']))
            TRACER.start()
            title = await backend.make_title()
            TRACER.stop()
            print("title:", title)
            TRACER.report("chat-backend-title")
            await turn(2, "and again", ["Fine", ", thanks."])
        finally:
            await backend.close()


async def settle(app: Any, pilot: Any) -> None:
    """Every worker of the app's screens done, then one more frame."""
    for _ in range(500):
        running = [w for w in app.workers if w.is_running]
        if not running:
            break
        await pilot.pause(0.02)
    await pilot.pause()


async def chat_tui() -> None:
    from fusion_tui.config import Settings
    from fusion_tui.tui.app import build_app
    from tests.tui.scripted_backend import ScriptedBackend

    backend = ScriptedBackend([["Hello", ", ", "**world**"]])
    app = build_app(Settings(), backend)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press(*"hi")
        await settle(app, pilot)
        TRACER.start()
        await pilot.press("enter")
        await app.screen.workers.wait_for_complete()
        await settle(app, pilot)
        TRACER.stop()
        assert backend.sent == ["hi"]
    TRACER.report("chat-tui-turn1")


async def chat_app() -> None:
    from fusion_tui.chat.local import LocalBackend
    from fusion_tui.tui.app import build_app
    from fusion_tui.tui.widgets.chat_message import ChatMessage
    from tests.fakes.fake_server import FakeLlamaServer, Reply

    fake_chat_endpoint()
    with FakeLlamaServer(total_slots=4, n_ctx=4096) as srv:
        app = build_app(external(srv.url), paths=paths_for("chat-app"))
        assert isinstance(app.backend, LocalBackend)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(app, pilot)
            for n, (text, answer) in enumerate(
                [("hello there", ["Hel", "lo", "."]), ("and again", ["Fine", "."])], start=1
            ):
                await pilot.press(*text)  # the read-ahead at the first key: not in the window
                await settle(app, pilot)
                srv.script(Reply(text=answer))
                if n == 1:
                    srv.script(Reply(text=['"Greeting"']))  # the title side call
                TRACER.start()
                await pilot.press("enter")
                await app.screen.workers.wait_for_complete()
                await settle(app, pilot)
                TRACER.stop()
                shown = list(app.screen.query(ChatMessage))[-1].text
                assert shown == "".join(answer), shown
                TRACER.report(f"chat-app-turn{n}")


# --- agent --------------------------------------------------------------------------------------

STEP = "calc.py\n```python\ndef add(a, b):\n    return a + b\n```"
TEST_CMD = "python3 -c 'import calc; assert calc.add(2, 3) == 5'"
TASK = "write calc.py with add(a, b)"


def agent_settings(url: str) -> Any:
    from fusion_tui.config.settings import AgentSettings

    return external(url, agent=AgentSettings(test_cmd=TEST_CMD))


async def agent_backend() -> None:
    from fusion_tui.agent.approval import HeadlessApprover
    from fusion_tui.chat.factory import make_backend
    from tests.fakes.fake_server import FakeLlamaServer, Reply

    ws = HOME / "agent-backend-ws"
    ws.mkdir()
    with FakeLlamaServer(total_slots=2, n_ctx=8192) as srv:
        backend = make_backend(agent_settings(srv.url), paths_for("agent-backend"), workspace=ws,
                               approver=HeadlessApprover(yes=True))  # fmt: skip
        await backend.start(lambda _s: None)
        try:
            srv.script(Reply(text=[STEP[:20], STEP[20:]]))
            TRACER.start()
            events = [e async for e in backend.reply(TASK)]
            TRACER.stop()
        finally:
            await backend.close()
    print("ended with", type(events[-1]).__name__, getattr(events[-1], "outcome", ""))
    assert (ws / "calc.py").is_file()
    TRACER.report("agent-backend-step")


async def agent_app() -> None:
    from fusion_tui.chat.agent_backend import AgentBackend
    from fusion_tui.tui.app import build_app
    from fusion_tui.tui.screens.approval import ApprovalModal
    from tests.fakes.clock import FakeClock
    from tests.fakes.fake_server import FakeLlamaServer, Reply

    ws = HOME / "agent-app-ws"
    ws.mkdir()
    with FakeLlamaServer(total_slots=2, n_ctx=8192) as srv:
        app = build_app(agent_settings(srv.url), paths=paths_for("agent-app"), workspace=ws)
        app.approver.clock = FakeClock()
        assert isinstance(app.backend, AgentBackend)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(app, pilot)
            await pilot.press(*TASK)
            await settle(app, pilot)
            srv.script(Reply(text=[STEP[:20], STEP[20:]]))
            TRACER.start()
            await pilot.press("enter")
            for _ in range(250):
                if isinstance(app.screen, ApprovalModal):
                    break
                await pilot.pause(0.02)
            assert isinstance(app.screen, ApprovalModal), "the approval modal never appeared"
            for _ in range(20):  # its grace period (a fake clock) over, then allow once
                await pilot.pause()
                app.screen.key_clock.clock.advance(1.0)
                await pilot.press("ctrl+y")
                await pilot.pause()
                if not isinstance(app.screen, ApprovalModal):
                    break
            await app.screen.workers.wait_for_complete()
            await settle(app, pilot)
            TRACER.stop()
    assert (ws / "calc.py").is_file()
    TRACER.report("agent-app-step")


SCENARIOS = {
    "chat-backend": chat_backend,
    "chat-tui": chat_tui,
    "chat-app": chat_app,
    "agent-backend": agent_backend,
    "agent-app": agent_app,
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in SCENARIOS:
        sys.exit(f"usage: walk.py {{{'|'.join(SCENARIOS)}}}")
    import_everything()
    TRACER.install()
    try:
        asyncio.run(SCENARIOS[sys.argv[1]]())
    finally:
        sys.setprofile(None)
        import shutil

        shutil.rmtree(HOME, ignore_errors=True)
