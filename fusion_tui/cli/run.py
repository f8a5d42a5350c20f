"""Provides `fusion-tui run`: one agent task of a session, headless, for scripts and CI.

    fusion-tui run TASK [--session ID | --new] [--workspace DIR] [--yes] [--allow-shell PREFIX]...
                        [--max-duration-ms N] [--max-steps N] [--json]

With `--json`, stdout carries one JSON object per line (names are an interface, issue 4/5):
`{"event": "request", "id_slot", "prompt_n", "cache_n", "ttft_ms", "predicted_per_second", ...}`
per request, `{"event": "tool", "name", "ok"}` per tool call (plus `"error"` when `ok` is
false), `{"event": "prompt_progress", "processed", "total", "cache"}` while a prompt is read, and
last `{"event": "outcome", "outcome", "session"}`. Without it, progress goes to stderr and the
summary to stdout.
Exit codes: 0 completed, 1 any other outcome (`stuck`, `no_answer`, ...; or the server failed),
2 bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import anyio

from fusion_tui.agent.approval import HeadlessApprover
from fusion_tui.agent.events import (
    AgentEvent,
    Compacted,
    PromptProgressed,
    RepeatBlocked,
    RequestDone,
    StepFailed,
    StepStarted,
    ToolFinished,
    WorkerEvent,
    to_json_line,
    tool_error,
)
from fusion_tui.agent.prompt import TemplateProbeError
from fusion_tui.agent.session_run import (
    AgentHost,
    SessionRunner,
    agent_config,
    open_session,
)
from fusion_tui.agent.tools.workspace import ToolError, Workspace
from fusion_tui.cli.common import Context, Subparsers, positive
from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.runtime import Connection, connect, release
from fusion_tui.server.errors import ServerError
from fusion_tui.sessions.model import Session, SessionFileError, WallClock
from fusion_tui.sessions.store import SessionStore, SessionStoreError
from fusion_tui.status import ServerStatus


def register(sub: Subparsers) -> None:
    p = sub.add_parser("run", help="run the coding agent on one task, headless")
    p.add_argument("task", help="what the agent should do")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--session", metavar="ID", help="continue this session")
    which.add_argument("--new", action="store_true", help="start a new session (the default)")
    p.add_argument("--workspace", metavar="DIR", help="project folder (default: the session's, "
                   "else the current folder)")  # fmt: skip
    p.add_argument("--yes", action="store_true", help="allow every write and shell command")
    p.add_argument(
        "--allow-shell", action="append", default=[], metavar="PREFIX",
        help="allow shell commands starting with these words (repeatable)",
    )  # fmt: skip
    p.add_argument("--max-duration-ms", type=positive, metavar="N", help="task time ceiling")
    p.add_argument("--max-steps", type=positive, metavar="N", help="step limit")
    p.add_argument("--json", action="store_true", help="one JSON object per line on stdout")


class BadInput(Exception):
    """Exit 2 with this one line."""


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Exit 0/1/2; stopped by SIGTERM / SIGINT: the session is saved first, exit 143 / 130."""
    from fusion_tui.run_stop import StopWatch

    settings, paths = ctx.settings, ctx.paths
    watch = StopWatch(save_failed_turn)
    try:
        stopped = anyio.run(watch.run, lambda: run_task_command(args, settings, paths, watch.seen))
    except BadInput as exc:
        print(f"fusion-tui run: {exc}", file=sys.stderr)
        return 2
    if stopped.signum is None:
        return int(stopped.result or 0)
    print(f"fusion-tui run: {watch.kept(stopped.signal_name, str(args.task))}", file=sys.stderr)
    return stopped.exit_code


def prepare(args: argparse.Namespace, store: SessionStore) -> tuple[Session, Workspace, str]:
    """The session, the workspace and the task, or `BadInput`."""
    task = str(args.task).strip()
    if not task:
        raise BadInput("the task is empty; say what the agent should do")
    try:
        session = open_session(store, args.session)
        store.claim(session.id)  # a second instance on this session is refused here
    except (SessionFileError, SessionStoreError) as exc:
        raise BadInput(f"cannot open session {args.session}: {exc}") from None
    folder = args.workspace or getattr(args, "app_workspace", None) or session.workspace
    folder = folder or os.getcwd()
    try:
        workspace = Workspace(folder)
    except ToolError as exc:
        raise BadInput(str(exc)) from None
    return session, workspace, task


