"""Editing a WAL file the way a damaged disk or an attacker would, and making SQLite's
recovery accept the edit: the checksum chain of every frame recomputed as SQLite's writer
computes it (pure ``struct`` work; no SQLite involved)."""

from __future__ import annotations

import struct
from pathlib import Path

WAL_HEADER = 32
FRAME_HEADER = 24


def _wal_checksum(data: bytes, s0: int, s1: int, big: bool) -> tuple[int, int]:
    words = struct.unpack(f"{'>' if big else '<'}{len(data) // 4}I", data)
    for i in range(0, len(words), 2):
        s0 = (s0 + words[i] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[i + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def wal_resum(path: Path) -> None:
    """Recompute the checksum chain of every frame of a WAL (after editing payloads), the
    way SQLite's writer does, so recovery accepts the edited frames."""
    data = bytearray(path.read_bytes())
    magic, _version, size = struct.unpack(">III", data[:12])
    big = magic & 1 == 1
    s0, s1 = struct.unpack(">II", data[24:32])
    off = WAL_HEADER
    salt = bytes(data[16:24])
    while off + FRAME_HEADER + size <= len(data):
        if bytes(data[off + 8 : off + 16]) != salt:
            break
        s0, s1 = _wal_checksum(bytes(data[off : off + 8]), s0, s1, big)
        s0, s1 = _wal_checksum(
            bytes(data[off + FRAME_HEADER : off + FRAME_HEADER + size]), s0, s1, big
        )
        data[off + 16 : off + 24] = struct.pack(">II", s0, s1)
        off += FRAME_HEADER + size
    path.write_bytes(bytes(data))
