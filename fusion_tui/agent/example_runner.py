"""Runs the examples written in Python files' docstrings: the agent's check when no test is given.

Standalone, standard library only: the agent runs this file with the workspace's own `python3`
(`python3 .../example_runner.py FILE...`), which need not have fusion-tui installed, so the code is
judged by the interpreter the project uses. Three kinds of example count:
- doctest's: `>>> call` and the expected output on the next lines, run as `python3 -m doctest`
  runs them (whitespace normalised);
- a line of a docstring that states what a call gives: `name(args) == value`, or with `==>`,
  `=>`, `->`, `→` or `➞` for `==`, where `name` is a function of the file called on literals and
  `value` a Python literal. A line that does not read so (`is_happy(a) => False`, where `a` is
  no literal) is passed over: an example written loosely is no specification to hold code to;
- the two ways problem statements give an example by the function's parameters: an
  `Input: a = [1, 2], k = 3` line with `Output: [2]` on the next line (or `Input: [1, 2]` for a
  function of one parameter), and `For lst = [1, 2] the output should be 3`, in the docstring of
  the function whose parameters they name (every one without a default, and no other name),
  every value a Python literal.
Each failed example is printed as doctest prints one ("Failed example:"). Exit 1: an example
failed; 0: all held (or there were none); 2: a file could not be imported for want of a module,
which says nothing about the code (a package that interpreter lacks); 3: the file's own code
raised while it was imported (a stray `python` line left from a code fence: `NameError`), which
is a verdict against the code: no example can run.

The task's own examples come as options: `--given 'f(2) == 4'` (repeated) states what a call
must give, `f` a function that one of the files defines or imports (the first file that has it),
checked like a docstring's stated example; a call of a function none of the files has fails, since
the task asked for it. `--only-given` checks those alone (the tests judge the code, and the
docstrings' examples, the model's own, are no specification then).
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
INPUT = re.compile(r"^\s*Input\s*:\s*(?P<args>.+?)\s*$", re.I)
OUTPUT = re.compile(r"^\s*Output\s*:\s*(?P<value>.+?)\s*$", re.I)
FOR_OUTPUT = re.compile(
    r"^\s*For\s+(?P<args>[A-Za-z_]\w*\s*=.+?),?\s+the\s+output\s+should\s+be\s+"
    r"(?P<value>.+?)\.?\s*$",
    re.I,
)
"""An example by the function's parameters: `Input:` (with `Output:` on the next line), or
`For x = ... the output should be ...`."""
_NAMED = re.compile(r"(?:^|,)\s*(?P<name>[A-Za-z_]\w*)\s*=(?!=)\s*")
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
        lines = (fn.__doc__ or "").splitlines()
        found += by_parameters(owner, fn, lines)
        for line in lines:
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


def by_parameters(owner: str, fn: Any, lines: list[str]) -> list[tuple[str, str, Any]]:
    """(function, call, expected value) of the examples in `lines` (`fn`'s docstring) given by
    its parameters: `Input:` then `Output:` on the next non-blank line, or `For ... the output
    should be ...`."""
    found: list[tuple[str, str, Any]] = []
    for i, line in enumerate(lines):
        pair = FOR_OUTPUT.match(line)
        if pair is not None:
            args, value = pair.group("args"), pair.group("value")
        elif (given := INPUT.match(line)) is not None:
            after = next((x for x in lines[i + 1 :] if x.strip()), "")
            answer = OUTPUT.match(after)
            if answer is None:
                continue
            args, value = given.group("args"), answer.group("value")
        else:
            continue
        call = _call_by_parameters(owner, fn, args)
        if call is None:
            continue
        try:
            expected = ast.literal_eval(value)
        except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
            continue
        found.append((owner, call, expected))
    return found


def _call_by_parameters(owner: str, fn: Any, args: str) -> str | None:
    """`owner(name=value, ...)` for `args` written as `name = value, ...` (names of `fn`'s
    parameters, every one without a default given, values literals), or `owner(value)` for a
    lone literal when `fn` has one parameter; None when `args` does not read so."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    marks = list(_NAMED.finditer(args))
    if not marks:
        if len(params) != 1 or not _literal(args):
            return None
        return f"{owner}({args.strip()})"
    if marks[0].start() != 0:
        return None
    given: dict[str, str] = {}
    for mark, after in zip(marks, [*marks[1:], None], strict=True):
        value = args[mark.end() : after.start() if after else len(args)].strip()
        if mark.group("name") not in params or not _literal(value):
            return None
        given[mark.group("name")] = value
    needed = {n for n, p in params.items() if p.default is inspect.Parameter.empty}
    if not needed <= set(given):
        return None
    return f"{owner}({', '.join(f'{n}={v}' for n, v in given.items())})"


def _literal(text: str) -> bool:
    try:
        ast.literal_eval(text.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return False
    return True


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


def check_module(path: str, module: ModuleType, out: list[str]) -> int:
    """Run the docstring examples of `module` (loaded from `path`); the number that failed."""
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    for test in doctest.DocTestFinder().find(module, module.__name__):
        runner.run(test, out=out.append)
    failed = runner.failures
    for owner, call, expected in stated_examples(module):
        where = f'File "{path}", in {module.__name__}.{owner}'
        failed += not holds(call, expected, vars(module), where, out)
    return failed


def holds(call: str, expected: Any, namespace: dict[str, Any], where: str, out: list[str]) -> bool:
    """Whether `call`, evaluated in `namespace`, gives `expected`; a failure is shown in `out`
    as doctest shows one."""
    try:
        got = eval(call, namespace)  # the example as written, in the file's namespace
    except Exception as exc:  # the code raised: that is the failure to show
        shown = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    else:
        if same(got, expected):
            return True
        shown = repr(got) + first_difference(expected, got)
    out.append(
        f"{RULE}\n{where}\nFailed example:\n"
        f"    {call}\nExpected:\n    {expected!r}\nGot:\n    {shown}\n"
    )
    return False


def first_difference(expected: Any, got: Any) -> str:
    """For two strings that differ, where they first do, as a line to show under "Got:"; ""
    otherwise. Two spaces against one is easy to read past: the 1.5B, shown `'Hello  World'`
    expected and `'Hello World'` got, wrote the same code again."""
    if not (isinstance(expected, str) and isinstance(got, str)):
        return ""
    at = next((i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b), None)
    if at is None:
        at = min(len(expected), len(got))
        longer, what = (expected, "expected") if len(expected) > len(got) else (got, "got")
        return (
            f"\n    (the same up to character {at}; then {what} goes on with "
            f"{longer[at : at + 10]!r})"
        )
    return (
        f"\n    (they first differ at character {at}: expected {expected[at : at + 10]!r}, "
        f"got {got[at : at + 10]!r})"
    )


def given_example(text: str) -> tuple[str, str, Any] | None:
    """(function, call, expected value) of a `--given` example (`f(2, "a") == 4`: a call of a
    function by its name on literals, and a literal); None when it does not read so."""
    m = STATED.match(text)
    if m is None:
        return None
    try:
        node = ast.parse(m.group("call"), mode="eval").body
        expected = ast.literal_eval(m.group("value"))
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        return None
    if not _literal_call(node, {node.func.id: None}):
        return None
    return node.func.id, m.group("call"), expected


def check_given(given: list[str], modules: list[tuple[str, ModuleType]], out: list[str]) -> int:
    """Check the task's examples against the first of `modules` that has each one's function;
    the number that failed (a function none has fails: the task asked for it)."""
    failed = 0
    for text in given:
        example = given_example(text)
        if example is None:
            continue
        name, call, expected = example
        owner = next(((p, m) for p, m in modules if callable(getattr(m, name, None))), None)
        if owner is None:
            files = ", ".join(p for p, _ in modules) or "no file"
            out.append(
                f'{RULE}\nFile "the task"\nFailed example:\n    {call}\nExpected:\n'
                f"    {expected!r}\nGot:\n    NameError: no function {name} in {files}\n"
            )
            failed += 1
            continue
        path, module = owner
        where = f'File "{path}", in the task\'s example'
        failed += not holds(call, expected, vars(module), where, out)
    return failed


def main(argv: list[str]) -> int:
    given: list[str] = []
    only_given = False
    paths: list[str] = []
    args = iter(argv)
    for arg in args:
        if arg == "--given":
            given.append(next(args, ""))
        elif arg == "--only-given":
            only_given = True
        else:
            paths.append(arg)
    out: list[str] = []
    failed = 0
    modules: list[tuple[str, ModuleType]] = []
    for path in paths:
        try:
            module = load(path)
            modules.append((path, module))
            if not only_given:
                failed += check_module(path, module, out)
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
    failed += check_given(given, modules, out)
    sys.stdout.write("".join(out))
    if failed:
        print(f"***Test Failed*** {failed} failures.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
