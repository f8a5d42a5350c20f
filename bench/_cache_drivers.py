"""The clients of bench/cache_reuse.py, written against one `Driver` interface: fusion-tui's own
path here, the plain client in `_cache_plain.py`.

`FusionDriver` is the product path: one `LocalBackend` per session (as the TUI and a new app
instance open them), the TUI's keystroke hook (`read_ahead`) at the message's first keystroke,
titles through `make_title`, leaving/closing saves the slots, a resumed session reopens with
`resume=ID`; agent turns through `AgentHost` + `SessionRunner` with the keeper, as
`fusion-tui run` does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from _cache_common import LABEL, Label, Recorder, TracedClient, settings_with
from _keyboard import type_message

from fusion_tui.agent.approval import HeadlessApprover
from fusion_tui.agent.host import AgentHost
from fusion_tui.agent.session_run import SessionRunner
from fusion_tui.agent.task import AgentConfig
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.chat.events import Compacted, ReplyDone
from fusion_tui.chat.local import LocalBackend
from fusion_tui.server.connect import Connection
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore
from fusion_tui.slots.gate import SlotGate, slots_busy_probe
from fusion_tui.slots.keeper import SlotKeeper


class Driver:
    """What a phase can do: a turn, a side call, leave, resume, restart, an agent task."""

    titles_always = False
    """Titles every session whatever the phase says (the TUI does; a plain client may not)."""

    def __init__(self, server: Any, rec: Recorder, args: Any, root: Path) -> None:
        self.server, self.rec, self.args, self.root = server, rec, args, root

    async def turn(self, label: Label, text: str, *, pasted: bool = False) -> None:
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


def agent_config(args: Any) -> AgentConfig:
    return AgentConfig(max_steps=args.agent_steps, n_predict=64, summary_n_predict=48,
                       sampling={"temperature": 0.0})  # fmt: skip


class FusionDriver(Driver):
    titles_always = True

    def __init__(self, server: Any, rec: Recorder, args: Any, root: Path) -> None:
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
        """The session's backend; opening it (a new app instance) is before the user types."""
        b = self.open.get(key)
        if b is None:
            b = LocalBackend(self.settings, self.server.paths, resume=self.ids.get(key),
                             connector=self.server.connector(self.rec))  # fmt: skip
            await b.start(lambda _s: None)
            if self.args.exclusive_gate:
                b.keeper.gate = self.shared_gate(b.keeper.pool.total_slots)
            self.open[key], self.ids[key] = b, b.session.id
        return b

    async def turn(self, label: Label, text: str, *, pasted: bool = False) -> None:
        b = await self.backend(label.session)  # an app that is already running
        token = LABEL.set(label)
        try:
            # as the TUI does at the message's first keystroke: the session's slot made ready
            # (a restore, room made) and the next prompt's opening read, while the user types;
            # the first token counts from Enter, so what is still running then counts in it
            typed = await type_message(text, pasted=pasted, at_first_key=b.read_ahead,
                                       sleep=self.args.sleep_typing)  # fmt: skip
            self.rec.mark_call(typed.enter)
            try:
                async for event in b.reply(text):
                    if isinstance(event, ReplyDone):  # what follows is compaction ahead
                        LABEL.set(replace(label, kind="summary"))
                    elif isinstance(event, Compacted):
                        self.rec.mark_compacted()
            finally:
                ahead = await typed.settle()
            LABEL.set(label)
            self.rec.note_typing(typed.typing_s, ahead)
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
