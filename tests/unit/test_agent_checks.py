"""What the model is shown of a failed test run: the tail, with long library frames cut."""

from __future__ import annotations

from fusion_tui.agent.checks import condensed, failing_tests, own_frames, tail

BODY = "\n".join(f"        line_{i} = {i}" for i in range(80))
OUTPUT = (
    "F.\n"
    "=================================== FAILURES ===================================\n"
    "__________________________________ test_quote __________________________________\n"
    "\n"
    "    def test_quote():\n"
    ">       assert real.split(quote(s)) == [s]\n"
    "\n"
    "test_shellwords.py:8: \n"
    "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ \n"
    "\n"
    "self = <shlex.shlex object at 0x7f3ef7f6e4d0>\n"
    "\n"
    "    def read_token(self):\n"
    f"{BODY}\n"
    '>       raise ValueError("No closing quotation")\n'
    "E       ValueError: No closing quotation\n"
    "\n"
    "/usr/lib/python3.11/shlex.py:191: ValueError\n"
    "----------------------------- Captured stdout call -----------------------------\n"
    + "\n".join(f"    printed {i}" for i in range(8))
    + "\n"
    "=========================== short test summary info ============================\n"
    "FAILED test_shellwords.py::test_quote - ValueError: No closing quotation\n"
    "1 failed, 1 passed in 1.04s"
)


def test_a_long_frame_of_library_code_is_cut_so_the_tests_own_line_stays_in_the_tail() -> None:
    """pytest's default traceback prints the whole function that raised; a `quote` fix checked
    with `shlex.split` filled the tail with `read_token` and hid the test's failing line."""
    output, body = OUTPUT, BODY
    shown = condensed(output)
    assert "line_5 = 5" not in shown and "line_79 = 79" in shown
    assert "    def read_token(self):\n    ...\n        line_77 = 77\n" in shown
    assert ">       assert real.split(quote(s)) == [s]" in tail(shown, lines=30)
    assert ">       assert real.split(quote(s))" not in tail(output, lines=30)
    assert "    printed 3" in shown and shown.endswith("1 failed, 1 passed in 1.04s")
    short = output.replace(body + "\n", "")
    assert condensed(short) == short


def test_the_frames_of_files_outside_the_workspace_are_left_out_of_the_words() -> None:
    """The output's names choose what a long file shows; the library's are not the file's."""
    own = own_frames(OUTPUT)
    assert ">       assert real.split(quote(s)) == [s]" in own
    assert "test_shellwords.py:8: " in own and "read_token" not in own and "shlex.py" not in own
    assert "    printed 3" in own and own.endswith("1 failed, 1 passed in 1.04s")
    site = OUTPUT.replace("/usr/lib/python3.11/shlex.py", "../venv/site-packages/shlex.py")
    assert "read_token" not in own_frames(site)
    local = OUTPUT.replace("/usr/lib/python3.11/shlex.py", "shellwords.py")
    assert "    def read_token(self):" in own_frames(local)


def test_short_entries_of_library_frames_are_left_out_too() -> None:
    """pytest's default shows the frames between the first and the last in short: the location
    line first, then the source line (`raw = self.read_token()` named the copy's method)."""
    output = (
        "__________________________________ test_quote __________________________________\n"
        "\n"
        "    def test_quote():\n"
        ">       assert real.split(quote(s)) == [s]\n"
        "                   ^^^^^^^^^^^^^^^^^^^^\n"
        "\n"
        "test_shellwords.py:8: \n"
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ \n"
        "/usr/lib/python3.11/shlex.py:315: in split\n"
        "    return list(lex)\n"
        "           ^^^^^^^^^\n"
        "/usr/lib/python3.11/shlex.py:109: in get_token\n"
        "    raw = self.read_token()\n"
        "          ^^^^^^^^^^^^^^^^^\n"
        "shellwords.py:40: in helper_in_the_workspace\n"
        "    return tokens()\n"
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ \n"
        "\n"
        "    def read_token(self):\n"
        '>                   raise ValueError("No closing quotation")\n'
        "E                   ValueError: No closing quotation\n"
        "\n"
        "/usr/lib/python3.11/shlex.py:191: ValueError\n"
        "FAILED test_shellwords.py::test_quote - ValueError: No closing quotation"
    )
    own = own_frames(output)
    assert "read_token" not in own and "lex" not in own.replace("shellwords", "")
    assert "    return tokens()" in own and "helper_in_the_workspace" in own
    assert ">       assert real.split(quote(s)) == [s]" in own and "FAILED test_shellwords" in own


def test_the_failing_tests_are_read_from_pytest_and_unittest_output() -> None:
    pytest_out = (
        "_________________________________ test_indent __________________________________\n"
        "____________________________ TestWrap.test_width[3] _____________________________\n"
        "FAILED test_wraptext.py::test_indent - AssertionError: assert 'a' == '> a'\n"
        "FAILED tests/test_w.py::TestWrap::test_width[3] - ValueError\n"
        "ERROR test_wraptext.py::test_setup - fixture 'gone' not found\n"
        "1 failed, 1 passed in 0.55s"
    )
    assert failing_tests(pytest_out) == {"test_indent", "test_width", "test_setup"}
    unittest_out = "FAIL: test_one (test_mod.Case.test_one)\nERROR: test_two (test_mod.Case)\n"
    assert failing_tests(unittest_out) == {"test_one", "test_two"}
    collection = "ERROR test_wraptext.py - ImportError: cannot import name 'x'\n1 error in 0.1s"
    assert failing_tests(collection) == set()
