"""Provides the speculative-decoding setting: what `localModels.managed.speculative` means, the
llama-server flags each choice becomes, and the verdicts `auto` keeps per model and machine.

Values: `off`; `auto` (measured once per model, binary and CPU by `spec_trial.py`, then kept in
`daemon_dir/speculative.json`); one of this build's n-gram drafters (`ngram-simple`,
`ngram-map-k`, `ngram-map-k4v`, `ngram-mod`, `ngram-cache`), which draft from text already in the
slot; or `draft:<model>`, a small model of the same vocabulary (a short model name or a GGUF
path) that drafts every step.

Draft lengths: this build removed `--draft-max`/`--draft-min`; each drafter has its own
(`--spec-ngram-simple-size-m`, `--spec-ngram-mod-n-max`, `--spec-draft-n-max`). The values in
`TUNED` are the ones docs/speculative.md measured on a 2-core CPU: there verifying a draft costs
close to a prompt batch, so short drafts that are usually right beat long ones.

A draft model has a KV cache of its own, as large in tokens as the main one (same `-c` and
slots), so the launch plan counts it (`fit/launch_plan.py`). Slot files saved with
`/slots?action=save` hold the main model's cache only: a restored slot has no draft cache, and
the server re-reads nothing for the drafter, so its drafts are poor until the slot is rebuilt.
The RAM prompt cache keeps both.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fusion_tui.config.speculative import AUTO, NGRAM_TYPES, OFF, SpeculativeError
from fusion_tui.models.catalog import catalog_model, short_names
from fusion_tui.models.packaged import ModelFileError
from fusion_tui.server.process.records import read_json, write_json

VERDICTS_FILE = "speculative.json"
TRIAL_VERSION = 2
"""Bumped when the trial or `TUNED` changes, so verdicts measured the old way are not reused."""

NGRAM_MOD_TUNED: tuple[str, ...] = (
    *("--spec-ngram-mod-n-match", "24"),
    *("--spec-ngram-mod-n-min", "48"),
    *("--spec-ngram-mod-n-max", "64"),
)
"""This build's defaults, said explicitly: a 24-token lookup, drafts of 48-64 tokens or none."""
TUNED: dict[str, tuple[str, ...]] = {
    "ngram-simple": ("--spec-ngram-simple-size-n", "12", "--spec-ngram-simple-size-m", "48"),
    "ngram-map-k": (),
    "ngram-map-k4v": (),
    "ngram-mod": NGRAM_MOD_TUNED,
    "ngram-cache": (),
}
"""Draft-length flags added for each n-gram type (see docs/speculative.md for the figures)."""
DRAFT_TUNED: tuple[str, ...] = ("--spec-draft-n-max", "3")
"""Draft-length flags added with a draft model."""
AUTO_CANDIDATES: tuple[str, ...] = ("ngram-mod",)
"""What `auto` measures against `off`. `ngram-mod` drafts only when the text it has seen
continues for 48 tokens or more, so a copy that keeps changing (an edit) costs it little;
`ngram-simple`'s 48-token drafts lost on edits (docs/speculative.md). A draft model only when
named: it costs memory, and lost everywhere on two CPU cores."""
OWN_FLAGS = frozenset(
    {"--spec-type", "-md", "--model-draft", "--spec-draft-model", "--spec-default"}
)
"""Flags in `extraArgs` that mean the user set speculation up by hand: ours are not added."""


def resolve_draft(name: str, lookup: Callable[[str], Path | None] | None = None) -> Path:
    """The GGUF of a draft model named by path or short name; `SpeculativeError` when missing.

    A value with a `/`, a `~` or a `.gguf` ending is a path; anything else is a short name that
    `lookup` (the models catalogue) resolves."""
    looks_like_path = "/" in name or name.startswith("~") or name.lower().endswith(".gguf")
    if looks_like_path:
        path = Path(name).expanduser()
        if not path.is_file():
            raise SpeculativeError(f"draft model {name}: no file there")
        return path
    found = lookup(name) if lookup is not None else None
    if found is None or not found.is_file():
        raise SpeculativeError(
            f"draft model {name!r} is not an installed model fusion-tui knows by that name "
            f"({short_names()}); give a GGUF path (draft:/path/to/small.gguf)"
        )
    return found


