"""Turning files and directories on disk into commit entries."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from . import errors, validation


def entries_from_paths(
    paths: Iterable[str | os.PathLike[str]], *, database: str | os.PathLike[str] | None = None
) -> dict[str, Path]:
    """Map entry names to files: a file is named by its base name, a directory contributes
    every regular file beneath it named by its path relative to that directory.

    Symlinks are refused, not followed (whether given directly or found while walking), as
    are special files; two paths that produce the same entry name are refused too. The
    files are not read here: ``Database.commit`` streams them.

    ``database``: the file being committed into. A directory walk skips it and its
    ``-wal``/``-shm``/``-journal`` companions (committing ``.`` where the database lives
    must not read the log it is appending to); naming one of them directly is refused.
    """
    out: dict[str, Path] = {}
    own = _identities(database)

    def add(name: str, path: Path) -> None:
        validation.entry_name(name)
        if name in out:
            raise errors.InvalidEntryError(
                f"two paths give the entry name {name!r} ({out[name]} and {path}); commit them "
                "separately or rename one"
            )
        out[name] = path

    for given in paths:
        path = Path(given)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            raise errors.InvalidEntryError(f"{path} does not exist") from None
        except OSError as exc:  # a name too long, a file in the parent chain, no permission
            raise errors.InvalidEntryError(f"cannot read {path}: {exc.strerror}") from exc
        if stat.S_ISLNK(st.st_mode):
            raise errors.InvalidEntryError(
                f"{path} is a symlink; ckptdb does not follow symlinks (give the target path)"
            )
        if stat.S_ISREG(st.st_mode):
            if (st.st_dev, st.st_ino) in own:
                raise errors.InvalidEntryError(
                    f"{path} is the database being committed into (or one of its files); "
                    "a database cannot hold itself"
                )
            add(path.name, path)
            continue
        if not stat.S_ISDIR(st.st_mode):
            raise errors.InvalidEntryError(f"{path} is not a regular file or directory")
        for root, dirs, files in os.walk(path, followlinks=False):
            dirs.sort()
            for name in sorted(dirs + files):
                full = Path(root) / name
                try:
                    st = os.lstat(full)
                except OSError as exc:  # removed or made unreadable during the walk
                    raise errors.InvalidEntryError(f"cannot read {full}: {exc.strerror}") from exc
                if stat.S_ISLNK(st.st_mode):
                    raise errors.InvalidEntryError(
                        f"{full} is a symlink; ckptdb does not follow symlinks. Remove it or "
                        "replace it with the file it points to."
                    )
                if stat.S_ISDIR(st.st_mode):
                    continue
                if not stat.S_ISREG(st.st_mode):
                    raise errors.InvalidEntryError(f"{full} is not a regular file")
                if (st.st_dev, st.st_ino) in own:
                    continue
                add(str(PurePosixPath(*full.relative_to(path).parts)), full)
    validation.entry_names_consistent(out)
    return out


def _identities(database: str | os.PathLike[str] | None) -> set[tuple[int, int]]:
    """(device, inode) of a database file and of whichever companions it has now."""
    if database is None:
        return set()
    base = os.fspath(database)
    found = set()
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            st = os.stat(base + suffix)
        except OSError:
            continue  # absent (or unreadable): nothing to skip
        found.add((st.st_dev, st.st_ino))
    return found
