"""A host store of plain files in one directory, content-addressed and owner-only.

Every object is one file named ``<label>.<sha256 of the bytes>``: the label is the key
reduced to a few safe characters (for people listing the directory), the digest lets
``get`` verify the bytes and makes the name unique to the content. Files are written to a
temporary name, fsynced, renamed into place and the directory fsynced, so a reader (or a
crash) sees the whole file or none. Every access goes through a descriptor of the
directory opened once with ``O_NOFOLLOW``, and every file is opened relative to it with
``O_NOFOLLOW``: neither a symlinked store directory nor a symlink planted inside it is
followed.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import TracebackType

from .. import errors
from .protocol import validate_data, validate_key, validate_location

FILE_MODE = 0o600
DIR_MODE = 0o700
#: The longest label taken from a key.
MAX_LABEL_CHARS = 64
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO someone planted under a valid name must not hang the reader.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_TEMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")
#: A location: a label that cannot start with "." (temporary files do) or "-", then the
#: digest. Nothing else is ever opened, so no location can name a path outside the store.
_LOCATION = re.compile(r"([A-Za-z0-9_][A-Za-z0-9._-]{0,63})\.([0-9a-f]{64})")
_READ_SIZE = 1 << 20


class FileHostStore:
    """A :class:`~ckptdb.host_store.HostStore` keeping each put as a file in ``directory``.

    The directory is created (0700) when missing and ``create`` is true; it must not be a
    symlink. Files are created 0600 whatever the umask. An existing directory keeps its own
    permissions: give the store one that only its owner can enter.

    Locations are file names inside the directory (opaque to callers, parsed strictly
    here: any other string, such as ``../x`` or an absolute path, raises
    InvalidLocationError). ``get`` refuses a symlink or a non-regular file at the name
    (UnsafePathError), and raises LocationCorruptError when the bytes no longer hash to
    the digest in the name.

    Same bytes twice: the name depends only on the bytes and the label, so the same bytes
    under the same key (or keys with the same label) give the same location; an intact
    file is then kept as it is, a damaged one is rewritten from the new bytes. Different
    labels give different files. All are valid.

    Nothing is deleted by the store: removing a file (by the host) makes its location
    LocationNotFoundError. Thread-safe; processes may share a directory (every write is a
    rename of a complete file). Close the store (or use it as a context manager) to release
    the directory descriptor; ``close`` waits for puts and gets in progress.
    """

    def __init__(self, directory: str | os.PathLike[str], *, create: bool = True) -> None:
        if not isinstance(directory, str | os.PathLike):
            raise errors.InvalidInputError(
                f"directory must be a path, got {type(directory).__name__}"
            )
        self._path = os.path.abspath(os.fspath(directory))
        self._fd = _open_directory(self._path, create=bool(create))
        self._lock = threading.Condition()
        self._active = 0
        self._closed = False

    @property
    def directory(self) -> str:
        """The absolute path of the store's directory (as opened)."""
        return self._path

    def close(self) -> None:
        """Release the directory descriptor once the calls in progress return. Later calls
        raise ClosedError; closing twice is fine."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            while self._active:
                self._lock.wait()
            os.close(self._fd)

    def __enter__(self) -> FileHostStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def put(self, data: bytes, *, key: str) -> str:
        """Write ``data`` as a 0600 file and return its name. The file and its directory
        entry are fsynced before this returns."""
        key = validate_key(key)
        data = validate_data(data)
        name = f"{_label(key)}.{hashlib.sha256(data).hexdigest()}"
        with self._directory() as dir_fd:
            try:
                if not _intact(dir_fd, name):
                    _write(dir_fd, name, data)
                # Also after finding the file intact: the put that renamed it in may not
                # have fsynced the directory yet, and this put must not return before the
                # name is durable.
                os.fsync(dir_fd)
            except OSError as exc:
                raise _storage_error(exc, f"cannot write {name} in {self._path}") from exc
        return name

    def get(self, location: str) -> bytes:
        """The bytes of the file named ``location``, verified against the digest in its
        name."""
        name, digest = _parse(location)
        with self._directory() as dir_fd:
            try:
                data = _read(dir_fd, name)
            except FileNotFoundError as exc:
                raise errors.LocationNotFoundError(
                    f"nothing is stored at {name!r} in {self._path} (it was never put there, "
                    "or the file was removed)",
                    location=name,
                ) from exc
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise _symlink_error(name, self._path) from exc
                raise _storage_error(exc, f"cannot read {name} in {self._path}") from exc
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise errors.LocationCorruptError(
                f"{name} in {self._path} is damaged: its {len(data)} bytes hash to "
                f"{actual[:12]}, not to the digest in its name; no bytes were returned",
                location=name,
                expected=digest,
                actual=actual,
            )
        return data

    @contextmanager
    def _directory(self) -> Iterator[int]:
        """The directory descriptor, held open (close waits) while the caller uses it."""
        with self._lock:
            if self._closed:
                raise errors.ClosedError(f"the FileHostStore of {self._path} was closed")
            self._active += 1
        try:
            yield self._fd
        finally:
            with self._lock:
                self._active -= 1
                self._lock.notify_all()


def _open_directory(path: str, *, create: bool) -> int:
    created = False
    if create:
        try:
            os.mkdir(path, DIR_MODE)
            created = True
        except FileExistsError:
            pass  # an existing directory (or whatever is there) is checked by the open below
        except OSError as exc:
            raise _storage_error(exc, f"cannot create the store directory {path}") from exc
    try:
        fd = os.open(path, _DIR_FLAGS)
    except FileNotFoundError as exc:
        raise errors.InvalidInputError(
            f"the store directory {path} does not exist; create it or pass create=True",
            path=path,
        ) from exc
    except OSError as exc:
        # O_DIRECTORY|O_NOFOLLOW on a symlink fails with ELOOP (or ENOTDIR): look at it.
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            if os.path.islink(path):
                raise errors.UnsafePathError(
                    f"the store directory {path} is a symlink; give the real directory",
                    path=path,
                ) from exc
            raise errors.UnsafePathError(
                f"the store directory {path} is not a directory", path=path
            ) from exc
        raise _storage_error(exc, f"cannot open the store directory {path}") from exc
    if created:
        try:
            # mkdir's mode is filtered by the umask; the store's directory is 0700 whatever
            # it is.
            os.fchmod(fd, DIR_MODE)
        except OSError as exc:
            os.close(fd)
            raise _storage_error(exc, f"cannot set the mode of {path}") from exc
    return fd


def _label(key: str) -> str:
    """The key reduced to safe file name characters, for people listing the directory."""
    label = _LABEL_UNSAFE.sub("_", key[:MAX_LABEL_CHARS])
    if label[0] in ".-":
        # A leading "." would hide the file (and is how temporary files start); a leading
        # "-" reads as an option to shell tools.
        label = "_" + label[1:]
    return label


def _parse(location: object) -> tuple[str, str]:
    text = validate_location(location)
    match = _LOCATION.fullmatch(text)
    if match is None:
        raise errors.InvalidLocationError(
            f"{text[:200]!r} is not a location of a FileHostStore; pass only the strings "
            "its put() returned",
            location=text[:200],
        )
    return text, match.group(2)


def _read(dir_fd: int, name: str, *, sync: bool = False) -> bytes:
    """All bytes of the regular file ``name`` (fsynced first when ``sync``); UnsafePathError
    for anything else there. OSError (FileNotFoundError, ELOOP for a symlink) is the
    caller's to translate."""
    fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise errors.UnsafePathError(
                f"{name} in the store is not a regular file; it was not read", location=name
            )
        if sync:
            os.fsync(fd)
        pieces = []
        while piece := os.read(fd, _READ_SIZE):
            pieces.append(piece)
        return b"".join(pieces)
    finally:
        os.close(fd)


