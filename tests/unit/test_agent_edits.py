"""Which file an edit is for and what it holds afterwards: paths, merges, SEARCH/REPLACE, and
writes refused because they would break a Python file."""

from __future__ import annotations

import pytest

from fusion_tui.agent.edits import (
    EditRefused,
    code_beside_tests,
    merge_python,
    resolve,
    search_replace,
    without_usage_examples,
)
from fusion_tui.agent.prompt import EXAMPLE_PATH, SYSTEM_PROMPT
from fusion_tui.agent.reply import FileBlock, SearchReplace

STATS = "import math\n\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n\n\ndef sd(xs):\n    pass\n"


def resolved(edit: FileBlock | SearchReplace, files: dict[str, str]) -> tuple[str, str, str]:
    done = resolve(edit, files, set(files), files.get)
    return done.path, done.content, done.how


def test_a_pathless_block_goes_to_the_file_whose_functions_it_redefines() -> None:
    files = {"a.py": "def f():\n    pass\n", "b.py": "def g():\n    pass\n"}
    path, content, how = resolved(FileBlock(None, "def g():\n    return 2\n"), files)
    assert (path, content, how) == ("b.py", "def g():\n    return 2\n", "whole")


def test_a_pathless_block_for_no_known_file_is_refused_when_two_are_in_the_chat() -> None:
    files = {"a.py": "x = 1\n", "b.py": "y = 2\n"}
    with pytest.raises(EditRefused, match="which file it is for"):
        resolved(FileBlock(None, "z = 3\n"), files)


def test_a_pathless_new_function_beside_the_tests_goes_to_the_one_module() -> None:
    tests = "from stats import mean\n\n\ndef test_mean():\n    assert mean([2]) == 2\n"
    files = {"test_stats.py": tests, "stats.py": STATS}
    new = "def median(xs):\n    return sorted(xs)[len(xs) // 2]\n"
    path, content, how = resolved(FileBlock(None, new), files)
    assert (path, how) == ("stats.py", "merged")
    assert content == STATS + "\n\n" + new  # appended; mean and sd kept
    with pytest.raises(EditRefused, match="which file it is for"):  # a test: whose?
        resolved(FileBlock(None, "def test_median():\n    assert True\n"), files)
    with pytest.raises(EditRefused, match="which file it is for"):  # two modules: which?
        resolved(FileBlock(None, new), {**files, "other.py": "x = 1\n"})


def test_a_block_naming_no_file_is_refused_with_the_format_shown_on_the_module() -> None:
    """Told only where the path goes, the 1.5B answered with blocks holding nothing but the
    path (Exercism's all-your-base); the refusal shows the format on the file to change."""
    tests = "from base import rebase\n\n\ndef test_rebase():\n    assert rebase(2, [1], 10)\n"
    files = {"base.py": "def rebase(a, d, b):\n    pass\n", "base_test.py": tests}
    cases = {
        "base.py\n": "it held only a path: the path goes above the block",
        "E   AssertionError: [0] != [1]\n": "and it is not Python code",
        "def test_x():\n    pass\n": "which file it is for. Write",
    }
    for block, why in cases.items():
        with pytest.raises(EditRefused) as refused:
            resolved(FileBlock(None, block), files)
        assert why in str(refused.value)
        assert str(refused.value).endswith(
            "block:\n\nbase.py\n```python\nthe whole file, every line of it\n```"
        )
    with pytest.raises(EditRefused, match=EXAMPLE_PATH.replace(".", r"\.")):  # two modules
        resolved(FileBlock(None, "z = 3\n"), {"a.py": "x = 1\n", "b.py": "y = 2\n"})


def test_an_empty_block_is_refused_as_empty() -> None:
    files = {"scale.py": STATS, "test_scale.py": "def test_x():\n    pass\n"}
    with pytest.raises(EditRefused, match=r"the code block is empty; give scale\.py.s whole"):
        resolved(FileBlock("path/of/the/scale.py", "\n"), files)
    with pytest.raises(EditRefused, match="is empty"):  # emptying a file that exists
        resolved(FileBlock("scale.py", ""), files)
    assert resolved(FileBlock("pkg/__init__.py", ""), files)[:2] == ("pkg/__init__.py", "")


