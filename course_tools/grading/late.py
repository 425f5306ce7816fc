"""Late work scores 0 on the *total*, whatever order the instructor grades in (issue 37).

nbgrader's ``LateSubmissionPlugin`` with ``penalty_method = "zero"`` stores, at autograde time,
``late_submission_penalty = score`` for each notebook of a late submission. The written answers
are graded by hand afterwards, in Formgrader; the stored penalty is not updated, so a late
student kept every hand-graded point (exported raw 13, penalty 10, score 3).

:func:`install` registers two SQLAlchemy session events, for every gradebook session of the
process (``nbgrader_config.py`` imports this module, so every nbgrader command and Formgrader run
with the course config have them): when a grade of a submitted notebook changes and that
notebook's stored penalty equalled its score (the "zero" rule: the whole score is taken), the
penalty is set to the new score in the same transaction. A penalty that is ``None`` (on time, or
``penalty_method = "none"``) or smaller than the score (a plugin of another rule) is left alone.
The exported ``score`` (``raw_score - late_submission_penalty``) and the feedback's score are then
0, in any order of autograding and hand grading.

:func:`late_submissions` tells Formgrader's pages which submissions were late
(``course_tools.grading.render``'s server extension shows it).
"""
from __future__ import annotations

from typing import Any

EPS = 1e-9
_INFO_KEY = "llm_course_zero_penalty"
_installed = False


def _touched_notebooks(session: Any) -> set[str]:
    from nbgrader.api import Grade

    ids: set[str] = set()
    for obj in list(session.new) + list(session.dirty):
        if isinstance(obj, Grade) and obj.notebook_id and (obj in session.new or session.is_modified(obj)):
            ids.add(obj.notebook_id)
    return ids


def _score(session: Any, notebook_id: str) -> tuple[float, float | None]:
    """``(score, late_submission_penalty)`` of a submitted notebook, as the database holds them."""
    from nbgrader.api import SubmittedNotebook

    row = (session.query(SubmittedNotebook.score, SubmittedNotebook.late_submission_penalty)
           .filter(SubmittedNotebook.id == notebook_id).one_or_none())
    if row is None:
        return 0.0, None
    return float(row[0] or 0.0), (None if row[1] is None else float(row[1]))


def _before_flush(session: Any, flush_context: Any, instances: Any) -> None:
    ids = _touched_notebooks(session)
    if not ids:
        return
    follow = session.info.setdefault(_INFO_KEY, set())
    with session.no_autoflush:
        for nid in ids:
            score, penalty = _score(session, nid)
            if penalty is not None and penalty > 0 - EPS and abs(penalty - score) <= EPS:
                follow.add(nid)


def _after_flush(session: Any, flush_context: Any) -> None:
    follow = session.info.pop(_INFO_KEY, None)
    if not follow:
        return
    from nbgrader.api import SubmittedNotebook

    with session.no_autoflush:
        for nid in follow:
            score, penalty = _score(session, nid)
            if penalty is not None and abs(penalty - score) > EPS:
                nb = session.get(SubmittedNotebook, nid)
                if nb is not None:
                    nb.late_submission_penalty = score   # flushed by the commit's next flush


def install() -> None:
    """Register the session events (idempotent); see the module docstring."""
    global _installed
    if _installed:
        return
    from sqlalchemy import event
    from sqlalchemy.orm import Session

    event.listen(Session, "before_flush", _before_flush)
    event.listen(Session, "after_flush_postexec", _after_flush)
    _installed = True


def late_submissions(gb: Any, assignment: str) -> dict[str, dict[str, float]]:
    """``{student: {"seconds_late", "penalty"}}`` for the late submissions of ``assignment``."""
    out: dict[str, dict[str, float]] = {}
    for sub in gb.assignment_submissions(assignment):
        late = float(sub.total_seconds_late or 0.0)
        if late > 0:
            out[sub.student.id] = {"seconds_late": late, "penalty": float(sub.late_submission_penalty or 0.0)}
    return out


def describe_late(seconds: float) -> str:
    """``"late by 3 s"``, ``"late by 2 h 05 min"``, ``"late by 1 d 4 h"``."""
    s = int(round(seconds))
    if s < 60:
        return f"late by {s} s"
    if s < 3600:
        return f"late by {s // 60} min {s % 60:02d} s"
    if s < 86400:
        return f"late by {s // 3600} h {(s % 3600) // 60:02d} min"
    return f"late by {s // 86400} d {(s % 86400) // 3600} h"
