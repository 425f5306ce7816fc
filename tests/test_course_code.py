"""Grader and kernel import the same course code (issue 36; README "What the course guarantees
about the exchange").

A second clone of the course graded with the first clone's environment: the environment's
editable install points at this checkout, while nbgrader, started in the clone, imports the
clone's ``course_utils`` / ``course_tools`` (``nbgrader_config.py`` puts its folder first on
``sys.path``). Before, every student failed with a misleading error (the reference run's setup
cell concluded it was on Colab and tried ``git clone``). Now ``llm-course autograde`` stops before
the reference run and before any student, naming both copies and the fix; nothing is graded.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from _classroom import AID, make_course
from course_tools import classroom
from course_tools.grading.course_code import problem
from course_utils.paths import repo_root

VENV_BIN = Path(sys.executable).parent


def test_the_same_checkout_passes():
    assert problem(course_root=repo_root()) is None


def test_a_clone_graded_with_another_clones_environment_stops_before_any_student(tmp_path):
    clone = make_course(tmp_path / "clone")
    for pkg in ("course_utils", "course_tools"):
        shutil.copytree(repo_root() / pkg, clone / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    env = classroom.nbgrader_env(clone)
    res = subprocess.run([str(VENV_BIN / "llm-course"), "register", AID], cwd=clone, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    sub = clone / "submitted" / "student1" / AID
    sub.mkdir(parents=True)
    src = json.loads((clone / "solutions" / AID / f"{AID}.ipynb").read_text())
    (sub / f"{AID}.ipynb").write_text(json.dumps(src))
    res = subprocess.run([str(VENV_BIN / "llm-course"), "autograde", AID], cwd=clone, env=env,
                         capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    here = (repo_root() / "course_utils").resolve()
    assert str((clone / "course_utils").resolve()) in out and str(here) in out, out
    assert "pip install -e" in out and "reference run" not in out, out
    # (the course's privacy step may have made autograded/ itself, empty and 0700, before refusing)
    graded = list((clone / "autograded").iterdir()) if (clone / "autograded").exists() else []
    assert graded == [], f"a student was graded: {graded}"
    assert classroom.gradebook_scores(classroom.db_url(clone), AID) == {}