def _intact(dir_fd: int, name: str) -> bool:
    """True when ``name`` already holds bytes matching its digest (fsynced, so they are
    durable whoever wrote them). False when it is missing or damaged (to be rewritten);
    UnsafePathError when a symlink or a non-regular file sits there."""
    try:
        data = _read(dir_fd, name, sync=True)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink_error(name, "the store") from exc
        raise
    return hashlib.sha256(data).hexdigest() == name.rpartition(".")[2]


def _write(dir_fd: int, name: str, data: bytes) -> None:
    """Write ``data`` to a fresh temporary file, fsync it and rename it to ``name`` (the
    caller fsyncs the directory)."""
    temp = f".tmp-{secrets.token_hex(8)}"
    fd = os.open(temp, _TEMP_FLAGS, FILE_MODE, dir_fd=dir_fd)
    try:
        try:
            # The mode given to open is filtered by the umask; the file is 0600 whatever
            # it is.
            os.fchmod(fd, FILE_MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as exc:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass  # already gone: nothing is left behind
        except OSError as cleanup:
            exc.add_note(f"the temporary file {temp} could not be removed: {cleanup}")
        raise


def _symlink_error(name: str, where: str) -> errors.UnsafePathError:
    return errors.UnsafePathError(
        f"{name} in {where} is a symlink; the store never follows one (remove it)",
        location=name,
    )


def _storage_error(exc: OSError, what: str) -> errors.StorageError:
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return errors.DiskFullError(f"{what}: {exc.strerror}; free space, then put again")
    return errors.StorageError(f"{what}: {exc.strerror or exc}")
