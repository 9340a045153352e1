"""The output side of ``ckptdb sql``: parameters from the command line, rows streamed to
stdout as a table, CSV or JSON (the one renderer that writes as it reads).

* ``--param NAME=VALUE`` binds ``:NAME`` (also ``$NAME``/``@NAME``) to the text VALUE; use
  ``CAST(:n AS INTEGER)`` in the query where a number is needed.
* Rows are written as they are read, never collected: JSON is an array written one object
  at a time, CSV one line at a time, and the table sizes its columns from the first
  :data:`TABLE_SAMPLE` rows (longer cells further down simply stick out).
* Values are streamed too: in JSON and CSV a value longer than :data:`VALUE_PIECE` is
  encoded and written piece by piece, so printing a 64 MB BLOB costs about the BLOB itself
  (once as SQLite's value, once as Python's), not its hex text several times over. The
  table is for people: a cell shows at most :data:`TABLE_CELL_CHARS` characters, cut ones
  end in '…' and a note on stderr says how to get them whole.
* The table escapes control characters (:mod:`ckptdb.cli.output`); JSON escapes them the
  JSON way; CSV writes values exactly as stored, quoting (RFC 4180) a field that holds a
  comma, a quote, CR or LF.
* JSON objects keep every column in order; a repeated column name gets a ``:2``, ``:3``
  suffix. BLOBs are ``{"hex": ...}``; non-finite floats are the strings ``"Infinity"``,
  ``"-Infinity"``, ``"NaN"``. The output is valid JSON even when the query fails half-way:
  the array is closed, the error goes to stderr and the exit status is non-zero, so
  a partial result is never mistaken for a whole one.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator, Sequence
from itertools import chain, islice
from typing import Any

import click

from .. import errors
from ..ops.query import QueryStream, json_cell, json_keys
from .output import count, echo, escape, json_escape_chunk, json_text

TABLE_SAMPLE = 200
#: A table cell shows at most this many characters (a BLOB: half as many bytes, in hex).
TABLE_CELL_CHARS = 1000
#: JSON and CSV write a value longer than this (characters; a BLOB: half as many bytes)
#: in pieces of this size, so printing a value costs about its own size in memory.
VALUE_PIECE = 1 << 20


def parse_params(values: Sequence[str]) -> dict[str, str]:
    """``NAME=VALUE`` options as a mapping; click.BadParameter for a malformed one."""
    out: dict[str, str] = {}
    for item in values:
        name, sep, value = item.partition("=")
        name = name.strip().lstrip(":$@")
        if not sep or not name:
            raise click.BadParameter(
                f"{item!r} is not NAME=VALUE (e.g. --param namespace=brain)", param_hint="--param"
            )
        if name in out:
            raise click.BadParameter(f"{name!r} is given twice", param_hint="--param")
        out[name] = value
    return out


def _dumps(value: Any, indent: int | None) -> str:
    return json_text(value, indent, allow_nan=False)


def _big(value: Any, piece: int) -> bool:
    """Whether a cell is written in pieces rather than formatted whole."""
    if isinstance(value, bytes):
        return len(value) > piece // 2
    return isinstance(value, str) and len(value) > piece


def _hex_pieces(value: bytes, piece: int) -> Iterator[str]:
    for start in range(0, len(value), max(piece // 2, 1)):
        yield value[start : start + max(piece // 2, 1)].hex()


def _text_pieces(value: str, piece: int) -> Iterator[str]:
    for start in range(0, len(value), piece):
        yield value[start : start + piece]


class _Output:
    """Tracks whether rows were already written (a later error must not break JSON)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.started = False
        self.cut = 0  # table cells shown shortened

    def write(self, text: str) -> None:
        self.started = True
        click.echo(text)


def _json_value_pieces(value: Any, piece: int) -> Iterator[str]:
    """JSON text of one cell, as ``json.dumps(json_cell(value), indent=2)`` at the depth of
    an object member would write it, in pieces of about ``piece`` characters."""
    if isinstance(value, bytes):
        yield '{\n      "hex": "'
        yield from _hex_pieces(value, piece)
        yield '"\n    }'
    elif isinstance(value, str):
        yield '"'
        for part in _text_pieces(value, piece):
            yield json_escape_chunk(json.dumps(part, ensure_ascii=False)[1:-1])
        yield '"'
    else:
        yield _dumps(json_cell(value), 2).replace("\n", "\n    ")


def _json_row_pieces(keys: list[str], row: Sequence[Any], piece: int) -> Iterator[str]:
    """One row as the object ``json.dumps(obj, indent=2)`` indented by two spaces would be,
    in pieces: a large value is never held as a whole JSON text (its hex alone would be
    twice its size)."""
    if not any(_big(v, piece) for v in row):
        obj = {k: json_cell(v) for k, v in zip(keys, row, strict=True)}
        yield "\n".join("  " + line for line in _dumps(obj, 2).split("\n"))
        return
    yield "  {"
    for n, (key, value) in enumerate(zip(keys, row, strict=True)):
        yield ("" if n == 0 else ",") + "\n    " + _dumps(key, None) + ": "
        yield from _json_value_pieces(value, piece)
    yield "\n  }"


