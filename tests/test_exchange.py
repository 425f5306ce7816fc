"""The classroom cycle through nbgrader's exchange, with real Unix accounts (README, "For instructors").

As root, the test creates three student accounts and a course (the course's ``nbgrader_config.py``,
the small assignment of ``tests/_classroom.py``), then runs every step as the person who runs it:

  instructor: generate_assignment --no-db (the committed release), llm-course register --duedate,
              release_assignment
  students:   fetch_assignment, submit (student 1 right, student 2 partly wrong, student 4 partly
              wrong, the attacker partly wrong), as themselves
  attacker:   writes folders into the inbound directory as itself: one in student 1's name (a
              later time, nothing answered), and "student ids" holding a spreadsheet formula
              (``=HYPERLINK``, ``@SUM``), markup, glob characters matching the others, a newline
  outsider:   an account of the machine not on the class roster hands in a folder of its own
  instructor: moves the due date to now and enters the roster (in the gradebook)
  student 3:  submit (right, but late), then rewrites its ``timestamp.txt`` and renames its folder
              to an hour before the deadline (forged time)
  student 4:  rewrites its on-time submission with the right answer after the deadline
  instructor: collect, llm-course autograde --jobs 2, generate_feedback, release_feedback, export
  students:   fetch_feedback

and checks that every attacker folder was refused and kept aside with a report naming the
attacker, that the victim's own submission is graded (3/3), that both submissions changed after
the deadline are late whatever their names and ``timestamp.txt`` say, the scores, that every
collected submission has its ``timestamp.txt``, the late penalty, the exported CSV (timestamps
filled in; no cell can start a formula, also with formula names on the roster) and that each
student got their own feedback. Students configure only ``~/.jupyter/nbgrader_config.py`` (course
id and exchange root). Skipped unless run as root (``useradd``, ``runuser``).
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
    # four students, an attacker (a student too), and an account that is not in the class
    names = [f"lc{tag}s{i}" for i in (1, 2, 3, 4)] + [f"lc{tag}m", f"lc{tag}x"]
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


def _python_as(user: str, home: Path, code: str, *args: str) -> None:
    """Run ``python -c code args`` as ``user`` (what a student can do in a terminal)."""
    env = {"HOME": str(home), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
    res = subprocess.run([RUNUSER, "-u", user, "--", sys.executable, "-I", "-c", code, *args], cwd=home, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"{user}: {res.stdout}\n{res.stderr}"


# The attacker writes folders of its own choosing into the inbound directory (nbgrader's design
# lets every student write there): argv = inbound, notebook text, then folder names.
PLANT = """
import os, sys
inbound, text = sys.argv[1], sys.argv[2]
for name in sys.argv[3:]:
    d = os.path.join(inbound, name)
    os.mkdir(d)
    open(os.path.join(d, 'ex01.ipynb'), 'w').write(text)
    open(os.path.join(d, 'timestamp.txt'), 'w').write(name.rsplit('+', 3)[2])
"""
# A student rewrites its own inbound folder after the deadline: argv = its folder (``nbgrader
# submit`` prints it: "Destination: ..."), then either "forge <time>" (timestamp.txt and the
# folder's name say <time>) or "rewrite <notebook>".
REWRITE = """
import os, sys
d, what, arg = sys.argv[1:4]
if what == 'forge':
    open(os.path.join(d, 'timestamp.txt'), 'w').write(arg)
    student, aid, _, rand = os.path.basename(d).rsplit('+', 3)
    os.rename(d, os.path.join(os.path.dirname(d), '+'.join([student, aid, arg, rand])))
else:
    open(os.path.join(d, 'ex01.ipynb'), 'w').write(arg)
