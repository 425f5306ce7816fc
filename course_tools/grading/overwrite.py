"""nbgrader's ``OverwriteCells`` without the false "checksum has changed" warning on honest submissions.

nbgrader keeps, for every locked cell, the *source* form in the gradebook: for a test cell that
is the visible tests **and** the hidden tests. The student's copy was released with the hidden
tests cleared (``ClearHiddenTests``), so its checksum never equals the stored one and stock
``OverwriteCells`` logs ``Attribute 'checksum' for cell test_… has changed!`` for every test cell
of every honest submission (then restores the source, as it should). A warning that fires on
every submission hides the one that matters.

:class:`CourseOverwriteCells` restores the source exactly as stock nbgrader does; it only stays
silent when the submitted cell is byte for byte the *released* form of the source cell (hidden
tests cleared with the course's own delimiters). Any other change to a locked cell — an edited
visible test, a removed line, a changed grade id or point value — is still reported.

A submission of another edition (the Brazilian Portuguese ``pt_BR/notebooks``, course_tools/translation.py)
carries the same code and grade ids, but its locked question cells and its setup cell hold the
edition's text. Such a cell, byte for byte as the edition released it, is checked as the English
source (no warning) and then keeps the edition's trusted text, so the autograded notebook and the
feedback read in the student's language; anything else is restored from the source as above.

An edition's answer cells are released with the edition's stub (``# SEU CÓDIGO AQUI``,
``EditionClearSolutions`` in ``course_tools/grading/i18n.py``), whose checksum is not the one the
gradebook holds (the English release's). nbgrader scores an answer left as released 0 (and
comments "No response.") by comparing checksums, so an answer cell that is byte for byte the
answer an edition released (trusted text from the course checkout) gets that checksum: a blank
Portuguese written answer scores 0, as a blank English one does.
"""
from __future__ import annotations

import copy
from typing import Any

import nbformat
from nbgrader import utils
from nbgrader.api import MissingEntry
from nbgrader.preprocessors import ClearHiddenTests, OverwriteCells


class CourseOverwriteCells(OverwriteCells):
    """``OverwriteCells`` that recognises a test cell released with its hidden tests cleared."""

    def _released_form(self, cell: Any, source: str) -> str | None:
        clear = ClearHiddenTests(config=self.config)
        released = copy.deepcopy(cell)
        released.source = source
        try:
            clear._remove_hidden_test_region(released)
        except Exception:   # malformed markers: let stock nbgrader report the difference
            return None
        return released.source

    def _edition_texts(self) -> dict[str, set[tuple[str, str]]]:
        """``grade_id -> {(cell type, source)}`` of the locked, ungraded cells (questions, the setup
        cell) of this notebook in every edition's release (``pt_BR/notebooks``, course_tools/editions.py):
        trusted text from the course checkout, never from a submission."""
        key = (self.assignment_id, self.notebook_id)
        cache = getattr(self, "_edition_cache", {})
        if key not in cache:
            from course_tools.grading.i18n import edition_release

            texts: dict[str, set[tuple[str, str]]] = {}
            for path in edition_release(self.assignment_id, self.notebook_id):
                for c in nbformat.read(path, as_version=4).cells:
                    meta = c.get("metadata", {}).get("nbgrader", {})
                    if meta.get("grade_id") and meta.get("locked") and not meta.get("grade") and not meta.get("solution"):
                        texts.setdefault(meta["grade_id"], set()).add((c.cell_type, c.source))
            cache[key] = texts
            self._edition_cache = cache
        return cache[key]

    def _edition_answers(self) -> dict[str, set[tuple[str, str]]]:
        """``grade_id -> {(cell type, source)}`` of the answer (solution) cells of this notebook as
        every edition released them (its stubs): trusted text from the course checkout."""
        key = (self.assignment_id, self.notebook_id)
        cache = getattr(self, "_answers_cache", {})
        if key not in cache:
            from course_tools.grading.i18n import edition_release

            texts: dict[str, set[tuple[str, str]]] = {}
            for path in edition_release(self.assignment_id, self.notebook_id):
                for c in nbformat.read(path, as_version=4).cells:
                    meta = c.get("metadata", {}).get("nbgrader", {})
                    if meta.get("grade_id") and meta.get("solution"):
                        texts.setdefault(meta["grade_id"], set()).add((c.cell_type, c.source))
            cache[key] = texts
            self._answers_cache = cache
        return cache[key]

    def preprocess_cell(self, cell: Any, resources: Any, cell_index: int) -> tuple[Any, Any]:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        edition_text = None
        if grade_id is not None and utils.is_locked(cell):
            try:
                source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                source_cell = None
            if (source_cell is not None and source_cell.locked and cell.cell_type == source_cell.cell_type
                    and cell.source != source_cell.source):
                if cell.source == self._released_form(cell, source_cell.source):
                    cell.source = source_cell.source   # what stock nbgrader does next, without the warning
                elif (not utils.is_grade(cell) and not utils.is_solution(cell)
                      and (cell.cell_type, cell.source) in self._edition_texts().get(grade_id, set())):
                    # a question or setup cell exactly as another edition released it: checked as the
                    # English source (no warning), then given back its edition's trusted text
                    edition_text, cell.source = cell.source, source_cell.source
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if edition_text is not None and not utils.is_grade(cell) and not utils.is_solution(cell):
            cell.source = edition_text
        if (grade_id is not None and utils.is_solution(cell)
                and (cell.cell_type, cell.source) in self._edition_answers().get(grade_id, set())):
            # an answer left exactly as an edition released it: "unchanged", as nbgrader judges an English one
            cell.metadata.nbgrader["checksum"] = utils.compute_checksum(cell)
        return cell, resources

    def add_missing_grade_cells(self, nb: Any, resources: Any) -> tuple[Any, Any]:  # type: ignore[override]
        """Re-add the graded cells a submission deleted, each after the nearest earlier cell of the
        source that is still there (stock nbgrader looks only at the cell just before, and stops
        with a ``KeyError`` when a student deleted an answer cell together with its test cell)."""
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        source_cells = source_nb.source_cells
        order = [c.name for c in source_cells]
        solutions = {c.name for c in source_nb.solution_cells}
        for grade_cell in sorted(source_nb.grade_cells, key=lambda g: order.index(g.name) if g.name in order else -1):
            present = {c.metadata.get("nbgrader", {}).get("grade_id"): i for i, c in enumerate(nb.cells)
                       if c.metadata.get("nbgrader", {}).get("grade_id")}
            if grade_cell.name in present or grade_cell.name not in order:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", grade_cell.name)
            at = order.index(grade_cell.name)
            cell = self.missing_cell_transform(source_cells[at], grade_cell.max_score,
                                               is_solution=grade_cell.name in solutions)
            before = [present[name] for name in order[:at] if name in present]
            nb.cells.insert(before[-1] + 1 if before else 0, cell)
        return nb, resources
