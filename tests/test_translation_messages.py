"""Everything a student of an edition reads is in the edition's language (issue 47).

* Every message a student can see has a translated, non-fuzzy entry in ``course_utils.po``: the
  checks' templates and names (``course_utils/grading.py``, the chapters' test cells) and what is
  written outside the kernel — the autograder's verdicts, the feedback's notes and page, the answer
  stubs, ``nbgrader validate``'s report (each marked ``N_("…")`` or ``_t("…")`` where it is written;
  the catalogue's template extracts them from ``course_tools.translation.MESSAGE_WRITERS``).
* A Portuguese submission gets them in Portuguese, an English one in English (verdict, redacted
  feedback, feedback page, stubs, validate), and a Portuguese verdict is still the only line of a
  test cell the feedback keeps as the autograder's.
"""
from __future__ import annotations

import io
import re
from pathlib import Path

import nbformat
import pytest
from babel.messages.extract import extract_from_file
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from course_tools import translation as tr
from course_tools.grading import i18n
from course_tools.grading.preprocessors import HIDDEN_START, verdict, verdict_pattern

ROOT = Path(__file__).resolve().parent.parent
LANG = tr.LANGUAGES[0]
# where a student-visible message is written outside a kernel, and the marker it is written with
WRITERS = tr.MESSAGE_WRITERS
_FIELDS = re.compile(r"\{[a-z_]*\}")


def _marked() -> dict[str, str]:
    out = {}
    for rel in WRITERS:
        for lineno, message, _c, _ctx in extract_from_file("python", str(ROOT / rel), keywords={"N_": None, "_t": None}):
            if isinstance(message, str):
                out[message] = f"{rel}:{lineno}"
    return out


def test_every_message_written_outside_the_kernel_is_in_the_catalogue_template():
    marked = _marked()
    assert len(marked) > 60, sorted(marked)
    template = tr.messages_template()
    missing = [f"{where}: {m!r}" for m, where in marked.items() if m not in template]
    assert not missing, "the catalogue's template misses these (course_tools.translation.messages_template):\n" + "\n".join(missing)


def test_every_message_a_student_can_see_has_a_current_translation():
    """The checks' templates and names, the autograder's verdicts, the feedback, the stubs, validate."""
    cat = tr.read_catalogue(tr.catalogue_path(tr.MESSAGES_DOMAIN, LANG))
    problems = []
    for msgid in [m.id for m in tr.messages_template() if m.id] + list(_marked()):
        entry = cat.get(msgid)
        if entry is None or not entry.string or entry.fuzzy:
            problems.append(f"no current {LANG} entry: {msgid!r}")
        elif sorted(_FIELDS.findall(entry.string)) != sorted(_FIELDS.findall(msgid)):
            problems.append(f"{msgid!r}: its fields {sorted(set(_FIELDS.findall(msgid)))} differ in {entry.string!r}")
    assert not problems, "\n".join(problems)


@pytest.fixture
def pt():
    assert i18n.available(LANG), "compiled messages missing: run `llm-course translate build`"
    return i18n.translator(LANG)


def _setup(lang: str | None) -> nbformat.NotebookNode:
    line = f'os.environ["LLM_COURSE_LANG"] = "{lang}"  # edição\n' if lang else ""
    cell = new_code_cell("import importlib.util, os, subprocess, sys\n" + line + "print('ok')\n")
    cell.metadata["nbgrader"] = {"grade_id": "setup", "locked": True, "grade": False, "solution": False,
                                 "schema_version": 3}
    return cell


def test_the_language_is_the_setup_cells():
    assert i18n.notebook_language(new_notebook(cells=[_setup(LANG)])) == LANG
    assert i18n.notebook_language(new_notebook(cells=[_setup(None)])) == "en"
    assert i18n.notebook_language(new_notebook(cells=[_setup("xx_YY")])) == "en"   # no messages: English
    assert i18n.notebook_language(new_notebook(cells=[new_code_cell('os.environ["LLM_COURSE_LANG"] = "pt_BR"')])) == "en"


def test_the_verdict_in_portuguese_and_recognised_in_its_language_only(pt):
    en_line, pt_line = verdict(13, ["torch"]), verdict(13, ["torch"], pt)
    assert en_line == "[autograder] 13 hidden values checked outside your kernel (also with torch removed): all match\n"
    assert pt_line != en_line and "13" in pt_line and "torch" in pt_line and pt_line.startswith("[autograder]")
    assert verdict_pattern(pt).match(pt_line) and verdict_pattern(pt).match(verdict(2, None, pt))
    assert verdict_pattern().match(en_line) and not verdict_pattern().match(pt_line)
    assert not verdict_pattern(pt).match(pt_line.replace("13", "13 and the reference is 2.5"))


