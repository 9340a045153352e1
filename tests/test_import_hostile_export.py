"""Issue 12 section 2 (first bullet): ``import`` of a crafted export.

Every attack edits a real export file outside ckptdb (apsw), most of them *consistently*
(pointer digests and the history chain recomputed, manifests hashed through ckptdb's own
publish code), the way an attacker who read the source would. The import must refuse with
a typed error before anything is copied and leave the destination byte-for-byte unchanged;
with ``--namespace`` too (it used to crash with an AssertionError).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import raw_sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import canonical, errors
from ckptdb.cli import main


def digests(path: Path) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for suffix in ("", "-wal"):
        p = Path(str(path) + suffix)
        out[suffix or "db"] = hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None
    return out


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A sound export (namespaces alpha and beta) and a destination with content of its own."""
    base = tmp_path_factory.mktemp("hostile-export")
    with ckptdb.open(base / "src.ckpt", chunk_size=64 * 1024) as db:
        for i in range(3):
            db.commit("alpha", {"a.txt": f"alpha {i}".encode(), "big": bytes([i]) * 70_000})
        for i in range(2):
            db.commit("beta", {"b.txt": f"beta {i}".encode()})
        db.export(base / "export.ckpt")
    with ckptdb.open(base / "dst.ckpt") as db:
        db.commit("mine", {"m": b"mine"})
    return {"export": base / "export.ckpt", "dst": base / "dst.ckpt"}


def ids(path: Path, namespace: str) -> list[tuple[int, str]]:
    rows = raw_sql(
        path,
        "SELECT c.seq, c.id FROM checkpoint c JOIN namespace n USING (namespace_id)"
        " WHERE n.name = ? ORDER BY c.generation",
        (namespace,),
    )
    return [(int(r[0]), str(r[1])) for r in rows]  # type: ignore[call-overload]


def rechain(path: Path, namespace: str) -> None:
    """Recompute every pointer-history digest of ``namespace`` and its pointer from the
    stored fields, so the chain is consistent again (what a careful attacker does)."""
    (ns_id,) = raw_sql(path, "SELECT namespace_id FROM namespace WHERE name = ?", (namespace,))[0]
    previous: str | None = None
    rows = raw_sql(
        path,
        "SELECT revision, current_id, fallback_id FROM pointer_history WHERE namespace_id = ?"
        " ORDER BY revision",
        (ns_id,),
    )
    for revision, current, fallback in rows:
        digest = canonical.pointer_digest(namespace, revision, current, fallback, previous)  # type: ignore[arg-type]
        raw_sql(
            path,
            "UPDATE pointer_history SET previous_digest = ?, digest = ?"
            " WHERE namespace_id = ? AND revision = ?",
            (previous, digest, ns_id, revision),
        )
        previous_row = (revision, current, fallback, previous, digest)
        previous = digest
    revision, current, fallback, prev, digest = previous_row
    seq = raw_sql(path, "SELECT seq FROM checkpoint WHERE id = ?", (current,))[0][0]
    fseq = (
        raw_sql(path, "SELECT seq FROM checkpoint WHERE id = ?", (fallback,))[0][0]
        if fallback
        else None
    )
    raw_sql(
        path,
        "UPDATE pointer SET current_seq = ?, fallback_seq = ?, revision = ?, digest = ?,"
        " previous_digest = ? WHERE namespace_id = ?",
        (seq, fseq, revision, digest, prev, ns_id),
    )


def move_consistently(path: Path, namespace: str, current: str, fallback: str | None) -> None:
    """Append a well-chained pointer move of ``namespace`` to ``current``/``fallback``."""
    (ns_id,) = raw_sql(path, "SELECT namespace_id FROM namespace WHERE name = ?", (namespace,))[0]
    (last,) = raw_sql(
        path, "SELECT max(revision) FROM pointer_history WHERE namespace_id = ?", (ns_id,)
    )[0]
    raw_sql(
        path,
        "INSERT INTO pointer_history (namespace_id, revision, current_id, fallback_id,"
        " previous_digest, digest, reason, at_ms) VALUES (?, ?, ?, ?, NULL, '', 'evil', 0)",
        (ns_id, int(last) + 1, current, fallback),  # type: ignore[call-overload]
    )
    rechain(path, namespace)


