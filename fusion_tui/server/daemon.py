"""Provides `ManagedDaemon`: start, adopt and stop the llama-server that fusion-tui owns.

The daemon runs in its own session (it survives the app, which is what lets a later run resume
warm) and logs to `log_dir/llama-server.log` (the previous run's log is kept as `.1`). Its pid and a
pid-stamped launch record live in `daemon_dir`. We only ever adopt or signal a pid whose command
line matches the argv we recorded for it: a foreign process is never touched.

Start-up waits for `/health` 200 while watching that the child is alive; if it exits, or the
deadline passes, `DaemonStartError` carries the log tail and nothing is left running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from fusion_tui.fit.allocation import parse_allocated_kv_bytes
from fusion_tui.fit.devices import device_allocation_note
from fusion_tui.paths import AppPaths
from fusion_tui.server.binary import find_llama_server
from fusion_tui.server.client import LlamaClient
from fusion_tui.server.errors import DaemonStartError, ServerError, ServerLoading
from fusion_tui.server.launch import LaunchSpec, LaunchSpecError
from fusion_tui.server.log_notes import allocation_note, plan_note
from fusion_tui.server.probe import (
    ProbeResult,
    for_record,
    load_probe,
    measure_throughput,
    probe_path,
    save_probe,
)
from fusion_tui.server.process import is_alive, is_ours, signal_process
from fusion_tui.server.records import DaemonFiles, LaunchRecord

LOG_NAME = "llama-server.log"
LOG_MAX_BYTES = 16 * 1024 * 1024
"""Past this, `trim_log` moves the log aside (about 5,000 requests at `-lv 4`)."""
HOST = "127.0.0.1"
StatusCallback = Callable[[str], None]
BIND_FAILURE = "couldn't bind"
MAX_BIND_ATTEMPTS = 3


def free_port(host: str = HOST) -> int:
    """A port that was free a moment ago (bind to 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _same_file(a: str | Path, b: str | Path) -> bool:
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except OSError:
        return False


class ManagedDaemon:
    """The managed llama-server of one `AppPaths` home."""

    def __init__(
        self,
        paths: AppPaths,
        binary: Path | None = None,
        *,
        start_timeout: float = 300.0,
        stop_grace: float = 10.0,
        poll_interval: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.paths = paths
        self.binary = binary
        self.start_timeout = start_timeout
        self.stop_grace = stop_grace
        self.poll_interval = poll_interval
        self._clock = clock
        self._sleep = sleep
        self.files = DaemonFiles(paths.daemon_dir)
        self._child: subprocess.Popen[bytes] | None = None
        self._log_start = 0
        """Size of the log when the current child was spawned: earlier lines are not its own."""

    @property
    def log_path(self) -> Path:
        return self.paths.log_dir / LOG_NAME

    # --- reading state -------------------------------------------------------------------------

    def current(self) -> LaunchRecord | None:
        """The record of our daemon when its pid file names a live process running its argv."""
        pid = self.files.read_pid()
        if pid is None:
            return None
        record = self.files.read_record(pid)
        if record is None or not is_ours(pid, record.argv):
            return None
        return record

    def probe_result(self, record: LaunchRecord | None = None) -> ProbeResult | None:
        """The throughput measured when `record`'s process (default: the current one) started."""
        record = record or self.current()
        return None if record is None else load_probe(self.paths.daemon_dir, record)

    def log_tail(self, lines: int = 40) -> str:
        """The last `lines` lines of the server log ("" when there is none)."""
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(0, os.SEEK_END)
                size = fh.tell()
                fh.seek(max(0, size - 256 * 1024))
                data = fh.read()
        except OSError:
            return ""
        text = data.decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:]) if lines > 0 else ""

    # --- starting ------------------------------------------------------------------------------

    async def ensure(
        self,
        spec: LaunchSpec,
        on_status: StatusCallback | None = None,
        *,
        match_spec: bool = False,
        fit: dict[str, Any] | None = None,
        kv_estimate_bytes: int | None = None,
        probe: bool = True,
    ) -> LaunchRecord:
        """Adopt our daemon if it serves `spec.model` (and, with `match_spec`, the same slots and
        context); otherwise stop it (if any) and launch a new one."""
        say = on_status or (lambda _msg: None)
        record = self.current()
        if record is not None:
            wanted = _same_file(record.model_path, spec.model) and (
                not match_spec or (record.parallel, record.ctx) == (spec.parallel, spec.ctx)
            )
            if wanted:
                adopted = await self._adopt(record, say)
                if adopted is not None:
                    self.trim_log()
                    return adopted
                say("the managed llama-server does not answer; restarting it")
            else:
                say("stopping the managed llama-server (it runs another model or size)")
            await self.stop()
        else:
            self._drop_stale_files()
        return await self.launch(
            spec, on_status, fit=fit, kv_estimate_bytes=kv_estimate_bytes, probe=probe
        )

    async def _adopt(self, record: LaunchRecord, say: StatusCallback) -> LaunchRecord | None:
        async with LlamaClient(record.url) as client:
            try:
                await self._wait_ready(client, record.pid, adopting=True)
                props = await client.props()
            except (ServerError, DaemonStartError):
                return None
        if not _same_file(props.model_path, record.model_path):
            return None
        if record.n_ctx_slot != props.n_ctx:
            record.n_ctx_slot = props.n_ctx
            self.files.write(record)
        say(f"adopted the running llama-server (pid {record.pid}, port {record.port})")
        return record

    async def launch(
        self,
        spec: LaunchSpec,
        on_status: StatusCallback | None = None,
        *,
        fit: dict[str, Any] | None = None,
        kv_estimate_bytes: int | None = None,
        probe: bool = True,
    ) -> LaunchRecord:
        """Start a new daemon for `spec` and wait until it serves; see the module docstring."""
        say = on_status or (lambda _msg: None)
        try:
            spec.validate()
        except LaunchSpecError as exc:
            raise DaemonStartError(f"cannot launch llama-server: {exc}") from None
        model = Path(spec.model).expanduser()
        if not model.is_file():
            raise DaemonStartError(f"cannot launch llama-server: no model file at {model}")
        if spec.slot_save_path is not None:
            Path(spec.slot_save_path).expanduser().mkdir(parents=True, exist_ok=True, mode=0o700)
        binary = self.binary or find_llama_server()
        self.paths.ensure(self.paths.daemon_dir, self.paths.log_dir)
        self._rotate_log()
        record = await self._start(spec, binary, say, fit, kv_estimate_bytes)
        if probe:
            say("measuring throughput")
            async with LlamaClient(record.url) as client:
                try:
                    result = await measure_throughput(client)
                    save_probe(self.paths.daemon_dir, for_record(result, record))
                except ServerError as exc:
                    say(f"throughput probe failed: {exc}")
        say("ready")
        return record

    async def _start(
        self,
        spec: LaunchSpec,
        binary: Path,
        say: StatusCallback,
        fit: dict[str, Any] | None,
        kv_estimate_bytes: int | None,
    ) -> LaunchRecord:
        """Spawn and wait; a port taken between our check and the server's bind gets a retry."""
        for _attempt in range(MAX_BIND_ATTEMPTS):
            port = free_port()
            say(f"starting llama-server on port {port}")
            record = self._spawn(spec, binary, port, fit, kv_estimate_bytes)
            try:
                await self._wait_started(record, say)
            except _BindFailed:
                continue
            return record
        raise DaemonStartError("llama-server could not bind a free port", self.log_tail())

    def _spawn(
        self,
        spec: LaunchSpec,
        binary: Path,
        port: int,
        fit: dict[str, Any] | None,
        kv_estimate_bytes: int | None,
    ) -> LaunchRecord:
        argv = spec.argv(binary, port)
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(fd, plan_note(fit, kv_estimate_bytes).encode())
        self._log_start = os.fstat(fd).st_size
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
            raise DaemonStartError(f"cannot run {binary}: {exc}") from None
        finally:
            os.close(fd)
        self._child = child
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
        )
        self.files.write(record)  # written now, so a crash of the app mid-start leaves a trace
        return record

    async def _wait_started(self, record: LaunchRecord, say: StatusCallback) -> None:
        """Wait for readiness, then complete the record; on any failure kill the child."""
        try:
            say("loading the model")
            async with LlamaClient(record.url) as client:
                await self._wait_ready(client, record.pid)
                props = await client.props()
            record.n_ctx_slot = props.n_ctx
            log_text = self._log_since(self._log_start)
            record.kv_allocated_bytes = parse_allocated_kv_bytes(log_text)
            self.files.write(record)
            with self.log_path.open("a", encoding="utf-8") as log:
                log.write(allocation_note(record.kv_estimate_bytes, record.kv_allocated_bytes))
                log.write(device_allocation_note(record.fit, log_text))
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._kill(record.pid)
            self.files.clear(record.pid)
            raise

    async def _wait_ready(self, client: LlamaClient, pid: int, adopting: bool = False) -> None:
        """Poll `/health` until 200 while `pid` lives; `DaemonStartError` on exit or timeout.

        When adopting, a daemon that does not answer at all is not adoptable (re-raised); one
        that is still loading is waited for.
        """
        timeout = self.start_timeout
        deadline = self._clock() + timeout
        while True:
            code = self._exit_code(pid)
            if code is not None:
                tail = self.log_tail()
                if BIND_FAILURE in self._log_since(self._log_start):  # this child's lines only
                    raise _BindFailed(tail)
                raise DaemonStartError(
                    f"llama-server exited while starting (exit code {code})", tail
                )
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
                    f"llama-server did not become ready within {timeout:g} s", self.log_tail()
                )
            await self._sleep(self.poll_interval)

    def _exit_code(self, pid: int) -> int | str | None:
        """The child's exit code when it is gone (a string for a process we did not spawn)."""
        if self._child is not None and self._child.pid == pid:
            return self._child.poll()
        return None if is_alive(pid) else "unknown"

    # --- stopping ------------------------------------------------------------------------------

    async def stop(self) -> bool:
        """Stop our daemon (SIGTERM, SIGKILL after `stop_grace`); False when none was running.

        A pid file naming a process that does not run our recorded argv is stale: it is removed,
        and that process is left alone.
        """
        pid = self.files.read_pid()
        if pid is None:
            return False
        record = self.files.read_record(pid)
        if record is None or not is_ours(pid, record.argv):
            self._drop_stale_files()
            return False
        await self._kill(pid)
        self.files.clear(pid)
        with contextlib.suppress(OSError):
            probe_path(self.paths.daemon_dir).unlink()
        return True

    async def _kill(self, pid: int) -> None:
        for sig, wait in ((signal.SIGTERM, self.stop_grace), (signal.SIGKILL, 5.0)):
            if not signal_process(pid, sig):
                break
            deadline = self._clock() + wait
            while self._exit_code(pid) is None and self._clock() < deadline:
                await self._sleep(0.05)
            if self._exit_code(pid) is not None:
                break
        if self._child is not None and self._child.pid == pid:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._child.wait(timeout=1)
            self._child = None

    # --- files ---------------------------------------------------------------------------------

    def _drop_stale_files(self) -> None:
        """Remove a pid file (and its record) whose process is gone or not ours."""
        pid = self.files.read_pid()
        if pid is None:
            return
        record = self.files.read_record(pid)
        if record is None or not is_ours(pid, record.argv):
            self.files.clear(pid)

    def _rotate_log(self) -> None:
        """Keep one previous log (`.1`); the running daemon appends to its own file."""
        if self.log_path.exists():
            with contextlib.suppress(OSError):
                os.replace(self.log_path, self.log_path.with_name(LOG_NAME + ".1"))

    def _log_since(self, offset: int) -> str:
        """The log from byte `offset` on (what the current child wrote)."""
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(offset)
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def trim_log(self, max_bytes: int = LOG_MAX_BYTES) -> bool:
        """If the log is over `max_bytes`, copy it to `.1` and empty it in place; True if trimmed.

        The server opened the file with O_APPEND, so after the truncation its next line simply
        starts the file again. The KV allocation it logged at start-up is already in the record.
        """
        try:
            if self.log_path.stat().st_size <= max_bytes:
                return False
            previous = self.log_path.with_name(LOG_NAME + ".1")
            with self.log_path.open("rb") as src, previous.open("wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            os.chmod(previous, 0o600)
            os.truncate(self.log_path, 0)
        except OSError:
            return False
        return True


class _BindFailed(Exception):
    """The port we picked was taken between our check and the server's bind: try another."""
