"""Deciding whether a path may be opened as a ckptdb database, before SQLite writes to it.

A file handed to ``ckptdb.open`` may be anything: a new path, an empty file left by a crash
during creation, another application's SQLite database, a truncated copy, or not a
database at all. This module reads the 100-byte SQLite header with plain ``os`` calls and
refuses everything that is not ours without modifying a byte. Only a missing or empty
file is created/initialized.
"""

from __future__ import annotations

import enum
import os
import stat
import struct
from dataclasses import dataclass

from . import errors

SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_SIZE = 100
PRIVATE_FILE_MODE = 0o600


class FileKind(enum.Enum):
    """What :func:`inspect_path` found at a path."""

    MISSING = "missing"
    EMPTY = "empty"
    SQLITE = "sqlite"


@dataclass(frozen=True)
class HeaderFacts:
    """Fields of the SQLite file header that matter before opening the file."""

    page_size: int
    page_count: int | None
    application_id: int
    user_version: int
    #: Whether the header marks the file as in WAL mode (read and write versions 2).
    wal: bool = False


def inspect_path(path: str) -> tuple[FileKind, HeaderFacts | None]:
    """Classify ``path`` without opening it through SQLite.

    Raises a :class:`~ckptdb.errors.DatabaseFileError` subclass for anything that must not
    be opened: a directory or special file, a non-SQLite file, a truncated file.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return FileKind.MISSING, None
    except OSError as exc:
        raise errors.DatabaseFileError(f"cannot inspect {path}: {exc}") from exc
    if not stat.S_ISREG(st.st_mode):
        raise errors.DatabaseFileError(
            f"{path} is not a regular file; give the path of a ckptdb database file"
        )
    if st.st_size == 0:
        return FileKind.EMPTY, None
    try:
        with open(path, "rb") as fh:
            header = fh.read(HEADER_SIZE)
    except OSError as exc:
        raise errors.DatabaseFileError(f"cannot read {path}: {exc}") from exc
    if len(header) < HEADER_SIZE or not header.startswith(SQLITE_MAGIC):
        if SQLITE_MAGIC.startswith(header[: len(SQLITE_MAGIC)]) and len(header) < HEADER_SIZE:
            raise errors.TruncatedDatabaseError(
                f"{path} is truncated ({st.st_size} bytes, shorter than an SQLite header); "
                "restore it from a backup or an export"
            )
        raise errors.NotADatabaseError(
            f"{path} is not an SQLite database (its first bytes are not the SQLite header); "
            "it was not modified. Check the path, or choose a new file name to create a "
            "database."
        )
    facts = _parse_header(header)
    wal = path + "-wal"
    if os.path.exists(wal) and os.path.getsize(wal) > 0:
        # A crash during a WAL checkpoint can leave the main file shorter than its header
        # says (page 1 is copied before the pages after it); the WAL still holds every
        # page and SQLite's recovery finishes the checkpoint. Only without a WAL is the
        # main file alone the whole database, and a short file truly truncated.
        return FileKind.SQLITE, facts
    if facts.page_count is not None:
        expected = facts.page_count * facts.page_size
        if st.st_size < expected:
            raise errors.TruncatedDatabaseError(
                f"{path} is truncated: its header describes {facts.page_count} pages of "
                f"{facts.page_size} bytes ({expected} bytes) but the file holds "
                f"{st.st_size} bytes. It was not modified; restore it from a backup or export."
            )
    if st.st_size % facts.page_size:
        raise errors.TruncatedDatabaseError(
            f"{path} is damaged: its size ({st.st_size}) is not a multiple of its page size "
            f"({facts.page_size}). It was not modified; restore it from a backup or export."
        )
    return FileKind.SQLITE, facts


def _parse_header(header: bytes) -> HeaderFacts:
    (raw_page_size,) = struct.unpack(">H", header[16:18])
    page_size = 65536 if raw_page_size == 1 else raw_page_size
    if page_size < 512 or page_size & (page_size - 1):
        raise errors.NotADatabaseError(
            f"the SQLite header names an impossible page size ({raw_page_size}); "
            "the file is not a usable SQLite database"
        )
    (change_counter,) = struct.unpack(">I", header[24:28])
    (page_count,) = struct.unpack(">I", header[28:32])
    (valid_for,) = struct.unpack(">I", header[92:96])
    (user_version,) = struct.unpack(">i", header[60:64])
    (application_id,) = struct.unpack(">i", header[68:72])
    usable_count = page_count if page_count and change_counter == valid_for else None
    return HeaderFacts(
        page_size=page_size,
        page_count=usable_count,
        application_id=application_id & 0xFFFFFFFF,
        user_version=user_version,
        wal=header[18] == 2 and header[19] == 2,
    )


def create_private_file(path: str) -> None:
    """Create an empty file readable and writable by its owner only, whatever the umask.

    SQLite gives the -wal and -shm files the database file's permissions, so creating the
    database file 0600 makes all three owner-only.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, PRIVATE_FILE_MODE)
    except FileExistsError:
        return  # another process created it first; the caller re-inspects it
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise errors.DatabaseFileError(
            f"cannot create {path}: its directory {os.path.dirname(os.path.abspath(path))} "
            "does not exist (or is not a directory); create it first"
        ) from exc
    except PermissionError as exc:
        raise errors.DatabaseFileError(
            f"cannot create {path}: permission denied; choose a directory you can write to"
        ) from exc
    except OSError as exc:
        raise errors.StorageError(f"cannot create {path}: {exc}") from exc
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_directory(os.path.dirname(os.path.abspath(path)))


def fsync_directory(directory: str) -> None:
    """Make a directory entry durable (a created or renamed file survives power loss)."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