def craft_checkpoint(path: Path, namespace: str, name: str, metadata_json: str) -> None:
    """Publish (consistently hashed) a checkpoint with any entry name / metadata text."""
    from conftest import engine, prepared_blob, publish_crafted

    with engine(path) as eng:
        blob = prepared_blob(eng, b"crafted")
        publish_crafted(eng, namespace, [(name, blob, None, None)], metadata_json, reason="x")


def loosen(path: Path, sql: str, params: tuple[Any, ...] = ()) -> None:
    """Run an UPDATE that CHECK constraints would refuse (a crafted file has no such
    scruples)."""
    raw_sql(path, "PRAGMA ignore_check_constraints = ON; " + sql, params)


DEEP = '{"a":' + "[" * 3000 + "]" * 3000 + "}"

ATTACKS: dict[str, Callable[[Path], None]] = {
    # pointers crossing namespaces, with the digest chain recomputed
    "current_of_other_namespace": lambda p: move_consistently(
        p, "alpha", ids(p, "beta")[-1][1], ids(p, "alpha")[-1][1]
    ),
    "fallback_of_other_namespace": lambda p: move_consistently(
        p, "alpha", ids(p, "alpha")[-1][1], ids(p, "beta")[0][1]
    ),
    "history_names_other_namespace": lambda p: (
        raw_sql(
            p,
            "UPDATE pointer_history SET current_id = ? WHERE revision = 1 AND namespace_id ="
            " (SELECT namespace_id FROM namespace WHERE name = 'alpha')",
            (ids(p, "beta")[0][1],),
        ),
        rechain(p, "alpha"),
    ),
    # pointers and history that do not match their digests
    "pointer_digest_altered": lambda p: raw_sql(
        p, "UPDATE pointer SET digest = ? WHERE revision > 0", ("0" * 64,)
    ),
    "pointer_revision_altered": lambda p: raw_sql(p, "UPDATE pointer SET revision = revision + 5"),
    "history_row_altered": lambda p: raw_sql(
        p, "UPDATE pointer_history SET reason = 'x', fallback_id = current_id WHERE revision = 2"
    ),
    "history_row_deleted": lambda p: raw_sql(p, "DELETE FROM pointer_history WHERE revision = 2"),
    "history_gap_rechained": lambda p: (
        raw_sql(p, "DELETE FROM pointer_history WHERE revision = 2"),
        rechain(p, "alpha"),
    ),
    "history_emptied": lambda p: raw_sql(p, "DELETE FROM pointer_history"),
    # rows a reader trusts without re-hashing
    "total_size_max": lambda p: raw_sql(p, "UPDATE checkpoint SET total_size = ?", (2**63 - 1,)),
    "total_size_off_by_one": lambda p: raw_sql(
        p, "UPDATE checkpoint SET total_size = total_size + 1 WHERE generation = 1"
    ),
    "total_size_negative": lambda p: loosen(p, "UPDATE checkpoint SET total_size = -1"),
    "entry_count_altered": lambda p: raw_sql(p, "UPDATE checkpoint SET entry_count = 7"),
    "created_at_far_future": lambda p: raw_sql(
        p, "UPDATE checkpoint SET created_at_ms = ?", (2**62,)
    ),
    "created_at_negative": lambda p: raw_sql(p, "UPDATE checkpoint SET created_at_ms = -5"),
    "generation_altered": lambda p: raw_sql(p, "UPDATE checkpoint SET generation = 40"),
    "blob_size_altered": lambda p: raw_sql(p, "UPDATE blob SET size = size + 1"),
    "namespace_renamed": lambda p: raw_sql(
        p, "UPDATE namespace SET name = 'gamma' WHERE name = 'beta'"
    ),
    # consistently hashed manifests with hostile content
    **{
        f"metadata_{label}": partial(
            craft_checkpoint, namespace="alpha", name="ok", metadata_json=text
        )
        for label, text in {
            "not_object": "[]",
            "not_json": "{nope",
            "non_canonical": '{"a": 1}',
            "nan": '{"a":NaN}',
            "infinity": '{"a":Infinity}',
            "deep": DEEP,
            "surrogate": '{"a":"\\ud800"}',
        }.items()
    },
    **{
        f"name_{label}": partial(craft_checkpoint, namespace="alpha", name=name, metadata_json="{}")
        for label, name in {
            "dotdot": "../escape",
            "absolute": "/etc/passwd",
            "inner_dotdot": "a/../../b",
            "nul": "x\x00y",
            "newline": "a\nb",
            "dot": "ok/./x",
        }.items()
    },
}


#: Attacks that damage only namespace beta.
BETA_ONLY = {"namespace_renamed"}


