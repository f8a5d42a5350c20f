"""A long Python file shown in part: the definitions a task is about in full, the rest by name.

Why: a small coder model shown a whole file gives the whole file back, whatever it is told.
On a 10 kB module (32 helpers, one wrong constant) the 1.5B coder wrote 2,700 tokens for a
one-character fix, about seven minutes a try on two cores, and asked in words (in the system
message, in the task's message, before or after the file) to give only the functions it
changes, it still gave the whole file. Shown the file with only the functions the task and the
failing tests name (and the ones those call), the others collapsed to a comment line that
names them, it gave back what it was shown: a few hundred tokens, and the fix passed. An
edited copy of the part is applied to the file as a diff of what was shown (`FileView.apply`),
so nothing the model was not shown is touched.
"""

from __future__ import annotations

import ast
import difflib
import re
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field

LONG_FILE_CHARS = 4_000
"""A Python file shorter than this is shown whole: given back whole it costs a minute or two,
and on the small files of the benches whole files pass most."""
MAX_PART = 0.6
"""A view longer than this share of the file is not worth it: the file is shown whole."""

_Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def words_of(text: str) -> set[str]:
    """The identifiers in a text (a task, a test run's output)."""
    return set(re.findall(r"[A-Za-z_]\w*", text))


def words_of_tests(source: str, local: Collection[str], failing: Collection[str] = ()) -> set[str]:
    """The identifiers in a test file, less the modules it imports from outside the workspace
    (`local`: the workspace's module names) and the names it uses from those. Why: a test
    that checks `quote` against the standard library's (`import shlex as real`,
    `real.split(...)`) named the copy's `shlex` class and `split` to the view, and the file was
    shown whole. With `failing` (the tests a run reports failing) and the file defining some of
    them, only those tests and the file's own helpers and fixtures they name count: the passing
    tests' functions are not what the task is about (a failing `test_indent` beside a passing
    `test_dedent` showed the 1.5B `dedent` too, and it copied and "fixed" `dedent` in five of
    six attempts)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return words_of(source)
    lines = source.split("\n")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and not _local_names(node, local):
            end = node.end_lineno or node.lineno
            lines[node.lineno - 1 : end] = [""] * (end - node.lineno + 1)
    text = "\n".join(lines)
    if failing and (tests := _failing_defs(tree, failing)):
        text = "\n".join(_source_of(lines, node) for node in tests)
    return words_of(without_uses(text, foreign_modules(tree, local)))


def foreign_modules(tests: ast.Module | str, local: Collection[str]) -> set[str]:
    """The names under which a test file imports modules from outside the workspace (`import
    shlex as real`: `real`); `local`: the workspace's module names."""
    try:
        tree = ast.parse(tests) if isinstance(tests, str) else tests
    except (SyntaxError, ValueError):
        return set()
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported = [a for a in node.names if a.name.split(".")[0] not in local]
            found |= {a.asname or a.name.split(".")[0] for a in imported}
    return found


def _local_names(node: ast.Import, local: Collection[str]) -> bool:
    """Whether an import statement imports any module of the workspace."""
    return any(a.name.split(".")[0] in local for a in node.names)


def without_uses(text: str, foreign: Collection[str]) -> str:
    """`text` less every use of the `foreign` modules and what it reaches through them
    (`real.split`): those name the library's functions, not the workspace's."""
    if not foreign:
        return text
    uses = re.compile(rf"\b(?:{'|'.join(map(re.escape, sorted(foreign)))})(?:\s*\.\s*\w+)*")
    return uses.sub("", text)


def _failing_defs(tree: ast.Module, failing: Collection[str]) -> list[ast.stmt]:
    """The test functions (or methods of test classes, with the class's methods that are not
    tests: `setUp`, helpers) named `failing`, and the module's own functions they name
    (helpers, fixtures by parameter name), one level."""
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
    tests: list[ast.stmt] = [n for name, n in defs.items() if name in failing]
    for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
        methods = [n for n in cls.body if isinstance(n, _Def)]
        if any(n.name in failing for n in methods):
            tests += [n for n in methods if n.name in failing or not n.name.startswith("test")]
    named = {w for node in tests for n in ast.walk(node) for w in _idents(n)}
    return tests + [n for name, n in defs.items() if name in named and n not in tests]


