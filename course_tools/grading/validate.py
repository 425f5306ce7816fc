"""``nbgrader validate`` with the whole failure message, in the notebook's language.

Stock nbgrader 0.9.6 (``nbgrader/validator.py``) prints every line of a failing cell's source and
error through ``Validator._indent``, which *cuts* a line at ``Validator.width - 3`` characters
(``width`` = 90 by default) and appends ``...``. A check's message is one line: a Portuguese one
(longer than its English source) lost its end, the part that says what to fix. ``width`` is
configurable, but it is also the length of the ``====`` rule between cells and the width the
banner is filled to, so raising it does not help. :func:`install` (``nbgrader_config.py`` and the
students' ``<environment>/etc/jupyter/nbgrader_config.py``) makes ``_indent`` *wrap* a long line at
the same width instead (continuation lines indented), so nothing is lost, and prints the report's
own words (the banner, "The following cell failed:", "You did not provide a response.", ...) in
the language of the notebook being validated (its setup cell's ``LLM_COURSE_LANG`` line,
:mod:`course_tools.grading.i18n`). JupyterLab's *Validate* button gets the errors unshortened from
``Validator.validate`` already; the messages it builds there are translated too.
"""
from __future__ import annotations

import os
import textwrap
from typing import Any, Callable

from course_tools.grading.i18n import N_, notebook_language, translator

# nbgrader's texts (normalised to one line: the banners are refilled to the width anyway)
TEXTS = (
    N_("THE TYPES OF {num_changed} CELL(S) HAVE CHANGED! This might mean that even though the tests are "
       "passing now, they won't pass when your assignment is graded."),
    N_("THE CONTENTS OF {num_changed} TEST CELL(S) HAVE CHANGED! This might mean that even though the tests "
       "are passing now, they won't pass when your assignment is graded."),
    N_("VALIDATION FAILED ON {num_failed} CELL(S)! If you submit your assignment as it is, you WILL NOT "
       "receive full credit."),
    N_("NOTEBOOK PASSED ON {num_passed} CELL(S)!"),
    N_("The following {old_type} cell has changed to a {new_type} cell:"),
    N_("The following cell has changed:"),
    N_("The following cell failed:"),
    N_("The error was:"),
    N_("The following cell passed:"),
    N_("Success! Your notebook passes all the tests."),
    N_("Success! The notebook does not pass any tests."),
    N_("You did not provide a response."),
    N_("Partial credit; passed some but not all of the tests"),
)


def wrap_line(line: str, width: int, indent: str) -> list[str]:
    """``indent + line`` in pieces of at most ``width`` characters (at spaces where it can), each
    continuation indented two more spaces than the line: the whole line, never cut."""
    lead = line[: len(line) - len(line.lstrip(" \t"))]
    room = max(20, width - len(indent))
    if len(line) <= room:
        return [indent + line]
    pieces = textwrap.wrap(line, width=room, initial_indent="", subsequent_indent=lead + "  ",
                           break_long_words=True, break_on_hyphens=False, drop_whitespace=True,
                           replace_whitespace=False, expand_tabs=False)
    if pieces and lead and not pieces[0].startswith(lead):
        pieces[0] = lead + pieces[0]
    return [indent + p for p in pieces] or [indent]


def _one_line(text: str) -> str:
    return " ".join(text.split())


