"""The plain client of bench/cache_reuse.py: what an OpenAI-style chat client sends (oterm, elia,
opencode): one keep-alive client, the whole history on every request, no `id_slot`, no saved
slots; agent turns through the same runner as fusion's with `id_slot` removed from every request
and no gate (what a client without a slot policy sends).

When a conversation outgrows the slot (`long`), `--plain-overflow` says what it does:
  summary  as aider does: a summary of the older turns asked in a request of its own (the
           transcript sent, no cache to continue), then the history is the system prompt with
           that summary plus the last exchange. The trigger, the room kept and the summary budget
           are fusion's (`reply_reserve`, `next_turn_room`, `min(SUMMARY_TOKENS, max_tokens)`),
           and the summary sits where fusion's does (`system_text`): both sides hold the same
           shape of conversation, so their tokens compare.
  rolling  the oldest exchange dropped and the turn sent again when the server refuses it.
  stop     the turn refused; the message stays in the history, as such a client does.
(The last two keep another conversation than fusion's: a feature comparison, not a token one.)
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from _cache_common import LABEL, SYSTEM, Label, Recorder, TracedClient
from _cache_drivers import Driver, agent_config
from _keyboard import type_message

from fusion_tui.agent.approval import HeadlessApprover
from fusion_tui.agent.host import AgentHost
from fusion_tui.agent.session_run import SessionRunner
from fusion_tui.agent.tools.workspace import Workspace
from fusion_tui.chat.chat_prompt import ChatSummary, system_text
from fusion_tui.chat.compaction import SUMMARY_SYSTEM, SUMMARY_TOKENS, next_turn_room
from fusion_tui.chat.titles import TITLE_TOKENS, title_messages
from fusion_tui.endpoints.context_fit import reply_reserve
from fusion_tui.server.connect import Connection
from fusion_tui.server.errors import ContextExceeded, ServerError
from fusion_tui.server.types import StreamEvent
from fusion_tui.sessions.model import Session
from fusion_tui.sessions.store import SessionStore
from fusion_tui.status import ServerStatus

Messages = list[dict[str, str]]
TEMPLATE_BYTES = 32
"""Per message, more than the chat template's tokens around it (ChatML: about 5)."""


def drop_oldest(history: Messages) -> bool:
    """A rolling-window client's trim: the oldest exchange after the system message goes;
    False when only the system message and the new one are left."""
    if len(history) <= 2:
        return False
    del history[1 : 3 if len(history) > 3 else 2]
    return True


def kept_tail(history: Messages, *, last_exchange: bool) -> int:
    """Where the verbatim tail of a compacted history starts: at the last exchange (the user
    message before the newest answer, or before the newest user message and the answer it got)
    or, without it, at the newest user message; the end when the history ends with an answer."""
    users = [i for i, m in enumerate(history) if m["role"] == "user"]
    ends_with_user = history[-1]["role"] == "user"
    if not users:
        return len(history)
    if last_exchange:
        back = 2 if ends_with_user else 1
        return users[-back] if len(users) >= back else users[0]
    return users[-1] if ends_with_user else len(history)


def transcript(messages: Messages, previous: str) -> str:
    """The older turns as text for the summary request (fusion's side-slot summary's wording)."""
    lines = [f"{'User' if m['role'] == 'user' else 'Assistant'}: {m['content'].strip()}"
             for m in messages if m["role"] in ("user", "assistant")]  # fmt: skip
    text = "\n\n".join(lines)
    if previous.strip():
        text = f"Summary of what came before:\n{previous.strip()}\n\n{text}"
    return text


