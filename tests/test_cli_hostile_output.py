"""Issue 23, family 5a: a hostile file cannot drive the terminal of whoever inspects it.

A file crafted outside ckptdb (consistently hashed, so it verifies) holds namespaces, entry
names, media types, schema pins, metadata keys and values, pin names and notes, receipts,
history reasons, a code revision, quota prefixes, retention scopes and a key scope prefix
that carry terminal sequences: OSC 52 (write the clipboard), CSI (clear the screen), BEL,
the 8-bit CSI (U+009B), backspace, carriage return, a line separator and a right-to-left
override. Every command of the CLI -- enumerated from the click tree, so a new command is
covered (or fails here until it is given an invocation) -- runs on a copy of it, for people
and with --json, and no raw control character other than a newline reaches stdout or
stderr. --json stays exact: the same strings come back when it is parsed. The outputs meant
to be exact bytes (`cat`, `sql --csv`) are exact.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from conftest import engine, prepared_blob, publish_crafted, raw_sql

import ckptdb
from ckptdb import canonical
from ckptdb.cli import main
from ckptdb.retention import RetentionPolicy

#: OSC 52 clipboard write, CSI clear screen, BEL, 8-bit CSI, backspace, CR, U+2028, RLO.
EVIL = "\x1b]52;c;SGVsbG8=\x07\x1b[2J\x9b31m\x08\r\u2028\u202e"
HOSTILE_NS = "ns" + EVIL
ENTRY = "e" + EVIL
PIN = "pin" + EVIL
KEY = bytes(range(32))
#: Anything a terminal acts on (or that disguises text), except the newline between lines.
RAW_CONTROL = re.compile(
    "[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]"
)


def _craft(
    path: Path,
    namespace: str,
    entries: dict[str, bytes],
    metadata: dict[str, Any],
    *,
    labels: tuple[str | None, str | None] = (None, None),
    reason: str = "crafted",
    code_revision: str | None = None,
) -> str:
    """Publish a checkpoint through the publish internals, skipping every validation of
    names and labels, as a hostile writer would: the ids and pointer digests are right."""
    with engine(path) as eng:
        prepared = [
            (name, prepared_blob(eng, data), *labels) for name, data in sorted(entries.items())
        ]
        return publish_crafted(
            eng,
            namespace,
            prepared,
            canonical.dumps(metadata),
            reason=reason,
            code_revision=code_revision,
        ).checkpoint_id


def _build(path: Path, keys_file: Path) -> dict[str, str]:
    with ckptdb.open(path, keys={"k1": KEY}) as db:
        first = db.commit("plain", {"a.txt": b"1"}, metadata={"k" + EVIL: "v" + EVIL}).checkpoint_id
        db.set_encryption("sec/", key_id="k1")
        db.commit("sec/x", {"s": b"secret"})
        db.set_retention(RetentionPolicy(keep_last=3), namespace="plain")
        db.set_quota("q/", max_checkpoints=5)
    second = _craft(
        path,
        "plain",
        {ENTRY: b"2", "b": b"3"},
        {"m" + EVIL: [EVIL], "loss": 1},
        labels=("text/" + EVIL, "s" + EVIL + "/v1"),
        reason="r" + EVIL,
        code_revision="rev" + EVIL,
    )
    hostile = _craft(path, HOSTILE_NS, {ENTRY: b"4"}, {"x": EVIL}, reason="r" + EVIL)
    with ckptdb.open(path, keys={"k1": KEY}) as db:
        db.pin(first, "p1", note="note" + EVIL)
        db.pin(hostile, "p2")
        db.verify(quick=True)  # a receipt
    raw_sql(path, "UPDATE pin SET name = ? WHERE name = 'p1'", (PIN,))
    raw_sql(
        path,
        "INSERT INTO receipt (kind, namespace, checkpoint_id, at_ms, body, digest) "
        "VALUES (?, ?, NULL, 0, ?, ?)",
        ("k" + EVIL, HOSTILE_NS, json.dumps({"x" + EVIL: EVIL}), "0" * 64),
    )
    raw_sql(path, "UPDATE retention SET scope = ? WHERE scope = 'plain'", (HOSTILE_NS,))
    raw_sql(path, "UPDATE quota SET prefix = ?", ("q" + EVIL,))
    raw_sql(path, "UPDATE key_scope SET prefix = ?", ("sec" + EVIL + "/",))
    # Damage the hostile namespace's entry, so that verify names it in a problem.
    raw_sql(
        path,
        "UPDATE blob SET inline_data = X'00' WHERE blob_id = "
        "(SELECT b.blob_id FROM entries e JOIN blob b ON b.digest = e.digest"
        " WHERE e.name = ? AND e.checkpoint_id = ?)",
        (ENTRY, hostile),
    )
    keys_file.write_text(json.dumps({"k1": KEY.hex(), "k2": bytes(32).hex()}))
    keys_file.chmod(0o600)
    return {"first": first, "second": second, "hostile": hostile}


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("hostile")
    db = root / "hostile.ckpt"
    ids = _build(db, root / "keys.json")
    jsondir = root / "jsondir"
    jsondir.mkdir()
    (jsondir / ("doc" + EVIL.replace("\u2028", "") + ".json")).write_text("{}")
    (root / "file.txt").write_bytes(b"x")
    return {"root": root, "db": db, "ids": ids}


def _commands(group: click.Group = main, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    for name, cmd in sorted(group.commands.items()):
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name)


def _invocations(db: str, ids: dict[str, str], box: Path) -> dict[tuple[str, ...], list[list[str]]]:
    """Argument lists per command (each also run with --json when it has the option)."""
    first, second, hostile = ids["first"], ids["second"], ids["hostile"]
    copy = str(box / "copy.ckpt")
    return {
        ("cat",): [[db, second, ENTRY]],
        ("checkout",): [[db, second, str(box / "out")], [db, hostile, str(box / "o2")]],
        ("commit",): [[db, "plain", str(box.parent / "file.txt"), "--meta", "k=" + EVIL]],
        ("completion",): [["bash"]],
        ("current",): [[db, "plain"]],
        ("demo",): [[str(box / "demo.ckpt")]],
        ("diff",): [[db, first, second], [db, second, hostile]],
        ("drop-namespace",): [[db, "plain", "--dry-run"], [db, "plain"]],
        ("export",): [[db, copy]],
        ("fork",): [[db, "plain", "forked"]],
        ("gc",): [[db, "--keep-last", "1", "--dry-run"], [db], [db, "--keep-best", "loss:1"]],
        ("history",): [[db, "plain"]],
        ("import",): [[str(box / "other.ckpt"), db]],
        ("import-from",): [["json-dir", str(box.parent / "jsondir"), str(box / "imp.ckpt")]],
        ("init",): [[db]],
        ("keys", "list"): [[db]],
        ("keys", "rotate"): [[db, "k1", "--new-key-file", str(box.parent / "keys.json")]],
        ("keys", "set"): [[db, "tenant/", "--key-id", "k2"]],
        ("keys", "shred"): [[db, "k1", "--yes"]],
        ("langgraph", "expire"): [[db, "--ttl", "1d", "--dry-run"], [db, "--ttl", "1d"]],
        ("log",): [[db, "plain"], [db, "plain", "--graph", "--all"], [db, HOSTILE_NS]],
        ("migrate", "history"): [[db]],
        ("migrate", "plan"): [[db]],
        ("migrate", "status"): [[db]],
        ("migrate", "up"): [[db, "--no-backup"]],
        ("namespaces",): [[db]],
        ("pin",): [[db, hostile, "p3", "--note", "n"]],
        ("pins",): [[db]],
        ("prune",): [[db, "--where", "loss=1", "--dry-run"], [db, "--where", "loss=1"]],
        ("quota", "clear"): [[db, "q" + EVIL]],
        ("quota", "list"): [[db]],
        ("quota", "set"): [[db, "x/", "--max-checkpoints", "3"]],
        ("receipts",): [[db]],
        ("replicate",): [[db, "--to", "ftp://nowhere/" + EVIL]],
        ("restore",): [["file://" + str(box / "no-replica"), str(box / "restored.ckpt")]],
        ("retention", "clear"): [[db, "--namespace", "plain"]],
        ("retention", "set"): [[db, "--keep-last", "2"]],
        ("retention", "show"): [[db]],
        ("set-current",): [[db, "plain", first]],
        ("show",): [[db, second], [db, hostile]],
        ("sql",): [
            [db, "SELECT name FROM namespace"],
            [db, "SELECT * FROM entries"],
            [db, "SELECT * FROM pins"],
        ],
        ("stats",): [[db]],
        ("unpin",): [[db, PIN]],
        ("verify",): [[db], [db, "--quick"]],
    }


def _options(path: tuple[str, ...]) -> set[str]:
    cmd: click.Command = main
    for name in path:
        assert isinstance(cmd, click.Group)
        cmd = cmd.commands[name]
    return {opt for p in cmd.params for opt in getattr(p, "opts", [])}


def _fresh(template: dict[str, Any], box: Path) -> str:
    """A copy of the hostile file (each command may change it), and a second one to
    import from."""
    box.mkdir()
    db = box / "hostile.ckpt"
    for suffix in ("", "-wal"):
        source = Path(str(template["db"]) + suffix)
        if source.exists():
            shutil.copy(source, str(db) + suffix)
            shutil.copy(source, str(box / "other.ckpt") + suffix)
    return str(db)


def _run(argv: list[str], keys_file: Path) -> Any:
    # color=True: click strips some CSI sequences when the output is not a terminal; the
    # test sees exactly what a terminal would get.
    return CliRunner().invoke(
        main, ["--keys-file", str(keys_file), *argv], color=True, catch_exceptions=False
    )


@pytest.mark.parametrize("path", list(_commands()), ids=" ".join)
def test_no_raw_control_character_reaches_the_terminal(
    path: tuple[str, ...], template: dict[str, Any], tmp_path: Path
) -> None:
    box = tmp_path / "box"
    db = _fresh(template, box)
    invocations = _invocations(db, template["ids"], box)
    assert path in invocations, f"give `ckptdb {' '.join(path)}` an invocation in this test"
    keys_file = template["root"] / "keys.json"
    with_json = "--json" in _options(path)
    for argv in invocations[path]:
        for as_json in (False, True) if with_json else (False,):
            if as_json:  # a fresh copy: the first run may have changed the file
                shutil.rmtree(box)
                db = _fresh(template, box)
            result = _run([*path, *argv, *(["--json"] if as_json else [])], keys_file)
            assert result.exit_code != 1, (path, argv, result.stdout, result.stderr)
            if path == ("cat",):
                assert result.stdout_bytes == b"2"  # the entry's exact bytes
                continue
            for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
                found = RAW_CONTROL.search(text)
                assert found is None, (path, argv, as_json, stream, found, text[-2000:])
            if as_json and result.stdout.strip():
                json.loads(result.stdout)  # still one valid JSON document


def test_json_output_is_exact(template: dict[str, Any], tmp_path: Path) -> None:
    db = _fresh(template, tmp_path / "box")
    keys_file = template["root"] / "keys.json"
    names = json.loads(_run(["namespaces", db, "--json"], keys_file).stdout)
    assert HOSTILE_NS in {n["name"] for n in names}
    shown = json.loads(_run(["show", db, template["ids"]["second"], "--json"], keys_file).stdout)
    assert ENTRY in {e["name"] for e in shown["entries"]}
    assert shown["metadata"]["m" + EVIL] == [EVIL]
    pins = json.loads(_run(["pins", db, "--json"], keys_file).stdout)
    assert {p["name"] for p in pins} >= {PIN} and "note" + EVIL in {p["note"] for p in pins}
    rows = json.loads(_run(["sql", db, "SELECT name FROM namespace", "--json"], keys_file).stdout)
    assert HOSTILE_NS in {r["name"] for r in rows}


def test_human_output_shows_the_escapes(template: dict[str, Any], tmp_path: Path) -> None:
    db = _fresh(template, tmp_path / "box")
    out = _run(["namespaces", db], template["root"] / "keys.json").stdout
    assert "ns\\x1b]52;c;SGVsbG8=\\x07\\x1b[2J\\x9b31m\\x08\\r\\u2028\\u202e" in out


def test_csv_is_exact(template: dict[str, Any], tmp_path: Path) -> None:
    """CSV is for programs and has no escapes: values come back exactly as stored."""
    db = _fresh(template, tmp_path / "box")
    keys_file = template["root"] / "keys.json"
    out = _run(["sql", db, "SELECT name FROM namespace ORDER BY name", "--csv"], keys_file)
    rows = list(csv.reader(io.StringIO(out.stdout, newline="")))
    assert [HOSTILE_NS] in rows


def _printing_calls(tree: ast.AST) -> Iterator[tuple[str, ast.Call]]:
    """(enclosing function, call) for every click.echo/secho, print and .write call."""
    stack: list[tuple[ast.AST, str]] = [(tree, "")]
    while stack:
        node, function = stack.pop()
        if isinstance(node, ast.FunctionDef):
            function = node.name
        if isinstance(node, ast.Call):
            target = node.func
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
            owner = getattr(getattr(target, "value", None), "id", "")
            if (owner == "click" and name in ("echo", "secho")) or name in ("print", "write"):
                yield function, node
        stack.extend((child, function) for child in ast.iter_child_nodes(node))


def test_commands_print_only_through_the_renderer() -> None:
    """No command module prints around ckptdb.cli.output (the escaping renderer): the only
    exceptions are the completion script (ckptdb's own text), `cat` (an entry's exact
    bytes) and JSON already made safe by output.json_text. sql_output's writers are the
    streamed formats, tested above and in tests/test_sql_streaming.py."""
    package = Path(ckptdb.__file__).parent
    cli = package / "cli"
    modules = [
        p
        for p in package.rglob("*.py")
        if (p.is_relative_to(cli) or "import click" in p.read_text())
        and p not in (cli / "output.py", cli / "sql_output.py")
    ]
    assert cli / "checkpoints.py" in modules
    assert cli / "render" / "checkpoints.py" in modules
    offenders = []
    for path in modules:
        for function, call in _printing_calls(ast.parse(path.read_text())):
            first = call.args[0] if call.args else None
            safe_json = isinstance(first, ast.Call) and getattr(first.func, "id", "") == "json_text"
            if function not in ("completion", "cat") and not safe_json:
                offenders.append(f"{path.relative_to(package)}:{call.lineno}")
    assert offenders == [], f"print with cli.output.echo/table/print_json: {offenders}"
