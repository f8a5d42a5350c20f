"""Provides `run_checks` and `format_checks`: what `fusion-tui doctor` finds on this machine.

One place a user (or a bug report) looks when something is off: the llama-server binary and its
version, the CPU features a native build relies on, the model and its header, memory and the
fitted context, the config file, the data folders, and a one-token start of the server with the
measured tok/s. Each check says what it saw and, when it failed, the one thing to do about it.
The server start runs in a throwaway home on a free 127.0.0.1 port, so it never touches the
user's managed server, its records or its log.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from fusion_tui.cli.doctor_start import (
    NO_REPACK,
    REBUILD,
    Starter,
    signal_words,
    start_fix,
    start_once,
)
from fusion_tui.config import ConfigError, Settings, load_settings
from fusion_tui.config.loader import config_path
from fusion_tui.fit.kv import KVConfigError
from fusion_tui.gguf.reader import GGUFError
from fusion_tui.models.catalog import short_names
from fusion_tui.models.packaged import Progress
from fusion_tui.paths import AppPaths
from fusion_tui.server.errors import ServerError
from fusion_tui.server.process.binary import HOW_TO_GET_ONE, find_llama_server

MIB = 1024 * 1024
CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class Check:
    """One line of the report. `needed`: a failure makes `doctor` exit 1."""

    name: str
    ok: bool
    detail: str
    fix: str = ""
    needed: bool = True

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        del data["needed"]
        return data


# --- the checks ------------------------------------------------------------------------------


def check_config(paths: AppPaths, env: Mapping[str, str]) -> tuple[Check, Settings]:
    """The config file parses (file:line on an error); defaults are used for the other checks."""
    path = config_path(paths.config_file, env)
    try:
        settings = load_settings(path, env)
    except ConfigError as exc:
        detail = f"{exc} (the other lines use the defaults)"
        fix = (
            f"edit {path} at the place named above (or move it away to start from the "
            "defaults); `fusion-tui config show` prints what it reads"
        )
        return Check("config", False, detail, fix), Settings()
    where = f"{path}" if path.exists() else f"{path} (no file: the defaults apply)"
    return Check("config", True, where), settings


def check_binary(settings: Settings, env: Mapping[str, str]) -> tuple[Check, Path | None]:
    """The llama-server that would run, and what `--version` says."""
    try:
        binary = find_llama_server(settings.server.binary, dict(env))
    except ServerError as exc:
        return Check("llama-server", False, str(exc), HOW_TO_GET_ONE), None
    try:
        done = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=30,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check(
            "llama-server", False, f"{binary}: cannot run `--version`: {exc}", HOW_TO_GET_ONE
        ), None  # fmt: skip
    if done.returncode != 0:
        died = signal_words(done.returncode)
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
        what = f"died of {died}" if died else f"exited with code {done.returncode}"
        return Check(
            "llama-server", False, f"{binary} --version {what}: {tail[0]}".rstrip(": "),
            "reinstall it, or point `server.binary` at a working llama-server. " + HOW_TO_GET_ONE,
        ), None  # fmt: skip
    return Check("llama-server", True, f"{binary} · {version_line(done.stdout + done.stderr)}"), (
        binary
    )


def version_line(text: str) -> str:
    """`version: 1 (abc123)` + `built with …` → `version 1 (abc123), built with …`."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    picked = [ln for ln in lines if ln.startswith(("version", "built with"))] or lines[:1]
    return ", ".join(picked).replace("version: ", "version ") or "no version printed"


