"""ckptdb's statements, written with SQLite's parameter marks, bound for psycopg.

The store writes one statement text for both engines where they agree, with SQLite's marks:
``?`` (the next parameter), ``?NNN`` (parameter NNN, from 1) and ``:name`` (a named one).
psycopg takes ``%s`` and needs every literal ``%`` doubled. :func:`translate` rewrites a
statement once (cached by its text) into psycopg's form plus a *binder* that turns the
caller's parameters into the positional list it needs, in order of appearance. Marks inside
string literals, quoted identifiers and comments are left alone, and so is PostgreSQL's
``::`` cast, which engine-specific fragments use.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ... import errors

#: One mark, as the statement names it: an index into positional parameters (from 0) or
#: the name of a named one.
Mark = int | str


@dataclass(frozen=True)
class Bound:
    """A statement in psycopg's form and the marks it binds, in order of appearance."""

    sql: str
    marks: tuple[Mark, ...]

    def params(self, given: Sequence[Any] | Mapping[str, Any]) -> list[Any]:
        """The positional parameter list for psycopg: ``given`` (a sequence for ``?`` and
        ``?NNN`` marks, a mapping for ``:name`` marks) in the order the marks appear.
        InvalidInputError when a mark has no value or a value has no mark."""
        if isinstance(given, Mapping):
            names = [m for m in self.marks if isinstance(m, str)]
            if len(names) != len(self.marks):
                raise _mismatch("the statement has positional marks; pass a sequence")
            missing = sorted(set(names) - given.keys())
            if missing:
                raise _mismatch(f"no value for :{missing[0]}")
            return [given[name] for name in names]
        if any(isinstance(m, str) for m in self.marks):
            raise _mismatch("the statement has named marks; pass a mapping")
        indexes = [m for m in self.marks if isinstance(m, int)]
        used = len(set(indexes))
        if (indexes and max(indexes) >= len(given)) or used != len(given):
            raise _mismatch(f"the statement binds {used} parameter(s), {len(given)} given")
        return [given[i] for i in indexes]


def _mismatch(what: str) -> errors.InvalidInputError:
    return errors.InvalidInputError(f"statement parameters do not match: {what}")


@functools.lru_cache(maxsize=4096)
def translate(sql: str) -> Bound:
    """``sql`` with SQLite's marks, rewritten for psycopg (see the module docstring)."""
    out: list[str] = []
    marks: list[Mark] = []
    next_index = 0
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in "'\"":  # a literal or a quoted identifier; a doubled quote stays inside
            end = i + 1
            while end < n:
                if sql[end] == ch:
                    if end + 1 < n and sql[end + 1] == ch:
                        end += 2
                        continue
                    break
                end += 1
            out.append(sql[i : end + 1].replace("%", "%%"))
            i = end + 1
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            end = n if end < 0 else end
            out.append(sql[i:end].replace("%", "%%"))
            i = end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(sql[i:end].replace("%", "%%"))
            i = end
        elif ch == "?":
            j = i + 1
            while j < n and sql[j].isdigit():
                j += 1
            if j > i + 1:
                number = int(sql[i + 1 : j])
                if number < 1:
                    raise errors.InvalidInputError(f"parameter mark ?{number}: marks count from 1")
                marks.append(number - 1)
            else:
                marks.append(next_index)
                next_index += 1
            out.append("%s")
            i = j
        elif ch == ":" and sql.startswith("::", i):
            out.append("::")
            i += 2
        elif ch == ":" and i + 1 < n and (sql[i + 1].isalpha() or sql[i + 1] == "_"):
            j = i + 1
            while j < n and (sql[j].isalnum() or sql[j] == "_"):
                j += 1
            marks.append(sql[i + 1 : j])
            out.append("%s")
            i = j
        elif ch == "%":
            out.append("%%")
            i += 1
        else:
            out.append(ch)
            i += 1
    return Bound("".join(out), tuple(marks))


def bind(sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> tuple[str, list[Any]]:
    """``sql`` and ``params`` as psycopg takes them."""
    bound = translate(sql)
    return bound.sql, bound.params(params)
