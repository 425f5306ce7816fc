"""``nbgrader export`` whose CSV a spreadsheet opens as data, never as formulas.

Stock ``CsvExportPlugin`` joins each row's values with commas, unquoted: a student id, a name or an
e-mail address beginning with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return becomes a
formula when the instructor opens the grades in a spreadsheet (``=HYPERLINK(...)``, ``@SUM(...)``),
and a comma or a newline in one shifts every column after it. :class:`SafeCsvExportPlugin` writes
the same columns, in the same order, with :mod:`csv` (quoting where needed) and neutralises every
text cell that could start a formula by putting a single quote in front of it (the usual defence
against CSV injection; OWASP). Numbers and timestamps are written as nbgrader writes them.
``nbgrader_config.py`` selects it (``c.ExportApp.plugin_class``).
"""
from __future__ import annotations

import csv
from typing import Any

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins.export import CsvExportPlugin

COLUMNS = ("assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email",
           "raw_score", "late_submission_penalty", "score", "max_score")
# A cell starting with one of these is a formula (or becomes one) in Excel, LibreOffice, Google Sheets.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def neutralise(value: Any) -> str:
    """The text of a CSV cell: ``''`` for None, numbers as ``str``, text that could start a formula
    prefixed with ``'`` (shown as text by spreadsheets; the value is otherwise kept)."""
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    text = str(value)
    if text.lstrip(" ").startswith(FORMULA_STARTS):
        return "'" + text
    return text


class SafeCsvExportPlugin(CsvExportPlugin):
    """nbgrader's CSV export, quoted, with formula-starting text neutralised."""

    def export(self, gradebook: Gradebook) -> None:  # type: ignore[override]
        dest = self.to or "grades.csv"
        students = [str(s) for s in self.student]
        assignments = [str(a) for a in self.assignment]
        self.log.info("Exporting grades to %s", dest)
        with open(dest, "w", newline="") as fh:
            out = csv.writer(fh, quoting=csv.QUOTE_MINIMAL, lineterminator="\n")
            out.writerow(COLUMNS)
            for assignment in gradebook.assignments:
                if assignments and assignment.name not in assignments:
                    continue
                for student in gradebook.students:
                    if students and student.id not in students:
                        continue
                    row: dict[str, Any] = {"assignment": assignment.name, "duedate": assignment.duedate,
                                           "student_id": student.id, "last_name": student.last_name,
                                           "first_name": student.first_name, "email": student.email,
                                           "max_score": assignment.max_score}
                    try:
                        sub = gradebook.find_submission(assignment.name, student.id)
                    except MissingEntry:
                        row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0)
                    else:
                        penalty = sub.late_submission_penalty
                        row.update(timestamp=sub.timestamp, raw_score=sub.score, late_submission_penalty=penalty,
                                   score=max(0.0, sub.score - (penalty or 0.0)))
                    out.writerow([neutralise(row[k]) for k in COLUMNS])