def cpu_flags(cpuinfo: Path = CPUINFO) -> set[str] | None:
    """The `flags` of the first CPU in /proc/cpuinfo (None when unreadable)."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return set(value.split())
    return set()


def check_cpu(cpuinfo: Path = CPUINFO) -> Check:
    """AVX2 / AVX-512 / AMX, as the kernel reports them; AMX is named because guests may trap."""
    flags = cpu_flags(cpuinfo)
    if flags is None:
        return Check("cpu", True, f"{cpuinfo} is unreadable: CPU features unknown", needed=False)
    avx512 = sorted(f for f in flags if f.startswith("avx512"))
    amx = sorted(f for f in flags if f.startswith("amx"))
    parts = [f"{os.cpu_count() or '?'} cores", "avx2" if "avx2" in flags else "no avx2"]
    parts.append(f"avx512 ({len(avx512)} flags)" if avx512 else "no avx512")
    parts.append(f"AMX advertised ({', '.join(amx)})" if amx else "no AMX")
    detail = " · ".join(parts)
    fix = ""
    if amx:
        detail += (
            "; a virtual machine may advertise AMX and trap on it: if the server dies of "
            "SIGILL, weight repacking off (`--no-repack`) avoids that code"
        )
    if "avx2" not in flags:
        fix = "without AVX2 llama-server is slow; a build for this CPU needs " + REBUILD
    return Check("cpu", True, detail, fix, needed=False)


def check_model(
    settings: Settings, override: str | None = None, progress: Progress | None = None
) -> tuple[Check, Path | None]:
    """The GGUF that would load and what its header says (a catalogue model not assembled yet
    is assembled here, as the first launch would, `progress` saying how far it got)."""
    from fusion_tui.gguf.facts import read_model_facts
    from fusion_tui.server.connect import PICK_ANOTHER, ModelNotFound, choose_model, prepare_model

    fix_pick = (
        f"set `localModels.model` in the config (or pass --model) to one of {short_names()} or "
        "a .gguf file; `fusion-tui inspect FILE.gguf` checks one"
    )
    try:
        choice = choose_model(settings, override)
        path, note = prepare_model(choice, progress), choice.note
    except ModelNotFound as exc:
        hint = exc.next_step if exc.next_step not in ("", PICK_ANOTHER) else fix_pick
        return Check("model", False, str(exc), hint), None
    try:
        facts = read_model_facts(path)
    except GGUFError as exc:
        return Check("model", False, f"{path} is not a usable GGUF: {exc}", fix_pick), None
    except OSError as exc:
        return Check("model", False, f"{path}: cannot read: {exc}", fix_pick), None
    bits = [str(path), f"{facts.architecture}", f"{facts.quantization or '?'}"]
    bits += [f"{facts.file_size / MIB:,.0f} MiB", f"{facts.n_layer} layers"]
    bits.append(f"trained context {facts.trained_ctx:,}")
    if choice.entry is not None:
        bits.insert(0, choice.entry.label)
    detail = " · ".join(bits) + (f" ({note})" if note else "")
    return Check("model", True, detail), path


def check_memory(settings: Settings, model: Path | None) -> Check:
    """Available memory, the weights, and the context that fits (the launch's own fit)."""
    from fusion_tui.server.connect import plan_for

    if model is None:
        return Check("memory", False, "not checked: no usable model", "fix the model first")
    try:
        plan = plan_for(settings, model)
    except (KVConfigError, GGUFError, OSError) as exc:
        return Check("memory", False, f"cannot plan a launch: {exc}", "check localModels.managed")
    fit = plan.fit
    detail = (
        f"{fit.available_bytes / MIB:,.0f} MiB available ({fit.memory_source}) − weights "
        f"{fit.weights_bytes / MIB:,.0f} MiB − reserve {fit.reserve_bytes / MIB:,.0f} MiB → "
        f"context {plan.ctx:,} ({plan.parallel} slots × {plan.per_slot_ctx:,}, limited by "
        f"{fit.limited_by}), KV {plan.kv_bytes_total / MIB:,.1f} MiB"
    )
    if not fit.fits:
        return Check(
            "memory", False, detail + " — does NOT fit",
            "free memory, use a smaller model or fewer slots (`localModels.managed.parallel`), "
            "or set `localModels.managed.ctx` lower",
        )  # fmt: skip
    return Check("memory", True, detail)


def folder_state(path: Path) -> tuple[bool, str]:
    """Usable (writable, or creatable under a writable parent) and a short word on it."""
    if path.exists():
        if not path.is_dir():
            return False, f"{path} is not a folder"
        if not os.access(path, os.W_OK | os.X_OK):
            return False, f"{path} is not writable by this user"
        mode = path.stat().st_mode & 0o777
        return True, f"{path} ({mode:o})"
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.is_dir() and os.access(parent, os.W_OK | os.X_OK):
        return True, f"{path} (created on first use)"
    return False, f"{path} cannot be created: {parent} is not writable"


def check_folders(paths: AppPaths) -> Check:
    """Config, data (sessions), state (daemon, slots) and log folders."""
    folders = {
        "config": paths.config_dir,
        "sessions": paths.sessions_dir,
        "state": paths.state_dir,
        "log": paths.log_dir,
    }
    states = {name: folder_state(p) for name, p in folders.items()}
    bad = [f"{name}: {text}" for name, (ok, text) in states.items() if not ok]
    if bad:
        return Check(
            "folders", False, "; ".join(bad), "give this user write access to those folders, "
            "or set FUSION_TUI_HOME to a folder it can write"
        )  # fmt: skip
    return Check("folders", True, "; ".join(f"{n}: {t}" for n, (_ok, t) in states.items()))


# --- the server start ------------------------------------------------------------------------


async def check_server(
    binary: Path | None, model: Path | None, settings: Settings, starter: Starter = start_once
) -> list[Check]:
    """The one-token start and the measured tok/s (with repacking off after a SIGILL)."""
    if binary is None or model is None:
        why = "no llama-server" if binary is None else "no usable model"
        return [Check("server start", False, f"not tried: {why}", "fix the lines above first")]
    if settings.server.mode == "external":
        return [Check("server start", True, "not tried: server.mode is external", needed=False)]
    result = await starter(binary, model, settings, ())
    note = ""
    if not result.ok and result.exit_code == -signal.SIGILL:
        retry = await starter(binary, model, settings, (NO_REPACK,))
        if retry.ok:
            note = " (only with weight repacking off: this CPU traps on AMX)"
            result = replace(retry, repack_off=True)
    if not result.ok:
        died = signal_words(result.exit_code)
        detail = f"llama-server died of {died} while starting" if died else result.detail
        if died and died not in result.detail:
            detail += f" — {result.detail}"
        return [
            Check("server start", False, detail, start_fix(result.exit_code)),
            Check("tok/s", False, "not measured: the server did not start", "see above"),
        ]
    fix = ""
    if result.repack_off:
        fix = (
            "add `--no-repack` to `localModels.managed.extraArgs` (or set LLAMA_ARG_REPACK=0), "
            f"or rebuild: {REBUILD}"
        )
    rate = f"{result.tok_s:.1f} tok/s single stream" if result.tok_s else "no rate reported"
    return [
        Check("server start", True, result.detail + note, fix),
        Check("tok/s", result.tok_s is not None, rate, "" if result.tok_s else "see the log"),
    ]


# --- the report ------------------------------------------------------------------------------


async def run_checks(
    paths: AppPaths,
    env: Mapping[str, str] | None = None,
    *,
    model: str | None = None,
    progress: Progress | None = None,
    start: bool = True,
    starter: Starter = start_once,
    cpuinfo: Path = CPUINFO,
) -> list[Check]:
    """Every check, in the order a user would fix them."""
    env = os.environ if env is None else env
    config, settings = check_config(paths, env)
    binary_check, binary = check_binary(settings, env)
    model_check, model_path = check_model(settings, model, progress)
    checks = [binary_check, check_cpu(cpuinfo), model_check, check_memory(settings, model_path)]
    checks += [config, check_folders(paths)]
    if start:
        checks += await check_server(binary, model_path, settings, starter)
    return checks


def passed(checks: list[Check]) -> bool:
    return all(c.ok for c in checks if c.needed)


def format_checks(checks: list[Check]) -> str:
    """`✔ name  detail` lines; a failure adds `  → fix` under it."""
    width = max((len(c.name) for c in checks), default=0)
    lines = []
    for c in checks:
        lines.append(f"{'✔' if c.ok else '✘'} {c.name:<{width}}  {c.detail}")
        if c.fix:
            lines.append(f"  {'':<{width}}  → {c.fix}")
    verdict = "everything needed works" if passed(checks) else "something needed does not work"
    return "\n".join([*lines, "", f"fusion-tui doctor: {verdict}"])
