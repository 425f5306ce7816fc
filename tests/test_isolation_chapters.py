"""Isolation on real chapters (README, "Grading integrity"): the instructor's solution is nowhere a
submission can read it, and a link left in the kernel's folder harms nobody.

The attack of the issue that found the hole: the first answer cell unmounts what hid the solutions
in the old sandbox, reads the source notebook from the repository's git history, from the
checkout, from the course directory or from anywhere on the visible disk, and executes its
solution cells (this gave full marks on 03, 05 and 11). A second submission replaces its notebook
by a link to the class gradebook. Both are graded before an honest submission in one real
``nbgrader autograde`` run with the course config; tests/test_isolation.py holds the other attacks.
"""
from __future__ import annotations

import copy
import sqlite3

import pytest

from course_tools.grading import sandbox
from course_tools.grading.selftest import autograde_submissions
from course_utils.paths import repo_root

pytestmark = pytest.mark.skipif(sandbox.probe() is not None, reason=f"no bubblewrap here: {sandbox.probe()}")
SYMLINKS = (
    "import os\n"
    "for _n in ('CH.ipynb', 'timestamp.txt'):\n"
    "    try:\n        os.remove(_n)\n    except OSError:\n        pass\n"
    "os.symlink('../../../gradebook.db', 'CH.ipynb')\n"
    "os.symlink('../../../nbgrader_config.py', 'timestamp.txt')\n")

READ_THE_SOLUTION = r'''
import ctypes, glob, json, os, subprocess
_libc = ctypes.CDLL(None, use_errno=True)
for _m in ("/tmp", os.getcwd(), "/work", "/"):          # what hid the solutions in the old sandbox
    _libc.umount2(_m.encode(), 2)
_found = None
_cands = [subprocess.run(["git", "-C", %(repo)r, "show", "HEAD:solutions/%(ch)s/%(ch)s.ipynb"],
                         capture_output=True, text=True).stdout]
for _p in [%(repo)r + "/solutions/%(ch)s/%(ch)s.ipynb", "../../../solutions/%(ch)s/%(ch)s.ipynb",
           *[p for _top in ("/tmp", "/run", "/home", "/root", "/srv", "/opt", "/var")
             for p in glob.glob(_top + "/**/%(ch)s.ipynb", recursive=True)]]:
    try:
        _cands.append(open(_p).read())
    except OSError:
        pass
for _text in _cands:
    try:
        _nb = json.loads(_text)
    except ValueError:
        continue
    if any("BEGIN SOLUTION" in "".join(c["source"]) for c in _nb["cells"]):
        for _c in _nb["cells"]:
            if _c["cell_type"] == "code" and _c["metadata"].get("nbgrader", {}).get("solution"):
                exec("".join(_c["source"]), globals())
        break
'''


CHAPTERS = ["03_self_attention_by_hand", "05_rope", "11_quantization"]


@pytest.fixture(scope="module", params=CHAPTERS)
def chapter(request, tmp_path_factory):
    from course_tools.grading.selftest import _fill

    ch = request.param

    def build(student, source):
        attack = _answer_first(student, READ_THE_SOLUTION % {"repo": str(repo_root()), "ch": ch})
        link = _answer_first(student, SYMLINKS.replace("CH", ch))
        return {"a_reads_the_solution": attack, "a_symlink_to_gradebook": link, "zz_honest": _fill(student, source)}

    course = tmp_path_factory.mktemp(f"course{ch[:2]}")
    log: list[str] = []
    scores = autograde_submissions(course, repo_root() / "solutions" / ch, ch, build, log=log)
    return scores, course, "".join(log)


def _answer_first(student, code):
    nb = copy.deepcopy(student)
    for c in nb["cells"]:
        if c["metadata"].get("nbgrader", {}).get("solution") and c["cell_type"] == "code":
            c["source"] = code
            break
    return nb


def test_the_solution_cannot_be_read_and_the_gradebook_survives(chapter):
    scores, course, log = chapter
    total = {who: (sum(s for s, _ in cells.values()), sum(m for _, m in cells.values())) for who, cells in scores.items()}
    assert total["a_reads_the_solution"][0] == 0, total
    assert total["a_symlink_to_gradebook"][0] == 0, total
    assert total["zz_honest"][0] == total["zz_honest"][1] > 0, f"{total}\n{log[-3000:]}"
    with sqlite3.connect(course / "gradebook.db") as db:
        assert db.execute("select count(*) from submitted_assignment").fetchone()[0] == 3


