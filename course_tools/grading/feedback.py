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

Student code can also *carry* the hidden tests into outputs: once a hidden region has run, the
kernel holds its source (IPython's ``In``/``_ih``/``Out``, ``linecache``, frames) and the student's
functions have seen its inputs (and may keep them in a global). So, in the feedback only:

* **from the first test cell with a hidden region on, no output that came out of the kernel is
  shown**: each such cell keeps one note saying how many outputs are withheld (and the class of an
  error, when one of a few built-in names); a test cell keeps only what the autograder wrote
  outside the kernel (the hidden checks' verdict, the student-safe ``HiddenTestFailed``, an
  ``IncompleteTestCell`` rebuilt from its fixed text). Even the visible part of that first cell
  is withheld: a kernel that holds back the autograder's ``HIDDEN_START`` line can make what the
  hidden part printed arrive before it.
* **every output still shown is checked against the hidden lines** (:class:`HiddenLines`), in a
  normalised form (letters and digits only, case-folded, after undoing HTML entities, escapes
  such as ``\\n``/``\\'``/``\\u00e9`` and tags): ``repr(In)`` or an HTML table of the source is
  caught; an output that holds one is withheld.

Every note, placeholder and rebuilt message here is in the language the notebook's kernel printed
in (its setup cell's ``LLM_COURSE_LANG``, ``course_tools/grading/i18n.py``), and so is the verdict
line kept as the autograder's (:func:`~course_tools.grading.preprocessors.verdict_pattern`).

(The executor updates a display only in the cell that runs, ``sandbox.LimitedExecution``: no
later cell can rewrite an output shown here.) The autograded notebook and Formgrader keep every
output and the full report for the instructor.
"""
from __future__ import annotations

import builtins
import html
import json
import re
from typing import Any, Callable, Iterable

from nbgrader.preprocessors import NbGraderPreprocessor
from nbformat.notebooknode import NotebookNode, from_dict
from traitlets import List

from course_tools.grading.i18n import N_, notebook_language, translator
from course_tools.grading.preprocessors import HIDDEN_START, TAIL_MARK, verdict_pattern
from course_tools.grading.render import FEEDBACK_MIME

HIDDEN_REGION = re.compile(r"^([ \t]*)###\s*BEGIN HIDDEN TESTS.*?^[ \t]*###\s*END HIDDEN TESTS[^\n]*\n?", re.M | re.S)
# The English texts below are shown in the submission's language (course_tools/grading/i18n.py).
HIDDEN_PLACEHOLDER = N_("# [hidden tests: run and decided by the autograder; not shown in feedback]") + "\n"
WITHHELD = N_("raised while running a hidden check (details are not shown in feedback)")
GENERIC_FAILURE = N_("hidden check(s) failed (details are not shown in feedback)")
VERDICT = verdict_pattern()   # VerifyRecords' line for a passing cell (English; a submission's own: its language)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def redact_source(source: str, placeholder: str = HIDDEN_PLACEHOLDER) -> str:
    """``source`` without its hidden region (one ``placeholder`` line instead) and the autograder's tail."""
    if TAIL_MARK in source:
        source = source[: source.index(TAIL_MARK)].rstrip("\n") + "\n"
    source = re.sub(r"^[ \t]*print\(" + re.escape(repr(HIDDEN_START)) + r"\)\n", "", source, flags=re.M)
    return HIDDEN_REGION.sub(lambda m: m.group(1) + placeholder, source)


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


def _withheld_error(ename: str, text: str = WITHHELD) -> NotebookNode:
    return from_dict({"output_type": "error", "ename": ename, "evalue": text,
                      "traceback": [f"{ename}: {text}"]})


INCOMPLETE = N_("this test cell did not run to its end (its error was hidden or it was skipped)")
WITHHELD_AFTER = N_("[feedback] {n} output(s) of this cell are not shown here{error}: it ran after the hidden checks "
                    "of {first} had started, and from then on what the kernel prints may carry them (their code, "
                    "their inputs). Your instructor sees every output; run the cell in your own notebook to see yours.") + "\n"
WITHHELD_MATCH = N_("[feedback] an output of this cell is not shown here: it holds a line of the hidden tests.") + "\n"
AMONG_THEM = N_(" (among them {error})")
AN_ERROR = N_("an error")
A_TEST_CELL = N_("a test cell")
# Error classes named in a withheld cell's note (a name of the student's choosing could carry data).
SHOWN_ERRORS = frozenset(n for n in dir(builtins) if isinstance(getattr(builtins, n), type)
                         and issubclass(getattr(builtins, n), BaseException)) | {"GradingLimit"}
_TAGS = re.compile(r"<[^>]{0,2000}>")
_ESCAPES = re.compile(r"\\(?:u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|x([0-9a-fA-F]{2})|N\{[^}]*\})")
_NOT_ALNUM = re.compile(r"[\W_]+")
MIN_LINE = 12   # letters and digits of a hidden line worth looking for (shorter: too common to mean anything)


def _unescape(text: str) -> str:
    """``text`` with ``\\uXXXX``, ``\\UXXXXXXXX`` and ``\\xXX`` escapes decoded (``\\N{...}`` dropped)."""
    def one(m: "re.Match[str]") -> str:
        code = m.group(1) or m.group(2) or m.group(3)
        if code is None:
            return ""
        try:
            return chr(int(code, 16))
        except (ValueError, OverflowError):
            return ""
    return _ESCAPES.sub(one, text)


def normalise(text: str) -> str:
    """The letters and digits of ``text``, case-folded, after undoing HTML entities and escapes:
    a line, its ``repr`` inside a list, its JSON or HTML form all give the same string."""
    t = _ANSI.sub("", text)
    for _ in range(2):   # entities and escapes may be nested (the repr of a JSON string, HTML of a repr)
        t = _unescape(html.unescape(t))
    return _NOT_ALNUM.sub("", t).casefold()


def _output_texts(out: Any) -> list[str]:
    """The text an output shows: stream text, an error's name, message and traceback, and every
    textual value of a display (images excepted)."""
    kind = out.get("output_type")
    if kind == "stream":
        text = out.get("text", "")
        return ["".join(text) if isinstance(text, list) else str(text)]
    if kind == "error":
        trace = "\n".join(str(t) for t in out.get("traceback", []))
        return [str(out.get("ename", "")), str(out.get("evalue", "")), trace]
    data = out.get("data") if isinstance(out.get("data"), dict) else {}
    texts = []
    for mime, value in data.items():
        if str(mime).startswith("image/") and not str(mime).startswith("image/svg"):
            continue
        texts.append("".join(value) if isinstance(value, list) else value if isinstance(value, str)
                     else json.dumps(value, default=str))
    return texts


class HiddenLines:
    """The hidden regions' lines of a notebook, normalised (:func:`normalise`), to recognise them in
    an output whatever its encoding. Lines the student was given or wrote (any cell's visible
    source) and lines shorter than :data:`MIN_LINE` letters and digits are not looked for."""

    def __init__(self, sources: Iterable[str], public: str) -> None:
        pub = normalise(public)
        lines = set()
        for source in sources:
            for m in HIDDEN_REGION.finditer(source):
                for line in m.group(0).splitlines()[1:-1]:
                    n = normalise(line)
                    if len(n) >= MIN_LINE and n not in pub:
                        lines.add(n)
        self.lines = sorted(lines)

    def found_in(self, out: Any) -> bool:
        """True when an output shows one of the lines (in any of the forms :func:`normalise` undoes)."""
        if not self.lines:
            return False
        for text in _output_texts(out):
            for form in {normalise(text), normalise(_TAGS.sub("", text))}:
                if any(line in form for line in self.lines):
                    return True
        return False


def _note(text: str) -> NotebookNode:
    return from_dict({"output_type": "stream", "name": "stdout", "text": text})


def _has_hidden_region(cell: NotebookNode) -> bool:
    return _is_test_cell(cell) and (bool(HIDDEN_REGION.search(cell.source)) or HIDDEN_START in cell.source)


class RedactHiddenTests(NbGraderPreprocessor):
    """Feedback preprocessor: hidden tests' code, inputs and reference values never reach a student."""

    # nbconvert's HTML exporter configures ``NbConvertBase.display_data_priority`` for every
    # preprocessor; NbGraderPreprocessor declares the trait without ``config=True`` (GetGrades
    # re-declares it), so traitlets warned "Config option display_data_priority not recognized by
    # RedactHiddenTests" at every generate_feedback. Unused here; declared configurable like GetGrades.
    display_data_priority = List(["text/html", "application/pdf", "text/latex", "image/svg+xml", "image/png",
                                  "image/jpeg", "text/plain"]).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        """Find the first cell with a hidden region and the hidden lines, then redact cell by cell."""
        cells = nb.get("cells", [])
        # the notes, verdict and messages in the language the notebook's kernel printed in
        self._t = _t = translator(notebook_language(nb))
        self._verdict = verdict_pattern(_t)
        first = next((i for i, c in enumerate(cells) if _has_hidden_region(c)), None)
        self._first = first
        self._first_name = (str(cells[first].get("metadata", {}).get("nbgrader", {}).get("grade_id") or _t(A_TEST_CELL))
                            if first is not None else "")
        sources = [c.source for c in cells if _is_test_cell(c)]
        public = "\n".join(redact_source(c.source, _t(HIDDEN_PLACEHOLDER.rstrip("\n")) + "\n")
                           if _is_test_cell(c) else str(c.get("source", "")) for c in cells)
        self._hidden = HiddenLines(sources, public)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if cell.get("cell_type") != "code":
            return cell, resources
        after = getattr(self, "_first", None) is not None and index >= self._first
        if _is_test_cell(cell):
            cell, resources = self._redact_test_cell(cell, resources, after)
        elif after:
            cell["outputs"] = self._withhold(list(cell.get("outputs", [])), [])
        hidden = getattr(self, "_hidden", None)
        if hidden is not None:
            match = self._tr(WITHHELD_MATCH.rstrip("\n")) + "\n"
            cell["outputs"] = [_note(match) if hidden.found_in(o) else o for o in cell.get("outputs", [])]
        return cell, resources

    @property
    def _tr(self) -> "Callable[[str], str]":
        return getattr(self, "_t", str)

    @property
    def _verdict_re(self) -> "re.Pattern[str]":
        return getattr(self, "_verdict", VERDICT)

    def _withhold(self, kernel_outputs: list[Any], trusted: list[NotebookNode]) -> list[NotebookNode]:
        """``trusted`` (written by the autograder outside the kernel), after one note for the
        ``kernel_outputs`` withheld (none when there are none)."""
        if not kernel_outputs:
            return trusted
        _t = self._tr
        names = [str(o.get("ename")) for o in kernel_outputs if o.get("output_type") == "error"]
        error = ""
        if names:
            shown = names[-1] if names[-1] in SHOWN_ERRORS else _t(AN_ERROR)
            error = _t(AMONG_THEM).format(error=shown)
        note = _note(_t(WITHHELD_AFTER.rstrip("\n")).format(n=len(kernel_outputs), error=error,
                                                            first=self._first_name) + "\n")
        return [note, *trusted]

    def _redact_test_cell(self, cell: NotebookNode, resources: Any, after: bool) -> tuple[NotebookNode, Any]:
        """A test cell: source without its hidden region; outputs as the module docstring says."""
        _t = self._tr
        hidden = hidden_lines(cell.source)
        cell.source = redact_source(cell.source, _t(HIDDEN_PLACEHOLDER.rstrip("\n")) + "\n")
        outputs: list[NotebookNode] = []
        trusted: list[NotebookNode] = []   # what the autograder wrote, rebuilt from its own text
        kernel: list[Any] = []             # what came out of the kernel
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
            if kind == "error" and out.get("ename") in ("HiddenTestFailed", "IncompleteTestCell"):
                ename = str(out.get("ename"))
                if ename == "IncompleteTestCell":   # RequireIntegrityCheck's fixed text (a kernel can raise one too)
                    evalue = _t(INCOMPLETE)
                else:
                    evalue = str(safe.get("evalue")) if safe and safe.get("evalue") else _t(GENERIC_FAILURE)
                    safe = None
                rebuilt = from_dict({"output_type": "error", "ename": ename, "evalue": evalue,
                                     "traceback": [f"{ename}: {evalue}"]})
                outputs.append(rebuilt)
                trusted.append(rebuilt)
                continue
            if kind == "stream" and i == len(raw) - 1 and self._verdict_re.match(out.get("text", "")):
                outputs.append(out)   # the autograder's own line (VerifyRecords), appended after the run
                trusted.append(out)
                continue
            marker_only = kind == "stream" and not "".join(
                line for line in str(out.get("text", "")).splitlines(keepends=True) if HIDDEN_START not in line)
            if not marker_only:   # the autograder's own marker line is not counted as withheld
                kernel.append(out)
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
                if in_hidden or any(line in str(out.get("evalue", "")) for line in hidden):
                    outputs.append(_withheld_error(str(out.get("ename", "Error")), _t(WITHHELD)))
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
        if after:   # from the first hidden region on, nothing of the kernel (module docstring)
            outputs = self._withhold(kernel, trusted)
        cell["outputs"] = outputs
        return cell, resources
