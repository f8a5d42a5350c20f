"""Provides `fusion-tui sessions list|show ID|rm ID` (headless; `--json` on list and show).

Damaged files are listed
as damaged with the reason, never hidden, repaired or deleted unless the user runs `rm`.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import TextIO

from fusion_tui.cli.common import Context, Subparsers
from fusion_tui.sessions.migrations import FutureSchemaError
from fusion_tui.sessions.model import Session, SessionFileError
from fusion_tui.sessions.store import SessionEntry, SessionStore, SessionStoreError


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("sessions", help="list, show or remove saved sessions")
    sub = parser.add_subparsers(dest="sessions_command", metavar="{list,show,rm}")
    p_list = sub.add_parser("list", help="saved sessions, newest first (damaged ones last)")
    p_list.add_argument("--json", action="store_true", help="one JSON array")
    p_show = sub.add_parser("show", help="one session's transcript and telemetry")
    p_show.add_argument("id")
    p_show.add_argument("--json", action="store_true", help="the session as stored")
    p_rm = sub.add_parser("rm", help="delete a session file")
    p_rm.add_argument("id")


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"


def _list(store: SessionStore, as_json: bool, out: TextIO) -> int:
    entries = store.list()
    if as_json:
        json.dump([e.to_dict() for e in entries], out, indent=1)
        out.write("\n")
        return 0
    if not entries:
        out.write(f"no saved sessions in {store.directory}\n")
        return 0
    for e in entries:
        out.write(_line(e) + "\n")
    return 0


def _line(e: SessionEntry) -> str:
    if not e.ok:
        label = "DAMAGED" if e.status == "damaged" else "NEWER VERSION"
        return f"{e.id}  {label}: {e.reason}"
    slot = "-" if e.pinned_slot is None else str(e.pinned_slot)
    title = e.title or "(untitled)"
    return f"{e.id}  {_when(e.updated)}  {e.messages:>4} msgs  slot {slot:>2}  {title}"


def _show_text(s: Session, out: TextIO) -> None:
    out.write(f"{s.title or '(untitled)'}\n")
    out.write(f"id {s.id} · created {_when(s.created)} · updated {_when(s.updated)}\n")
    if s.workspace:
        out.write(f"workspace {s.workspace}\n")
    if s.server is not None:
        slot = "-" if s.pinned_slot is None else s.pinned_slot
        out.write(
            f"slot {slot} of {s.server.total_slots} · model {s.server.model_path}"
            f" · launch {s.server.launch_id or '-'}\n"
        )
    for m in s.messages:
        tag = m.role if m.tool_name is None else f"{m.role}:{m.tool_name}"
        cut = f"  [partial: {m.partial_reason or 'cut short'}]" if m.partial else ""
        out.write(f"\n── {tag}{cut}\n{m.content}\n")
        if m.tool_result is not None:
            out.write(f"→ {m.tool_result}\n")
    if s.requests:
        out.write("\nrequests (slot · evaluated · cached · first token · tok/s):\n")
        for r in s.requests:
            out.write(
                f"  {r.id_slot:>2} · {r.prompt_n:,} · {r.cache_n:,} · {r.ttft_ms:,.0f} ms"
                f" · {r.predicted_per_second:.1f}\n"
            )
    if s.turns:
        out.write("turns: " + ", ".join(t.outcome for t in s.turns) + "\n")


def run(args: argparse.Namespace, ctx: Context) -> int:
    """Exit code 0 on success, 1 for a missing or unreadable session, 2 for a usage error."""
    out, err = ctx.out, ctx.err
    store = SessionStore.default(ctx.paths)
    command = getattr(args, "sessions_command", None)
    try:
        if command in (None, "list"):
            return _list(store, bool(getattr(args, "json", False)), out)
        if command == "show":
            session = store.load(args.id)
            if args.json:
                json.dump(session.to_dict(), out, indent=1, ensure_ascii=False)
                out.write("\n")
            else:
                _show_text(session, out)
            return 0
        if command == "rm":
            store.remove(args.id)
            out.write(f"removed session {args.id}\n")
            return 0
    except FutureSchemaError as exc:
        err.write(f"fusion-tui: session {args.id} cannot be opened: {exc}\n")
        return 1
    except SessionFileError as exc:
        err.write(f"fusion-tui: session {args.id} is damaged: {exc}\n")
        return 1
    except SessionStoreError as exc:
        err.write(f"fusion-tui: {exc}\n")
        return 1
    err.write(f"fusion-tui: unknown sessions command {command!r}\n")
    return 2
