"""Runs the examples written in Python files' docstrings: the agent's check when no test is given.

Standalone, standard library only: the agent runs this file with the workspace's own `python3`
(`python3 .../example_runner.py FILE...`), which need not have fusion-tui installed, so the code is
judged by the interpreter the project uses. Two kinds of example count:
- doctest's: `>>> call` and the expected output on the next lines, run as `python3 -m doctest`
  runs them (whitespace normalised);
- a line of a docstring that states what a call gives: `name(args) == value`, or with `==>`,
  `=>`, `->`, `→` or `➞` for `==`, where `name` is a function of the file called on literals and
  `value` a Python literal. A line that does not read so (`is_happy(a) => False`, where `a` is
  no literal) is passed over: an example written loosely is no specification to hold code to.
Each failed example is printed as doctest prints one ("Failed example:"). Exit 1: an example
failed; 0: all held (or there were none); 2: a file could not be imported for want of a module,
which says nothing about the code (a package that interpreter lacks); 3: the file's own code
raised while it was imported (a stray `python` line left from a code fence: `NameError`), which
is a verdict against the code: no example can run.
"""

from __future__ import annotations

import ast
import doctest
import importlib.util
import inspect
import math
import os
import re
import sys
import traceback
from types import ModuleType
from typing import Any

STATED = re.compile(
    r"^\s*(?P<call>[A-Za-z_]\w*\s*\(.*\))\s*(?:==>|==|=>|->|→|➞)\s*(?P<value>.+?)\s*$"
)
"""A docstring line that states a call's value (the `call` and the `value` as written)."""
RULE = "*" * 70


def load(path: str) -> ModuleType:
    """Import `path` as a module of its own name, its folder first on the path (as
    `python3 -m doctest FILE` does)."""
    folder, name = os.path.split(os.path.abspath(path))
    sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(os.path.splitext(name)[0], path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def stated_examples(module: ModuleType) -> list[tuple[str, str, Any]]:
    """(function, call, expected value) of every stated example in the docstrings of the
    module's own functions whose call names one of those functions."""
    functions = {
        name: obj
        for name, obj in vars(module).items()
        if inspect.isfunction(obj) and obj.__module__ == module.__name__
    }
    found: list[tuple[str, str, Any]] = []
    for owner, fn in functions.items():
        for line in (fn.__doc__ or "").splitlines():
            if line.lstrip().startswith(">>>"):
                continue  # doctest's own
            m = STATED.match(line)
            if m is None:
                continue
            call = m.group("call")
            try:
                tree = ast.parse(call, mode="eval")
                expected = ast.literal_eval(m.group("value"))
            except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
                continue
            if _literal_call(tree.body, functions):
                found.append((owner, call, expected))
    return found


def _literal_call(node: ast.expr, functions: dict[str, Any]) -> bool:
    """A call of one of `functions` on literals only (`f([1, 2], "a", k=3)`)."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return False
    if node.func.id not in functions:
        return False
    try:
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            ast.literal_eval(arg)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def same(got: Any, expected: Any) -> bool:
    """Equal, floats within a relative 1e-6 (an example rounds what it shows)."""
    if (
        isinstance(got, float)
        and isinstance(expected, float | int)
        and not isinstance(expected, bool)
    ):
        return math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-9)
    try:
        return bool(got == expected)
    except Exception:
        return False


def check(path: str, out: list[str]) -> int:
    """Run the examples of one file; the number that failed (failures go to `out`)."""
    module = load(path)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder().find(module, module.__name__):
        runner.run(test, out=out.append)
    failed = runner.failures
    for owner, call, expected in stated_examples(module):
        try:
            got = eval(call, vars(module))  # the example as written, in the file's namespace
        except Exception as exc:  # the code raised: that is the failure to show
            shown = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        else:
            if same(got, expected):
                continue
            shown = repr(got)
        failed += 1
        out.append(
            f'{RULE}\nFile "{path}", in {module.__name__}.{owner}\nFailed example:\n'
            f"    {call}\nExpected:\n    {expected!r}\nGot:\n    {shown}\n"
        )
    return failed


def main(paths: list[str]) -> int:
    out: list[str] = []
    failed = 0
    for path in paths:
        try:
            failed += check(path, out)
        except ImportError:  # a module the interpreter lacks: no verdict on the code
            sys.stdout.write("".join(out))
            print(f"could not import {path}:", file=sys.stderr)
            traceback.print_exc()
            return 2
        except BaseException:  # the file's own code raised while importing
            sys.stdout.write("".join(out))
            print(f"{path} raised an error while it was imported:")
            traceback.print_exc(file=sys.stdout)
            return 3
    sys.stdout.write("".join(out))
    if failed:
        print(f"***Test Failed*** {failed} failures.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
