"""Issue 17 (the operator's day) and issue 12 section 6 (fallback and rollback that never
hide damage): references, diff, log --graph/--all, byte progress, set_current, checkout
--fallback, and the rough edges -- against real files, through the library and the CLI."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conftest import raw_sql
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ckptdb
from ckptdb import errors, validation
from ckptdb.cli import SHORT_HELP, main
from ckptdb.ops.graph import layout
from ckptdb.references import format_reference, needs_anchor, parse_reference


def run(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert result.exit_code == code, (result.exit_code, result.output, result.stderr)
    return result


def run_json(*args: str, code: int = 0) -> Any:
    return json.loads(run(*args, "--json", code=code).stdout)


def _valid_namespace(text: str) -> bool:
    try:
        validation.namespace(text)
    except errors.InvalidNamespaceError:
        return False
    return True


namespaces = st.text(alphabet=st.sampled_from("ab09f~@-/_. é"), min_size=1, max_size=20).filter(
    _valid_namespace
)


# -- the reference grammar ------------------------------------------------------------


@given(namespaces, st.sampled_from(["current", "fallback"]), st.integers(0, 10**6))
def test_reference_round_trip(namespace: str, anchor: Any, back: int) -> None:
    parsed = parse_reference(format_reference(namespace, anchor, back))
    assert (parsed.namespace, parsed.anchor, parsed.back, parsed.id_prefix) == (
        namespace,
        anchor,
        back,
        None,
    )


@given(namespaces)
def test_explicit_current_always_names_the_namespace(namespace: str) -> None:
    parsed = parse_reference(namespace + "@current")
    assert parsed.namespace == namespace and parsed.back == 0
    if not needs_anchor(namespace):
        assert parse_reference(namespace) == parsed


@pytest.mark.parametrize("bad", ["", " x", "x ", "a\x00b", "x@current ", 5])
def test_malformed_references_are_refused(bad: Any) -> None:
    with pytest.raises(errors.InvalidReferenceError):
        parse_reference(bad)


def test_bare_namespace_and_escaping_in_a_database(db: ckptdb.Database) -> None:
    names = ["brain-1", "team@eu", "run~3", "deadbeef", "x@fallback", "a~b"]
    heads = {}
    for ns in names:
        db.commit(ns, {"f": ns.encode()})
        heads[ns] = db.commit(ns, {"f": ns.encode() + b"2"}).checkpoint_id
    for ns in names:
        assert db.resolve(format_reference(ns)) == heads[ns]
        assert db.resolve(ns + "@current") == heads[ns]
        assert db.resolve(format_reference(ns, "current", 1)) == db.resolve(ns + "@fallback")
    assert db.resolve("brain-1") == heads["brain-1"]
    assert db.resolve("a~b") == heads["a~b"]  # ~ not followed by digits: part of the name
    with pytest.raises(errors.CheckpointNotFoundError, match="deadbeef@current"):
        db.resolve("deadbeef")  # a hex prefix first; the message says how to name the namespace
    assert db.resolve("run~3~0") == heads["run~3"]  # each suffix is read once, from the right
    with pytest.raises(errors.NamespaceNotFoundError):
        db.resolve("run~3")  # three back in namespace "run", which does not exist


def test_cli_cat_with_a_bare_namespace(tmp_path: Path) -> None:
    db = tmp_path / "r.ckpt"
    (tmp_path / "file").write_bytes(b"hello")
    run("commit", str(db), "brain-1", str(tmp_path / "file"), "-q", "--create")
    assert run("cat", str(db), "brain-1", "file").stdout_bytes == b"hello"


# -- diff -----------------------------------------------------------------------------

entry_maps = st.dictionaries(
    st.sampled_from(["a", "b", "c/d", "e.json"]), st.binary(max_size=40), max_size=4
)
metadata_maps = st.dictionaries(
    st.sampled_from(["turn", "who", "loss"]), st.integers(0, 3) | st.text(max_size=3), max_size=3
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(entry_maps, metadata_maps, entry_maps, metadata_maps)
def test_diff_properties(
    tmp_path: Path,
    ea: dict[str, bytes],
    ma: dict[str, Any],
    eb: dict[str, bytes],
    mb: dict[str, Any],
) -> None:
    path = tmp_path / f"d{os.getpid()}-{len(list(tmp_path.iterdir()))}.ckpt"
    with ckptdb.open(path) as db:
        a = db.commit("one", ea, metadata=ma).checkpoint_id
        b = db.commit("two", eb, metadata=mb).checkpoint_id
        same = db.diff(a, a)
        assert same.empty and same.relation == "same" and same.unchanged == len(ea)
        ab, ba = db.diff(a, b), db.diff(b, a)
    mirror = {"added": "removed", "removed": "added", "changed": "changed"}
    assert [(e.name, mirror[e.change], e.size_b, e.size_a) for e in ab.entries] == [
        (e.name, e.change, e.size_a, e.size_b) for e in ba.entries
    ]
    assert [(m.key, mirror[m.change], m.b, m.a) for m in ab.metadata] == [
        (m.key, m.change, m.a, m.b) for m in ba.metadata
    ]
    assert ab.unchanged == ba.unchanged
    assert ab.relation == ba.relation == "unrelated"
    changed = {n for n in ea.keys() & eb.keys() if ea[n] != eb[n]}
    assert {e.name for e in ab.entries} == changed | (ea.keys() ^ eb.keys())
    assert ab.empty == (ea == eb and ma == mb)


def test_diff_relations_and_shared_bytes(tmp_path: Path) -> None:
    with ckptdb.open(tmp_path / "rel.ckpt", chunk_size=64 * 1024) as db:
        chunk = 64 * 1024
        big = os.urandom(chunk * 6)
        root = db.commit("ns", {"big": big, "small": b"x"}, metadata={"turn": 1}).checkpoint_id
        grown = big[: chunk * 5] + b"\x00" * chunk  # last chunk changed: 5 of 6 shared
        mid = db.commit("ns", {"big": grown, "small": b"x"}, metadata={"turn": 2}).checkpoint_id
        tip = db.commit("ns", {"big": grown, "new": b"n"}).checkpoint_id
        fork = db.commit("ns", {"big": big}, base=root).checkpoint_id
        other = db.commit("elsewhere", {"big": big}).checkpoint_id
        d = db.diff(root, mid)
        assert d.relation == "ancestor" and d.generations_b == 1
        (big_change,) = [e for e in d.entries if e.name == "big"]
        assert big_change.change == "changed" and big_change.bytes_shared == chunk * 5
        assert d.metadata[0].key == "turn" and (d.metadata[0].a, d.metadata[0].b) == (1, 2)
        assert db.diff(mid, root).relation == "descendant"
        sib = db.diff(tip, fork)
        assert sib.relation == "siblings" and sib.common_ancestor_id == root
        assert (sib.generations_a, sib.generations_b) == (2, 1)
        assert db.diff(fork, other).relation == "unrelated"
        assert db.diff(fork, other).entries == []  # same content in another lineage
        path = str(db.path)
    out = run_json("diff", path, mid, tip)
    assert out["relation"] == "ancestor"
    assert {e["name"]: e["change"] for e in out["entries"]} == {"new": "added", "small": "removed"}
    text = run("diff", path, root, mid).stdout
    assert (
        "A is an ancestor of B" in text and "shared" in text and "metadata ~ turn: 1 -> 2" in text
    )


# -- log --graph / --all --------------------------------------------------------------


def test_layout_is_git_like() -> None:
    drawn = layout([("c3", "c2"), ("b2", "c1"), ("c2", "c1"), ("c1", None)])
    assert [lines for _, lines in drawn] == [["*"], ["| *"], ["* |"], ["|/", "*"]]
    assert [col for col, _ in drawn] == [0, 1, 0, 0]


def test_log_graph_and_all(tmp_path: Path) -> None:
    path = tmp_path / "g.ckpt"
    with ckptdb.open(path) as db:
        ids = [db.commit("brain", {"f": str(i)}).checkpoint_id for i in range(3)]
        db.pin(ids[2], "old-tip")
        branch = db.commit("brain", {"f": "branch"}, base=ids[1]).checkpoint_id
        tip = db.commit("brain", {"f": "branch2"}).checkpoint_id
        full = db.log("brain", all=True)
        assert [n.id for n in full.nodes][:2] == [tip, branch]
        by_id = {n.id: n for n in full.nodes}
        assert not by_id[ids[2]].on_lineage and by_id[ids[2]].pins == ["old-tip"]
        assert by_id[tip].markers == ["current"] and by_id[branch].markers == ["fallback"]
        assert any("/" in line for n in full.nodes for line in n.graph)
        default = db.log("brain")
        assert ids[2] not in {n.id for n in default.nodes}  # pinned, off every lineage shown
    plain = run_json("log", str(path), "brain")
    assert [n["id"] for n in plain] == [tip, branch, ids[1], ids[0]]
    every = run_json("log", str(path), "brain", "--all")
    assert {n["id"] for n in every} == {tip, branch, *ids}
    graph = run("log", str(path), "brain", "--graph", "--all").stdout
    assert "|/" in graph and "(pin: old-tip)" in graph and "(CURRENT)" in graph
    assert "o" in run("log", str(path), "brain", "--all").stdout.split(ids[2][:12])[0][-6:]


# -- set_current and checkout --fallback (issue 12 section 6) -------------------------


def _damage(path: Path, content: bytes) -> None:
    raw_sql(path, "UPDATE blob SET inline_data = x'00' WHERE inline_data = ?", (content,))


@pytest.mark.parametrize("verify", [True, False])
def test_rollback_from_damaged_current_keeps_it_out_of_the_fallback(
    tmp_path: Path, verify: bool
) -> None:
    path = tmp_path / "rb.ckpt"
    with ckptdb.open(path) as db:
        a = db.commit("ns", {"f": b"one"}).checkpoint_id
        b = db.commit("ns", {"f": b"two"}).checkpoint_id
        c = db.commit("ns", {"f": b"three"}).checkpoint_id
        db.set_current("ns", b)  # an ordinary rollback: the old CURRENT is the fallback
        assert db.pointer("ns").fallback_id == c  # type: ignore[union-attr]
        db.set_current("ns", c)
    _damage(path, b"three")
    with ckptdb.open(path) as db:
        result = db.load("ns", fallback=True)  # the receipt that says c is damaged
        assert result.checkpoint.id == b
        with pytest.raises(errors.CorruptionError) as refused:
            db.set_current("ns", c)  # a damaged target is refused (nothing moves)
        assert "does not verify" in refused.value.message
        ptr = db.set_current("ns", a, verify=verify)
        assert ptr.current_id == a and ptr.fallback_id == b  # the previous intact fallback
        assert db.resolve("ns@fallback") == b
        (receipt,) = db.receipts(kind="set_current")
        assert receipt.body["from_id"] == c and receipt.body["fallback_id"] == b
        db.set_current("ns", c, verify=False)  # told not to verify: moves anyway
        assert db.current("ns").id == c  # type: ignore[union-attr]


def test_rollback_to_the_fallback_leaves_no_damaged_fallback(tmp_path: Path) -> None:
    path = tmp_path / "rb2.ckpt"
    with ckptdb.open(path) as db:
        db.commit("ns", {"f": b"one"})
        b = db.commit("ns", {"f": b"two"}).checkpoint_id
        db.commit("ns", {"f": b"three"})
    _damage(path, b"three")
    out = run_json("set-current", str(path), "ns", "ns@fallback")
    assert out["current_id"] == b and out["fallback_id"] is None
    with ckptdb.open(path) as db, pytest.raises(errors.NotFoundError):
        db.resolve("ns@fallback")
    text = run("set-current", str(path), "ns", "ns~1").stdout
    assert "fallback:" in text


def test_set_current_no_verify_flag(tmp_path: Path) -> None:
    path = tmp_path / "nv.ckpt"
    with ckptdb.open(path) as db:
        a = db.commit("ns", {"f": b"one"}).checkpoint_id
        db.commit("ns", {"f": b"two"})
    _damage(path, b"one")
    assert run_json("set-current", str(path), "ns", a, code=5)["code"] == "corrupt"
    assert run_json("set-current", str(path), "ns", a, "--no-verify")["current_id"] == a


# -- byte progress --------------------------------------------------------------------


def test_progress_is_in_bytes(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(64 * 1024 * 5 + 7))
    calls: list[tuple[int, int]] = []
    with ckptdb.open(tmp_path / "p.ckpt", chunk_size=64 * 1024) as db:
        db.commit("ns", {"big": big, "small": b"abc"}, progress=lambda d, t: calls.append((d, t)))
        total = big.stat().st_size + 3
        assert calls[-1] == (total, total) and len(calls) > 5
        assert all(d2 >= d1 for (d1, _), (d2, _) in itertools.pairwise(calls))
        out: list[tuple[int, int]] = []
        db.checkout("ns", tmp_path / "out", progress=lambda d, t: out.append((d, t)))
        assert out[-1] == (total, total) and len(out) > 5
        exported: list[tuple[int, int]] = []
        db.export(tmp_path / "e.ckpt", progress=lambda d, t: exported.append((d, t)))
        assert exported[-1] == (total, total) and len(exported) > 5
        phases: list[tuple[str, int, int]] = []
        db.verify(progress=lambda p, d, t: phases.append((p, d, t)))
        chunked = [c for c in phases if c[0] == "chunk bytes"]
        assert chunked and chunked[-1][1] == chunked[-1][2] >= 64 * 1024 * 5


def test_no_progress_bar_when_not_a_terminal_or_quiet(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x" * 1000)
    run("init", str(tmp_path / "q.ckpt"))
    result = run("commit", str(tmp_path / "q.ckpt"), "ns", str(tmp_path / "f"))
    assert result.stderr == ""
    result = run("verify", str(tmp_path / "q.ckpt"), "--quiet")
    assert result.stderr == ""


# -- rough edges ----------------------------------------------------------------------


def test_gc_dry_run_read_only_and_without_policy(tmp_path: Path) -> None:
    path = tmp_path / "gc.ckpt"
    with ckptdb.open(path) as db:
        for i in range(3):
            db.commit("ns", {"f": str(i)})
    with ckptdb.open(path, readonly=True) as db:
        plan = db.gc(ckptdb.RetentionPolicy(keep_last=1), dry_run=True)
        assert plan.dry_run and plan.checkpoints_deleted == 1  # CURRENT and fallback kept
        with pytest.raises(errors.ReadOnlyError):
            db.gc(ckptdb.RetentionPolicy(keep_last=1))
    text = run("gc", str(path), "--dry-run").stdout
    assert "no retention policy is set" in text and "--keep-" in text
    assert "no retention policy" not in run("gc", str(path), "--dry-run", "--keep-last", "1").stdout


def test_drop_namespace_is_re_runnable(tmp_path: Path) -> None:
    path = tmp_path / "drop.ckpt"
    with ckptdb.open(path) as db:
        db.commit("gone", {"f": b"1"})
    assert "deleted 1 checkpoints" in run("drop-namespace", str(path), "gone").stdout
    assert "nothing to drop" in run("drop-namespace", str(path), "gone").stdout
    assert run_json("drop-namespace", str(path), "gone")["namespaces"] == []


def test_one_order_for_command_groups(tmp_path: Path) -> None:
    path = str(tmp_path / "grp.ckpt")
    run("init", path)
    assert run_json("migrate", "status", path)["up_to_date"] is True
    assert run_json("migrate", path, "status")["up_to_date"] is True  # the other order too
    run("retention", "set", path, "--keep-within", "7d")
    assert run_json("retention", "show", path) == {"*": {"keep_within": 604800}}
    assert run_json("retention", path, "show") == {"*": {"keep_within": 604800}}
    assert run_json("retention", "clear", path)["removed"] is True


def test_keep_within_one_name(tmp_path: Path) -> None:
    policy = ckptdb.RetentionPolicy(keep_within="7d")
    assert policy.keep_within == 7 * 86400
    assert not hasattr(policy, "keep_within_seconds")  # one name (stored old ones still read)
    assert (
        ckptdb.RetentionPolicy.model_validate_json('{"keep_within_seconds": 60}').keep_within == 60
    )
    assert "keep_within_seconds" not in policy.model_dump_json()
    with pytest.raises(errors.InvalidInputError):
        ckptdb.RetentionPolicy(keep_within="soon")


def test_one_name_per_concept(db: ckptdb.Database) -> None:
    ack = db.commit("ns", {"x": ckptdb.Entry(b"1", schema_pin="v/1", media_type="text/plain")})
    assert not hasattr(ack, "committed_at")
    assert "created_at" in ack.model_dump() and "committed_at" not in ack.model_dump()
    assert db.current("ns").info.entries[0].schema_pin == "v/1"  # type: ignore[union-attr]
    with pytest.raises(TypeError):
        ckptdb.Entry(b"1", schema="v/1")  # type: ignore[call-arg]  # the old name is gone


def test_cli_errors_speak_cli(tmp_path: Path) -> None:
    path = tmp_path / "w.ckpt"
    with ckptdb.open(path) as db:
        a = db.commit("ns", {"f": b"1"}).checkpoint_id
        b = db.commit("ns", {"f": b"2"}).checkpoint_id
        db.pin(a, "keep")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    messages = [
        run("pin", str(path), b, "keep", code=4).stderr,
        run("checkout", str(path), "ns", str(tmp_path / "full"), code=7).stderr,
    ]
    for text in messages:
        assert "=True" not in text and "(--" not in text, text


def test_help_summaries_are_whole_sentences() -> None:
    text = run("--help").stdout
    assert "..." not in text.split("Commands:")[1].split("Exit status")[0]
    assert set(SHORT_HELP) == set(main.commands)
    assert all(len(t) <= 55 and t.endswith(".") for t in SHORT_HELP.values())
    assert "13 succeeded degraded" in text


def test_empty_sql_result_prints_a_header(tmp_path: Path) -> None:
    path = str(tmp_path / "s.ckpt")
    run("init", path)
    out = run("sql", path, "SELECT name, note FROM pin").stdout.splitlines()
    assert out[0].split() == ["name", "note"] and set(out[1]) <= {"-", " "}
    assert run("sql", path, "SELECT name, note FROM pin", "--csv").stdout == "name,note\n"
    assert json.loads(run("sql", path, "SELECT name FROM pin", "--json").stdout) == []


def test_show_prints_human_sizes(tmp_path: Path) -> None:
    path = tmp_path / "h.ckpt"
    with ckptdb.open(path) as db:
        db.commit("ns", {"f": b"x" * 5000})
    assert "4.9 KiB" in run("show", str(path), "ns").stdout
    assert run_json("show", str(path), "ns")["entries"][0]["size"] == 5000


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_scripts(shell: str) -> None:
    assert "_CKPTDB_COMPLETE" in run("completion", shell).stdout


def test_demo_tells_the_same_story_each_run(tmp_path: Path) -> None:
    path = str(tmp_path / "demo.ckpt")
    first = run("demo", path).stdout
    second = run("demo", path).stdout
    assert "generation 1" in first and "generation 1" in second
    assert "removed the previous demo run" in second
    with ckptdb.open(path) as db:
        assert db.current("demo/agent").generation == 3  # type: ignore[union-attr]


def test_set_current_refuses_a_fallback_deleted_while_it_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fallback kept past a damaged CURRENT is chosen before the write transaction. If
    # another handle drops the namespace and replays the same history meanwhile (same ids,
    # same revision, new rows), the chosen row is gone: nothing may move (since v6 no
    # foreign key would stop a pointer naming it).
    from ckptdb.ops import rollback

    path = tmp_path / "race.ckpt"

    def history(db: ckptdb.Database) -> tuple[str, str, str]:
        a = db.commit("ns", {"f": b"one"}).checkpoint_id
        b = db.commit("ns", {"f": b"two"}).checkpoint_id
        c = db.commit("ns", {"f": b"three"}).checkpoint_id
        db.set_current("ns", b)
        db.set_current("ns", c)
        return a, b, c

    with ckptdb.open(path) as db:
        a, b, c = history(db)
        db.commit("other", {"f": b"keeps the largest seq"})  # so a replay gets new seqs
    _damage(path, b"three")
    real = rollback.checkpoints.checkpoint_by_id
    replayed: list[bool] = []

    def lookup_then_replay(conn: Any, checkpoint_id: str) -> Any:
        row = real(conn, checkpoint_id)
        # Right after set_current looked up the fallback it will keep (its one call outside
        # the write transaction), before that transaction begins.
        if checkpoint_id == b and not replayed and not conn.in_transaction:
            replayed.append(True)
            with ckptdb.open(path) as other:
                other.drop_namespace("ns")
                assert history(other) == (a, b, c)
        return row

    with ckptdb.open(path) as db:
        before = db.pointer("ns")
        monkeypatch.setattr(rollback.checkpoints, "checkpoint_by_id", lookup_then_replay)
        with pytest.raises(errors.ConflictError) as refused:
            db.set_current("ns", a)
        monkeypatch.undo()
        assert replayed and "was deleted" in refused.value.message
        after = db.pointer("ns")
        assert after is not None and before is not None
        assert (after.current_id, after.fallback_id, after.revision) == (
            before.current_id,
            before.fallback_id,
            before.revision,
        )
        assert db.verify().ok  # no pointer names a missing checkpoint (the replay also
        # rewrote c's damaged bytes)