class PlainDriver(Driver):
    def __init__(self, server: Any, rec: Recorder, args: Any, root: Path) -> None:
        super().__init__(server, rec, args, root)
        self.histories: dict[str, Messages] = {}
        self.summaries: dict[str, str] = {}
        self._client: TracedClient | None = None
        self._url = ""
        self._n_ctx: int | None = None
        self.runners: dict[str, SessionRunner] = {}
        self.host: AgentHost | None = None

    @property
    def client(self) -> TracedClient:
        if self._client is None or self._url != self.server.url:
            self._client, self._url = TracedClient(self.server.url, self.rec), self.server.url
            self.host, self.runners, self._n_ctx = None, {}, None
        return self._client

    async def _ask(self, messages: Messages, n: int) -> str:
        body = {"messages": messages, "max_tokens": n, "temperature": 0.0}
        pieces: list[str] = []
        async for event in self.client.stream_chat(body):
            text = getattr(event, "text", None)
            if text:
                pieces.append(text)
        return "".join(pieces)

    async def turn(self, label: Label, text: str, *, pasted: bool = False) -> None:
        history = self.histories.setdefault(label.session, [{"role": "system", "content": SYSTEM}])
        history.append({"role": "user", "content": text})
        _ = self.client  # connected already, as a running client is
        if self.args.plain_overflow == "summary":
            await self.n_ctx()  # read at connect time, as such a client does, not after Enter
        token = LABEL.set(label)
        try:
            typed = await type_message(text, pasted=pasted, sleep=self.args.sleep_typing)
            self.rec.mark_call(typed.enter)
            if self.args.plain_overflow == "summary":
                await self._fit(label, history)
            while True:
                try:
                    answer = await self._ask(history, self.args.max_tokens)
                    break
                except ContextExceeded:  # `rolling`: the oldest exchange goes, the turn again
                    if self.args.plain_overflow != "rolling" or not drop_oldest(history):
                        raise
                    self.rec.retry_turn()
            history.append({"role": "assistant", "content": answer})
            self.rec.note_typing(typed.typing_s, 0.0)
            if self.args.plain_overflow == "summary":
                await self._ahead(label, history)
        except ServerError:
            pass  # `stop`: refused; the message stays in the history, as such a client does
        finally:
            LABEL.reset(token)

    # --- compaction (`--plain-overflow summary`) -----------------------------------------------

    async def n_ctx(self) -> int:
        if self._n_ctx is None:
            self._n_ctx = (await self.client.props()).n_ctx
        return self._n_ctx

    async def count(self, messages: Messages, room: int = 0) -> int:
        """The history's tokens as the server will see them (the client counts, as aider does);
        not counted (an upper bound answered) while the bytes of the messages plus a generous
        template allowance and `room` cannot reach the slot, as fusion's compactor skips it: a
        token is at least one byte, and a turn need not pay two requests for nothing."""
        bound = sum(len(m["content"].encode("utf-8")) + TEMPLATE_BYTES for m in messages)
        if bound + room <= await self.n_ctx():
            return bound
        prompt = await self.client.apply_template(messages)
        return len(await self.client.tokenize(prompt, add_special=True))

    async def _fit(self, label: Label, history: Messages) -> None:
        """Before the request: compact when the prompt and the answer would not fit the slot."""
        n_ctx = await self.n_ctx()
        reserve = reply_reserve(n_ctx, self.args.max_tokens)
        for last_exchange in (True, False):
            if await self.count(history, reserve) + reserve <= n_ctx:
                return
            await self._compact(label, history, last_exchange=last_exchange)

    async def _ahead(self, label: Label, history: Messages) -> None:
        """After the answer: compact now when the next turn would likely not fit, as fusion's
        compaction ahead does (the next user message counted as the room it keeps)."""
        n_ctx = await self.n_ctx()
        room = reply_reserve(n_ctx, self.args.max_tokens) + next_turn_room(n_ctx)
        probe = [*history, {"role": "user", "content": ""}]
        if await self.count(probe, room) + room > n_ctx:
            await self._compact(label, history, last_exchange=True)

    async def _compact(self, label: Label, history: Messages, *, last_exchange: bool) -> None:
        """The older turns summarised in a request of their own; the history becomes the system
        prompt with the summary, then the verbatim tail (`kept_tail`)."""
        start = kept_tail(history, last_exchange=last_exchange)
        older = history[1:start]
        if not older:
            return
        budget = min(SUMMARY_TOKENS, self.args.max_tokens)
        previous = self.summaries.get(label.session, "")
        text = transcript(older, previous)
        ask = [{"role": "system", "content": SUMMARY_SYSTEM}, {"role": "user", "content": ""}]
        limit = await self.n_ctx() - budget - 8
        for _ in range(3):  # the oldest part cut when the transcript would not fit the slot
            ask[1]["content"] = f"Summarise this conversation:\n\n{text}"
            n = await self.count(ask, budget + 8)
            if n <= limit:
                break
            text = "…" + text[int((n - limit) * len(text) / n * 1.1) + 1 :]
        token = LABEL.set(replace(label, kind="summary"))
        try:
            summary = (await self._ask(ask, budget)).strip()
            # told under the summary's label: the turn's own rows (an answer before a
            # compaction ahead) stay the turn's; the session's next request is flagged
            self.rec.mark_compacted()
        finally:
            LABEL.reset(token)
        self.summaries[label.session] = summary
        system = system_text(SYSTEM, ChatSummary(summary, 0))
        history[:] = [{"role": "system", "content": system}, *history[start:]]

    # --- side calls, leaving, agent ----------------------------------------------------------

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
            record = getattr(self.server, "record", None)
            conn = Connection(client, props, ServerStatus(state="ready"), record)
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
