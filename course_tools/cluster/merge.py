"""The merge step (``llm-course cluster merge``): the only writer of the class's gradebook.

Run by the job that Slurm starts once every array task succeeded (``--dependency=afterok``), or
by hand. For each shard whose result is current (same fingerprint as the manifest), the rows its
``nbgrader autograde`` wrote are copied into the main gradebook (SQLite or any SQLAlchemy URL,
e.g. PostgreSQL) through nbgrader's ``Gradebook`` API (:mod:`course_tools.cluster.gradebook`), and
its autograded notebooks into ``<course root>/autograded/<student>/<chapter>/`` (where
``nbgrader generate_feedback`` and Formgrader read them). Merging twice writes the same values.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from .manifest import Manifest


@dataclass
class MergeReport:
    db: str
    merged: dict[str, list[str]] = field(default_factory=dict)       # chapter -> students written
    failed: dict[str, dict[str, str]] = field(default_factory=dict)  # chapter -> {student: reason}
    missing: list[int] = field(default_factory=list)                 # shards without a current result
    seconds: float = 0.0


def merge(manifest_path: str | Path, *, db: str | None = None, log=print) -> MergeReport:
    """Merge every finished shard of the class into the gradebook ``db`` (default: the manifest's)."""
    from course_tools.classroom import sqlite_busy_url

    from .gradebook import ensure_alembic_on_path, merge_submissions, structure_digest

    t0 = time.perf_counter()
    m = Manifest.load(manifest_path)
    url = sqlite_busy_url(db or m.db)
    report = MergeReport(url)
    ensure_alembic_on_path()
    for ch in m.chapters():
        want = structure_digest(f"sqlite:///{m.template(ch)}", m.course, ch)
        have = structure_digest(url, m.course, ch)
        if want != have:
            raise RuntimeError(f"{ch} in {url} is not the assignment the shards were graded against (due date, "
                               "cells or checksums differ): register it again and resubmit the class")
    root = Path(m.root)
    for shard in m.shards:
        res = m.result(shard.index)
        if res is None:
            report.missing.append(shard.index)
            continue
        rdir = m.result_dir(shard.index)
        for s, v in res["students"].items():
            if v["status"] != "graded":
                report.failed.setdefault(shard.chapter, {})[s] = v.get("reason", "")
        # every row nbgrader wrote, a failed student's too: stock `nbgrader autograde` leaves the
        # submission (timestamp, empty grades) of a notebook it could not grade in the gradebook
        done = merge_submissions(f"sqlite:///{rdir / 'gradebook.db'}", url, m.course, shard.chapter,
                                 list(res["students"]))
        for s in done:
            src = rdir / "autograded" / s / shard.chapter
            dest = root / "autograded" / s / shard.chapter
            if src.is_dir():
                if dest.exists():
                    shutil.rmtree(dest)
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copytree(src, dest, symlinks=True)
        report.merged.setdefault(shard.chapter, []).extend(done)
    report.seconds = round(time.perf_counter() - t0, 1)
    n = sum(len(v) for v in report.merged.values())
    log(f"merged {n} submission(s) of {len(report.merged)} chapter(s) into {url} in {report.seconds} s")
    for ch, who in report.failed.items():
        for s, why in who.items():
            log(f"  not graded: {s} ({ch}): {why}")
    if report.missing:
        log(f"  {len(report.missing)} shard(s) without a result yet: {', '.join(map(str, report.missing))} "
            "(`llm-course cluster status` says why; `llm-course cluster rerun` grades them)")
    return report
