"""Reading a reply in the model's own format: tool calls, whole files, SEARCH/REPLACE, prose."""

from __future__ import annotations

import pytest

from fusion_tui.agent.reply import FileBlock, SearchReplace, ToolCall, parse_reply, path_of


def test_a_tool_call_in_qwen_format_and_the_prose_around_it() -> None:
    reply = parse_reply(
        'Let me look.\n<tool_call>\n{"name": "read_file", "arguments": {"path": "a.py"}}\n'
        "</tool_call>"
    )
    assert reply.items == [ToolCall("read_file", {"path": "a.py"})]
    assert reply.prose == "Let me look." and not reply.problems


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "list_dir", "arguments": {}}',
        '{"tool": "list_dir", "args": {}}',
        '<tool_call>{"name": "list_dir", "arguments": "{}"}</tool_call>',  # arguments as a string
    ],
)
def test_bare_json_calls_and_string_arguments_are_read(text: str) -> None:
    assert parse_reply(text).items == [ToolCall("list_dir", {})]


def test_a_broken_tool_call_is_a_problem_not_an_action() -> None:
    reply = parse_reply("<tool_call>{name: read_file}</tool_call>")
    assert reply.items == [] and "is not valid JSON" in reply.problems[0]
    cut = parse_reply('<tool_call>\n{"name": "read_file", "argum')
    assert cut.items == [] and cut.cut_off


@pytest.mark.parametrize(
    "above",
    ["stats.py", "**stats.py**", "# File: stats.py", "`stats.py`", "Here is the fixed `stats.py`:"],
)
def test_the_path_above_a_block_names_the_file(above: str) -> None:
    reply = parse_reply(f"{above}\n```python\ndef f():\n    return 1\n```\nDone.")
    assert reply.items == [FileBlock("stats.py", "def f():\n    return 1\n", "python")]
    assert reply.prose.endswith("Done.")


def test_a_path_in_the_fence_info_and_a_block_without_any_path() -> None:
    named = parse_reply("```python src/a.py\nx = 1\n```")
    assert named.items == [FileBlock("src/a.py", "x = 1\n", "python")]
    bare = parse_reply("The fix:\n\n```python\nx = 2\n```")
    assert bare.items == [FileBlock(None, "x = 2\n", "python")]


@pytest.mark.parametrize("fence", ["```\npython", "```python\npython", "```\nPython "])
def test_the_language_on_the_line_below_the_fence_is_not_code(fence: str) -> None:
    reply = parse_reply(f"solution.py\n{fence}\ndef f():\n    return 1\n```")
    assert reply.items == [FileBlock("solution.py", "def f():\n    return 1\n", "python")]


def test_shell_blocks_without_a_path_are_shown_commands_not_files() -> None:
    reply = parse_reply("Run:\n```bash\npytest -q\n```\nand it passes.")
    assert reply.items == [] and "and it passes." in reply.prose


def test_the_answer_says_where_code_that_words_led_into_went() -> None:
    """Seen in a TUI trial on the 1.5B: "Here's the corrected `median` function:" stood over the
    next paragraph with nothing between, the code having gone to the file."""
    text = (
        "The median is wrong for even lengths.\n\nHere's the corrected `median` function:\n\n"
        "```python\ndef median(v):\n    return v\n```\n\nWith this, the tests pass."
    )
    reply = parse_reply(text)
    assert reply.items == [FileBlock(None, "def median(v):\n    return v\n", "python")]
    assert "code" not in reply.prose  # the loop reads the words alone
    assert reply.answer == (
        "The median is wrong for even lengths.\n\nHere's the corrected `median` function:\n\n"
        "(the code is in the edit above)\n\nWith this, the tests pass."
    )


def test_blocks_in_a_row_after_a_colon_are_each_named_and_others_left_out() -> None:
    both = parse_reply(
        "Here are both files:\n\na.py\n```python\nx = 1\n```\nb.py\n```python\ny = 2\n```"
    )
    assert [i.path for i in both.edits] == ["a.py", "b.py"]
    assert both.answer == (
        "Here are both files:\n\n(the code for `a.py` is in the edit above)\n"
        "(the code for `b.py` is in the edit above)"
    )
    plain = parse_reply("I fixed it.\n\na.py\n```python\nx = 1\n```\nDone.")
    assert plain.answer == plain.prose == "I fixed it.\n\nDone."
    shown = parse_reply("Run:\n```bash\npytest -q\n```\nand it passes.")
    assert shown.answer == shown.prose  # a shown command is no edit


