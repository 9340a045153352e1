"""Reading an import source directory without ever following a symlink inside it.

A source tree is not ckptdb's: any directory in it may be (or become, while an import runs)
a symlink to somewhere else. :class:`SourceTree` opens the root once with
``O_DIRECTORY|O_NOFOLLOW`` and reaches everything below it one path component at a time,
each opened relative to its parent's descriptor with ``O_NOFOLLOW`` (``O_DIRECTORY`` for
directories). A symlink anywhere -- not only at the end -- is refused; nothing is checked
with ``lstat`` and then opened by name. Files are opened ``O_NONBLOCK`` (a FIFO cannot
block the import) and must be regular files (checked on the open descriptor).

Relative paths use the entry-name rule of ckptdb (no '..', not absolute, no control
characters); everything fails with :class:`~ckptdb.errors.SourceError`.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from .. import errors, validation

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class SourceTree:
    """A source directory held open by descriptor (close it, or use it with ``with``)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(root))
        try:
            self._fd = os.open(self.root, _DIR_FLAGS)
        except OSError as exc:
            raise self._error(exc, "") from exc

    def close(self) -> None:
        """Release the root descriptor (idempotent)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> SourceTree:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- paths ------------------------------------------------------------------------

    def where(self, relative: str) -> str:
        """The path of ``relative`` for messages (never used to open anything)."""
        return f"{self.root}/{relative}" if relative else self.root

    def _error(self, exc: OSError, relative: str) -> errors.SourceError:
        where = self.where(relative)
        if exc.errno == errno.ENOENT:
            return errors.SourceError(f"{where} does not exist")
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return errors.SourceError(
                f"{where} is a symlink or not a directory where one is needed (importers "
                "never follow symlinks, at any depth of the source)"
            )
        return errors.SourceError(f"cannot read {where}: {exc.strerror or exc}")

    def _parts(self, relative: str) -> list[str]:
        if relative in ("", "."):
            return []
        try:
            validation.entry_name(relative)
        except errors.InvalidNameError as exc:
            raise errors.SourceError(f"unsafe path {relative!r} in the source: {exc}") from exc
        return relative.split("/")

    @contextmanager
    def _parent(self, relative: str) -> Iterator[tuple[int, str]]:
        """(descriptor of the directory holding the last component, that component);
        ``("", root)`` style for the root itself is not allowed here."""
        parts = self._parts(relative)
        if not parts:
            raise errors.SourceError("internal: a file path inside the source is needed")
        fd = self._fd
        opened: list[int] = []
        walked = ""
        try:
            for part in parts[:-1]:
                walked = f"{walked}/{part}" if walked else part
                try:
                    fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise self._error(exc, walked) from exc
                opened.append(fd)
            yield fd, parts[-1]
        finally:
            for o in opened:
                os.close(o)

    @contextmanager
    def directory(self, relative: str = "") -> Iterator[int]:
        """A descriptor of a directory inside the source (the root for "")."""
        if not self._parts(relative):
            yield self._fd
            return
        with self._parent(relative) as (parent, leaf):
            try:
                fd = os.open(leaf, _DIR_FLAGS, dir_fd=parent)
            except OSError as exc:
                raise self._error(exc, relative) from exc
        try:
            yield fd
        finally:
            os.close(fd)

    # -- reading ----------------------------------------------------------------------

    def listdir(self, relative: str = "") -> list[str]:
        """Names in a directory of the source, sorted."""
        with self.directory(relative) as fd:
            try:
                return sorted(os.listdir(fd))
            except OSError as exc:
                raise self._error(exc, relative) from exc

    def lstat(self, relative: str) -> os.stat_result:
        """The entry itself (a symlink is reported as one, never followed)."""
        with self._parent(relative) as (parent, leaf):
            try:
                return os.stat(leaf, dir_fd=parent, follow_symlinks=False)
            except OSError as exc:
                raise self._error(exc, relative) from exc

    def is_dir(self, relative: str) -> bool:
        """True for a real directory (not a symlink to one); False for anything else."""
        try:
            return stat.S_ISDIR(self.lstat(relative).st_mode)
        except errors.SourceError:
            return False

    def open_file(self, relative: str) -> IO[bytes]:
        """A regular file of the source, opened without following any symlink."""
        with self._parent(relative) as (parent, leaf):
            try:
                fd = os.open(leaf, _FILE_FLAGS, dir_fd=parent)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise errors.SourceError(
                        f"{self.where(relative)} is a symlink; importers never follow symlinks"
                    ) from exc
                raise self._error(exc, relative) from exc
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise errors.SourceError(f"{self.where(relative)} is not a regular file")
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def read(self, relative: str, limit: int) -> bytes:
        """The bytes of a regular file, refusing more than ``limit``."""
        with self.open_file(relative) as fh:
            try:
                data = fh.read(limit + 1)
            except OSError as exc:
                raise self._error(exc, relative) from exc
        if len(data) > limit:
            raise errors.SourceError(f"{self.where(relative)} is larger than {limit} bytes")
        return data

    def sha256(self, relative: str) -> tuple[str, int]:
        """(sha256 hex, size) of a regular file, streamed."""
        h = hashlib.sha256()
        size = 0
        with self.open_file(relative) as fh:
            while piece := fh.read(4 * 1024 * 1024):
                h.update(piece)
                size += len(piece)
        return h.hexdigest(), size


def describe(value: Any) -> str:
    """A short printable form of a source value for a skip reason."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
