"""The one llama-server of an agent bench (bench/agent_humaneval.py, bench/agent_exercism.py),
started the way `fusion-tui launch` does (`server.connect.connect`: the same model resolution,
fitted plan and argv users get, plus `--metrics` for the token counters) in a home folder of the
bench's own, so no user's daemon is adopted or stopped; and what the benches read around it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
from _humaneval_clients import aider_files
from _humaneval_core import PREDICTED_COUNTER, PROMPT_COUNTER, parse_metrics
from _recording_proxy import RecordingProxy

from fusion_tui.config import load_settings
from fusion_tui.paths import AppPaths
from fusion_tui.server.connect import connect, make_daemon
from fusion_tui.status import ServerStatus


@dataclasses.dataclass
class Server:
    url: str
    argv: list[str]
    model: str
    n_ctx_slot: int


def start_server(paths: AppPaths, model: str | None) -> Server:
    """The managed server as `fusion-tui launch` starts it (defaults, FUSION_TUI_* overrides of
    this environment), with `--metrics` added for the token counters."""
    settings = load_settings(paths.config_file)
    lm = settings.local_models
    managed = dataclasses.replace(lm.managed, extra_args=(*lm.managed.extra_args, "--metrics"))
    settings = dataclasses.replace(settings, local_models=dataclasses.replace(lm, managed=managed))

    async def launch() -> Server:
        def say(status: ServerStatus) -> None:
            print(f"  server: {status.summary()}", file=sys.stderr, flush=True)

        conn = await connect(settings, paths, say, model=model, detached=True)
        if conn.probe_pending is not None:
            await conn.probe_pending  # as `launch` does: the start-up probe is part of the start
        await conn.client.aclose()
        rec = conn.record
        assert rec is not None
        return Server(rec.url, rec.argv, Path(rec.model_path).stem, conn.props.n_ctx)

    return anyio.run(launch)


def stop_server(paths: AppPaths) -> None:
    anyio.run(make_daemon(load_settings(paths.config_file), paths).stop)


def counters(url: str) -> tuple[int, int]:
    values = parse_metrics(httpx.get(f"{url}/metrics", timeout=30).text)
    return int(values.get(PROMPT_COUNTER, 0)), int(values.get(PREDICTED_COUNTER, 0))


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return f"{platform.node()}, {os.cpu_count()} cores ({cpu}), load average {load}"


@dataclasses.dataclass
class Bench:
    """What the clients of a run share: the server, its home (fusion adopts its daemon), the
    relay in front of it (aider's first token) and aider's model files, in `folder`."""

    folder: Path
    home: Path
    server: Server
    proxy: RecordingProxy
    aider_files: tuple[Path, Path]


@contextlib.contextmanager
def bench_server(model: str | None, prefix: str, keep: bool) -> Iterator[Bench]:
    """The run's server, relay and folder, stopped and removed (unless `keep`) however the run
    ends, SIGTERM included."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    home = folder / "server-home"
    paths = AppPaths.default({"FUSION_TUI_HOME": str(home)})

    def on_term(*_: object) -> None:  # never leave the server behind
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    proxy: RecordingProxy | None = None
    try:
        server = start_server(paths, model)
        print(f"server: {shlex.join(server.argv)}", flush=True)
        files = aider_files(folder, server.model, server.n_ctx_slot)
        proxy = RecordingProxy(int(server.url.rsplit(":", 1)[1]))
        proxy.start()
        yield Bench(folder, home, server, proxy, files)
    finally:
        if proxy is not None:
            proxy.stop()
        stop_server(paths)
        if keep:
            print(f"workspaces kept in {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)
