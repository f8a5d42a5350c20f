"""Provides `SSEParser`: an incremental Server-Sent Events parser (bytes in, `data` payloads out).

Pure and synchronous so it can be fed from any byte source and tested without a server. It keeps
only what llama-server uses: `data:` lines (several in one event are joined with newlines), blank
lines ending an event, `:` comment lines (the server's keep-alive pings) ignored, any line ending
(LF, CRLF, CR, even split across chunks). A `data: [DONE]` payload ends the stream: `done` turns
true and later bytes are ignored. Other fields (`event`, `id`, `retry`) are skipped.

Lines are split on bytes and decoded one at a time, so a multi-byte UTF-8 character split across
network chunks is never a problem; a line that is not UTF-8 is a `ProtocolError`.
"""

from __future__ import annotations

from fusion_tui.server.errors import ProtocolError, ResponseTooLarge

DONE = "[DONE]"
MAX_LINE_BYTES = 16 * 1024 * 1024
"""A single line longer than this is a broken stream, not a real event."""


class SSEParser:
    """Feed bytes with `feed`; it returns the payloads of the events completed by them."""

    def __init__(self, max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self._buf = bytearray()
        self._data: list[str] = []
        self._data_bytes = 0
        self._pending_cr = False
        self.max_line_bytes = max_line_bytes
        """Cap on one line, and on the data of one event (many small lines without a blank)."""
        self.done = False
        """True once `data: [DONE]` arrived."""
        self.lines = 0
        """Complete lines seen so far (keep-alive comments included): a sign of life."""

    def feed(self, chunk: bytes) -> list[str]:
        """Consume `chunk`; return the `data` payloads of every event it completed, in order."""
        out: list[str] = []
        if self.done or not chunk:
            return out
        i = 0
        if self._pending_cr:
            self._pending_cr = False
            if chunk[:1] == b"\n":
                i = 1  # second half of a CRLF split across chunks
        n = len(chunk)
        while i < n and not self.done:
            cut = _next_eol(chunk, i)
            if cut < 0:
                self._buf += chunk[i:]
                if len(self._buf) > self.max_line_bytes:
                    raise ResponseTooLarge(
                        f"an event-stream line is longer than {_size(self.max_line_bytes)}"
                    )
                break
            self._buf += chunk[i:cut]
            i = cut + 1
            if chunk[cut] == 0x0D:  # CR: swallow the LF of a CRLF, or remember to
                if i < n:
                    if chunk[i] == 0x0A:
                        i += 1
                else:
                    self._pending_cr = True
            line = bytes(self._buf)
            self._buf.clear()
            payload = self.feed_line(line)
            if payload is not None:
                out.append(payload)
        return out

    def feed_line(self, raw: bytes | str) -> str | None:
        """Consume one line without its terminator; return a payload when it ends an event."""
        if self.done:
            return None
        self.lines += 1
        if isinstance(raw, bytes):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ProtocolError(f"the event stream is not UTF-8: {exc}") from None
        else:
            line = raw
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data_bytes += len(value) + 1
            if self._data_bytes > self.max_line_bytes:
                raise ResponseTooLarge(
                    f"one event of the stream holds more than {_size(self.max_line_bytes)}"
                )
            self._data.append(value)
        return None

    def close(self) -> list[str]:
        """End of input: return the event still pending (complete lines without a blank line).

        A trailing partial line (no terminator) is dropped: it is a cut connection, and its JSON
        would be incomplete anyway.
        """
        self._buf.clear()
        self._pending_cr = False
        payload = self._dispatch()
        return [] if payload is None else [payload]

    def _dispatch(self) -> str | None:
        if not self._data:
            return None
        payload = "\n".join(self._data)
        self._data.clear()
        self._data_bytes = 0
        if payload == DONE:
            self.done = True
        return payload


def _size(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB" if n >= 1024 * 1024 else f"{n:,} bytes"


def _next_eol(data: bytes, start: int) -> int:
    """Index of the next CR or LF at or after `start`, or -1."""
    lf = data.find(b"\n", start)
    cr = data.find(b"\r", start)
    if cr < 0:
        return lf
    if lf < 0:
        return cr
    return min(lf, cr)


def parse_all(body: bytes) -> list[str]:
    """Every payload of a complete SSE body, up to and including `[DONE]` (for tests and tools)."""
    parser = SSEParser()
    out = parser.feed(body)
    if not parser.done:
        out += parser.close()
    return out
