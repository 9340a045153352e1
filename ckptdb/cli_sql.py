"""The output side of ``ckptdb sql``: parameters from the command line, rows streamed to
stdout as a table, CSV or JSON (kept here so cli.py stays a list of thin commands).

* ``--param NAME=VALUE`` binds ``:NAME`` (also ``$NAME``/``@NAME``) to the text VALUE; use
  ``CAST(:n AS INTEGER)`` in the query where a number is needed.
* Rows are written as they are read, never collected: JSON is an array written one object
  at a time, CSV one line at a time, and the table sizes its columns from the first
  :data:`TABLE_SAMPLE` rows (longer cells further down simply stick out).
* JSON objects keep every column in order; a repeated column name gets a ``:2``, ``:3``
  suffix. BLOBs are ``{"hex": ...}``; non-finite floats are the strings ``"Infinity"``,
  ``"-Infinity"``, ``"NaN"``. The output is valid JSON even when the query fails half-way:
  the array is closed, the error goes to stderr and the exit status is non-zero, so
  a partial result is never mistaken for a whole one.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any

import click

from . import errors, validation
from .ops.query import QueryStream, json_cell, json_keys

TABLE_SAMPLE = 200


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
    text = json.dumps(value, indent=indent, ensure_ascii=False, allow_nan=False)
    if validation.has_surrogate(text):
        text = json.dumps(value, indent=indent, allow_nan=False)
    return text


def _cell(value: Any) -> Any:
    return "x'" + value.hex() + "'" if isinstance(value, bytes) else value


class _Output:
    """Tracks whether rows were already written (a later error must not break JSON)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.started = False

    def write(self, text: str) -> None:
        self.started = True
        click.echo(text)


def _json_rows(out: _Output, result: QueryStream) -> None:
    keys = json_keys(result.columns)
    first = True
    out.write("[")
    try:
        for row in result.rows:
            obj = {k: json_cell(v) for k, v in zip(keys, row, strict=True)}
            body = "\n".join("  " + line for line in _dumps(obj, 2).split("\n"))
            click.echo(("" if first else ",\n") + body, nl=False)
            first = False
    finally:
        click.echo("" if first else "\n", nl=False)
        click.echo("]")


def _csv_rows(out: _Output, result: QueryStream) -> None:
    writer = csv.writer(sys.stdout, lineterminator="\n")
    out.started = True
    writer.writerow(result.columns)
    for row in result.rows:
        writer.writerow([_cell(c) for c in row])


def _table_rows(out: _Output, result: QueryStream) -> None:
    def cells(row: Sequence[Any]) -> list[str]:
        return ["" if c is None else str(_cell(c)) for c in row]

    header = [str(c) for c in result.columns]
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


def emit(
    result: QueryStream, *, as_json: bool, as_csv: bool, exit_code: Callable[[Any], int]
) -> None:
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
        click.echo(f"error: {exc.code}: {exc.message} (the rows above are incomplete)", err=True)
        sys.exit(exit_code(exc))


def interrupted() -> errors.QueryInterruptedError:
    """The error reported when Ctrl-C stopped a query."""
    return errors.QueryInterruptedError(
        "the query was interrupted (Ctrl-C) and stopped cleanly; nothing was changed"
    )
