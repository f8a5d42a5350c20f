"""Fresh attempts: when fixes cannot get past failing checks, the step that wrote is done over.

Seen with the 1.5B coder on HumanEval (`bench/agent_humaneval.py`): told which docstring example
its code failed, the model gave its own wrong code back word for word, on six of the forty
problems in every run; sampled again, even at temperature 1, from that transcript it copied the
code again, because the wrong code sat right there in its own last turn. Asked again from the
prompt *before* the wrong code, at temperature 1, it wrote code that passes the problem's tests
for three of those six within six tries. Hence the rule:

- an attempt starts with the first reply that writes files after the checks last passed (or
  the task began): the transcript's length before that reply and the files' text before it are
  kept (`BranchPoint`);
- when the checks fail and a fix gives the failed code back unchanged, or the rounds of fixes
  are used up, the attempt is closed: its files and its count of failed checks are kept
  (`Attempt`), the files are put back as they were, the transcript is cut back to the prompt
  that produced the attempt, and that prompt is asked again at `RETRY_TEMPERATURE` with a seed
  of its own (reproducible runs), up to `agent.retries` times;
- when no attempt passes, the one with the fewest failed checks stays: the first on a tie, as
  the model's own most likely answer; but only when it failed fewer checks than the files did
  before the task (or when the checks last passed), else those files are put back (seen: the
  0.5B appended a copy of a test to the code file, which failed the one check the file had
  failed before, and the next try started from the junk);
- the tests the agent found for itself (shown with the task, not a test command) do not run
  before the task, to keep them off the first token; the first time an attempt is undone the
  files are as they were before it, and those tests count them then, once (not the docstring
  examples: those are the model's own and change with its code) (seen: every
  attempt of the 1.5B on Exercism's pov broke the tests' import, so none had a count, and the
  first of them was kept over files that failed 15 of 15 tests but imported);
- a task that goes nowhere before it wrote anything (it repeats itself into `stuck`, answers
  a change with words twice, or declines it) starts over from its own prompt, sampled so, while
  a retry is left; an attempt declined in a fix round is closed like one that went nowhere.

Only the reply that opens a fresh attempt is sampled so; the fixes after it use the task's own
sampling. Nothing here talks to the server or the workspace: the loop does (`loop.py`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

RETRY_TEMPERATURE = 1.0
"""Temperature of a fresh attempt's reply. At 0.7 the 1.5B rewrote a passing function for one of
six stuck HumanEval problems in three tries each; at 1.0, for three (llama-server's default
top-k 40, top-p 0.95 and min-p 0.05 keep the sample on sensible tokens)."""

_DOCTEST = re.compile(r"\*\*\*Test Failed\*\*\* (\d+) failures?")
_UNITTEST = re.compile(r"FAILED \(([^)]*)\)")
_PYTEST = re.compile(r"(\d+) (?:failed|errors?)\b")
_PYTEST_SUMMARY = re.compile(r"^=*\s*\d+ \w+(?:, \d+ \w+)* in \d")
"""pytest's last line, `2 failed, 1 passed in 0.05s`: between `=` rules, or bare under `-q`."""
_PYTEST_INTERRUPTED = re.compile(r"Interrupted: \d+ errors? during collection")
"""pytest's line when a test module could not be collected (an import failed)."""


def failure_count(output: str) -> int | None:
    """Failed checks as the runner counts them (doctest and the example runner, unittest,
    pytest); None when the output says no count (a crash, a timeout, tests that could not be
    collected, another runner)."""
    found = [int(n) for n in _DOCTEST.findall(output)]
    if found:
        return sum(found)
    unit = _UNITTEST.findall(output)
    if unit:
        return sum(int(n) for n in re.findall(r"(?:failures|errors)=(\d+)", unit[-1]))
    if _PYTEST_INTERRUPTED.search(output):
        return None  # no test ran: "1 error" is the module that failed to import
    lines = [line for line in output.splitlines() if _PYTEST_SUMMARY.match(line)]
    if lines:
        return sum(int(n) for n in _PYTEST.findall(lines[-1]))
    return None


@dataclass
class BranchPoint:
    """Where the attempt began: what a retry goes back to."""

    messages: int
    """Messages in the transcript before the attempt's first reply."""
    rounds: int
    """Rounds of fixes used before it."""
    before: dict[str, str | None] = field(default_factory=dict)
    """Each file the attempt wrote → its text before the attempt (None: it did not exist)."""


@dataclass(frozen=True)
class Attempt:
    """A closed attempt: the files it left and how many checks they failed."""

    files: dict[str, str]
    failures: int | None
    """None: not counted; ranks after any count."""

    def rank(self) -> float:
        return float("inf") if self.failures is None else self.failures

    def held_by(self, files: dict[str, str]) -> bool:
        """The files as they are already hold this attempt's text."""
        return all(files.get(path) == text for path, text in self.files.items())


