"""The classroom cycle through nbgrader's exchange, with real Unix accounts (README, "For instructors").

As root, the test creates three student accounts and a course (the course's ``nbgrader_config.py``,
the small assignment of ``tests/_classroom.py``), then runs every step as the person who runs it:

  instructor: generate_assignment --no-db (the committed release), llm-course register --duedate,
              release_assignment
  students:   fetch_assignment, submit (student 1 right, student 2 partly wrong), as themselves
  instructor: moves the due date to now (in the gradebook)
  student 3:  submit (right, but late)
  instructor: collect, llm-course autograde --jobs 2, generate_feedback, release_feedback, export
  students:   fetch_feedback

and checks the scores, that every collected submission kept its ``timestamp.txt``, the late
penalty, the exported CSV (timestamps filled in) and that each student got their own feedback.
Students configure only ``~/.jupyter/nbgrader_config.py`` (course id and exchange root). Skipped
unless run as root (``useradd``, ``runuser``).
"""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from _classroom import AID, MAX_AUTO, MAX_TOTAL, PARTLY, RIGHT, answered, make_course, others_may_enter
from course_tools import classroom

pytestmark = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("runuser"),
                                reason="creates Unix accounts: run as root (CI does)")

VENV_BIN = Path(sys.executable).parent
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"
COURSE_ID = "llm-course"


@pytest.fixture(scope="module")
def accounts():
    tag = uuid.uuid4().hex[:6]
    base = Path(tempfile.mkdtemp(prefix="llmc-exchange-"))
    base.chmod(0o755)
    names = [f"lc{tag}s{i}" for i in (1, 2, 3)]
    homes = {}
    enter = others_may_enter([sys.executable, os.path.realpath(sys.executable), VENV_BIN,
                              Path(classroom.__file__).parent])
    enter.__enter__()
    try:
        for n in names:
            home = base / "home" / n
            home.mkdir(parents=True)
            subprocess.run(["useradd", "--no-create-home", "--home-dir", str(home), "--shell", "/bin/sh",
                            "--user-group", n], check=True, capture_output=True)
            shutil.chown(home, n, n)
            home.chmod(0o700)
            homes[n] = home
        yield base, homes
    finally:
        for n in names:
            subprocess.run(["userdel", n], capture_output=True)
        enter.__exit__(None, None, None)
        shutil.rmtree(base, ignore_errors=True)


