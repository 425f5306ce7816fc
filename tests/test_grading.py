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

    with pytest.raises(AssertionError, match="plain list"):
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
    with pytest.raises(AssertionError, match="np.allclose was replaced"):
        g.assert_untampered()
    monkeypatch.undo()
    monkeypatch.setattr(g, "check_close", lambda *a, **k: None)
    with pytest.raises(AssertionError, match="check_close was replaced"):
        g.assert_untampered()


def test_variants_are_grouped_only_when_disjoint():
    from course_utils.autograde import Variant, group_variants

    a = Variant("a", {"ex1": "x"}, ["t1"])
    b = Variant("b", {"ex2": "x"}, ["t2"])
    c = Variant("c", {"ex1": "y"}, ["t1"])
    d = Variant("d", {"ex3": "y"}, ["t3"], alone=True)
    groups = group_variants([a, b, c, d])
    assert [[v.name for v in g] for g in groups] == [["a", "b"], ["c"], ["d"]]
    assert len(group_variants([a, b, c, d], separate=True)) == 4


def test_first_error_names_cell_and_exception(tmp_path):
    import json

    from course_utils.autograde import _first_error

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
