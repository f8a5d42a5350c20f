"""Provides `ManagedDaemon`: start, adopt and stop the llama-server that fusion-tui owns.

The daemon runs in its own session (it survives the app, which is what lets a later run resume
warm) and logs to `log_dir/llama-server.log` (see `server_log.py`). Its pid and a pid-stamped
launch record live in `daemon_dir`. We only ever adopt or signal a pid whose command line matches
the argv we recorded for it: a foreign process is never touched. Check-adopt-or-launch runs under
a lock file, so two app instances starting at once end with one server (`start_lock.py`).

Start-up waits for `/health` 200 while watching that the child is alive; if it exits, or the
deadline passes, `DaemonStartError` names what happened in words (`crash.py`) and nothing is left
running. A child that dies of SIGILL is started once more with weight repacking off; when that
works the choice is kept for this binary and CPU (`cpu_quirks.py`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio

from fusion_tui.config.speculative import AUTO, OFF, SpeculativeError, parse_setting
from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import DaemonStartError, ServerError
from fusion_tui.server.http.client import LlamaClient
from fusion_tui.server.process import crash
from fusion_tui.server.process.binary import find_llama_server
from fusion_tui.server.process.child import HOST, BindFailed, ChildWatch, StatusCallback
from fusion_tui.server.process.cpu_quirks import REPACK_OFF_ARG, CpuQuirks, has_repack_off, read_cpu
from fusion_tui.server.process.launch import (
    QUIET_BUSY_CORES,
    SMALL_MACHINE,
    LaunchSpec,
    LaunchSpecError,
    auto_threads,
    busy_between,
    cpu_times,
    usable_cores,
)
from fusion_tui.server.process.pids import is_ours, owner_alive, start_time
from fusion_tui.server.process.probe import (
    ProbeResult,
    for_record,
    load_probe,
    measure_throughput,
    measured_alone,
    probe_path,
    save_probe,
)
from fusion_tui.server.process.records import LaunchRecord
from fusion_tui.server.process.server_log import LOG_MAX_BYTES
from fusion_tui.server.process.spec_trial import TrialError, run_trial
from fusion_tui.server.process.speculative import (
    AUTO_CANDIDATES,
    SpecDecision,
    Verdicts,
    decide,
    resolve_draft,
    short_name_lookup,
    spec_args,
    user_owns_speculation,
    verdict_key,
)
from fusion_tui.server.process.start_lock import start_lock

MAX_BIND_ATTEMPTS = 3
BUSY_SAMPLE_S = 0.3
"""How long `threads: auto` watches the machine before a launch: long enough for the kernel's
tick counts to mean something, short beside the model's load."""
PROBE_BOUND_S = 30.0
"""The start-up probe stops here and reports the rate measured so far."""
RETRY_SAYING = (
    "llama-server died of an illegal instruction (SIGILL); starting it again with weight "
    "repacking off (--no-repack)"
)


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


