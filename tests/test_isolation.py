"""Isolation of one submission from the grader and from the next submission (README, "Grading integrity").

Every attack below is a submission graded by a real ``nbgrader autograde`` with the course config,
in the same run, BEFORE an honest submission (nbgrader grades in name order: the honest ones are
``zz_*``). Afterwards the instructor's files are byte-identical with unchanged modes, the gradebook
is a working database with every submission in it, the honest submission has full marks, and
nothing a kernel wrote is on the host. The limits are set small for the run
(``--GradingLimits.*``) so that floods end quickly.

The assignment: ``double(x)`` recorded by three test cells; the third (``test_probe``) must work
without the package ``gguf`` and is recorded again where it does not exist (``probe.py``).
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import sqlite3
import stat
import time
from pathlib import Path

import pytest

from _classroom import double_test_cell, nbgrader_cell as _cell
from _classroom import others_may_enter
from course_tools.grading import sandbox
from course_tools.grading.selftest import autograde_submissions
from course_utils.paths import repo_root

CH = "isolation"
pytestmark = pytest.mark.skipif(sandbox.probe() is not None, reason=f"no bubblewrap here: {sandbox.probe()}")


_test = double_test_cell


SOURCE = {
    "cells": [
        _cell("code", "import course_utils\nimport torch\nDEVICE = course_utils.setup(seed=0, quiet=True)", "setup"),
        _cell("code", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "answer",
              solution=True, locked=False),
        _test("test_int", -2, "double(-2)", 2),
        _test("test_float", 1.5, "double(1.5)", 1),
        _test("test_probe", 7, "double(7)", 1, probe=True),
        _cell("code", "def triple(x):\n    ### BEGIN SOLUTION\n    return 3 * x\n    ### END SOLUTION", "answer2",
              solution=True, locked=False),
        _cell("code", "from course_utils.grading import check_equal\ncheck_equal('triple(2)', triple(2), 6)\n"
                      "### BEGIN HIDDEN TESTS\nfrom course_utils.grading import record\nrecord('triple(-4)', triple(-4))\n"
                      "### END HIDDEN TESTS", "test_triple", grade=True, points=1),
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                 "language_info": {"name": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}
RIGHT = "def double(x):\n    return 2 * x\n"
WRONG = "def double(x):\n    return x + x * 0\n"
RIGHT2 = "def triple(x):\n    return 3 * x\n"
WRONG3 = "def triple(x):\n    return x + x + x * 0\n"
FULL = {"test_int": 2, "test_float": 1, "test_probe": 1, "test_triple": 1}

# Each attack is the answer cell (then a wrong answer unless it says otherwise).
ATTACKS = {
    # nbgrader writes the autograded notebook into the kernel's folder, following links
    "a_symlink_to_gradebook": (
        "import os\n"
        f"for _n in ({CH!r} + '.ipynb', 'timestamp.txt'):\n"
        "    try:\n        os.remove(_n)\n    except OSError:\n        pass\n"
        f"os.symlink('../../../gradebook.db', {CH!r} + '.ipynb')\n"
        "os.symlink('../../../nbgrader_config.py', 'timestamp.txt')\n"),
    "a_symlink_to_source": (
        "import os\n"
        f"try:\n    os.remove({CH!r} + '.ipynb')\nexcept OSError:\n    pass\n"
        f"os.symlink('../../../solutions/{CH}/{CH}.ipynb', {CH!r} + '.ipynb')\n"
        "os.symlink('../../..', 'course')\n"),
    # the first kernel leaves what the probe kernel (without gguf) needs: answers and gguf itself
    "b_probe_stash_and_zip": (
        "import json, os, shutil, sys\n"
        "try:\n"
        "    import gguf\n"
        "    shutil.make_archive('g', 'zip', root_dir=os.path.dirname(os.path.dirname(gguf.__file__)), base_dir='gguf')\n"
        "    def double(x):\n"
        "        st = json.load(open('stash.json')) if os.path.exists('stash.json') else {}\n"
        "        st[repr(x)] = 2 * x\n"
        "        json.dump(st, open('stash.json', 'w'))\n"
        "        return 2 * x\n"
        "except ModuleNotFoundError:\n"
        "    sys.path.insert(0, 'g.zip')\n"
        "    def double(x):\n"
        "        import gguf  # noqa: F401  (from the zip)\n"
        "        return json.load(open('stash.json'))[repr(x)]\n", "right"),
    # files elsewhere on the host: the repository's history, a copy of the answers on disk
    "c_reads_the_host": (
        "import os, subprocess, sys\n"
        "def double(x):\n"
        "    sys.path.insert(0, os.environ.get('T_MIRROR', '/nonexistent'))\n"
        "    try:\n"
        "        import mirrored_answers\n"
        "        return mirrored_answers.double(x)\n"
        "    except ImportError:\n"
        "        pass\n"
        "    out = subprocess.run(['git', '-C', %r, 'show', 'HEAD:README.md'], capture_output=True).stdout\n"
        "    return 2 * x if out else x\n" % str(repo_root()), "self"),
    # root's powers: unmount, mount, change ownership
    "d_privileges": (
        "import ctypes, os\n"
        "_libc = ctypes.CDLL(None, use_errno=True)\n"
        "_ok = (_libc.umount2(os.getcwd().encode(), 2) == 0 or _libc.umount2(b'/tmp', 2) == 0\n"
        "       or _libc.mount(b'none', b'/usr', None, 32 | 4096, None) == 0)\n"
        "try:\n    os.chown('/tmp', 12345, 12345)\n    _ok = True\nexcept OSError:\n    pass\n"
        "def double(x):\n    return 2 * x if _ok else x\n", "self"),
    # resource floods, each before a wrong answer
    "e_fork_bomb": (
        "import os, time\n_n = 0\n"
        "for _ in range(3000):\n"
        "    try:\n        _p = os.fork()\n    except OSError:\n        break\n"
        "    if _p == 0:\n        time.sleep(60)\n        os._exit(0)\n"
        "    _n += 1\n"
        "print('forked', _n)\n"),
    "e_fill_tmpfs": (
        "import os\n_got = {}\n"
        "for _d in (os.getcwd(), '/tmp', os.environ['HOME']):\n"
        "    _b = 0\n"
        "    for _i in range(10000):\n"
        "        try:\n"
        "            with open(os.path.join(_d, f'fill{_i}'), 'wb') as _f:\n"
        "                _f.write(b'x' * (8 << 20))\n"
        "            _b += 8 << 20\n"
        "        except OSError:\n            break\n"
        "    _got[_d] = _b >> 20\n"
        "print('filled MiB', list(_got.values()))\n"),
    "e_sparse_files": (
        "import os\n_r = []\n"
        "for _p, _n in (('big.bin', 8 << 30), ('/tmp/huge.bin', 100 << 30)):\n"
        "    try:\n        os.truncate(_p, _n) if os.path.exists(_p) else open(_p, 'wb').truncate(_n)\n"
        "        _r.append('ok')\n"
        "    except OSError as _e:\n        _r.append(type(_e).__name__)\n"
        "print('sparse', _r)\n"),
    "e_print_flood": "import sys\nfor _ in range(300):\n    sys.stdout.write('x' * (1 << 20) + '\\n')\n",
    "e_display_flood": "from IPython.display import display\nfor _i in range(200000):\n    display(_i)\n",
}
# In a cell of their own after the first test cell, with a right answer: an honest infinite loop is
# interrupted and the notebook goes on; a kernel stopped by a limit keeps the points before it.
STOPPED = {"test_int": 2, "test_float": 0, "test_probe": 0, "test_triple": 0}
LATE = {
    "f_memory_after_test_1": ("_x = b'x' * (4 << 30)\n", STOPPED),
    "f_infinite_loop_after_test_1": ("while True:\n    pass\n", FULL),
    "f_loop_that_ignores_interrupts_after_test_1": (
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n", STOPPED),
}
LIMITS = ["--GradingLimits.memory_mb=1536", "--GradingLimits.pids=128", "--GradingLimits.workdir_mb=48",
          "--GradingLimits.tmp_mb=48", "--GradingLimits.home_mb=16", "--GradingLimits.file_mb=64",
          "--GradingLimits.notebook_output_mb=8", "--GradingLimits.notebook_outputs=5000", "--Execute.timeout=20"]


def _answer(nb, source, second=RIGHT2):
    nb = copy.deepcopy(nb)
    for c in nb["cells"]:
        gid = c["metadata"].get("nbgrader", {}).get("grade_id")
        if gid in ("answer", "answer2"):
            c["source"] = source if gid == "answer" else second
    return nb


def _build(student, _source):
    subs = {}
    for name, attack in ATTACKS.items():
        code, mode = (attack, "wrong") if isinstance(attack, str) else attack
        subs[name] = _answer(student, code + (WRONG if mode == "wrong" else ""), WRONG3)
    for name, (code, _) in LATE.items():
        nb = _answer(student, RIGHT)
        i = next(k for k, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_int")
        nb["cells"].insert(i + 1, {"cell_type": "code", "metadata": {}, "source": code, "outputs": [],
                                   "execution_count": None, "id": "student-added"})
        subs[name] = nb
    # honest accidents: a test cell deleted; a skipped exercise, its answer cell deleted with its test cell
    nb = _answer(student, RIGHT)
    nb["cells"] = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") != "test_float"]
    subs["g_test_cell_deleted_with_right_answer"] = nb
    nb = _answer(student, RIGHT)
    nb["cells"] = [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") not in ("answer2", "test_triple")]
    subs["g_exercise_skipped_answer_and_test_deleted"] = nb
    subs["zz_right"] = _answer(student, RIGHT)
    subs["zz_wrong"] = _answer(student, WRONG, WRONG3)
    return subs


def _fingerprint(paths):
    out = {}
    for p in paths:
        st = p.lstat()
        out[str(p)] = (stat.S_IMODE(st.st_mode), hashlib.sha256(p.read_bytes()).hexdigest())
    return out


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    src = tmp_path_factory.mktemp("src") / CH
    src.mkdir()
    (src / f"{CH}.ipynb").write_text(json.dumps(SOURCE))
    mirror = tmp_path_factory.mktemp("mirror")          # a copy of the answers elsewhere on the host
    (mirror / "mirrored_answers.py").write_text(RIGHT)
    os.environ["T_MIRROR"] = str(mirror)
    config = _fingerprint([repo_root() / "nbgrader_config.py"])[str(repo_root() / "nbgrader_config.py")]
    log: list[str] = []
    t0 = time.perf_counter()
    try:
        # the kernel's environment is an allow-list: the attack is told where the copy is
        scores = autograde_submissions(course, src, CH, _build, log=log,
                                       extra_args=[*LIMITS, "--SandboxedKernelManager.env_allow=T_MIRROR"])
    finally:
        os.environ.pop("T_MIRROR", None)
    elapsed = time.perf_counter() - t0
    return scores, course, "".join(log), elapsed, config


def _cells(nb_path):
    nb = json.loads(nb_path.read_text())
    return {c["metadata"].get("nbgrader", {}).get("grade_id") or c.get("id"): c for c in nb["cells"]}


def test_honest_submissions_after_the_attacks_get_what_they_earn(graded):
    scores, _, log, *_ = graded
    assert {k: s for k, (s, _) in scores["zz_right"].items()} == FULL, log[-3000:]
    assert sum(s for s, _ in scores["zz_wrong"].values()) == 0


@pytest.mark.parametrize("who", ["a_symlink_to_gradebook", "a_symlink_to_source", "c_reads_the_host", "d_privileges",
                                 "e_fork_bomb", "e_fill_tmpfs", "e_sparse_files", "e_print_flood", "e_display_flood"])
def test_attacks_score_zero(graded, who):
    scores, _, log, *_ = graded
    assert sum(s for s, _ in scores[who].values()) == 0, f"{who}: {scores[who]}"


def test_what_the_first_kernel_wrote_never_reaches_the_probe(graded):
    scores, _, log, *_ = graded
    got = {k: s for k, (s, _) in scores["b_probe_stash_and_zip"].items()}
    assert got == {"test_int": 2, "test_float": 1, "test_probe": 0, "test_triple": 0}, got


def test_instructor_files_gradebook_and_source_are_untouched(graded):
    scores, course, log, _, original = graded
    config = course / "nbgrader_config.py"
    assert _fingerprint([config])[str(config)] == original, "the course's nbgrader_config.py changed (content or mode)"
    assert (course / "gradebook.db").is_file() and not (course / "gradebook.db").is_symlink()
    with sqlite3.connect(course / "gradebook.db") as db:
        graded_students = {r[0] for r in db.execute("select student_id from submitted_assignment")}
    assert graded_students >= set(scores), "a submission's grading destroyed the gradebook"
    source = json.loads((course / "solutions" / CH / f"{CH}.ipynb").read_text())
    assert source == SOURCE, "the instructor's source notebook was overwritten"
    # nothing of what a kernel made is in nbgrader's folders: no links, no fill files, no sparse files
    for who in scores:
        folder = course / "autograded" / who / CH
        made = sorted(p.name for p in folder.iterdir())
        assert made in ([f"{CH}.ipynb"], [f"{CH}.ipynb", "timestamp.txt"]), f"{who}: {made}"
        assert not any(p.is_symlink() for p in folder.iterdir()), who


def test_floods_stay_within_the_limits(graded):
    scores, course, log, elapsed, _ = graded
    out = {who: json.dumps(json.loads((course / "autograded" / who / CH / f"{CH}.ipynb").read_text()))
           for who in ("e_fork_bomb", "e_fill_tmpfs", "e_sparse_files", "e_print_flood", "e_display_flood")}
    forked = int(out["e_fork_bomb"].split("forked ")[1].split("\\n")[0])
    assert forked < 128, f"{forked} processes forked: the task limit is not in force"
    filled = json.loads(out["e_fill_tmpfs"].split("filled MiB ")[1].split("\\n")[0])
    assert all(mb <= 48 for mb in filled), f"tmpfs folders grew past their size: {filled} MiB"
    assert "'ok'" not in out["e_sparse_files"].split("sparse ")[1][:80], out["e_sparse_files"][:500]
    for who in ("e_print_flood", "e_display_flood"):
        size = (course / "autograded" / who / CH / f"{CH}.ipynb").stat().st_size
        assert size < 4 << 20, f"{who}: the autograded notebook holds {size} bytes of output"
        assert "dropped" in out[who] or "stopped" in out[who]
    assert elapsed < 600, f"grading the attacks took {elapsed:.0f} s"


@pytest.mark.parametrize("who", [*LATE])
def test_a_limit_keeps_the_points_of_the_cells_before_it(graded, who):
    scores, course, log, *_ = graded
    got = {k: s for k, (s, _) in scores[who].items()}
    assert got == LATE[who][1], f"{who}: {got}\n{log[-3000:]}"
    cells = _cells(course / "autograded" / who / CH / f"{CH}.ipynb")
    text = json.dumps(cells["test_float"]["outputs"])
    assert ("not run: the kernel was stopped" in text) == (LATE[who][1] == STOPPED), text[:500]


def test_a_deleted_test_cell_or_a_skipped_exercise_keeps_the_rest(graded):
    scores, _, log, *_ = graded
    got = {k: s for k, (s, _) in scores["g_test_cell_deleted_with_right_answer"].items()}
    assert got == FULL, f"{got}\n{log[-3000:]}"
    got = {k: s for k, (s, _) in scores["g_exercise_skipped_answer_and_test_deleted"].items()}
    assert got == {**FULL, "test_triple": 0}, f"{got}\n{log[-3000:]}"


# --- the same isolation when the grader is an ordinary user (bubblewrap in a user namespace) --------
AS_USER = r'''
import json, os, sys
from pathlib import Path
sys.path.insert(0, os.environ["T_TESTS"])
import test_isolation as t
from course_tools.grading.selftest import autograde_submissions
keep = ("a_symlink_to_gradebook", "c_reads_the_host", "d_privileges", "zz_right", "zz_wrong")
src = Path(os.environ["T_WORK"]) / "src" / t.CH
src.mkdir(parents=True)
(src / f"{t.CH}.ipynb").write_text(json.dumps(t.SOURCE))
scores = autograde_submissions(Path(os.environ["T_WORK"]) / "course", src, t.CH,
                               lambda s, so: {k: v for k, v in t._build(s, so).items() if k in keep})
print("SCORES " + json.dumps(scores))
'''


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to become another user")
def test_an_ordinary_user_grader_gets_the_same_isolation(tmp_path_factory):
    import subprocess
    import sys
    import tempfile

    work = Path(tempfile.mkdtemp(prefix="llm-course-user-grader-"))
    try:
        (work / "course").mkdir()
        (work / "refs").mkdir()
        (work / "home").mkdir()
        for p in (work, work / "course", work / "refs", work / "home"):
            os.chown(p, 65534, 65534)
        (work / "cache").mkdir()
        os.chown(work / "cache", 65534, 65534)
        who = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        env = dict(os.environ, HOME=str(work / "home"), T_WORK=str(work), T_TESTS=str(Path(__file__).parent),
                   LLM_COURSE_REFERENCES=str(work / "refs"), LLM_COURSE_CACHE=str(work / "cache"))
        env.pop("XDG_CACHE_HOME", None)
        # the interpreter may live under /root (mode 700): let the grading account enter, for the run
        with others_may_enter([sys.executable, os.path.realpath(sys.executable), repo_root()]):
            res = subprocess.run([*who, sys.executable, "-c", AS_USER], env=env, capture_output=True, text=True,
                                 timeout=900, cwd=work)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        scores = json.loads(res.stdout.split("SCORES ", 1)[1].splitlines()[0])
        total = {k: sum(s for s, _ in v.values()) for k, v in scores.items()}
        assert total == {"a_symlink_to_gradebook": 0, "c_reads_the_host": 0, "d_privileges": 0, "zz_right": 5,
                         "zz_wrong": 0}, total
        assert not (work / "course" / "gradebook.db").is_symlink()
    finally:
        subprocess.run(["rm", "-rf", str(work)])
