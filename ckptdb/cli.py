"""The ``ckptdb`` command: a thin layer over the public API (no SQL, no logic of its own).

Every command prints a readable table or summary for people, or with ``--json`` one JSON
document for programs. Errors print ``error: <code>: <message>`` on stderr (with
``--json``: a JSON object with ``code`` and ``message`` on stdout) and exit non-zero; the
exit statuses are listed in ``ckptdb --help`` and docs/cli.md.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click
from click.shell_completion import get_completion_class

from . import __version__, cli_output, cli_sql, errors, keyfile, keyids, validation
from .cli_output import block, echo
from .database import Database
from .database import open as open_database
from .demo import run as run_demo
from .importers import IMPORTERS, run_import
from .ops import query as query_module
from .paths import entries_from_paths
from .replication.cli import register as register_replication
from .retention import KeepBest, RetentionPolicy
from .types import UNSET

F = TypeVar("F", bound=Callable[..., Any])

#: Exit status per error class (the first matching base class wins).
EXIT_CODES: list[tuple[type[errors.CkptdbError], int]] = [
    (errors.KeyUnavailableError, 14),
    (errors.KeyMismatchError, 14),
    (errors.KeyShreddedError, 14),
    (errors.InvalidKeyError, 14),
    (errors.NotFoundError, 3),
    (errors.ConflictError, 4),
    (errors.ProtectedError, 4),
    (errors.CorruptionError, 5),
    (errors.NoUsableCheckpointError, 5),
    (errors.ValidatorRejectedError, 5),
    (errors.DatabaseFileError, 6),
    (errors.SchemaError, 6),
    (errors.InvalidInputError, 7),
    (errors.BusyTimeoutError, 8),
    (errors.StorageError, 8),
    (errors.CommitOutcomeUnknownError, 8),
    (errors.ChunkMissingError, 8),
    (errors.BlobMissingError, 8),
    (errors.ReadOnlyError, 9),
    (errors.ClosedError, 1),
    (errors.ConstraintViolationError, 5),
    (errors.SqlError, 7),
    (errors.QueryTimeoutError, 12),
    (errors.QueryInterruptedError, 130),
    (errors.ReplicationError, 10),
    (errors.LoadRefusedError, 15),
    (errors.QuotaExceededError, 16),
]
#: Namespaces ``ckptdb stats`` lists for people, the largest first (--json has all).
STATS_NAMESPACES = 20
#: ``ckptdb import-from`` finished, but some source items were skipped (listed in the
#: report, on stderr, in --json and in the receipt).
EXIT_IMPORT_SKIPPED = 11
#: The command succeeded degraded: ``checkout --fallback`` wrote an older, verified
#: checkpoint than the one asked for (said on stderr, ``disposition`` in --json).
EXIT_DEGRADED = 13
EXIT_HELP = """\b
Exit status:
  0  success
  1  unexpected internal error (a bug: please report it)
  2  usage error (bad command line)
  3  not found (checkpoint, entry, namespace)
  4  conflict (compare-and-swap failed; import reported pointer conflicts; pin exists;
     dropping a namespace that has pins)
  5  integrity (verify found problems, corruption, no usable checkpoint)
  6  refused database file or schema (not ckptdb, truncated, too new, edited migration)
  7  invalid input (entry name, metadata, path, reference)
  8  retryable (busy timeout, I/O error, disk full, commit outcome unknown)
  9  refused write (read-only, e.g. a writing statement given to `ckptdb sql`)
  10 replication (Litestream missing or already running, barrier timeout, restore
     destination exists or is open in a process)
  11 import-from finished but skipped some source items (each listed with its reason)
  12 `ckptdb sql` query timed out (--timeout) and was interrupted
  13 succeeded degraded: `checkout --fallback` wrote an older, verified checkpoint;
     `restore --recover` restored an older position than the newest
  14 key (a key scope's key not given, wrong, shredded, or a malformed key file)
  15 refused by your checks: the checkpoint is intact but not of the --expect'ed
     lineage, pinned to a schema newer than --accept-schema, or larger than --max-bytes
  16 quota exceeded: the commit would pass a stored quota (`ckptdb quota`); nothing
     was written
  130 interrupted by Ctrl-C (`ckptdb sql`)
"""


def exit_code(exc: errors.CkptdbError) -> int:
    """The documented exit status for an error."""
    for cls, code in EXIT_CODES:
        if isinstance(exc, cls):
            return code
    return 1


# Every line printed goes through cli_output: escaped for people, exact JSON for programs.
_print_json = cli_output.print_json
_table = cli_output.table


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _when(dt: Any) -> str:
    return str(dt.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z")


def command(fn: F) -> F:
    """Wrap a command: turn ckptdb errors into the documented message and exit status."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = bool(kwargs.get("as_json"))
        try:
            return fn(*args, **kwargs)
        except errors.CkptdbError as exc:
            if as_json:
                _print_json(exc.to_dict())
            else:
                echo(f"error: {exc.code}: {exc.message}", err=True)
            sys.exit(exit_code(exc))

    return wrapper  # type: ignore[return-value]


def _keys() -> dict[str, bytes] | None:
    """The host keys named by ``--keys-file`` / ``--keys-env`` (read when a command opens a
    database, so a bad key file is reported like any other error)."""
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None
    meta = ctx.find_root().meta
    keys: dict[str, bytes] = {}
    if meta.get("ckptdb.keys_file"):
        keys.update(keyfile.read_key_file(str(meta["ckptdb.keys_file"])))
    if meta.get("ckptdb.keys_env"):
        keys.update(keyfile.read_key_env(str(meta["ckptdb.keys_env"])))
    return keys or None


@contextmanager
def _open(path: str, **kwargs: Any) -> Iterator[Database]:
    kwargs.setdefault("keys", _keys())
    with open_database(path, **kwargs) as db:
        yield db


class _Bar:
    """A click progress bar in bytes on stderr, with the rate beside it; click adds the
    percentage and the ETA. One bar per phase (verify has several)."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.phase: str | None = None
        self.bar: Any = None
        self.started = time.monotonic()

    def _rate(self, _item: object) -> str:
        elapsed = time.monotonic() - self.started
        if self.bar is None or elapsed <= 0:
            return ""
        return (
            f"{_size(self.bar.pos)} of {_size(self.bar.length)}, {_size(self.bar.pos / elapsed)}/s"
        )

    def update(self, *args: Any) -> None:
        phase = str(args[0]) if len(args) == 3 else None
        done, total = int(args[-2]), int(args[-1])
        if self.bar is None or phase != self.phase:
            self.close()
            self.phase, self.started = phase, time.monotonic()
            label = self.label if phase is None else f"{self.label} {phase}"
            self.bar = click.progressbar(
                length=max(total, 1),
                label=label,
                file=sys.stderr,
                show_eta=True,
                show_percent=True,
                item_show_func=self._rate if phase in (None, "chunk bytes") else None,
            )
            self.bar.__enter__()
        self.bar.length = max(total, 1)
        self.bar.update(max(done - self.bar.pos, 0))

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)
            self.bar = None


@contextmanager
def _progress(label: str, quiet: bool) -> Iterator[Callable[..., None] | None]:
    """Byte progress (rate, ETA) on stderr when it is a terminal; nothing when piped, with
    --quiet or with --json."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    bar = _Bar(label)
    try:
        yield bar.update
    finally:
        bar.close()


json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
quiet_option = click.option(
    "-q", "--quiet", is_flag=True, help="No progress bar (there is none when not a terminal)."
)


@click.group(epilog=EXIT_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ckptdb")
@click.option(
    "--keys-file",
    envvar="CKPTDB_KEYS_FILE",
    metavar="PATH",
    help="JSON file {key_id: key as 64 hex digits or base64} of the keys of encrypted key "
    "scopes (mode 600; also $CKPTDB_KEYS_FILE). Keys are never taken on the command line.",
)
@click.option(
    "--keys-env",
    metavar="NAME",
    help="Name of an environment variable holding the same JSON as --keys-file.",
)
@click.pass_context
def main(ctx: click.Context, keys_file: str | None, keys_env: str | None) -> None:
    """ckptdb: a single-file, transactional checkpoint database.

    DB is the path of a ckptdb database file. CHECKPOINT is a full id, a unique prefix of at
    least 8 hex characters, or NS[@current|@fallback][~N]: a bare namespace NS is its
    CURRENT, ~N walks N generations back. A namespace containing ~ or @ (or that looks like
    hex) is written NS@current. Command groups take DB after the subcommand:
    `ckptdb migrate status DB`, `ckptdb retention show DB`.

    Output for people shows any control character it prints (from names, metadata, notes
    of a file that may be hostile) as an escape such as \\x1b, never raw; --json output is
    exact (JSON escapes). A JSON VALUE given to an option nests at most 64 levels.
    """
    ctx.meta["ckptdb.keys_file"] = keys_file
    ctx.meta["ckptdb.keys_env"] = keys_env


@main.command()
@click.argument("db")
@json_option
@command
def init(db: str, as_json: bool) -> None:
    """Create an empty database (an existing ckptdb file is left as it is)."""
    with _open(db) as handle:
        stats = handle.stats()
    if as_json:
        _print_json(stats)
    else:
        echo(f"initialized {stats.path} (schema version {stats.schema_version})")


def _parse_expect(pairs: Sequence[str]) -> dict[str, Any] | None:
    """``--expect KEY=VALUE`` pairs: VALUE parsed as JSON when it is JSON, else a string."""
    if not pairs:
        return None
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise errors.InvalidLoadCheckError(f"--expect takes KEY=VALUE, got {pair!r}")
        out[key] = validation.parse_json_or_text(
            raw, f"--expect {key}=VALUE", errors.InvalidLoadCheckError
        )
    return out


def _parse_accept(pairs: Sequence[str]) -> dict[str, int] | None:
    """``--accept-schema NAME=N`` pairs (N: the newest version of NAME you read)."""
    if not pairs:
        return None
    out: dict[str, int] = {}
    for pair in pairs:
        name, sep, raw = pair.rpartition("=")
        if not sep or not name or not (raw.isascii() and raw.isdigit()):
            raise errors.InvalidLoadCheckError(
                f"--accept-schema takes NAME=N (e.g. state=3), got {pair!r}"
            )
        out[name] = int(raw)
    return out


def _parse_meta(pairs: Sequence[str], meta_json: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if meta_json:
        try:
            text = Path(meta_json).read_text()
        except (OSError, ValueError) as exc:
            raise errors.InvalidMetadataError(
                f"cannot read --meta-json {meta_json}: {exc}"
            ) from exc
        loaded = validation.parse_json(
            text, f"--meta-json {meta_json}", errors.InvalidMetadataError
        )
        if not isinstance(loaded, dict):
            raise errors.InvalidMetadataError("--meta-json must hold a JSON object")
        meta.update(loaded)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise errors.InvalidMetadataError(f"--meta expects KEY=VALUE, got {pair!r}")
        meta[key] = validation.parse_json_or_text(
            raw, f"the value of {key!r}", errors.InvalidMetadataError
        )
    return meta


@main.command()
@click.argument("db")
@click.argument("namespace")
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--meta",
    "meta_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="Metadata; VALUE is parsed as JSON when it is valid JSON, else a string.",
)
@click.option("--meta-json", type=click.Path(), help="A file holding a JSON object of metadata.")
@click.option(
    "--expect-current",
    metavar="ID|none",
    help="Compare-and-swap: commit only if CURRENT is this id ('none': empty).",
)
@click.option("--reason", default="commit", show_default=True, help="Recorded in the history.")
@quiet_option
@json_option
@command
def commit(
    db: str,
    namespace: str,
    paths: tuple[str, ...],
    meta_pairs: tuple[str, ...],
    meta_json: str | None,
    expect_current: str | None,
    reason: str,
    quiet: bool,
    as_json: bool,
) -> None:
    """Commit files and directories as one checkpoint of NAMESPACE.

    A file becomes an entry named by its base name; a directory contributes every regular
    file beneath it, named by its relative path. Symlinks are refused, never followed; a
    directory walk skips DB and its -wal/-shm/-journal files. --meta values are JSON when
    they parse as JSON (turn=12 is a number), else strings. --expect-current makes it a
    compare-and-swap (exit 4 on mismatch). A stored quota can refuse it (exit 16) or evict
    older checkpoints to make room (listed). --json keys: checkpoint_id, namespace,
    parent_id, generation, pointer_revision, created, entry_count, logical_bytes,
    bytes_stored, bytes_deduplicated, created_at, evicted_ids.
    """
    entries = entries_from_paths(paths, database=db)
    metadata = _parse_meta(meta_pairs, meta_json)
    with _open(db) as handle:
        if expect_current is None:
            expect: Any = UNSET
        elif expect_current.lower() == "none":
            expect = None
        else:
            expect = handle.resolve(expect_current)
        with _progress("committing", as_json or quiet) as progress:
            ack = handle.commit(
                namespace,
                entries,
                metadata=metadata,
                expect_current=expect,
                reason=reason,
                progress=progress,
            )
    if as_json:
        _print_json(ack)
        return
    state = "committed" if ack.created else "unchanged (already CURRENT)"
    echo(f"{state} {ack.checkpoint_id}")
    echo(
        f"namespace {ack.namespace}  generation {ack.generation}  {ack.entry_count} entries  "
        f"{_size(ack.logical_bytes)}: {_size(ack.bytes_stored)} stored, "
        f"{_size(ack.bytes_deduplicated)} deduplicated"
    )
    if ack.evicted_ids:
        echo(f"a quota evicted {len(ack.evicted_ids)} older checkpoint(s):")
        for cid in ack.evicted_ids:
            echo(f"  {cid}")


@main.command()
@click.argument("db")
@click.argument("namespace")
@json_option
@command
def current(db: str, namespace: str, as_json: bool) -> None:
    """Show the CURRENT checkpoint of NAMESPACE."""
    with _open(db, readonly=True) as handle:
        cp = handle.current(namespace)
        if cp is None:
            raise errors.NamespaceNotFoundError(f"namespace {namespace!r} has no checkpoint")
        pointer = handle.pointer(namespace)
    if as_json:
        _print_json({"checkpoint": cp.info, "pointer": pointer})
        return
    assert pointer is not None
    echo(cp.id)
    echo(
        f"generation {cp.generation}  created {_when(cp.created_at)}  {len(cp.entries)} "
        f"entries  {_size(cp.total_size)}  pointer revision {pointer.revision}"
    )


@main.command()
@click.argument("db")
@json_option
@command
def namespaces(db: str, as_json: bool) -> None:
    """List namespaces with their CURRENT checkpoint."""
    with _open(db, readonly=True) as handle:
        rows = handle.namespaces()
    if as_json:
        _print_json(rows)
        return
    _table(
        ["namespace", "current", "generation", "revision", "checkpoints", "updated"],
        [
            [
                r.name,
                r.current_id[:12],
                r.generation,
                r.revision,
                r.checkpoint_count,
                _when(r.updated_at),
            ]
            for r in rows
        ],
    )


def _summary(metadata: dict[str, Any], width: int = 40) -> str:
    text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in metadata.items())
    return text if len(text) <= width else text[: width - 1] + "…"


_SYMBOL = {"current": "*", "fallback": "~", "pinned": "P"}


def _marks(node: Any) -> str:
    words = [{"current": "CURRENT", "fallback": "fallback"}.get(m, "") for m in node.markers]
    words = [w for w in words if w] + [f"pin: {p}" for p in node.pins]
    return f"({', '.join(words)})" if words else ""


@main.command()
@click.argument("db")
@click.argument("namespace")
@click.option("--limit", type=click.IntRange(min=1), help="Show at most N checkpoints.")
@click.option("--graph", is_flag=True, help="Draw the lineage like `git log --graph`.")
@click.option(
    "--all",
    "show_all",
    is_flag=True,
    help="Also list stored checkpoints no longer on the CURRENT lineage (pinned, retained).",
)
@json_option
@command
def log(
    db: str, namespace: str, limit: int | None, graph: bool, show_all: bool, as_json: bool
) -> None:
    """Show the lineage of NAMESPACE, newest first.

    Markers: * current, ~ fallback, P pinned; with --all, o marks a checkpoint that CURRENT
    does not descend from. --graph draws forks (commits made on an older base) like
    `git log --graph`; without --all it shows the lineage of CURRENT and of the fallback.
    Lanes past the 16th share one column with a count, so a line stays short however many
    forks there are: `*+N` is the checkpoint and N other lanes, `|+N` N+1 lanes passing.
    """
    with _open(db, readonly=True) as handle:
        if graph or show_all:
            result = handle.log(namespace, all=show_all, limit=limit)
        else:  # the CURRENT lineage only
            full = handle.log(namespace)
            nodes = [n for n in full.nodes if n.on_lineage][:limit]
            result = full.model_copy(update={"nodes": nodes})
    if as_json:
        _print_json(
            [
                {
                    "id": n.id,
                    "short_id": n.id[:12],
                    "generation": n.generation,
                    "created_at": _when(n.created_at),
                    "entry_count": n.entry_count,
                    "total_size": n.total_size,
                    "metadata": n.metadata,
                    "parent_id": n.parent_id,
                    "markers": n.markers,
                    "pins": n.pins,
                    "on_lineage": n.on_lineage,
                    **({"graph": n.graph, "column": n.column} if graph else {}),
                }
                for n in result.nodes
            ]
        )
        return
    fallback = result.fallback_id[:12] if result.fallback_id else "none"
    echo(
        f"namespace {namespace}: CURRENT {result.current_id[:12]}, fallback {fallback}, "
        f"pointer revision {result.revision}"
    )
    if graph:
        width = max((len(line) for n in result.nodes for line in n.graph), default=1)
        for n in result.nodes:
            for line in n.graph[:-1]:
                echo(line)
            echo(
                f"{n.graph[-1].ljust(width)}  {n.id[:12]}  gen {n.generation}  "
                f"{_when(n.created_at)}  {n.entry_count} entries  {_size(n.total_size)}  "
                f"{_marks(n)}  {_summary(n.metadata)}".rstrip()
            )
        return
    _table(
        ["", "id", "gen", "created", "entries", "size", "metadata"],
        [
            [
                "".join(_SYMBOL[m] for m in n.markers) + ("" if n.on_lineage else "o"),
                n.id[:12],
                n.generation,
                _when(n.created_at),
                n.entry_count,
                _size(n.total_size),
                _summary(n.metadata),
            ]
            for n in result.nodes
        ],
    )


@main.command()
@click.argument("db")
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@json_option
@command
def diff(db: str, a: str, b: str, as_json: bool) -> None:
    """Show what changed from checkpoint A to checkpoint B.

    Entries added (+), removed (-) and changed (~) with their sizes and, for changed ones,
    how many bytes B still shares with A by content; metadata keys that differ; and how A
    stands to B in the lineage (ancestor, descendant, siblings, unrelated).
    """
    with _open(db, readonly=True) as handle:
        d = handle.diff(a, b)
    if as_json:
        _print_json(d)
        return
    relation = {
        "same": "A and B are the same checkpoint",
        "ancestor": f"A is an ancestor of B ({d.generations_b} generations back)",
        "descendant": f"A descends from B ({d.generations_a} generations later)",
        "siblings": (
            f"A and B are siblings: common ancestor {str(d.common_ancestor_id)[:12]} "
            f"({d.generations_a} and {d.generations_b} generations back)"
        ),
        "unrelated": "A and B are unrelated (no common stored ancestor)",
    }[d.relation]
    echo(f"A {d.a[:12]} ({d.namespace_a}, {_size(d.size_a)})")
    echo(f"B {d.b[:12]} ({d.namespace_b}, {_size(d.size_b)})")
    echo(relation)
    echo(f"{len(d.entries)} entries differ, {d.unchanged} unchanged")
    sign = {"added": "+", "removed": "-", "changed": "~"}
    for e in d.entries:
        if e.change == "added":
            detail = _size(e.size_b or 0)
        elif e.change == "removed":
            detail = _size(e.size_a or 0)
        elif not e.content_changed:
            detail = (
                f"same bytes; media type {e.media_type_a} -> {e.media_type_b}, schema pin "
                f"{e.schema_pin_a} -> {e.schema_pin_b}"
            )
        else:
            detail = (
                f"{_size(e.size_a or 0)} -> {_size(e.size_b or 0)}, {_size(e.bytes_shared)} shared"
            )
        echo(f"  {sign[e.change]} {e.name}  {detail}")
    for m in d.metadata:
        if m.change == "added":
            text = f"+ {m.key} = {json.dumps(m.b, ensure_ascii=False)}"
        elif m.change == "removed":
            text = f"- {m.key} = {json.dumps(m.a, ensure_ascii=False)}"
        else:
            text = (
                f"~ {m.key}: {json.dumps(m.a, ensure_ascii=False)} -> "
                f"{json.dumps(m.b, ensure_ascii=False)}"
            )
        echo(f"  metadata {text}")


@main.command()
@click.argument("db")
@click.argument("checkpoint")
@json_option
@command
def show(db: str, checkpoint: str, as_json: bool) -> None:
    """Show the manifest of CHECKPOINT: entries, metadata, parent, counters."""
    with _open(db, readonly=True) as handle:
        cp = handle.get(handle.resolve(checkpoint))
    info = cp.info
    if as_json:
        _print_json(info)
        return
    echo(f"checkpoint  {info.id}")
    echo(f"namespace   {info.namespace}")
    echo(f"parent      {info.parent_id or '-'}")
    echo(f"generation  {info.generation}")
    echo(f"created     {_when(info.created_at)}")
    echo(f"revision    {info.code_revision or '-'}")
    echo(f"metadata    {json.dumps(info.metadata, ensure_ascii=False, sort_keys=True)}")
    echo("")
    _table(
        ["entry", "size", "digest", "media type", "schema"],
        [[e.name, _size(e.size), e.digest, e.media_type, e.schema_pin] for e in info.entries],
    )


@main.command()
@click.argument("db")
@click.argument("checkpoint")
@click.argument("entry")
@command
def cat(db: str, checkpoint: str, entry: str) -> None:
    """Write the verified bytes of ENTRY of CHECKPOINT to stdout (binary-safe)."""
    with _open(db, readonly=True) as handle:
        cp = handle.get(handle.resolve(checkpoint))
        out = sys.stdout.buffer
        for piece in cp.iter_bytes(entry):
            out.write(piece)
        out.flush()


@main.command()
@click.argument("db")
@click.argument("checkpoint")
@click.argument("directory", type=click.Path())
@click.option(
    "--fallback",
    is_flag=True,
    help="If CHECKPOINT does not verify, use its newest verified ancestor.",
)
@click.option("--force", is_flag=True, help="Replace a non-empty DIRECTORY atomically.")
@click.option(
    "--expect",
    "expect_pairs",
    multiple=True,
    metavar="KEY=VALUE",
    help="The checkpoint's metadata must hold KEY=VALUE (VALUE parsed as JSON, else a "
    "string; repeatable).",
)
@click.option(
    "--accept-schema",
    "accept_pairs",
    multiple=True,
    metavar="NAME=N",
    help="Refuse an entry pinned to NAME/vM with M > N (repeatable).",
)
@click.option(
    "--max-bytes",
    type=click.IntRange(min=0),
    help="Refuse a checkpoint holding more bytes (checked before any is read).",
)
@quiet_option
@json_option
@command
def checkout(
    db: str,
    checkpoint: str,
    directory: str,
    fallback: bool,
    force: bool,
    expect_pairs: tuple[str, ...],
    accept_pairs: tuple[str, ...],
    max_bytes: int | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Materialize CHECKPOINT into DIRECTORY (files 0600, directories 0700).

    With --fallback, a CHECKPOINT that does not verify is replaced by its newest verified
    ancestor: that is said on stderr, --json has "disposition": "degraded_fallback" and the
    receipt id, and the exit status is 13 (succeeded degraded).

    --expect and --accept-schema refuse an intact checkpoint of another lineage or written
    with a newer schema (exit 15); with --fallback such checkpoints are skipped like damaged
    ones. --max-bytes refuses one that is too large (exit 15), with or without --fallback.
    """
    expect = _parse_expect(expect_pairs)
    accept = _parse_accept(accept_pairs)
    with _open(db) as handle, _progress("checking out", as_json or quiet) as progress:
        result = handle.checkout(
            checkpoint,
            directory,
            force=force,
            fallback=fallback,
            progress=progress,
            expect=expect,
            accept_schemas=accept,
            max_bytes=max_bytes,
        )
    degraded = result.disposition == "degraded_fallback"
    if as_json:
        _print_json(result)
    else:
        echo(
            f"checked out {result.checkpoint_id[:12]} ({result.files} files, "
            f"{_size(result.bytes)}) into {result.target}"
        )
    if degraded:
        echo(
            f"warning: fell back: {str(result.requested_id)[:12]} does not verify (or fails "
            f"your checks), so its newest usable ancestor {result.checkpoint_id[:12]} was "
            "checked out instead "
            f"(fallback receipt #{result.receipt_id}; `ckptdb receipts DB --kind fallback`)",
            err=True,
        )
        for r in result.rejected:
            echo(f"  rejected {r.checkpoint_id[:12]}: {r.code}", err=True)
        sys.exit(EXIT_DEGRADED)


@main.command()
@click.argument("db")
@click.option("--quick", is_flag=True, help="Structure, manifests and pointers; skip bytes.")
@quiet_option
@json_option
@command
def verify(db: str, quick: bool, quiet: bool, as_json: bool) -> None:
    """Verify the whole database; exit status 0 only when everything verifies."""
    with _open(db) as handle, _progress("verifying", as_json or quiet) as progress:
        report = handle.verify(quick=quick, progress=progress)
    if as_json:
        _print_json(report)
    else:
        state = "OK" if report.ok else f"FAILED: {len(report.problems)} problem(s)"
        echo(
            f"{state} -- sqlite {report.sqlite_integrity}; {report.checkpoints_checked} "
            f"checkpoints, {report.blobs_checked} blobs, {report.chunks_checked} chunks, "
            f"{_size(report.bytes_checked)} checked, {report.pointers_checked} pointers"
        )
        if report.problems:
            _table(
                ["problem", "namespace", "checkpoint", "entry", "detail"],
                [
                    [p.code, p.namespace, (p.checkpoint_id or "")[:12], p.entry, p.detail]
                    for p in report.problems
                ],
            )
    if not report.ok:
        sys.exit(5)


@main.command()
@click.argument("db")
@click.argument("query")
@click.option(
    "--param",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="Bind :NAME in QUERY to the text VALUE (repeatable).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=query_module.DEFAULT_TIMEOUT,
    show_default=True,
    help="Interrupt the query after SECONDS of work (0: no limit).",
)
@json_option
@click.option("--csv", "as_csv", is_flag=True, help="Print CSV.")
@command
def sql(
    db: str, query: str, params: tuple[str, ...], timeout: float, as_json: bool, as_csv: bool
) -> None:
    """Run one read-only SQL QUERY (writing statements are refused); rows are streamed.

    The file is opened read-only and anything that would write (INSERT/UPDATE/DELETE, DDL,
    ATTACH, VACUUM, transactions, pragmas that set a value) is refused before it runs (exit
    9). QUERY holds exactly one statement (exit 7 otherwise). --param NAME=VALUE binds :NAME
    (or $NAME, @NAME) to the text VALUE, e.g.
    `ckptdb sql DB "SELECT * FROM lineage WHERE namespace = :ns" --param ns=brain`; write
    CAST(:n AS INTEGER) where a number is needed. --timeout bounds SQLite's time on the
    query (exit 12); Ctrl-C interrupts it cleanly (exit 130). BLOBs print as x'..' (table,
    CSV) or {"hex": ".."} (JSON); JSON is always valid (a repeated column gets a suffix
    x:2; non-finite floats are the strings "Infinity", "-Infinity", "NaN"). An empty result
    still prints the header. The table shows at most 1,000 characters of a value (the rest
    is cut, marked with …, and said on stderr); --json and --csv print every value whole,
    streamed in pieces (memory stays about the size of the largest value). CSV writes
    values exactly as stored, control characters included; the table escapes them.
    """
    bound = cli_sql.parse_params(params)
    with _open(db, readonly=True) as handle:
        try:
            with handle.query_stream(query, bound, timeout=timeout or None) as result:
                cli_sql.emit(result, as_json=as_json, as_csv=as_csv, exit_code=exit_code)
        except KeyboardInterrupt:
            raise cli_sql.interrupted() from None


@main.command()
@click.argument("db")
@json_option
@command
def stats(db: str, as_json: bool) -> None:
    """File size, WAL size, free pages, counts and deduplication ratio.

    Then what each namespace holds: checkpoints, logical bytes (what quotas count) and
    stored bytes (of the distinct blobs and chunks it references; shared content counts in
    each namespace). The largest namespaces are shown; --json lists every one under
    `usage`."""
    with _open(db, readonly=True) as handle:
        st = handle.stats()
    if as_json:
        _print_json(st)
        return
    rows = [
        (
            "file",
            f"{_size(st.file_bytes)} ({st.page_count} pages of {st.page_size} B, "
            f"{st.free_pages} free)",
        ),
        ("wal", _size(st.wal_bytes)),
        ("schema version", st.schema_version),
        ("namespaces", st.namespaces),
        ("checkpoints", st.checkpoints),
        ("blobs", st.blobs),
        ("chunks", f"{st.chunks} (chunk size {_size(st.chunk_size)})"),
        ("logical bytes", _size(st.logical_bytes)),
        ("stored bytes", _size(st.stored_bytes)),
        ("dedup ratio", st.dedup_ratio),
    ]
    for key, value in rows:
        echo(f"{key:<15} {value}")
    if st.usage:
        shown = sorted(st.usage, key=lambda u: (-u.logical_bytes, u.namespace))[:STATS_NAMESPACES]
        echo("")
        _table(
            ["namespace", "checkpoints", "logical", "stored"],
            [
                [u.namespace, u.checkpoints, _size(u.logical_bytes), _size(u.stored_bytes)]
                for u in shown
            ],
        )
        if len(st.usage) > len(shown):
            echo(f"... and {len(st.usage) - len(shown)} more namespaces (--json lists all)")


@main.command(name="export")
@click.argument("db")
@click.argument("dest", type=click.Path())
@click.option("--namespace", "namespaces", multiple=True, help="Export only these (repeatable).")
@click.option("--since", metavar="CHECKPOINT", help="Only from this checkpoint forward.")
@quiet_option
@json_option
@command
def export_cmd(
    db: str, dest: str, namespaces: tuple[str, ...], since: str | None, quiet: bool, as_json: bool
) -> None:
    """Write a new self-contained ckptdb file DEST with the selected lineage."""
    with _open(db) as handle, _progress("exporting", as_json or quiet) as progress:
        receipt = handle.export(
            dest, namespaces=list(namespaces) or None, since=since, progress=progress
        )
    _transfer_output(receipt, as_json)


@main.command(name="import")
@click.argument("db")
@click.argument("source", type=click.Path(exists=True, dir_okay=False))
@click.option("--namespace", "namespaces", multiple=True, help="Import only these (repeatable).")
@click.option("--overwrite", is_flag=True, help="Move conflicting CURRENT pointers anyway.")
@quiet_option
@json_option
@command
def import_cmd(
    db: str, source: str, namespaces: tuple[str, ...], overwrite: bool, quiet: bool, as_json: bool
) -> None:
    """Merge the checkpoints of the ckptdb file SOURCE into DB (idempotent)."""
    with _open(db) as handle, _progress("importing", as_json or quiet) as progress:
        receipt = handle.import_file(
            source, namespaces=list(namespaces) or None, overwrite=overwrite, progress=progress
        )
    _transfer_output(receipt, as_json)
    if receipt.conflicts:
        sys.exit(4)


def _transfer_output(receipt: Any, as_json: bool) -> None:
    if as_json:
        _print_json(receipt)
        return
    echo(
        f"{receipt.kind}: {receipt.checkpoints_copied} checkpoints copied "
        f"({receipt.checkpoints_present} already present), {receipt.blobs_copied} blobs, "
        f"{_size(receipt.bytes_copied)} -> {receipt.destination}"
    )
    if receipt.pointers_moved:
        echo(f"CURRENT set for: {', '.join(receipt.pointers_moved)}")
    for c in receipt.conflicts:
        echo(
            f"conflict: {c.namespace}: CURRENT is {str(c.current)[:12]}, the source has "
            f"{c.incoming[:12]} (not an ancestor); left unchanged (use --overwrite)",
            err=True,
        )


@main.command()
@click.argument("db")
@click.argument("namespace")
@click.option("--limit", type=click.IntRange(min=1))
@json_option
@command
def history(db: str, namespace: str, limit: int | None, as_json: bool) -> None:
    """Show every move of NAMESPACE's CURRENT pointer, newest first."""
    with _open(db, readonly=True) as handle:
        moves = handle.history(namespace, limit=limit)
    if as_json:
        _print_json(moves)
        return
    _table(
        ["revision", "current", "fallback", "reason", "at"],
        [
            [m.revision, m.current_id[:12], (m.fallback_id or "")[:12], m.reason, _when(m.at)]
            for m in moves
        ],
    )


@main.command()
@click.argument("db")
@click.argument("source")
@click.argument("target")
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    help="Copy only the newest N checkpoints of SOURCE's lineage (the oldest becomes a root).",
)
@click.option("--reason", default="fork (cli)", show_default=True)
@json_option
@command
def fork(db: str, source: str, target: str, limit: int | None, reason: str, as_json: bool) -> None:
    """Copy the lineage of SOURCE's CURRENT into namespace TARGET (a fork).

    The copies share every blob with their sources (no byte is copied), keep their
    metadata and parent links, and land in one transaction; TARGET's CURRENT moves once, to
    the copy of SOURCE's CURRENT. Running it again copies nothing new.
    """
    with _open(db) as handle:
        lineage = handle.lineage(source, limit=limit)
        if not lineage:
            raise errors.NamespaceNotFoundError(
                f"namespace {source!r} has no CURRENT checkpoint to fork; see `ckptdb "
                "namespaces DB`",
                namespace=source,
            )
        report = handle.copy_checkpoints([c.id for c in reversed(lineage)], target, reason=reason)
    if as_json:
        _print_json(report)
        return
    echo(
        f"{target}: {len(report.copies)} checkpoint(s) of {source} copied ({report.created} new, "
        f"no blob bytes); CURRENT is {report.current_id}"
    )


@main.command(name="set-current")
@click.argument("db")
@click.argument("namespace")
@click.argument("checkpoint")
@click.option("--reason", default="set-current (cli)", show_default=True)
@click.option(
    "--no-verify",
    is_flag=True,
    help="Do not verify CHECKPOINT (and CURRENT) first; move anyway.",
)
@json_option
@command
def set_current(
    db: str, namespace: str, checkpoint: str, reason: str, no_verify: bool, as_json: bool
) -> None:
    """Move NAMESPACE's CURRENT to CHECKPOINT explicitly (e.g. roll back).

    CHECKPOINT is verified first (manifest and bytes) and refused if damaged. The old
    CURRENT becomes the fallback unless it is damaged: then the previous fallback is kept
    (or there is none), so a damaged checkpoint is never protected as the fallback.
    """
    with _open(db) as handle:
        before = handle.pointer(namespace)
        pointer = handle.set_current(
            namespace, handle.resolve(checkpoint), reason=reason, verify=not no_verify
        )
    if as_json:
        _print_json(pointer)
        return
    echo(f"{namespace}: CURRENT is now {pointer.current_id} (revision {pointer.revision})")
    fallback = pointer.fallback_id[:12] if pointer.fallback_id else "none"
    if before is not None and before.current_id not in (pointer.fallback_id, pointer.current_id):
        echo(
            f"fallback: {fallback} ({before.current_id[:12]} is damaged and was not made the "
            "fallback; see `ckptdb receipts DB --kind set_current`)"
        )
    else:
        echo(f"fallback: {fallback}")


@main.command()
@click.argument("db")
@click.option("--kind", help="Only receipts of this kind (fallback, verify, gc, import, ...).")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True)
@json_option
@command
def receipts(db: str, kind: str | None, limit: int, as_json: bool) -> None:
    """List stored receipts, newest first."""
    with _open(db, readonly=True) as handle:
        rows = handle.receipts(kind=kind, limit=limit)
    if as_json:
        _print_json(rows)
        return
    _table(
        ["id", "kind", "namespace", "checkpoint", "at", "body"],
        [
            [
                r.receipt_id,
                r.kind,
                r.namespace,
                (r.checkpoint_id or "")[:12],
                _when(r.at),
                _summary(r.body, 60),
            ]
            for r in rows
        ],
    )


