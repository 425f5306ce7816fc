"""Cheats a student could hand in, graded by a real `nbgrader autograde` with the course config.

A tiny synthetic assignment (one answer, two test cells) keeps this fast; the mechanisms under
test (course_tools.nbgrader_ext, course_tools.integrity) are the same for every chapter. Every
cheat below is combined with a WRONG answer and must score 0; the honest right answer must get
full marks although a library writes warnings to stderr in every cell.
"""
import copy
import json

import pytest

from course_tools.autograde import autograde_submissions
from course_tools.nbgrader_ext import HOOK_PATTERNS, LIBRARY_REBINDING, hook_findings

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


# --- the comparison path, discovered, and attacked on a real chapter ---------------------------
# The attack: answers that only return zeros, plus a few lines in one answer cell that
# rebind a function the checks use (np.where, torch.Tensor.numpy...) to a stand-in that lies.
# Instead of a hand-kept list of such functions, the test traces what the checks call on typical
# arguments (and what their code names), finds every place in numpy / torch / torch.Tensor /
# builtins where each of those objects can be rebound, and autogrades one submission per object
# that rebinds all of them at once. A new call in grading.py is discovered, and attacked, the
# next time the suite runs.
import sys  # noqa: E402
import types  # noqa: E402

REAL = "05_rope"
ZERO_ANSWERS = {
    "ex1_rotate_2d": "def rotate_2d(x, theta):\n    return torch.zeros_like(x)\n",
    "ex2_rope_apply": ("def rope_apply(x, positions, base=10000.0):\n"
                       "    if x.shape[-1] % 2:\n        raise ValueError('d must be even')\n"
                       "    return torch.zeros_like(x)\n"),
    "ex3_interleaved_to_half": ("def interleaved_to_half(d):\n"
                                "    if d % 2:\n        raise ValueError('d must be even')\n"
                                "    return torch.zeros(d, dtype=torch.long)\n"),
}
# What the checks called before they were rebuilt on captured references (the attacks):
# kept so that those attacks stay in the suite although the checks no longer call them.
FORMER_PATH = ["numpy.where", "numpy.argwhere", "numpy.abs", "numpy.isnan", "numpy.isfinite", "numpy.asarray",
               "numpy._core._methods._any", "numpy._core._methods._sum", "numpy._core.fromnumeric.transpose",
               "numpy._core.fromnumeric.nonzero", "numpy.allclose", "numpy.array_equal", "torch.allclose",
               "torch.equal"]
# The stand-in: returns what the original returns, turned into zeros (False for booleans) whenever
# it is called with an array or a tensor. Zero differences, no NaN, "not any": every check the
# original grading.py made passed with it. Builtins are bound as defaults so that it keeps working
# when it replaces one of them.
LIAR = '''
def _liar(_orig, _np=__import__("numpy"), _t=__import__("torch"), _isinstance=isinstance, _any=any,
          _type=type, _tuple=tuple):
    _zl_np, _zl_t, _nd, _T, _npbool = _np.zeros_like, _t.zeros_like, _np.ndarray, _t.Tensor, _np.bool_
    def _zero(r):
        if _type(r) is _tuple:
            return _tuple([_zero(x) for x in r])
        if _isinstance(r, _nd):
            return _zl_np(r)
        if _isinstance(r, _T):
            return _zl_t(r)
        if _isinstance(r, (bool, _npbool)):
            return False
        return r
    def _lie(*a, **k):
        r = _orig(*a, **k)
        return _zero(r) if _any(_isinstance(x, (_nd, _T)) for x in a) else r
    return _lie
'''
# Rebinding written so that the static scan does not see it: what stops it must be the design.
REBIND = '''
_set = getattr(__import__("buil" + "tins"), "set" + "attr")
_mods = getattr(__import__("sys"), "mod" + "ules")
for _mod, _path in {targets!r}:
    _o = _mods.get(_mod)
    if _o is None:
        continue
    *_own, _n = _path.split(".")
    for _p in _own:
        _o = getattr(_o, _p)
    _set(_o, _n, _liar(getattr(_o, _n)))
'''


