"""Provides the throughput probe: one fixed 64-token completion, timed by the server itself.

Run once when the managed server becomes ready (not on adopt), beside the app (the first turn
need not wait for it) and only while the server is quiet (`measured_alone`: a request goes
first, and a figure measured beside one is not kept), saved next to the pid file and read back
lazily, so the ready line and `status` can say "~95 tok/s single stream" without measuring
again. The number is the server's `timings.predicted_per_second` (decode only, first token
excluded in this build), so the client's event loop never skews it. On a loaded machine the
probe is bounded in time: when the bound hits, the rate of the tokens received so far (client
clock, first token excluded) is reported, marked `partial`.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import anyio

from fusion_tui.config.speculative import OFF
from fusion_tui.gguf.reader import GGUFError, read_header
from fusion_tui.models.catalog import catalog_title
from fusion_tui.server.errors import ProtocolError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.records import LaunchRecord, read_json, write_json
from fusion_tui.server.process.speculative import SpecDecision
from fusion_tui.server.types import StreamEnd, TextDelta

PROBE_FILE = "probe.json"
PROBE_PROMPT = (
    "Write a short story about a lighthouse keeper who finds a message in a bottle. "
    "Once upon a time,"
)


@dataclass(frozen=True)
class ProbeResult:
    """One throughput measurement and what it was measured on."""

    tok_s: float
    predicted_n: int
    predicted_ms: float
    model: str = ""
    ctx: int = 0
    """Per-slot context of the server measured."""
    slots: int = 0
    time: float = 0.0
    """Unix time of the measurement."""
    pid: int = 0
    """The managed server's pid (0 when measured on an external server)."""
    partial: bool = False
    """The time bound hit first: the rate of the tokens that arrived, by the client's clock."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> ProbeResult | None:
        if not isinstance(data, dict):
            return None
        try:
            result = cls(
                tok_s=float(data["tok_s"]),
                predicted_n=int(data.get("predicted_n", 0)),
                predicted_ms=float(data.get("predicted_ms", 0.0)),
                model=str(data.get("model", "")),
                ctx=int(data.get("ctx", 0)),
                slots=int(data.get("slots", 0)),
                time=float(data.get("time", 0.0)),
                pid=int(data.get("pid", 0)),
                partial=bool(data.get("partial", False)),
            )
        except (KeyError, TypeError, ValueError):
            return None
        return result if math.isfinite(result.tok_s) and result.tok_s > 0 else None


async def measure_throughput(
    client: LlamaClient,
    n_predict: int = 64,
    *,
    bound: float | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ProbeResult:
    """Generate `n_predict` tokens from a fixed prompt (EOS ignored, no prompt cache) and return
    the server-side decode rate; after `bound` seconds, the partial rate so far. Raises
    `ProtocolError` when there is no usable rate."""
    body = {
        "prompt": PROBE_PROMPT,
        "n_predict": n_predict,
        "ignore_eos": True,
        "cache_prompt": False,
        "temperature": 0.0,
    }
    end: StreamEnd | None = None
    stamps: list[float] = []
    with anyio.move_on_after(bound if bound is not None else math.inf) as scope:
        async for event in client.stream_completion(body):
            if isinstance(event, TextDelta):
                stamps.append(clock())
            elif isinstance(event, StreamEnd):
                end = event
    if scope.cancelled_caught and end is None:
        return _partial(stamps, bound or 0.0)
    if end is None:  # pragma: no cover - stream_completion raises first
        raise ProtocolError("the probe stream had no final event")
    rate = end.timings.predicted_per_second
    if not math.isfinite(rate) or rate <= 0:
        raise ProtocolError(f"the server reported no usable decode rate ({rate!r})")
    return ProbeResult(
        tok_s=rate,
        predicted_n=end.timings.predicted_n,
        predicted_ms=end.timings.predicted_ms,
        time=time.time(),
    )


QUIET_S = 3.0
"""The server must have been idle this long before the probe runs: a probe beside a request
measures neither (seen in the TUI on two cores: a task typed during the load went the moment the
server was ready, the probe beside it reported ~3.6 tok/s where the model writes ~10, and the
task's first step waited for the probe's tokens)."""
QUIET_POLL_S = 1.0
QUIET_WAIT_S = 900.0
"""Past this long without a quiet moment the probe gives up for this launch."""


async def wait_quiet(
    client: LlamaClient,
    *,
    quiet_s: float = QUIET_S,
    poll_s: float = QUIET_POLL_S,
    give_up_s: float = QUIET_WAIT_S,
    clock: Callable[[], float] = time.monotonic,
) -> bool:
    """Wait until no slot has processed anything for `quiet_s` (polling `/slots`); whether it
    came within `give_up_s`. A server whose `/slots` cannot be read counts as quiet: there is
    nothing to wait for that can be seen."""
    start = clock()
    quiet_since: float | None = None
    while True:
        now = clock()
        try:
            busy = any(s.is_processing for s in await client.slots())
        except Exception:  # no /slots (switched off, an old build): measure as before
            return True
        if busy:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = now
        if quiet_since is not None and now - quiet_since >= quiet_s:
            return True
        if now - start >= give_up_s:
            return False
        await anyio.sleep(poll_s)


async def measured_alone(
    client: LlamaClient,
    measure: Callable[[], Awaitable[ProbeResult]],
    *,
    tries: int = 3,
    **quiet: Any,
) -> ProbeResult | None:
    """`measure()` run when the server is quiet (`wait_quiet`), and run again (at most `tries`
    times) when another request was processing as it ended; None when no quiet moment came or
    every try shared the server."""
    for _ in range(tries):
        if not await wait_quiet(client, **quiet):
            return None
        result = await measure()
        if await _ends_alone(client, **quiet):
            return result
    return None


SETTLE_S = 2.0
"""How long the probe's own request may take to leave its slot once the probe stopped reading:
a probe cut at its bound leaves the server decoding until it notices the closed connection (at
its next token), so a slot still busy right after the probe is not yet proof of a neighbour."""
SETTLE_POLL_S = 0.2


async def _ends_alone(
    client: LlamaClient,
    *,
    settle_s: float = SETTLE_S,
    poll_s: float = QUIET_POLL_S,
    clock: Callable[[], float] = time.monotonic,
    **_: Any,
) -> bool:
    """Whether every slot is idle within `settle_s` of the probe's end; a slot processing past
    that is another request's, and the figure was measured beside it. Unreadable `/slots`
    cannot tell: the figure stands."""
    start = clock()
    while True:
        now = clock()
        try:
            busy = any(s.is_processing for s in await client.slots())
        except Exception:
            return True
        if not busy:
            return True
        if now - start >= settle_s:
            return False
        await anyio.sleep(min(poll_s, SETTLE_POLL_S))


def _partial(stamps: list[float], bound: float) -> ProbeResult:
    if len(stamps) < 2 or stamps[-1] <= stamps[0]:
        raise ProtocolError(
            f"the probe got {len(stamps)} token(s) in {bound:g} s: too few to measure a rate"
        )
    span = stamps[-1] - stamps[0]
    return ProbeResult(
        tok_s=(len(stamps) - 1) / span,
        predicted_n=len(stamps),
        predicted_ms=span * 1000,
        time=time.time(),
        partial=True,
    )


def probe_path(daemon_dir: Path) -> Path:
    return daemon_dir / PROBE_FILE


def save_probe(daemon_dir: Path, result: ProbeResult) -> None:
    write_json(probe_path(daemon_dir), result.to_json())


def load_probe(daemon_dir: Path, record: LaunchRecord | None = None) -> ProbeResult | None:
    """The saved probe; with `record`, only if it was measured on that very process and model."""
    result = ProbeResult.from_json(read_json(probe_path(daemon_dir)))
    if result is None or record is None:
        return result
    if result.pid != record.pid or result.model != record.model_path:
        return None
    return result


def for_record(result: ProbeResult, record: LaunchRecord) -> ProbeResult:
    """`result` stamped with the server it was measured on."""
    return replace(
        result,
        model=record.model_path,
        ctx=record.n_ctx_slot,
        slots=record.parallel,
        pid=record.pid,
    )


_QUANT_SUFFIX = re.compile(
    r"[.\-_](?:I?Q\d[\w]*|F16|F32|BF16|FP16|FP32)$",
    re.IGNORECASE,
)


def model_display_name(model_path: str | Path) -> str:
    """The name a person knows the model by: a catalogue model's title, else the GGUF's own
    `general.name` when the file is on this machine ("Qwen2.5 Coder 1.5B Instruct", not
    "model-1.5b"), else the file name without `.gguf` and its quantization suffix
    (`…/Qwen2.5-Coder-7B-Instruct-Q4_K_M.gguf` → `Qwen2.5-Coder-7B-Instruct`)."""
    title = catalog_title(model_path) or _header_name(Path(model_path))
    if title:
        return title
    name = Path(model_path).name
    if name.lower().endswith(".gguf"):
        name = name[: -len(".gguf")]
    stripped = _QUANT_SUFFIX.sub("", name)
    return stripped or name


def _header_name(path: Path) -> str | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return _cached_header_name(str(path), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _cached_header_name(path: str, _size: int, _mtime_ns: int) -> str | None:
    """`general.name`, read once per file version (the header of a big vocabulary is megabytes)."""
    try:
        name = read_header(path).kv.get("general.name")
    except GGUFError:
        return None
    return name.strip() if isinstance(name, str) and name.strip() else None


def format_rate(tok_s: float) -> str:
    return f"{tok_s:.1f}" if tok_s < 10 else f"{tok_s:.0f}"


def rate_words(probe: ProbeResult) -> str:
    """`~95 tok/s single stream`, or `~0.6 tok/s single stream (partial: 12 tokens in 20 s)`."""
    words = f"~{format_rate(probe.tok_s)} tok/s single stream"
    if probe.partial:
        words += f" (partial: {probe.predicted_n} tokens in {probe.predicted_ms / 1000:.0f} s)"
    return words


def speculative_words(record: LaunchRecord) -> str:
    """What the record says about speculative decoding, for the ready line ("" when it was
    configured off): `speculative ngram-simple (auto: 1.21× copying, 1.00× writing)`."""
    decision = SpecDecision.from_json(record.speculative)
    if decision is None or (decision.setting == OFF and not decision.on):
        return ""
    return decision.words


def ready_line(record: LaunchRecord, probe: ProbeResult | None) -> str:
    """`ready · SmolLM2-135M-Instruct · 4 slots × 4096 ctx · ~95 tok/s single stream`, then the
    record's note (e.g. `repacking off: this CPU traps on AMX`) when it has one."""
    ctx = record.n_ctx_slot or (record.ctx // max(record.parallel, 1))
    slots = f"{record.parallel} slot" + ("" if record.parallel == 1 else "s")
    parts = ["ready", model_display_name(record.model_path), f"{slots} × {ctx} ctx"]
    if probe is not None:
        parts.append(rate_words(probe))
    spec = speculative_words(record)
    if spec:
        parts.append(spec)
    if record.note:
        parts.append(record.note)
    return " · ".join(parts)