def run_import(dst: Path, export: Path, namespaces: list[str]) -> Any:
    args = ["import", str(dst), str(export), "--json"]
    for ns in namespaces:
        args += ["--namespace", ns]
    return CliRunner().invoke(main, args)


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("namespaces", [[], ["alpha"], ["alpha", "beta"]])
def test_a_crafted_export_is_refused_and_the_destination_is_unchanged(
    pristine: dict[str, Path], tmp_path: Path, attack: str, namespaces: list[str]
) -> None:
    export, dst = tmp_path / "export.ckpt", tmp_path / "dst.ckpt"
    shutil.copyfile(pristine["export"], export)
    shutil.copyfile(pristine["dst"], dst)
    ATTACKS[attack](export)
    before = digests(dst)
    result = run_import(dst, export, namespaces)
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        attack,
        result.exception,
    )
    out = json.loads(result.stdout)
    if attack in BETA_ONLY and namespaces == ["alpha"]:
        # The damage is in what was not asked for: alpha imports, soundly.
        assert result.exit_code == 0, out
        with ckptdb.open(dst) as db:
            assert db.verify().ok
        return
    if result.exit_code == 0:
        pytest.fail(f"{attack} with {namespaces}: imported {out}")
    assert result.exit_code in (3, 5, 6, 7), (result.exit_code, out)
    assert out["code"] in {
        "invalid_export",
        "corrupt",
        "namespace_not_found",
        "invalid_namespace",
    }, out
    assert digests(dst) == before, f"{attack}: the destination changed"
    with ckptdb.open(dst) as db:
        assert db.verify().ok
        assert [n.name for n in db.namespaces()] == ["mine"]


def test_a_sound_export_still_imports(pristine: dict[str, Path], tmp_path: Path) -> None:
    export, dst = tmp_path / "export.ckpt", tmp_path / "dst.ckpt"
    shutil.copyfile(pristine["export"], export)
    shutil.copyfile(pristine["dst"], dst)
    for namespaces in ([], ["alpha"], ["beta"]):
        result = run_import(dst, export, namespaces)
        assert result.exit_code == 0, result.stdout
    with ckptdb.open(dst) as db:
        assert db.verify().ok
        assert sorted(n.name for n in db.namespaces()) == ["alpha", "beta", "mine"]


def test_the_api_raises_the_typed_error(pristine: dict[str, Path], tmp_path: Path) -> None:
    export, dst = tmp_path / "export.ckpt", tmp_path / "dst.ckpt"
    shutil.copyfile(pristine["export"], export)
    shutil.copyfile(pristine["dst"], dst)
    ATTACKS["current_of_other_namespace"](export)
    with ckptdb.open(dst) as db, pytest.raises(errors.InvalidExportError) as caught:
        db.import_file(export, namespaces=["alpha"])
    assert "belongs to namespace 'beta'" in caught.value.message
    assert caught.value.details["problems"]


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    column=st.sampled_from(["total_size", "entry_count", "created_at_ms", "generation"]),
    value=st.one_of(
        st.integers(-(2**63), 2**63 - 1),
        st.sampled_from([0, 1, -1, 2**31, 2**53 + 1, 2**63 - 1]),
    ),
    which=st.integers(1, 3),
)
def test_any_out_of_place_value_is_refused_or_harmless(
    pristine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    column: str,
    value: int,
    which: int,
) -> None:
    """Random values in the columns a reader trusts: either refused with a typed error and
    the destination unchanged, or (a value equal to the true one) imported and verified."""
    box = tmp_path_factory.mktemp("v")
    export, dst = box / "export.ckpt", box / "dst.ckpt"
    shutil.copyfile(pristine["export"], export)
    shutil.copyfile(pristine["dst"], dst)
    loosen(
        export,
        f"UPDATE checkpoint SET {column} = ? WHERE generation = ? AND namespace_id ="
        " (SELECT namespace_id FROM namespace WHERE name = 'alpha')",
        (value, which),
    )
    before = digests(dst)
    result = run_import(dst, export, [])
    if result.exit_code == 0:
        with ckptdb.open(dst) as db:
            assert db.verify().ok
            assert all(cp.total_size >= 0 for cp in db.lineage("alpha"))
            db.stats()
        return
    assert result.exit_code in (5, 7), result.stdout
    assert json.loads(result.stdout)["code"] in ("invalid_export", "corrupt")
    assert digests(dst) == before