"""


def _destination(res: subprocess.CompletedProcess) -> str:
    """The inbound folder ``nbgrader submit`` made, from its own log line."""
    line = next(ln for ln in (res.stdout + res.stderr).splitlines() if "Destination: " in ln)
    return line.split("Destination: ", 1)[1].strip()


def _ts(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")   # nbgrader's Exchange.timestamp_format


def test_exchange_cycle(accounts):
    t_start = time.perf_counter()
    base, homes = accounts
    s1, s2, s3, s4, mal, outsider = homes
    students = [s1, s2, s3, s4, mal]          # the attacker is a student of the class too
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

    answers = {s1: RIGHT, s2: PARTLY, s3: RIGHT, s4: PARTLY, mal: PARTLY}
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda u: fetch_and_answer(u, answers[u]), students))
        submitted = dict(zip((s1, s2, s4, mal), pool.map(lambda u: _as_student(u, homes[u], "submit", AID),
                                                         (s1, s2, s4, mal))))
    released = json.loads((homes[mal] / AID / f"{AID}.ipynb").read_text())

    # The attacker's folders, as itself: student 1's name at a later time with nothing answered
    # (stock collect took it as student 1's latest submission: 0/3), and "student ids" that are
    # formulas, markup, globs matching every student of the class, or hold a newline.
    inbound = exchange / COURSE_ID / "inbound"
    later = _ts(datetime.now(timezone.utc) + timedelta(hours=1))
    blank = json.dumps(answered(released, "def double(x):\n    return 0\n"))
    right = json.dumps(answered(released, RIGHT))
    victim_ids = {f"{s1}+{AID}+{later}+imp": s1}
    hostile_ids = ['=HYPERLINK("x";"y")', "@SUM(1;2)", "<img src=x onerror=alert(1)>",
                   s1[:-1] + "?", f"[{s1[0]}]{s1[1:]}", f"{s1}\nx", "-2+3", f"{s1[:-2]}*"]
    planted = [f"{h}+{AID}+{later}+atk{i}" for i, h in enumerate(hostile_ids)]
    _python_as(mal, homes[mal], PLANT, str(inbound), blank, *victim_ids)
    _python_as(mal, homes[mal], PLANT, str(inbound), right, *planted)
    # An account of the machine that is not on the class roster hands in a folder of its own.
    foreign = f"{outsider}+{AID}+{_ts(datetime.now(timezone.utc))}+own"
    _python_as(outsider, homes[outsider], PLANT, str(inbound), right, foreign)

    # The deadline passes (the instructor moves it to now), then student 3 submits.
    due = (datetime.now(timezone.utc) + timedelta(seconds=1)).replace(microsecond=0)   # after the submissions
    time.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds()) + 0.2)
    from nbgrader.api import Gradebook   # (= nbgrader db assignment add ex01 --duedate=..., which register ran)

    with Gradebook(classroom.db_url(course), COURSE_ID) as gb:
        gb.update_or_create_assignment(AID, duedate=due.replace(tzinfo=None))
        for user in students:                # the class roster (= nbgrader db student add ...)
            gb.update_or_create_student(user)
    submitted[s3] = _as_student(s3, homes[s3], "submit", AID)
    # Forged time: student 3 says it submitted an hour before the deadline; student 4 replaces
    # its on-time notebook by the right answer after the deadline.
    an_hour_before = _ts(due - timedelta(hours=1))
    _python_as(s3, homes[s3], REWRITE, _destination(submitted[s3]), "forge", an_hour_before)
    assert any(n.startswith(f"{s3}+{AID}+{an_hour_before}+") for n in os.listdir(inbound))
    _python_as(s4, homes[s4], REWRITE, _destination(submitted[s4]), "rewrite", right)

    # Instructor: collect (only what each student's own account made), grade in parallel, feedback.
    res = instructor("collect", AID)
    collect_log = res.stdout + res.stderr
    assert sorted(p.name for p in (course / "submitted").iterdir()) == sorted(students), collect_log
    for user in students:
        ts = course / "submitted" / user / AID / "timestamp.txt"
        assert ts.is_file(), f"collect dropped {ts} (CourseDirectory.ignore)"
    # the victim's collected notebook is its own (answered right), not the attacker's blank one
    victim_nb = json.loads((course / "submitted" / s1 / AID / f"{AID}.ipynb").read_text())
    assert any("return 2 * x" in "".join(c["source"]) for c in victim_nb["cells"])
    report = [json.loads(line) for line in (course / "refused" / AID / "report.jsonl").read_text().splitlines()]
    assert sorted(r["folder"] for r in report) == sorted([*victim_ids, *planted, foreign]), report
    assert all(r["owner"] == mal for r in report if r["folder"] != foreign), report
    assert {r["claimed"] for r in report} == {s1, outsider, *hostile_ids}
    assert [r["reason"] for r in report if r["folder"] == foreign] == [
        "not on the gradebook's roster (nbgrader db student list)"]
    for r in report:
        assert (course / "refused" / AID / r["kept_as"] / f"{AID}.ipynb").is_file(), r
        assert ascii(r["folder"]) in collect_log, f"the refusal of {r['folder']!r} is not logged"
    assert "\n" not in "".join(ascii(r["folder"]) for r in report)
    assert "the file system's time is used" in collect_log   # student 3's forged claim is shown, not trusted

    t0 = time.perf_counter()
    res = subprocess.run([str(VENV_BIN / "llm-course"), "autograde", AID, "--jobs", "2"], cwd=course,
                         env=classroom.nbgrader_env(course), capture_output=True, text=True, timeout=600)
    timings["llm-course autograde --jobs 2"] = round(time.perf_counter() - t0, 1)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"{len(students)}/{len(students)} submissions" in res.stdout, res.stdout

    url = classroom.db_url(course)
    scores = classroom.gradebook_scores(url, AID)
    assert set(scores) == set(students), "no id an attacker chose may reach the gradebook"
    assert scores[s1]["score"] == MAX_AUTO and scores[s1]["late_penalty"] == 0      # the victim, graded as it earned
    assert scores[s2]["score"] == 2.0 and scores[s2]["late_penalty"] == 0
    assert scores[mal]["score"] == 2.0 and scores[mal]["late_penalty"] == 0
    assert scores[s3]["score"] == MAX_AUTO and scores[s3]["late_penalty"] == MAX_AUTO  # "zero": late work scores 0
    assert scores[s4]["score"] == MAX_AUTO and scores[s4]["late_penalty"] == MAX_AUTO  # rewritten after the deadline
    for user in (s1, s2, mal):
        assert scores[user]["timestamp"] is not None and scores[user]["timestamp"] < due.replace(tzinfo=None)
    for user in (s3, s4):
        assert scores[user]["timestamp"] > due.replace(tzinfo=None), (user, scores[user])

    instructor("generate_feedback", AID)
    instructor("release_feedback", AID)
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda u: _as_student(u, homes[u], "fetch_feedback", AID), students))
    for user in students:
        home = homes[user]
        got = sorted((home / AID / "feedback").glob(f"*/{AID}.html"))
        assert len(got) == 1, f"{user}: feedback {got}"
        html = got[0].read_text()
        assert got[0].stat().st_uid == classroom_uid(user)
        want = {s1: MAX_AUTO, s2: 2.0, s3: 0.0, s4: 0.0, mal: 2.0}[user]   # the late penalty shows in the score
        assert f"Score: {want:g}" in html or f"{want:g} / {MAX_TOTAL:g}" in html, (user, _score_line(html))

    # Export: one row per student with its timestamp and late penalty; then names that are
    # formulas on the roster (an imported class list): every such cell is neutralised.
    out = course / "grades.csv"
    instructor("export", "--to", str(out))
    rows = {r["student_id"]: r for r in csv.DictReader(out.open())}
    assert set(rows) == set(students)
    for user, row in rows.items():
        assert row["timestamp"], f"{user}: empty timestamp in the export"
    assert float(rows[s3]["late_submission_penalty"]) == MAX_AUTO
    assert float(rows[s1]["score"]) == MAX_AUTO and float(rows[s2]["score"]) == 2.0
    with Gradebook(url, COURSE_ID) as gb:
        gb.update_or_create_student(s2, first_name='=HYPERLINK("http://x";"y")', last_name="@SUM(1;2)",
                                    email="+1-2,\n\t=cmd|' /C calc'!A0")
    instructor("export", "--to", str(out))
    table = list(csv.reader(out.open(newline="")))
    assert all(len(r) == len(table[0]) for r in table), table
    for r in table[1:]:
        for cell in r:
            assert not cell.lstrip(" ").startswith(("=", "+", "@", "\t", "\r")), (cell, r)
            assert not (cell.startswith("-") and not _number(cell)), (cell, r)
    row2 = next(r for r in csv.DictReader(out.open(newline="")) if r["student_id"] == s2)
    assert row2["first_name"] == "'" + '=HYPERLINK("http://x";"y")' and row2["last_name"] == "'@SUM(1;2)"
    assert float(row2["score"]) == 2.0
    elapsed = time.perf_counter() - t_start
    print(f"exchange cycle: {elapsed:.0f} s; instructor steps: {timings}")


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def classroom_uid(user: str) -> int:
    import pwd

    return pwd.getpwnam(user).pw_uid


def _score_line(html: str) -> str:
    i = html.find("Score")
    return html[i:i + 200] if i >= 0 else html[:200]
