"""Provides `LaunchSpec`: how the managed llama-server is started, and the argv it becomes.

Always explicit: `-m` (without it the binary starts in router mode), `--host 127.0.0.1` (never
listen beyond loopback), a `--port` we chose, `-np` (explicit slots, so the KV cache is split per
slot unless `kv_unified`), `-c` (the total context, split across slots), `--no-ui`.

Logging: the KV size lines (`llama_kv_cache: size = …`, `llama_memory_recurrent: size = …`) are
libllama INFO messages, which llama-server maps to verbosity 4 (TRACE); its default threshold is 3,
so we pass `-lv 4`. Measured on this build (SmolLM2, `-np 2 -c 1024`): at `-lv 4` the start-up
writes ~210 lines (~14 KB, once) instead of 18, and each request ~30 lines (~3 KB: slot choice,
prompt-cache bookkeeping, sampler settings, timings) instead of ~7. Nothing is logged per token
(those messages are DEBUG, level 5), so the log grows with the number of requests, not with their
length. That is acceptable, and bounded anyway: the daemon rotates the log at each launch and
`ManagedDaemon.trim_log` empties it in place (the server appends with O_APPEND) past a size cap.

Threads: `threads=None` is `auto` (`auto_threads`): on a machine of at most `SMALL_MACHINE` cores
the server gets every core it may run on when the rest of the machine is quiet at launch (other
processes keep less than `QUIET_BUSY_CORES` of a core busy, sampled from /proc/stat by the
daemon), else one thread fewer; on bigger machines llama.cpp's own default. Measured by
bench/threads.py on 2 cores (docs/threads.md): on a quiet machine two threads decode 1.5x and read
prompts 1.9x faster than one; when another process takes a core, ggml's two worker threads wait
for each other at every barrier of every op (this OpenMP build ignores `--poll`), and decode
falls to half or far less, while one thread keeps going. A `-t` or `--threads` in `extra_args`, or
`LLAMA_ARG_THREADS` in the environment, wins.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fusion_tui.config.speculative import SpeculativeError, parse_setting
from fusion_tui.server.process.speculative import user_owns_speculation

CACHE_TYPES = ("f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1")
FLASH_ATTN = ("on", "off", "auto")
UNQUANTISED = ("f32", "f16", "bf16")
LOG_VERBOSITY = 4
"""`-lv 4`: shows the KV allocation lines (see the module docstring)."""


OWNED_FLAGS = frozenset({"-m", "--model", "--host", "--port", "-hf", "--hf-repo"})
THREAD_FLAGS = frozenset({"-t", "--threads"})
IDLE_SLOT_FLAGS = frozenset({"--cache-idle-slots", "--no-cache-idle-slots"})
"""Who copies idle slots to the RAM prompt cache: ours is off (`argv`) unless extraArgs say."""
SMALL_MACHINE = 4
"""Up to this many usable cores, auto threads leave one core to the rest of the machine unless
the machine is quiet at launch."""
QUIET_BUSY_CORES = 0.5
"""Other processes keeping less than this much of a core busy at launch: a quiet machine."""
RPC_RE = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):([0-9]{1,5})$")
"""Flags the daemon must own: the model it records, the loopback address and the free port."""


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity), else the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - platforms without affinity
        return os.cpu_count() or 1


def auto_threads(cores: int, busy_cores: float | None = None) -> int | None:
    """`-t` for `threads: auto` on a machine of `cores` whose other processes keep `busy_cores`
    busy (None: not measured, taken as busy): None leaves llama.cpp's default."""
    if cores > SMALL_MACHINE:
        return None
    if busy_cores is not None and busy_cores < QUIET_BUSY_CORES:
        return cores
    return max(1, cores - 1)


