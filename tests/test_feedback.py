"""Issue 29: a student's feedback never hands out the hidden tests.

Chapter 05's source is graded with a wrong submission (three plausible mistakes of
``tests/wrong_answers/05_rope.py``: a dtype, positions ignored, an odd ``d`` accepted) by real
``nbgrader autograde`` and ``nbgrader generate_feedback`` with the course config. The feedback
must show each failed hidden check's name and the kind of difference, and none of the hidden
tests' source lines, nor any value of the reference records; the autograded notebook (what
Formgrader shows the instructor) keeps the full report with the expected values.
"""
from __future__ import annotations

import copy
import json
import os
import re
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from course_tools.grading.feedback import HIDDEN_REGION, redact_source
from course_tools.grading.selftest import _fill, autograde_submissions, generate_feedback, load_variants
from course_utils.paths import cache_dir, repo_root
from course_utils.records import DTYPES, _show, decode, parse_record, summarize

CH = "05_rope"
MISTAKES = ("rotate_2d_promotes_to_theta_dtype", "rope_ignores_positions", "interleaved_to_half_accepts_odd_d")


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.skip = False

    def handle_starttag(self, tag, attrs):
        self.skip = tag in ("style", "script")

    def handle_endtag(self, tag):
        self.skip = False

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)


def _text(page: str) -> str:
    p = _Text()
    p.feed(page)
    return unescape("".join(p.parts))


def _values(decoded) -> list[str]:
    """Every scalar and array element of a decoded record value, as a failure message prints it."""
    kind = decoded[0]
    if kind in ("tensor", "ndarray", "npscalar"):
        arr = np.asarray(decoded[2]).ravel()
        return [_show(x) for x in arr[:2000]]
    if kind in ("list", "tuple"):
        return [v for d in decoded[1] for v in _values(d)]
    if kind == "dict":
        return [v for _, d in decoded[1] for v in _values(d)]
    if kind == "float":
        return [repr(decoded[1])]
    if kind in ("int", "str"):
        return [repr(decoded[1]), str(decoded[1])]
    return []


def test_summaries_name_the_kind_never_the_reference():
    f = lambda v: decode(__import__("course_utils.records", fromlist=["encode"]).encode(v))  # noqa: E731
    import torch

    ref = torch.tensor([2.6085055, -1.25], dtype=torch.float64)
    cases = {
        "dtype differs (yours: float32)": (ref.float(), {"dtype": True, "atol": 1e-6}),
        "shape differs (yours: (3,))": (torch.zeros(3, dtype=torch.float64), {"dtype": True}),
        "values differ beyond the tolerance (1 of 2 elements)": (ref + torch.tensor([0.1, 0.0], dtype=torch.float64),
                                                                 {"dtype": True, "atol": 1e-6}),
    }
    for want, (got, spec) in cases.items():
        assert summarize(f(got), f(ref), spec) == want
    msg = summarize(f("returns"), f("raises ValueError"), {"dtype": True})
    assert "raises vs returns" in msg and "ValueError" not in msg
    assert "2.6085055" not in summarize(f(2.716335), f(2.6085055), {"dtype": True, "atol": 1e-6})


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    variants = {v.name: v for v in load_variants(CH)}
    replace: dict = {}
    for name in MISTAKES:
        for cell, spec in variants[name].cells.items():
            assert cell not in replace
            replace[cell] = spec

    def build(student, source):
        return {"wrong": _fill(student, source, replace)}

    log: list[str] = []
    scores = autograde_submissions(course, repo_root() / "solutions" / CH, CH, build, log=log)
    lost = {t for t, (got, top) in scores["wrong"].items() if got < top}
    assert {"test_ex1_rotate_2d", "test_ex2_rope_apply", "test_ex3_interleaved_to_half"} <= lost, "\n".join(log)
    generate_feedback(course, CH)
    return course


def _reference_records(course: Path, monkeypatch) -> dict[str, list]:
    """The records the autograder compared with (its cache: the same environment as its run)."""
    from course_tools.grading import references

    monkeypatch.setenv(references.REFERENCES_ENV, os.environ.get(references.REFERENCES_ENV,
                                                                  str(cache_dir() / "references")))
    monkeypatch.setenv("LLM_COURSE_CI", os.environ.get("LLM_COURSE_CI", "1"))   # as autograde_submissions
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")                       # as nbgrader autograde
    return references.reference_records(course / "solutions" / CH / f"{CH}.ipynb", course)


