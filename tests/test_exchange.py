"""The classroom cycle through the course's exchange, with real Unix accounts (README, "For instructors").

As root (the instructor), the test creates four students, an attacker (a student too) and an
account outside the class, a course (the small assignment of ``tests/_classroom.py``) and an
exchange root ``0755`` (the README's layout), starts the submission service
(``llm-course exchange serve``), then runs every step as the person who runs it:

  instructor: generate_assignment --no-db, llm-course register --duedate, release_assignment
              (inbound ``0700``, the instructor's)
  students:   fetch_assignment, submit through the service (student 1 right, 2 and 4 partly
              wrong, the attacker partly wrong), as themselves
  attacker:   cannot list, write or rename anything in the exchange (inbound, the course folder,
              the root); talks to the service's socket itself: a header naming student 1, hostile
              file names (``..``, a dot file, 20 folders deep, control characters), a truncated
              upload: each refused or taken as the attacker's own submission
  student 4:  keeps a shared writable mapping of the notebook it submitted and writes the right
              answer through it after the deadline, then submits again after the deadline
  outsider:   an account of the machine not on the class roster submits
  instructor: moves the due date to now and enters the roster; a folder in inbound 1200 levels
              deep and one whose receipt names another student (what the service never makes)
  student 3:  submits late, then rewrites the receipt in its own cache
  instructor: collect, llm-course autograde --jobs 2, generate_feedback, release_feedback, export
  students:   fetch_feedback

and checks that the student owns nothing in inbound, that every hostile request was refused and
reported, that the deep folder and the forged receipt were refused without stopping anyone else's
collection, that the victim's submission is graded (3/3), the late penalties (by the service's
clock), that the mapping changed nothing that was graded, the export, and that each student got
their own feedback. Then, with the exchange root made ``0777`` (stock nbgrader's setup), both the
students' fetch and the instructor's collect refuse it. Skipped unless run as root.
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

from _classroom import (AID, MAX_AUTO, MAX_TOTAL, PARTLY, RIGHT, answered, make_course, service_log,
                        student_accounts, submission_service)
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
    try:
        with student_accounts(base, names) as homes:
            yield base, homes
    finally:
        subprocess.run(["rm", "-rf", str(base)])   # not shutil.rmtree: it recurses, and a test folder is 1200 levels deep


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


def _python_as(user: str, home: Path, code: str, *args: str) -> str:
    """Run ``python -c code args`` as ``user`` (what a student can do in a terminal); its stdout."""
    env = {"HOME": str(home), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
    res = subprocess.run([RUNUSER, "-u", user, "--", sys.executable, "-I", "-c", code, *args], cwd=home, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"{user}: {res.stdout}\n{res.stderr}"
    return res.stdout


# What a student tries against the exchange from a terminal: argv = exchange root, course id, then
# the name of a classmate's folder to aim at. Prints {attempt: errno name or "DONE"}.
TRY_EXCHANGE = """
import errno, json, os, sys
root, course, victim = sys.argv[1:4]
c = os.path.join(root, course)
inbound = os.path.join(c, 'inbound')
out = {}
def attempt(what, fn):
    try:
        fn()
        out[what] = 'DONE'
    except OSError as e:
        out[what] = errno.errorcode.get(e.errno, str(e.errno))
attempt('list inbound', lambda: os.listdir(inbound))
attempt('mkdir in inbound', lambda: os.mkdir(os.path.join(inbound, victim + '+ex01+2000-01-01 00:00:00.000000 UTC+x')))
attempt('write into a classmate folder', lambda: open(os.path.join(inbound, victim, 'ex01.ipynb'), 'w'))
attempt('rename the course folder', lambda: os.rename(c, c + '-old'))
attempt('create in the exchange root', lambda: os.mkdir(os.path.join(root, 'mine')))
attempt('create in outbound', lambda: os.mkdir(os.path.join(c, 'outbound', 'ex02')))
attempt('replace the socket', lambda: os.unlink(os.path.join(c, 'submit.sock')))
print(json.dumps(out))
"""
# The attacker talks to the service's socket itself: argv = socket, notebook text, then a case.
RAW_SUBMIT = """
import json, socket, sys
sock, text, case = sys.argv[1:4]
data = text.encode()
files = {'claims-victim': [('ex01.ipynb', data)],
         'dotdot': [('../ex01.ipynb', data)],
         'dotfile': [('.bashrc', data)],
         'deep': [('/'.join(['d'] * 20) + '/x.txt', data)],
         'control': [('ex01\\x1b[2J.ipynb', data)],
         'truncated': [('ex01.ipynb', data)]}[case]
