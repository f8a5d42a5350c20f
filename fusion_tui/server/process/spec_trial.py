"""Provides `run_trial`: how `speculative: auto` measures, on this machine, whether drafting pays.

Per-request speculation settings are compiled out of this llama-server build, so the trial starts
one short-lived server per setting (`off` and each candidate: one slot, a small context, the
launch's own threads and flags), side by side, and sends each the same three greedy probes, in
turn, twice: a copy-heavy one (a code listing to repeat, what n-gram drafting helps), an editing
one (the listing with two names changed on many lines: drafts taken from the copy go wrong at
each change, where long drafts cost most) and a free-writing one (a story: little to copy). Each
setting keeps its best round (interference only ever slows a round down). The servers are ended
by their own pids whatever happens; the log goes to `log_dir/speculative-trial.log`.

Takes about three probe lengths per setting: 1-2 s for the demo model, ~45 s for a 1.5B model on
two CPU cores; the verdict is kept per model and machine (`speculative.Verdicts`), so it is paid
once.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from fusion_tui.server.errors import ServerError, ServerLoading
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.speculative import OFF, TrialRun, acceptance_from_timings
from fusion_tui.server.types import StreamEnd

TRIAL_CTX = 2048
ROUNDS = 2
COPY_TOKENS = 64
FREE_TOKENS = 48
READY_TIMEOUT_S = 180.0
PROBE_BOUND_S = 120.0
TRIAL_LOG = "speculative-trial.log"
COPY_LISTING = """def parse_header(line):
    key, _, value = line.partition(":")
    return key.strip().lower(), value.strip()


def parse_headers(lines):
    headers = {}
    for line in lines:
        if not line.strip():
            break
        key, value = parse_header(line)
        headers.setdefault(key, []).append(value)
    return headers


def content_length(headers):
    values = headers.get("content-length", [])
    if len(values) != 1:
        raise ValueError("expected one content-length")
    return int(values[0])
"""
COPY_PROMPT = (
    "Below is a Python module, then the same module copied out again exactly.\n\n"
    f"{COPY_LISTING}\n# The same module, copied exactly:\n\n"
)
EDIT_PROMPT = (
    "Below is a Python module, then the same module with every `headers` renamed to `fields` "
    f"and every `line` renamed to `text`.\n\n{COPY_LISTING}\n# The renamed module:\n\n"
)
EDIT_TOKENS = 64
FREE_PROMPT = (
    "Write a short story about a lighthouse keeper who finds a message in a bottle. "
    "Once upon a time,"
)


def free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class TrialError(Exception):
    """The trial could not measure (a server did not start, a probe failed)."""


async def _probe(url: str, prompt: str, n_predict: int) -> tuple[float, int, int]:
    """(decode tok/s, drafted, accepted) of one greedy completion, timed by the server."""
    body = {"prompt": prompt, "n_predict": n_predict, "ignore_eos": True, "temperature": 0.0,
            "cache_prompt": True}  # fmt: skip
    end: StreamEnd | None = None
    async with LlamaClient(url) as client:
        with anyio.fail_after(PROBE_BOUND_S):
            async for event in client.stream_completion(body):
                if isinstance(event, StreamEnd):
                    end = event
    if end is None or end.timings.predicted_per_second <= 0:
        raise TrialError("a probe returned no decode rate")
    drafts = acceptance_from_timings(
        {"draft_n": end.timings.draft_n, "draft_n_accepted": end.timings.draft_n_accepted}
    )
    drafted, accepted = drafts or (0, 0)
    return end.timings.predicted_per_second, drafted, accepted


async def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    async with LlamaClient(url) as client:
        while True:
            if proc.poll() is not None:
                raise TrialError(f"a trial llama-server exited with {proc.returncode}")
            with contextlib.suppress(ServerLoading, ServerError):
                await client.health()
                return
            if time.monotonic() > deadline:
                raise TrialError(f"a trial llama-server was not ready in {READY_TIMEOUT_S:g} s")
            await anyio.sleep(0.2)


def _stop(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(5)


async def run_trial(
    spec: LaunchSpec,
    binary: Path,
    candidates: Sequence[tuple[str, tuple[str, ...]]],
    log_dir: Path,
    say: Callable[[str], None] = lambda _m: None,
) -> list[TrialRun]:
    """Measure `off` and each (choice, flags) candidate; raises `TrialError` when it cannot."""
    settings: list[tuple[str, tuple[str, ...]]] = [(OFF, ()), *candidates]
    log_dir.mkdir(parents=True, exist_ok=True)
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    with (log_dir / TRIAL_LOG).open("ab") as log:
        try:
            for _choice, flags in settings:
                trial_spec = replace(
                    spec, parallel=1, ctx=TRIAL_CTX, slot_save_path=None, spec_args=flags
                )
                port = free_port()
                argv = trial_spec.argv(binary, port)
                log.write(f"\n--- speculative trial: {' '.join(argv)}\n".encode())
                log.flush()
                # In the app's session, unlike the daemon: a hangup of the app's terminal
                # mid-trial ends the trial servers too, instead of leaving them orphaned.
                procs.append(
                    subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=False,
                        close_fds=True,
                    )
                )
                urls.append(f"http://127.0.0.1:{port}")
            for url, proc in zip(urls, procs, strict=True):
                await _wait_ready(url, proc)
            best: dict[str, dict[str, Any]] = {}
            for rnd in range(ROUNDS):
                for (choice, _), url in zip(settings, urls, strict=True):
                    say(f"speculative decoding: measuring {choice} ({rnd + 1}/{ROUNDS})")
                    copy, drafted, accepted = await _probe(url, COPY_PROMPT, COPY_TOKENS)
                    edit, _, _ = await _probe(url, EDIT_PROMPT, EDIT_TOKENS)
                    free, _, _ = await _probe(url, FREE_PROMPT, FREE_TOKENS)
                    row = best.setdefault(
                        choice, {"copy": 0.0, "edit": 0.0, "free": 0.0, "d": 0, "a": 0}
                    )
                    if copy > row["copy"]:
                        row.update(copy=copy, d=drafted, a=accepted)
                    row["edit"] = max(row["edit"], edit)
                    row["free"] = max(row["free"], free)
        except (ServerError, OSError, TimeoutError) as exc:
            raise TrialError(str(exc) or type(exc).__name__) from None
        finally:
            with anyio.CancelScope(shield=True):
                _stop(procs)
    return [
        TrialRun(choice, row["copy"], row["free"], row["d"], row["a"], row["edit"])
        for choice, row in best.items()
    ]
