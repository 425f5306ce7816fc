"""A class hands in either edition of a chapter: graded exactly like English, with real nbgrader.

One temporary course, one gradebook, the English chapter 05 registered as the assignment (the
instructor's source); submissions built from the pt-BR *student notebook*
(``pt_BR/notebooks/05_rope``): the solution gets full marks, the blank notebook 0, a wrong answer
the same points per test cell as the same wrong answer handed in the English notebook. The
Portuguese question cells survive autograding without a "has changed" warning, and the visible
test's failure message reaches the student in Portuguese.
"""
from __future__ import annotations

import json
from pathlib import Path

import nbformat

from course_tools.grading.selftest import _fill, autograde_submissions, load_variants
from course_tools.translation import LANGUAGES

CHAPTER = "05_rope"
LANG = LANGUAGES[0]
ROOT = Path(__file__).resolve().parent.parent


def test_portuguese_submissions_graded_like_english(tmp_path):
    pt_student = json.loads((ROOT / LANG / "notebooks" / CHAPTER / f"{CHAPTER}.ipynb").read_text())
    variant = next(v for v in load_variants(CHAPTER) if v.loses == ["test_ex1_rotate_2d"])

    def build(en_student: dict, source: dict) -> dict[str, dict]:
        return {"en_solution": _fill(en_student, source), "en_wrong": _fill(en_student, source, variant.cells),
                "pt_solution": _fill(pt_student, source), "pt_wrong": _fill(pt_student, source, variant.cells),
                "pt_blank": pt_student}

    log: list[str] = []
    scores = autograde_submissions(tmp_path, ROOT / "solutions" / CHAPTER, CHAPTER, build, log=log)
    text = "".join(log)
    full = {g: (m, m) for g, (_, m) in scores["en_solution"].items()}
    assert scores["en_solution"] == full, scores["en_solution"]
    assert scores["pt_solution"] == full, (scores["pt_solution"], text[-3000:])
    assert all(s == 0 for s, _ in scores["pt_blank"].values()), scores["pt_blank"]
    assert scores["pt_wrong"] == scores["en_wrong"], (scores["pt_wrong"], scores["en_wrong"])
    assert scores["pt_wrong"]["test_ex1_rotate_2d"][0] == 0
    assert "has changed" not in text, text[-3000:]

    graded = nbformat.read(tmp_path / "autograded" / "pt_wrong" / CHAPTER / f"{CHAPTER}.ipynb", as_version=4)
    question = next(c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "written_consolidation_question")
    released = next(c for c in pt_student["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "written_consolidation_question")
    assert question.source == "".join(released["source"]) and "Written question" not in question.source
    test_cell = next(c for c in graded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_ex1_rotate_2d")
    errors = [o for o in test_cell.outputs if o.output_type == "error"]
    assert errors and "expected" not in errors[0].evalue and "rotate_2d" in errors[0].evalue, errors

    # What the autograder writes outside the kernel reaches her in Portuguese too (issue 47): the
    # hidden checks' verdict, then the feedback page (its labels, the verdict kept as the
    # autograder's); the English submission keeps English.
    import html

    from course_tools.grading.i18n import translator
    from course_tools.grading.preprocessors import HIDDEN_START, verdict_pattern
    from course_tools.grading.selftest import generate_feedback

    pt = translator(LANG)
    verdicts = [o.text for c in graded.cells for o in c.get("outputs", [])   # (the start marker: not in feedback)
                if o.output_type == "stream" and o.text.startswith("[autograder]") and HIDDEN_START not in o.text]
    assert verdicts and all(verdict_pattern(pt).match(v) for v in verdicts), verdicts
    generate_feedback(tmp_path, CHAPTER)
    pages = {s: html.unescape((tmp_path / "feedback" / s / CHAPTER / f"{CHAPTER}.html").read_text(encoding="utf-8"))
             for s in ("pt_wrong", "en_wrong")}
    assert f"{pt('Score')}:" in pages["pt_wrong"] and "Score:" not in pages["pt_wrong"]
    assert verdicts[0].strip() in pages["pt_wrong"] and "hidden values checked" not in pages["pt_wrong"]
    assert "Score:" in pages["en_wrong"] and "hidden values checked outside your kernel" in pages["en_wrong"]
