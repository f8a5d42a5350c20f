"""Turns the edits of a reply into new file contents: which file, and what it holds afterwards.

A small coder model gets the format mostly right and the details often wrong, and each detail
costs a whole round trip when refused. So, where the intent is unambiguous, the edit is taken as
meant:
- a code block without a path line goes to the file in the chat whose functions it redefines
  (or the only file in the chat, or the only Python module in it besides test files, when the
  block defines no test);
- a path that is a file's base name (`stats.py` for `src/stats.py`) names that file;
- a Python block that redefines some of a file's functions but leaves others out (the model
  wrote only what it changed) replaces those functions and keeps the rest of the file, with any
  new imports added at the top;
- a class given without some of the methods the file's class has keeps them, unless the task
  names them (the 1.5B, adding a method, wrote the class from an older view of it, and the
  method a task before had added was gone while the tests, which did not cover it, passed);
- a copy of a file shown in part (`file_view.py`), edited, changes the lines it changed,
  outside functions too;
- a SEARCH text that matches only when trailing spaces are ignored still matches;
- an empty block is refused as empty (not as one without a path), unless it creates a file;
- a new file named after a standard-library module (`shlex.py`) goes to the file whose
  functions it redefines, or is refused, unless the task names the module.
A write that would turn a Python file that compiles into one that does not is refused: the file
is kept, and the model told why. Everything else is refused with a sentence the model can act on.
"""

from __future__ import annotations

import ast
import dataclasses
import re
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fusion_tui.agent.checks import is_test_file, syntax_problem
from fusion_tui.agent.file_view import FileView
from fusion_tui.agent.prompt import EXAMPLE_PATH
from fusion_tui.agent.reply import FileBlock, SearchReplace


class EditRefused(Exception):
    """The edit cannot be applied; the message tells the model what to do instead."""


@dataclass(frozen=True)
class ResolvedEdit:
    path: str
    content: str
    """The file's whole new content."""
    how: str = "whole"
    """whole, merged (functions replaced in place), view (the changes made to a file shown in
    part, `file_view.py`) or search (a SEARCH/REPLACE edit)."""
    kept: tuple[str, ...] = ()
    """Methods (`Class.method`) the edit left out of a class and that were put back."""


