"""Cheats a student could hand in, graded by a real `nbgrader autograde` with the course config.

A tiny synthetic assignment (one answer, two test cells) keeps this fast; the mechanisms under
test (course_tools.grading.preprocessors, course_tools.grading.integrity) are the same for every chapter. Every
cheat below is combined with a WRONG answer and must score 0; the honest right answer must get
full marks although a library writes warnings to stderr in every cell.
"""
import copy
import json

import pytest

from _classroom import nbgrader_cell as _cell
from course_tools.grading.selftest import autograde_submissions
from course_tools.grading.preprocessors import BELOW_TORCH_API, HOOK_PATTERNS, LIBRARY_REBINDING, hook_findings

CH = "integrity"


SOURCE = {
    "cells": [
        _cell("code", "import course_utils\nimport torch\nDEVICE = course_utils.setup(seed=0, quiet=True)", "setup"),
        _cell("code", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "answer",
              solution=True, locked=False),
        _cell("code", "from course_utils.grading import check_equal\ncheck_equal('double(3)', double(3), 6)\n"
                      "### BEGIN HIDDEN TESTS\nfrom course_utils.grading import record\n"
                      "record('double(-2)', double(-2))\n### BEGIN REFERENCE\nfrom course_utils.grading import expect\n"
                      "expect('double(-2)', -4)\n### END REFERENCE\n### END HIDDEN TESTS",
              "test_int", grade=True, points=2),
        _cell("code", "from course_utils.grading import check_close\n"
                      "check_close('double(tensor)', double(torch.tensor([1.5, -1.0])), [3.0, -2.0])\n"
                      "### BEGIN HIDDEN TESTS\nfrom course_utils.grading import record\n"
                      "record('double(tensor)', double(torch.tensor([1.5, -1.0])), atol=1e-6)\n### END HIDDEN TESTS",
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
    # records written by the answer itself: an "expect" with a huge tolerance, and the right value
    # under the hidden test's own key (the verdict must come from the hidden test's record only)
    "forged_records": (
        "from IPython.display import display as _show\n"
        "def _forge(role, key, v):\n"
        "    _show({'application/vnd.llm-course.record.v1+json': {'role': role, 'key': key, 'spec': {'dtype': False, "
        "'atol': 1e30}, 'value': {'t': 'int', 'v': str(v)}}}, raw=True)\n"
        "_forge('record', 'double(-2)', -4)\n"
        "def double(x, _wrong=lambda x: x + x * 0):\n"
        "    _forge('expect', 'double(-2)', -4)\n"
        "    _forge('record', 'double(-2)', -4)\n"
        "    return _wrong(x)\n"),
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
        subs[name] = _with_answer(student, cheat if "def double" in cheat else cheat + WRONG)
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
    for name, line in PLAIN_REBINDING.items():  # harmless values: only the scan can withhold these
        subs[name] = _with_answer(student, RIGHT + line)
    # One student against the next: graded first (nbgrader grades in name order), then an honest
    # and a wrong submission graded after them must get exactly what they earn.
    for name, attack in CROSS_SUBMISSION.items():
        subs[name] = _with_answer(student, attack + WRONG)
    subs["zz_right_after_attacks"] = _with_answer(student, RIGHT)
    subs["zz_wrong_after_attacks"] = _with_answer(student, WRONG)
    # Honest accidents: JupyterLab copies a cell's nbgrader metadata with the cell.
    for who, kind in (("accident_answer_pasted_twice", "answer"), ("accident_test_pasted_twice", "test_int")):
        nb = _with_answer(student, RIGHT)
        i = next(k for k, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == kind)
        dup = copy.deepcopy(nb["cells"][i])
        dup["id"] = dup["id"] + "-copy"
        nb["cells"].insert(i + 1, dup)
        subs[who] = nb
    nb = _with_answer(student, RIGHT)
    nb["cells"] = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") != "written"]
    subs["accident_written_answer_deleted"] = nb
    return subs


# Attacks on the submissions graded after this one, or on the gradebook. None is seen by the scan.
CROSS_SUBMISSION = {
    # an IPython startup file that blanks every test cell of the kernels started after this one
    "a0_startup_file_for_the_next_kernel": (
        "import os, pwd\n"
        "_code = (\"get_ipython().input_transformers_post.append(lambda lines: ['pass\\\\n'] "
        "if any('check_' in l for l in lines) else lines)\\n\")\n"
        "for _d in {os.environ.get('IPYTHON' + 'DIR', ''), os.path.expanduser('~/.ipython'),\n"
        "           pwd.getpwuid(os.getuid()).pw_dir + '/.ipython'}:\n"
        "    try:\n"
        "        os.makedirs(_d + '/profile_default/startup', exist_ok=True)\n"
        "        open(_d + '/profile_default/startup/00-x.py', 'w').write(_code)\n"
        "    except OSError:\n"
        "        pass\n"),
    # rewrite the course's grading code on disk (here a harmless comment: the test checks the file)
    "a1_rewrites_the_grading_module": (
        "import importlib\n"
        "_m = importlib.import_module('course_utils.' + 'gra' + 'ding')\n"
        "try:\n"
        "    open(_m.__file__, 'a').write('\\n# written by a submission\\n')\n"
        "except OSError:\n"
        "    pass\n"),
    # a process that outlives the kernel and writes full marks into the gradebook
    "a2_process_left_running": (
        "import os, subprocess, sys\n"
        "_db = os.path.abspath(os.path.join(os.getcwd(), '..', '..', '..', 'gradebook.db'))\n"
        "_code = ('import time, sqlite3; time.sleep(4); c = sqlite3.connect(%r); '\n"
        "         'c.execute(\"update grade set manual_score = (select max_score from grade_cell where grade_cell.id = grade.cell_id)\"); '\n"
        "         'c.commit()') % _db\n"
        "subprocess.Popen([sys.executable, '-c', _code], start_new_session=True,\n"
        "                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"),
}


# Assignments to attributes of imported modules and classes, written plainly: the scan flags them.
PLAIN_REBINDING = {
    "rebinds_np_attribute": "import numpy as np\nnp.where = np.where\n",
    "rebinds_tensor_method": "torch.Tensor.to = torch.Tensor.to\n",
    "setattr_on_torch": "setattr(torch, 'equal', torch.equal)\n",
    "vars_of_np": "import numpy as np\nvars(np)['isnan'] = np.isnan\n",
}


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


@pytest.mark.parametrize("who", [*CROSS_SUBMISSION, "zz_wrong_after_attacks"])
def test_attacks_on_other_submissions_score_zero_and_harm_nobody(graded, who):
    scores, course, log = graded
    assert _total(scores[who]) == (0, 3), f"{who}: {scores[who]}"
    assert _total(scores["zz_right_after_attacks"]) == (3, 3), log[-2000:]


def test_a_submission_cannot_change_the_course_code():
    import course_utils.grading

    text = open(course_utils.grading.__file__, encoding="utf-8").read()
    assert "written by a submission" not in text, "a submission rewrote course_utils/grading.py"


@pytest.mark.parametrize("who", ["accident_answer_pasted_twice", "accident_test_pasted_twice",
                                 "accident_written_answer_deleted"])
def test_honest_accidents_keep_the_points_their_answers_earn(graded, who):
    scores, _, log = graded
    assert _total(scores[who]) == (3, 3), f"{who}: {scores[who]}\n{log[-3000:]}"


@pytest.mark.parametrize("who", ["plain_hook_with_right_answer", *PLAIN_REBINDING])
def test_kernel_hooks_in_answers_are_flagged_for_manual_review(graded, who):
    scores, course, _ = graded
    assert _total(scores[who]) == (0, 3)
    out = json.loads((course / "autograded" / who / CH / f"{CH}.ipynb").read_text())
    errors = [o for c in _tests(out) for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert errors and "review this notebook by hand" in errors[0]["evalue"]
    if who in PLAIN_REBINDING:
        assert "imported module or class" in errors[0]["evalue"]


def test_hook_scan_patterns():
    assert hook_findings("get_ipython().events.register('post_run_cell', f)")
    assert hook_findings("ip.input_transformers_post.append(f)")
    assert hook_findings("from course_utils import grading\ngrading.check_close = None")
    assert hook_findings("setattr(course_utils.grading, 'check_close', None)")
    assert not hook_findings("from course_utils.grading import check_close  # students may self-check")
    assert hook_findings("sys._getframe(1).f_locals['expected']")
    assert not hook_findings("def softmax(x):\n    z = x - x.max(dim=-1, keepdim=True).values\n    return z.exp()")
    assert len(HOOK_PATTERNS) >= 10


@pytest.mark.parametrize("source", ["torch.ops.aten.softmax(x, -1, False)", "import torch as T\nT._C._nn.gelu(x)",
                                    "from torch import ops", "from torch._C import _nn", "import torch._C"])
def test_scan_flags_torch_below_its_python_api(source):
    assert BELOW_TORCH_API in hook_findings(source)


@pytest.mark.parametrize("source", ['"""Do not call torch.ops.aten kernels."""\n# nor torch._C\ny = x',
                                    "switched_off('torch._C._nn.scaled_dot_product_attention')",
                                    "y = torch.softmax(x, -1)"])
def test_scan_leaves_torch_in_comments_and_strings_alone(source):
    assert BELOW_TORCH_API not in hook_findings(source)


@pytest.mark.parametrize("source", [
    "np.where = f", "torch.Tensor.numpy = f", "torch.nn.functional.softmax = f", "np.x += 1", "del np.isnan",
    "setattr(torch, 'equal', f)", "setattr(torch.Tensor, 'to', f)", "delattr(np, 'isnan')", "vars(np)['isnan'] = f",
    "np.__dict__['isnan'] = f", "vars(torch).update(equal=f)", "object.__setattr__(np, 'x', f)",
    "type.__setattr__(torch.Tensor, 'to', f)", "for np.x in [1]:\n    pass", "%matplotlib inline\nnp.abs = f",
])
def test_scan_flags_assignments_to_imported_libraries(source):
    imported = {"np", "torch"}
    assert LIBRARY_REBINDING in hook_findings(source, imported), source
    assert LIBRARY_REBINDING in hook_findings("import numpy as np\nimport torch\n" + source), source
    assert LIBRARY_REBINDING in hook_findings("m = __import__('numpy')\nm.isnan = None")


@pytest.mark.parametrize("source", [
    "self.w = w", "model.weight = w", "out[..., 0::2] = x1 * c", "x.grad = None", "cfg = np.where(a, b, c)",
    "d = vars(self)", "ns = {}\nns['np'] = 1", "torch.manual_seed(0)", "y = np.isnan(x)",
])
def test_scan_leaves_ordinary_answers_alone(source):
    assert hook_findings(source, {"np", "torch"}) == [], source


# --- the comparison path, discovered ------------------------------------------------------------
# The visible checks run in the student's kernel (feedback while working). Instead of a hand-kept
# list, the functions they call are discovered by tracing them on typical arguments; the round
# trips of chapters 05, 08, 11, 12 and 13 (tests/test_notebooks.py) grade a submission that
# rebinds every one of them to a liar ("attack_library_liars", course_tools/grading/attacks.py).
from course_tools.grading.attacks import discover_comparison_path  # noqa: E402


def test_discovery_finds_the_conversion_and_comparison_path():
    found, fixed = discover_comparison_path()
    labels = set(found)
    # what to_numpy and check_close call, wherever grading.py captured it from
    for expected in ("torch.Tensor.numpy", "torch.Tensor.to", "torch.Tensor.detach", "builtins.isinstance"):
        assert expected in labels, (expected, sorted(labels))
    assert any(label.endswith(".isnan") for label in labels) and any(label.endswith(".asarray") for label in labels)
    # what cannot be rebound at all: methods of numpy.ndarray / ufunc / TensorBase (immutable C types)
    for obj in fixed:
        owner = getattr(obj, "__objclass__", None) or type(getattr(obj, "__self__", None))
        name = getattr(obj, "__name__", "")
        if isinstance(owner, type) and name and owner.__flags__ & (1 << 8):
            with pytest.raises(TypeError):
                setattr(owner, name, None)
