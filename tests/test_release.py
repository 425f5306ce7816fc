"""Student notebooks are generated from solutions/ and must stay in sync; bad states are refused."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from course_tools import release as rel

ROOT = Path(__file__).resolve().parents[1]


def test_notebooks_are_in_sync_with_solutions():
    problems = rel.check_release(ROOT)
    assert not problems, "run `llm-course release`:\n" + "\n".join(problems)


def test_student_notebooks_have_no_outputs_and_no_answers():
    for ch in rel.chapters(ROOT):
        nb = json.loads((ROOT / "notebooks" / ch / f"{ch}.ipynb").read_text())
        for cell in nb["cells"]:
            src = "".join(cell["source"])
            assert "BEGIN SOLUTION" not in src and "BEGIN HIDDEN TESTS" not in src, f"{ch}: answer leaked"
            if cell["cell_type"] == "code":
                assert not cell["outputs"], f"{ch}: student notebook has outputs"


def _mini_course(tmp_path: Path) -> Path:
    root = tmp_path / "course"
    (root / "course_utils").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", root)
    src = root / "solutions" / "01_demo"
    src.mkdir(parents=True)
    nb = {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": "ex", "outputs": [],
             "metadata": {"nbgrader": {"grade": False, "grade_id": "ex", "locked": False, "schema_version": 3,
                                       "solution": True, "task": False}},
             "source": "def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n"},
        ],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    (src / "01_demo.ipynb").write_text(json.dumps(nb))
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    return root


def test_release_writes_generated_notebook_and_check_passes(tmp_path):
    root = _mini_course(tmp_path)
    assert rel.release(root=root) == ["01_demo"]
    out = json.loads((root / "notebooks" / "01_demo" / "01_demo.ipynb").read_text())
    assert "raise NotImplementedError" in "".join(out["cells"][0]["source"])
    assert rel.check_release(root) == []
    (root / "notebooks" / "01_demo" / "01_demo.ipynb").write_text("{}")
    assert any("differs" in p for p in rel.check_release(root))


def test_release_refuses_to_overwrite_uncommitted_student_edits(tmp_path):
    root = _mini_course(tmp_path)
    rel.release(root=root)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "x"], cwd=root, check=True)
    nbfile = root / "notebooks" / "01_demo" / "01_demo.ipynb"
    nbfile.write_text(nbfile.read_text().replace("NotImplementedError", "NotImplementedError  # my edit"))
    with pytest.raises(rel.ReleaseError, match="uncommitted changes"):
        rel.release(root=root)
    assert "my edit" in nbfile.read_text(), "the edit must survive a refused release"
    rel.release(root=root, force=True)
    assert "my edit" not in nbfile.read_text()


def test_release_refuses_a_notebook_without_nbgrader_metadata(tmp_path):
    root = _mini_course(tmp_path)
    p = root / "solutions" / "01_demo" / "01_demo.ipynb"
    nb = json.loads(p.read_text())
    nb["cells"][0]["metadata"] = {}
    p.write_text(json.dumps(nb))
    with pytest.raises(rel.ReleaseError, match="no nbgrader cell metadata"):
        rel.release(root=root)


def test_release_of_unknown_chapter_is_refused(tmp_path):
    root = _mini_course(tmp_path)
    with pytest.raises(rel.ReleaseError, match="01_demo"):
        rel.release(["99_nope"], root=root)