def test_search_replace_blocks() -> None:
    text = (
        "calc.py\n```python\n<<<<<<< SEARCH\n    return a + b\n=======\n    return a - b\n"
        ">>>>>>> REPLACE\n```"
    )
    assert parse_reply(text).items == [
        SearchReplace("calc.py", "    return a + b\n", "    return a - b\n")
    ]
    unclosed = parse_reply("```\n<<<<<<< SEARCH\na\n=======\nb\n```")
    assert unclosed.items == [] and "not closed" in unclosed.problems[0]


def test_a_block_cut_off_by_the_token_cap_writes_nothing() -> None:
    reply = parse_reply("solution.py\n```python\ndef f():\n    return")
    assert reply.items == [] and reply.cut_off
    assert "cut off" in reply.problems[0]


@pytest.mark.parametrize("line", ["python", "Here is the code:", "a b.py", ""])
def test_lines_that_are_not_paths(line: str) -> None:
    assert path_of(line) is None


def test_a_json_block_that_is_one_call_is_read_as_the_call() -> None:
    reply = parse_reply('```json\n{"name": "grep", "arguments": {"pattern": "x"}}\n```')
    assert reply.items == [ToolCall("grep", {"pattern": "x"})]
    data = parse_reply('config.json\n```json\n{"name": "app", "arguments": {}}\n```')
    assert data.items == [FileBlock("config.json", '{"name": "app", "arguments": {}}\n', "json")]


def test_a_stray_fence_around_a_bare_call_or_after_prose_is_no_cut_off() -> None:
    call = '{"name": "read_file", "arguments": {"path": "a.py"}}'
    for text in (f"{call}\n```", f"```json\n{call}\n```", f"```\n{call}"):
        reply = parse_reply(text)
        assert reply.items == [ToolCall("read_file", {"path": "a.py"})] and not reply.problems
    done = parse_reply("Done.\n```")
    assert not done.items and not done.problems and not done.cut_off
    assert done.prose == done.answer == "Done."  # the stray mark is not shown
    cut = parse_reply("a.py\n```python\ndef f():")
    assert cut.cut_off and cut.problems


@pytest.mark.parametrize(
    "text",
    [
        "```json\nbeer_song.py\n```python\ndef recite():\n    return []\n```",
        "```\nbeer_song.py\n```\n```python\ndef recite():\n    return []\n```",
    ],
)
def test_a_fence_that_only_wraps_the_path_names_the_next_block(text: str) -> None:
    reply = parse_reply(text)
    assert reply.items == [FileBlock("beer_song.py", "def recite():\n    return []\n", "python")]
    assert not reply.problems


def test_a_lone_fence_above_a_fence_with_a_language_is_a_stray_mark() -> None:
    text = 'read_file("bottle_song.py")\n```\n```python\ndef recite():\n    return []\n```\nDone.'
    reply = parse_reply(text)
    assert reply.items == [FileBlock(None, "def recite():\n    return []\n", "python")]
    assert not reply.problems and "Done." in reply.prose


def test_a_one_line_block_of_its_own_is_not_taken_for_a_path() -> None:
    reply = parse_reply("Run it:\n```\nrun.sh\n```\nThen look.")
    assert reply.items == [FileBlock(None, "run.sh\n", "")]


def test_a_comment_naming_the_path_atop_the_code_is_the_path_not_a_line() -> None:
    """The 1.5B wrote `# todo.py` as the first line of todo.py's block, in place of the
    module's docstring line."""
    reply = parse_reply("todo.py\n```python\n# todo.py\nimport json\n```\n")
    assert reply.edits == [FileBlock("todo.py", "import json\n", "python")]
    bare = parse_reply("```python\n# File: todo.py\nimport json\n```\n")
    assert bare.edits == [FileBlock("todo.py", "import json\n", "python")]
    other = parse_reply("todo.py\n```python\n# util.py\nimport json\n```\n")
    assert other.edits == [FileBlock("todo.py", "# util.py\nimport json\n", "python")]
    prose = parse_reply("todo.py\n```python\n# remove an item\nimport json\n```\n")
    assert prose.edits[0].content.startswith("# remove an item\n")
