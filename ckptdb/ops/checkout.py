"""Materializing a checkpoint into a directory, safely.

The entries are written into a fresh temporary sibling directory (0700, so nobody else can
plant anything in it), each file created with O_EXCL|O_NOFOLLOW at 0600 relative to its
directory's descriptor, every file and directory fsynced, and only then is the temporary
directory renamed into place -- with an atomic exchange when an existing directory is
replaced. Names are re-validated first, so a crafted database with '..' or absolute names
is refused before anything is written; nothing ever follows a symlink or leaves the target.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import secrets
import shutil
import stat
from collections.abc import Callable

from .. import errors, models, validation
from ..files import fsync_directory
from .checkpoint import Checkpoint

Progress = Callable[[int, int], None]
FILE_MODE = 0o600
DIR_MODE = 0o700
_RENAME_EXCHANGE = 2


def _refuse_unsafe_parents(target: str) -> None:
    """Refuse a target whose parent chain is missing, or holds a symlink or a non-directory."""
    parent = os.path.dirname(target)
    probe = "/"
    for part in parent.split("/"):
        if not part:
            continue
        probe = os.path.join(probe, part)
        try:
            st = os.lstat(probe)
        except FileNotFoundError:
            raise errors.UnsafePathError(
                f"the parent directory {parent} does not exist; create it first"
            ) from None
        except OSError as exc:
            raise errors.UnsafePathError(
                f"cannot check {probe} in the path of {target}: {exc.strerror}"
            ) from exc
        if stat.S_ISLNK(st.st_mode):
            raise errors.UnsafePathError(
                f"{probe} is a symlink in the path of {target}; ckptdb never writes through "
                f"symlinks. Pass the resolved path ({os.path.realpath(target)}) if you mean it."
            )
        if not stat.S_ISDIR(st.st_mode):
            raise errors.UnsafePathError(
                f"{probe} is not a directory, so {target} cannot be created under it"
            )


def _exchange(a: str, b: str) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE). False if unsupported."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name, use_errno=True)
    renameat2 = getattr(libc, "renameat2", None)
    if renameat2 is None:
        return False
    at_fdcwd = -100
    result = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if result == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL):
        return False
    raise OSError(err, os.strerror(err), a)


def _write_tree(cp: Checkpoint, root_fd: int, progress: Progress | None) -> tuple[int, int]:
    names = list(cp.entries)
    total = len(names)
    written_bytes = 0
    dir_fds: dict[str, int] = {"": root_fd}
    try:
        for index, name in enumerate(names, start=1):
            parent = ""
            parts = name.split("/")
            for part in parts[:-1]:
                here = f"{parent}/{part}" if parent else part
                if here not in dir_fds:
                    os.mkdir(part, DIR_MODE, dir_fd=dir_fds[parent])
                    fd = os.open(
                        part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fds[parent]
                    )
                    os.fchmod(fd, DIR_MODE)
                    dir_fds[here] = fd
                parent = here
            fd = os.open(
                parts[-1],
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                FILE_MODE,
                dir_fd=dir_fds[parent],
            )
            try:
                os.fchmod(fd, FILE_MODE)
                for piece in cp.iter_bytes(name):
                    view = memoryview(piece)
                    while view:
                        done = os.write(fd, view)
                        view = view[done:]
                    written_bytes += len(piece)
                os.fsync(fd)
            finally:
                os.close(fd)
            if progress is not None:
                progress(index, total)
        for fd in dir_fds.values():
            os.fsync(fd)
    finally:
        for key, fd in dir_fds.items():
            if key:
                os.close(fd)
    return total, written_bytes


def checkout(
    cp: Checkpoint,
    target: str | os.PathLike[str],
    *,
    force: bool = False,
    progress: Progress | None = None,
) -> models.CheckoutResult:
    """Write every entry of ``cp`` under ``target`` (see the module docstring).

    ``target`` must not exist or be an empty directory, unless ``force`` is given: then an
    existing directory is replaced atomically (its old content is removed afterwards).
    """
    for name in cp.entries:
        validation.entry_name(name)  # a crafted database must not steer writes
    validation.entry_names_consistent(cp.entries)
    path = os.path.abspath(os.fspath(target))
    _refuse_unsafe_parents(path)
    existing: os.stat_result | None
    try:
        existing = os.lstat(path)
        occupied = existing is not None and stat.S_ISDIR(existing.st_mode) and os.listdir(path)
    except FileNotFoundError:
        existing, occupied = None, False
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise errors.UnsafePathError(f"cannot use {path} as a target: {exc.strerror}") from exc
    if existing is not None:
        if stat.S_ISLNK(existing.st_mode) or not stat.S_ISDIR(existing.st_mode):
            raise errors.UnsafePathError(
                f"{path} exists and is not a directory (or is a symlink); refusing to replace it"
            )
        if occupied and not force:
            raise errors.UnsafePathError(
                f"{path} is not empty; choose an empty or new directory, or pass force=True "
                "(--force) to replace it atomically"
            )
    parent = os.path.dirname(path)
    # A short name of its own (not derived from the target's), so a long target name that
    # fits the file system cannot make the staging name too long.
    staging = os.path.join(parent, f".ckptdb-checkout-{secrets.token_hex(6)}")
    try:
        os.mkdir(staging, DIR_MODE)
    except OSError as exc:
        raise errors.StorageError(
            f"checkout into {path} failed: cannot create a staging directory in {parent}: "
            f"{exc.strerror}; nothing was written"
        ) from exc
    try:
        root_fd = os.open(staging, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            os.fchmod(root_fd, DIR_MODE)
            files, size = _write_tree(cp, root_fd, progress)
        finally:
            os.close(root_fd)
        if existing is None:
            os.rename(staging, path)
            staging = ""
        elif _exchange(staging, path):
            shutil.rmtree(staging)  # now holds the old content
            staging = ""
        else:
            old = staging + ".old"
            os.rename(path, old)
            os.rename(staging, path)
            staging = ""
            shutil.rmtree(old)
        fsync_directory(parent)
    except OSError as exc:
        raise errors.StorageError(
            f"checkout into {path} failed: {exc}; nothing was replaced"
        ) from exc
    finally:
        if staging:
            shutil.rmtree(staging, ignore_errors=True)
    return models.CheckoutResult(
        checkpoint_id=cp.id, namespace=cp.namespace, target=path, files=files, bytes=size
    )
