"""The phases of bench/cache_reuse.py, written once against a `Driver`; two drivers:

- `FusionDriver`: the product path. One `LocalBackend` per session (as the TUI and a new app
  instance would open them), titles through `make_title`, leaving/closing saves the slots, a
  resumed session reopens with `resume=ID`; agent turns through `AgentHost` + `SessionRunner`.
- `PlainDriver`: a plain OpenAI-style client: one keep-alive client, the whole history on every
  request, no `id_slot`, no saved slots; agent turns through the same runner with `id_slot`
  removed from every request and no gate (what a client without a slot policy sends).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from _cache_common import (
    LABEL,
    SYSTEM,
    Label,
    Recorder,
    Server,
    TracedClient,
    follow_up,
    opening,
    settings_with,
)

from fusion_tui.agent.approval import HeadlessApprover
from fusion_tui.agent.host import AgentHost
from fusion_tui.agent.session_run import SessionRunner
from fusion_tui.agent.task import AgentConfig
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.chat.events import Compacted, ReplyDone
from fusion_tui.chat.local import LocalBackend
from fusion_tui.chat.slot_keeper import SlotKeeper
from fusion_tui.chat.titles import TITLE_TOKENS, title_messages
from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import ContextExceeded, ServerError
from fusion_tui.server.types import StreamEvent
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore
from fusion_tui.slots.gate import SlotGate, slots_busy_probe
from fusion_tui.status import ServerStatus

AGENT_TASKS = (
    "List the files in this folder, read notes.txt and say in one line what it is about.",
    "Read notes.txt again and name the most important item in it.",
    "Which file here is the largest? Answer in one line.",
)


class Driver:
    """What a phase can do: a turn, a side call, leave, resume, restart, an agent task."""

    def __init__(self, server: Server, rec: Recorder, args: Any, root: Path) -> None:
        self.server, self.rec, self.args, self.root = server, rec, args, root

    async def turn(self, label: Label, text: str) -> None:
        raise NotImplementedError

    async def side(self, label: Label) -> None:
        raise NotImplementedError

    async def leave(self) -> None:
        """Every open session is left (the app exits)."""

    async def restart(self) -> None:
        await self.leave()
        await self.server.launch()
        self.rec.epoch += 1

    async def agent(self, label: Label, workspace: Path, task: str) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        await self.leave()


class FusionDriver(Driver):
    def __init__(self, server: Server, rec: Recorder, args: Any, root: Path) -> None:
        super().__init__(server, rec, args, root)
        self.settings = settings_with(server, temperature=0.0, max_tokens=args.max_tokens)
        self.open: dict[str, LocalBackend] = {}
        self.ids: dict[str, str] = {}
        self.hosts: dict[str, tuple[AgentHost, Connection]] = {}
        self.runners: dict[str, SessionRunner] = {}
        self.gates: dict[str, tuple[SlotGate, TracedClient]] = {}

    def shared_gate(self, total: int) -> SlotGate:
        """`--exclusive-gate`: one gate for every session of this server (as one slot keeper
        would hold), told that nobody else sends to the server, so it skips the busy probe."""
        url = self.server.url
        if url not in self.gates:
            client = TracedClient(url, self.rec)
            gate = SlotGate(lambda: total, busy_probe=slots_busy_probe(client.slots),
                            exclusive=lambda: True)  # fmt: skip
            self.gates[url] = (gate, client)
        return self.gates[url][0]

    async def backend(self, key: str) -> LocalBackend:
        b = self.open.get(key)
        if b is None:
            b = LocalBackend(self.settings, self.server.paths, resume=self.ids.get(key),
                             connector=self.server.connector(self.rec))  # fmt: skip
            await b.start(lambda _s: None)
            if self.args.exclusive_gate:
                b.keeper.gate = self.shared_gate(b.keeper.pool.total_slots)
            self.open[key], self.ids[key] = b, b.session.id
        return b

    async def turn(self, label: Label, text: str) -> None:
        b = await self.backend(label.session)  # an app that is already running
        token = LABEL.set(label)
        try:
            # the user types the message: as the TUI does at its first keystroke, the backend
            # prepares the session's slot and reads the next prompt's opening (about 40 ms
            # here; nobody types a message faster); the first token counts from Enter
            await b.read_ahead()
            self.rec.mark_call()
            async for event in b.reply(text):
                if isinstance(event, ReplyDone):  # what follows is compaction ahead
                    LABEL.set(replace(label, kind="summary"))
                elif isinstance(event, Compacted):
                    self.rec.mark_compacted()
        finally:
            LABEL.reset(token)

    async def side(self, label: Label) -> None:
        token = LABEL.set(Label(label.phase, label.session, "side", label.turn))
        try:
            await (await self.backend(label.session)).make_title()
        finally:
            LABEL.reset(token)

    async def leave(self) -> None:
        for key in list(self.open):
            await self.open.pop(key).close()  # leaving saves the session's slot
        for _host, conn in self.hosts.values():
            await conn.client.aclose()
        self.hosts.clear()
        self.runners.clear()
        for _gate, client in self.gates.values():
            await client.aclose()
        self.gates.clear()

    async def _host(self) -> AgentHost:
        url = self.server.url
        if url not in self.hosts:
            conn = await self.server.connector(self.rec)()
            self.hosts[url] = (await AgentHost.open(conn), conn)
        return self.hosts[url][0]

    async def agent(self, label: Label, workspace: Path, task: str) -> None:
        runner = self.runners.get(label.session)
        if runner is None:  # as `fusion-tui run` does: its own slot keeper, the one policy
            store = SessionStore.default(self.server.paths)
            session = Session.new(workspace=str(workspace))
            conn = await self.server.connector(self.rec)()
            keeper = SlotKeeper(store, session)
            keeper.attach(conn)
            host = await AgentHost.open(conn, pool=keeper.pool, gate=keeper.gate)
            self.hosts[f"agent:{label.session}"] = (host, conn)
            runner = SessionRunner(host, store, session, workspace=Workspace(workspace),
                                   approver=HeadlessApprover(), config=agent_config(self.args),
                                   slots=keeper)  # fmt: skip
            self.runners[label.session] = runner
        token = LABEL.set(label)
        try:
            self.rec.mark_call()  # the task is given: its first step's first token counts from here
            await runner.run(task)
        finally:
            LABEL.reset(token)


def agent_config(args: Any) -> AgentConfig:
    return AgentConfig(max_steps=args.agent_steps, n_predict=64, summary_n_predict=48,
                       sampling={"temperature": 0.0})  # fmt: skip


def drop_oldest(history: list[dict[str, str]]) -> bool:
    """A rolling-window client's trim: the oldest exchange after the system message goes;
    False when only the system message and the new one are left."""
    if len(history) <= 2:
        return False
    del history[1 : 3 if len(history) > 3 else 2]
    return True


class PlainDriver(Driver):
    def __init__(self, server: Server, rec: Recorder, args: Any, root: Path) -> None:
        super().__init__(server, rec, args, root)
        self.histories: dict[str, list[dict[str, str]]] = {}
        self._client: TracedClient | None = None
        self._url = ""
        self.runners: dict[str, SessionRunner] = {}
        self.host: AgentHost | None = None

    @property
    def client(self) -> TracedClient:
        if self._client is None or self._url != self.server.url:
            self._client, self._url = TracedClient(self.server.url, self.rec), self.server.url
            self.host, self.runners = None, {}
        return self._client

    async def _ask(self, messages: list[dict[str, str]], n: int) -> str:
        body = {"messages": messages, "max_tokens": n, "temperature": 0.0}
        pieces: list[str] = []
        async for event in self.client.stream_chat(body):
            text = getattr(event, "text", None)
            if text:
                pieces.append(text)
        return "".join(pieces)

    async def turn(self, label: Label, text: str) -> None:
        history = self.histories.setdefault(label.session, [{"role": "system", "content": SYSTEM}])
        history.append({"role": "user", "content": text})
        _ = self.client  # connected already, as a running client is
        token = LABEL.set(label)
        try:
            self.rec.mark_call()
            while True:
                try:
                    answer = await self._ask(history, self.args.max_tokens)
                    break
                except ContextExceeded:  # `rolling`: the oldest exchange goes, the turn again
                    if self.args.plain_overflow != "rolling" or not drop_oldest(history):
                        raise
                    self.rec.retry_turn()
            history.append({"role": "assistant", "content": answer})
        except ServerError:
            pass  # `stop`: refused; the message stays in the history, as such a client does
        finally:
            LABEL.reset(token)

    async def side(self, label: Label) -> None:
        history = self.histories[label.session]
        token = LABEL.set(Label(label.phase, label.session, "side", label.turn))
        try:
            await self._ask(title_messages(history[1]["content"]), TITLE_TOKENS)
        finally:
            LABEL.reset(token)

    async def leave(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def agent(self, label: Label, workspace: Path, task: str) -> None:
        client = self.client
        if self.host is None:
            props = await client.props()
            conn = Connection(client, props, ServerStatus(state="ready"), self.server.record)
            self.host = await AgentHost.open(conn)

            def completion() -> Any:
                async def run(body: dict[str, Any]) -> AsyncIterator[StreamEvent]:
                    plain = {k: v for k, v in body.items() if k != "id_slot"}
                    async for event in client.stream_completion(plain):
                        yield event

                return run

            self.host.completion = completion  # type: ignore[method-assign]
        runner = self.runners.get(label.session)
        if runner is None:
            store = SessionStore.default(self.server.paths)
            runner = SessionRunner(self.host, store, Session.new(workspace=str(workspace)),
                                   workspace=Workspace(workspace), approver=HeadlessApprover(),
                                   config=agent_config(self.args))  # fmt: skip
            self.runners[label.session] = runner
        token = LABEL.set(label)
        try:
            self.rec.mark_call()  # the task is given: its first step's first token counts from here
            await runner.run(task)
        finally:
            LABEL.reset(token)


# --- the phases: each a sequence of steps, every step run once per policy ----------------------

Step = Callable[[Driver], Awaitable[None]]
"""One unit of a phase, run on one driver; the runner interleaves the policies step by step."""


def turn_step(label: Label, text: str, *, side: bool = False) -> Step:
    async def step(d: Driver) -> None:
        await d.turn(label, text)
        if side:
            await d.side(label)

    return step


def sequential(a: Any, phase: str = "sequential", prefix: str = "s") -> Iterator[Step]:
    """K sessions round robin; each session is titled after its first turn (as the TUI does)."""
    for r in range(a.rounds):
        for k in range(a.sessions):
            text = opening(k, a.words) if r == 0 else follow_up(k, r)
            yield turn_step(Label(phase, f"{prefix}{k}", "turn", r), text, side=r == 0)


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
        yield turn_step(Label("resume", f"s{k}", "turn", 200), follow_up(k, 200))


def restart(_a: Any, phase: str = "restart", session: str = "s0") -> Iterator[Step]:
    async def step(d: Driver) -> None:
        await d.restart()  # fusion-tui saved the slots when the sessions were left
        await d.turn(Label(phase, session, "turn", 300), follow_up(0, 300))

    yield step


def oversubscribed(a: Any, phase: str) -> Iterator[Step]:
    prefix = "o" if phase == "oversubscribed" else "z"
    for r in range(a.rounds):
        for k in range(a.over_sessions):
            text = opening(k, a.words) if r == 0 else follow_up(k, r)
            yield turn_step(Label(phase, f"{prefix}{k}", "turn", r), text)


def long(a: Any, per_slot_ctx: int) -> Iterator[Step]:
    turns = a.long_turns or max(3, int(per_slot_ctx * 1.3 / (a.long_words * 3)) + 1)
    for r in range(turns):
        yield turn_step(Label("long", "L", "turn", r), opening(20 + r, a.long_words))


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
