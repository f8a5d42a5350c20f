"""The core never imports Textual or Rich: everything but tui/ and the TUI command is usable
headless (the other commands of cli/ included)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import fusion_tui

UI_MODULES = ("fusion_tui.tui", "fusion_tui.cli.app")


def core_modules() -> list[str]:
    names = []
    for info in pkgutil.walk_packages(fusion_tui.__path__, "fusion_tui."):
        if info.name.startswith(UI_MODULES) or info.name == "fusion_tui.__main__":
            continue
        names.append(info.name)
    return names


def test_there_are_core_modules_to_check() -> None:
    names = core_modules()
    assert "fusion_tui.server.http.client" in names
    assert "fusion_tui.gguf.reader" in names


def test_core_modules_import_no_textual_or_rich() -> None:
    code = (
        "import importlib, sys\n"
        # httpx imports its optional command line (click + rich) whenever click is installed,
        # and import-linter brings click into the test venv; fusion-tui does not depend on that
        # extra, so block it here to see what our own modules pull in.
        "sys.modules['httpx._main'] = None\n"
        f"for name in {core_modules()!r}:\n"
        "    importlib.import_module(name)\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "", f"core pulled in: {result.stdout.strip()}"
