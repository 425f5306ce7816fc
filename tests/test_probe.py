"""course_tools.grading.probe: exercises that must be written without a library are recorded again where it
does not exist (README, "Grading integrity").

These unit tests check how the probe notebook is put together; tests/test_sandbox.py starts a kernel
with packages removed, the way the probe starts it, and checks that nothing of them is left to reach.
The end-to-end check is the autograder round trip (tests/test_notebooks.py): the wrong answers that
reach a removed library (``nf4_calls_bitsandbytes``, ``topk_through_a_library_subclass``) lose
their cell, and every solution passes its probe in the reference run.
"""
from __future__ import annotations

import glob

import jupytext
import nbformat
import pytest

from course_tools.grading import probe
from course_tools.grading.cells import source_problems

TEST_CELL = '''from course_utils.grading import check_equal
check_equal("visible", f(1), 2)
### BEGIN HIDDEN TESTS
from course_utils.grading import record
record("uses the library", g(3))
### BEGIN PROBE WITHOUT sklearn, tokenizers
import torch
record("f on a tensor", f(torch.ones(2)))
### END PROBE
### BEGIN REFERENCE
from course_utils.grading import expect
expect("f on a tensor", torch.ones(2) * 2)
### END REFERENCE
### END HIDDEN TESTS
'''


def _nb() -> nbformat.NotebookNode:
    def cell(src, gid, **meta):
        c = nbformat.v4.new_code_cell(src)
        c.metadata["nbgrader"] = {"grade_id": gid, "schema_version": 3, **meta}
        return c
    nb = nbformat.v4.new_notebook()
    nb.cells = [cell("import torch\nimport sklearn\nX = 1", "imports", grade=False, solution=False, locked=True),
                cell("BIG = load_a_model()", "load", grade=False, solution=False, locked=True),
                cell("TABLE = [1, 2]\nprint(bnb.x)", "table", grade=False, solution=False, locked=True),
                cell("def f(x):\n    return 2 * x", "ex1", grade=False, solution=True, locked=False),
                cell(TEST_CELL, "test_ex1", grade=True, solution=False, locked=True, points=1)]
    nb.cells[2].metadata["tags"] = ["probe-setup"]
    return nb


def test_probe_blocks_and_plan():
    packages, code = probe.probe_blocks(TEST_CELL)
    assert packages == ["sklearn", "tokenizers"]
    assert code == 'import torch\nrecord("f on a tensor", f(torch.ones(2)))\n'
    assert probe.probe_plan(_nb()) == {"test_ex1": ["sklearn", "tokenizers"]}
    assert source_problems(TEST_CELL) == []


def test_the_probe_runs_setup_statements_the_students_cells_and_the_probe_blocks_only():
    source = _nb()
    sub = _nb()
    sub.cells[3].source = "def f(x):\n    return x + x"                      # the student's answer
    sub.cells.insert(4, nbformat.v4.new_code_cell("def helper():\n    pass"))  # a cell the student added
    sub.cells[1].source = "evil()"                  # a locked cell edited: never run (the source has the real one)
    nb = probe.build_probe(source, sub, probe.probe_plan(source))
    sources = [c.source for c in nb.cells]
    assert sources[:3] == ["import torch", "import sklearn", "X = 1"], "imports: one statement per cell"
    assert sources[3:5] == ["TABLE = [1, 2]", "print(bnb.x)"], "a probe-setup cell: one statement per cell"
    assert sources[5:7] == ["def f(x):\n    return x + x", "def helper():\n    pass"]
    assert sources[7] == probe.probe_blocks(TEST_CELL)[1]
    assert "BIG = load_a_model()" not in sources and "evil()" not in sources
    assert nb.cells[7].metadata["nbgrader"]["grade_id"] == "test_ex1"
    assert "expect(" not in "".join(sources), "a reference block reached the probe"


def test_a_cell_that_failed_in_the_students_kernel_is_not_probed_again(monkeypatch, tmp_path):
    """The probe can only take points away: the autograder passes the cells that passed (``only``), and a
    submission whose probed cells all failed starts no second kernel."""
    from course_tools.grading import run

    started = []
    monkeypatch.setattr(run, "execute_sandboxed", lambda nb, *a, **k: started.append(nb) or nb)
    assert probe.run_probe(_nb(), _nb(), tmp_path, only=set()) == ({}, {}, {})
    assert started == [], "a kernel was started for cells that had already failed"
    assert probe.run_probe(_nb(), _nb(), tmp_path, only={"test_ex1"})[2] == {"test_ex1": ["sklearn", "tokenizers"]}
    assert len(started) == 1 and started[0].cells[-1].metadata["nbgrader"]["grade_id"] == "test_ex1"
    # without ``only`` (the reference run), every probed cell
    assert probe.run_probe(_nb(), _nb(), tmp_path)[2] == {"test_ex1": ["sklearn", "tokenizers"]}


@pytest.mark.parametrize("bad, why", [
    ("### BEGIN PROBE WITHOUT x\nrecord('a', 1)\n### BEGIN HIDDEN TESTS\n### END PROBE\nrecord('b', 1)\n### END HIDDEN TESTS",
     "outside the hidden-test region"),
    ("### BEGIN HIDDEN TESTS\n### BEGIN PROBE WITHOUT x\nrecord('a', 1)\n### END HIDDEN TESTS", "not closed"),
    ("### BEGIN HIDDEN TESTS\nrecord('a', 1)\n### BEGIN REFERENCE\n### BEGIN PROBE WITHOUT x\n### END PROBE\n"
     "### END REFERENCE\n### END HIDDEN TESTS", "inside a reference block"),
])
def test_misplaced_probe_blocks_are_source_problems(bad, why):
    assert any(why in p for p in source_problems(bad)), source_problems(bad)


def test_every_chapter_probe_block_imports_what_it_uses_and_records():
    """A probe block runs in a fresh kernel after the answers: it must build its inputs itself."""
    found = 0
    for path in sorted(glob.glob("chapters/*/*.py")):
        for cell in jupytext.read(path).cells:
            packages, code = probe.probe_blocks(cell.source)
            if not packages:
                continue
            found += 1
            assert "record(" in code and "import" in code, (path, code[:200])
            assert "switched_off" not in code, f"{path}: a probe block needs no switch: the package is gone"
    assert found >= 11, f"only {found} probe blocks (01 x3, 02, 05, 08 x4, 11 x2 expected)"
