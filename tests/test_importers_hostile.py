"""Issue 12 section 2: importers read hostile sources.

* fs-store: a symlink at any depth of the source (a directory or a file, pointing at a copy
  that even has the right digest) is never followed: nothing from outside the source is
  imported.
* json-dir: bad documents (deep or huge fields, control characters in ids, NaN, lone
  surrogates, FIFOs, symlinks, ...) are skipped one by one with their reason -- in the
  report, its --json and the receipt -- the good ones are imported, and the CLI's exit
  status (11) says that some were skipped.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_importers import STATES, make_doc, make_fs_store

import ckptdb
from ckptdb.cli import EXIT_IMPORT_SKIPPED, main
from ckptdb.importers import run_import

OUTSIDE_MARK = b"FROM OUTSIDE THE SOURCE"

# -- fs-store: symlinks at every depth ----------------------------------------------------

LINK_AT = ["checkpoints", "checkpoint_dir", "files_dir", "blob_file", "manifest", "CURRENT"]


def plant(root: Path, outside: Path, where: str, ids: list[str]) -> None:
    """Replace one path of the store by a symlink to an outside copy of it (a copy whose
    content is right, except for one file carrying OUTSIDE_MARK where digests allow)."""
    victim = {
        "checkpoints": root / "checkpoints",
        "checkpoint_dir": root / "checkpoints" / ids[-1],
        "files_dir": root / "checkpoints" / ids[-1] / "files",
        "blob_file": next((root / "checkpoints" / ids[-1] / "files").iterdir()),
        "manifest": root / "checkpoints" / ids[-1] / "manifest.json",
        "CURRENT": root / "CURRENT",
    }[where]
    copy = outside / f"copy-{where}"
    if victim.is_dir():
        shutil.copytree(victim, copy)
        shutil.rmtree(victim)
    else:
        shutil.copyfile(victim, copy)
        victim.unlink()
    (outside / "marker").write_bytes(OUTSIDE_MARK)
    victim.symlink_to(copy)


@pytest.mark.parametrize("where", LINK_AT)
@pytest.mark.parametrize("relative_link", [False, True])
def test_fs_store_never_follows_a_symlink_inside_the_source(
    tmp_path: Path, where: str, relative_link: bool
) -> None:
    root, outside = tmp_path / "store", tmp_path / "outside"
    outside.mkdir()
    ids = make_fs_store(root, STATES)
    plant(root, outside, where, ids)
    if relative_link:  # the same, as a relative link
        for p in root.rglob("*"):
            if p.is_symlink():
                target = os.readlink(p)
                p.unlink()
                p.symlink_to(os.path.relpath(target, p.parent))
    db_path = tmp_path / "d.ckpt"
    with ckptdb.open(db_path) as db:
        try:
            report = run_import(db, "fs-store", str(root))
        except ckptdb.errors.CkptdbError as exc:
            assert exc.code == "invalid_source", exc.to_dict()
            assert db.namespaces() == []
            return
        imported = {i.source_id for i in report.imported if i.checkpoint_id}
        # The checkpoint reached through the link is skipped; nothing else is lost.
        assert ids[-1] not in imported
        assert any(s.source_id == ids[-1] for s in report.skipped), report.skipped
        for info in db.lineage(report.namespaces[0]) if report.namespaces else []:
            cp = db.get(info.id)
            for name in cp.entries:
                assert OUTSIDE_MARK not in cp.read(name)


def test_fs_store_symlinked_root_is_refused(tmp_path: Path) -> None:
    make_fs_store(tmp_path / "store", STATES)
    (tmp_path / "link").symlink_to(tmp_path / "store")
    with ckptdb.open(tmp_path / "d.ckpt") as db, pytest.raises(ckptdb.errors.SourceError):
        run_import(db, "fs-store", str(tmp_path / "link"))


def test_fs_store_fifo_blob_does_not_block(tmp_path: Path) -> None:
    root = tmp_path / "store"
    ids = make_fs_store(root, STATES)
    blob = next((root / "checkpoints" / ids[-1] / "files").iterdir())
    blob.unlink()
    os.mkfifo(blob)
    with ckptdb.open(tmp_path / "d.ckpt") as db:
        report = run_import(db, "fs-store", str(root))
    assert any(s.source_id == ids[-1] for s in report.skipped)


# -- json-dir: bad documents are skipped and reported ---------------------------------------

GOOD = "good"


def bad_document(directory: Path, kind: str, index: int) -> str:
    """Write one hostile document; returns its file name."""
    cid = f"bad-{kind}-{index}"
    created = f"2026-01-01T10:00:{index % 60:02d}Z"
    if kind == "deep_schema":
        nested: Any = "x"
        for _ in range(100):
            nested = {"v": nested}
        make_doc(directory, cid, "run", created, schemaVersion=nested)
    elif kind == "huge_schema":
        make_doc(directory, cid, "run", created, schemaVersion="s" * 300_000)
    elif kind == "newline_run":
        make_doc(directory, cid, "run\nx", created)
    elif kind == "newline_id":
        name = f"bad-nl-{index}\n"
        doc = make_doc(directory, f"bad-tmp-{index}", "run", created)
        os.remove(directory / f"bad-tmp-{index}.json")
        doc = {k: v for k, v in doc.items() if k != "checkpointDigest"} | {"checkpointId": name}
        from ckptdb import canonical

        doc["checkpointDigest"] = (
            __import__("hashlib").sha256(canonical.dumps(doc).encode()).hexdigest()
        )
        (directory / f"{name}.json").write_text(json.dumps(doc))
        return f"{name}.json"
    elif kind == "long_run":
        make_doc(directory, cid, "r" * 5000, created)
    elif kind == "nan":
        (directory / f"{cid}.json").write_text(
            f'{{"checkpointId": "{cid}", "runId": "run", "createdAt": "{created}",'
            ' "checkpointDigest": "0", "x": NaN}'
        )
    elif kind == "surrogate":
        (directory / f"{cid}.json").write_text(
            f'{{"checkpointId": "{cid}", "runId": "run\\ud800", "createdAt": "{created}",'
            ' "checkpointDigest": "0"}'
        )
    elif kind == "deep_json":
        (directory / f"{cid}.json").write_text("[" * 100_000 + "]" * 100_000)
    elif kind == "not_utf8":
        (directory / f"{cid}.json").write_bytes(b'{"checkpointId": "\xff\xfe"}')
    elif kind == "fifo":
        os.mkfifo(directory / f"{cid}.json")
    elif kind == "symlink":
        outside = directory.parent / f"outside-{index}"
        outside.mkdir(exist_ok=True)
        make_doc(outside, cid, "run", created)
        (directory / f"{cid}.json").symlink_to(outside / f"{cid}.json")
    elif kind == "directory":
        (directory / f"{cid}.json").mkdir()
    elif kind == "bad_time":
        make_doc(directory, cid, "run", "yesterday")
    elif kind == "tampered":
        doc = make_doc(directory, cid, "run", created)
        (directory / f"{cid}.json").write_text(json.dumps({**doc, "summary": "changed"}))
    elif kind == "control_in_created":
        make_doc(directory, cid, "run", created + "\x07")
    else:
        raise AssertionError(kind)
    return f"{cid}.json"


BAD_KINDS = [
    "deep_schema", "huge_schema", "newline_run", "newline_id", "long_run", "nan", "surrogate",
    "deep_json", "not_utf8", "fifo", "symlink", "directory", "bad_time", "tampered",
    "control_in_created",
]  # fmt: skip


@settings(
    max_examples=int(os.environ.get("CKPTDB_FUZZ_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    layout=st.lists(st.sampled_from([GOOD, *BAD_KINDS]), min_size=1, max_size=8),
    as_cli=st.booleans(),
)
def test_json_dir_skips_and_reports_each_bad_document(
    tmp_path_factory: pytest.TempPathFactory, layout: list[str], as_cli: bool
) -> None:
    box = tmp_path_factory.mktemp("jd")
    src = box / "docs"
    src.mkdir()
    good: list[str] = []
    bad: dict[str, str] = {}
    for index, kind in enumerate(layout):
        if kind == GOOD:
            cid = f"good-{index}"
            make_doc(src, cid, "run", f"2026-01-01T09:00:{index:02d}Z")
            good.append(cid)
        else:
            bad[bad_document(src, kind, index)] = kind
    db_path = box / "d.ckpt"
    if as_cli:
        result = CliRunner().invoke(
            main, ["import-from", "json-dir", str(src), str(db_path), "--create", "--json"]
        )
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            result.exception
        )
        assert result.exit_code == (EXIT_IMPORT_SKIPPED if bad else 0), result.stdout
        report = json.loads(result.stdout)
        skipped = {s["source_id"]: s for s in report["skipped"]}
    else:
        with ckptdb.open(db_path) as db:
            rep = run_import(db, "json-dir", str(src))
        skipped = {s.source_id: s.model_dump() for s in rep.skipped}
    assert set(skipped) == set(bad), (skipped, bad)
    for item in skipped.values():
        assert item["code"] and item["detail"], item
    with ckptdb.open(db_path) as db:
        imported = [c.metadata["source_id"] for c in reversed(db.lineage("run"))] if good else []
        assert imported == good
        receipts = db.receipts(kind="import-from")
        assert receipts, "a receipt is stored even when documents were skipped"
        body = receipts[0].body
        assert {s["source_id"] for s in body["skipped"]} == set(bad)
        assert db.verify().ok
