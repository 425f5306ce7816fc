import numpy as np
import pytest
import torch

from course_utils import grading as g


def test_check_close_passes_within_tolerance():
    g.check_close("x", torch.tensor([1.0, 2.0]), [1.0, 2.0 + 1e-9])


def test_check_close_names_first_mismatch_and_tolerance():
    with pytest.raises(AssertionError) as e:
        g.check_close("A", np.array([[1.0, 2.0], [3.0, 4.0]]), [[1.0, 2.0], [3.0, 4.5]], atol=1e-3)
    msg = str(e.value)
    assert "index (1, 1)" in msg and "got 4" in msg and "expected 4.5" in msg and "atol=0.001" in msg


def test_check_close_reports_shape_and_none():
    with pytest.raises(AssertionError, match=r"expected shape \(2,\), got \(3,\)"):
        g.check_close("v", [1, 2, 3], [1, 2])
    with pytest.raises(AssertionError, match="forget to `return`"):
        g.check_close("v", None, [1, 2])


def test_check_close_handles_inf_and_nan():
    g.check_close("m", [0.0, -np.inf], [0.0, -np.inf])
    with pytest.raises(AssertionError):
        g.check_close("m", [0.0, np.nan], [0.0, 1.0])
    with pytest.raises(AssertionError):
        g.check_close("m", [0.0, -1e9], [0.0, -np.inf])


def test_check_close_dtype():
    with pytest.raises(AssertionError, match="dtype"):
        g.check_close("t", torch.tensor([1.0], dtype=torch.float64), [1.0], dtype=torch.float32)


def test_check_equal_lists_and_types():
    g.check_equal("ids", [1, 2, 3], [1, 2, 3])
    with pytest.raises(AssertionError, match="position 2"):
        g.check_equal("ids", [1, 2, 4], [1, 2, 3])
    with pytest.raises(AssertionError, match="expected length 3, got 2"):
        g.check_equal("ids", [1, 2], [1, 2, 3])
    with pytest.raises(AssertionError, match="expected a str"):
        g.check_equal("s", 3, "3")


def test_check_equal_rejects_always_equal_objects():
    class Liar:
        def __eq__(self, other):
            return True

    with pytest.raises(AssertionError):
        g.check_equal("x", Liar(), 3)


