"""Confines every tool path to the workspace root, and opens files without following a swapped link.

Two steps, so that a link planted between the check and the use cannot widen access:
1. `resolve` turns the model's path into the real path (links resolved) and refuses anything that
   lands outside the root, in a kernel pseudo-filesystem, or is absurdly long.
2. `open_*` walk the *resolved* components from an fd of the root with `O_NOFOLLOW` on every
   component: since the resolved path has no links, any link met now was swapped in after the
   check, and the open fails instead of following it.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fusion_tui.agent.tools.suggest import missing_message

MAX_PATH_CHARS = 1024
MAX_COMPONENT_BYTES = 255
FORBIDDEN_ROOTS = ("/proc", "/sys", "/dev")

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class ToolError(Exception):
    """An error the model sees as the tool's result (one actionable line), never a traceback."""


@dataclass(frozen=True)
class WorkspacePath:
    """A path proven to be inside the workspace: the real path and its parts below the root."""

    real: Path
    parts: tuple[str, ...]

    @property
    def rel(self) -> str:
        return "/".join(self.parts) or "."


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


class Workspace:
    """The directory the agent may touch; everything else is refused."""

    def __init__(self, root: Path | str) -> None:
        real = os.path.realpath(os.fspath(root))
        if not os.path.isdir(real):
            raise ToolError(f"workspace {root} is not a directory")
        for bad in FORBIDDEN_ROOTS:
            if _under(real, bad):
                raise ToolError(f"workspace {root} lies inside {bad}; pick a project directory")
        self.root = Path(real)
        self._root_str = real
        self.suggest = True
        """Name the closest real paths when one does not exist (off only for a baseline)."""

    # --- checks --------------------------------------------------------------------------

    def resolve(self, path: str) -> WorkspacePath:
        """Map a model-given path (relative to the root, or absolute inside it) to a real path."""
        if not isinstance(path, str) or not path.strip():
            raise ToolError("path is empty; give a path relative to the workspace, e.g. 'src/a.py'")
        if "\x00" in path:
            raise ToolError("path contains a NUL byte")
        if len(path) > MAX_PATH_CHARS:
            raise ToolError(f"path is longer than {MAX_PATH_CHARS} characters")
        for part in path.split("/"):
            if len(part.encode("utf-8", "surrogateescape")) > MAX_COMPONENT_BYTES:
                raise ToolError(f"a path component is longer than {MAX_COMPONENT_BYTES} bytes")
        joined = path if os.path.isabs(path) else os.path.join(self._root_str, path)
        try:
            real = os.path.realpath(joined)
        except (OSError, ValueError) as exc:
            raise ToolError(f"cannot resolve {path!r}: {exc}") from None
        for bad in FORBIDDEN_ROOTS:
            if _under(real, bad):
                raise ToolError(f"{path!r} points into {bad}, which is outside the workspace")
        if not _under(real, self._root_str):
            raise ToolError(
                f"{path!r} is outside the workspace {self._root_str}; use paths inside it"
            )
        rel = os.path.relpath(real, self._root_str)
        parts = () if rel == "." else tuple(rel.split(os.sep))
        return WorkspacePath(Path(real), parts)

    def missing(self, rel: str) -> ToolError:
        """The error for a path that does not exist, with the closest real ones."""
        if not self.suggest:
            return ToolError(f"{rel} does not exist")
        return ToolError(missing_message(self.root, rel))

    def display(self, real: Path | str) -> str:
        rel = os.path.relpath(os.fspath(real), self._root_str)
        return "." if rel == "." else rel

    # --- race-safe opening -----------------------------------------------------------------

    @contextmanager
    def _dir_fd(self, parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
        """An fd of the directory `parts` below the root, walked without following links."""
        fd = os.open(self._root_str, os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC)
        try:
            for part in parts:
                flags = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
                try:
                    nxt = os.open(part, flags, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    os.mkdir(part, 0o755, dir_fd=fd)
                    nxt = os.open(part, flags, dir_fd=fd)
                except OSError as exc:
                    raise _swap_error(exc, part, fd) from None
                os.close(fd)
                fd = nxt
            self._verify_fd(fd)
            yield fd
        finally:
            os.close(fd)

    def _verify_fd(self, fd: int) -> None:
        """Belt and braces: where the kernel says the fd lives must still be inside the root."""
        link = f"/proc/self/fd/{fd}"
        if os.path.exists(link):
            where = os.readlink(link)
            if not _under(where, self._root_str):
                raise ToolError("the path moved outside the workspace while it was opened")

    def open_read(self, resolved: WorkspacePath) -> int:
        """An fd for reading a regular file (caller closes it)."""
        if not resolved.parts:
            raise ToolError("the workspace root is a directory, not a file")
        try:
            with self._dir_fd(resolved.parts[:-1]) as dfd:
                name = resolved.parts[-1]
                try:
                    # O_NONBLOCK: opening a FIFO (or a device) must not block the agent
                    flags = os.O_RDONLY | _O_NOFOLLOW | _O_CLOEXEC | _O_NONBLOCK
                    fd = os.open(name, flags, dir_fd=dfd)
                except OSError as exc:
                    if isinstance(exc, FileNotFoundError):
                        raise
                    raise _swap_error(exc, resolved.rel, dfd, name) from None
        except FileNotFoundError:
            raise self.missing(resolved.rel) from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise ToolError(f"{resolved.rel} is a directory; use list_dir")
            if not stat.S_ISREG(st.st_mode):
                raise ToolError(f"{resolved.rel} is not a regular file")
            self._verify_fd(fd)
            if _O_NONBLOCK:
                os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    @contextmanager
    def open_dir(self, resolved: WorkspacePath) -> Iterator[int]:
        try:
            with self._dir_fd(resolved.parts) as fd:
                yield fd
        except FileNotFoundError:
            raise self.missing(resolved.rel) from None
        except NotADirectoryError:
            raise ToolError(f"{resolved.rel} is not a directory; read_file reads a file") from None

    def write_atomic(self, resolved: WorkspacePath, data: bytes) -> None:
        """Write via a temp file in the same directory and rename over the target.

        The rename replaces a link planted at the target instead of writing through it.
        """
        if not resolved.parts:
            raise ToolError("cannot write to the workspace root itself")
        name = resolved.parts[-1]
        with self._dir_fd(resolved.parts[:-1], create=True) as dfd:
            try:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode):
                    raise ToolError(f"{resolved.rel} is a directory")
                mode = stat.S_IMODE(st.st_mode)
            except FileNotFoundError:
                mode = 0o644
            tmp = f".{name}.fusion-tmp-{os.getpid()}"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
            try:
                fd = os.open(tmp, flags, mode, dir_fd=dfd)
            except OSError as exc:
                raise ToolError(f"cannot write {resolved.rel}: {exc.strerror}") from None
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                try:
                    os.unlink(tmp, dir_fd=dfd)
                except OSError:
                    pass
                raise

    def remove(self, resolved: WorkspacePath) -> None:
        """Unlink a regular file, never following a link: the undo of a file the agent created."""
        if not resolved.parts:
            raise ToolError("cannot remove the workspace root")
        name = resolved.parts[-1]
        try:
            with self._dir_fd(resolved.parts[:-1]) as dfd:
                st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                if not stat.S_ISREG(st.st_mode):
                    raise ToolError(f"{resolved.rel} is not a regular file; left as it is")
                os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            raise self.missing(resolved.rel) from None
        except OSError as exc:
            raise ToolError(f"cannot remove {resolved.rel}: {exc.strerror or exc}") from None


def _swap_error(exc: OSError, what: str, dir_fd: int, name: str | None = None) -> ToolError:
    """Say whether the open failed on a link that appeared after the check, or on something else."""
    is_link = False
    try:
        is_link = stat.S_ISLNK(os.stat(name or what, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        pass
    if is_link or exc.errno in (errno.ELOOP, errno.EMLINK):
        return ToolError(
            f"{what}: a symbolic link appeared in the path after it was checked; refused"
        )
    if exc.errno == errno.ENOTDIR:
        return ToolError(f"{what}: a component of the path is not a directory")
    return ToolError(f"{what}: {exc.strerror or exc}")
