"""What a student's feedback shows of the hidden tests: their names and what kind of thing differs.

Stock ``nbgrader generate_feedback`` renders the autograded notebook as it is: the hidden tests'
code (seeds, inputs, keys) and, in each failure message, the reference value ("got 2.716335,
expected 2.6085055"). :class:`RedactHiddenTests` (``GenerateFeedback.preprocessors`` in
``nbgrader_config.py``) rewrites, in the feedback only, every autograded test cell:

* the source between ``### BEGIN HIDDEN TESTS`` and ``### END HIDDEN TESTS`` becomes one
  comment line, and the lines the autograder appended (integrity check) are dropped;
* what the hidden part printed or displayed (after the autograder's ``HIDDEN_START`` line) is
  dropped; an error raised there keeps its exception class only;
* the ``HiddenTestFailed`` message is replaced by the student-safe form that ``VerifyRecords``
  stored next to it (check names and kinds of difference, :func:`course_utils.records.summarize`).

The autograded notebook and Formgrader keep the full report for the instructor.
"""
from __future__ import annotations

import re
from typing import Any

from nbgrader.preprocessors import NbGraderPreprocessor
from nbformat.notebooknode import NotebookNode, from_dict
from traitlets import List

from course_tools.grading.preprocessors import HIDDEN_START, TAIL_MARK
from course_tools.grading.render import FEEDBACK_MIME

HIDDEN_REGION = re.compile(r"^([ \t]*)###\s*BEGIN HIDDEN TESTS.*?^[ \t]*###\s*END HIDDEN TESTS[^\n]*\n?", re.M | re.S)
HIDDEN_PLACEHOLDER = "# [hidden tests: run and decided by the autograder; not shown in feedback]\n"
WITHHELD = "raised while running a hidden check (details are not shown in feedback)"
GENERIC_FAILURE = "hidden check(s) failed (details are not shown in feedback)"
VERDICT = re.compile(r"\A\[autograder\] \d+ hidden values checked outside your kernel"
                     r"(?: \(also with [A-Za-z0-9_, .-]+ removed\))?: all match\n?\Z")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def redact_source(source: str) -> str:
    """``source`` without its hidden region (one placeholder line instead) and the autograder's tail."""
    if TAIL_MARK in source:
        source = source[: source.index(TAIL_MARK)].rstrip("\n") + "\n"
    source = re.sub(r"^[ \t]*print\(" + re.escape(repr(HIDDEN_START)) + r"\)\n", "", source, flags=re.M)
    return HIDDEN_REGION.sub(lambda m: m.group(1) + HIDDEN_PLACEHOLDER, source)


def hidden_lines(source: str) -> list[str]:
    """The non-trivial lines of ``source``'s hidden region (to recognise them in a traceback)."""
    lines: list[str] = []
    for m in HIDDEN_REGION.finditer(source):
        for line in m.group(0).splitlines()[1:-1]:
            text = line.strip()
            if len(text) >= 6 and not text.startswith("#"):
                lines.append(text)
    return lines


# The markers of what a student never sees (hidden tests, reference and probe blocks): IPython's
# traceback prints context lines around the failing one, the marker line among them.
MARKER = re.compile(r"#{2,}\s*(BEGIN|END)\s+(HIDDEN TESTS|REFERENCE|PROBE)\b")


def _marks_hidden(text: str) -> bool:
    """A marker of a hidden region, or the autograder's ``print(HIDDEN_START)`` line before it."""
    return bool(MARKER.search(text)) or HIDDEN_START in text


def _drop_lines(entry: str, hidden: list[str]) -> str:
    """A traceback entry without its lines that show hidden source or a hidden region's marker
    (IPython prints context lines around the failing one)."""
    kept = [line for line in entry.split("\n")
            if not (_marks_hidden(_ANSI.sub("", line)) or any(h in _ANSI.sub("", line) for h in hidden))]
    return "\n".join(kept)


def _is_test_cell(cell: NotebookNode) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def _withheld_error(ename: str) -> NotebookNode:
    return from_dict({"output_type": "error", "ename": ename, "evalue": WITHHELD,
                      "traceback": [f"{ename}: {WITHHELD}"]})


class RedactHiddenTests(NbGraderPreprocessor):
    """Feedback preprocessor: hidden tests' code, inputs and reference values never reach a student."""

    # nbconvert's HTML exporter configures ``NbConvertBase.display_data_priority`` for every
    # preprocessor; NbGraderPreprocessor declares the trait without ``config=True`` (GetGrades
    # re-declares it), so traitlets warned "Config option display_data_priority not recognized by
    # RedactHiddenTests" at every generate_feedback. Unused here; declared configurable like GetGrades.
    display_data_priority = List(["text/html", "application/pdf", "text/latex", "image/svg+xml", "image/png",
                                  "image/jpeg", "text/plain"]).tag(config=True)

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if not _is_test_cell(cell):
            return cell, resources
        hidden = hidden_lines(cell.source)
        cell.source = redact_source(cell.source)
        outputs: list[NotebookNode] = []
        in_hidden = False
        safe: dict[str, str] | None = None
        raw = list(cell.get("outputs", []))
        for i, out in enumerate(raw):
            kind = out.get("output_type")
            data = out.get("data") if isinstance(out.get("data"), dict) else {}
            if FEEDBACK_MIME in data:
                value = data[FEEDBACK_MIME]
                safe = value if isinstance(value, dict) else None
                continue
            if kind == "error" and out.get("ename") == "HiddenTestFailed":
                ename = "HiddenTestFailed"
                evalue = str(safe.get("evalue")) if safe and safe.get("evalue") else GENERIC_FAILURE
                outputs.append(from_dict({"output_type": "error", "ename": ename, "evalue": evalue,
                                          "traceback": [f"{ename}: {evalue}"]}))
                safe = None
                continue
            if kind == "stream" and i == len(raw) - 1 and VERDICT.match(out.get("text", "")):
                outputs.append(out)   # the autograder's own line (VerifyRecords), appended after the run
                continue
            if kind == "stream" and HIDDEN_START in out.get("text", ""):
                before = out["text"].split(HIDDEN_START, 1)[0]
                before = before[: before.rfind("\n") + 1]
                if before:
                    outputs.append(from_dict({"output_type": "stream", "name": out.get("name", "stdout"),
                                              "text": before}))
                in_hidden = True
                continue
            if kind == "error":
                trace = _ANSI.sub("", "\n".join(str(t) for t in out.get("traceback", [])) + "\n" + str(out.get("evalue", "")))
                if out.get("ename") == "IncompleteTestCell":
                    outputs.append(out)
                elif in_hidden or any(line in str(out.get("evalue", "")) for line in hidden):
                    outputs.append(_withheld_error(str(out.get("ename", "Error"))))
                elif _marks_hidden(trace) or any(line in trace for line in hidden):
                    # a visible check failed next to the hidden region: its context lines go
                    out["traceback"] = [_drop_lines(str(t), hidden) for t in out.get("traceback", [])]
                    outputs.append(out)
                else:
                    outputs.append(out)
                continue
            if in_hidden:
                continue   # printed or displayed by the hidden part: may show hidden inputs
            outputs.append(out)
        cell["outputs"] = outputs
        return cell, resources
