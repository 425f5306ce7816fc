"""Cheating submissions for any chapter: what a student could hand in to steer the grade.

Used by the autograde round trip (``round_trip(chapter, attacks=True)``, ``tests/test_notebooks.py``)
on real chapters. Each attack is a few lines added to a submission whose answers are one group of
the chapter's wrong answers (``tests/wrong_answers/<chapter>.py``); the attack must not earn a
point on the test cells those wrong answers lose. Every attack is written so that the static scan
(``FlagKernelHooks``) does not see it: what stops it is that hidden tests only record and the
verdict is computed outside the kernel (``course_tools/grading/references.py``).

* ``import_hook``: replaces the import function through the builtins namespace reached without
  naming it; ``from course_utils.grading import ...`` and the autograder's integrity call then
  receive stand-ins: checks that pass, a ``record`` that declares a huge tolerance.
* ``trace_hook``: a tracing function (``sys.settrace`` reached without spelling it) rebinds the
  check and record names in the notebook's namespace before every line.
* ``answers_rebind_checks``: no hook; before every test cell, a cell wraps each function the
  notebook defines so that calling it rebinds ``check_*`` / ``record`` in its own globals (the
  notebook's namespace) to stand-ins.
* ``shadow_reference_names``: every name the hidden tests' reference blocks read (discovered from
  their syntax tree) and the student part does not, bound at notebook level to a stand-in that
  returns its first argument (the student's value), before every test cell.
* ``library_liars``: every rebindable function on the comparison path of ``course_utils.grading``
  (given by the caller, discovered by tracing) replaced through an alias of ``setattr`` with a
  stand-in that turns arrays into zeros and booleans into False.
"""
from __future__ import annotations

import ast
import builtins
import copy
import sys
import types
from typing import Any

from course_tools.grading.cells import is_test_cell, split_reference_blocks

STAND_INS = '''
def _nop(*a, **k):
    return None
_rec_mod = __import__("course_utils.rec" + "ords", fromlist=["x"])
_real_record = _rec_mod.record
def _lax_record(key, value, **k):
    _real_record(key, value, atol=1e30, rtol=1e30, dtype=False)
_CHECKS = ("check_close", "check_equal", "check_shape", "check_type", "check_true", "assert" + "_untampered", "expect",
           "integ" + "rity_check")
'''

IMPORT_HOOK = STAND_INS + '''
import types as _types
_bi = (lambda: 0).__globals__["__bui" + "ltins__"]
_bi = _bi if isinstance(_bi, dict) else vars(_bi)
_real_import = _bi["__imp" + "ort__"]
_FAKE = _types.ModuleType("fake")
for _n in _CHECKS:
    _FAKE.__dict__[_n] = _nop
_FAKE.__dict__["record"] = _lax_record
_FAKE.__dict__["outcome"] = lambda fn, *a, **k: "raises ValueError"
_FAKE.__dict__["switched_off"] = lambda *a, **k: __import__("contextlib").nullcontext()
_FAKE.__dict__["integ" + "rity"] = _FAKE
def _imp(name, globals=None, locals=None, fromlist=(), level=0):
    if name.startswith("course_utils.gra") or name.startswith("course_to"):
        return _FAKE
    return _real_import(name, globals, locals, fromlist, level)
_bi["__imp" + "ort__"] = _imp
'''

TRACE_HOOK = STAND_INS + '''
def _tr(frame, event, arg):
    g = frame.f_globals
    if g.get("__name__") != "__main__":
        return None     # trace the notebook's own code only (tracing the libraries takes minutes)
    if True:
        for n in _CHECKS:
            if n in g and g[n] is not _nop:
                g[n] = _nop
        if "record" in g and g["record"] is not _lax_record:
            g["record"] = _lax_record
    return _tr
getattr(__import__("sys"), "set" + "trace")(_tr)
'''

