"""The record protocol: hidden tests record, the autograder decides (course_utils/records.py).

Unit tests of encoding, strict parsing and comparison, and a check of every chapter's source:
each graded test cell has a hidden region that records at least one value outside its reference
blocks, and the reference blocks are where the protocol says (removed before a submission runs).
"""
from __future__ import annotations

import json

import nbformat
import numpy as np
import pytest
import torch

from course_tools.grading.cells import is_test_cell, source_problems, strip_reference_blocks
from course_utils.paths import repo_root
from course_utils.records import (RecordError, compare, decode, encode, outcome, parse_record, record,
                                  verify_cell)

CHAPTERS = sorted(p.name for p in (repo_root() / "solutions").iterdir() if (p / f"{p.name}.ipynb").is_file())


def _rec(key, value, **spec):
    """A record payload as the kernel writes it (through JSON, as nbgrader stores it)."""
    from course_utils.records import _spec

    full = {"atol": None, "rtol": None, "dtype": True, "pvalue": None} | spec
    return json.loads(json.dumps({"role": "record", "key": key, "spec": _spec(**full), "value": encode(value)}))


@pytest.mark.parametrize("value", [
    torch.tensor([[1.5, -2.0], [0.1, float("nan")]]), torch.arange(6, dtype=torch.int64).reshape(2, 3),
    torch.tensor([0.1, 3.0], dtype=torch.bfloat16), torch.tensor([1.0, 2.5], dtype=torch.float16),
    torch.tensor([True, False]), np.array([1, 2, 3], dtype=np.int32), np.float32(0.1), 3, -2**70, 0.1, "é\n",
    None, True, [1, (2.0, "x")], {"a": torch.zeros(0, 3)},
])
def test_encode_decode_round_trip(value):
    payload = json.loads(json.dumps(encode(value)))
    assert compare(decode(payload), decode(encode(value)), {"dtype": True}) is None


def test_bfloat16_bytes_are_exact():
    t = torch.tensor([0.1, 1e-3, -7.25], dtype=torch.bfloat16)
    kind, dtype, arr = decode(json.loads(json.dumps(encode(t))))
    assert (kind, dtype) == ("tensor", "bfloat16")
    assert np.array_equal(arr, t.float().numpy())


@pytest.mark.parametrize("payload, why", [
    ({"t": "tensor", "dtype": "float32", "shape": [2], "b64": "AAAAAA=="}, "byte count"),
    ({"t": "tensor", "dtype": "object", "shape": [1], "b64": "AAAAAA=="}, "dtype"),
    ({"t": "tensor", "dtype": "float32", "shape": [1], "b64": "AAAAAA==", "x": 1}, "extra field"),
    ({"t": "int", "v": 3}, "int not as text"),
    ({"t": "pickle", "v": "gASVAAAAAAAAAACMCGJ1aWx0aW5zlC4="}, "unknown kind"),
    ({"t": "dict", "v": [["a", {"t": "none"}], ["a", {"t": "none"}]]}, "duplicate key"),
    ({"t": "float", "v": "nan; import os"}, "bad float"),
])
def test_parsing_is_strict(payload, why):
    with pytest.raises(RecordError):
        decode(payload)


def test_comparison_rules():
    f = lambda v: decode(encode(v))  # noqa: E731
    assert compare(f(torch.tensor([1.0, 2.0])), f(torch.tensor([1.0, 2.0 + 1e-7])), {"dtype": True, "atol": 1e-6}) is None
    msg = compare(f(torch.tensor([1.0, 2.0])), f(torch.tensor([1.0, 2.1])), {"dtype": True, "atol": 1e-6})
    assert "first at [1]" in msg and "2.1" in msg and "atol=1e-06" in msg
    assert "dtype float32" in compare(f(torch.zeros(2)), f(torch.zeros(2, dtype=torch.float64)), {"dtype": True})
    assert compare(f(torch.zeros(2)), f(torch.zeros(2, dtype=torch.float64)), {"dtype": False}) is None
    assert "shape (3,)" in compare(f(torch.zeros(3)), f(torch.zeros(2)), {"dtype": True})
    assert "expected a tensor" in compare(f(np.zeros(2)), f(torch.zeros(2)), {"dtype": True})
    assert compare(f(float("nan")), f(float("nan")), {"dtype": True}) is None
    assert compare(f(torch.tensor([float("nan")])), f(torch.tensor([1.0])), {"dtype": True, "atol": 1.0}) is not None
    assert compare(f(torch.tensor([float("-inf")])), f(torch.tensor([float("inf")])), {"dtype": True, "atol": 1.0}) is not None
    assert "expected 'raises ValueError'" in compare(f(outcome(int, "3")), f("raises ValueError"), {"dtype": True})
    assert outcome(int, "x") == "raises ValueError"