def _idents(node: ast.AST) -> list[str]:
    """The names a node uses or declares: a variable, a parameter (a fixture's name)."""
    if isinstance(node, ast.Name):
        return [node.id]
    return [node.arg] if isinstance(node, ast.arg) else []


def _source_of(lines: list[str], node: ast.stmt) -> str:
    """The node's lines, decorators included."""
    return "\n".join(lines[_first_line(node) : node.end_lineno or node.lineno])


@dataclass(frozen=True)
class FileView:
    """A file as shown in part: its lines, each with the source line it shows."""

    source: str
    lines: tuple[str, ...]
    origin: tuple[int | None, ...]
    """Per shown line: the index of the source line it is, None for a comment line that
    stands for definitions left out."""
    defined: frozenset[str] = frozenset()
    """The file's top-level definitions."""
    hidden: frozenset[str] = frozenset()
    """The definitions left out: top-level names, and `Class.method` for the methods left out
    of a class shown in part."""
    words: frozenset[str] = frozenset()
    """The names that chose what is shown."""

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def on(self, source: str) -> FileView | None:
        """The view of the file as it is now, after a write: the same choice of definitions on
        the new text, so that a later copy of the part (the fix after a failed test run) is
        applied as a change too, and what stays hidden stays guarded. None when the new text
        is not worth showing in part."""
        return self if source == self.source else in_part(source, self.words)

    def unseen_in(self, given: str) -> list[str]:
        """The definitions left out of the view that `given` defines: written blind; a
        top-level function named as a left-out method is that method (the 1.5B, shown `quote`
        and `shlex.__init__`, wrote a top-level `def get_token(self)`, merged in as a new
        function). Empty when `given` defines all of them: that is the whole file, as a model
        that has seen it whole gives it back."""
        names = _definitions(given)
        if self.hidden <= set(names):
            return []
        methods = {h.split(".", 1)[1]: h for h in self.hidden if "." in h}
        return [
            n if n in self.hidden else methods[n] for n in names
            if n in self.hidden or (n in methods and n not in self.defined)
        ]  # fmt: skip

    def loose_methods(self, given: str) -> list[str]:
        """`Class.method` for each top-level function of `given` that is a method of the
        file's, dedented: named as one, taking `self` or `cls`, and no top-level function of
        the file. Merged by definition it would be a new function beside the class, the method
        left as it was (seen: the 1.5B gave `Fraction.__round__` as a top-level `def
        __round__(self, ndigits=None)`)."""
        try:
            tree = ast.parse(given)
        except (SyntaxError, ValueError):
            return []
        owners: dict[str, str] = {}
        for owner, method in _units(ast.parse(self.source)):
            if owner is not None:
                owners.setdefault(method.name, owner)
        return [
            f"{owners[n.name]}.{n.name}" for n in tree.body
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name in owners
            and n.name not in self.defined and n.args.args
            and n.args.args[0].arg in ("self", "cls")
        ]  # fmt: skip

    def apply(self, given: str) -> str | None:
        """The source with the changes that `given`, an edited copy of the view, makes to it;
        None when `given` is not one (it drops or changes a line that stands for definitions
        left out, or a definition: then it is a partial file, merged by definition,
        `edits.merge_python`). Lines left off the start or the end were not given, not
        deleted: the 1.5B began its copy below the module's docstring and ended it before
        the last function, which then went missing from the file.
        Why: merged by definition, a change outside the functions (a module constant, a class
        attribute) would be lost; as a change to the view it lands where the model made it."""
        new = given.strip("\n").split("\n")
        out = list(self.source.split("\n"))
        lo, hi = self._given_range(new)
        matcher = difflib.SequenceMatcher(None, self.lines[lo:hi], new, autojunk=False)
        changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
        for _, i1, i2, j1, j2 in reversed(changes):
            span = self._span(lo + i1, lo + i2)
            if span is None:
                return None
            out[span[0] : span[1]] = new[j1:j2]
        result = "\n".join(out)
        if not self.defined <= _defined(result) or _unbound_uses(self.source, result):
            return None
        return result

    def _given_range(self, new: list[str]) -> tuple[int, int]:
        """The shown lines the copy covers: from the shown line its first line is to the one
        its last line is. Changed lines at either end stand for the rest of the function they
        begin or end in (the 1.5B gave `capwords` with its one-line body now six lines: counted
        as six shown lines, the end took the two imports below the function with it);
        outside a function, for as many shown lines."""
        blocks = difflib.SequenceMatcher(None, self.lines, new, autojunk=False)
        matched = [b for b in blocks.get_matching_blocks() if b.size]
        if not matched:
            return 0, len(self.lines)
        first, last = matched[0], matched[-1]
        after = len(new) - (last.b + last.size)
        lo = max(0, first.a - first.b)
        hi = min(len(self.lines), last.a + last.size + after)
        if first.b or after:
            at = {o: i for i, o in enumerate(self.origin) if o is not None}
            spans = _function_spans(self.source)
            if first.b and (span := _within(spans, self.origin[first.a])) and span[0] in at:
                lo = at[span[0]]
            if after and (span := _within(spans, self.origin[last.a + last.size - 1])):
                hi = at[span[1]] + 1 if span[1] in at else hi
        return lo, hi

    def _span(self, i1: int, i2: int) -> tuple[int, int] | None:
        """The source lines that shown lines i1..i2 stand for; None when a line that stands
        for definitions left out is among them, or an insertion falls between two such."""
        if any(o is None for o in self.origin[i1:i2]):
            return None
        if i2 > i1:
            first, last = self.origin[i1], self.origin[i2 - 1]
            assert first is not None and last is not None
            return first, last + 1
        after = self.origin[i1] if i1 < len(self.origin) else len(self.source.split("\n"))
        if after is None:
            before = self.origin[i1 - 1] if i1 > 0 else None
            return None if before is None else (before + 1, before + 1)
        return after, after