async def run_task_command(
    args: argparse.Namespace,
    settings: Settings,
    paths: AppPaths,
    seen: Callable[[SessionStore, Session, str], None] | None = None,
) -> int:
    store = SessionStore.default(paths)
    session, workspace, task = prepare(args, store)
    if seen is not None:  # what a stop signal must save and report (run_stop.py)
        seen(store, session, str(workspace.root))
    out = Printer(json_mode=bool(args.json))
    conn: Connection | None = None
    try:
        try:
            conn = await connect(settings, paths, out.status, model=getattr(args, "model", None))
            idle = settings.local_models.request_timeout_ms / 1000
            host = await AgentHost.open(
                conn, idle_timeout=idle, configured_workers=settings.llm.run_mode.fusion.workers
            )
        except (ServerError, TemplateProbeError) as exc:
            save_failed_turn(store, session, task, str(workspace.root), str(exc))
            out.error(getattr(exc, "message", "") or str(exc))  # one paragraph
            out.outcome("error", session.id)
            return 1
        config = agent_config(
            settings, max_steps=args.max_steps, max_duration_ms=args.max_duration_ms
        )
        approver = HeadlessApprover(yes=bool(args.yes), allow_shell=tuple(args.allow_shell))
        runner = SessionRunner(
            host, store, session, workspace=workspace, approver=approver, config=config
        )
        report = await runner.run(task, on_event=out.event)
        if report.save_error:
            out.error(f"the session was not saved: {report.save_error}")
        if report.error:
            out.error(report.error)
        summary = report.result.summary if report.result else ""
        out.finish(report.outcome, session.id, summary, report.result.steps if report.result else 0)
        return 0 if report.outcome == "completed" else 1
    finally:
        if conn is not None:
            with anyio.CancelScope(shield=True):
                await release(settings, paths, conn)


def save_failed_turn(
    store: SessionStore,
    session: Session,
    task: str,
    workspace: str,
    error: str,
    clock: WallClock = time.time,
) -> None:
    """The server never answered: keep what the user wrote, with an `error` turn."""
    session.begin_turn(task, workspace=workspace, clock=clock)
    session.end_turn("error", None, error, clock)
    problem = store.try_save(session)
    if problem:
        print(f"fusion-tui run: the session was not saved: {problem}", file=sys.stderr)


class Printer:
    """JSON lines on stdout, or readable progress on stderr and the summary on stdout."""

    def __init__(
        self, *, json_mode: bool, stdout: TextIO | None = None, stderr: TextIO | None = None
    ) -> None:
        self.json_mode = json_mode
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr

    def _line(self, obj: dict[str, Any]) -> None:
        self.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        self.stdout.flush()

    def _say(self, text: str) -> None:
        self.stderr.write(text + "\n")
        self.stderr.flush()

    def status(self, status: ServerStatus) -> None:
        if not self.json_mode:
            self._say(f"server: {status.summary()}")

    def error(self, text: str) -> None:
        self._say(f"fusion-tui run: {text.splitlines()[0] if text else 'failed'}")

    def event(self, event: AgentEvent) -> None:
        prefix = ""
        if isinstance(event, WorkerEvent):
            prefix = f"[worker {event.worker}] "
            event = event.event
        if self.json_mode:
            if isinstance(event, RequestDone | ToolFinished):
                line = to_json_line(event)
                if line is not None:
                    self._line(line)
            elif isinstance(event, PromptProgressed):
                self._line(
                    {
                        "event": "prompt_progress",
                        "processed": event.processed,
                        "total": event.total,
                        "cache": event.cache,
                    }
                )
            return
        text = describe(event)
        if text:
            self._say(prefix + text)

    def outcome(self, outcome: str, session_id: str) -> None:
        if self.json_mode:
            self._line({"event": "outcome", "outcome": outcome, "session": session_id})
        else:
            self._say(f"outcome: {outcome} · session {session_id}")

    def finish(self, outcome: str, session_id: str, summary: str, steps: int) -> None:
        if self.json_mode:
            self.outcome(outcome, session_id)
            return
        self._say(f"outcome: {outcome} · {steps} step(s) · session {session_id}")
        if summary:
            self.stdout.write(summary.rstrip() + "\n")
            self.stdout.flush()


def describe(event: AgentEvent) -> str:
    """One readable progress line for an event ("" for those not worth a line)."""
    if isinstance(event, StepStarted):
        left = max(0, event.time_left_ms) // 1000
        return f"step {event.step}/{event.max_steps} · {left // 60}m{left % 60:02d}s left"
    if isinstance(event, RequestDone):
        total = event.prompt_n + event.cache_n
        first = f"{event.ttft_ms / 1000:.1f} s" if event.ttft_ms is not None else "none"
        ended = "" if event.ended == "ok" else f" · {event.ended}"
        return (
            f"  {event.purpose} on slot {event.id_slot} · {event.cache_n:,} of {total:,} prompt "
            f"tokens cached · first token {first} · {event.predicted_per_second:.0f} tok/s{ended}"
        )
    if isinstance(event, ToolFinished):
        mark = "ok" if event.ok else "failed"
        args = json.dumps(event.args, ensure_ascii=False)
        if len(args) > 80:
            args = args[:77] + "..."
        line = f"  {event.name} {args} · {mark} · {event.duration_ms:.0f} ms"
        if not event.ok:
            line += f"\n    {tool_error(event)}"
        return line
    if isinstance(event, StepFailed):
        return f"  step {event.step} produced no valid action: {event.error}"
    if isinstance(event, Compacted):
        return f"  compacted the transcript: {event.note}"
    if isinstance(event, RepeatBlocked):
        verdict = "the task ends stuck" if event.stuck else "not run again"
        return f"  {event.name} failed {event.failures}× the same way: {verdict}"
    return ""