def short_name_lookup(name: str) -> Path | None:
    """The GGUF of a catalogue model by short name (assembled from its packages on first use,
    as the main model is), or None when the name is not in the catalogue or not installed."""
    model = catalog_model(name)
    if model is None or not model.available():
        return None
    try:
        return model.path()
    except ModelFileError as exc:
        raise SpeculativeError(f"draft model {name}: {exc}") from None


def user_owns_speculation(extra_args: tuple[str, ...] | list[str]) -> bool:
    return bool(OWN_FLAGS & set(extra_args))


def spec_args(
    choice: str, draft_path: Path | None = None, cache_types: tuple[str, str] | None = None
) -> list[str]:
    """The flags for a resolved choice (`off`, an n-gram type, or `draft`, with its path)."""
    if choice == OFF:
        return []
    if choice in NGRAM_TYPES:
        return ["--spec-type", choice, *TUNED.get(choice, ())]
    if choice == "draft":
        if draft_path is None:
            raise SpeculativeError("a draft model choice needs the model's path")
        # `-md` alone loads the model without drafting with it: the type must be named too
        args = ["--spec-type", "draft-simple", "-md", str(Path(draft_path).expanduser().resolve())]
        args += DRAFT_TUNED
        if cache_types is not None:
            # the draft's cache follows the main one's types, so the memory plan holds for both
            args += ["-ctkd", cache_types[0], "-ctvd", cache_types[1]]
        return args
    raise SpeculativeError(f"unknown speculative choice {choice!r}")


@dataclass(frozen=True)
class TrialRun:
    """One setting measured by the trial: decode rates of a copy-heavy, a free-text and an
    editing probe (a copy that changes a name on many lines: drafts from the copy go wrong)."""

    choice: str
    copy_tok_s: float
    free_tok_s: float
    drafted: int = 0
    accepted: int = 0
    edit_tok_s: float = 0.0

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.drafted if self.drafted else None


@dataclass(frozen=True)
class SpecDecision:
    """What the launch uses and why: said in the launch record, `status --json`, the ready line."""

    setting: str
    """The configured value (`auto`, `off`, `ngram-simple`, `draft:coder-0.5b`, …)."""
    choice: str
    """What runs: `off`, an n-gram type, or `draft`."""
    reason: str
    args: tuple[str, ...] = ()
    draft_path: str = ""
    trial: tuple[TrialRun, ...] = ()
    measured_at: float = 0.0
    load: str = ""
    """The 1-minute load average when the trial ran (a busy machine measures less surely)."""

    @property
    def on(self) -> bool:
        return self.choice != OFF

    @property
    def words(self) -> str:
        """`speculative ngram-simple (auto: 1.21× on copying)` for the ready line."""
        what = "speculative off" if not self.on else f"speculative {self.choice}"
        if self.setting == AUTO:
            return f"{what} (auto: {self.reason})"
        return what

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["args"] = list(self.args)
        data["trial"] = [asdict(t) for t in self.trial]
        return data

    @classmethod
    def from_json(cls, data: Any) -> SpecDecision | None:
        if not isinstance(data, dict):
            return None
        try:
            trial = tuple(
                TrialRun(
                    choice=str(t["choice"]),
                    copy_tok_s=float(t["copy_tok_s"]),
                    free_tok_s=float(t["free_tok_s"]),
                    drafted=int(t.get("drafted", 0)),
                    accepted=int(t.get("accepted", 0)),
                    edit_tok_s=float(t.get("edit_tok_s", 0.0)),
                )
                for t in data.get("trial") or ()
            )
            return cls(
                setting=str(data["setting"]),
                choice=str(data["choice"]),
                reason=str(data.get("reason", "")),
                args=tuple(str(a) for a in data.get("args") or ()),
                draft_path=str(data.get("draft_path") or ""),
                trial=trial,
                measured_at=float(data.get("measured_at") or 0.0),
                load=str(data.get("load") or ""),
            )
        except (KeyError, TypeError, ValueError):
            return None


def speculative_choice(record: Any) -> str:
    """The drafter a launch record says runs (`ngram-simple`, `draft`), "" when none does."""
    decision = SpecDecision.from_json(getattr(record, "speculative", None))
    return decision.choice if decision is not None and decision.on else ""


