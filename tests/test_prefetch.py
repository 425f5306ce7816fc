"""A fresh machine: the course cache is empty, and a sandboxed grading kernel may not write it.

* from an empty cache (``LLM_COURSE_CACHE`` = an empty folder), a sandboxed kernel that needs a
  stand-in model fails trying to build it (the cache is read-only there), and the reference-run
  report names that setup cell and its error (``classroom.setup_cell_failures``), not only the
  ``NameError`` of every test cell after it;
* ``llm-course prefetch --offline`` (what ``make install`` runs) builds every cached artefact a
  kernel checks (``is_built``) — here with the two builders replaced by stand-ins that write their
  completion marker, to keep the test cheap (the real ones take ~25 s and ~2 min) — after which
  the sandboxed kernel sees them as built and has nothing to write;
* every ``build()`` of ``course_utils`` is one that prefetch runs.
"""
from __future__ import annotations

import ast
import json
import os
import shutil
import tempfile
from pathlib import Path

import nbformat
import pytest

from course_tools import classroom
from course_utils.paths import repo_root


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for src, meta in cells:
        c = nbformat.v4.new_code_cell(src)
        c.metadata["nbgrader"] = meta
        nb.cells.append(c)
    return nb


SETUP = {"grade": False, "solution": False, "locked": True, "grade_id": "setup"}
TEST = {"grade": True, "solution": False, "locked": True, "grade_id": "test_model", "points": 1}


def _run_sandboxed(nb, folder: Path):
    from course_tools.grading.references import execute_sandboxed

    return execute_sandboxed(nb, folder, timeout=120)


@pytest.fixture
def empty_cache(monkeypatch):
    # Not under /tmp: a sandboxed kernel gets a private /tmp, which would hide the real problem.
    cache = Path(tempfile.mkdtemp(prefix="llm-course-cache-", dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    cache.chmod(0o755)   # as ~/.cache/llm-course is: the grading kernel may run as another user
    monkeypatch.setenv("LLM_COURSE_CACHE", str(cache))
    yield cache
    shutil.rmtree(cache, ignore_errors=True)


def test_every_builder_is_prefetched():
    built = set()
    for path in sorted((repo_root() / "course_utils").glob("*.py")):
        tree = ast.parse(path.read_text())
        if any(isinstance(n, ast.FunctionDef) and n.name == "build" for n in tree.body):
            built.add(path.stem)
    src = Path(classroom.__file__).read_text()
    fn = src[src.index("def build_caches"):src.index("def missing_caches")]
    assert built and all(f"{m}.build(" in fn for m in built), (built, "not all built by build_caches")


def test_empty_cache_then_prefetch(empty_cache, tmp_path, monkeypatch):
    from course_utils import shakespeare_gpt2, smollm2

    assert len(classroom.missing_caches()) == 2
    work = tmp_path / "work"
    work.mkdir()
    # 1. a kernel that needs the converted SmolLM2 on a fresh machine
    nb = _run_sandboxed(_nb(("from course_utils import smollm2\nMODEL_DIR = smollm2.build(verbose=False)", SETUP),
                            ("assert MODEL_DIR.is_dir()", TEST)), work)
    found = classroom.setup_cell_failures(nb)
    assert len(found) == 1 and found[0].startswith("cell 0 (setup)"), found
    assert "Read-only file system" in found[0] or "Permission denied" in found[0], found
    assert not smollm2.is_built()
    msg = classroom.reference_setup_problem(nb)
    assert msg.startswith("a setup cell failed before the tests: cell 0 (setup)") and "prefetch --offline" in msg, msg

    # 2. prefetch (the builders stubbed: they write what the real ones write last)
    def fake(module):
        def build(verbose=True):
            d = module.model_dir()
            d.mkdir(parents=True, exist_ok=True)
            (d / "done.json").write_text(json.dumps({"stub": True}))
            return d
        return build

    monkeypatch.setattr(smollm2, "build", fake(smollm2))
    monkeypatch.setattr(shakespeare_gpt2, "build", fake(shakespeare_gpt2))
    from course_tools.cli import main

    assert main(["prefetch", "--offline"]) == 0
    assert classroom.missing_caches() == []
    # 3. the sandboxed kernel now finds them built: nothing left to write
    nb = _run_sandboxed(_nb(("from course_utils import smollm2, shakespeare_gpt2\n"
                             "print(smollm2.is_built(), shakespeare_gpt2.is_built())", SETUP)), work)
    assert classroom.setup_cell_failures(nb) == []
    out = "".join(o.get("text", "") for o in nb.cells[0].outputs)
    assert out.strip() == "True True", nb.cells[0].outputs
