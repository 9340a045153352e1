"""Host keys from a file or an environment variable (the CLI's way to get them).

The format is one JSON object mapping key ids to 32-byte keys, each written as 64 hex
digits or as standard base64::

    {"tenant-a": "3f1c...64 hex digits...", "tenant-b": "q83vEjRWeJA...="}

Keys never come from the command line (they would show in ``ps`` and shell history), and no
error message here ever contains a key or a line of the file: only key ids, paths and
variable names. A key file must be readable by its owner only (``chmod 600``).
"""

from __future__ import annotations

import base64
import binascii
import errno
import json
import os
import stat

from . import errors, keyids

KEY_BYTES = 32
MAX_FILE_BYTES = 1024 * 1024


def parse_keys(text: str, source: str) -> dict[str, bytes]:
    """The keys in ``text`` (the JSON format above); ``source`` names it in errors."""
    try:
        document = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: hostile nesting, not a key file
        raise errors.InvalidKeyError(
            f"{source} is not a JSON object of key id -> key (its content is not shown)"
        ) from None
    if not isinstance(document, dict) or not document:
        raise errors.InvalidKeyError(
            f"{source} must hold a non-empty JSON object mapping key ids to keys"
        )
    keys: dict[str, bytes] = {}
    for key_id, value in document.items():
        if not isinstance(value, str):
            raise errors.InvalidKeyError(
                f"{source}: the key of key id {keyids.shown(key_id)} must be a string of 64 "
                "hex digits or base64"
            )
        keys[key_id] = _decode(value.strip(), key_id, source)
    return keys


def _decode(text: str, key_id: str, source: str) -> bytes:
    raw: bytes | None = None
    if len(text) == 2 * KEY_BYTES:
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raw = None
    if raw is None:
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raw = None
    if raw is None or len(raw) != KEY_BYTES:
        swapped = (
            " (the key id is shaped like a key: are key ids and keys swapped? The format is "
            "{key_id: key})"
            if keyids.looks_like_key(key_id)
            else ""
        )
        raise errors.InvalidKeyError(
            f"{source}: the key of key id {keyids.shown(key_id)} is not {KEY_BYTES} bytes "
            "written as 64 hex digits or base64 (generate one with: "
            f"python -c 'import os; print(os.urandom(32).hex())'){swapped}"
        )
    return raw


def read_key_file(path: str) -> dict[str, bytes]:
    """The keys of a key file, refusing at once anything but a regular file readable by its
    owner alone: a symlink, a FIFO (whose open would wait for a writer forever), a socket, a
    device or a directory."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (and a device must not wait
        # for carrier); O_NOCTTY: a terminal never becomes ours. Whether it is a regular
        # file is then decided on the opened descriptor itself (fstat), so nothing can be
        # swapped in between a check and the open.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as exc:
        raise errors.InvalidKeyError(
            f"cannot open key file {path!r}: {exc.strerror}"
            + (" (a symlink is refused: name the file itself)" if exc.errno == errno.ELOOP else "")
            + (
                " (a socket, or a device with no driver, is not a key file)"
                if exc.errno == errno.ENXIO
                else ""
            )
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise errors.InvalidKeyError(
                f"key file {path!r} is {_kind(st.st_mode)}, not a regular file; give the path "
                "of a regular file (chmod 600) holding the keys as JSON"
            )
        if st.st_mode & 0o077:
            raise errors.InvalidKeyError(
                f"key file {path!r} is readable by others (mode {stat.S_IMODE(st.st_mode):o}); "
                f"restrict it with `chmod 600 {path}`"
            )
        if st.st_size > MAX_FILE_BYTES:
            raise errors.InvalidKeyError(f"key file {path!r} is larger than a key file can be")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_FILE_BYTES:
            chunk = os.read(fd, MAX_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > MAX_FILE_BYTES:
            raise errors.InvalidKeyError(f"key file {path!r} is larger than a key file can be")
        data = b"".join(chunks)
    except OSError as exc:
        raise errors.InvalidKeyError(f"cannot read key file {path!r}: {exc.strerror}") from None
    finally:
        os.close(fd)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise errors.InvalidKeyError(f"key file {path!r} is not UTF-8 text") from None
    return parse_keys(text, f"key file {path!r}")


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
    ):
        if test(mode):
            return name
    return "a special file"


def read_key_env(name: str) -> dict[str, bytes]:
    """The keys in the environment variable ``name``."""
    value = os.environ.get(name)
    if value is None:
        raise errors.InvalidKeyError(f"environment variable {name!r} is not set")
    return parse_keys(value, f"environment variable {name!r}")
