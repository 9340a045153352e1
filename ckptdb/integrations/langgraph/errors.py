"""Errors of the LangGraph integration (all :class:`ckptdb.CkptdbError`, stable codes)."""

from __future__ import annotations

from ...errors import InvalidInputError


class PickleRefusedError(InvalidInputError):
    """A value is (or would be) serialized with pickle; ckptdb never stores or loads pickle."""

    code = "pickle_refused"


class NotLangGraphSqliteError(InvalidInputError):
    """The import source is not a LangGraph SqliteSaver database. Nothing was written."""

    code = "not_langgraph_sqlite"