ANSWERS_REBIND = STAND_INS + '''
import types as _types
def _wrap(fn):
    if getattr(fn, "_wrapped_by_cheat", False):
        return fn
    def w(*a, **k):
        g = fn.__globals__
        for n in _CHECKS:
            g[n] = _nop
        g["record"] = _lax_record
        return fn(*a, **k)
    w._wrapped_by_cheat = True
    w.__module__, w.__name__, w.__qualname__ = fn.__module__, fn.__name__, fn.__qualname__
    return w
for _n, _f in list(globals().items()):
    if isinstance(_f, _types.FunctionType) and _f.__module__ == "__main__" and not _n.startswith("_"):
        globals()[_n] = _wrap(_f)
'''

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
# The liars are installed right before the test cells run (the submission's own code runs
# before, with the real functions), written so that the static scan does not see it.
REBIND = '''
_set = getattr(__import__("buil" + "tins"), "set" + "attr")
_mods = getattr(__import__("sys"), "mod" + "ules")
for _mod, _path in {targets!r}:
    _o = _mods.get(_mod)
    if _o is None:
        continue
    *_own, _n = _path.split(".")
    try:
        for _p in _own:
            _o = getattr(_o, _p)
        if not getattr(getattr(_o, _n), "_is_liar", False):
            _l = _liar(getattr(_o, _n))
            try:
                _l._is_liar = True
            except AttributeError:
                pass
            _set(_o, _n, _l)
    except (AttributeError, TypeError):
        pass
'''


def _cell(source: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None}


def _names(source: str) -> tuple[set[str], set[str]]:
    """(names read, names bound) in ``source``."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return read, bound


def reference_only_names(source_nb: dict) -> list[str]:
    """Names the reference blocks read from the notebook's namespace that no student part reads."""
    ref_reads: set[str] = set()
    student_reads: set[str] = set()
    for cell in source_nb["cells"]:
        if not is_test_cell(cell):
            continue
        src = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        student, ref = split_reference_blocks(src)   # the student part with the visible tests
        r_read, r_bound = _names(ref)
        s_read, s_bound = _names(student)
        ref_reads |= r_read - r_bound - s_bound
        student_reads |= s_read
    return sorted(n for n in ref_reads - student_reads if not hasattr(builtins, n))


def _insert_before_tests(nb: dict, source: str) -> None:
    cells = []
    for cell in nb["cells"]:
        if is_test_cell(cell):
            cells.append(_cell(source))
        cells.append(cell)
    nb["cells"] = cells


def _insert_before_first_answer(nb: dict, source: str) -> None:
    i = next(k for k, c in enumerate(nb["cells"]) if c.get("metadata", {}).get("nbgrader", {}).get("solution")
             and c["cell_type"] == "code")
    nb["cells"].insert(i, _cell(source))


def attack_submissions(wrong: dict, source_nb: dict, liar_targets: list[tuple[str, str]] | None = None) -> dict[str, dict]:
    """The attack submissions built on the notebook ``wrong`` (a student notebook with wrong answers)."""
    subs: dict[str, Any] = {}
    nb = copy.deepcopy(wrong)
    _insert_before_first_answer(nb, IMPORT_HOOK)
    subs["attack_import_hook"] = nb
    nb = copy.deepcopy(wrong)
    _insert_before_first_answer(nb, TRACE_HOOK)
    subs["attack_trace_hook"] = nb
    nb = copy.deepcopy(wrong)
    _insert_before_tests(nb, ANSWERS_REBIND)
    subs["attack_answers_rebind_checks"] = nb
    names = reference_only_names(source_nb)
    if names:
        nb = copy.deepcopy(wrong)
        _insert_before_tests(nb, "".join(f"{n} = lambda *a, **k: a[0] if a else None\n" for n in names))
        subs["attack_shadow_reference_names"] = nb
    if liar_targets:
        nb = copy.deepcopy(wrong)
        _insert_before_tests(nb, LIAR + REBIND.format(targets=liar_targets))
        subs["attack_library_liars"] = nb
    return subs


# --- the comparison path of course_utils.grading, discovered by tracing the checks ------------
# What the checks called before they were rebuilt on captured references (the attacks):
# kept so that those attacks stay in the suite although the checks no longer call them.
FORMER_PATH = ["numpy.where", "numpy.argwhere", "numpy.abs", "numpy.isnan", "numpy.isfinite", "numpy.asarray",
               "numpy._core._methods._any", "numpy._core._methods._sum", "numpy._core.fromnumeric.transpose",
               "numpy._core.fromnumeric.nonzero", "numpy.allclose", "numpy.array_equal", "torch.allclose",
               "torch.equal"]
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