def test_check_equal_and_check_close_refuse_lying_subclasses():
    class LiarList(list):
        def __eq__(self, other):
            return True

        def __iter__(self):
            return iter([1, 2, 3])

    with pytest.raises(AssertionError, match="expected a list, got LiarList"):
        g.check_equal("ids", LiarList(), [1, 2, 3])

    class LiarTensor(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return torch.tensor([1.0, 2.0]) if func is torch.Tensor.cpu else super().__torch_function__(func, types, args, kwargs or {})

    fake = torch.zeros(2).as_subclass(LiarTensor)
    with pytest.raises(AssertionError, match="differ"):
        g.check_close("t", fake, [1.0, 2.0])


def test_switched_off_blocks_the_library_and_its_aliases():
    import functools

    import torch.nn.functional as F

    lib = torch.softmax
    x = torch.randn(4)

    def aliased(t):
        return lib(t, -1)

    def default_arg(t, _f=F.softmax):
        return _f(t, dim=-1)

    part = functools.partial(torch.softmax, dim=-1)

    def partial_global(t):
        return part(t)

    def method(t):
        return t.softmax(-1)

    def by_hand(t):
        z = (t - t.max()).exp()
        return z / z.sum()

    paths = ("torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax", "no.such.module.fn")
    for fn in (aliased, default_arg, partial_global, method):
        with pytest.raises(AssertionError, match="by hand"), g.switched_off(*paths, functions=[fn], hint="by hand"):
            fn(x)
    with g.switched_off(*paths, functions=[by_hand]):
        out = by_hand(x)
    g.check_close("by hand", out, torch.softmax(x, -1))
    # everything is restored afterwards
    assert torch.softmax is lib and default_arg.__defaults__[0] is F.softmax and "softmax" not in torch.Tensor.__dict__
    g.check_close("restored", x.softmax(-1), F.softmax(x, dim=-1))


def test_switched_off_blocks_imports_of_named_packages():
    import importlib

    def sneaky():
        mod = importlib.import_module("json" + ".decoder")
        return mod.JSONDecoder

    def plain():
        from json import decoder  # noqa: F401

    def dunder():
        return __import__("js" + "on")

    def allowed():
        import math as m

        return m.sqrt(4.0)

    _im = importlib.import_module

    def aliased(name="json"):
        return _im(name)

    def aliased_allowed():
        return _im("math").sqrt(9.0)

    def bootstrap():
        return importlib.__import__("json")

    for fn in (sneaky, plain, dunder, aliased, bootstrap):
        with pytest.raises(AssertionError, match="no json"), g.switched_off(functions=[fn], hint="no json",
                                                                           no_imports=["json"]):
            fn()
    with g.switched_off(functions=[allowed, aliased_allowed], no_imports=["json"]):
        assert allowed() == 2.0 and aliased_allowed() == 3.0
    assert _im is importlib.import_module
    assert importlib.import_module("json.decoder").JSONDecoder  # restored


def test_untampered_detects_replaced_functions(monkeypatch):
    g.assert_untampered()
    monkeypatch.setattr(np, "allclose", lambda *a, **k: True)
    with pytest.raises(AssertionError, match="numpy.allclose was replaced"):
        g.assert_untampered()
    monkeypatch.undo()
    monkeypatch.setattr(g, "check_close", lambda *a, **k: None)
    with pytest.raises(AssertionError, match="check_close was replaced"):
        g.assert_untampered()
    monkeypatch.undo()
    g.assert_untampered()


@pytest.mark.parametrize("where", ["numpy internals", "torch.Tensor method", "torch._C method", "builtins",
                                   "class defined by torch", "default argument", "private builtins",
                                   "sys.modules"])
def test_untampered_detects_every_kind_of_rebinding(monkeypatch, where):
    import builtins
    import sys

    target = {
        "numpy internals": (sys.modules["numpy._core.numeric"], "transpose"),  # what np.argwhere calls
        "torch.Tensor method": (torch.Tensor, "__eq__"),
        "torch._C method": (torch, "view_as_real"),
        "builtins": (builtins, "isinstance"),
        "class defined by torch": (torch.nn.Linear, "forward"),
        "default argument": (g.check_close, "__defaults__"),
        "private builtins": None,
        "sys.modules": None,
    }[where]
    if where == "private builtins":
        monkeypatch.setitem(g.__builtins__, "len", lambda x: 0)
    elif where == "sys.modules":
        monkeypatch.setitem(sys.modules, "numpy", object())
    elif where == "default argument":
        monkeypatch.setattr(g.check_close, "__defaults__", (1e9, 1e9, None))
    else:
        owner, name = target
        orig = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *a, **k: orig(*a, **k))  # same behaviour, other object
    with pytest.raises(AssertionError, match="cannot be trusted"):
        g.assert_untampered()
    monkeypatch.undo()
    g.assert_untampered()


def test_checks_never_look_up_a_library_attribute():
    """By construction: the comparison path reads no attribute of numpy, torch or builtins at run time.

    Every global name the checks use is one of this module's captured references (verified by
    assert_untampered); none is the numpy or torch module itself.
    """
    import types

    def names(code):
        out = set(code.co_names)
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                out |= names(c)
        return out

    path = [g.to_numpy, g.check_type, g.check_shape, g.check_close, g.check_equal, g.check_true,
            g._plain_tensor, g._same, g._fmt, g._short]
    for fn in path:
        used = names(fn.__code__)
        assert not used & {"np", "torch", "builtins", "math", "operator"}, (fn.__name__, used & {"np", "torch"})
        assert g.__builtins__ is fn.__globals__["__builtins__"] and g.__builtins__ is not vars(__import__("builtins"))


