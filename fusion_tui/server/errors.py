"""Provides the typed errors of the server layer, each with a message a user can act on."""

from __future__ import annotations

from typing import Any


class ServerError(Exception):
    """Base class: anything that went wrong talking to, or running, llama-server."""


class ServerUnreachable(ServerError):
    """Nothing answers at the URL (refused, reset, DNS, timeout before any byte)."""


class ServerLoading(ServerError):
    """The server answers 503 while it loads the model."""


class ProtocolError(ServerError):
    """The server answered something we cannot parse (bad JSON, bad SSE, absurd numbers)."""


class ResponseTooLarge(ProtocolError):
    """An answer (a body, or one line of an event stream) exceeded its size cap: a broken or
    hostile server, never a real answer; the connection is closed at the cap."""


class ResponseTooSlow(ServerUnreachable):
    """A body trickled in slower than its deadline allows (a drip, not an answer)."""


class ServerHTTPError(ServerError):
    """An HTTP error status, carrying the server's error object when it sent one."""

    def __init__(self, status: int, message: str, error: dict[str, Any] | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message
        self.error: dict[str, Any] = error or {}

    @property
    def type(self) -> str:
        return str(self.error.get("type", ""))


class ContextExceeded(ServerHTTPError):
    """400 `exceed_context_size_error`: the prompt does not fit the slot's context."""

    def __init__(
        self, message: str, n_prompt_tokens: int, n_ctx: int, error: dict[str, Any]
    ) -> None:
        super().__init__(400, message, error)
        self.n_prompt_tokens = n_prompt_tokens
        self.n_ctx = n_ctx


class SlotsUnavailable(ServerHTTPError):
    """`/slots` (or a slot action) is switched off on this server (HTTP 501)."""


class StreamStalled(ServerError):
    """A stream stopped sending bytes for longer than the idle budget."""


class BinaryNotFound(ServerError):
    """No llama-server binary could be found."""


class DaemonStartError(ServerError):
    """The managed llama-server did not become ready.

    `str()` is the one-line `what` plus the log tail (for logs and tracebacks); `message` is the
    one paragraph a user reads (CLI on stderr, TUI notice): what happened, the likely cause, the
    next step (a key or a command) and where the server log is.
    """

    def __init__(
        self,
        message: str,
        log_tail: str = "",
        *,
        cause: str = "",
        next_step: str = "",
        kind: str = "failed",
        signal: int | None = None,
        log_path: str = "",
    ) -> None:
        super().__init__(message)
        self.what = message
        self.log_tail = log_tail
        self.cause = cause
        """The likely cause, in words ("" when unknown)."""
        self.next_step = next_step
        """What to do next: a key or an exact command ("" when there is nothing to suggest)."""
        self.kind = kind
        """`sigill`, `sigsegv`, `sigbus`, `oom`, `killed`, `signal`, `exit`, `timeout`, `bind`,
        `model`, `binary`, `settings` or `failed`."""
        self.signal = signal
        """The signal that ended the child, when one did."""
        self.log_path = log_path

    @property
    def message(self) -> str:
        """One paragraph: what happened, the likely cause, the next step, the log."""
        text = self.what.rstrip(". ")
        text += f": {self.cause.rstrip('. ')}." if self.cause else "."
        if self.next_step:
            text += f" {self.next_step.rstrip()}"
        if self.log_path:
            text += f" Server log: {self.log_path}"
        return text

    def __str__(self) -> str:
        base = super().__str__()
        if self.log_tail:
            return f"{base}\n--- last lines of the server log ---\n{self.log_tail}"
        return base
