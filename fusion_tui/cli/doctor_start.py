"""Provides `start_once`: the one-token start of llama-server that `fusion-tui doctor` runs, and
the words for how a start died (a signal by name, the fix for it).

It runs in a throwaway home on a free 127.0.0.1 port, so the user's managed server, its records
and its log are never touched, and it always stops what it started.
"""

from __future__ import annotations

import re
import signal
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from fusion_tui.config import Settings
from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import ServerError
from fusion_tui.server.process import crash
from fusion_tui.server.process.cpu_quirks import REPACK_OFF_ARG

NO_REPACK = REPACK_OFF_ARG
REBUILD = crash.rebuild_command()
"""A build for any x86-64 with AVX2 (no native flags: never an instruction the CPU only
advertises); the crash recovery's own command."""


@dataclass(frozen=True)
class StartResult:
    """What the one-token start saw."""

    ok: bool
    detail: str
    exit_code: int | None = None
    tok_s: float | None = None
    repack_off: bool = False


Starter = Callable[[Path, Path, Settings, tuple[str, ...]], Awaitable[StartResult]]


def signal_words(code: int | None) -> str:
    """`-4` → `an illegal instruction (SIGILL)`; "" for a normal exit."""
    return "" if code is None or code >= 0 else crash.signal_words(-code)


def exit_code_of(message: str) -> int | None:
    """The exit code a start failure names (`exit code -4`, or a signal by name)."""
    found = re.search(r"exit code (-?\d+)", message)
    if found:
        return int(found.group(1))
    named = re.search(r"\b(SIG[A-Z]+)\b", message)
    if named and named.group(1) in signal.Signals.__members__:
        return -int(signal.Signals[named.group(1)])
    return None


async def start_once(
    binary: Path, model: Path, settings: Settings, extra: tuple[str, ...] = ()
) -> StartResult:
    """Start llama-server in a throwaway home, ask for one token, measure tok/s, stop it."""
    from fusion_tui.server.errors import DaemonStartError
    from fusion_tui.server.http.client import LlamaClient
    from fusion_tui.server.process.daemon import ManagedDaemon
    from fusion_tui.server.process.launch import LaunchSpec
    from fusion_tui.server.process.probe import measure_throughput

    m = settings.local_models.managed
    with tempfile.TemporaryDirectory(prefix="fusion-doctor-") as tmp:
        root = Path(tmp)
        paths = AppPaths(root / "config", root / "data", root / "state", root / "log")
        daemon = ManagedDaemon(paths, binary, start_timeout=180.0, poll_interval=0.1)
        spec = LaunchSpec(
            model=model, parallel=1, ctx=2048, cache_type_k=m.cache_type_k,
            cache_type_v=m.cache_type_v, flash_attn=m.flash_attn, threads=m.thread_count,
            extra_args=(*m.extra_args, *extra),
        )  # fmt: skip
        started = time.monotonic()
        try:
            record = await daemon.launch(spec, probe=False)
        except DaemonStartError as exc:
            first = str(exc).splitlines()[0]
            tail = [ln for ln in exc.log_tail.splitlines() if ln.strip()][-3:]
            detail = first + (f" — log: {' | '.join(tail)}" if tail else "")
            code = -exc.signal if exc.signal else exit_code_of(first)
            return StartResult(False, detail, code)
        except ServerError as exc:
            return StartResult(False, str(exc).splitlines()[0])
        try:
            load_s = time.monotonic() - started
            async with LlamaClient(record.url) as client:
                body = {"prompt": "Hello", "n_predict": 1, "temperature": 0.0}
                async for _event in client.stream_completion(body):
                    pass
                probe = await measure_throughput(client, n_predict=16)
            return StartResult(
                True,
                f"started in {load_s:.1f} s on {record.url}, answered 1 token, stopped",
                tok_s=probe.tok_s,
            )
        except ServerError as exc:
            code = exit_code_of(str(exc))
            return StartResult(False, f"the server failed on its first request: {exc}", code)
        finally:
            await daemon.stop()


def start_fix(code: int | None) -> str:
    if code == -signal.SIGILL:
        return (
            "this build uses CPU instructions this machine cannot run: put a `llama-server` "
            "built for this CPU on PATH or in `server.binary`, or rebuild the package: " + REBUILD
        )
    if code == -signal.SIGKILL:
        return "free memory or use a smaller model / context (`fusion-tui inspect MODEL`)"
    return "read the log lines above; `fusion-tui launch` shows the whole start-up"
