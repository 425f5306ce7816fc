"""Gradebook rows in and out of a shard, through nbgrader's own ``Gradebook`` API.

* :func:`copy_assignment` — an assignment as the gradebook knows it (due date, notebooks and their
  kernelspec, grade / solution / task / source cells with checksums, the students), copied into
  another gradebook: the *template* a shard grades into, made once at submit time from the main
  gradebook (workers never open the main gradebook).
* :func:`merge_submissions` — what one ``nbgrader autograde`` wrote into a shard's gradebook
  (student, submission timestamp, per cell ``auto_score`` / ``needs_manual_grade`` /
  ``auto_comment``, per notebook ``late_submission_penalty``), written into the main gradebook
  the way nbgrader itself writes it: the merge step is the gradebook's only writer.
* :func:`dump` — every field of every submission of an assignment, for comparing two gradebooks.
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence


def ensure_alembic_on_path() -> None:
    """nbgrader runs ``alembic`` from PATH when it creates a gradebook: this interpreter's scripts first."""
    scripts = str(Path(sys.executable).parent)
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")


def structure(url: str, course: str, assignment: str) -> dict[str, Any]:
    """The assignment as the gradebook holds it (what grading depends on), as plain data."""
    from nbgrader.api import Gradebook

    with Gradebook(url, course) as gb:
        a = gb.find_assignment(assignment)
        out: dict[str, Any] = {"name": a.name, "duedate": a.duedate.isoformat() if a.duedate else None,
                               "notebooks": {}}
        for nb in sorted(a.notebooks, key=lambda n: n.name):
            out["notebooks"][nb.name] = {
                "kernelspec": nb.kernelspec,
                "grade_cells": {c.name: [c.max_score, c.cell_type] for c in nb.grade_cells},
                "task_cells": {c.name: [c.max_score, c.cell_type] for c in nb.task_cells},
                "solution_cells": sorted(c.name for c in nb.solution_cells),
                "source_cells": {c.name: [c.cell_type, c.locked, c.checksum, c.source] for c in nb.source_cells},
            }
    return out


def structure_digest(url: str, course: str, assignment: str) -> str:
    """sha256 of :func:`structure` (a template and the main gradebook must agree on it)."""
    return hashlib.sha256(json.dumps(structure(url, course, assignment), sort_keys=True).encode()).hexdigest()


def copy_assignment(src_url: str, dest_url: str, course: str, assignment: str,
                    students: Sequence[str] = ()) -> None:
    """Copy ``assignment`` (and the rows of ``students``) from one gradebook into another."""
    from nbgrader.api import Gradebook, MissingEntry

    ensure_alembic_on_path()
    with Gradebook(src_url, course) as src, Gradebook(dest_url, course) as dest:
        a = src.find_assignment(assignment)
        dest.update_or_create_assignment(a.name, duedate=a.duedate)
        for nb in a.notebooks:
            dest.update_or_create_notebook(nb.name, a.name, kernelspec=nb.kernelspec)
            for c in nb.grade_cells:
                dest.update_or_create_grade_cell(c.name, nb.name, a.name, max_score=c.max_score,
                                                 cell_type=c.cell_type)
            for c in nb.solution_cells:
                dest.update_or_create_solution_cell(c.name, nb.name, a.name)
            for c in nb.task_cells:
                dest.update_or_create_task_cell(c.name, nb.name, a.name, max_score=c.max_score,
                                                cell_type=c.cell_type)
            for c in nb.source_cells:
                dest.update_or_create_source_cell(c.name, nb.name, a.name, cell_type=c.cell_type,
                                                  locked=c.locked, source=c.source, checksum=c.checksum)
        for sid in students:
            try:
                st = src.find_student(sid)
            except MissingEntry:
                continue
            dest.update_or_create_student(sid, first_name=st.first_name, last_name=st.last_name,
                                          email=st.email, lms_user_id=st.lms_user_id)


