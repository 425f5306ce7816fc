"""Students can see every hand-graded question.

nbgrader replaces the *whole* source of a hand-graded answer cell (``solution`` and ``grade``)
with "YOUR ANSWER HERE" in the student notebook, so a question written inside that cell never
reaches the student. The rule checked here, for every chapter's student notebook
(``notebooks/NN/NN.ipynb``):

* the cell just before each hand-graded answer cell is a markdown cell that nbgrader locks
  (``locked: true``, not a solution cell): a student cannot delete or overwrite it by accident;
* its text is a question: it contains a ``?`` or an instruction word (Explain, Answer, Quote,
  Compare, Describe, Why, Which, What, How...), and it states the answer cell's points
  ("3 points", "1 pt");
* nothing of the question is left only on the solution side: every sentence ending in ``?`` of
  the instructor's answer cell (``solutions/NN/NN.ipynb``) also appears in the student notebook.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from course_tools.release import chapters

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = chapters(ROOT)

QUESTION_WORDS = re.compile(
    r"\b(explain|answer|question|quote|compare|describe|justify|why|which|what|how|name|estimate|report)\b",
    re.IGNORECASE)
POINTS = re.compile(r"\b(\d+(?:\.\d+)?)\s*(?:pts?|points?)\b", re.IGNORECASE)
SENTENCE_END = re.compile(r"(?<=[.?!:;])\s+")


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _src(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _norm(text: str) -> str:
    return " ".join(text.split())


def _is_answer(cell: dict) -> bool:
    """A hand-graded answer: nbgrader hides its source and a person grades what the student writes."""
    return cell["cell_type"] in ("markdown", "code") and bool(_meta(cell).get("solution")) \
        and bool(_meta(cell).get("grade"))


def _load(kind: str, ch: str) -> dict:
    return json.loads((ROOT / kind / ch / f"{ch}.ipynb").read_text(encoding="utf-8"))


def test_every_chapter_has_a_student_notebook():
    assert CHAPTERS, "no chapters found"
    missing = [ch for ch in CHAPTERS if not (ROOT / "notebooks" / ch / f"{ch}.ipynb").is_file()]
    assert not missing, f"no student notebook for {missing}: run `llm-course release`"


@pytest.mark.parametrize("ch", CHAPTERS)
def test_every_hand_graded_answer_follows_a_visible_locked_question(ch):
    cells = _load("notebooks", ch)["cells"]
    answers = [i for i, c in enumerate(cells) if _is_answer(c)]
    assert answers, f"{ch}: no hand-graded answer cell in the student notebook"
    problems = []
    for i in answers:
        gid = _meta(cells[i]).get("grade_id")
        where = f"{ch}, answer cell {gid!r}"
        if i == 0:
            problems.append(f"{where}: it is the first cell; no question precedes it")
            continue
        prev = cells[i - 1]
        pm, text = _meta(prev), _src(prev)
        if prev["cell_type"] != "markdown":
            problems.append(f"{where}: the cell before it is a {prev['cell_type']} cell, not the markdown "
                            f"question (add a locked markdown cell '{gid}_question' in front of it)")
            continue
        if not pm.get("locked") or pm.get("solution"):
            problems.append(f"{where}: the question cell before it ({prev.get('id')}) is not locked by nbgrader "
                            f"(give it nbgrader metadata with \"locked\": true, \"solution\": false)")
        if not text.strip() or text.strip() == "YOUR ANSWER HERE":
            problems.append(f"{where}: the cell before it is empty or an answer box; the question is missing")
            continue
        if "?" not in text and not QUESTION_WORDS.search(text):
            problems.append(f"{where}: the cell before it ({prev.get('id')}) asks nothing "
                            f"(no '?' and no instruction such as Explain/Answer/Quote/Compare)")
        points = _meta(cells[i]).get("points")
        stated = {float(x) for x in POINTS.findall(text)}
        if points is not None and float(points) not in stated:
            problems.append(f"{where}: the question before it does not say it is worth {points:g} point(s) "
                            f"(it states {sorted(stated) or 'no points'})")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("ch", CHAPTERS)
def test_no_question_is_left_only_on_the_solution_side(ch):
    """What nbgrader hides (the instructor's answer cells) must not hold question text the student lacks."""
    solution = _load("solutions", ch)["cells"]
    student = _load("notebooks", ch)["cells"]
    visible = _norm("\n".join(_src(c) for c in student if not _is_answer(c)))
    student_ids = {_meta(c).get("grade_id") for c in student if _is_answer(c)}
    problems = []
    for c in solution:
        if not _is_answer(c):
            continue
        gid = _meta(c).get("grade_id")
        if gid not in student_ids:
            problems.append(f"{ch}, answer cell {gid!r}: missing from the student notebook "
                            f"(run `llm-course release {ch} --force`)")
        text = _src(c)
        if c["cell_type"] == "code":  # only the part between the solution markers is hidden
            text = "\n".join(re.findall(r"### BEGIN SOLUTION(.*?)### END SOLUTION", text, re.S))
        asked = [_norm(s) for s in SENTENCE_END.split(text) if s.rstrip().endswith("?")]
        hidden = [q for q in asked if q not in visible]
        if hidden:
            problems.append(f"{ch}, answer cell {gid!r}: the instructor's answer holds question text that the "
                            f"student notebook does not show (nbgrader replaces the cell): {hidden[:3]}; "
                            f"move it into the locked question cell before the answer")
    assert not problems, "\n".join(problems)