def _watched_owners():
    owners = [(m, n, "") for n, m in list(sys.modules.items())
              if m is not None and n.split(".")[0] in ("numpy", "torch")]
    owners += [(sys.modules[n], n, "") for n in ("builtins", "math", "operator")]
    import torch

    owners.append((torch.Tensor, "torch", "Tensor."))
    return owners


def _typical_calls():
    """(check, args) on the arguments tests pass: tensors of every dtype, arrays, lists, scalars."""
    import numpy as np
    import torch

    from course_utils import grading as g

    values = [torch.randn(3), torch.randn(3).half(), torch.randn(3).bfloat16(), torch.arange(3), torch.tensor(2.0),
              torch.randn(3, dtype=torch.float64, requires_grad=True), np.arange(3.0), np.arange(3), np.float32(1.5),
              np.array(2.0), [1.0, 2.0, 3.0], (1, 2, 3), 3.0, 2]
    calls = []
    for v in values:
        size = g.to_numpy(v).size
        for other in (v, g.to_numpy(v) + 1, [float("inf")] * size if size > 1 else float("nan")):
            calls += [(g.check_close, ("x", v, other)), (g.check_close, ("x", v, other, 1e-3, 0.0, torch.float32)),
                      (g.check_close, ("x", v, other, 1e-3, 0.0, np.float64))]
        calls += [(g.check_shape, ("x", v, (3,))), (g.check_type, ("x", v, torch.Tensor)),
                  (g.check_type, ("x", v, (np.ndarray, list))), (g.to_numpy, (v,))]
    for a, b in [([1, 2], [1, 2]), ((1, 2), [1, 3]), ("ab", "ab"), ({"a": [1]}, {"a": [1]}), (3, 3),
                 ({"a": 1}, {"a": 2}), ([1, 2], [1]), (1.5, 1.5), (3, "3"), ({"a": 1}, {"b": 1})]:
        calls.append((g.check_equal, ("x", a, b)))
    calls += [(g.check_true, (True, "m")), (g.check_true, (np.bool_(True), "m")), (g.check_true, (False, "m"))]
    return calls


def discover_comparison_path():
    """Every object the checks call, and every rebindable place each one is reachable from.

    Returns ``({label: [(module, attribute path), ...]}, [objects no answer cell can rebind])``.
    """
    from course_utils import grading

    calls = _typical_calls()
    called, codes = [], []

    def profile(frame, event, arg):
        if event == "c_call":
            called.append(arg)
        elif event == "call":
            codes.append(frame.f_code)

    sys.setprofile(profile)
    try:
        for fn, args in calls:
            try:
                fn(*args)
            except AssertionError:
                pass
    finally:
        sys.setprofile(None)
    objs = {id(o): o for o in called}
    owners = _watched_owners() + [(grading, grading.__name__, "")]
    index: dict[int, list] = {}  # id(object) -> every (module, attribute path) holding it
    for owner, mod, prefix in owners:
        for k, v in list(vars(owner).items()):
            index.setdefault(id(v), []).append((mod, prefix + k, v))
    by_code = {v.__code__: v for places in index.values() for _, _, v in places[:1] if type(v) is types.FunctionType}
    functions = [by_code[c] for c in set(codes) if c in by_code]
    for f in functions:  # ufuncs and types are called without a profile event: take what the code names
        objs[id(f)] = f
        for name in f.__code__.co_names:
            v = f.__globals__.get(name, f.__builtins__.get(name) if isinstance(f.__builtins__, dict) else None)
            if callable(v) and not isinstance(v, types.ModuleType):
                objs[id(v)] = v
    found, fixed = {}, []
    for obj in objs.values():
        if isinstance(obj, type) or getattr(obj, "__module__", None) == grading.__name__:
            continue  # classes are not stand-in material; grading's own functions: see "patched_checks"
        places = [(m, k) for m, k, _ in index.get(id(obj), []) if m != grading.__name__]
        base = getattr(obj, "__objclass__", None)  # a method of a C type torch.Tensor inherits
        name = getattr(obj, "__name__", "")
        import torch

        if isinstance(base, type) and issubclass(torch.Tensor, base) and ("torch", f"Tensor.{name}") not in places:
            places.append(("torch", f"Tensor.{name}"))
        if places:
            places.sort(key=lambda p: (p[0].count("."), len(p[0]) + len(p[1])))  # the public name first
            found[f"{places[0][0]}.{places[0][1]}"] = places
        else:
            fixed.append(obj)
    for label in FORMER_PATH:
        mod, _, attr = label.rpartition(".")
        obj = getattr(sys.modules[mod] if mod in sys.modules else __import__(mod), attr)
        places = [(m, k) for m, k, _ in index.get(id(obj), []) if m != grading.__name__]
        if not any(set(places) == set(p) for p in found.values()):
            found[label] = places
    return found, fixed


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