def test_checks_ignore_rebound_library_functions(monkeypatch):
    """The issue's attacks: with the library lying, a wrong answer still fails and a right one passes."""
    import builtins

    zeros = torch.zeros(3)
    liars = [(np, "where", lambda c, a, b: np.zeros_like(a)), (np, "isfinite", lambda x: np.zeros(np.shape(x), bool)),
             (np, "abs", lambda x: np.zeros_like(x)), (np, "argwhere", lambda x: np.zeros((1, 1), int)),
             (np, "asarray", lambda x, *a, **k: np.zeros(3)),
             (torch.Tensor, "numpy", lambda self: np.zeros(3)), (torch.Tensor, "to", lambda self, *a, **k: self),
             (torch.Tensor, "detach", lambda self: torch.ones(3)), (torch.Tensor, "__eq__", lambda s, o: True),
             (builtins, "isinstance", lambda *a: False)]
    assert all(owner is not np.ndarray for owner, name, _ in liars if name)  # immutable anyway
    def outcome(fn, *args):
        try:
            fn(*args)
            return "pass"
        except AssertionError as exc:
            return "fail: " + str(exc)

    cases = [(g.check_close, "x", zeros, torch.tensor([1.0, 2.0, 3.0])),
             (g.check_close, "x", np.zeros(3), [1.0, 2.0, 3.0]),
             (g.check_close, "x", torch.tensor([1.0, 2.0, 3.0]), np.array([1.0, 2.0, 3.0])),
             (g.check_shape, "x", zeros, (3,)),
             (g.check_equal, "x", {"a": [1, 2]}, {"a": [1, 3]})]
    saved = [(owner, name, vars(owner).get(name)) for owner, name, _ in liars if name]
    try:  # no pytest machinery while the liars are in place (it uses isinstance too)
        for owner, name, fn in liars:
            if name:
                setattr(owner, name, fn)
        got = [outcome(*c) for c in cases]
    finally:
        for owner, name, old in saved:
            if old is None:  # inherited (torch.Tensor.numpy lives in torch._C.TensorBase)
                delattr(owner, name)
            else:
                setattr(owner, name, old)
    g.assert_untampered()
    assert got[0].startswith("fail") and "differ" in got[0], got[0]
    assert got[1].startswith("fail") and "differ" in got[1], got[1]
    assert got[2:4] == ["pass", "pass"], got
    assert got[4].startswith("fail"), got[4]


def test_check_equal_never_asks_student_objects():
    class Liar(int):
        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

    with pytest.raises(AssertionError):
        g.check_equal("d", {"a": Liar(5)}, {"a": 3})
    with pytest.raises(AssertionError):
        g.check_equal("l", [[Liar(5)]], [[3]])
    g.check_equal("d", {"a": (1, [2.5, "x"])}, {"a": (1, [2.5, "x"])})


def test_check_close_large_magnitudes_and_0d():
    g.check_close("big", [1e308, -1e308], [1e308, -1e308])
    with pytest.raises(AssertionError, match="differ"):
        g.check_close("big", [1e308], [-1e308])
    g.check_close("0-d", torch.tensor(2.0), 2.0)
    with pytest.raises(AssertionError, match="got 3, expected 2"):
        g.check_close("0-d", np.float64(3.0), 2.0)
    g.check_close("half", torch.tensor([1.5], dtype=torch.bfloat16), [1.5], dtype=torch.bfloat16)
    with pytest.raises(AssertionError, match="dtype"):
        g.check_close("half", torch.tensor([1.5], dtype=torch.float16), [1.5], dtype=torch.bfloat16)