MIN_COPY_GAIN = 1.05
"""`auto` turns speculation on only when the copy probe is at least this much faster..."""
MAX_FREE_LOSS = 0.97
"""...and free text and editing are no slower than this fraction of `off`."""


def _ratios(run: TrialRun, base: TrialRun) -> tuple[float, float, float]:
    """(copying, editing, writing) of `run` against `base`; editing 1.0 when not measured."""
    edit = run.edit_tok_s / base.edit_tok_s if run.edit_tok_s and base.edit_tok_s else 1.0
    return run.copy_tok_s / base.copy_tok_s, edit, run.free_tok_s / base.free_tok_s


def _words(copy: float, edit: float, free: float) -> str:
    return f"{copy:.2f}× copying, {edit:.2f}× editing, {free:.2f}× writing"


def decide(trial: list[TrialRun]) -> tuple[str, str]:
    """(choice, reason) from the trial runs; the `off` run is the baseline."""
    base = next((t for t in trial if t.choice == OFF), None)
    if base is None or base.copy_tok_s <= 0 or base.free_tok_s <= 0:
        return OFF, "no baseline measured"
    best: TrialRun | None = None
    for run in trial:
        if run.choice == OFF:
            continue
        copy, edit, free = _ratios(run, base)
        pays = copy >= MIN_COPY_GAIN and min(edit, free) >= MAX_FREE_LOSS
        if pays and (best is None or run.copy_tok_s > best.copy_tok_s):
            best = run
    others = [t for t in trial if t.choice != OFF]
    if best is None:
        if not others:
            return OFF, "nothing to try"
        top = max(others, key=lambda t: t.copy_tok_s)
        return OFF, f"{top.choice} {_words(*_ratios(top, base))}: not faster here"
    return best.choice, _words(*_ratios(best, base))


def verdict_key(model: Path, binary: Path, cpu: str, cores: int, threads: str, draft: str) -> str:
    """A stable key for one model file on one binary and CPU, with the thread and draft choice."""
    parts: list[Any] = [TRIAL_VERSION, cpu, cores, threads, draft]
    for p in (model, binary):
        resolved = Path(p).expanduser().resolve()
        try:
            st = resolved.stat()
            parts += [str(resolved), st.st_size, st.st_mtime_ns]
        except OSError:
            parts += [str(resolved), 0, 0]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:24]


@dataclass
class Verdicts:
    """The `auto` decisions kept in one folder (`daemon_dir/speculative.json`)."""

    folder: Path
    entries: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.folder / VERDICTS_FILE

    def _load(self) -> dict[str, Any]:
        data = read_json(self.path)
        return data if isinstance(data, dict) else {}

    def get(self, key: str) -> SpecDecision | None:
        return SpecDecision.from_json(self._load().get(key))

    def put(self, key: str, decision: SpecDecision) -> None:
        data = self._load()
        data[key] = decision.to_json()
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_json(self.path, data)


def acceptance_from_timings(timings: Mapping[str, Any]) -> tuple[int, int] | None:
    """(drafted, accepted) from a response's `timings` (`draft_n`, `draft_n_accepted`)."""
    try:
        drafted = int(timings.get("draft_n", 0) or 0)
        accepted = int(timings.get("draft_n_accepted", 0) or 0)
    except (TypeError, ValueError):
        return None
    return (drafted, accepted) if drafted > 0 else None


def acceptance_from_metrics(text: str) -> tuple[int, int] | None:
    """(drafted, accepted) totals from the server's Prometheus `/metrics` text."""
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        name, _, rest = line.partition(" ")
        short = name.split(":")[-1]
        if short in ("spec_decode_num_draft_tokens_total", "spec_decode_num_accepted_tokens_total"):
            try:
                values[short] = float(rest.split()[0])
            except (IndexError, ValueError):
                continue
    drafted = int(values.get("spec_decode_num_draft_tokens_total", 0))
    accepted = int(values.get("spec_decode_num_accepted_tokens_total", 0))
    return (drafted, accepted) if drafted > 0 else None


def now() -> float:
    return time.time()