def test_what_differs_in_portuguese(pt):
    from course_utils.records import decode, summarize

    from course_utils.records import encode

    def f(v):
        return decode(encode(v))

    assert summarize(f(1.5), f(2.5), {"atol": 1e-6}) == "value differs beyond the tolerance"
    assert summarize(f(1.5), f(2.5), {"atol": 1e-6}, pt) == pt("value differs beyond the tolerance") != \
        "value differs beyond the tolerance"
    assert summarize(f([1, 2]), f([1, 2, 3]), {}, pt) == pt("length differs (yours: {n} items)").format(n=2)
    assert "2.5" not in summarize(f(1.5), f(2.5), {"atol": 1e-6}, pt)


def _graded(lang: str | None, outputs: list) -> nbformat.NotebookNode:
    test = new_code_cell("check(1)\n### BEGIN HIDDEN TESTS\nrecord('f', f(123456789))\n### END HIDDEN TESTS\n")
    test.metadata["nbgrader"] = {"grade_id": "test_f", "grade": True, "solution": False, "points": 1,
                                 "locked": True, "schema_version": 3}
    test.outputs = [nbformat.from_dict(o) for o in outputs]
    return new_notebook(cells=[_setup(lang), test])


def _redacted(nb):
    from course_tools.grading.feedback import RedactHiddenTests

    out, _ = RedactHiddenTests().preprocess(nb, {})
    return out.cells[1]


@pytest.mark.parametrize("lang", [None, LANG])
def test_feedback_in_the_notebooks_language(lang, pt):
    t = pt if lang else str
    from course_tools.grading.render import FEEDBACK_MIME

    passing = _graded(lang, [{"output_type": "stream", "name": "stdout", "text": verdict(4, None, t)}])
    cell = _redacted(passing)
    assert cell.outputs[-1]["text"] == verdict(4, None, t)
    assert t("# [hidden tests: run and decided by the autograder; not shown in feedback]") in cell.source
    # a verdict in the other language is not the autograder's: withheld like any kernel output
    other = _graded(lang, [{"output_type": "stream", "name": "stdout", "text": verdict(4, None, str if lang else pt)}])
    assert [o["text"] for o in _redacted(other).outputs if o.get("output_type") == "stream"] == [
        t("[feedback] {n} output(s) of this cell are not shown here{error}: it ran after the hidden checks of "
          "{first} had started, and from then on what the kernel prints may carry them (their code, their "
          "inputs). Your instructor sees every output; run the cell in your own notebook to see yours.").format(
            n=1, error="", first="test_f") + "\n"]
    safe = t("{n} hidden check(s) failed (decided by the autograder outside your kernel):").format(n=1) + "\n- f: " + \
        t("value differs")
    failing = _graded(lang, [
        {"output_type": "stream", "name": "stdout", "text": HIDDEN_START + "\n"},
        {"output_type": "display_data", "metadata": {}, "data": {FEEDBACK_MIME: {"ename": "HiddenTestFailed", "evalue": safe}}},
        {"output_type": "error", "ename": "HiddenTestFailed", "evalue": "f: got 3, expected 2468", "traceback": []},
        {"output_type": "error", "ename": "IncompleteTestCell", "evalue": "x", "traceback": []},
    ])
    errors = {o["ename"]: o["evalue"] for o in _redacted(failing).outputs if o.get("output_type") == "error"}
    assert errors == {"HiddenTestFailed": safe,
                      "IncompleteTestCell": t("this test cell did not run to its end (its error was hidden or it was skipped)")}


def test_verify_records_speaks_the_submissions_language(pt):
    from course_utils.records import _spec, encode, verify_cell_detailed

    ref = [{"role": "record", "key": "k", "spec": _spec(None, None, True, None), "value": encode(1)}]
    en, _ = verify_cell_detailed([], ref)
    pt_problems, _ = verify_cell_detailed([], ref, pt)
    assert en[0][1].startswith("1 of 1 hidden values never recorded")
    assert pt_problems[0][1] == pt("{missing} of {total} hidden values never recorded (the cell stopped before "
                                   "{first}: see the error above, if any)").format(missing=1, total=1, first="'k'")
    assert pt_problems[0][0] == en[0][0]   # the instructor's form stays as it was


def test_edition_stubs(pt):
    code = "# YOUR CODE HERE\nraise NotImplementedError()"
    assert i18n.edition_stub(code, LANG) == pt("# YOUR CODE HERE") + "\nraise NotImplementedError()"
    assert pt("# YOUR CODE HERE").startswith("# ") and pt("# YOUR CODE HERE") != "# YOUR CODE HERE"
    assert i18n.edition_stub("YOUR ANSWER HERE", LANG) == pt("YOUR ANSWER HERE") != "YOUR ANSWER HERE"
    released = "def f(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"
    assert i18n.edition_answer_stub(released, LANG) == released.replace("# YOUR CODE HERE", pt("# YOUR CODE HERE"))


