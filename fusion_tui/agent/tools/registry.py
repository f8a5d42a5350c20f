"""Tool specs (what the model is told and the schema enforces) and their runners."""

from __future__ import annotations

from fusion_tui.agent.protocol import ArgSpec, ToolSpec
from fusion_tui.agent.tools import Runner
from fusion_tui.agent.tools.files import edit_file, list_dir, read_file, write_file
from fusion_tui.agent.tools.search import find, grep
from fusion_tui.agent.tools.shell import run_shell

PATH = ArgSpec("path", "string", "path relative to the workspace", max_length=1024)
OPT_PATH = ArgSpec("path", "string", "directory (default .)", required=False, max_length=1024)

READ_FILE = ToolSpec(
    "read_file",
    "show a text file's content exactly as it is (optionally only lines start_line..end_line)",
    "read",
    (
        PATH,
        ArgSpec("start_line", "integer", "first line", required=False, minimum=1),
        ArgSpec("end_line", "integer", "last line", required=False, minimum=1),
    ),
)
LIST_DIR = ToolSpec("list_dir", "list a directory", "read", (OPT_PATH,))
FIND = ToolSpec(
    "find",
    "find files by glob, e.g. '*.py' or 'src/**/*.ts'",
    "read",
    (ArgSpec("pattern", "string", "glob", max_length=256), OPT_PATH),
)
GREP = ToolSpec(
    "grep",
    "search file contents with a regular expression",
    "read",
    (
        ArgSpec("pattern", "string", "regex", max_length=256),
        OPT_PATH,
        ArgSpec("glob", "string", "only files matching this glob", required=False, max_length=256),
    ),
)
WRITE_FILE = ToolSpec(
    "write_file",
    "create or overwrite a file (asks the user)",
    "write",
    (PATH, ArgSpec("content", "string", "the whole new content")),
)
EDIT_FILE = ToolSpec(
    "edit_file",
    "replace the exact text `search` by `replace` in a file (asks the user)",
    "write",
    (
        PATH,
        ArgSpec("search", "string", "exact existing text"),
        ArgSpec("replace", "string", "new text"),
        ArgSpec("all", "boolean", "replace every occurrence", required=False),
    ),
)
RUN_SHELL = ToolSpec(
    "run_shell",
    "run a shell command in the workspace (asks the user)",
    "shell",
    (
        ArgSpec("command", "string", "the command line", max_length=4096),
        ArgSpec("timeout_s", "integer", "seconds", required=False, minimum=1, maximum=1800),
    ),
)
FINISH = ToolSpec(
    "finish",
    "end the task with a summary of what was done and what remains",
    "finish",
    (ArgSpec("summary", "string", "the summary", max_length=4000),),
)
DELEGATE = ToolSpec(
    "delegate",
    "run independent sub-tasks in parallel workers and get their summaries",
    "delegate",
    (
        ArgSpec("tasks", "string_list", "one instruction per sub-task", max_items=8),
        ArgSpec(
            "max_workers", "integer", "parallel workers", required=False, minimum=1, maximum=16
        ),
    ),
)

CORE_TOOLS: tuple[ToolSpec, ...] = (READ_FILE, LIST_DIR, FIND, GREP, RUN_SHELL)
"""The tools the model is offered. Files are changed by code blocks in the reply (`reply.py`),
which run as `write_file` and `edit_file`; a task ends with an answer, not a `finish` call."""

RUNNERS: dict[str, Runner] = {
    "read_file": read_file,
    "list_dir": list_dir,
    "find": find,
    "grep": grep,
    "write_file": write_file,
    "edit_file": edit_file,
    "run_shell": run_shell,
}
