"""The merge step (``llm-course cluster merge``): the only writer of the class's gradebook.

Run by the job that Slurm starts once every array task has ended, whatever its end
(``--dependency=afterany``: a task that died must not leave the merge waiting forever), or by
hand. For each shard whose result is current (same fingerprint as the manifest), the rows its
``nbgrader autograde`` wrote for the students that are final (graded, or failed: nbgrader could
not grade the notebook) are copied into the main gradebook (SQLite or any SQLAlchemy URL, e.g.
PostgreSQL) through nbgrader's ``Gradebook`` API (:mod:`course_tools.cluster.gradebook`), and their
autograded notebooks into ``<course root>/autograded/<student>/<chapter>/`` (where ``nbgrader
generate_feedback`` and Formgrader read them). A partial result (a submission over its budget, a
task stopped at its limit) gives its finished students; every student not graded is named with
why, and the command exits :data:`EXIT_INCOMPLETE`. Merging twice writes the same values, so a
later merge (after ``llm-course cluster rerun``) adds the students that were missing.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from course_tools.grading.privacy import redact_url

from .manifest import Manifest
from .safetext import safe
from .worker import FAILED, FINAL

EXIT_INCOMPLETE = 4   # `llm-course cluster merge`: merged what was done, some students are not graded yet


@dataclass
class MergeReport:
    """What a merge wrote, and who it could not."""
    db: str
    merged: dict[str, list[str]] = field(default_factory=dict)       # chapter -> students written
    failed: dict[str, dict[str, str]] = field(default_factory=dict)  # chapter -> {student: reason} (nbgrader's, final)
    missing: list[int] = field(default_factory=list)                 # shards without a current result
    not_graded: dict[str, dict[str, str]] = field(default_factory=dict)  # chapter -> {student: why} (rerun grades them)
    seconds: float = 0.0


def merge(manifest_path: str | Path, *, db: str | None = None, log=print) -> MergeReport:
    """Merge every final student of the class's shards into the gradebook ``db`` (default: the
    manifest's); the report names who is not graded yet (``not_graded``) and why."""
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
            for s in shard.students:
                report.not_graded.setdefault(shard.chapter, {})[s] = (
                    f"shard {shard.index} has no result yet (its task is pending, running or died: "
                    "`llm-course cluster status` says which)")
            continue
        rdir = m.result_dir(shard.index)
        final = []
        for s, v in res["students"].items():
            if v["status"] in FINAL:
                final.append(s)
                if v["status"] == FAILED:
                    report.failed.setdefault(shard.chapter, {})[s] = v.get("reason", "")
            else:
                report.not_graded.setdefault(shard.chapter, {})[s] = f"{v['status']}: {v.get('reason', '')}"
        # every row nbgrader wrote for a final student, a failed one's too: stock `nbgrader autograde`
        # leaves the submission (timestamp, empty grades) of a notebook it could not grade in the
        # gradebook; a student over budget or not reached is left out (graded by a rerun)
        done = merge_submissions(f"sqlite:///{rdir / 'gradebook.db'}", url, m.course, shard.chapter, final)
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
    log(f"merged {n} submission(s) of {len(report.merged)} chapter(s) into {safe(redact_url(url))} in {report.seconds} s")
    for ch, who in report.failed.items():
        for s, why in who.items():
            log(f"  failed: {safe(s)} ({safe(ch)}): {safe(why)}")
    waiting = sum(len(v) for v in report.not_graded.values())
    if waiting:
        log(f"NOT GRADED YET: {waiting} submission(s), not in the gradebook (`llm-course cluster rerun` grades "
            "them, the next merge adds them):")
        for ch, who in report.not_graded.items():
            for s, why in who.items():
                log(f"  not graded: {safe(s)} ({safe(ch)}): {safe(why)}")
    if report.missing:
        log(f"  {len(report.missing)} shard(s) without a result yet: {', '.join(map(str, report.missing))}")
    return report