header = {'version': 1, 'course': 'llm-course', 'assignment': 'ex01', 'student': sys.argv[4],
          'files': [{'path': p, 'size': len(d) + (100 if case == 'truncated' else 0)} for p, d in files]}
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
s.connect(sock)
try:   # the service may answer (and close) as soon as it has read a header it refuses
    s.sendall(json.dumps(header).encode() + b'\\n')
    for _, d in files:
        s.sendall(d)
    s.shutdown(socket.SHUT_WR)
except OSError:
    pass
answer = b''
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    answer += chunk
print(answer.decode().strip())
"""
# A student keeps a shared writable mapping of a file: argv = file, seconds to wait, new text.
# (A write through a mapping moves no change time on tmpfs, and only after writeback on disk.)
MAP_AND_WRITE = """
import mmap, os, sys, time
path, wait, text = sys.argv[1], float(sys.argv[2]), sys.argv[3].encode()
fd = os.open(path, os.O_RDWR)
size = os.fstat(fd).st_size
m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
time.sleep(wait)
m[:] = text[:size].ljust(size, b' ')
m.flush()
print('written')
"""


def _destination(res: subprocess.CompletedProcess) -> str:
    """The inbound folder the service made, from ``nbgrader submit``'s own log line."""
    line = next(ln for ln in (res.stdout + res.stderr).splitlines() if "Received by the instructor's service as: " in ln)
    return line.split("Received by the instructor's service as: ", 1)[1].strip()


