"""Materializing a checkpoint into a directory, safely -- through directory descriptors.

A racing process may swap any component of the target's path for a symlink at any moment,
so no path is ever resolved twice. The target's parent chain is opened one component at a
time from ``/`` with ``O_DIRECTORY|O_NOFOLLOW`` (a symlink or a non-directory anywhere in
it is refused), and everything after that happens relative to the held descriptor of the
parent: a fresh staging directory (0700) is created with ``mkdir(dir_fd=...)``, each file
with ``O_CREAT|O_EXCL|O_NOFOLLOW`` at 0600 relative to its directory's descriptor, every
file and directory is fsynced, and only then is the staging directory renamed into place
within the held parent -- ``RENAME_NOREPLACE`` for a new target, an atomic
``RENAME_EXCHANGE`` when an existing directory is replaced. A component swapped after it
was opened redirects nothing: the writes land in the directory that was opened. Names are
re-validated first, so a crafted database with '..' or absolute names is refused before
anything is written.

Every failure is a :class:`~ckptdb.errors.CkptdbError`: ``UnsafePathError`` when the path
is (or became) unusable, ``StorageError`` for an I/O failure while writing. Messages name
the path as given (made absolute lexically); nothing resolves it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from typing import Any

from .. import errors, models, validation
from ..types import Progress
from .checkpoint import Checkpoint

FILE_MODE = 0o600
DIR_MODE = 0o700
_RENAME_NOREPLACE = 1
_RENAME_EXCHANGE = 2
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class _Unsupported(Exception):
    """renameat2 is not available (old kernel or libc, or a file system without it)."""


@functools.cache
def _renameat2_fn() -> Any:
    libc_name = ctypes.util.find_library("c")  # slow (runs ldconfig): looked up once
    if libc_name is None:
        return None
    return getattr(ctypes.CDLL(libc_name, use_errno=True), "renameat2", None)


def _renameat2(dir_fd: int, old: str, new: str, flags: int) -> None:
    """renameat2(dir_fd, old, dir_fd, new, flags); _Unsupported when unavailable."""
    fn = _renameat2_fn()
    if fn is None:
        raise _Unsupported
    result = fn(dir_fd, os.fsencode(old), dir_fd, os.fsencode(new), flags)
    if result == 0:
        return
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL):
        raise _Unsupported
    raise OSError(err, os.strerror(err), new)


def _open_parent_chain(parent: str, target: str) -> int:
    """A descriptor of ``parent`` (absolute, lexically normal), opened one component at a
    time from ``/`` without following any symlink. The caller closes it."""
    fd = os.open("/", _DIR_FLAGS)
    walked = ""
    try:
        for part in parent.split("/"):
            if not part:
                continue
            walked += "/" + part
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                raise errors.UnsafePathError(
                    f"the parent directory {parent} does not exist ({walked} is missing); "
                    "create it first"
                ) from None
            except OSError as exc:
                raise _chain_error(exc, fd, part, walked, target) from exc
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _chain_error(exc: OSError, dir_fd: int, part: str, walked: str, target: str) -> Exception:
    # O_DIRECTORY|O_NOFOLLOW on a symlink fails with ENOTDIR (or ELOOP): look at the entry
    # (without following it) only to say which it was; nothing is opened through it.
    is_link = exc.errno == errno.ELOOP
    with contextlib.suppress(OSError):
        is_link = stat.S_ISLNK(os.stat(part, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    if is_link:
        return errors.UnsafePathError(
            f"{walked} is a symlink in the path of {target}; ckptdb never writes through "
            "symlinks. Give a path without symlinks (the directory the link points to) if "
            "that is what you mean."
        )
    if exc.errno == errno.ENOTDIR:
        return errors.UnsafePathError(
            f"{walked} is not a directory, so {target} cannot be created under it"
        )
    return errors.UnsafePathError(f"cannot open {walked} in the path of {target}: {exc.strerror}")


def _fsync_fd(fd: int) -> None:
    os.fsync(fd)


def _remove_entry(parent_fd: int, name: str) -> None:
    """Remove ``name`` under ``parent_fd`` without following symlinks: a directory tree
    with shutil's descriptor-based rmtree, anything else with unlink."""
    try:
        st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(name, dir_fd=parent_fd)
    else:
        os.unlink(name, dir_fd=parent_fd)


@contextlib.contextmanager
def _dir_fds(root_fd: int) -> Iterator[dict[str, int]]:
    fds: dict[str, int] = {"": root_fd}
    try:
        yield fds
    finally:
        for key, fd in fds.items():
            if key:
                os.close(fd)


def _write_tree(cp: Checkpoint, root_fd: int, progress: Progress | None) -> tuple[int, int]:
    names = list(cp.entries)
    total = len(names)
    total_bytes = cp.total_size
    written_bytes = 0
    with _dir_fds(root_fd) as dir_fds:
        for name in names:
            parent = ""
            parts = name.split("/")
            for part in parts[:-1]:
                here = f"{parent}/{part}" if parent else part
                if here not in dir_fds:
                    os.mkdir(part, DIR_MODE, dir_fd=dir_fds[parent])
                    fd = os.open(part, _DIR_FLAGS, dir_fd=dir_fds[parent])
                    dir_fds[here] = fd
                    os.fchmod(fd, DIR_MODE)
                parent = here
            fd = os.open(parts[-1], _FILE_FLAGS, FILE_MODE, dir_fd=dir_fds[parent])
            try:
                os.fchmod(fd, FILE_MODE)
                for piece in cp.iter_bytes(name):
                    view = memoryview(piece)
                    while view:
                        done = os.write(fd, view)
                        view = view[done:]
                    written_bytes += len(piece)
                    if progress is not None:  # by bytes: a large entry moves the bar too
                        progress(min(written_bytes, total_bytes), total_bytes)
                _fsync_fd(fd)
            finally:
                os.close(fd)
        for fd in dir_fds.values():
            _fsync_fd(fd)
    return total, written_bytes


