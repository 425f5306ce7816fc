"""Cheats a student could hand in, graded by a real `nbgrader autograde` with the course config.

A tiny synthetic assignment (one answer, two test cells) keeps this fast; the mechanisms under
test (course_utils.nbgrader_ext, course_utils.integrity) are the same for every chapter. Every
cheat below is combined with a WRONG answer and must score 0; the honest right answer must get
full marks although a library writes warnings to stderr in every cell.
"""
import copy
import json

import pytest

from course_utils.autograde import autograde_submissions
from course_utils.nbgrader_ext import HOOK_PATTERNS, hook_findings

CH = "integrity"


def _cell(kind, source, grade_id, grade=False, solution=False, locked=True, points=None):
    meta = {"grade": grade, "solution": solution, "locked": locked, "grade_id": grade_id,
            "schema_version": 3, "task": False}
    if points is not None:
        meta["points"] = points
    cell = {"cell_type": kind, "metadata": {"nbgrader": meta}, "source": source, "id": grade_id}
    if kind == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


SOURCE = {
    "cells": [
        _cell("code", "import course_utils\nimport torch\nDEVICE = course_utils.setup(seed=0, quiet=True)", "setup"),
        _cell("code", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "answer",
              solution=True, locked=False),
        _cell("code", "from course_utils.grading import check_equal\ncheck_equal('double(3)', double(3), 6)\n"
                      "### BEGIN HIDDEN TESTS\nfrom course_utils.grading import assert_untampered\n"
                      "assert_untampered()\ncheck_equal('double(-2)', double(-2), -4)\n### END HIDDEN TESTS",
              "test_int", grade=True, points=2),
        _cell("code", "from course_utils.grading import check_close\n"
                      "check_close('double(tensor)', double(torch.tensor([1.5, -1.0])), [3.0, -2.0])",
              "test_tensor", grade=True, points=1),
        _cell("markdown", "Explain. YOUR ANSWER", "written", grade=True, solution=True, locked=False, points=1),
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                 "language_info": {"name": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}

RIGHT = "def double(x):\n    return 2 * x\n"
WRONG = "def double(x):\n    return x + x * 0\n"
# Each cheat is written so that the static scan (FlagKernelHooks) does NOT see it: names are
# built at run time, so what stops it is the run-to-the-end token or the integrity check.
OBFUSCATED = {
    "hook_hides_errors": (
        "_ip = get_ipython()\n"
        "def _hide(result):\n"
        "    setattr(result, 'error_in' + '_exec', None)\n"
        "    __import__('IPython').display.clear_output()\n"
        "getattr(getattr(_ip, 'eve' + 'nts'), 'reg' + 'ister')('post_run_cell', _hide)\n"),
    "custom_exception_handler": (
        "_ip = get_ipython()\n"
        "getattr(_ip, 'set_custom' + '_exc')((BaseException,), lambda *a, **k: None)\n"
        "def _hide(result):\n"
        "    setattr(result, 'error_in' + '_exec', None)\n"
        "getattr(getattr(_ip, 'eve' + 'nts'), 'reg' + 'ister')('post_run_cell', _hide)\n"),
    "input_transformer_blanks_tests": (
        "getattr(get_ipython(), 'input_trans' + 'formers_post').append("
        "lambda lines: ['pass\\n'] if any('check_' in l for l in lines) else lines)\n"),
    "patched_checks": (
        "import importlib\n"
        "_g = importlib.import_module('course_utils.' + 'gra' + 'ding')\n"
        "for _n in ('check_equal', 'check_close', 'assert' + '_untampered'):\n"
        "    setattr(_g, _n, lambda *a, **k: None)\n"),
    "patched_module_in_sys_modules": (
        "import sys, types\n"
        "_fake = types.ModuleType('fake')\n"
        "for _n in ('check_equal', 'check_close', 'assert' + '_untampered'):\n"
        "    setattr(_fake, _n, lambda *a, **k: None)\n"
        "getattr(sys, 'mod' + 'ules')['course_utils.' + 'grading'] = _fake\n"),
    "list_subclass_liar": (
        "class _Liar(list):\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __ne__(self, other):\n        return False\n"),
}


def _with_answer(student, source):
    nb = copy.deepcopy(student)
    for c in nb["cells"]:
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "answer":
            c["source"] = source
    return nb


def _tests(nb):
    return [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade")
            and not c["metadata"]["nbgrader"].get("solution")]


def _build(student, _source):
    subs = {"right": _with_answer(student, RIGHT), "wrong": _with_answer(student, WRONG)}
    for name, cheat in OBFUSCATED.items():
        subs[name] = _with_answer(student, cheat + WRONG)
    tagged = _with_answer(student, WRONG)
    for c in _tests(tagged):  # the tag nbgrader skips, and the one this course once mis-used
        c["metadata"]["tags"] = ["skip-execution", "raises-exception", "course-internal-never-skip"]
    subs["tags_on_test_cells"] = tagged
    for who, answer in (("test_cells_deleted", WRONG), ("test_cells_deleted_right_answer", RIGHT)):
        deleted = _with_answer(student, answer)
        deleted["cells"] = [c for c in deleted["cells"] if c not in _tests(deleted)]
        subs[who] = deleted
    flagged = _with_answer(student, RIGHT + "get_ipython().events.register('post_run_cell', lambda *a: None)\n")
    subs["plain_hook_with_right_answer"] = flagged
    return subs


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    src = tmp_path_factory.mktemp("src") / CH
    src.mkdir()
    (src / f"{CH}.ipynb").write_text(json.dumps(SOURCE))
    log: list[str] = []
    scores = autograde_submissions(course, src, CH, _build, log=log)
    return scores, course, "".join(log)


def _total(cells):
    return sum(s for s, _ in cells.values()), sum(m for _, m in cells.values())


def test_honest_answers_are_graded_right_despite_stderr_noise(graded):
    scores, course, log = graded
    assert _total(scores["right"]) == (3, 3), log[-2000:]
    # test cells deleted by accident are re-added by nbgrader, run, and are not flagged
    assert _total(scores["test_cells_deleted_right_answer"]) == (3, 3), log[-2000:]
    assert _total(scores["wrong"]) == (0, 3)
    out = json.loads((course / "autograded" / "right" / CH / f"{CH}.ipynb").read_text())
    texts = "".join("".join(o.get("text", "")) for c in _tests(out) for o in c.get("outputs", []))
    assert "SomeLibWarning" in texts, "the stderr noise did not reach the test cells: the check proves nothing"
    assert "integrity-ok-" not in texts, "the run's token must not show in the feedback"


@pytest.mark.parametrize("who", [*OBFUSCATED, "tags_on_test_cells", "test_cells_deleted"])
def test_cheat_with_wrong_answer_scores_zero(graded, who):
    scores, _, log = graded
    assert _total(scores[who]) == (0, 3), f"{who}: {scores[who]}"


def test_kernel_hooks_in_answers_are_flagged_for_manual_review(graded):
    scores, course, _ = graded
    assert _total(scores["plain_hook_with_right_answer"]) == (0, 3)
    out = json.loads((course / "autograded" / "plain_hook_with_right_answer" / CH / f"{CH}.ipynb").read_text())
    errors = [o for c in _tests(out) for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors and "review this notebook by hand" in errors[0]["evalue"]


def test_hook_scan_patterns():
    assert hook_findings("get_ipython().events.register('post_run_cell', f)")
    assert hook_findings("ip.input_transformers_post.append(f)")
    assert hook_findings("from course_utils import grading\ngrading.check_close = None")
    assert hook_findings("setattr(course_utils.grading, 'check_close', None)")
    assert not hook_findings("from course_utils.grading import check_close  # students may self-check")
    assert hook_findings("sys._getframe(1).f_locals['expected']")
    assert not hook_findings("def softmax(x):\n    z = x - x.max(dim=-1, keepdim=True).values\n    return z.exp()")
    assert len(HOOK_PATTERNS) >= 10