def _ts(when: datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%S.%f UTC")   # nbgrader's Exchange.timestamp_format


def _owned_by_instructor_only(folder: Path) -> list[str]:
    """Entries below ``folder`` that are not root's (the instructor's here) or that others may read/write."""
    bad = []
    for top, dirs, files in os.walk(folder):
        for name in dirs + files:
            st = os.lstat(os.path.join(top, name))
            if st.st_uid != os.geteuid() or st.st_mode & 0o077:
                bad.append(f"{os.path.join(top, name)} uid {st.st_uid} mode {oct(st.st_mode & 0o777)}")
    return bad


def test_exchange_cycle(accounts):
    t_start = time.perf_counter()
    base, homes = accounts
    s1, s2, s3, s4, mal, outsider = homes
    students = [s1, s2, s3, s4, mal]          # the attacker is a student of the class too
    exchange = base / "exchange"
    exchange.mkdir()
    exchange.chmod(0o755)                      # README: the instructor's exchange root, nobody else writes it
    course = make_course(base / "course")
    ex = [f"--Exchange.root={exchange}"]
    timings = {}

    def instructor(*args: str, check: bool = True) -> subprocess.CompletedProcess:
        t0 = time.perf_counter()
        res = classroom.nbgrader(args, course, extra=ex, check=check)
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
    inbound = exchange / COURSE_ID / "inbound"
    assert oct(exchange.stat().st_mode & 0o7777) == "0o755", "release must not open the exchange root to others"
    assert oct(inbound.stat().st_mode & 0o7777) == "0o700"

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

    answers = {s1: RIGHT, s2: PARTLY, s3: RIGHT, s4: PARTLY, mal: PARTLY, outsider: RIGHT}
    with submission_service(exchange) as sock:
        with ThreadPoolExecutor(3) as pool:
            list(pool.map(lambda u: fetch_and_answer(u, answers[u]), [*students, outsider]))
            submitted = dict(zip((s1, s2, s4, mal, outsider),
                                 pool.map(lambda u: _as_student(u, homes[u], "submit", AID), (s1, s2, s4, mal, outsider))))
        released = json.loads((homes[mal] / AID / f"{AID}.ipynb").read_text())
        # The student owns nothing of her submission: every folder and file in inbound is the instructor's, 0700/0600.
        assert _owned_by_instructor_only(inbound) == []
        for user in (s1, s2, s4, mal):
            assert _destination(submitted[user]).startswith(f"{user}+{AID}+")
            assert (inbound / _destination(submitted[user]) / f"{AID}.ipynb").read_bytes() == \
                (homes[user] / AID / f"{AID}.ipynb").read_bytes()

        # The attacker from a terminal: nothing in the exchange can be listed, written, renamed or replaced.
        tried = json.loads(_python_as(mal, homes[mal], TRY_EXCHANGE, str(exchange), COURSE_ID,
                                      _destination(submitted[s1])))
        assert tried == {k: "EACCES" for k in tried} and len(tried) == 7, tried
        # ... and on the service's socket: a header naming student 1 is the attacker's own submission;
        # hostile names and a truncated upload are refused and leave nothing.
        partly = json.dumps(answered(released, PARTLY))
        answer = json.loads(_python_as(mal, homes[mal], RAW_SUBMIT, str(sock), partly, "claims-victim", s1))
        assert answer["ok"] and answer["folder"].startswith(f"{mal}+{AID}+"), answer
        for case in ("dotdot", "dotfile", "deep", "control", "truncated"):
            answer = json.loads(_python_as(mal, homes[mal], RAW_SUBMIT, str(sock), partly, case, s1))
            assert answer["ok"] is False and answer["error"], (case, answer)
        assert not [n for n in os.listdir(inbound) if n.startswith(".incoming-")]
        # (its own client keeps no receipt of a raw submission; it submits once more the usual way)
        submitted[mal] = _as_student(mal, homes[mal], "submit", AID)
        # Student 4 keeps a writable shared mapping of the notebook it submitted (its own copy:
        # it has no other) and writes the right answer through it after the deadline.
        mapper = subprocess.Popen([RUNUSER, "-u", s4, "--", sys.executable, "-I", "-c", MAP_AND_WRITE,
                                   str(homes[s4] / AID / f"{AID}.ipynb"), "3", json.dumps(answered(released, RIGHT))],
                                  stdout=subprocess.PIPE, text=True)

        # The deadline passes (the instructor moves it to now), then student 3 submits (late).
        due = (datetime.now(timezone.utc) + timedelta(seconds=1)).replace(microsecond=0)   # after the submissions
        time.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds()) + 0.2)
        from nbgrader.api import Gradebook   # (= nbgrader db assignment add ex01 --duedate=..., which register ran)

        with Gradebook(classroom.db_url(course), COURSE_ID) as gb:
            gb.update_or_create_assignment(AID, duedate=due.replace(tzinfo=None))
            for user in students:                # the class roster (= nbgrader db student add ...)
                gb.update_or_create_student(user)
        submitted[s3] = _as_student(s3, homes[s3], "submit", AID)
        assert mapper.communicate(timeout=60)[0].strip() == "written"
        # Student 3 rewrites the receipt in its own cache to an hour before the deadline (it is only
        # its copy); student 4 submits its right answer again, after the deadline.
        cache_ts = next((homes[s3] / ".local/share/jupyter/nbgrader_cache" / COURSE_ID).glob(f"{s3}+{AID}+*"))
        _write_as(s3, cache_ts / "timestamp.txt", _ts(due - timedelta(hours=1)))
        _write_as(s4, homes[s4] / AID / f"{AID}.ipynb", json.dumps(answered(released, RIGHT), indent=1))
        submitted["s4 late"] = _as_student(s4, homes[s4], "submit", AID)
    log = service_log(exchange)
    assert log.count("refused a submission from") == 5 and "\x1b" not in log, log

    # Folders the service never makes, put there by hand (the instructor's account): one 1200
    # levels deep (RecursionError stopped stock collect for everyone after it) and one whose
    # receipt names another student. Each is refused alone; nobody else's collection stops.
    deep = inbound / f"{mal}+{AID}+{_ts(datetime.now(timezone.utc))}+deep"
    subprocess.run(["mkdir", "-p", str(deep / "/".join(["d"] * 1200))], check=True)   # os.makedirs recurses
    forged_src = inbound / _destination(submitted[mal])
    forged = inbound / f"{s2}+{AID}+{_ts(datetime.now(timezone.utc))}+forged"
    shutil.copytree(forged_src, forged)

    # Instructor: collect (only the service's folders), grade in parallel, feedback.
    res = instructor("collect", AID)
    collect_log = res.stdout + res.stderr
    assert sorted(p.name for p in (course / "submitted").iterdir()) == sorted(students), collect_log
    for user in students:
        ts = course / "submitted" / user / AID / "timestamp.txt"
        assert ts.is_file(), f"collect dropped {ts} (CourseDirectory.ignore)"
        assert not (course / "submitted" / user / AID / "receipt.json").exists()
    victim_nb = json.loads((course / "submitted" / s1 / AID / f"{AID}.ipynb").read_text())
    assert any("return 2 * x" in "".join(c["source"]) for c in victim_nb["cells"])
    report = [json.loads(line) for line in (course / "refused" / AID / "report.jsonl").read_text().splitlines()]
    reasons = {r["folder"]: r["reason"] for r in report}
    assert sorted(reasons) == sorted([deep.name, forged.name, _destination(submitted[outsider])]), report
    assert "folders deep" in reasons[deep.name]
    assert "receipt.json names another folder" in reasons[forged.name]
    assert reasons[_destination(submitted[outsider])] == "not on the gradebook's roster (nbgrader db student list)"
    for r in report:
        assert ascii(r["folder"]) in collect_log, f"the refusal of {r['folder']!r} is not logged"

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
    assert scores[s4]["score"] == MAX_AUTO and scores[s4]["late_penalty"] == MAX_AUTO  # its latest is after the deadline
    for user in (s1, s2, mal):
        assert scores[user]["timestamp"] is not None and scores[user]["timestamp"] < due.replace(tzinfo=None)
    for user in (s3, s4):
        assert scores[user]["timestamp"] > due.replace(tzinfo=None), (user, scores[user])
    # The mapping wrote into student 4's own copy only: its on-time submission is still the one it sent.
    on_time_s4 = json.loads((inbound / _destination(submitted[s4]) / f"{AID}.ipynb").read_text())
    assert any("isinstance(x, int)" in "".join(c["source"]) for c in on_time_s4["cells"])

    instructor("generate_feedback", AID)
    instructor("release_feedback", AID)
    with ThreadPoolExecutor(3) as pool:
        list(pool.map(lambda u: _as_student(u, homes[u], "fetch_feedback", AID), students))
    for user in students:
        home = homes[user]
        got = sorted((home / AID / "feedback").glob(f"*/{AID}.html"))
        assert len(got) >= 1, f"{user}: feedback {got}"
        html = got[-1].read_text()
        assert got[-1].stat().st_uid == classroom_uid(user)
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

    # Stock nbgrader's exchange root (0777, no sticky bit: another account can rename the course
    # folder and put its own in its place): the students' fetch and the instructor's collect refuse it.
    exchange.chmod(0o777)
    try:
        res = _as_student(s1, homes[s1], "fetch_assignment", AID, "--replace", check=False)
        assert res.returncode != 0 and "can be written by other accounts" in res.stdout + res.stderr, res
        res = instructor("collect", AID, "--update", check=False)
        assert res.returncode != 0 and "collect refuses this exchange" in res.stdout + res.stderr, res
    finally:
        exchange.chmod(0o755)
    subprocess.run(["rm", "-rf", str(deep), str(course / "refused")], check=True)   # rmtree recurses: 1200 levels
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