def test_the_system_message_example_path_copied_means_the_file_in_the_chat() -> None:
    assert f"\n{EXAMPLE_PATH}\n```" in SYSTEM_PROMPT
    files = {"solution.py": "def f():\n    raise NotImplementedError\n"}
    block = FileBlock(EXAMPLE_PATH, "def f():\n    return 1\n")
    assert resolved(block, files)[:2] == ("solution.py", "def f():\n    return 1\n")


def test_a_base_name_names_the_one_file_that_has_it() -> None:
    files = {"src/stats.py": STATS}
    block = FileBlock("stats.py", STATS.replace("pass", "return 0.0"))
    assert resolved(block, files)[0] == "src/stats.py"


def test_some_functions_given_replace_those_and_keep_the_rest() -> None:
    new = "import statistics\n\ndef sd(xs):\n    return statistics.pstdev(xs)\n"
    path, content, how = resolved(FileBlock("stats.py", new), {"stats.py": STATS})
    assert path == "stats.py"
    assert how == "merged"
    assert content.startswith("import statistics\nimport math\n")
    assert "def mean(xs):\n    return sum(xs) / len(xs)" in content
    assert "return statistics.pstdev(xs)" in content and "pass" not in content


def test_a_whole_file_that_keeps_every_definition_is_not_merged() -> None:
    assert merge_python(STATS, STATS.replace("pass", "return 0.0")) is None


INVENTORY = """class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, name, count):
        self.items[name] = self.items.get(name, 0) + count

    @property
    def size(self):
        return len(self.items)

    def clear(self):
        self.items.clear()


def helper():
    return 1
"""
INVENTORY_FROM_AN_OLDER_VIEW = """class Inventory:
    def __init__(self):
        self.items = {}

    def add(self, name, count):
        if count <= 0:
            raise ValueError("count must be positive")
        self.items[name] = self.items.get(name, 0) + count


def helper():
    return 1
"""


def test_methods_a_class_leaves_out_are_kept_at_its_end() -> None:
    files = {"inventory.py": INVENTORY}
    done = resolve(
        FileBlock("inventory.py", INVENTORY_FROM_AN_OLDER_VIEW), files, set(files), files.get
    )
    assert done.kept == ("Inventory.size", "Inventory.clear")
    assert "raise ValueError" in done.content
    assert done.content == INVENTORY_FROM_AN_OLDER_VIEW.replace(
        "+ count\n",
        "+ count\n\n    @property\n    def size(self):\n        return len(self.items)\n\n"
        "    def clear(self):\n        self.items.clear()\n",
    )
    compile(done.content, "inventory.py", "exec")


def test_a_method_the_task_names_may_be_left_out() -> None:
    files = {"inventory.py": INVENTORY}
    block = FileBlock("inventory.py", INVENTORY_FROM_AN_OLDER_VIEW)
    done = resolve(block, files, set(files), files.get, {"remove", "the", "clear", "method"})
    assert done.kept == ("Inventory.size",)
    assert "def clear" not in done.content


def test_a_class_given_alone_keeps_its_left_out_methods_and_the_other_functions() -> None:
    files = {"inventory.py": INVENTORY}
    only_class = INVENTORY_FROM_AN_OLDER_VIEW.split("\n\n\ndef helper")[0] + "\n"
    done = resolve(FileBlock("inventory.py", only_class), files, set(files), files.get)
    assert done.how == "merged"
    assert done.kept == ("Inventory.size", "Inventory.clear")
    assert "def helper" in done.content and "raise ValueError" in done.content


def test_a_class_rebuilt_as_a_dataclass_is_taken_as_given() -> None:
    old = (
        "class P:\n    def __init__(self, x):\n        self.x = x\n\n"
        "    def twice(self):\n        return 2 * self.x\n"
    )
    new = "from dataclasses import dataclass\n\n\n@dataclass\nclass P:\n    x: int\n"
    files = {"p.py": old}
    done = resolve(FileBlock("p.py", new), files, set(files), files.get)
    assert (done.content, done.kept) == (new, ())