def _real_source(tmp):
    """05_rope without its demonstrations: setup, imports, every answer cell and test cell."""
    from course_utils.paths import repo_root

    nb = json.loads((repo_root() / "solutions" / REAL / f"{REAL}.ipynb").read_text())
    keep = {"setup", "imports", "mini_corpus", "check_plain_logits", "library_rope"}
    nb["cells"] = [c for c in nb["cells"] if c["cell_type"] == "code" and (
        c["metadata"].get("nbgrader", {}).get("grade_id") in keep
        or c["metadata"].get("nbgrader", {}).get("grade") or c["metadata"].get("nbgrader", {}).get("solution"))]
    folder = tmp / REAL
    folder.mkdir()
    (folder / f"{REAL}.ipynb").write_text(json.dumps(nb))
    return folder


@pytest.fixture(scope="module")
def graded_real(tmp_path_factory):
    import os

    from course_tools.autograde import _fill

    found, _ = discover_comparison_path()

    def build(student, source):
        subs = {"honest": _fill(student, source), "zeros": _fill(student, source, ZERO_ANSWERS)}
        for i, (label, places) in enumerate(sorted(found.items())):
            cheat = dict(ZERO_ANSWERS)
            cheat["ex1_rotate_2d"] = LIAR + REBIND.format(targets=places) + ZERO_ANSWERS["ex1_rotate_2d"]
            subs[f"lie_{i:03d}"] = _fill(student, source, cheat)
        return subs

    course = tmp_path_factory.mktemp("course_real")
    src = _real_source(tmp_path_factory.mktemp("src_real"))
    log: list[str] = []
    old = os.environ.get("LLM_COURSE_CELL_TIMEOUT")
    os.environ["LLM_COURSE_CELL_TIMEOUT"] = "60"  # a stand-in that hangs a cell must not cost 5 minutes
    try:
        scores = autograde_submissions(course, src, REAL, build, timeout=3600, log=log)  # ~50 kernels in one run
    finally:
        if old is None:
            os.environ.pop("LLM_COURSE_CELL_TIMEOUT")
        else:
            os.environ["LLM_COURSE_CELL_TIMEOUT"] = old
    labels = {f"lie_{i:03d}": label for i, label in enumerate(sorted(found))}
    return scores, labels, "".join(log), course


def test_real_chapter_honest_submission_full_marks(graded_real):
    scores, _, log, _ = graded_real
    assert _total(scores["honest"]) == (7, 7), log[-3000:]
    assert _total(scores["zeros"]) == (0, 7), scores["zeros"]


def test_real_chapter_every_rebound_function_scores_zero(graded_real):
    scores, labels, _, course = graded_real
    assert len(labels) >= 20, f"only {len(labels)} functions discovered: {sorted(labels.values())}"
    leaks = {labels[who]: scores[who] for who in labels if _total(scores[who])[0] != 0}
    assert not leaks, f"rebinding these functions earned points with answers that solve nothing: {leaks}"