def install() -> None:
    """Patch nbgrader's ``Validator`` (once per process): wrap instead of cut, words in the notebook's language."""
    from nbgrader import utils
    from nbgrader.validator import Validator
    from nbconvert.filters import strip_ansi

    if getattr(Validator, "_llm_course", False):
        return
    stock_validate = Validator.validate

    def _t(self: Any) -> Callable[[str], str]:
        return getattr(self, "_llm_course_t", str)

    def _banner(self: Any, text: str) -> str:
        """A banner trait in the notebook's language (when it is nbgrader's own, untranslated text)."""
        t = _t(self)
        shown = t(_one_line(text))
        return shown if shown != _one_line(text) else text

    def _indent(self: Any, val: str) -> str:
        lines: list[str] = []
        for line in val.split("\n"):
            lines += wrap_line(strip_ansi(line), self.width, self.indent)
        return "\n".join(lines)

    def _extract_error(self: Any, cell: Any) -> str:
        t = _t(self)
        errors = []
        if cell.cell_type == "code":
            for output in cell.outputs:
                if output.output_type == "error":
                    errors.append("\n".join(output.traceback))
                if output.output_type == "stream" and output.name == "stderr":
                    errors.append(output.text)
            if len(errors) == 0:
                if utils.is_grade(cell):
                    score, max_score = utils.determine_grade(cell, self.log)
                    if score < max_score:
                        errors.append(t("Partial credit; passed some but not all of the tests"))
                else:
                    errors.append(t("You did not provide a response."))
        else:
            errors.append(t("You did not provide a response."))
        return "\n".join(errors)

    def _rule(self: Any) -> None:
        self.stream.write("\n" + "=" * self.width + "\n")

    def _print_type_changed(self: Any, old_type: str, new_type: str, source: str) -> None:
        _rule(self)
        self.stream.write(_t(self)("The following {old_type} cell has changed to a {new_type} cell:").format(
            old_type=old_type, new_type=new_type) + "\n\n")
        self.stream.write(self._indent(source) + "\n\n")

    def _print_changed(self: Any, source: str) -> None:
        _rule(self)
        self.stream.write(_t(self)("The following cell has changed:") + "\n\n")
        self.stream.write(self._indent(source) + "\n\n")

    def _print_error(self: Any, source: str, error: str) -> None:
        _rule(self)
        self.stream.write(_t(self)("The following cell failed:") + "\n\n")
        self.stream.write(self._indent(source) + "\n\n")
        self.stream.write(_t(self)("The error was:") + "\n\n")
        self.stream.write(self._indent(error) + "\n\n")

    def _print_pass(self: Any, source: str) -> None:
        _rule(self)
        self.stream.write(_t(self)("The following cell passed:") + "\n\n")
        self.stream.write(self._indent(source) + "\n\n")

    def _write_banner(self: Any, template: str, **fields: int) -> None:
        self.stream.write(textwrap.fill(_banner(self, template).format(**fields), width=self.width))

    def _print_num_type_changed(self: Any, num_changed: int) -> None:
        if num_changed:
            _write_banner(self, self.type_changed_warning, num_changed=num_changed)

    def _print_num_changed(self: Any, num_changed: int) -> None:
        if num_changed:
            _write_banner(self, self.changed_warning, num_changed=num_changed)

    def _print_num_failed(self: Any, num_failed: int) -> None:
        if num_failed == 0:
            self.stream.write(_t(self)("Success! Your notebook passes all the tests.") + "\n")
        else:
            _write_banner(self, self.failed_warning, num_failed=num_failed)

    def _print_num_passed(self: Any, num_passed: int) -> None:
        if num_passed == 0:
            self.stream.write(_t(self)("Success! The notebook does not pass any tests.") + "\n")
        else:
            _write_banner(self, self.passed_warning, num_passed=num_passed)

    def validate(self: Any, filename: str) -> Any:
        import nbformat

        try:
            self._llm_course_t = translator(notebook_language(nbformat.read(os.path.abspath(filename), as_version=4)))
        except Exception:   # unreadable: nbgrader reports it as it always did
            self._llm_course_t = str
        return stock_validate(self, filename)

    for name, fn in (("_indent", _indent), ("_extract_error", _extract_error),
                     ("_print_type_changed", _print_type_changed), ("_print_changed", _print_changed),
                     ("_print_error", _print_error), ("_print_pass", _print_pass),
                     ("_print_num_type_changed", _print_num_type_changed),
                     ("_print_num_changed", _print_num_changed), ("_print_num_failed", _print_num_failed),
                     ("_print_num_passed", _print_num_passed), ("validate", validate)):
        setattr(Validator, name, fn)
    Validator._llm_course = True
