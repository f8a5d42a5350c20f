"""Provides `ChildWatch`: how the managed daemon runs one llama-server child and watches it.

Spawning (own session, log fd, pid-stamped record written at once), waiting for `/health` 200
while the child lives, naming how it ended (`crash.py`) and killing it (SIGTERM, then SIGKILL).
Every child this process spawned is kept by pid in a module registry, so any `ManagedDaemon` here
can read how one ended (a server that died at its first request is learnt from on the next
start). `ManagedDaemon` (daemon.py) holds one and decides which server we want: adopt, launch,
recover, stop.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from fusion_tui.fit.allocation import parse_allocated_kv_bytes
from fusion_tui.fit.devices import device_allocation_note
from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import DaemonStartError, ServerError, ServerLoading
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process import crash
from fusion_tui.server.process.binary import HOW_TO_GET_ONE
from fusion_tui.server.process.cpu_quirks import has_repack_off
from fusion_tui.server.process.launch import LaunchSpec
from fusion_tui.server.process.log_notes import allocation_note, plan_note
from fusion_tui.server.process.pids import is_alive, signal_process, start_time
from fusion_tui.server.process.records import DaemonFiles, LaunchRecord
from fusion_tui.server.process.server_log import LOG_NAME, ServerLog

HOST = "127.0.0.1"
StatusCallback = Callable[[str], None]
BIND_FAILURE = "couldn't bind"
_spawned: dict[int, subprocess.Popen[bytes]] = {}
"""Every child this process spawned, by pid."""


class BindFailed(Exception):
    """The port we picked was taken between our check and the server's bind: try another."""


class ChildWatch:
    """Runs and watches the children of one `AppPaths` home."""

    def __init__(
        self,
        paths: AppPaths,
        *,
        start_timeout: float,
        stop_grace: float,
        poll_interval: float,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self.paths = paths
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self.poll_interval = poll_interval
        self._clock = clock
        self._sleep = sleep
        self.files = DaemonFiles(paths.daemon_dir)
        self.log = ServerLog(paths.log_dir / LOG_NAME)
        self._log_start = 0
        """Size of the log when the current child was spawned: earlier lines are not its own."""
        self._oom_before: int | None = None

    @property
    def log_path(self) -> Path:
        return self.log.path

    def log_tail(self, lines: int = 40) -> str:
        """The last `lines` lines of the server log ("" when there is none)."""
        return self.log.tail(lines)

    def died_of(self, pid: int) -> int | None:
        """The signal that ended our child `pid`, when it is gone and one did."""
        code = self._exit_code(pid)
        return -code if isinstance(code, int) and code < 0 else None

    async def exit_signal(self, pid: int, wait: float = 3.0) -> int | None:
        """`died_of` after giving a child that just dropped a connection `wait` s to exit."""
        deadline = self._clock() + wait
        while self._exit_code(pid) is None and self._clock() < deadline:
            await self._sleep(0.05)
        return self.died_of(pid)

    def spawn(
        self,
        spec: LaunchSpec,
        binary: Path,
        port: int,
        fit: dict[str, Any] | None,
        kv_estimate_bytes: int | None,
        owner: int,
    ) -> LaunchRecord:
        argv = spec.argv(binary, port)
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(fd, plan_note(fit, kv_estimate_bytes).encode())
        self._log_start = os.fstat(fd).st_size
        self._oom_before = crash.oom_kill_count()
        try:
            child = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # survives the app and its terminal's signals
                close_fds=True,
            )
        except OSError as exc:
            raise DaemonStartError(
                f"cannot run {binary}: {exc}", next_step=HOW_TO_GET_ONE, kind="binary"
            ) from None
        finally:
            os.close(fd)
        _spawned[child.pid] = child
        record = LaunchRecord(
            pid=child.pid,
            argv=argv,
            model_path=argv[argv.index("-m") + 1],
            host=HOST,
            port=port,
            url=f"http://{HOST}:{port}",
            started_at=time.time(),
            ctx=spec.ctx,
            parallel=spec.parallel,
            log_path=str(self.log_path),
            spec=spec.to_json(),
            fit=fit,
            kv_estimate_bytes=kv_estimate_bytes,
            owner_pid=owner,
            owner_start=start_time(owner) if owner else "",
            repack_off=has_repack_off(argv),
        )
        self.files.write(record)  # written now, so a crash of the app mid-start leaves a trace
        return record

    async def wait_started(self, record: LaunchRecord, say: StatusCallback) -> None:
        """Wait for readiness, then complete the record; on any failure kill the child."""
        try:
            say("loading the model")
            async with LlamaClient(record.url) as client:
                await self.wait_ready(client, record.pid)
                props = await client.props()
            record.n_ctx_slot = props.n_ctx
            log_text = self.log.since(self._log_start)
            record.kv_allocated_bytes = parse_allocated_kv_bytes(log_text)
            self.files.write(record)
            self.log.append(allocation_note(record.kv_estimate_bytes, record.kv_allocated_bytes))
            self.log.append(device_allocation_note(record.fit, log_text))
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self.kill(record.pid)
            self.files.clear(record.pid)
            raise

    async def wait_ready(self, client: LlamaClient, pid: int, adopting: bool = False) -> None:
        """Poll `/health` until 200 while `pid` lives; `DaemonStartError` on exit or timeout.

        When adopting, a daemon that does not answer at all is not adoptable (re-raised); one
        that is still loading is waited for.
        """
        timeout = self.start_timeout
        deadline = self._clock() + timeout
        while True:
            code = self._exit_code(pid)
            if code is not None:
                if adopting:
                    raise DaemonStartError("the managed llama-server is gone")
                raise self.exit_error(code)
            try:
                await client.health()
                return
            except ServerLoading:
                pass
            except ServerError:
                if adopting:
                    raise
            if self._clock() >= deadline:
                raise DaemonStartError(
                    f"llama-server did not become ready within {timeout:g} s",
                    self.log_tail(),
                    cause="loading takes longer on a busy machine or with a large model",
                    next_step="Start it again (F5 in the app) when the machine is less busy, "
                    "or pick a smaller model (F2).",
                    kind="timeout",
                    log_path=str(self.log_path),
                )
            await self._sleep(self.poll_interval)

    def exit_error(self, code: int | str, stage: str | None = None) -> DaemonStartError:
        """The error for the current child having exited with `code` (at `stage`, else the stage
        its log shows)."""
        since = self.log.since(self._log_start)  # this child's lines only
        tail = self.log_tail()
        if BIND_FAILURE in since:
            raise BindFailed(tail)
        now = crash.oom_kill_count()
        oom = now is not None and self._oom_before is not None and now > self._oom_before
        return crash.start_failure(
            code,
            stage=stage or crash.stage_from_log(since),
            log_text=since,
            tail=tail,
            log_path=str(self.log_path),
            oom_evidence=oom,
        )

    def _exit_code(self, pid: int) -> int | str | None:
        """The child's exit code when it is gone (a string for a process we did not spawn)."""
        child = _spawned.get(pid)
        if child is not None:
            return child.poll()
        return None if is_alive(pid) else "unknown"

    async def kill(self, pid: int) -> None:
        for sig, wait in ((signal.SIGTERM, self.stop_grace), (signal.SIGKILL, 5.0)):
            if not signal_process(pid, sig):
                break
            deadline = self._clock() + wait
            while self._exit_code(pid) is None and self._clock() < deadline:
                await self._sleep(0.05)
            if self._exit_code(pid) is not None:
                break
        child = _spawned.pop(pid, None)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=1)