def _as_student(user: str, home: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {"HOME": str(home), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
           "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin"}
    res = subprocess.run([RUNUSER, "-u", user, "--", str(VENV_BIN / "nbgrader"), *args], cwd=home, env=env,
                         capture_output=True, text=True, timeout=300)
    if check and res.returncode != 0:
        raise AssertionError(f"{user}: nbgrader {' '.join(args)} exited {res.returncode}\n{res.stdout}\n{res.stderr}")
    return res


def _write_as(user: str, path: Path, text: str) -> None:
    path.write_text(text)
    shutil.chown(path, user, user)


def test_exchange_cycle(accounts):
    t_start = time.perf_counter()
    base, homes = accounts
    s1, s2, s3 = homes
    exchange = base / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)                      # nbgrader's default /srv/nbgrader/exchange is set up the same way
    course = make_course(base / "course")
    ex = [f"--Exchange.root={exchange}"]
    timings = {}

    def instructor(*args: str) -> subprocess.CompletedProcess:
        t0 = time.perf_counter()
        res = classroom.nbgrader(args, course, extra=ex)
        timings[args[0]] = round(time.perf_counter() - t0, 1)
        return res

    # Instructor: the committed release (as notebooks/ ships), then the gradebook from the source.
    classroom.nbgrader(["generate_assignment", AID, "--no-db"], course)
    release_nb = course / "notebooks" / AID / f"{AID}.ipynb"
    released_bytes = release_nb.read_bytes()
    res = subprocess.run([str(VENV_BIN / "llm-course"), "register", AID, "--duedate", "2099-01-01 00:00:00 UTC"],
                         cwd=course, env=classroom.nbgrader_env(course), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert release_nb.read_bytes() == released_bytes, "register must not touch the release"
    instructor("release_assignment", AID)

    # Students: what each configures, then fetch and submit as themselves.
    for user, home in homes.items():
        cfg = home / ".jupyter"
        cfg.mkdir()
        shutil.chown(cfg, user, user)
        _write_as(user, cfg / "nbgrader_config.py",
                  f"c = get_config()\nc.CourseDirectory.course_id = {COURSE_ID!r}\nc.Exchange.root = {str(exchange)!r}\n")

    def fetch_and_answer(user: str, answer: str) -> None:
        home = homes[user]
        _as_student(user, home, "fetch_assignment", AID)
        nb = home / AID / f"{AID}.ipynb"
        assert nb.is_file() and nb.stat().st_uid != 0
        _write_as(user, nb, json.dumps(answered(json.loads(nb.read_text()), answer), indent=1))

    answers = {s1: RIGHT, s2: PARTLY, s3: RIGHT}
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda u: fetch_and_answer(u, answers[u]), homes))
        list(pool.map(lambda u: _as_student(u, homes[u], "submit", AID), (s1, s2)))
    # The deadline passes (the instructor moves it to now), then student 3 submits.
    due = (datetime.now(timezone.utc) + timedelta(seconds=1)).replace(microsecond=0)   # after both submissions
    time.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds()) + 0.2)
    from nbgrader.api import Gradebook   # (= nbgrader db assignment add ex01 --duedate=..., which register ran)

    with Gradebook(classroom.db_url(course), COURSE_ID) as gb:
        gb.update_or_create_assignment(AID, duedate=due.replace(tzinfo=None))
    _as_student(s3, homes[s3], "submit", AID)

    # Instructor: collect (timestamps kept), grade in parallel, feedback.
    instructor("collect", AID)
    for user in homes:
        ts = course / "submitted" / user / AID / "timestamp.txt"
        assert ts.is_file(), f"collect dropped {ts} (CourseDirectory.ignore)"
    t0 = time.perf_counter()
    res = subprocess.run([str(VENV_BIN / "llm-course"), "autograde", AID, "--jobs", "2"], cwd=course,
                         env=classroom.nbgrader_env(course), capture_output=True, text=True, timeout=600)
    timings["llm-course autograde --jobs 2"] = round(time.perf_counter() - t0, 1)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "3/3 submissions" in res.stdout, res.stdout

    url = classroom.db_url(course)
    scores = classroom.gradebook_scores(url, AID)
    assert set(scores) == set(homes)
    assert scores[s1]["score"] == MAX_AUTO and scores[s1]["late_penalty"] == 0
    assert scores[s2]["score"] == 2.0 and scores[s2]["late_penalty"] == 0
    assert scores[s3]["score"] == MAX_AUTO and scores[s3]["late_penalty"] == MAX_AUTO  # "zero": late work scores 0
    for user in (s1, s2):
        assert scores[user]["timestamp"] is not None and scores[user]["timestamp"] < due.replace(tzinfo=None)
    assert scores[s3]["timestamp"] > due.replace(tzinfo=None)

    instructor("generate_feedback", AID)
    instructor("release_feedback", AID)
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda u: _as_student(u, homes[u], "fetch_feedback", AID), homes))
    for user, home in homes.items():
        got = sorted((home / AID / "feedback").glob(f"*/{AID}.html"))
        assert len(got) == 1, f"{user}: feedback {got}"
        html = got[0].read_text()
        assert got[0].stat().st_uid == classroom_uid(user)
        want = {s1: MAX_AUTO, s2: 2.0, s3: 0.0}[user]   # the late penalty shows in the feedback's score
        assert f"Score: {want:g}" in html or f"{want:g} / {MAX_TOTAL:g}" in html, (user, _score_line(html))

    # Export: one row per student with its timestamp and late penalty.
    out = course / "grades.csv"
    instructor("export", "--to", str(out))
    rows = {r["student_id"]: r for r in csv.DictReader(out.open())}
    assert set(rows) == set(homes)
    for user, row in rows.items():
        assert row["timestamp"], f"{user}: empty timestamp in the export"
    assert float(rows[s3]["late_submission_penalty"]) == MAX_AUTO
    assert float(rows[s1]["score"]) == MAX_AUTO and float(rows[s2]["score"]) == 2.0
    elapsed = time.perf_counter() - t_start
    print(f"exchange cycle: {elapsed:.0f} s; instructor steps: {timings}")


def classroom_uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


def _score_line(html: str) -> str:
    i = html.find("Score")
    return html[i:i + 200] if i >= 0 else html[:200]