def _load() -> float:
    """The 1-minute load average (0 where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except OSError:  # pragma: no cover
        return 0.0


def _busy(load: str | float, cores: int) -> bool:
    """A load average at or above the core count: someone was always waiting for a core."""
    try:
        return float(load) >= cores
    except ValueError:
        return False


def _cpu_name() -> str:
    cpu = read_cpu()
    return f"{cpu.model} {' '.join(cpu.flags)}"


def _repack_off(spec: LaunchSpec) -> LaunchSpec:
    if has_repack_off(spec.extra_args):
        return spec
    return replace(spec, extra_args=(*spec.extra_args, REPACK_OFF_ARG))


class ManagedDaemon:
    """The managed llama-server of one `AppPaths` home; its children run under `child`."""

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
        self.child = ChildWatch(
            paths,
            start_timeout=start_timeout,
            stop_grace=stop_grace,
            poll_interval=poll_interval,
            clock=clock,
            sleep=sleep,
        )
        self.paths = paths
        self.files = self.child.files
        self.log = self.child.log
        self._sleep = sleep
        self.binary = binary
        self.quirks = CpuQuirks(paths.daemon_dir)

    # --- the child's log and how it ended (`ChildWatch`) ---------------------------------------

    @property
    def log_path(self) -> Path:
        return self.child.log_path

    def log_tail(self, lines: int = 40) -> str:
        """The last `lines` lines of the server log ("" when there is none)."""
        return self.child.log_tail(lines)

    def died_of(self, pid: int) -> int | None:
        return self.child.died_of(pid)

    async def exit_signal(self, pid: int, wait: float = 3.0) -> int | None:
        return await self.child.exit_signal(pid, wait)

    def exit_error(self, code: int | str, stage: str | None = None) -> DaemonStartError:
        return self.child.exit_error(code, stage)

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

    def trim_log(self, max_bytes: int = LOG_MAX_BYTES) -> bool:
        return self.log.trim(max_bytes)

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
        owner_pid: int | None = None,
    ) -> LaunchRecord:
        """Adopt our daemon if it serves `spec.model` (and, with `match_spec`, the same slots and
        context); otherwise stop it (if any) and launch a new one. `owner_pid` (default: this
        process; 0 = nobody) is the app that stops a launched server when it quits; an adopted
        server whose owner is gone (an orphan) becomes ours."""
        say = on_status or (lambda _msg: None)
        owner = os.getpid() if owner_pid is None else owner_pid
        async with self.lock(say):
            record = self.current()
            if record is not None:
                wanted = _same_file(record.model_path, spec.model) and (
                    not match_spec or (record.parallel, record.ctx) == (spec.parallel, spec.ctx)
                )
                if wanted:
                    adopted = await self._adopt(record, say, owner)
                    if adopted is not None:
                        self.trim_log()
                        return adopted
                    say("the managed llama-server does not answer; restarting it")
                else:
                    say("stopping the managed llama-server (it runs another model or size)")
                await self.stop()
            else:
                self._learn_from_exit()
                self._drop_stale_files()
            return await self.launch(
                spec,
                on_status,
                fit=fit,
                kv_estimate_bytes=kv_estimate_bytes,
                probe=probe,
                owner_pid=owner,
            )

    def lock(self, say: StatusCallback | None = None) -> AbstractAsyncContextManager[None]:
        """The check-adopt-or-launch lock (also taken by a relaunch outside `ensure`)."""
        waiting = "another fusion-tui is starting the managed llama-server; waiting for it"
        tell = say or (lambda _msg: None)
        return start_lock(self.paths.daemon_dir, self._sleep, lambda: tell(waiting))

    async def _adopt(
        self, record: LaunchRecord, say: StatusCallback, owner: int
    ) -> LaunchRecord | None:
        async with LlamaClient(record.url) as client:
            try:
                await self.child.wait_ready(client, record.pid, adopting=True)
                props = await client.props()
            except (ServerError, DaemonStartError):
                return None
        if not _same_file(props.model_path, record.model_path):
            return None
        changed = record.n_ctx_slot != props.n_ctx
        record.n_ctx_slot = props.n_ctx
        orphan = record.owner_pid not in (0, owner) and not owner_alive(
            record.owner_pid, record.owner_start
        )
        if orphan and owner:
            record.owner_pid, record.owner_start = owner, start_time(owner)
            changed = True
        if changed:
            self.files.write(record)
        whose = ", left by an app that quit: it stops when this app quits" if orphan else ""
        say(f"adopted the running llama-server (pid {record.pid}, port {record.port}{whose})")
        return record

    async def launch(
        self,
        spec: LaunchSpec,
        on_status: StatusCallback | None = None,
        *,
        fit: dict[str, Any] | None = None,
        kv_estimate_bytes: int | None = None,
        probe: bool = True,
        owner_pid: int | None = None,
    ) -> LaunchRecord:
        """Start a new daemon for `spec` and wait until it serves; see the module docstring."""
        say = on_status or (lambda _msg: None)
        try:
            spec.validate()
        except LaunchSpecError as exc:
            raise DaemonStartError(f"cannot launch llama-server: {exc}", kind="settings") from None
        model = Path(spec.model).expanduser()
        if not model.is_file():
            raise DaemonStartError(
                f"cannot launch llama-server: no model file at {model}",
                next_step="Pick another model (F2 in the app, or `--model PATH`).",
                kind="model",
            )
        if spec.slot_save_path is not None:
            Path(spec.slot_save_path).expanduser().mkdir(parents=True, exist_ok=True, mode=0o700)
        binary = self.binary or find_llama_server()
        self.paths.ensure(self.paths.daemon_dir, self.paths.log_dir)
        self.log.rotate()
        owner = os.getpid() if owner_pid is None else owner_pid
        note = self.quirks.repack_off(binary)
        first = _repack_off(spec) if note else spec
        try:
            record = await self._start(first, binary, say, fit, kv_estimate_bytes, owner)
        except DaemonStartError as exc:
            if exc.kind != "sigill":
                raise
            if has_repack_off(first.extra_args):
                raise crash.sigill_even_without_repack(exc, binary) from None
            say(RETRY_SAYING)
            record = await self.relaunch_without_repack(
                spec, binary, say, fit, kv_estimate_bytes, owner, exc
            )
        else:
            if note:
                record.repack_off, record.note = True, note
                self.files.write(record)
        if probe:
            await self.measure(record, say)
        say("ready")
        return record

    async def relaunch_without_repack(
        self,
        spec: LaunchSpec,
        binary: Path,
        say: StatusCallback,
        fit: dict[str, Any] | None,
        kv_estimate_bytes: int | None,
        owner: int,
        first: DaemonStartError,
        port: int | None = None,
    ) -> LaunchRecord:
        """Start once more with `--no-repack` (on `port` when given); on success keep the choice
        for this binary and CPU. SIGILL again: the error says what to try instead."""
        try:
            record = await self._start(
                _repack_off(spec), binary, say, fit, kv_estimate_bytes, owner, port
            )
        except DaemonStartError as exc:
            if exc.kind == "sigill":
                raise crash.sigill_even_without_repack(first, binary) from None
            raise
        note = self.quirks.remember_repack_off(binary, first.what)
        record.repack_off, record.note = True, note
        self.files.write(record)
        return record

    async def measure(self, record: LaunchRecord, say: StatusCallback) -> ProbeResult | None:
        """The bounded throughput probe on a fresh launch, saved with the record; run when the
        server is quiet (`measured_alone`), so a request sent at once waits for no probe."""
        say("measuring throughput")
        async with LlamaClient(record.url) as client:
            try:
                result = await measured_alone(
                    client, lambda: measure_throughput(client, bound=PROBE_BOUND_S)
                )
            except ServerError as exc:
                say(f"throughput probe failed: {exc}")
                return None
            if result is None:
                say("throughput probe skipped: the server was never quiet")
                return None
        stamped = for_record(result, record)
        save_probe(self.paths.daemon_dir, stamped)
        return stamped

    def _learn_from_exit(self) -> None:
        """The pid file names a child of this process that died of SIGILL after it served (its
        first request): keep repacking off for the next launch."""
        pid = self.files.read_pid()
        record = self.files.read_record(pid) if pid is not None else None
        if record is None or record.repack_off or self.died_of(record.pid) != signal.SIGILL:
            return
        self.quirks.remember_repack_off(
            Path(record.binary), f"llama-server died of SIGILL {crash.AFTER_LOAD}"
        )

    async def _start(
        self,
        spec: LaunchSpec,
        binary: Path,
        say: StatusCallback,
        fit: dict[str, Any] | None,
        kv_estimate_bytes: int | None,
        owner: int,
        first_port: int | None = None,
    ) -> LaunchRecord:
        """Spawn and wait; a port taken between our check and the server's bind gets a retry."""
        spec, threads = await self.resolve_threads(spec, say)
        spec, decision = await self.resolve_speculative(spec, binary, say)
        for attempt in range(MAX_BIND_ATTEMPTS):
            port = first_port if attempt == 0 and first_port else free_port()
            say(f"starting llama-server on port {port}")
            record = self.child.spawn(spec, binary, port, fit, kv_estimate_bytes, owner)
            record.speculative = decision.to_json()
            record.threads = threads
            self.files.write(record)
            try:
                await self.child.wait_started(record, say)
            except BindFailed:
                continue
            return record
        raise DaemonStartError(
            "llama-server could not bind a free port",
            self.log_tail(),
            next_step="Start it again (F5 in the app); another program keeps taking the ports.",
            kind="bind",
            log_path=str(self.log_path),
        )

    async def resolve_threads(
        self, spec: LaunchSpec, say: StatusCallback
    ) -> tuple[LaunchSpec, str]:
        """`spec` with `threads: auto` made a number on a small machine, by how busy the rest of
        the machine is now (`launch.auto_threads`), and the sentence that says why ("" when
        auto does not decide). The speculative trial then measures with the same threads."""
        cores = usable_cores()
        if not spec.auto_threads_apply() or cores > SMALL_MACHINE:
            return spec, ""
        busy = await self._busy_cores(cores)
        n = auto_threads(cores, busy)
        assert n is not None
        if busy is None:
            why = "how busy the machine is could not be read"
        else:
            quiet = busy < QUIET_BUSY_CORES
            why = f"{busy:.1f} of {cores} cores busy at launch" + (
                ", a quiet machine" if quiet else ""
            )
        note = f"-t {n} of {cores} cores ({why})"
        say(f"threads: {note}")
        return replace(spec, threads=n), note

    async def _busy_cores(self, cores: int) -> float | None:
        """Cores the rest of the machine keeps busy, over `BUSY_SAMPLE_S`; this process's own
        CPU time meanwhile is not counted (the app draws and takes keys while the daemon
        waits)."""
        try:
            before, own = cpu_times(Path("/proc/stat").read_text()), time.process_time()
            await self._sleep(BUSY_SAMPLE_S)
            after, own = cpu_times(Path("/proc/stat").read_text()), time.process_time() - own
        except OSError:
            return None
        if before is None or after is None:
            return None
        return busy_between(before, after, cores, own)

    async def resolve_speculative(
        self, spec: LaunchSpec, binary: Path, say: StatusCallback
    ) -> tuple[LaunchSpec, SpecDecision]:
        """`spec` with the speculative flags its setting resolves to, and the decision.

        `auto` reuses the verdict kept for this model, binary, CPU and thread count, else runs the
        trial (`spec_trial.py`) and keeps what it found; a verdict measured while the machine was
        busy (load average at or above its cores) is measured again by the first launch that finds
        it less busy. A trial that cannot measure launches without speculation and is tried again
        at the next launch. Over RPC `auto` is off without a trial."""
        setting = spec.speculative
        if user_owns_speculation(spec.extra_args):
            decision = SpecDecision(setting, "extra-args", "extraArgs set speculative decoding")
            return replace(spec, spec_args=()), decision
        parsed = parse_setting(setting)
        if parsed.kind == "off":
            return replace(spec, spec_args=()), SpecDecision(setting, OFF, "configured off")
        if parsed.kind == "ngram":
            args = tuple(spec_args(parsed.ngram))
            decision = SpecDecision(setting, parsed.ngram, "configured", args)
            return replace(spec, spec_args=args), decision
        if parsed.kind == "draft":
            try:
                path = resolve_draft(parsed.draft, short_name_lookup)
            except SpeculativeError as exc:
                raise DaemonStartError(
                    f"cannot launch llama-server: speculative {exc}", kind="settings"
                ) from None
            types = (spec.cache_type_k, spec.cache_type_v)
            args = tuple(spec_args("draft", path, types))
            decision = SpecDecision(setting, "draft", "configured", args, str(path))
            return replace(spec, spec_args=args), decision
        assert parsed.kind == AUTO
        if spec.rpc:
            # a ggml-rpc-server serves one client at a time: the trial's servers side by side
            # would queue on it (and measure the network, not drafting on this machine)
            reason = "not measured over RPC: set a speculative type to use one"
            return replace(spec, spec_args=()), SpecDecision(AUTO, OFF, reason)
        threads = " ".join(spec.thread_args())
        key = verdict_key(spec.model, binary, _cpu_name(), usable_cores(), threads, "")
        verdicts = Verdicts(self.paths.daemon_dir)
        kept = verdicts.get(key)
        cores = usable_cores()
        if kept is not None and _busy(kept.load, cores) and not _busy(_load(), cores):
            kept = None  # measured while others kept every core busy: measure again now
        if kept is None:
            say("choosing speculative decoding: a short measurement, once for this model here")
            candidates = [(c, tuple(spec_args(c))) for c in AUTO_CANDIDATES]
            load = f"{_load():.2f}"
            try:
                trial = await run_trial(spec, binary, candidates, self.paths.log_dir, say)
            except TrialError as exc:
                say(f"speculative decoding stays off: the measurement failed ({exc})")
                return replace(spec, spec_args=()), SpecDecision(
                    AUTO, OFF, f"measurement failed: {exc}", load=load
                )
            choice, reason = decide(trial)
            args = tuple(spec_args(choice)) if choice != OFF else ()
            kept = SpecDecision(AUTO, choice, reason, args, trial=tuple(trial),
                                measured_at=time.time(), load=load)  # fmt: skip
            verdicts.put(key, kept)
        return replace(spec, spec_args=kept.args), kept

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
        await self.child.kill(pid)
        self.files.clear(pid)
        with contextlib.suppress(OSError):
            probe_path(self.paths.daemon_dir).unlink()
        return True

    def _drop_stale_files(self) -> None:
        """Remove a pid file (and its record) whose process is gone or not ours."""
        pid = self.files.read_pid()
        if pid is None:
            return
        record = self.files.read_record(pid)
        if record is None or not is_ours(pid, record.argv):
            self.files.clear(pid)