def test_a_class_indented_otherwise_than_the_file_is_taken_as_given() -> None:
    new = INVENTORY_FROM_AN_OLDER_VIEW.replace("    ", "  ")
    files = {"inventory.py": INVENTORY}
    done = resolve(FileBlock("inventory.py", new), files, set(files), files.get)
    assert (done.content, done.kept) == (new, ())


def test_search_replace_matches_once_and_ignores_trailing_spaces() -> None:
    assert search_replace("f", "a = 1  \nb = 2\n", "a = 1\n", "a = 3\n") == "a = 3\nb = 2\n"
    with pytest.raises(EditRefused, match="occurs 2 times"):
        search_replace("f", "x\nx\n", "x\n", "y\n")
    with pytest.raises(EditRefused, match="is not in f"):
        search_replace("f", "x\n", "old line\n", "new line\n")


def test_a_write_that_would_not_compile_is_refused_and_the_file_kept() -> None:
    with pytest.raises(EditRefused, match="was kept as it is: your text for it does not compile"):
        resolved(FileBlock("stats.py", "    return sum(xs) / len(xs)\n"), {"stats.py": STATS})


def test_a_pathless_fragment_without_functions_is_refused() -> None:
    files = {"stats.py": STATS}
    with pytest.raises(EditRefused, match=r"defines none of its functions \(mean, sd\)"):
        resolved(FileBlock(None, "print(mean([1, 2]))\n"), files)


def test_a_pathless_block_that_only_calls_the_code_is_a_usage_example() -> None:
    fix = FileBlock(None, "def sd(xs):\n    return 0.0\n")
    usage = FileBlock(None, "print(sd([1, 2]))\n")
    named = FileBlock("run.py", "print(sd([1, 2]))\n")
    assert without_usage_examples([fix, usage, named]) == [fix, named]
    assert without_usage_examples([usage]) == [usage]  # alone it is refused, as above
    output = FileBlock(None, "FAILED test_sd.py::test_sd - AssertionError\n1 failed in 0.1s\n")
    broken = FileBlock(None, "def sd(xs:\n", lang="python")  # said to be Python: refused
    assert without_usage_examples([fix, output, broken]) == [fix, broken]


def test_a_file_that_is_broken_already_may_be_rewritten_with_anything() -> None:
    files = {"bad.py": "def f(:\n"}
    assert resolved(FileBlock("bad.py", "def f():\n    return 1\n"), files)[2] == "whole"


def test_a_new_file_from_an_empty_search() -> None:
    assert resolved(SearchReplace("new.py", "", "x = 1\n"), {}) == ("new.py", "x = 1\n", "whole")
    with pytest.raises(EditRefused, match="does not exist"):
        resolved(SearchReplace("new.py", "x\n", "y\n"), {})


def test_a_path_in_another_case_is_the_file_in_the_chat() -> None:
    files = {"clock.py": "class Clock:\n    pass\n"}
    block = FileBlock("Clock.py", "class Clock:\n    def __init__(self, h, m):\n        pass\n")
    assert resolved(block, files)[0] == "clock.py"
    both = {**files, "CLOCK.PY": "x = 1\n"}  # two files fold to it: the name stands as written
    assert resolved(block, both)[0] == "Clock.py"


def test_a_test_file_named_above_its_codes_functions_is_the_code_file() -> None:
    files = {
        "stats.py": "def mean(xs):\n    return 0\n\n\ndef median(xs):\n    return 0\n",
        "test_stats.py": "from stats import mean\n\n\ndef test_mean():\n    assert mean([2])\n",
    }
    fix = FileBlock("test_stats.py", "def mean(xs):\n    return sum(xs) / len(xs)\n")
    assert resolved(fix, files)[0] == "stats.py"
    tests = FileBlock("test_stats.py", "def test_mean():\n    assert True\n")  # the tests
    assert resolved(tests, files)[0] == "test_stats.py"