@dataclass
class Retries:
    """The fresh attempts of one task."""

    allowed: int
    used: int = 0
    point: BranchPoint | None = None
    attempts: list[Attempt] = field(default_factory=list)
    fresh: bool = False
    """The next reply opens a fresh attempt (sampled at `RETRY_TEMPERATURE`)."""
    baseline: int | None = None
    """Checks the files failed before any attempt: the run shown with the task, or 0 once the
    checks passed; None when not known (no checks ran, or their output gave no count)."""
    baseline_files: dict[str, str | None] = field(default_factory=dict)
    """Each file written since then → its text before (None: it did not exist)."""
    counted_before: bool = False
    """The checks ran on the files before any attempt (whether or not they gave a count)."""
    origin: BranchPoint | None = None
    """Where the last closed attempt began: a fresh attempt that has not written yet goes back
    there again when its reply cannot be used (a sample can come out garbled, and a fix asked
    of the model at the task's temperature copies the garble)."""

    def writing(self, messages: int, rounds: int, path: str, old: str | None) -> None:
        """A reply is about to change `path` (text `old`); `messages` were in the transcript
        before that reply. The first write since the checks last passed opens the attempt."""
        if self.point is None:
            self.point = BranchPoint(messages, rounds)
        self.point.before.setdefault(path, old)
        self.baseline_files.setdefault(path, old)

    def checked_before(self, output: str, ok: bool) -> None:
        """The checks ran before any change (`output`, whether they passed): the count an
        attempt must beat to stay at a failing end."""
        self.baseline = 0 if ok else failure_count(output)
        self.counted_before = True

    def wants_count_before(self, files: dict[str, str]) -> bool:
        """The files (`files`) are back as they were before any attempt, and the checks have
        not counted those yet: a run now gives the count an attempt must beat."""
        if self.counted_before or self.baseline is not None or not self.baseline_files:
            return False
        return all(files.get(p) == t for p, t in self.baseline_files.items() if t is not None)

    def passed(self) -> None:
        """The checks passed: the attempt is the answer, there is nothing to go back to but
        the files as they are now."""
        self.forget()
        self.baseline, self.baseline_files = 0, {}

    def forget(self) -> None:
        """The transcript the attempts began in is gone (compacted): no attempt to go back to."""
        self.point = self.origin = None
        self.attempts.clear()

    def can_retry(self) -> bool:
        return self.point is not None and self.used < self.allowed

    def close(self, files: dict[str, str], output: str) -> BranchPoint:
        """Close the open attempt (its files as they are now, the last checks' output) and
        start the next: the branch point to go back to."""
        point = self.point
        assert point is not None, "close() without an open attempt"
        self.attempts.append(self._attempt(point, files, output))
        self.used += 1
        self.fresh = True
        self.point = None  # the next write opens the next attempt, at the same branch point
        self.origin = point
        return point

    def can_resample(self) -> bool:
        """A fresh attempt has not written yet, and a retry is left."""
        return self.origin is not None and self.point is None and self.used < self.allowed

    def resample(self) -> BranchPoint:
        """Ask the fresh attempt's prompt again (its reply could not be used)."""
        assert self.origin is not None, "resample() without a fresh attempt"
        self.used += 1
        self.fresh = True
        return self.origin

    def can_start_over(self) -> bool:
        """No attempt was opened or closed yet, and a retry is left."""
        return self.point is None and self.origin is None and self.used < self.allowed

    def start_over(self, point: BranchPoint) -> BranchPoint:
        """Ask the task's own prompt (`point`) again: the task went nowhere before anything was
        written (seen: the 1.5B gave a refused write to a test file three times, and the task
        ended `stuck` with no attempt to go back to)."""
        self.origin = point
        return self.resample()

    def sampling(self) -> dict[str, Any]:
        """What the next request's sampling changes: a fresh attempt's temperature and seed,
        once; else nothing."""
        if not self.fresh:
            return {}
        self.fresh = False
        return {"temperature": RETRY_TEMPERATURE, "seed": self.used}

    def best(self, files: dict[str, str], output: str) -> Attempt | None:
        """The files to put back when the task ends with its checks failing (`files` as they
        are, `output` of the last checks): the attempt with the fewest failed checks, the first
        on a tie, or the files before any attempt (`baseline`) when none failed fewer; None
        when the files as they are rank first (the open attempt's, or the files before it that
        the open attempt gave back), or there is nothing to go back to. The files before are
        returned even when the files already hold them (an undo left them so, and no attempt
        wrote since): the ending then says why they are as they were."""
        last = None if self.point is None else self._attempt(self.point, files, output)
        before = self.before_attempts()
        candidates = [*self.attempts, *([last] if last is not None else [])]
        if before is not None:
            candidates.insert(0, before)  # first: an attempt must fail fewer to stay
        if not candidates:
            return None
        best = min(candidates, key=Attempt.rank)  # min keeps the first of equals
        if best is last or (best is before and last is not None and before.held_by(files)):
            return None
        return best

    def created_besides(self, kept: Attempt | None) -> list[str]:
        """Files an attempt created that the files kept at a failing end (`kept`, or None: the
        files as they are, the open attempt's) do not hold: they go, as the workspace had none
        of them before the task."""
        if kept is not None:
            held = set(kept.files)
        else:
            held = set(self.point.before) if self.point is not None else set()
        return [p for p, text in self.baseline_files.items() if text is None and p not in held]

    def before_attempts(self) -> Attempt | None:
        """The files as they were before any attempt, with their count of failed checks, when
        that count is known (files an attempt created are not among them: `created_besides`)."""
        if self.baseline is None or not self.baseline_files:
            return None
        kept = {p: t for p, t in self.baseline_files.items() if t is not None}
        return Attempt(kept, self.baseline)

    @staticmethod
    def _attempt(point: BranchPoint, files: dict[str, str], output: str) -> Attempt:
        return Attempt({p: files[p] for p in point.before if p in files}, failure_count(output))
