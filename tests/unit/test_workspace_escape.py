"""The workspace-escape corpus: every way out is refused with a clear tool error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fusion_tui.agent.approval import ApprovalGate, HeadlessApprover
from fusion_tui.agent.tools import ToolContext
from fusion_tui.agent.tools.files import edit_file, list_dir, read_file, write_file
from fusion_tui.agent.tools.search import find, grep
from fusion_tui.agent.tools.workspace import ToolError, Workspace


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "ws"
    outside = tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("TOP SECRET\n")
    (root / "inside.txt").write_text("fine\n")
    (root / "sub").mkdir()
    (root / "link_out").symlink_to(outside / "secret.txt")
    (root / "dir_out").symlink_to(outside)
    (root / "link_in").symlink_to(root / "inside.txt")
    return root, outside


def ctx_for(root: Path) -> ToolContext:
    return ToolContext(Workspace(root), ApprovalGate(HeadlessApprover(yes=True)))


ESCAPES = [
    "../outside/secret.txt",
    "sub/../../outside/secret.txt",
    "./../outside/secret.txt",
    "link_out",
    "dir_out/secret.txt",
    "/etc/passwd",
    "/proc/self/environ",
    "/proc/self/root/etc/passwd",
    "/sys/kernel",
    "/dev/zero",
    "a/" * 600 + "x",
    "x" * 300,
    "bad\x00name",
    "",
]


@pytest.mark.parametrize("path", ESCAPES)
def test_resolve_refuses_every_escape(layout: tuple[Path, Path], path: str) -> None:
    root, _ = layout
    with pytest.raises(ToolError) as info:
        Workspace(root).resolve(path)
    assert "\n" not in str(info.value) and str(info.value)


@pytest.mark.parametrize("path", ESCAPES)
async def test_read_file_never_leaks_outside(layout: tuple[Path, Path], path: str) -> None:
    root, _ = layout
    with pytest.raises(ToolError):
        await read_file(ctx_for(root), {"path": path})


async def test_absolute_path_inside_and_inner_links_are_fine(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    ctx = ctx_for(root)
    assert "fine" in (await read_file(ctx, {"path": str(root / "inside.txt")})).text
    assert "fine" in (await read_file(ctx, {"path": "link_in"})).text


async def test_writes_through_links_out_are_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    ctx = ctx_for(root)
    for path in ("link_out", "dir_out/new.txt", "../outside/new.txt", "/tmp/fusion-escape.txt"):
        with pytest.raises(ToolError):
            await write_file(ctx, {"path": path, "content": "pwned"})
    with pytest.raises(ToolError):
        await edit_file(ctx, {"path": "link_out", "search": "TOP", "replace": "X"})
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert sorted(os.listdir(outside)) == ["secret.txt"]


async def test_search_tools_do_not_walk_links_out(layout: tuple[Path, Path]) -> None:
    root, _ = layout
    ctx = ctx_for(root)
    res = await grep(ctx, {"pattern": "SECRET"})
    assert res.text == "no matches for 'SECRET'"
    found = await find(ctx, {"pattern": "*.txt"})
    assert "secret.txt" not in found.text and "inside.txt" in found.text
    with pytest.raises(ToolError):
        await list_dir(ctx, {"path": "dir_out"})
    with pytest.raises(ToolError):
        await grep(ctx, {"pattern": "x", "path": "../outside"})


def test_symlink_swap_between_check_and_open_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    ws = Workspace(root)
    (root / "sub" / "f.txt").write_text("inside\n")
    resolved = ws.resolve("sub/f.txt")  # checked while `sub` is a real directory
    os.rename(root / "sub", root / "sub_old")
    (root / "sub").symlink_to(outside)  # ... swapped for a link out before the open
    (outside / "f.txt").write_text("OUTSIDE\n")
    with pytest.raises(ToolError, match="symbolic link appeared"):
        ws.open_read(resolved)


def test_final_component_swap_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    ws = Workspace(root)
    resolved = ws.resolve("inside.txt")
    os.unlink(root / "inside.txt")
    (root / "inside.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(ToolError, match="symbolic link"):
        ws.open_read(resolved)


def test_write_after_final_swap_replaces_the_link_not_the_target(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    ws = Workspace(root)
    resolved = ws.resolve("inside.txt")
    os.unlink(root / "inside.txt")
    (root / "inside.txt").symlink_to(outside / "secret.txt")
    ws.write_atomic(resolved, b"new\n")
    assert (outside / "secret.txt").read_text() == "TOP SECRET\n"
    assert not (root / "inside.txt").is_symlink()
    assert (root / "inside.txt").read_text() == "new\n"


def test_write_after_directory_swap_is_refused(layout: tuple[Path, Path]) -> None:
    root, outside = layout
    ws = Workspace(root)
    resolved = ws.resolve("sub/new.txt")
    os.rename(root / "sub", root / "sub_old")
    (root / "sub").symlink_to(outside)
    with pytest.raises(ToolError, match="symbolic link appeared"):
        ws.write_atomic(resolved, b"x")
    assert not (outside / "new.txt").exists()


def test_workspace_inside_proc_is_refused() -> None:
    with pytest.raises(ToolError):
        Workspace("/proc/self")