def test_a_folder_the_workspace_lacks_before_a_files_name_is_that_file() -> None:
    files = {"sublist.py": "def sublist(a, b):\n    pass\n", "sublist_test.py": "import sublist\n"}
    block = FileBlock("file/sublist.py", "def sublist(a, b):\n    return 1\n")
    assert resolved(block, files)[0] == "sublist.py"
    nested = {**files, "src/util.py": "x = 1\n"}  # a folder it has: a new file there
    assert resolved(FileBlock("src/sublist.py", "y = 2\n"), nested)[0] == "src/sublist.py"


def test_a_variant_of_the_example_path_is_no_path() -> None:
    tests = "import unittest\n\n\nclass ComplexNumbersTest(unittest.TestCase):\n    pass\n"
    files = {
        "complex_numbers.py": "class ComplexNumber:\n    pass\n",
        "complex_numbers_test.py": tests,
    }
    block = FileBlock("path/to/the/file.py", "class ComplexNumber:\n    real = 0\n")
    assert resolved(block, files)[0] == "complex_numbers.py"


def test_a_file_that_imports_from_itself_loses_that_line() -> None:
    files = {"complex_numbers.py": "class ComplexNumber:\n    pass\n"}
    text = (
        "import math\nfrom complex_numbers import ComplexNumber\n\n"
        "class ComplexNumber:\n    real = 0\n"
    )
    content = resolved(FileBlock("complex_numbers.py", text), files)[1]
    assert content == "import math\n\nclass ComplexNumber:\n    real = 0\n"
    other = resolved(FileBlock("main.py", text), files)[1]  # another module's import stays
    assert "from complex_numbers import ComplexNumber\n" in other


SHAPE_TESTS = (
    "import pytest\n\nfrom shapes import area\n\n\n@pytest.fixture\ndef side():\n    return 3\n\n\n"
    "def test_area(side):\n    assert area(side, 4) == 12\n"
)


def test_the_code_in_a_block_for_a_test_file_is_what_the_tests_do_not_define() -> None:
    block = (
        "import math\nimport os\nimport pytest\n\nfrom shapes import area\n\n\n"
        "def square_area(s):\n    return area(s, s) * math.pi ** 0\n\n\n"
        "@pytest.fixture\ndef big():\n    return 10\n\n\n"
        "def test_area(side):\n    assert area(side, 4) == 12\n\n\n"
        "class TestSquare:\n    def test_one(self):\n        assert square_area(1) == 1\n"
    )
    code = code_beside_tests(block, SHAPE_TESTS)
    assert code == (
        "import math\nfrom shapes import area\n\ndef square_area(s):\n"
        "    return area(s, s) * math.pi ** 0\n"
    )


def test_a_block_for_a_test_file_with_only_tests_holds_no_code() -> None:
    assert code_beside_tests("def test_more():\n    assert True\n", SHAPE_TESTS) is None
    assert code_beside_tests("def broken(:\n", SHAPE_TESTS) is None


def test_a_new_file_named_after_a_standard_library_module_goes_to_the_code_it_redefines() -> None:
    """A new `shlex.py` beside a copy of shlex is imported instead of Python's own, by pytest
    itself: the code goes to the file whose functions it redefines, or is refused."""
    files = {"stats.py": STATS, "test_stats.py": "from stats import mean\n"}
    path, _content, how = resolved(FileBlock("statistics.py", "def sd(xs):\n    return 0\n"), files)
    assert (path, how) == ("stats.py", "merged")
    with pytest.raises(EditRefused, match="instead of Python's own `random` module"):
        resolved(FileBlock("random.py", "def pick():\n    return 4\n"), files)
    asked = resolve(FileBlock("random.py", "X = 4\n"), files, set(files), files.get, {"random"})
    assert asked.path == "random.py"  # the task names it: the user wants that file
    assert resolved(FileBlock("rand.py", "X = 4\n"), files)[0] == "rand.py"
    existing = {**files, "random.py": "X = 1\n"}
    assert resolved(FileBlock("random.py", "X = 2\n"), existing)[:2] == ("random.py", "X = 2\n")
