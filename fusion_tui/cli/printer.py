"""Provides `Printer`: what the headless turns (`fusion-tui run`, `fusion-tui chat`) print.

With `--json`, stdout carries one JSON object per line, the same names for both commands (an
interface: scripts read them): `request`, `tool`, `prompt_progress`, `compacted` and last `outcome`.
Without it, progress goes to stderr and the answer or summary to stdout.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from fusion_tui.agent.checks import check_label
from fusion_tui.agent.events import (
    AgentEvent,
    FileChanged,
    PromptProgressed,
    RepeatBlocked,
    RequestDone,
    Retried,
    StepFailed,
    StepStarted,
    TestRan,
    ToolFinished,
    TranscriptCompacted,
    WorkerEvent,
    retry_line,
    to_json_line,
    tool_error,
)
from fusion_tui.status import ServerStatus


class Printer:
    """JSON lines on stdout, or readable progress on stderr and the summary on stdout."""

    def __init__(
        self,
        *,
        json_mode: bool,
        prog: str = "fusion-tui run",
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.json_mode = json_mode
        self.prog = prog
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

    def note(self, text: str) -> None:
        """Said on stderr in both modes (an endpoint move, a re-pinned slot), on one line (a
        remote server's error text may carry line breaks)."""
        self._say(f"{self.prog}: {' '.join(text.splitlines())}")

    def error(self, text: str) -> None:
        self._say(f"{self.prog}: {text.splitlines()[0] if text else 'failed'}")

    def event(self, event: AgentEvent) -> None:
        prefix = ""
        if isinstance(event, WorkerEvent):
            prefix = f"[worker {event.worker}] "
            event = event.event
        if self.json_mode:
            if isinstance(event, RequestDone | ToolFinished | TestRan | Retried):
                line = to_json_line(event)
                if line is not None:
                    self._line(line)
            elif isinstance(
                event, TranscriptCompacted
            ):  # the agent's: its summary, not yet counted
                self._line(
                    {
                        "event": "compacted",
                        "before": event.tokens_before,
                        "summary_chars": event.summary_chars,
                    }
                )
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

    def compacted(self, before: int, after: int, note: str) -> None:
        """A compaction of the session's prompt (tokens before and after)."""
        if self.json_mode:
            self._line({"event": "compacted", "before": before, "after": after})
        else:
            self._say(note)

    def text(self, piece: str) -> None:
        """A piece of the answer, as it streams (stdout; nothing in JSON mode)."""
        if not self.json_mode:
            self.stdout.write(piece)
            self.stdout.flush()

    def outcome(self, outcome: str, session_id: str, checked: str = "") -> None:
        if self.json_mode:
            line = {"event": "outcome", "outcome": outcome, "session": session_id}
            self._line({**line, "checked": checked} if checked else line)
        else:
            self._say(f"outcome: {outcome} · session {session_id}")

    def finish(
        self, outcome: str, session_id: str, summary: str, steps: int, checked: str = ""
    ) -> None:
        """The task's end: its outcome, and what vouches for a completed change (`checked`)."""
        if self.json_mode:
            self.outcome(outcome, session_id, checked)
            return
        said = f" · {checked}" if checked else ""
        self._say(f"outcome: {outcome} · {steps} step(s){said} · session {session_id}")
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
        where = f"{event.endpoint} slot" if event.endpoint else "slot"
        return (
            f"  {event.purpose} on {where} {event.id_slot} · {event.cache_n:,} of {total:,} prompt "
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
    if isinstance(event, TranscriptCompacted):
        return f"  compacted the transcript: {event.note}"
    if isinstance(event, Retried):
        return f"  attempt {event.attempt} of {event.attempts}: {retry_line(event)}"
    if isinstance(event, RepeatBlocked):
        verdict = "stuck" if event.stuck else "not run again"
        return f"  {event.shown()[0]} repeated with nothing changed since: {verdict}"
    if isinstance(event, FileChanged):
        if event.how == "removed":
            return f"  removed {event.path} (the agent created it; the attempt was undone)"
        done = "put back" if event.how == "restored" else "changed"
        return f"  {done} {event.path}:\n" + "\n".join(
            "    " + line for line in event.diff.rstrip("\n").split("\n")
        )
    if isinstance(event, TestRan):
        if event.ok:
            return f"  tests passed: {check_label(event.command)}"
        how = "timed out" if event.exit is None else f"failed (exit code {event.exit})"
        last = event.tail.strip().split("\n")[-1] if event.tail.strip() else ""
        return f"  tests {how}: {check_label(event.command)}" + (f"\n    {last}" if last else "")
    return ""
