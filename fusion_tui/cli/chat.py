"""Provides `fusion-tui chat`: one plain-chat turn, headless, for scripts and for measuring the
chat path without the TUI.

    fusion-tui chat MESSAGE [--session ID | --new] [--json]

The same session store and slot policy as the TUI's chat: the backend is `make_backend`'s plain
chat (`LocalBackend`: fresh slot for a new session, warm resume, the slot saved on leaving,
compaction when the session outgrows its slot). No title side call: the session is named after
its first message, as every session is until the TUI titles it.
With `--json`, stdout carries the same lines as `fusion-tui run --json` (`request`,
`prompt_progress`, `outcome`) plus `{"event": "compacted", "before", "after"}` when it compacts.
With several endpoints a `request` line carries `endpoint` (its label) and, on the
first request after a move, `moved_from`; a move is said on stderr in both modes.
Exit codes: 0 the turn completed, 1 otherwise (or the server failed), 2 bad input.
"""

from __future__ import annotations

import argparse
import sys

import anyio

from fusion_tui.agent.events import PromptProgressed, RequestDone
from fusion_tui.chat.events import (
    AnswerRestarted,
    Compacted,
    EndpointMoved,
    Notice,
    Progress,
    ReplyDone,
)
from fusion_tui.chat.factory import make_backend
from fusion_tui.chat.local import LocalBackend
from fusion_tui.cli.common import Context, Subparsers
from fusion_tui.cli.printer import Printer
from fusion_tui.cli.run import save_failed_turn
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import ServerError
from fusion_tui.server.types import StreamEnd, TextDelta
from fusion_tui.sessions.model import SessionFileError
from fusion_tui.sessions.store import SessionStoreError

PROG = "fusion-tui chat"


def register(sub: Subparsers) -> None:
    p = sub.add_parser("chat", help="send one chat message, headless (the TUI's plain chat)")
    p.add_argument("message", help="what to say")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--session", metavar="ID", help="continue this session")
    which.add_argument("--new", action="store_true", help="start a new session (the default)")
    p.add_argument("--json", action="store_true", help="one JSON object per line on stdout")


def run(args: argparse.Namespace, ctx: Context) -> int:
    text = str(args.message)
    if not text.strip():
        print(f"{PROG}: the message is empty; say something", file=sys.stderr)
        return 2
    try:
        backend = make_backend(
            ctx.settings, ctx.paths, model=getattr(args, "model", None), resume=args.session
        )
    except (SessionFileError, SessionStoreError, ValueError) as exc:
        print(f"{PROG}: cannot open session {args.session}: {exc}", file=sys.stderr)
        return 2
    assert isinstance(backend, LocalBackend)  # no workspace: the plain chat
    out = Printer(json_mode=bool(args.json), prog=PROG)
    return int(anyio.run(chat_turn, backend, text, out, ctx.settings, ctx.paths))


async def chat_turn(
    backend: LocalBackend, text: str, out: Printer, settings: Settings, paths: AppPaths
) -> int:
    """One turn; the session is saved whatever happens; the backend is closed (slot saved)."""
    session = backend.session
    try:
        status = await backend.start(out.status)
    except ServerError as exc:
        save_failed_turn(backend.store, session, text, "", str(exc))
        out.error(getattr(exc, "message", "") or str(exc))
        out.outcome("error", session.id)
        backend.store.release(session.id)
        return 1
    if status.fallback:  # the managed start failed, a remote endpoint serves
        out.note(status.fallback)
    outcome = "cancelled"
    try:
        outcome = await _stream(backend, text, out)
    finally:
        with anyio.CancelScope(shield=True):
            await backend.close()
        backend.store.release(session.id)
    if backend.save_error:
        out.error(f"the session was not saved: {backend.save_error}")
    out.outcome(outcome, session.id)
    return 0 if outcome == "completed" else 1


async def _stream(backend: LocalBackend, text: str, out: Printer) -> str:
    turn = sum(1 for m in backend.session.messages if m.role == "user") + 1
    outcome = "cancelled"
    async for event in backend.reply(text):
        if isinstance(event, TextDelta):
            out.text(event.text)
        elif isinstance(event, Progress):
            out.event(PromptProgressed(turn, event.total, event.cache, event.processed))
        elif isinstance(event, StreamEnd):
            out.event(request_done(backend, event, turn))
        elif isinstance(event, Compacted):
            out.compacted(event.before, event.after, event.text)
        elif isinstance(event, AnswerRestarted):  # several endpoints: the answer so far is dropped
            if not out.json_mode:
                out.text("\n")
            out.note(event.text)
        elif isinstance(event, EndpointMoved):  # said in both modes, as `run` does
            out.note(event.text)
        elif isinstance(event, Notice) and not out.json_mode:
            out.stderr.write(event.text + "\n")
        elif isinstance(event, ReplyDone):
            outcome = event.outcome
            out.text("\n")
            if event.outcome != "completed":
                out.error(event.note)
            elif not out.json_mode:
                out.stderr.write(event.note + "\n")
    return outcome


def request_done(backend: LocalBackend, end: StreamEnd, turn: int) -> RequestDone:
    """The `request` line of a chat turn, from the record the backend just made (with several
    endpoints it carries `endpoint` and, after a move, `moved_from`, as `run --json` does)."""
    own = [r for r in backend.session.requests if not r.side_call]
    last = own[-1] if own else None
    ttft = last.ttft_ms if last else None
    t = end.timings
    return RequestDone(
        step=turn,
        purpose="chat",
        id_slot=end.id_slot,
        prompt_n=t.prompt_n,
        cache_n=t.cache_n,
        predicted_n=t.predicted_n,
        ttft_ms=ttft,
        predicted_per_second=t.predicted_per_second,
        duration_ms=t.prompt_ms + t.predicted_ms,
        prompt_chars=0,
        endpoint=last.endpoint if last else None,
        moved_from=last.moved_from if last else None,
    )