def top_names(source: str) -> list[str] | None:
    """The top-level function and class names of Python source, or None if it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    return [
        n.name
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]


def same_code(old: str, new: str, path: str) -> bool:
    """Whether two texts of a Python file run the same: equal once docstrings and comments are
    left out (a fix that only moves a docstring's lines fixes nothing). False for other files,
    and for text that does not parse."""
    if not path.endswith(".py"):
        return False
    try:
        trees = [ast.parse(text) for text in (old, new)]
    except (SyntaxError, ValueError):
        return False
    for tree in trees:
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and _is_docstring(body[0]):
                node.body = body[1:]  # type: ignore[attr-defined]
    return ast.dump(trees[0]) == ast.dump(trees[1])


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def placeholder_path(path: str) -> bool:
    """Whether a path is the system message's example (`EXAMPLE_PATH`) or one like it
    (`path/to/the/file.py`: the 1.5B varied it on an Exercism task, and a new file of that name
    was written beside the one the tests import)."""
    parts = path.split("/")
    return path == EXAMPLE_PATH or (len(parts) > 2 and parts[0] == "path" and parts[1] in
                                    ("to", "of"))  # fmt: skip


def without_self_import(path: str, content: str) -> str:
    """`content` less its top-level lines that import names from the module `path` itself (`from
    complex_numbers import ComplexNumber` atop complex_numbers.py, copied from the tests by the
    1.5B): in the module they name, such a line fails at import, before any test runs."""
    if not path.endswith(".py"):
        return content
    module = re.escape(path[:-3].replace("/", "."))
    line = re.compile(rf"^from[ \t]+{module}[ \t]+import[ \t]+[^\n(]*\n", re.M)
    return line.sub("", content)


def resolve_path(path: str | None, block: str, files: Mapping[str, str], known: set[str]) -> str:
    """The workspace path an edit is for. `files`: the files in the chat (path → text);
    `known`: every file path of the workspace the loop knows of."""
    if path is not None and placeholder_path(path) and path not in known and path not in files:
        path = None  # the system message's example, copied: the block says no path of its own
    if path is not None:
        if path in files and is_test_file(path):
            # "to make `test_stats.py` pass, here is the fix:" above a block that redefines
            # stats.py's functions (the 0.5B): the line names the judge, the code says the file
            others = {p: text for p, text in files.items() if p != path}
            target = _redefined_file(block, others)
            if target is not None and not set(top_names(block) or ()) & set(
                top_names(files[path]) or ()
            ):
                return target
        if path in known or path in files:
            return path
        base = path.rsplit("/", 1)[-1]
        every = known | set(files)
        same = sorted(p for p in every if p.rsplit("/", 1)[-1] == base)
        folder = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
        # a folder the workspace does not have, before the name of a file it has: the 1.5B
        # wrote `file/sublist.py` beside sublist.py, and the tests ran on the stub
        if len(same) == 1 and (not folder or not any(p.startswith(folder) for p in every)):
            return same[0]
        # the name in another case: the 1.5B wrote `Clock.py` above the class of clock.py (an
        # Exercism task), and a new file beside the one the tests import was written
        folded = sorted(p for p in files if p.casefold() == path.casefold())
        return folded[0] if len(folded) == 1 else path
    redefined = _redefined_file(block, files)
    if redefined is not None:
        return redefined
    if len(files) == 1:
        return next(iter(files))
    # a new function beside the tests: the 1.5B, asked to add `sentence_count` with the test
    # file and its module in the chat, gave the function alone, and the refusal began a detour
    # of steps that rewrote the test file
    modules = [p for p in files if p.endswith(".py") and not is_test_file(p)]
    names = top_names(block)
    if len(modules) == 1 and names and not any(n.lower().startswith("test") for n in names):
        return modules[0]
    example = modules[0] if len(modules) == 1 else EXAMPLE_PATH
    raise EditRefused(unnamed_block(block, example, known | set(files)))


def unnamed_block(block: str, example: str, known: Collection[str]) -> str:
    """Why a block naming no file was not written, with the format to use, shown on `example`
    (the one module in the chat, when there is one). Seen on Exercism's all-your-base: the 1.5B,
    told only to write the path "on the line right above the block", answered with blocks that
    held nothing but a path, three times, until its attempt was cut."""
    text = block.strip()
    if "\n" not in text and text in known:
        what = " (it held only a path: the path goes above the block, the whole file inside it)"
    elif top_names(block) is None:
        what = " (and it is not Python code)"
    else:
        what = ""
    return (
        f"a code block did not say which file it is for{what}. Write the file's path on a line "
        f"of its own, then its complete new content in a fenced code block:\n\n{example}\n"
        "```python\nthe whole file, every line of it\n```"
    )


def resolve(
    edit: FileBlock | SearchReplace,
    files: Mapping[str, str],
    known: set[str],
    old_of: Callable[[str], str | None],
    named: Collection[str] = (),
    views: Mapping[str, FileView] | None = None,
) -> ResolvedEdit:
    """The edit as a path and its new content. `old_of(path)`: what the file holds now (None:
    it does not exist); `named`: the words of the task (a method it names may be left out);
    `views`: files shown in part, whose edited copy is applied as a change to what was shown."""
    body = edit.content if isinstance(edit, FileBlock) else edit.search + edit.replace
    if isinstance(edit, FileBlock) and not edit.content.strip():
        refuse_empty(edit, files, known, old_of)
    path = resolve_path(edit.path, body, files, known)
    old = old_of(path)
    if old is None and shadows_stdlib(path) and Path(path).stem not in named:
        path = instead_of_stdlib(path, body, files)
        old = old_of(path)
    if isinstance(edit, SearchReplace):
        if old is None:
            if not edit.search.strip():
                return ResolvedEdit(path, edit.replace, "whole")
            raise EditRefused(f"{path} does not exist; to create it give its whole content")
        return ResolvedEdit(path, search_replace(path, old, edit.search, edit.replace), "search")
    edit = dataclasses.replace(edit, content=without_self_import(path, edit.content))
    if old is not None and path.endswith(".py"):
        view = (views or {}).get(path)
        if view is not None:
            view = view.on(old)  # the file may have changed since: its text now, in part
            if view is not None:
                refuse_unseen(path, view, edit.content)
        shown = None if view is None else view.apply(edit.content)
        if shown is not None and syntax_problem(path, shown) is None:
            refuse_tests_in_code(path, old, shown, known)
            return ResolvedEdit(path, shown, "view")
        merged = merge_python(old, edit.content)
        if merged is None:
            keep_python(path, old, edit)
        given = edit.content if merged is None else merged
        content, kept = with_left_out_methods(old, given, named)
        refuse_tests_in_code(path, old, content, known)
        return ResolvedEdit(path, content, "whole" if merged is None else "merged", tuple(kept))
    return ResolvedEdit(path, edit.content, "whole")


def shadows_stdlib(path: str) -> bool:
    """Whether a Python file at `path` would be imported in place of a standard-library module
    of the same name (the folder of the code and its tests is first on the import path)."""
    return path.endswith(".py") and Path(path).stem in sys.stdlib_module_names


def instead_of_stdlib(path: str, block: str, files: Mapping[str, str]) -> str:
    """The file a block given as a new `path` that shadows a standard-library module is for:
    the file in the chat whose functions it redefines; else refused. Seen on the long-files
    bench: asked to fix `quote` in shellwords.py (a copy of shlex), the 1.5B gave `split` as
    `shlex.py`; the new file was imported by pytest itself, which could not start, and it was
    left there for every later attempt."""
    target = _redefined_file(block, files)
    if target is not None:
        return target
    raise EditRefused(
        f"a new {path} would be imported instead of Python's own `{Path(path).stem}` module, "
        "the test runner's too; give the change in the workspace's own files"
    )


def refuse_tests_in_code(path: str, old: str, new: str, known: Collection[str]) -> None:
    """Refuses an edit whose only new definitions in a module that is not a test file are
    tests, when the workspace has test files: tests added to the code judge nothing. Seen on
    the 1.5B, failing to find a bug in a long module: it appended `test_parse_duration` (its
    own asserts, one of them wrong) to the module, twice."""
    if is_test_file(path):
        return
    tests = sorted(p for p in known if is_test_file(p))
    added = set(top_names(new) or []) - set(top_names(old) or [])
    if tests and added and all(name.startswith("test") for name in added):
        raise EditRefused(
            f"{path} is code, not tests, and the tests in {tests[0]} judge the change: fix the "
            f"code of {path} instead of adding tests to it"
        )


def refuse_unseen(path: str, view: FileView, given: str) -> None:
    """Refuses a partial edit that redefines a function (or a method of a class shown in part)
    of a file shown in part that was not shown: it was written blind. Seen on the 1.5B: shown
    `indent` and told that `dedent` was not shown, it wrote a `dedent` that was `indent`
    renamed, and the tests of both failed. Refuses a method given as a top-level function
    too (`FileView.loose_methods`)."""
    unseen = view.unseen_in(given)
    if unseen:
        listed = ", ".join(f"`{n}`" for n in unseen)
        raise EditRefused(
            f"{path} was shown to you in part, without {listed}; change only what you were "
            f"shown, or read {path} first (read_file) to see the rest"
        )
    loose = view.loose_methods(given)
    if loose:
        cls, method = loose[0].split(".", 1)
        raise EditRefused(
            f"`{method}` is a method of `{cls}` in {path}: give it inside `class {cls}:`, "
            "indented as you were shown it, not as a function on its own"
        )


def refuse_empty(
    edit: FileBlock, files: Mapping[str, str], known: set[str], old_of: Callable[[str], str | None]
) -> None:
    """Refuses an empty block, unless it creates a file at a real path (an empty `__init__.py`
    is a file). Seen late in a failing try: the 1.5B gave `path/of/the/scale_generator.py` above
    an empty block, again and again, and was told the block named no file."""
    path = edit.path
    if path is not None and not placeholder_path(path) and old_of(path) is None:
        return
    base = (path or "").rsplit("/", 1)[-1]
    same = sorted(p for p in {*known, *files} if base and p.rsplit("/", 1)[-1] == base)
    named = same[0] if len(same) == 1 else path or "the file"
    raise EditRefused(f"the code block is empty; give {named}'s whole new content in it")


def without_usage_examples(
    edits: Sequence[FileBlock | SearchReplace],
) -> list[FileBlock | SearchReplace]:
    """The reply's edits less its usage examples: in a reply whose code defines functions, a
    block with no path that defines none (`print(rounded_avg(1, 5))` lines after the function)
    shows how to call the code; it is not a file. Seen with the 1.5B coder on HumanEval/103:
    such a block was refused ("defines none of its functions") beside the function that was
    written, and the model, told to give the whole file, gave back the file it was shown, the
    unimplemented function included. The same goes for a pathless block that is not Python
    (`_usage_example`). A reply of such blocks alone is still refused."""
    if not any(isinstance(e, FileBlock) and top_names(e.content) for e in edits):
        return list(edits)
    return [e for e in edits if not _usage_example(e)]


def _usage_example(edit: FileBlock | SearchReplace) -> bool:
    """A pathless block that calls the code, or that is not Python at all and not said to be:
    the test output the 1.5B makes up after its fix ("Here is the output: ``` FAILED ...
    ```") was taken for the file and refused as code that does not compile."""
    if not isinstance(edit, FileBlock) or edit.path is not None:
        return False
    names = top_names(edit.content)
    return names == [] or (names is None and edit.lang.lower() not in ("python", "py", "python3"))


def keep_python(path: str, old: str, edit: FileBlock) -> None:
    """Refuses a whole-file write that would break a Python file that works now: new text that
    does not compile (a function body given alone, an answer cut short), or a block with no
    path that defines none of the file's functions. The file stays as it is, so the model's
    next try starts from a file that runs, and it is told what to give instead."""
    if syntax_problem(path, old) is not None:
        return  # broken already: any try may be the fix
    problem = syntax_problem(path, edit.content)
    if problem is not None:
        raise EditRefused(
            f"{path} was kept as it is: your text for it does not compile ({problem}). Give "
            "the whole file, every function with its `def` line"
        )
    had = top_names(old) or []
    if edit.path is None and had and not top_names(edit.content):
        raise EditRefused(
            f"{path} was kept as it is: the code block has no path and defines none of its "
            f"functions ({', '.join(had)}). Give the whole file with its path on the line above"
        )


def code_beside_tests(block: str, tests: str) -> str | None:
    """The code of a block given for a test file that is not tests: its top-level functions and
    classes that the test file does not define and that are not tests or fixtures, with the
    block's imports they use; None when it has none, or does not parse. The 1.5B, asked to add a
    function, wrote the test file with the new function in it, and the refusal cost a step;
    the function belongs to the module the tests import."""
    try:
        tree = ast.parse(block)
    except (SyntaxError, ValueError):
        return None
    had = set(top_names(tests) or ())
    lines = block.split("\n")
    code = [
        "\n".join(lines[_first_line(n) - 1 : n.end_lineno])
        for n in tree.body
        if isinstance(n, _DEFS)
        and n.name not in had
        and not n.name.lower().startswith("test")
        and not any("fixture" in ast.unparse(d) for d in n.decorator_list)
    ]
    if not code:
        return None
    used = set(re.findall(r"\w+", "\n".join(code)))
    imports = [
        "\n".join(lines[n.lineno - 1 : n.end_lineno])
        for n in tree.body
        if isinstance(n, ast.Import | ast.ImportFrom)
        and not _imports_test_tools(n)
        and any((a.asname or a.name).split(".")[0] in used for a in n.names)
    ]
    return "\n".join(imports + [""] * bool(imports) + ["\n\n\n".join(code)]) + "\n"


def _imports_test_tools(node: ast.Import | ast.ImportFrom) -> bool:
    """An import only a test file needs: pytest, unittest. (One of the module under test's
    own names, `from shapes import area`, is dropped where the code is written.)"""
    if isinstance(node, ast.ImportFrom):
        names = [node.module or ""]
    else:
        names = [a.name for a in node.names]
    return any(n.split(".")[0] in ("pytest", "unittest") for n in names)


def _redefined_file(block: str, files: Mapping[str, str]) -> str | None:
    """The one file in the chat that defines more of the block's top-level names than any other
    (a block that redefines its functions is meant for it), or None."""
    names = set(top_names(block) or ())
    if not names:
        return None
    scored = sorted(
        ((len(names & set(top_names(text) or ())), p) for p, text in files.items()), reverse=True
    )
    if scored and scored[0][0] > 0 and (len(scored) == 1 or scored[1][0] < scored[0][0]):
        return scored[0][1]
    return None


def search_replace(path: str, old: str, search: str, replace: str) -> str:
    """`old` with `search` replaced once; trailing spaces ignored when the exact text is not
    found."""
    if old.count(search) == 1:
        return old.replace(search, replace, 1)
    if old.count(search) > 1:
        raise EditRefused(
            f"the SEARCH text occurs {old.count(search)} times in {path}; add lines around it "
            "so it matches once"
        )
    lines = [line.rstrip() for line in old.split("\n")]
    want = [line.rstrip() for line in search.rstrip("\n").split("\n")]
    hits = [i for i in range(len(lines) - len(want) + 1) if lines[i : i + len(want)] == want]
    if len(hits) != 1:
        raise EditRefused(
            f"the SEARCH text is not in {path}; copy the lines exactly as the file shows them, "
            "or give the whole new file instead"
        )
    old_lines = old.split("\n")
    start = hits[0]
    new_part = replace.rstrip("\n").split("\n") if replace.strip() else []
    return "\n".join(old_lines[:start] + new_part + old_lines[start + len(want) :])


def merge_python(old: str, new: str) -> str | None:
    """`old` with the functions and classes `new` redefines replaced in place, `new`'s other
    definitions appended and its missing imports added; None when `new` is the whole file (it
    keeps every definition of `old`) or either does not parse."""
    try:
        old_tree, new_tree = ast.parse(old), ast.parse(new)
    except (SyntaxError, ValueError):
        return None
    old_defs = {n.name: n for n in old_tree.body if isinstance(n, _DEFS)}
    new_defs = [n for n in new_tree.body if isinstance(n, _DEFS)]
    if not new_defs or set(old_defs) <= {n.name for n in new_defs}:
        return None
    old_lines, new_lines = old.split("\n"), new.split("\n")
    appended: list[list[str]] = []
    spans: list[tuple[int, int, list[str]]] = []
    for node in new_defs:
        text = new_lines[_first_line(node) - 1 : node.end_lineno]
        if node.name in old_defs:
            o = old_defs[node.name]
            spans.append((_first_line(o) - 1, o.end_lineno or _first_line(o), text))
        else:
            appended.append(text)
    for start, end, text in sorted(spans, reverse=True):
        old_lines[start:end] = text
    imports = [
        new_lines[n.lineno - 1]
        for n in new_tree.body
        if isinstance(n, ast.Import | ast.ImportFrom) and new_lines[n.lineno - 1] not in old_lines
    ]
    body = "\n".join(old_lines).rstrip("\n")
    body += "".join("\n\n\n" + "\n".join(text) for text in appended) + "\n"
    return "\n".join(imports) + "\n" + body if imports else body


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def with_left_out_methods(old: str, new: str, named: Collection[str]) -> tuple[str, list[str]]:
    """`new` with each method of a class in `old` that the same class in `new` leaves out put
    back at the end of that class, unless `named` holds its name (the task asks about it); and
    the methods put back, as `Class.method`. A class whose decorators or bases changed was
    rebuilt rather than edited (a dataclass writes its own `__init__`; methods moved to a new
    base class are there), and is left as given; so is one indented otherwise than the file,
    and text that does not parse."""
    try:
        old_tree, new_tree = ast.parse(old), ast.parse(new)
    except (SyntaxError, ValueError):
        return new, []
    before = {n.name: n for n in old_tree.body if isinstance(n, ast.ClassDef)}
    old_lines, new_lines = old.split("\n"), new.split("\n")
    inserts: list[tuple[int, list[str]]] = []
    kept: list[str] = []
    for cls in new_tree.body:
        if not isinstance(cls, ast.ClassDef):
            continue
        was = before.get(cls.name)
        if was is None or _rebuilt(was, cls):
            continue
        have = _bound_names(cls)
        missing = [
            n
            for n in was.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and n.name not in have
            and n.name not in named
        ]
        if not missing or any(n.col_offset != cls.body[0].col_offset for n in missing):
            continue
        text: list[str] = []
        for method in missing:
            text += ["", *old_lines[_first_line(method) - 1 : method.end_lineno]]
        inserts.append((cls.end_lineno or cls.lineno, text))
        kept += [f"{cls.name}.{n.name}" for n in missing]
    for end, text in sorted(inserts, reverse=True):
        new_lines[end:end] = text
    return ("\n".join(new_lines), kept) if kept else (new, [])


def _rebuilt(old: ast.ClassDef, new: ast.ClassDef) -> bool:
    """Whether a class's decorators or bases differ between two texts of it."""

    def shape(c: ast.ClassDef) -> list[str]:
        return [ast.dump(n) for n in (*c.decorator_list, *c.bases, *c.keywords)]

    return shape(old) != shape(new)


def _bound_names(cls: ast.ClassDef) -> set[str]:
    """The names a class body defines or assigns."""
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, _DEFS):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def _first_line(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])