def _policy(
    keep_last: int | None,
    keep_within: str | None,
    keep_every: int | None,
    keep_hourly: int | None,
    keep_daily: int | None,
    keep_weekly: int | None,
    keep_best: tuple[str, ...],
    keep_matching: tuple[str, ...],
) -> RetentionPolicy | None:
    """A policy from the --keep-* options, or None when none was given."""
    best = []
    for spec in keep_best:
        key, _, rest = spec.partition(":")
        n, _, mode = rest.partition(":")
        if not key or not n.isdigit() or mode not in ("", "min", "max"):
            raise errors.InvalidInputError(
                f"--keep-best expects KEY:N[:min|max] (e.g. loss:3:min), got {spec!r}"
            )
        best.append(KeepBest(key=key, n=int(n), mode=mode or "min"))  # type: ignore[arg-type]
    rules: dict[str, Any] = {
        "keep_last": keep_last,
        "keep_within": keep_within,
        "keep_every": keep_every,
        "keep_hourly": keep_hourly,
        "keep_daily": keep_daily,
        "keep_weekly": keep_weekly,
        "keep_best": tuple(best),
        "keep_matching": _parse_meta(keep_matching, None) or None,
    }
    given = {k: v for k, v in rules.items() if v not in (None, ())}
    return RetentionPolicy.build(**given) if given else None