def test_feedback_shows_no_hidden_code_nor_reference_value(graded, monkeypatch):
    course = graded
    page = (course / "feedback" / "wrong" / CH / f"{CH}.html").read_text()
    text = _text(page)
    source = json.loads((course / "solutions" / CH / f"{CH}.ipynb").read_text())

    # 1. no line of any hidden region (the placeholder instead)
    hidden = []
    for cell in source["cells"]:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for m in HIDDEN_REGION.finditer(src):
            hidden += [line.strip() for line in m.group(0).splitlines()[1:-1] if len(line.strip()) >= 8]
    public = ""   # what the student was given or wrote (`import torch`, `d = x.shape[-1]`): not hidden
    for path in (course / "notebooks" / CH / f"{CH}.ipynb", course / "submitted" / "wrong" / CH / f"{CH}.ipynb"):
        nb = json.loads(path.read_text())
        public += "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"] for c in nb["cells"])
    hidden = [line for line in hidden if line not in public]
    assert len(hidden) > 20
    shown = [line for line in hidden if line in text]
    assert shown == [], f"hidden test lines in the feedback: {shown[:5]}"
    assert "hidden tests: run and decided by the autograder" in text

    # 2. the instructor's report names expected values; none reaches the feedback
    auto = json.loads((course / "autograded" / "wrong" / CH / f"{CH}.ipynb").read_text())
    full = "\n".join(o.get("evalue", "") for c in auto["cells"] for o in c.get("outputs", [])
                     if o.get("ename") == "HiddenTestFailed")
    expected = {v for v in re.findall(r"expected (?:a |an )?([^\s,;)]+)", full)
                if (re.search(r"[0-9]", v) or v.startswith("'")) and v not in DTYPES}   # values, not dtypes
    assert expected, "the wrong submission fails hidden checks with expected values (instructor's report)"
    assert [v for v in expected if v in text and len(v) > 3] == []

    # 3. no value of any reference record (a float or integer as a failure message writes it)
    refs = _reference_records(course, monkeypatch)
    values = set()
    for recs in refs.values():
        for obj in recs:
            _role, _key, _spec, value = parse_record(obj)
            values |= {v for v in _values(value) if len(v) >= 6 and re.fullmatch(r"-?[0-9.e+-]+|'.*'", v)}
    assert len(values) > 50
    # the student's own, visible outputs (not test cells) may print the same numbers: not a leak
    own = " ".join(json.dumps(c.get("outputs", [])) for c in auto["cells"]
                   if not c["metadata"].get("nbgrader", {}).get("grade"))
    tokens = set(re.findall(r"-?[0-9][0-9.e+-]*", text))
    leaked = sorted(v for v in values if (v in tokens if not v.startswith("'") else v in text) and v not in own)
    assert leaked == [], f"reference values in the feedback: {leaked[:10]}"

    # 4. what the student does get: each failed check's name and the kind of difference
    assert "HiddenTestFailed" in text
    assert "raises vs returns" in text
    assert re.search(r"dtype differs|values differ", text)


def test_redacted_source_keeps_the_visible_test():
    src = ("check_equal('a', f(1), 2)\n### BEGIN HIDDEN TESTS\n_x = seed(11)\nrecord('k', f(_x))\n"
           "### END HIDDEN TESTS\n")
    out = redact_source(src)
    assert out.startswith("check_equal('a', f(1), 2)\n# [hidden tests") and "seed(11)" not in out


def test_redaction_of_a_test_cell_in_the_feedback():
    from nbformat import from_dict

    from course_tools.grading.feedback import RedactHiddenTests
    from course_tools.grading.preprocessors import HIDDEN_START, TAIL_MARK
    from course_tools.grading.render import FEEDBACK_MIME

    meta = {"nbgrader": {"grade": True, "solution": False, "grade_id": "t", "points": 1}}
    source = ("check_equal('f(1)', f(1), 2)\nprint(" + repr(HIDDEN_START) + ")\n### BEGIN HIDDEN TESTS\n"
              "_secret_input = make_input(seed=1234)\nrecord('f on a hidden input', f(_secret_input))\n"
              "### END HIDDEN TESTS\n" + TAIL_MARK + "\nintegrity_check()\n")
    cell = from_dict({"cell_type": "code", "metadata": meta, "source": source, "execution_count": 1, "outputs": [
        {"output_type": "stream", "name": "stdout", "text": "f(1) ok\n" + HIDDEN_START + "\ninput was 1234\n"},
        {"output_type": "display_data", "metadata": {}, "data": {"text/plain": "hidden plot of 1234"}},
        {"output_type": "display_data", "metadata": {}, "data": {FEEDBACK_MIME: {
            "ename": "HiddenTestFailed", "evalue": "1 hidden check(s) failed:\n- f on a hidden input: value differs"}}},
        {"output_type": "error", "ename": "HiddenTestFailed", "evalue": "- f on a hidden input: got 3, expected 2468",
         "traceback": ["HiddenTestFailed: got 3, expected 2468"]},
    ]})
    nb = from_dict({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})
    nb, _ = RedactHiddenTests().preprocess(nb, {})
    out = json.dumps(nb.cells[0])
    assert "1234" not in out and "2468" not in out and "make_input" not in out and "integrity_check" not in out
    assert "value differs" in out and "hidden tests: run and decided" in out
    # the first cell with a hidden region: even its visible part's outputs are withheld (issue 45)
    assert "f(1) ok" not in out and "are not shown here" in out
    # an error raised by the student's function on a hidden input keeps its class only
    cell2 = copy.deepcopy(cell)
    cell2.outputs = [{"output_type": "stream", "name": "stdout", "text": HIDDEN_START + "\n"},
                     {"output_type": "error", "ename": "ValueError", "evalue": "bad input 1234",
                      "traceback": ["----> 5 record('f on a hidden input', f(_secret_input))", "ValueError: bad input 1234"]}]
    nb.cells = [from_dict(cell2)]
    nb, _ = RedactHiddenTests().preprocess(nb, {})
    assert "1234" not in json.dumps(nb.cells[0]) and "(among them ValueError)" in nb.cells[0].outputs[0]["text"]