def test_generated_edition_notebook_has_the_editions_stubs(tmp_path, pt):
    """nbgrader generate_assignment with the course's config: Portuguese stubs in the edition only."""
    import subprocess
    import sys

    from nbgrader import utils

    def generate(source_dir: Path, out: Path) -> nbformat.NotebookNode:
        subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "05_rope", "--no-db", "--force",
                        f"--CourseDirectory.root={ROOT}", f"--CourseDirectory.release_directory={out}",
                        f"--CourseDirectory.source_directory={source_dir}", "--log-level=WARN"],
                       cwd=ROOT, check=True, capture_output=True)
        return nbformat.read(out / "05_rope" / "05_rope.ipynb", as_version=4)

    en = generate(ROOT / "solutions", tmp_path / "en")
    ptnb = generate(ROOT / LANG / "solutions", tmp_path / "pt")
    answers = [(a, b) for a, b in zip(en.cells, ptnb.cells) if a.metadata.get("nbgrader", {}).get("solution")]
    assert answers
    for a, b in answers:
        if a.cell_type == "code":
            assert "# YOUR CODE HERE" in a.source and pt("# YOUR CODE HERE") in b.source
            assert b.source == i18n.edition_answer_stub(a.source, LANG)
        else:
            assert (a.source, b.source) == ("YOUR ANSWER HERE", pt("YOUR ANSWER HERE"))
        # the released checksum is the edition's own: an answer left as released reads "unchanged"
        assert b.metadata.nbgrader["checksum"] == utils.compute_checksum(b)


def test_validate_wraps_instead_of_cutting_and_speaks_the_notebooks_language(pt):
    from nbgrader.validator import Validator

    from course_tools.grading import validate

    validate.install()
    v = Validator()
    message = "check_close: " + "uma mensagem longa em português que diz o que corrigir " * 4 + "FIM"
    shown = v._indent(message)
    assert "..." not in shown and all(len(line) <= v.width for line in shown.split("\n"))
    assert " ".join(shown.split()) == " ".join(message.split())
    v.stream = io.StringIO()
    v._llm_course_t = pt
    v._print_error("x = 1", message)
    v._print_num_failed(2)
    text = v.stream.getvalue()
    assert pt("The following cell failed:") in text and "FIM" in text and "The error was" not in text


@pytest.mark.parametrize("lang", [None, LANG])
def test_feedback_page_in_the_notebooks_language(lang, pt):
    from traitlets.config import Config

    nb = _graded(lang, [])
    nb.cells[1].metadata.nbgrader["score"] = 0.0
    answer = new_markdown_cell("YOUR ANSWER HERE")
    answer.metadata["nbgrader"] = {"grade_id": "written", "grade": True, "solution": True, "points": 2,
                                   "score": 0.0, "comment": "No response.", "locked": False, "schema_version": 3}
    nb.cells.append(answer)
    c = Config()
    c.FeedbackExporter.template_name = i18n.FEEDBACK_TEMPLATE
    c.FeedbackExporter.extra_template_basedirs = [str(i18n.TEMPLATES), i18n.NBGRADER_TEMPLATES]
    c.HTMLExporter.extra_template_paths = [str(Path(i18n.NBGRADER_TEMPLATES).parent / "static" / "node_modules"
                                               / "bootstrap" / "dist" / "css")]
    html, _ = i18n.FeedbackExporter(config=c).from_notebook_node(
        nb, {"nbgrader": {"notebook": "05_rope", "score": 0, "max_score": 3, "late_penalty": 1}})
    t = pt if lang else str
    for label in ("Score", "Test cell", "Written response", "Late submission penalty", "Student's answer",
                  "No response.", "Comments"):
        assert t(label) in html, label
    if lang:
        assert "Late submission penalty" not in html and "(Score:" not in html and "Student's answer" not in html


# Chapters whose visible tests still build English text (f-strings, prints, raises with their own
# text), with how many places; none is left (issue 47), and the count may only go down.
OPEN: dict[str, int] = {}


def test_untranslatable_messages_are_found():
    src = ('check_close(f"f(x={x})", a, b)\ncheck_close(msg("f(x={x})", x=x), a, b)\ncheck_true(c, "ok")\n'
           'print("visible tests passed")\npassed()\nraise AssertionError("no")\nraise AssertionError(msg("no"))\n'
           '### BEGIN HIDDEN TESTS\nprint(f"{x}")\n')
    found = tr.untranslatable_messages(src)
    assert sorted(f.split(":")[0] for f in found) == ["line 1", "line 4", "line 6"], found
    assert tr.message_templates(src) == ["f(x={x})", "no"]


@pytest.mark.parametrize("ch", tr.chapters(ROOT))
def test_visible_tests_write_messages_a_catalogue_can_translate(ch):
    nb = nbformat.read(ROOT / "solutions" / ch / f"{ch}.ipynb", as_version=4)
    found = [f"cell {c.metadata['nbgrader']['grade_id']}, {p}" for c in nb.cells
             if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("grade")
             and not c.metadata["nbgrader"].get("solution") for p in tr.untranslatable_messages(c.source)]
    assert len(found) <= OPEN.get(ch, 0), f"{ch}: a Portuguese student would read these in English:\n" + "\n".join(found)