def _inspect_target(parent_fd: int, leaf: str, path: str, force: bool) -> bool:
    """Whether a directory exists at the target (to be replaced); refuses what must not be
    replaced. Reads through ``parent_fd`` only."""
    try:
        st = os.stat(leaf, dir_fd=parent_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except OSError as exc:  # e.g. a name longer than the file system allows
        raise errors.UnsafePathError(f"cannot use {path} as a target: {exc.strerror}") from exc
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
        raise errors.UnsafePathError(
            f"{path} exists and is not a directory (or is a symlink); refusing to replace it"
        )
    try:
        fd = os.open(leaf, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:  # swapped for a symlink meanwhile, or unreadable
        raise errors.UnsafePathError(
            f"{path} changed while it was being checked, or cannot be read "
            f"({exc.strerror}); nothing was written"
        ) from exc
    try:
        occupied = bool(os.listdir(fd))
    finally:
        os.close(fd)
    if occupied and not force:
        raise errors.UnsafePathError(
            f"{path} is not empty; choose an empty or new directory, or ask for it to be "
            "replaced atomically (force)"
        )
    return True


def _place(parent_fd: int, staging: str, leaf: str, path: str, replace: bool) -> str | None:
    """Rename the staging directory to ``leaf`` within ``parent_fd``; returns the name (in
    ``parent_fd``) of what was replaced and is left to remove, if anything."""
    if not replace:
        try:
            _renameat2(parent_fd, staging, leaf, _RENAME_NOREPLACE)
        except _Unsupported:
            # rename(2) of a directory replaces only an empty directory and fails on
            # anything else (ENOTDIR / ENOTEMPTY / EISDIR): nothing is ever overwritten.
            os.rename(staging, leaf, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        except FileExistsError:
            raise errors.UnsafePathError(
                f"{path} appeared while the checkout was being written (another process "
                "created it); nothing was replaced. Choose a new directory or pass --force."
            ) from None
        return None
    try:
        _renameat2(parent_fd, staging, leaf, _RENAME_EXCHANGE)
    except _Unsupported:
        old = staging + ".old"
        os.rename(leaf, old, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        os.rename(staging, leaf, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        return old
    except FileNotFoundError:
        raise errors.UnsafePathError(
            f"{path} disappeared while the checkout was being written (another process "
            "removed it); nothing was replaced. Retry the checkout."
        ) from None
    # The staging name now holds whatever was at the target (normally the old tree; a
    # symlink if one was swapped in): the caller removes it without following anything.
    return staging


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
    parent, leaf = os.path.split(path)
    if not leaf:
        raise errors.UnsafePathError(f"{path} cannot be a checkout target (it is the root)")
    parent_fd = _open_parent_chain(parent, path)
    try:
        return _checkout_in(cp, parent_fd, parent, leaf, path, force, progress)
    finally:
        os.close(parent_fd)


def _checkout_in(
    cp: Checkpoint,
    parent_fd: int,
    parent: str,
    leaf: str,
    path: str,
    force: bool,
    progress: Progress | None,
) -> models.CheckoutResult:
    replace = _inspect_target(parent_fd, leaf, path, force)
    # A short name of its own (not derived from the target's), so a long target name that
    # fits the file system cannot make the staging name too long.
    staging = f".ckptdb-checkout-{secrets.token_hex(6)}"
    try:
        os.mkdir(staging, DIR_MODE, dir_fd=parent_fd)
    except OSError as exc:
        raise errors.StorageError(
            f"checkout into {path} failed: cannot create a staging directory in {parent}: "
            f"{exc.strerror}; nothing was written"
        ) from exc
    placed = False
    try:
        root_fd = os.open(staging, _DIR_FLAGS, dir_fd=parent_fd)
        try:
            os.fchmod(root_fd, DIR_MODE)
            files, size = _write_tree(cp, root_fd, progress)
        finally:
            os.close(root_fd)
        leftover = _place(parent_fd, staging, leaf, path, replace)
        placed = True
        if leftover is not None:
            _remove_entry(parent_fd, leftover)
        _fsync_fd(parent_fd)
    except OSError as exc:
        state = (
            "the new content is in place, but the old content or its removal may be left "
            "in a hidden .ckptdb-checkout-* directory beside it"
            if placed
            else "nothing was replaced"
        )
        raise errors.StorageError(
            f"checkout into {path} failed: {exc.strerror or exc}; {state}"
        ) from exc
    finally:
        if not placed:
            with contextlib.suppress(OSError):
                _remove_entry(parent_fd, staging)
    return models.CheckoutResult(
        checkpoint_id=cp.id, namespace=cp.namespace, target=path, files=files, bytes=size
    )