def _function_spans(source: str) -> list[tuple[int, int]]:
    """The first and last line (0-based, decorators included) of each function the view
    shows as a unit: the top-level functions and the methods of top-level classes."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return [
        (_first_line(n), (n.end_lineno or n.lineno) - 1) for _, n in _units(tree)
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    ]  # fmt: skip


def _within(spans: list[tuple[int, int]], line: int | None) -> tuple[int, int] | None:
    """The span that holds `line`, if any."""
    return next((s for s in spans if line is not None and s[0] <= line <= s[1]), None)


def _defined(source: str) -> frozenset[str]:
    """The top-level definitions of `source`; none when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return frozenset()
    return frozenset(n.name for n in tree.body if isinstance(n, _Def))


def _unbound_uses(source: str, result: str) -> set[str]:
    """Names that `source` binds at the top level (an import, an assignment) and `result` no
    longer binds but still uses: a copy of the part that dropped an import the hidden code
    needs (seen: the 1.5B's copy of shellwords' head left out `from collections import deque`,
    which only the hidden `shlex` class uses, and every test failed with a NameError)."""
    try:
        before, after = ast.parse(source), ast.parse(result)
    except (SyntaxError, ValueError):
        return set()
    lost = _top_bound(before) - _top_bound(after)
    used = {n.id for n in ast.walk(after) if isinstance(n, ast.Name)}
    return lost & used