def cpu_times(stat: str) -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from the text of /proc/stat; None when unreadable."""
    for line in stat.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            try:
                values = [int(v) for v in fields[1:9]]
            except ValueError:
                return None
            if len(values) < 5:
                return None
            idle = values[3] + values[4]  # idle + iowait
            return sum(values) - idle, sum(values)
    return None


def busy_between(
    before: tuple[int, int], after: tuple[int, int], cores: int, own_s: float = 0.0
) -> float | None:
    """Cores kept busy between two `cpu_times` samples by processes other than this one, which
    used `own_s` of CPU time meanwhile (the app's own start-up is no neighbour: seen in the TUI,
    the welcome screen and the keys typed during the 0.3 s sample read as 0.5 of a core busy,
    and the server got one thread of two for the whole session)."""
    total = after[1] - before[1]
    if total <= 0:
        return None
    wall_s = total / cores / _CLOCK_TICKS
    busy = (after[0] - before[0]) / total * cores - own_s / wall_s
    return max(0.0, busy)


def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - no sysconf
        return 100


_CLOCK_TICKS = _clock_ticks()
"""Jiffies a second, the unit of /proc/stat."""


class LaunchSpecError(ValueError):
    """A launch setting that llama-server would refuse; the message says which and why."""


@dataclass(frozen=True)
class LaunchSpec:
    """Everything that decides how the managed server runs (and what it costs in memory)."""

    model: Path
    parallel: int = 4
    ctx: int = 4096
    """Total context (`-c`), split across the slots unless `kv_unified`."""
    ubatch: int = 512
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    kv_unified: bool = False
    swa_full: bool = False
    flash_attn: str = "auto"
    slot_save_path: Path | None = None
    threads: int | None = None
    """`-t`; None is auto (`auto_threads`)."""
    extra_args: tuple[str, ...] = field(default_factory=tuple)
    rpc: tuple[str, ...] = ()
    """`host:port` of ggml-rpc-servers (`--rpc`): the model's layers spread over those machines."""
    speculative: str = "off"
    """`localModels.managed.speculative` as configured (`auto`, `off`, a type, `draft:…`); the
    daemon resolves it into `spec_args` before launching (`speculative.py`)."""
    spec_args: tuple[str, ...] = ()
    """The speculative-decoding flags the resolved choice adds (none when extraArgs set their
    own `--spec-type` or draft model: the user's setup wins)."""

    def validate(self) -> None:
        """Raise `LaunchSpecError` for a setting the server would refuse or misread."""
        if self.parallel < 1:
            raise LaunchSpecError(f"parallel must be at least 1 slot, got {self.parallel}")
        if self.ctx < 0:
            raise LaunchSpecError(f"ctx must be >= 0 (0 = the model's own), got {self.ctx}")
        if self.ubatch < 1:
            raise LaunchSpecError(f"ubatch must be >= 1, got {self.ubatch}")
        if self.threads is not None and self.threads < 1:
            raise LaunchSpecError(f"threads must be >= 1, got {self.threads}")
        for name, value in (
            ("cache_type_k", self.cache_type_k),
            ("cache_type_v", self.cache_type_v),
        ):
            if value not in CACHE_TYPES:
                raise LaunchSpecError(
                    f"{name} {value!r} is not a KV cache type llama-server knows "
                    f"({', '.join(CACHE_TYPES)})"
                )
        if self.flash_attn not in FLASH_ATTN:
            raise LaunchSpecError(f"flash_attn must be on, off or auto, got {self.flash_attn!r}")
        owned = sorted(set(self.extra_args) & OWNED_FLAGS)
        if owned:
            raise LaunchSpecError(
                f"extraArgs may not set {', '.join(owned)}: fusion-tui sets the model, the "
                "address (127.0.0.1 only) and the port itself"
            )
        for server in self.rpc:
            m = RPC_RE.match(server)
            if not m or not 0 < int(m.group(1)) < 65536:
                raise LaunchSpecError(f"rpc entry {server!r} is not host:port of a ggml-rpc-server")
        if self.rpc and "--rpc" in self.extra_args:
            raise LaunchSpecError(
                "set the RPC servers in localModels.managed.rpc, not in extraArgs"
            )
        try:
            parse_setting(self.speculative)
        except SpeculativeError as exc:
            raise LaunchSpecError(f"speculative {exc}") from None
        if self.cache_type_v not in UNQUANTISED and self.flash_attn == "off":
            raise LaunchSpecError(
                f"a quantised V cache ({self.cache_type_v}) needs flash attention: use "
                "flash_attn 'on' or 'auto', or an f16 V cache"
            )

    @property
    def effective_flash_attn(self) -> str:
        """A quantised V cache forces `-fa on` (auto would too, but say it explicitly)."""
        return "on" if self.cache_type_v not in UNQUANTISED else self.flash_attn

    def auto_threads_apply(self, environ: Mapping[str, str] | None = None) -> bool:
        """Whether `threads: auto` decides `-t` (no explicit `threads`, no `-t` of the user's in
        `extra_args` or `LLAMA_ARG_THREADS`)."""
        environ = os.environ if environ is None else environ
        user = THREAD_FLAGS & set(self.extra_args) or environ.get("LLAMA_ARG_THREADS")
        return self.threads is None and not user

    def thread_args(
        self, cores: int | None = None, environ: Mapping[str, str] | None = None
    ) -> list[str]:
        """Our `-t`: the explicit `threads`, else auto; none when the user's own setting wins."""
        environ = os.environ if environ is None else environ
        if THREAD_FLAGS & set(self.extra_args):
            return []  # the user's extraArgs say it
        if self.threads is not None:
            return ["-t", str(self.threads)]
        if environ.get("LLAMA_ARG_THREADS"):
            return []  # llama.cpp reads it when the command line does not set -t
        n = auto_threads(usable_cores() if cores is None else cores)
        return [] if n is None else ["-t", str(n)]

    def argv(
        self,
        binary: Path | str,
        port: int,
        *,
        cores: int | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> list[str]:
        """The full command line for llama-server listening on 127.0.0.1:`port`.

        `cores` and `environ` default to this machine's and this process's (tests pass them)."""
        self.validate()
        args = [
            str(binary),
            "-m",
            str(Path(self.model).expanduser().resolve()),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-np",
            str(self.parallel),
            "-c",
            str(self.ctx),
            "-ub",
            str(self.ubatch),
            "-ctk",
            self.cache_type_k,
            "-ctv",
            self.cache_type_v,
            "-fa",
            self.effective_flash_attn,
            "--no-ui",
            # the context is sized by our own fit (fit/launch_plan.py); llama.cpp's second fit
            # would only cost start-up time (about 3 s of 6 on a 2-core CPU)
            "--fit",
            "off",
            "-lv",
            str(LOG_VERBOSITY),
        ]
        args.append("--kv-unified" if self.kv_unified else "--no-kv-unified")
        if not IDLE_SLOT_FLAGS & set(self.extra_args):
            # the server's default copies every idle slot that changed into its RAM prompt
            # cache when any task starts: another session's whole KV (100 MB at 4,500 tokens of
            # the demo model) on each first token. Split slots keep their cache without it, and
            # a slot's prompt still goes to RAM when another prompt takes the slot.
            args.append("--no-cache-idle-slots")
        if self.swa_full:
            args.append("--swa-full")
        if self.slot_save_path is not None:
            args += ["--slot-save-path", str(Path(self.slot_save_path).expanduser().resolve())]
        args += self.thread_args(cores, environ)
        if self.rpc:
            args += ["--rpc", ",".join(self.rpc)]
        if self.spec_args and not user_owns_speculation(self.extra_args):
            args += list(self.spec_args)
        args += list(self.extra_args)
        return args

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["model"] = str(self.model)
        data["slot_save_path"] = None if self.slot_save_path is None else str(self.slot_save_path)
        data["extra_args"] = list(self.extra_args)
        data["rpc"] = list(self.rpc)
        data["spec_args"] = list(self.spec_args)
        return data