def merge_submissions(shard_url: str, main_url: str, course: str, assignment: str,
                      students: Sequence[str]) -> list[str]:
    """Write what autograding wrote into the shard gradebook for ``students`` into the main one.

    Exactly the fields ``nbgrader autograde`` writes (``converters/autograde.py``,
    ``SaveAutoGrades``, ``AssignLatePenalties``): a student row when missing, the submission's
    timestamp, each grade's ``auto_score`` and ``needs_manual_grade`` (kept ``True`` where a grader
    already gave a manual score, as nbgrader does), each comment's ``auto_comment``, each
    notebook's ``late_submission_penalty``. Manual scores, manual comments, extra credit and
    flags already in the main gradebook stay. Returns the students merged (those with a
    submission in the shard). Idempotent: merging the same shard twice writes the same values.
    """
    from nbgrader.api import Gradebook, MissingEntry

    merged = []
    with warnings.catch_warnings(), Gradebook(shard_url, course) as shard, Gradebook(main_url, course) as main:
        # nbgrader's add_submission builds rows through relationships (SQLAlchemy's "not in session"
        # SAWarning, which stock `nbgrader autograde` triggers too): not ours to fix
        warnings.simplefilter("ignore", category=Warning)
        for sid in students:
            try:
                sub = shard.find_submission(assignment, sid)
            except MissingEntry:
                continue
            try:
                main.find_student(sid)
            except MissingEntry:
                st = sub.student
                main.update_or_create_student(sid, first_name=st.first_name, last_name=st.last_name,
                                              email=st.email, lms_user_id=st.lms_user_id)
            kwargs = {"timestamp": sub.timestamp} if sub.timestamp is not None else {}
            msub = main.update_or_create_submission(assignment, sid, **kwargs)
            mnbs = {nb.name: nb for nb in msub.notebooks}
            for nb in sub.notebooks:
                mnb = mnbs[nb.name]
                mnb.late_submission_penalty = nb.late_submission_penalty
                mgrades = {g.cell.name: g for g in mnb.grades}
                for g in nb.grades:
                    mg = mgrades[g.cell.name]
                    mg.auto_score = g.auto_score
                    mg.needs_manual_grade = bool(g.needs_manual_grade or mg.manual_score is not None)
                mcomments = {c.cell.name: c for c in mnb.comments}
                for c in nb.comments:
                    mcomments[c.cell.name].auto_comment = c.auto_comment
            main.db.commit()
            merged.append(sid)
    return merged


def dump(url: str, course: str, assignment: str) -> dict[str, Any]:
    """``{student: {...}}``: every stored field of each submission of ``assignment``, per notebook
    and cell (scores, comments, flags, timestamps, penalties), for an equality check."""
    from nbgrader.api import Gradebook

    out: dict[str, Any] = {}
    with Gradebook(url, course) as gb:
        for sub in gb.assignment_submissions(assignment):
            nbs = {}
            for nb in sub.notebooks:
                nbs[nb.name] = {
                    "flagged": nb.flagged, "late_submission_penalty": nb.late_submission_penalty,
                    "score": nb.score, "max_score": nb.max_score,
                    "grades": {g.cell.name: {"auto_score": g.auto_score, "manual_score": g.manual_score,
                                             "extra_credit": g.extra_credit, "needs_manual_grade": g.needs_manual_grade,
                                             "score": g.score} for g in nb.grades},
                    "comments": {c.cell.name: {"auto_comment": c.auto_comment, "manual_comment": c.manual_comment}
                                 for c in nb.comments},
                }
            out[sub.student.id] = {"timestamp": sub.timestamp.isoformat() if sub.timestamp else None,
                                   "extension": str(sub.extension) if sub.extension else None,
                                   "score": sub.score, "max_score": sub.max_score,
                                   "late_submission_penalty": sub.late_submission_penalty, "notebooks": nbs}
    return out