def test_variants_are_grouped_only_when_disjoint():
    from course_tools.grading.selftest import Variant, group_variants

    a = Variant("a", {"ex1": "x"}, ["t1"])
    b = Variant("b", {"ex2": "x"}, ["t2"])
    c = Variant("c", {"ex1": "y"}, ["t1"])
    d = Variant("d", {"ex3": "y"}, ["t3"], alone=True)
    groups = group_variants([a, b, c, d])
    assert [[v.name for v in g] for g in groups] == [["a", "b"], ["c"], ["d"]]
    assert len(group_variants([a, b, c, d], separate=True)) == 4


def test_every_chapter_grades_its_wrong_answers_in_the_fewest_submissions():
    """Issue 46: a round trip is one `nbgrader autograde` of solution, blank and one submission per
    group; the grouping reaches the lower bound of the rules (shared cell or test cell: apart;
    "alone": apart), so no chapter could be graded with fewer submissions."""
    from course_tools.grading.selftest import fewest_groups, group_variants, load_variants
    from course_tools.release import chapters
    from course_utils.paths import repo_root

    for ch in chapters(repo_root()):
        variants = load_variants(ch)
        groups = group_variants(variants)
        assert sorted(v.name for g in groups for v in g) == sorted(v.name for v in variants), ch
        for grp in groups:
            if len(grp) > 1:
                assert not any(v.alone for v in grp), (ch, [v.name for v in grp])
                cells = [c for v in grp for c in v.cells]
                tests = [t for v in grp for t in v.loses]
                assert len(cells) == len(set(cells)) and len(tests) == len(set(tests)), (ch, [v.name for v in grp])
        assert len(groups) == fewest_groups(variants), (ch, len(groups), fewest_groups(variants))
        assert len(group_variants(variants, separate=True)) == fewest_groups(variants, separate=True) == len(variants)


def test_first_error_names_cell_and_exception(tmp_path):
    import json

    from course_tools.grading.selftest import _first_error

    nb = {"cells": [{"cell_type": "markdown", "source": "x"},
                    {"cell_type": "code", "outputs": [{"output_type": "stream", "name": "stdout", "text": "hi"}]},
                    {"cell_type": "code", "outputs": [{"output_type": "error", "ename": "HubUnreachable",
                                                       "evalue": "set LLM_COURSE_OFFLINE=1", "traceback": []}]}]}
    p = tmp_path / "nb.ipynb"
    p.write_text(json.dumps(nb))
    assert _first_error(p) == "cell 2: HubUnreachable: set LLM_COURSE_OFFLINE=1"
    nb["cells"].pop()
    p.write_text(json.dumps(nb))
    assert _first_error(p) == "(none recorded)"
    assert _first_error(tmp_path / "missing.ipynb").startswith("(no autograded notebook")


def test_torch_own_wrappers_are_accepted_and_imitations_are_not():
    """torch wraps torch.manual_seed & co. when torch._dynamo is first imported (bitsandbytes, peft do):
    accepted, but only around the very function it replaced."""
    import subprocess
    import sys

    code = (
        "import course_utils.grading as g, torch\n"
        "orig = torch.manual_seed\n"
        "import torch._dynamo\n"
        "assert torch.manual_seed is not orig and torch.manual_seed.__wrapped__ is orig\n"
        "g.assert_untampered()\n"
        "torch.manual_seed = torch._disable_dynamo(lambda *a: None)\n"
        "try:\n    g.assert_untampered()\nexcept AssertionError as e:\n    print('detected:', e)\n"
        "torch.manual_seed = orig\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "detected: torch.manual_seed was replaced" in res.stdout, res.stdout


def test_untampered_detects_a_changed_closure():
    cell = g.switched_off.__closure__[0]  # @contextmanager keeps the generator function in a closure
    original = cell.cell_contents
    cell.cell_contents = lambda *a, **k: iter([None])
    try:
        with pytest.raises(AssertionError, match="switched_off was modified"):
            g.assert_untampered()
    finally:
        cell.cell_contents = original
    g.assert_untampered()
