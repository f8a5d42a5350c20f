"""Provides how `fusion-tui` behaves as a Unix command: quiet when its reader goes away, and a
plain refusal (not a screenful of escape codes) when the TUI is started without a terminal."""

from __future__ import annotations

import os
import sys
from types import TracebackType

EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a tool whose reader went away."""
HEADLESS = (
    "fusion-tui: the app needs a terminal (stdin is not one). From a script use the headless "
    "commands: `fusion-tui run TASK` (an agent task), `launch` / `status` / `stop` (the server), "
    "`sessions list`, `inspect MODEL.gguf`, `doctor`, `config show`; `fusion-tui --help` lists "
    "them all."
)


def needs_terminal(stdin: object = None) -> str:
    """The refusal to print when stdin is not a terminal ("" when it is)."""
    stream = sys.stdin if stdin is None else stdin
    isatty = getattr(stream, "isatty", None)
    try:
        interactive = bool(isatty()) if callable(isatty) else False
    except (ValueError, OSError):  # closed stdin
        interactive = False
    return "" if interactive else HEADLESS


def _only_broken_pipes(exc: BaseException) -> bool:
    if isinstance(exc, BrokenPipeError):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_broken_pipes(e) for e in exc.exceptions)
    return False


class QuietBrokenPipe:
    """`with QuietBrokenPipe() as outcome: outcome.code = main()`.

    On a closed pipe: stdout goes to /dev/null (so the interpreter's last flush cannot fail
    again) and the code becomes 141, with nothing printed. The body's output is flushed inside
    the block, so a pipe closed before the end is seen here and not at interpreter exit.
    """

    def __init__(self) -> None:
        self.code = 0

    def __enter__(self) -> QuietBrokenPipe:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool:
        if exc is None or isinstance(exc, SystemExit):  # argparse's --help exits
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                exc = BrokenPipeError()
            except (ValueError, OSError):
                return False
            else:
                return False
        if not _only_broken_pipes(exc):
            return False
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        self.code = EXIT_BROKEN_PIPE
        return True
