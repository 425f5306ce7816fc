"""A tiny nbgrader course for the classroom tests (test_exchange.py, test_classroom.py).

One assignment ``ex01``: an answer cell (``double``), two graded test cells in the course's record
protocol (visible check + hidden record, the int one with a reference block) worth 2 and 1
points, and a hand-graded written answer worth 1. No torch, no model: a kernel starts in about a
second, so the cost measured is nbgrader's and the course's grading machinery's.
"""
from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterable, Iterator

from course_utils.paths import repo_root

AID = "ex01"
VENV_BIN = Path(sys.executable).parent
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"
# One lock for every test that lets other users enter the folders above the interpreter: tests in
# two pytest workers would otherwise restore a mode the other still needs.
_ENTER_LOCK = Path(tempfile.gettempdir()) / "llm-course-tests-others-may-enter.lock"


@contextlib.contextmanager
def others_may_enter(paths: Iterable[str | os.PathLike]) -> Iterator[None]:
    """Grant 'others' o+x (enter, not list) on the folders above ``paths`` that lack it (e.g. /root
    when the interpreter is under ~/.pyenv), for the duration, under a machine-wide lock; the modes
    are restored afterwards. A class's shared environment must be reachable by every account."""
    with open(_ENTER_LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        fixed: dict[Path, int] = {}
        for p in paths:
            p = Path(p).resolve()
            for d in [p, *p.parents] if p.is_dir() else list(p.parents):
                mode = d.stat().st_mode
                if not mode & stat.S_IXOTH:
                    fixed[d] = mode
        for d, mode in fixed.items():
            d.chmod(mode | stat.S_IXOTH)
        try:
            yield
        finally:
            for d, mode in fixed.items():
                d.chmod(mode)


@contextlib.contextmanager
def student_accounts(base: Path, names: Iterable[str]) -> Iterator[dict[str, Path]]:
    """Real Unix accounts ``names`` (as root), each with a private home ``base/home/<name>`` (0700),
    able to run this environment (:func:`others_may_enter`); ``{name: home}``. The accounts are
    removed afterwards (``base`` is the caller's)."""
    from course_tools import classroom

    names = list(names)
    homes: dict[str, Path] = {}
    with others_may_enter([sys.executable, os.path.realpath(sys.executable), VENV_BIN,
                           Path(classroom.__file__).parent]):
        try:
            for n in names:
                home = base / "home" / n
                home.mkdir(parents=True)
                subprocess.run(["useradd", "--no-create-home", "--home-dir", str(home), "--shell", "/bin/sh",
                                "--user-group", n], check=True, capture_output=True)
                shutil.chown(home, n, n)
                home.chmod(0o700)
                homes[n] = home
            yield homes
        finally:
            for n in names:
                subprocess.run(["userdel", n], capture_output=True)


def run_as(user: str, home: Path, *cmd: str, timeout: int = 300) -> subprocess.CompletedProcess:
    """``cmd`` as ``user`` (runuser, a login-like environment with this venv first on PATH), in her
    home; fails the test, with its output, unless it exits 0."""
    env = {"HOME": str(home), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
           "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin"}
    res = subprocess.run([RUNUSER, "-u", user, "--", *cmd], cwd=home, env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert res.returncode == 0, f"{user}: {' '.join(cmd[:3])} exited {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


def nbgrader_cell(kind, source, grade_id, grade=False, solution=False, locked=True, points=None):
    """A notebook cell with nbgrader metadata (schema 3), as an instructor's source holds it."""
    meta = {"grade": grade, "solution": solution, "locked": locked, "grade_id": grade_id,
            "schema_version": 3, "task": False}
    if points is not None:
        meta["points"] = points
    cell = {"cell_type": kind, "metadata": {"nbgrader": meta}, "source": source, "id": grade_id}
    if kind == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


_cell = nbgrader_cell


SOURCE = {
    "cells": [
        _cell("markdown", "# Exercise 1\nWrite `double`.", "intro"),
        _cell("code", "import course_utils", "setup"),
        _cell("code", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "answer",
              solution=True, locked=False),
        _cell("code", "from course_utils.grading import check_equal\ncheck_equal('double(3)', double(3), 6)\n"
                      "### BEGIN HIDDEN TESTS\nfrom course_utils.grading import record\n"
                      "record('double(-2)', double(-2))\n### BEGIN REFERENCE\nfrom course_utils.grading import expect\n"
                      "expect('double(-2)', -4)\n### END REFERENCE\n### END HIDDEN TESTS",
              "test_int", grade=True, points=2),
        _cell("code", "from course_utils.grading import check_equal\ncheck_equal('double(\"ab\")', double('ab'), 'abab')\n"
                      "### BEGIN HIDDEN TESTS\nfrom course_utils.grading import record\n"
                      "record('double(\"xyz\")', double('xyz'))\n### END HIDDEN TESTS",
              "test_str", grade=True, points=1),
        _cell("markdown", "Explain. YOUR ANSWER", "written", grade=True, solution=True, locked=False, points=1),
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                 "language_info": {"name": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}
MAX_AUTO = 3.0      # points of the autograded test cells
MAX_TOTAL = 4.0     # with the hand-graded answer

RIGHT = "def double(x):\n    return 2 * x\n"
PARTLY = "def double(x):\n    return 2 * x if isinstance(x, int) else x\n"   # test_int passes, test_str fails


def double_test_cell(gid: str, arg: object, key: str, points: int, probe: bool = False) -> dict:
    """A test cell of the small ``double`` assignment: a visible check, and a hidden record of
    ``double(arg)`` under ``key`` (in a probe block without ``gguf`` when ``probe``: the probe kernel
    runs that block alone, so it imports what it uses)."""
    body = f"record({key!r}, double({arg}))\n"
    if probe:
        body = f"### BEGIN PROBE WITHOUT gguf\nfrom course_utils.grading import record\n{body}### END PROBE\n"
    return nbgrader_cell("code", f"from course_utils.grading import check_equal\ncheck_equal('double(3)', double(3), 6)\n"
                                 f"### BEGIN HIDDEN TESTS\nfrom course_utils.grading import record\n{body}"
                                 f"### END HIDDEN TESTS", gid, grade=True, points=points)


def make_course(course: Path) -> Path:
    """A course root: the course's ``nbgrader_config.py`` and the source ``solutions/ex01/ex01.ipynb``."""
    (course / "solutions" / AID).mkdir(parents=True)
    (course / "solutions" / AID / f"{AID}.ipynb").write_text(json.dumps(SOURCE, indent=1))
    shutil.copy(repo_root() / "nbgrader_config.py", course / "nbgrader_config.py")
    return course


def answered(student_nb: dict, answer: str, written: str = "Because 2x = x + x.") -> dict:
    """The released notebook with the answer cell (and the written answer) filled in."""
    nb = copy.deepcopy(student_nb)
    for c in nb["cells"]:
        gid = c["metadata"].get("nbgrader", {}).get("grade_id")
        if gid == "answer":
            c["source"] = answer
        elif gid == "written":
            c["source"] = written
    return nb


@contextlib.contextmanager
def submission_service(exchange: Path, course_id: str = "llm-course", *, timeout: float = 60.0) -> Iterator[Path]:
    """The instructor's submission service (``llm-course exchange serve``) on ``exchange`` for the
    duration, as the account running the tests (the instructor); yields the socket's path."""
    import subprocess
    import sys
    import time

    sock = exchange / course_id / "submit.sock"
    log = open(exchange.parent / f"exchange-service-{course_id}.log", "w")
    proc = subprocess.Popen([str(Path(sys.executable).parent / "llm-course"), "exchange", "serve",
                             "--root", str(exchange), "--course", course_id],
                            stdout=log, stderr=subprocess.STDOUT, cwd=exchange.parent)
    try:
        t_end = time.monotonic() + timeout
        while not sock.exists():
            if proc.poll() is not None or time.monotonic() > t_end:
                log.flush()
                raise RuntimeError("the submission service did not start:\n"
                                   + (exchange.parent / f"exchange-service-{course_id}.log").read_text())
            time.sleep(0.1)
        yield sock
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def service_log(exchange: Path, course_id: str = "llm-course") -> str:
    """What :func:`submission_service` logged."""
    return (exchange.parent / f"exchange-service-{course_id}.log").read_text()