def test_chi_square_mode():
    p = np.array([0.5, 0.3, 0.2, 0.0])
    rng = np.random.default_rng(0)
    spec = {"dtype": False, "pvalue": 1e-3}
    good = np.bincount(rng.choice(4, size=4000, p=p), minlength=4)
    assert compare(decode(encode(good)), decode(encode(p)), spec) is None
    biased = np.bincount(rng.choice(4, size=4000, p=[0.6, 0.25, 0.15, 0.0]), minlength=4)
    assert "chi-square" in compare(decode(encode(biased)), decode(encode(p)), spec)
    impossible = good.copy()
    impossible[3] = 1
    assert "probability is 0" in compare(decode(encode(impossible)), decode(encode(p)), spec)


def test_verify_cell_uses_the_reference_tolerance_and_is_strict():
    ref = [_rec("a", torch.tensor([1.0, 2.0]), atol=1e-3), _rec("b", "raises ValueError")]
    ok = [_rec("a", torch.tensor([1.0, 2.0005])), _rec("b", "raises ValueError")]
    assert verify_cell(ok, ref) == ([], 2)
    # the student's own spec is ignored: a looser tolerance in the student's record changes nothing
    loose = [_rec("a", torch.tensor([1.0, 2.5]), atol=10.0), _rec("b", "raises ValueError")]
    assert any("a:" in p for p in verify_cell(loose, ref)[0])
    assert any("never recorded" in p for p in verify_cell(ok[:1], ref)[0])
    assert any("recorded twice" in p for p in verify_cell(ok + ok[1:], ref)[0])
    assert any("not a value this test records" in p for p in verify_cell(ok + [_rec("c", 1)], ref)[0])
    forged = dict(ok[0], role="expect")
    assert any("role" in p for p in verify_cell([forged, ok[1]], ref)[0])
    assert any("malformed" in p for p in verify_cell([{"role": "record"}, *ok], ref)[0])
    # expect() in the reference replaces the solution's value as the reference
    ref2 = ref + [json.loads(json.dumps({"role": "expect", "key": "a", "spec": {"dtype": True, "atol": 1e-9},
                                         "value": encode(torch.tensor([1.0, 2.0]))}))]
    assert any("a:" in p for p in verify_cell(ok, ref2)[0])


def test_record_is_silent_outside_the_autograder(monkeypatch, capsys):
    monkeypatch.delenv("LLM_COURSE_RECORD", raising=False)
    record("k", torch.zeros(2))
    assert capsys.readouterr().out == ""
    with pytest.raises(RecordError):
        record("k", object())


def test_parse_record_rejects_unknown_roles():
    with pytest.raises(RecordError):
        parse_record({"role": "verdict", "key": "k", "spec": {"dtype": True}, "value": {"t": "none"}})


def test_strip_reference_blocks():
    src = ("a = 1\n### BEGIN HIDDEN TESTS\nrecord('x', f(a))\n### BEGIN REFERENCE\nexpect('x', 2)\n"
           "### END REFERENCE\n### END HIDDEN TESTS\n")
    out = strip_reference_blocks(src)
    assert "expect" not in out and "BEGIN REFERENCE" not in out and "record('x', f(a))" in out
    assert source_problems(src) == []
    assert source_problems("### BEGIN HIDDEN TESTS\n### BEGIN REFERENCE\nrecord('x', 1)\n### END REFERENCE\n"
                           "### END HIDDEN TESTS\n")
    assert source_problems("check_close('x', f(1), 2)\n")


@pytest.mark.parametrize("ch", CHAPTERS)
def test_every_test_cell_records_outside_reference_blocks(ch):
    nb = nbformat.read(repo_root() / "solutions" / ch / f"{ch}.ipynb", as_version=4)
    problems = [f"{c.metadata['nbgrader']['grade_id']}: {p}" for c in nb.cells if is_test_cell(c)
                for p in source_problems(c.source)]
    assert not problems, "\n".join(problems)