def _top_bound(tree: ast.Module) -> set[str]:
    """The names a module's top-level imports and assignments bind."""
    names = {n for node in tree.body for n in _bound(node)}
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def _definitions(source: str) -> list[str]:
    """The top-level definitions of `source`, and `Class.method` for each class's methods (as
    `FileView.hidden` names them); none when it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    return [n.name if owner is None else f"{owner}.{n.name}" for owner, n in _units(tree)]


def _units(tree: ast.Module) -> Iterator[tuple[str | None, _Def]]:
    """Each top-level definition (owner None), and each definition in a top-level class's
    body (owner: the class's name), in the file's order: what a view shows or hides."""
    for node in tree.body:
        if isinstance(node, _Def):
            yield None, node
        if isinstance(node, ast.ClassDef):
            yield from ((node.name, n) for n in node.body if isinstance(n, _Def))


def in_part(source: str, words: Collection[str]) -> FileView | None:
    """`source` with the top-level definitions `words` name shown in full (and the functions
    those call), a class whose methods are named with those methods only, a class that the
    shown code makes but `words` do not name with its `__init__` only (a 10 kB lexer class
    that `split` makes would show the whole module), and each run of the others as one
    comment line naming them; None when the file is short, does not parse,
    names none of its definitions, or the view would not be much shorter. Words are names:
    give the task's, the failing tests' and those of the test files shown beside it."""
    if len(source) < LONG_FILE_CHARS:
        return None
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    top = {n.name: n for n in tree.body if isinstance(n, _Def)}
    methods = {
        n.name: shown for n in top.values()
        if isinstance(n, ast.ClassDef) and (shown := _named_methods(n, words))
    }  # fmt: skip
    named = {name for name in top if name in words} - set(methods)
    if not named and not methods:
        return None
    for name in _called(_shown(top, named, methods), top) - named - set(methods):
        node = top[name]
        if isinstance(node, ast.ClassDef):  # made, not read: how it is made is what counts
            methods[name] = _named_methods(node, {"__init__"})
        else:
            named.add(name)
    lines = source.split("\n")
    out = _Lines(lines)
    used = set(words) | _used(_shown(top, named, methods))
    out.take(_body_view(tree.body, 0, _Choice(named, methods, used), out), len(lines))
    defined = frozenset(top)
    hidden = defined - named - set(methods) | _hidden_methods(top, methods)
    view = FileView(
        source, tuple(out.lines), tuple(out.origin), defined, hidden, frozenset(words)
    )  # fmt: skip
    return view if len(view.text) <= MAX_PART * len(source) else None


@dataclass
class _Lines:
    """The view being built: shown lines and where each comes from."""

    source: list[str]
    lines: list[str] = field(default_factory=list)
    origin: list[int | None] = field(default_factory=list)

    def take(self, start: int, end: int) -> None:
        self.lines.extend(self.source[start:end])
        self.origin.extend(range(start, end))

    def mark(self, line: str) -> None:
        self.lines.append(line)
        self.origin.append(None)


_BUILTIN_HOOKS = frozenset({
    "abs", "bool", "bytes", "ceil", "complex", "divmod", "float", "floor", "format", "hash",
    "index", "int", "iter", "len", "next", "pow", "repr", "reversed", "round", "str", "trunc",
})  # fmt: skip
"""Functions that call a special method of their argument: `round(x)` runs `x.__round__`."""


def _names(method: str, words: Collection[str]) -> bool:
    """Whether `words` name a method: by its name, or by the function that calls it (a task
    about `round(Fraction(5, 2))` is about `Fraction.__round__`)."""
    hook = method[2:-2] if method.startswith("__") and method.endswith("__") else None
    return method in words or (hook in _BUILTIN_HOOKS and hook in words)


def _named_methods(cls: ast.ClassDef, words: Collection[str]) -> set[str]:
    """The methods `words` name, and the methods of the class those call on `self` (one
    level): a method is read with its helpers."""
    methods = {n.name: n for n in cls.body if isinstance(n, _Def)}
    named = {name for name in methods if _names(name, words)}
    calls = (c.func for name in named for c in ast.walk(methods[name]) if isinstance(c, ast.Call))
    on_self = {
        f.attr for f in calls
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "self"
    }  # fmt: skip
    return named | {name for name in on_self if name in methods}


def _hidden_methods(top: dict[str, _Def], methods: dict[str, set[str]]) -> set[str]:
    """`Class.method` for each method left out of a class shown in part."""
    hidden = set()
    for name, shown in methods.items():
        cls = top[name]
        left_out = (n.name for n in cls.body if isinstance(n, _Def) and n.name not in shown)
        hidden |= {f"{name}.{method}" for method in left_out}
    return hidden


def _shown(top: dict[str, _Def], named: set[str], methods: dict[str, set[str]]) -> list[_Def]:
    """The definitions shown in full: the named ones, and the shown methods of the classes
    shown in part."""
    shown = [top[name] for name in named]
    for name, chosen in methods.items():
        shown += [n for n in top[name].body if isinstance(n, _Def) and n.name in chosen]
    return shown


def _called(shown: list[_Def], top: dict[str, _Def]) -> set[str]:
    """Top-level definitions that the shown ones call or instantiate (one level): a function
    is read with its helpers."""
    calls = (c.func for node in shown for c in ast.walk(node) if isinstance(c, ast.Call))
    return {f.id for f in calls if isinstance(f, ast.Name) and f.id in top}


def _used(shown: list[_Def]) -> set[str]:
    """The names the shown definitions use: variables and attributes."""
    found = (n for node in shown for n in ast.walk(node))
    return {n.id if isinstance(n, ast.Name) else n.attr for n in found
            if isinstance(n, ast.Name | ast.Attribute)}  # fmt: skip


def _first_line(node: ast.stmt) -> int:
    """The node's first line, 0-based, decorators included."""
    decorators: Sequence[ast.expr] = getattr(node, "decorator_list", ())
    return min([node.lineno, *(d.lineno for d in decorators)]) - 1


@dataclass(frozen=True)
class _Choice:
    """What a body's view shows."""

    shown: Collection[str]
    """The definitions shown in full."""
    methods: dict[str, set[str]]
    """The classes shown in part, each with the methods shown."""
    used: Collection[str]
    """The names the shown code uses, and the words: a statement that binds one is shown."""


_FOLDED_LINES = 3
"""A statement longer than this that binds only names the shown code does not use is left
out of the view (a 13-line regex, a table): a small model gives back what it is shown."""


def _bound(node: ast.stmt) -> list[str]:
    """The names an assignment binds, in order; none for any other statement."""
    if not isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        return []
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _folded(node: ast.stmt, choice: _Choice, hidden: Collection[str]) -> bool:
    """Whether a statement that is not a definition is left out: an assignment of names the
    shown code does not use that is long, or that is made of definitions left out (a class's
    `__add__, __radd__ = _operator_fallbacks(_add, operator.add)` after its hidden `_add`),
    and a call on definitions left out (string.py's `Template.__init_subclass__()` after its
    hidden `Template`, which the 1.5B copied back with the comments around it)."""
    mentions = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        return bool(mentions & set(hidden)) and not mentions & set(choice.shown)
    bound = set(_bound(node))
    if not bound or bound & set(choice.used):
        return False
    lines = (node.end_lineno or node.lineno) - node.lineno + 1
    return lines > _FOLDED_LINES or bool(mentions & set(hidden))


def _body_view(body: Sequence[ast.stmt], pos: int, choice: _Choice, out: _Lines) -> int:
    """Adds the view of `body`'s lines from `pos` on to `out`; returns where it stopped."""
    left_out = {
        n.name for n in body
        if isinstance(n, _Def) and n.name not in choice.shown and n.name not in choice.methods
    }  # fmt: skip
    hidden: list[ast.stmt] = []
    indent = ""
    for node in body:
        first, end = _first_line(node), node.end_lineno or node.lineno
        if (
            node.name in left_out if isinstance(node, _Def) else _folded(node, choice, left_out)
        ):  # fmt: skip
            if not hidden:
                out.take(pos, first)
                indent = " " * node.col_offset
            hidden.append(node)
            pos = end
            continue
        if hidden:
            out.mark(_marker(indent, hidden))
            hidden = []
        if isinstance(node, ast.ClassDef) and node.name in choice.methods:
            start = _first_line(node.body[0])
            out.take(pos, start)
            inner = _Choice(choice.methods[node.name], {}, choice.used)
            pos = _body_view(node.body, start, inner, out)
            continue
        out.take(pos, end)
        pos = end
    if hidden:
        out.mark(_marker(indent, hidden))
    return pos


def _marker(indent: str, hidden: list[ast.stmt]) -> str:
    """One comment line for a run of definitions left out, naming them, so the model knows
    they exist (and neither writes them anew nor calls what is not there)."""
    noun = "definition"
    if all(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) for n in hidden):
        noun = "method" if indent else "function"
    names = [name for n in hidden for name in ([n.name] if isinstance(n, _Def) else _bound(n))]
    what = f"1 more {noun}" if len(names) == 1 else f"{len(names)} more {noun}s"
    return f"{indent}# ... {what} here, not shown: {', '.join(names)}"
