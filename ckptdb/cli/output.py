"""Everything the ``ckptdb`` command prints goes through here (kept apart so that no
command can print around it): the escaping primitives the renderers (:mod:`.render`) and
the streamed ``sql`` output (:mod:`.sql_output`) are built on, and the one format of sizes
and times for people.

A database file may be hostile: its namespaces, entry names, metadata, pins, notes and
receipts can hold any character, written by something other than ckptdb. Printed raw, ESC,
BEL, CSI and OSC sequences drive the terminal (clear the screen, retitle the window,
write the clipboard, fake lines of output), and bidirectional overrides make one name look
like another. So:

* Text for people (:func:`echo`, :func:`block`, :func:`table`) shows every control
  character -- C0 (newline and tab included: a value never starts a new line), DEL, C1,
  the Unicode line and paragraph separators, bidirectional controls and lone surrogates --
  as a visible escape (``\\x1b``, ``\\n``, ``\\u202e``). Only :func:`block` keeps the newlines
  of a text that is several lines by design (a migration's SQL).
* JSON (:func:`print_json`, :func:`json_text`) stays exact: those same characters are
  written as JSON's ``\\uXXXX`` escapes, which decode to the very same string. ``--json``
  output never holds a raw control character either, so it is as safe on a terminal.
* The two outputs meant to be byte-exact for programs are the exceptions, and say so where
  they are written: ``ckptdb cat`` (the entry's bytes) and ``ckptdb sql --csv`` (CSV has no
  escapes; its values are written as stored). ``ckptdb completion`` prints a script of
  ckptdb's own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any

import click
from pydantic import BaseModel

#: What a terminal may act on or that can disguise text: C0 controls, DEL and C1 controls,
#: the line/paragraph separators, the bidirectional controls (U+061C, U+200E/F,
#: U+202A-E, U+2066-9) and lone surrogates (text that was not UTF-8).
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
#: The same, minus C0: json.dumps escapes those itself, and the newlines of indented JSON
#: are its layout (C0 can occur in JSON output only there).
_UNSAFE_IN_JSON = re.compile(
    "[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _visible(match: re.Match[str]) -> str:
    ch = match.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape(text: str) -> str:
    """``text`` with every character a terminal could act on shown as an escape."""
    return _UNSAFE.sub(_visible, text)


def echo(text: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print one line for people (to stderr with ``err``), escaped."""
    click.echo(escape(text), err=err, nl=nl)


def block(text: str, *, err: bool = False) -> None:
    """Print a text that has several lines by design, each line escaped."""
    for line in text.split("\n"):
        echo(line, err=err)


def cell(value: Any) -> str:
    """A table cell: '' for None, else the value as text, escaped."""
    return "" if value is None else escape(str(value))


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a table for people: a header, a rule, one line per row, columns aligned (on
    the escaped text, so a hostile value cannot break the alignment either)."""
    cells = [[cell(h) for h in headers]] + [[cell(c) for c in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for n, row in enumerate(cells):
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            click.echo("  ".join("-" * w for w in widths))


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON values (models dumped, bytes as ``{"hex": ...}``)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, bytes):
        return {"hex": value.hex()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


def json_text(value: Any, indent: int | None = 2, *, allow_nan: bool = True) -> str:
    """Exact JSON text of plain JSON ``value`` with no character a terminal acts on:
    non-ASCII text stays readable, the unsafe characters become ``\\uXXXX`` escapes (a
    lone surrogate too, which no UTF-8 output could hold)."""
    text = json.dumps(value, indent=indent, ensure_ascii=False, allow_nan=allow_nan)
    return _UNSAFE_IN_JSON.sub(_json_escape, text)


def json_escape_chunk(text: str) -> str:
    """A piece of JSON text already encoded by json.dumps(ensure_ascii=False), made safe
    the way :func:`json_text` makes a whole document."""
    return _UNSAFE_IN_JSON.sub(_json_escape, text)


def print_json(value: Any) -> None:
    """Print one JSON document (``--json``)."""
    click.echo(json_text(jsonable(value)))


def print_json_line(value: Any) -> None:
    """Print one JSON document on one line (one of a stream, e.g. status reports)."""
    click.echo(json_text(jsonable(value), None))


def size(n: int | float) -> str:
    """A byte count for people: ``512 B``, ``1.5 KiB`` ... ``3.0 GiB`` (--json has exact
    integers)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` with ``noun`` in agreement: ``1 entry``, ``2 entries``, ``0 chunks``. The plural
    is ``noun`` + s (consonant + y: ies) unless given."""
    if n == 1:
        return f"{n} {noun}"
    if plural is None:
        ies = noun.endswith("y") and noun[-2:-1] not in ("a", "e", "i", "o", "u")
        plural = noun[:-1] + "ies" if ies else noun + "s"
    return f"{n} {plural}"


def when(moment: datetime) -> str:
    """A UTC time for people, to the millisecond: ``2025-01-31T12:00:00.000Z``."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _leaves(value: dict[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, item in value.items():
        if isinstance(item, dict) and item:
            yield from _leaves(item, f"{prefix}{key}.")
        elif item not in ({}, [], ""):
            yield f"{prefix}{key}", item


def summary(metadata: dict[str, Any], width: int = 40) -> str:
    """Metadata on one line, ``key=<JSON value>, ...``, cut to ``width`` with '…'.

    Nested objects are spelled out as dotted keys (``langgraph.step=1``) and empty values
    ({}, [], "") left out, so one large or empty object cannot push every other field past
    the cut (``ckptdb show`` prints the metadata whole)."""
    text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in _leaves(metadata))
    return text if len(text) <= width else text[: width - 1] + "…"
