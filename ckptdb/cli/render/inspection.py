"""Renderers of the commands that look at the whole file: verify, stats."""

from __future__ import annotations

from ...models import Stats, VerifyReport
from ..output import count, echo, print_json, size, table

#: Namespaces ``ckptdb stats`` lists for people, the largest first (--json has all).
STATS_NAMESPACES = 20


def verify_report(report: VerifyReport, as_json: bool) -> None:
    """``verify``: what was checked and every problem found."""
    if as_json:
        print_json(report)
        return
    state = "OK" if report.ok else f"FAILED: {count(len(report.problems), 'problem')}"
    echo(
        f"{state} -- sqlite {report.sqlite_integrity}; "
        f"{count(report.checkpoints_checked, 'checkpoint')}, "
        f"{count(report.blobs_checked, 'blob')}, {count(report.chunks_checked, 'chunk')}, "
        f"{size(report.bytes_checked)} checked, {count(report.pointers_checked, 'pointer')}"
    )
    if report.problems:
        table(
            ["problem", "namespace", "checkpoint", "entry", "detail"],
            [
                [p.code, p.namespace, (p.checkpoint_id or "")[:12], p.entry, p.detail]
                for p in report.problems
            ],
        )


def stats(st: Stats, as_json: bool) -> None:
    """``stats``: the file, its counts, then the largest namespaces."""
    if as_json:
        print_json(st)
        return
    rows = [
        (
            "file",
            f"{size(st.file_bytes)} ({st.page_count} pages of {st.page_size} B, "
            f"{st.free_pages} free)",
        ),
        ("wal", size(st.wal_bytes)),
        ("schema version", st.schema_version),
        ("namespaces", st.namespaces),
        ("checkpoints", st.checkpoints),
        ("blobs", st.blobs),
        ("chunks", f"{st.chunks} (chunk size {size(st.chunk_size)})"),
        ("logical bytes", size(st.logical_bytes)),
        ("stored bytes", size(st.stored_bytes)),
        ("dedup ratio", st.dedup_ratio),
    ]
    for key, value in rows:
        echo(f"{key:<15} {value}")
    if st.usage:
        shown = sorted(st.usage, key=lambda u: (-u.logical_bytes, u.namespace))[:STATS_NAMESPACES]
        echo("")
        table(
            ["namespace", "checkpoints", "logical", "stored"],
            [
                [u.namespace, u.checkpoints, size(u.logical_bytes), size(u.stored_bytes)]
                for u in shown
            ],
        )
        if len(st.usage) > len(shown):
            more = count(len(st.usage) - len(shown), "more namespace")
            echo(f"... and {more} (--json lists all)")