def keep_options(fn: F) -> F:
    """The --keep-* options shared by `gc` and `retention set`."""
    options = [
        click.option(
            "--keep-last",
            type=click.IntRange(min=1),
            help="Keep CURRENT and its N-1 nearest ancestors.",
        ),
        click.option(
            "--keep-within",
            metavar="DURATION",
            help="Keep everything newer than DURATION (e.g. 36h, 7d, 2w).",
        ),
        click.option(
            "--keep-every",
            type=click.IntRange(min=1),
            help="Keep the newest of every N generations.",
        ),
        click.option(
            "--keep-hourly",
            type=click.IntRange(min=1),
            help="Keep the newest per hour for the last N hours that have one.",
        ),
        click.option(
            "--keep-daily",
            type=click.IntRange(min=1),
            help="Keep the newest per day for the last N days that have one.",
        ),
        click.option(
            "--keep-weekly",
            type=click.IntRange(min=1),
            help="Keep the newest per ISO week for the last N weeks that have one.",
        ),
        click.option(
            "--keep-best",
            multiple=True,
            metavar="KEY:N[:min|max]",
            help="Keep the best N by a numeric metadata key (repeatable).",
        ),
        click.option(
            "--keep-matching",
            multiple=True,
            metavar="KEY=VALUE",
            help="Keep checkpoints whose metadata has KEY=VALUE (repeatable).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@main.command()
@click.argument("db")
@keep_options
@click.option("--namespace", "namespaces", multiple=True, help="Only these (repeatable).")
@click.option(
    "--grace",
    default="1h",
    show_default=True,
    metavar="DURATION",
    help="Keep unreferenced chunks younger than this (in-flight publishes).",
)
@click.option("--dry-run", is_flag=True, help="Show the exact plan; change nothing.")
@click.option(
    "--keep-history",
    type=click.IntRange(min=1),
    metavar="N",
    help="Also trim each namespace's pointer history to its newest N moves.",
)
@quiet_option
@json_option
@command
def gc(
    db: str,
    keep_last: int | None,
    keep_within: str | None,
    keep_every: int | None,
    keep_hourly: int | None,
    keep_daily: int | None,
    keep_weekly: int | None,
    keep_best: tuple[str, ...],
    keep_matching: tuple[str, ...],
    namespaces: tuple[str, ...],
    grace: str,
    dry_run: bool,
    keep_history: int | None,
    quiet: bool,
    as_json: bool,
) -> None:
    """Delete what retention does not keep and return the space to the OS.

    With --keep-* options that policy applies to every namespace in scope; without them each
    namespace's stored policy (`ckptdb retention`) applies, and a namespace with none keeps
    everything. Every CURRENT, fallback and pin is always kept.
    """
    policy = _policy(
        keep_last,
        keep_within,
        keep_every,
        keep_hourly,
        keep_daily,
        keep_weekly,
        keep_best,
        keep_matching,
    )
    with (
        _open(db, readonly=dry_run) as handle,
        _progress("collecting", as_json or quiet) as progress,
    ):
        report = handle.gc(
            policy,
            namespaces=list(namespaces) or None,
            grace=grace,
            dry_run=dry_run,
            keep_history=keep_history,
            progress=progress,
        )
        unset = policy is None and not handle.retention()
    if as_json:
        _print_json(report)
        return
    if unset:
        echo(
            "no retention policy is set, so every checkpoint is kept; pass --keep-* rules "
            "(e.g. --keep-last 10 --keep-within 7d) or store a policy with "
            "`ckptdb retention set DB --keep-...`"
        )
    verb = "would delete" if report.dry_run else "deleted"
    echo(
        f"{verb} {report.checkpoints_deleted} of {report.checkpoints_examined} checkpoints "
        f"({report.checkpoints_kept} kept), {report.blobs_deleted} blobs, "
        f"{report.chunks_deleted} chunks: {_size(report.bytes_freed)} freed"
    )
    if not report.dry_run:
        echo(
            f"file {_size(report.file_bytes_before)} -> {_size(report.file_bytes_after)} "
            f"({report.pages_reclaimed} pages returned); receipt #{report.receipt_id}"
        )
    elif report.deleted_ids:
        for cid in report.deleted_ids[:20]:
            echo(f"  {cid}")
        if len(report.deleted_ids) > 20:
            echo(f"  ... and {len(report.deleted_ids) - 20} more (--json lists all)")


class _GroupDbLast(click.Group):
    """A command group used as ``ckptdb GROUP SUBCOMMAND DB [ARGS]`` (the one documented
    order for every group). ``ckptdb GROUP DB SUBCOMMAND`` is accepted as well."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if len(args) >= 2 and args[0] not in self.commands and args[1] in self.commands:
            args = [args[1], args[0], *args[2:]]
        return super().parse_args(ctx, args)


@main.group(cls=_GroupDbLast)
def retention() -> None:
    """Stored retention policies that `ckptdb gc` applies by default.

    Usage: ckptdb retention show|set|clear DB [OPTIONS].
    """


@retention.command(name="show")
@click.argument("db")
@json_option
@command
def retention_show(db: str, as_json: bool) -> None:
    """Show stored policies ('*' is the database-wide default)."""
    with _open(db, readonly=True) as handle:
        policies = handle.retention()
    rows = {
        scope: p.model_dump(exclude_defaults=True, mode="json") for scope, p in policies.items()
    }
    if as_json:
        _print_json(rows)
        return
    _table(["scope", "rules"], [[scope, json.dumps(r)] for scope, r in sorted(rows.items())])


@retention.command(name="set")
@click.argument("db")
@keep_options
@click.option("--namespace", help="Set the policy of one namespace (default: database-wide).")
@json_option
@command
def retention_set(
    db: str,
    keep_last: int | None,
    keep_within: str | None,
    keep_every: int | None,
    keep_hourly: int | None,
    keep_daily: int | None,
    keep_weekly: int | None,
    keep_best: tuple[str, ...],
    keep_matching: tuple[str, ...],
    namespace: str | None,
    as_json: bool,
) -> None:
    """Store a retention policy (at least one --keep-* rule)."""
    policy = _policy(
        keep_last,
        keep_within,
        keep_every,
        keep_hourly,
        keep_daily,
        keep_weekly,
        keep_best,
        keep_matching,
    )
    if policy is None:
        raise errors.InvalidInputError("give at least one --keep-* rule")
    with _open(db) as handle:
        handle.set_retention(policy, namespace=namespace)
    out = {
        "scope": namespace or "*",
        "policy": policy.model_dump(exclude_defaults=True, mode="json"),
    }
    if as_json:
        _print_json(out)
    else:
        echo(f"retention for {out['scope']}: {json.dumps(out['policy'])}")


@retention.command(name="clear")
@click.argument("db")
@click.option("--namespace", help="Clear one namespace's policy (default: database-wide).")
@json_option
@command
def retention_clear(db: str, namespace: str | None, as_json: bool) -> None:
    """Remove a stored policy."""
    with _open(db) as handle:
        removed = handle.clear_retention(namespace=namespace)
    if as_json:
        _print_json({"scope": namespace or "*", "removed": removed})
    else:
        echo(("removed" if removed else "no policy for") + f" {namespace or '*'}")


def _quota_limits(quota: Any) -> str:
    limits = []
    if quota.max_checkpoints is not None:
        limits.append(f"{quota.max_checkpoints} checkpoint(s)")
    if quota.max_bytes is not None:
        limits.append(f"{_size(quota.max_bytes)} ({quota.max_bytes} B)")
    return ", ".join(limits)


@main.group(cls=_GroupDbLast)
def quota() -> None:
    """Quotas: what the namespaces under a prefix may hold.

    Usage: ckptdb quota set|list|clear DB [PREFIX] [OPTIONS]. Every commit under PREFIX
    ('' = every namespace) is checked inside its transaction: one that would pass a limit
    is refused (exit 16, nothing written) or, with --on-exceed evict, the oldest
    checkpoints under the quota that nothing protects (CURRENT, fallbacks, pins, stored
    retention policies) are deleted to make room, with a quota_evict receipt.
    """


@quota.command(name="set")
@click.argument("db")
@click.argument("prefix")
@click.option("--max-checkpoints", type=int, help="At most this many stored checkpoints.")
@click.option(
    "--max-bytes", type=int, help="At most this many logical bytes (sum of checkpoint sizes)."
)
@click.option(
    "--applies-to",
    type=click.Choice(["each", "total"]),
    default="each",
    show_default=True,
    help="each: every namespace under PREFIX on its own; total: all of them together.",
)
@click.option(
    "--on-exceed",
    type=click.Choice(["refuse", "evict"]),
    default="refuse",
    show_default=True,
    help="Refuse the commit, or evict the oldest unprotected checkpoints to make room.",
)
@json_option
@command
def quota_set(
    db: str,
    prefix: str,
    max_checkpoints: int | None,
    max_bytes: int | None,
    applies_to: str,
    on_exceed: str,
    as_json: bool,
) -> None:
    """Store or replace the quota of PREFIX ('' = all).

    Give at least one limit. --json: the stored quota (prefix, applies_to, max_checkpoints,
    max_bytes, on_exceed, updated_at)."""
    with _open(db) as handle:
        stored = handle.set_quota(
            prefix,
            max_checkpoints=max_checkpoints,
            max_bytes=max_bytes,
            applies_to=applies_to,  # type: ignore[arg-type]
            on_exceed=on_exceed,  # type: ignore[arg-type]
        )
    if as_json:
        _print_json(stored)
    else:
        echo(
            f"quota {stored.prefix!r} ({stored.applies_to}): at most {_quota_limits(stored)}; "
            f"on exceed: {stored.on_exceed}"
        )


@quota.command(name="list")
@click.argument("db")
@json_option
@command
def quota_list(db: str, as_json: bool) -> None:
    """Show the stored quotas, by prefix.

    --json: a list of quotas."""
    with _open(db, readonly=True) as handle:
        stored = handle.quotas()
    if as_json:
        _print_json(stored)
        return
    _table(
        ["prefix", "applies to", "checkpoints", "bytes", "on exceed", "updated"],
        [
            [
                repr(q.prefix),
                q.applies_to,
                q.max_checkpoints,
                q.max_bytes,
                q.on_exceed,
                _when(q.updated_at),
            ]
            for q in stored
        ],
    )


@quota.command(name="clear")
@click.argument("db")
@click.argument("prefix")
@click.option(
    "--applies-to",
    type=click.Choice(["each", "total"]),
    default="each",
    show_default=True,
    help="Which quota of PREFIX to remove.",
)
@json_option
@command
def quota_clear(db: str, prefix: str, applies_to: str, as_json: bool) -> None:
    """Remove the quota of PREFIX.

    --json: prefix, applies_to, removed."""
    with _open(db) as handle:
        removed = handle.clear_quota(prefix, applies_to=applies_to)  # type: ignore[arg-type]
    if as_json:
        _print_json({"prefix": prefix, "applies_to": applies_to, "removed": removed})
    else:
        echo(("removed" if removed else "no") + f" quota {prefix!r} ({applies_to})")


@main.command()
@click.argument("db")
@click.argument("checkpoint")
@click.argument("name")
@click.option("--note", help="Why it is pinned.")
@click.option("--replace", is_flag=True, help="Move an existing pin of that name here.")
@json_option
@command
def pin(
    db: str, checkpoint: str, name: str, note: str | None, replace: bool, as_json: bool
) -> None:
    """Pin CHECKPOINT as NAME: protected from GC and every retention policy."""
    with _open(db) as handle:
        result = handle.pin(checkpoint, name, note=note, replace=replace)
    if as_json:
        _print_json(result)
    else:
        echo(f"pinned {result.checkpoint_id[:12]} ({result.namespace}) as {result.name}")


@main.command()
@click.argument("db")
@click.argument("name")
@json_option
@command
def unpin(db: str, name: str, as_json: bool) -> None:
    """Remove the pin NAME."""
    with _open(db) as handle:
        result = handle.unpin(name)
    if as_json:
        _print_json(result)
    else:
        echo(f"unpinned {result.name} ({result.checkpoint_id[:12]})")


@main.group(cls=_GroupDbLast)
def keys() -> None:
    """Manage encryption key scopes.

    Create, list, rotate and shred them. Keys come from --keys-file or --keys-env, given
    before the command: `ckptdb --keys-file k.json keys set DB tenant-a/ --key-id a`.
    """


def _scope_rows(rows: list[Any]) -> list[list[Any]]:
    return [
        [s.key_id, s.prefix, s.key_generation, "yes" if s.shredded else "", s.namespaces]
        for s in rows
    ]


_SCOPE_HEADERS = ["key id", "prefix", "generation", "shredded", "namespaces"]


@keys.command(name="list")
@click.argument("db")
@json_option
@command
def keys_list(db: str, as_json: bool) -> None:
    """List the key scopes (never any key material)."""
    with _open(db, readonly=True) as handle:
        rows = handle.key_scopes()
    if as_json:
        _print_json(rows)
        return
    _table(_SCOPE_HEADERS, _scope_rows(rows))


@keys.command(name="set")
@click.argument("db")
@click.argument("prefix")
@click.option("--key-id", required=True, help="The key (from --keys-file/--keys-env) to use.")
@json_option
@command
def keys_set(db: str, prefix: str, key_id: str, as_json: bool) -> None:
    """Encrypt every namespace under PREFIX from its first commit on."""
    with _open(db) as handle:
        scope = handle.set_encryption(prefix, key_id=key_id)
    if as_json:
        _print_json(scope)
        return
    echo(f"namespaces under {scope.prefix!r} are encrypted with key id {scope.key_id!r}")


@keys.command(name="rotate")
@click.argument("db")
@click.argument("key_id")
@click.option("--new-key-file", metavar="PATH", help="Key file holding the new key under KEY_ID.")
@click.option("--new-key-env", metavar="NAME", help="Environment variable holding it.")
@json_option
@command
def keys_rotate(
    db: str, key_id: str, new_key_file: str | None, new_key_env: str | None, as_json: bool
) -> None:
    """Re-wrap KEY_ID's data key under a new key (O(1): no data is rewritten)."""
    if (new_key_file is None) == (new_key_env is None):
        raise errors.InvalidKeyError("give exactly one of --new-key-file or --new-key-env")
    found = (
        keyfile.read_key_file(new_key_file)
        if new_key_file is not None
        else keyfile.read_key_env(str(new_key_env))
    )
    if key_id not in found:
        raise errors.InvalidKeyError(
            f"the new key source has no key for {keyids.shown(key_id)}"
        )
    with _open(db) as handle:
        scope = handle.rotate_key(key_id, found[key_id])
    if as_json:
        _print_json(scope)
        return
    echo(f"key id {key_id!r} re-wrapped: generation {scope.key_generation}")


@keys.command(name="shred")
@click.argument("db")
@click.argument("key_id")
@click.option("--yes", is_flag=True, help="Confirm: the scope's data is destroyed for good.")
@json_option
@command
def keys_shred(db: str, key_id: str, yes: bool, as_json: bool) -> None:
    """Crypto-shred KEY_ID: delete every namespace of its scope and its wrapped key."""
    if not yes:
        raise errors.InvalidInputError(
            f"shredding {keyids.shown(key_id)} destroys its data for good; add --yes to confirm"
        )
    with _open(db) as handle:
        report = handle.shred_key(key_id)
    if as_json:
        _print_json(report)
        return
    echo(
        f"shredded {key_id!r}: {len(report.namespaces)} namespaces, "
        f"{report.checkpoints_deleted} checkpoints deleted"
        + ("" if report.wal_truncated else " (WAL not yet truncated: a reader held it)")
    )


@main.command(name="pins")
@click.argument("db")
@click.option("--namespace", help="Only pins of this namespace.")
@json_option
@command
def pins_cmd(db: str, namespace: str | None, as_json: bool) -> None:
    """List pins with their checkpoints."""
    with _open(db, readonly=True) as handle:
        rows = handle.pins(namespace)
    if as_json:
        _print_json(rows)
        return
    _table(
        ["pin", "checkpoint", "namespace", "created", "note"],
        [[p.name, p.checkpoint_id[:12], p.namespace, _when(p.created_at), p.note] for p in rows],
    )


def _prune_output(report: Any, as_json: bool) -> None:
    if as_json:
        _print_json(report)
        return
    verb = "would delete" if report.dry_run else "deleted"
    echo(
        f"{verb} {report.checkpoints_deleted} checkpoints, {report.blobs_deleted} blobs, "
        f"{report.chunks_deleted} chunks: {_size(report.bytes_freed)} freed"
    )
    why = {"protected": "a CURRENT, a fallback or pinned"}
    for skip in report.skipped:
        echo(f"kept {skip.checkpoint_id[:12]}: {why.get(skip.code, skip.detail)}")


@main.command(name="drop-namespace")
@click.argument("db")
@click.argument("namespace")
@click.option("--force", is_flag=True, help="Also remove pins of its checkpoints.")
@click.option("--dry-run", is_flag=True, help="Show what would be deleted.")
@json_option
@command
def drop_namespace(db: str, namespace: str, force: bool, dry_run: bool, as_json: bool) -> None:
    """Delete NAMESPACE with its pointer, history and checkpoints."""
    with _open(db, readonly=dry_run) as handle:
        report = handle.drop_namespace(namespace, force=force, dry_run=dry_run)
    if not report.namespaces and not as_json:
        echo(f"nothing to drop: there is no namespace {namespace!r} (any more)")
        return
    _prune_output(report, as_json)


@main.command()
@click.argument("db")
@click.option(
    "--where",
    "where",
    multiple=True,
    required=True,
    metavar="KEY=VALUE",
    help="Metadata that must match (repeatable; VALUE parsed as JSON if valid).",
)
@click.option("--namespace", "namespaces", multiple=True, help="Only these (repeatable).")
@click.option("--dry-run", is_flag=True, help="Show what would be deleted.")
@json_option
@command
def prune(
    db: str, where: tuple[str, ...], namespaces: tuple[str, ...], dry_run: bool, as_json: bool
) -> None:
    """Delete checkpoints by metadata (e.g. --where run_id=r7); protected ones are kept."""
    with _open(db) as handle:
        report = handle.prune(
            _parse_meta(where, None), namespaces=list(namespaces) or None, dry_run=dry_run
        )
    _prune_output(report, as_json)


@main.group(cls=_GroupDbLast)
def migrate() -> None:
    """Inspect and apply schema migrations: status, plan, up, history.

    Usage: ckptdb migrate status|plan|up|history DB [OPTIONS].
    """


def _open_for_migration(db: str, readonly: bool = False, timeout: float = 30.0) -> Any:
    return _open(db, migrate="check", create=False, readonly=readonly, busy_timeout=timeout)


@migrate.command(name="status")
@click.argument("db")
@json_option
@command
def migrate_status(db: str, as_json: bool) -> None:
    """The file's version, this ckptdb's version and what is pending."""
    with _open_for_migration(db, readonly=True) as handle:
        status = handle.migration_status()
    if as_json:
        _print_json(status)
        return
    state = "up to date" if status.up_to_date else f"{len(status.pending)} pending"
    echo(
        f"{status.path}: schema version {status.file_version}, this ckptdb knows "
        f"{status.code_version} ({state})"
    )
    for m in status.pending:
        echo(f"  pending {m.version:04d}_{m.name}  {m.checksum[:12]}")
    for name, version in status.sets.items():
        if name != "core":
            echo(f"  migration set {name}: version {version}")


@migrate.command(name="plan")
@click.argument("db")
@click.option("--to", type=click.IntRange(min=1), help="Stop at this version.")
@json_option
@command
def migrate_plan(db: str, to: int | None, as_json: bool) -> None:
    """Print the SQL that `up` would run."""
    with _open_for_migration(db, readonly=True) as handle:
        plan = handle.migration_plan(to=to)
    if as_json:
        _print_json(plan)
        return
    if not plan:
        echo("-- nothing to do: the schema is up to date")
    for m in plan:
        echo(f"-- {m.migration_set} {m.version:04d}_{m.name} (sha256 {m.checksum})")
        block(m.sql or "")


@migrate.command(name="up")
@click.argument("db")
@click.option("--to", type=click.IntRange(min=1), help="Stop at this version.")
@click.option("--backup", "backup_path", type=click.Path(), help="Where to write the backup.")
@click.option("--no-backup", is_flag=True, help="Do not take a backup first.")
@click.option(
    "--timeout",
    default=30.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds to wait for another writer before refusing.",
)
@json_option
@command
def migrate_up(
    db: str,
    to: int | None,
    backup_path: str | None,
    no_backup: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Back up (verified), then apply pending migrations, each in its own transaction."""
    if backup_path and no_backup:
        raise errors.InvalidInputError("--backup and --no-backup exclude each other")
    backup: Any = False if no_backup else (backup_path or True)
    with _open_for_migration(db, timeout=timeout) as handle:
        result = handle.migrate(to=to, backup=backup)
    if as_json:
        _print_json(result)
        return
    if not result.applied:
        echo(f"nothing to do: {result.path} is at version {result.to_version}")
        return
    if result.backup_path:
        echo(f"backup (verified): {result.backup_path}")
    for m in result.applied:
        echo(f"applied {m.version:04d}_{m.name}")
    echo(f"{result.path}: version {result.from_version} -> {result.to_version}")


@migrate.command(name="history")
@click.argument("db")
@json_option
@command
def migrate_history(db: str, as_json: bool) -> None:
    """Applied migrations with checksum, time and the ckptdb version that applied them."""
    with _open_for_migration(db, readonly=True) as handle:
        rows = handle.migration_history()
    if as_json:
        _print_json(rows)
        return
    _table(
        ["set", "version", "name", "checksum", "applied at", "by ckptdb"],
        [
            [
                m.migration_set,
                m.version,
                m.name,
                m.checksum[:12],
                _when(m.applied_at),
                m.ckptdb_version,
            ]
            for m in rows
        ],
    )


@main.command(name="import-from")
@click.argument("kind", type=click.Choice(sorted(IMPORTERS)))
@click.argument("source", type=click.Path(exists=True))
@click.argument("db")
@click.option("--namespace", help="Namespace to import into (default: derived from the source).")
@click.option("--dry-run", is_flag=True, help="Report what would be imported; write nothing.")
@quiet_option
@json_option
@command
def import_from(
    kind: str,
    source: str,
    db: str,
    namespace: str | None,
    dry_run: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Import checkpoints from another store (idempotent: a second run imports nothing new).

    \b
    KIND is one of:
      fs-store          a content-addressed checkpoint directory (checkpoints/<id>/manifest.json,
                        files/<digest>, CURRENT)
      json-dir          a directory of one JSON document per checkpoint (one namespace per run)
      state-dir         an engine-state directory with a manifest written last
      langgraph-sqlite  a LangGraph SqliteSaver database (needs ckptdb[langgraph])
    """
    with _open(db) as handle, _progress("importing", as_json or quiet) as progress:
        report = run_import(
            handle, kind, source, namespace=namespace, dry_run=dry_run, progress=progress
        )
    if as_json:
        _print_json(report)
    else:
        _import_from_output(report)
    if report.skipped:
        sys.exit(EXIT_IMPORT_SKIPPED)


def _import_from_output(report: Any) -> None:
    new = sum(1 for i in report.imported if i.created)
    verb = "would import" if report.dry_run else "imported"
    echo(
        f"{verb} {new} checkpoints ({len(report.imported) - new} already present) "
        f"into {', '.join(report.namespaces) or '-'}; {len(report.skipped)} skipped"
    )
    for skip in report.skipped:
        echo(f"skipped {skip.source_id}: {skip.code}: {skip.detail}", err=True)


@main.command()
@click.argument("db", default="demo.ckpt")
@command
def demo(db: str) -> None:
    """Run the Quickstart tour on DB (default demo.ckpt); your data is never damaged."""
    for line in run_demo(db):
        echo(line)


# `ckptdb replicate` and `ckptdb restore` live with the replication code.
register_replication(main, command=command, json_option=json_option, print_json=_print_json)


@main.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script for SHELL.

    \b
    bash:  eval "$(ckptdb completion bash)"    (e.g. in ~/.bashrc)
    zsh:   eval "$(ckptdb completion zsh)"     (e.g. in ~/.zshrc)
    fish:  ckptdb completion fish > ~/.config/fish/completions/ckptdb.fish
    """
    cls = get_completion_class(shell)
    assert cls is not None  # the choices are the shells click supports
    # A script of ckptdb's own (no value from a file), which the shell must get exactly.
    click.echo(cls(main, {}, "ckptdb", "_CKPTDB_COMPLETE").source())


#: One short, whole sentence per command for `ckptdb --help` (click would cut the first
#: sentence of the docstring mid-way at 80 columns).
SHORT_HELP = {
    "cat": "Write the verified bytes of an entry to stdout.",
    "checkout": "Materialize a checkpoint into a directory.",
    "commit": "Commit files and directories as one checkpoint.",
    "completion": "Print the shell completion script.",
    "current": "Show the CURRENT checkpoint of a namespace.",
    "demo": "Run the Quickstart tour (your data is safe).",
    "diff": "Show what changed between two checkpoints.",
    "drop-namespace": "Delete a namespace and its checkpoints.",
    "export": "Write the selected lineage to a new ckptdb file.",
    "fork": "Copy a namespace's lineage, sharing its blobs.",
    "gc": "Delete what retention does not keep.",
    "history": "Show every move of a namespace's CURRENT.",
    "import": "Merge the checkpoints of another ckptdb file.",
    "import-from": "Import checkpoints from another kind of store.",
    "init": "Create an empty database.",
    "keys": "Create, list, rotate or shred encryption key scopes.",
    "log": "Show the lineage of a namespace (--graph, --all).",
    "migrate": "Inspect and apply schema migrations.",
    "namespaces": "List namespaces with their CURRENT checkpoint.",
    "pin": "Pin a checkpoint: protected from GC.",
    "pins": "List pins with their checkpoints.",
    "prune": "Delete checkpoints whose metadata matches.",
    "quota": "Set, list or clear quotas on namespace prefixes.",
    "receipts": "List stored receipts, newest first.",
    "replicate": "Replicate DB to a Litestream replica.",
    "restore": "Restore a Litestream replica into a new file.",
    "retention": "Show, set or clear stored retention policies.",
    "set-current": "Move CURRENT explicitly (e.g. roll back).",
    "show": "Show the manifest of a checkpoint.",
    "sql": "Run one read-only SQL query.",
    "stats": "Show sizes, counts, dedup and usage per namespace.",
    "unpin": "Remove a pin.",
    "verify": "Verify the whole database.",
}
for _name, _text in SHORT_HELP.items():
    main.commands[_name].short_help = _text


if __name__ == "__main__":
    main()