def _json_rows(out: _Output, result: QueryStream, piece: int = VALUE_PIECE) -> None:
    keys = json_keys(result.columns)
    first = True
    out.write("[")
    try:
        for row in result.rows:
            click.echo("" if first else ",\n", nl=False)
            for text in _json_row_pieces(keys, row, piece):
                click.echo(text, nl=False)
            first = False
    finally:
        click.echo("" if first else "\n", nl=False)
        click.echo("]")


_CSV_QUOTE = re.compile(r'[,"\r\n]')


def _csv_field_pieces(value: Any, piece: int) -> Iterator[str]:
    """One CSV field (RFC 4180: quoted when it holds ',', '"', CR or LF; csv.writer
    would leave a lone CR unquoted, and every reader would split the row there), in
    pieces of about ``piece`` characters."""
    if isinstance(value, bytes):
        yield "x'"
        yield from _hex_pieces(value, piece)
        yield "'"
    elif isinstance(value, str):
        quoted = _CSV_QUOTE.search(value) is not None
        if quoted:
            yield '"'
        for part in _text_pieces(value, piece):
            yield part.replace('"', '""') if quoted else part
        if quoted:
            yield '"'
    elif value is not None:
        yield repr(value) if isinstance(value, float) else str(value)


def _csv_line_pieces(row: Sequence[Any], piece: int = VALUE_PIECE) -> Iterator[str]:
    """One CSV line (LF-terminated) in pieces; a large value is never held as one text."""
    if len(row) == 1 and row[0] in ("", None):
        yield '""\n'  # as csv.writer does: an empty line would read back as no field
        return
    for n, value in enumerate(row):
        if n:
            yield ","
        yield from _csv_field_pieces(value, piece)
    yield "\n"


def _csv_rows(out: _Output, result: QueryStream, piece: int = VALUE_PIECE) -> None:
    # CSV is for programs and has no escapes: values are written exactly as stored (the
    # one text output that does not escape control characters; see .output).
    out.started = True
    for row in chain([result.columns], result.rows):
        if any(_big(v, piece) for v in row):
            for text in _csv_line_pieces(row, piece):
                sys.stdout.write(text)
        else:
            sys.stdout.write("".join(_csv_line_pieces(row, piece)))


def _table_cell(out: _Output, value: Any) -> str:
    """A cell for people: escaped, and at most :data:`TABLE_CELL_CHARS` characters (a
    longer value is cut, marked with '…' and counted for a note after the table)."""
    if value is None:
        return ""
    if isinstance(value, bytes):
        raw = "x'" + value[: TABLE_CELL_CHARS // 2].hex() + "'"
        whole = 2 * len(value) + 3
    else:
        raw = value[: TABLE_CELL_CHARS + 1] if isinstance(value, str) else str(value)
        whole = len(value) if isinstance(value, str) else len(raw)
    shown = escape(raw)
    if whole > TABLE_CELL_CHARS or len(shown) > TABLE_CELL_CHARS:
        out.cut += 1
        return shown[: TABLE_CELL_CHARS - 1] + "…"
    return shown


def _table_rows(out: _Output, result: QueryStream) -> None:
    def cells(row: Sequence[Any]) -> list[str]:
        return [_table_cell(out, c) for c in row]

    header = [escape(str(c)) for c in result.columns]
    sample = [cells(r) for r in islice(result.rows, TABLE_SAMPLE)]
    widths = [max([len(header[i])] + [len(r[i]) for r in sample]) for i in range(len(header))]

    def line(row: list[str]) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()

    out.write(line(header))
    out.write("  ".join("-" * w for w in widths))
    for row in sample:
        out.write(line(row))
    for raw in result.rows:
        out.write(line(cells(raw)))
    if out.cut:
        click.echo(
            f"note: {count(out.cut, 'value')} longer than {TABLE_CELL_CHARS} characters "
            "shown cut (ending in …); --json or --csv prints every value whole, and `ckptdb cat DB "
            "CHECKPOINT ENTRY` writes an entry's bytes",
            err=True,
        )


def emit(result: QueryStream, *, as_json: bool, as_csv: bool) -> None:
    """Write the rows of ``result`` in the chosen format as they are read."""
    out = _Output(as_json)
    try:
        try:
            if as_json:
                _json_rows(out, result)
            elif as_csv:
                _csv_rows(out, result)
            else:
                _table_rows(out, result)
        except KeyboardInterrupt:
            raise interrupted() from None
    except errors.CkptdbError as exc:
        if not (as_json and out.started):
            raise  # nothing written yet: the usual error report
        # The JSON array on stdout was closed (valid, but incomplete): say so on stderr.
        echo(f"error: {exc.code}: {exc.message} (the rows above are incomplete)", err=True)
        sys.exit(exc.exit_status)


def interrupted() -> errors.QueryInterruptedError:
    """The error reported when Ctrl-C stopped a query."""
    return errors.QueryInterruptedError(
        "the query was interrupted (Ctrl-C) and stopped cleanly; nothing was changed"
    )
