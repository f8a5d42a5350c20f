"""Provides `fusion-tui run`: one agent task of a session, headless, for scripts and CI.

    fusion-tui run TASK [--session ID | --new] [--workspace DIR] [--yes] [--allow-shell PREFIX]...
                        [--max-duration-ms N] [--max-steps N] [--test-cmd CMD]
                        [--test-rounds N] [--retries N] [--json]

With `--json`, stdout carries one JSON object per line (the names are an interface):
`{"event": "request", "id_slot", "prompt_n", "cache_n", "ttft_ms", "predicted_per_second", ...}`
per request, `{"event": "tool", "name", "ok"}` per tool call (plus `"error"` when `ok` is
false), `{"event": "test", "command", "ok", "exit", "tail", "round"}` per run of the test command
(or of the docstring examples), `{"event": "retry", "attempt", "attempts", "reason", "restored"}`
when a failing attempt is undone and asked again, `{"event": "compacted", "before",
"summary_chars"}` when the transcript was replaced by a summary (tokens before it),
`{"event": "prompt_progress", "processed", "total", "cache"}` while a prompt is read, and last
`{"event": "outcome", "outcome", "session"}` (with `"checked"`: "tests pass", "docstring examples
pass", either with the task's examples, or "not tested", for a completed change). Without it,
progress goes to stderr and the summary to stdout. When the session's transcript leaves no room
for a next task, it is compacted after the task, before the outcome is said (a `compacted`
event), so the next `run --session` starts without waiting for a summary.
Exit codes: 0 completed, 1 any other outcome (`stuck`, `no_answer`, ...; or the server failed),
2 bad input.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import anyio

from fusion_tui.agent.approval import HeadlessApprover
from fusion_tui.agent.endpoint_run import place_run
from fusion_tui.agent.session_run import (
    SessionRunner,
    agent_config,
    open_session,
)
from fusion_tui.agent.task import AgentConfig
from fusion_tui.agent.tools.workspace import ToolError, Workspace
from fusion_tui.chat.agent_host import open_host
from fusion_tui.chat.endpoint_view import follow
from fusion_tui.cli.common import Context, Subparsers, non_negative, positive
from fusion_tui.cli.printer import Printer
from fusion_tui.config import Settings
from fusion_tui.endpoints.session_pins import EndpointPins, wants_endpoints
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import Connection, connect, release, stops_on_exit
from fusion_tui.server.errors import ServerError
from fusion_tui.server.template import TemplateProbeError
from fusion_tui.sessions.model import Session, SessionFileError, WallClock
from fusion_tui.sessions.store import SessionStore, SessionStoreError
from fusion_tui.slots.keeper import SlotKeeper


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
    p.add_argument(
        "--test-cmd", metavar="CMD",
        help="run CMD in the workspace after the agent's edits; its failure goes back to the agent",
    )  # fmt: skip
    p.add_argument(
        "--test-rounds", type=non_negative, metavar="N", default=None,
        help="rounds of fixes per attempt after failing checks (default 1)",
    )  # fmt: skip
    p.add_argument(
        "--retries", type=non_negative, metavar="N", default=None,
        help="fresh attempts when the fixes cannot pass the checks (default 5; 0: never)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="one JSON object per line on stdout")


class BadInput(Exception):
    """Exit 2 with this one line."""


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Exit 0/1/2; stopped by SIGTERM / SIGINT: the session is saved first, exit 143 / 130."""
    from fusion_tui.cli.run_stop import StopWatch

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
    test_cmd = getattr(args, "test_cmd", None)
    if test_cmd is not None and not str(test_cmd).strip():
        raise BadInput("--test-cmd is empty; give the command that runs the tests")
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


def check_test_flags(args: argparse.Namespace, config: AgentConfig) -> None:
    """`--test-rounds` with no checks at all (no test command, flag or `agent.testCmd(s)`, and
    `agent.findTests` off) would be ignored; the tests the agent finds count rounds as well."""
    if getattr(args, "test_rounds", None) is not None and not (
        config.test_cmd or config.find_tests
    ):
        raise BadInput(
            "--test-rounds needs checks to count rounds of: --test-cmd CMD, agent.testCmd in "
            "the config, or agent.findTests on"
        )


async def run_task_command(
    args: argparse.Namespace,
    settings: Settings,
    paths: AppPaths,
    seen: Callable[[SessionStore, Session, str], None] | None = None,
) -> int:
    store = SessionStore.default(paths)
    session, workspace, task = prepare(args, store)
    config = agent_config(
        settings, str(workspace.root), max_steps=args.max_steps,
        max_duration_ms=args.max_duration_ms, test_cmd=getattr(args, "test_cmd", None),
        test_rounds=getattr(args, "test_rounds", None), retries=getattr(args, "retries", None),
    )  # fmt: skip
    check_test_flags(args, config)
    if seen is not None:  # what a stop signal must save and report (run_stop.py)
        seen(store, session, str(workspace.root))
    out = Printer(json_mode=bool(args.json), prog="fusion-tui run")
    keeper = SlotKeeper(store, session)  # the one slot policy of every path
    conn: Connection | None = None
    pins = EndpointPins(settings) if wants_endpoints(settings) else None  # several endpoints
    try:
        try:
            model = getattr(args, "model", None)
            if pins is None:
                conn = await connect(settings, paths, out.status, model=model)
                route = None
            else:  # several endpoints: the session's endpoint (a move is said on stderr)
                conn = await pins.connect(connect, settings, paths, out.status, model=model)
                if conn.status.fallback:  # the managed start failed: a remote one serves
                    out.note(conn.status.fallback)
                route = await place_run(pins, conn, session, out.note)
            if route is None:
                keeper.attach(conn)
            # the keeper goes to the session's endpoint, and follows a move
            host = await open_host(keeper, conn, settings, pins=pins, route=route, say=out.note)
        except (ServerError, TemplateProbeError) as exc:
            save_failed_turn(store, session, task, str(workspace.root), str(exc))
            out.error(getattr(exc, "message", "") or str(exc))  # one paragraph
            out.outcome("error", session.id)
            return 1
        approver = HeadlessApprover(yes=bool(args.yes), allow_shell=tuple(args.allow_shell))
        runner = SessionRunner(
            host, store, session, workspace=workspace, approver=approver, config=config,
            slots=keeper,
        )  # fmt: skip
        report = await runner.run(task, on_event=out.event)
        if report.outcome != "cancelled":  # the next task's first step then waits for no summary
            await runner.compact_ahead(on_event=out.event)
        if report.save_error:
            out.error(f"the session was not saved: {report.save_error}")
        if report.error:
            out.error(report.error)
        result = report.result
        summary, steps = (result.summary, result.steps) if result else ("", 0)
        out.finish(report.outcome, session.id, summary, steps, result.checked if result else "")
        return 0 if report.outcome == "completed" else 1
    finally:
        with anyio.CancelScope(shield=True):
            try:
                if conn is not None:
                    try:
                        if keeper.conn is not None:
                            await keeper.leave()  # the session's slot saved for a warm resume
                            if stops_on_exit(settings, conn):
                                follow(keeper, conn)  # the server that stops
                                await keeper.save_others()
                    finally:
                        keeper.detach()
                        await release(settings, paths, conn)
            finally:
                if pins is not None:
                    await pins.aclose()


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
