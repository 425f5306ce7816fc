"""The instructor's commands around stock nbgrader (course_tools/classroom.py), on real runs.

* ``CourseDirectory.ignore`` keeps the exchange's ``timestamp.txt`` and ``submission_secret.txt``
  and still keeps every other text file, script and markdown file out of a release;
* ``llm-course register`` fills the gradebook from the source without touching the release;
* ``llm-course autograde --jobs N`` grades submissions with N stock nbgrader processes into one
  gradebook: SQLite here, a real PostgreSQL server (started by the test as an unprivileged user)
  below; every grade lands;
* that server as README "A larger gradebook" sets it up: the grader role needs its password (a 0600
  ``PGPASSFILE``), a real student account connecting as grader is refused, and while the workers
  run, that student sees neither the URL nor its password on any command line (``/proc/*/cmdline``)
  and reads no grader's environment; no grading kernel inherits the URL; ``exposure_warnings``
  finds the one ``trust`` line of ``pg_hba.conf``;
* an honest submission logs no ``Attribute 'checksum' … has changed`` warning (stock nbgrader
  logs one per test cell that has hidden tests), while a submission that edited a locked test
  cell still does, and is graded with the cell restored.
"""
from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from _classroom import AID, MAX_AUTO, PARTLY, RIGHT, answered, make_course
from course_tools import classroom

# Debian's postgresql package (15 on Debian 12); the newest installed version
PG_BIN = max(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0,
             default=Path("/usr/lib/postgresql/15/bin"))


def test_ignore_keeps_the_exchange_files_and_nothing_else():
    pats = classroom.ignore_patterns()
    for kept in ("timestamp.txt", "submission_secret.txt", f"{AID}.ipynb", "data.csv", "image.png"):
        assert not classroom.is_ignored(kept, pats), kept
    for dropped in ("notes.txt", "answers.txt", "requirements.txt", "t.txt", ".txt", "timestamps.txt",
                    "timestamp_.txt", "submission.txt", "submission_secret2.txt", "xtimestamp.txt",
                    "05_rope.py", "README.md", "x.pyc", "__pycache__", ".ipynb_checkpoints", "feedback"):
        assert classroom.is_ignored(dropped, pats), dropped
    # and it is what the course config uses
    cfg = (Path(classroom.__file__).parents[1] / "nbgrader_config.py").read_text()
    assert "c.CourseDirectory.ignore = ignore_patterns()" in cfg


def _submit(course: Path, answers: dict[str, dict]) -> None:
    for who, nb in answers.items():
        d = course / "submitted" / who / AID
        d.mkdir(parents=True)
        (d / f"{AID}.ipynb").write_text(json.dumps(nb, indent=1))
        (d / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")


def _tampered(student: dict) -> dict:
    """The right answer, and the visible check of test_str deleted (a locked cell edited)."""
    nb = answered(student, RIGHT)
    for c in nb["cells"]:
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_str":
            c["source"] = "pass  # nothing to see here"
    return nb


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = make_course(tmp_path_factory.mktemp("classroom"))
    classroom.nbgrader(["generate_assignment", AID, "--no-db"], course)   # the committed release
    return course


def test_register_then_parallel_autograde_sqlite(course):
    release = course / "notebooks" / AID / f"{AID}.ipynb"
    before = release.read_bytes()
    classroom.register([AID], course, log=lambda *_: None)
    assert release.read_bytes() == before, "register wrote into the release"
    student = json.loads(before)
    # round-robin over sorted names with 2 jobs: [a_right, c_right], [b_tampered, d_partly]
    _submit(course, {"a_right": answered(student, RIGHT), "b_tampered": _tampered(student),
                     "c_right": answered(student, RIGHT), "d_partly": answered(student, PARTLY)})
    run = classroom.autograde(AID, course, jobs=2, log=lambda *_: None)
    assert not run.failed, run.logs
    scores = classroom.gradebook_scores(classroom.db_url(course), AID)
    assert {k: v["score"] for k, v in scores.items()} == {
        "a_right": MAX_AUTO, "b_tampered": MAX_AUTO, "c_right": MAX_AUTO, "d_partly": 2.0}
    assert all(v["timestamp"] is not None for v in scores.values())
    logs = {log.split(":", 1)[0]: log for log in run.logs}
    honest = next(v for k, v in logs.items() if "a_right" in k)
    tampered = next(v for k, v in logs.items() if "b_tampered" in k)
    assert "checksum" not in honest, honest
    assert "Attribute 'checksum' for cell test_str has changed" in tampered, tampered
    assert "test_int has changed" not in tampered, tampered   # only the edited cell is reported
    # the tampered cell was graded as the instructor wrote it (the check is back)
    nb = json.loads((course / "autograded" / "b_tampered" / AID / f"{AID}.ipynb").read_text())
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "test_str")
    assert "check_equal" in "".join(cell["source"])


# --------------------------------------------------------------------------- PostgreSQL

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgUrl(str):
    """The gradebook URL with its password (what the fixture yields: a str), and the server's details:
    ``bare`` (the URL without password, as README's config holds it), ``password``, ``pgpass`` (a
    0600 file for libpq's ``PGPASSFILE``), ``sock`` and ``port``."""
    bare: str
    password: str
    pgpass: Path
    sock: Path
    port: int


TRUSTED_ROLE = "nobody_trusted"   # one pg_hba.conf line that trusts, for `exposure_warnings` to find


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server in a temporary folder, run by the unprivileged ``postgres`` account
    (Debian's postgresql package), listening only on a Unix socket, as README "A larger
    gradebook" sets one up: the ``grader`` role authenticates with a password (scram-sha-256) for
    every connection, local ones included; plus a ``trust`` line for a role nobody uses."""
    pytest.importorskip("psycopg2")
    if not (PG_BIN / "initdb").is_file():
        pytest.skip("PostgreSQL server binaries missing (apt-get install postgresql)")
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("no unprivileged 'postgres' account")
        prefix = ["runuser", "-u", "postgres", "--"]
    else:
        prefix = []   # already unprivileged
    base = Path(tempfile.mkdtemp(prefix="llmc-pg-"))
    base.chmod(0o755)
    data, sock = base / "data", base / "sock"
    sock.mkdir()
    password = secrets.token_hex(12)
    pwfile = base / "pw"
    pwfile.write_text(password + "\n")
    if prefix:
        shutil.chown(base, "postgres", "postgres")
        shutil.chown(sock, "postgres", "postgres")
        shutil.chown(pwfile, "postgres", "postgres")
    pwfile.chmod(0o600)
    port = _free_port()
    run = lambda *a, **k: subprocess.run([*prefix, *a], check=True, capture_output=True, text=True,  # noqa: E731
                                         cwd=base, timeout=120, **k)
    try:
        run(str(PG_BIN / "initdb"), "-D", str(data), "-U", "grader", f"--pwfile={pwfile}",
            "--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "-E", "UTF8")
        pwfile.unlink()
        hba = data / "pg_hba.conf"
        run("sh", "-c", f"echo 'local gradebook {TRUSTED_ROLE} trust' >> {hba}")
        run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-o",
            f"-k {sock} -p {port} -c listen_addresses='' -c max_connections=50", "start")
        run(str(PG_BIN / "createdb"), "-h", str(sock), "-p", str(port), "-U", "grader", "gradebook",
            env=dict(os.environ, PGPASSWORD=password))
        pgpass = Path(tempfile.mkdtemp(prefix="llmc-pgpass-")) / "pgpass"
        pgpass.write_text(f"*:{port}:gradebook:grader:{password}\n")
        pgpass.chmod(0o600)
        url = PgUrl(f"postgresql+psycopg2://grader:{password}@/gradebook?host={sock}&port={port}")
        url.bare, url.password, url.pgpass, url.sock, url.port = (
            f"postgresql+psycopg2://grader@/gradebook?host={sock}&port={port}", password, pgpass, sock, port)
        yield url
    finally:
        subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, cwd=base, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def student_account():
    """A real account of the machine (a student), with a home; ``None`` unless run as root."""
    if os.geteuid() != 0 or not shutil.which("runuser"):
        yield None
        return
    name = f"lc{uuid.uuid4().hex[:6]}pg"
    home = Path(tempfile.mkdtemp(prefix="llmc-pgstudent-"))
    subprocess.run(["useradd", "--no-create-home", "--home-dir", str(home), "--shell", "/bin/sh", "--user-group",
                    name], check=True, capture_output=True)
    shutil.chown(home, name, name)
    try:
        yield name, home
    finally:
        subprocess.run(["userdel", name], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)


# What a student can see of every process: argv (``ps``) and, where allowed, the environment. Runs
# until the file argv[1] appears; prints what it saw.
WATCH = r"""
import json, os, sys, time
stop, seen, env_read = sys.argv[1], set(), []
while not os.path.exists(stop):
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            with open(f'/proc/{pid}/cmdline', 'rb') as f:
                seen.add(f.read().replace(b'\0', b' ').decode(errors='replace'))
        except OSError:
            pass
        try:
            with open(f'/proc/{pid}/environ', 'rb') as f:
                if b'LLM_COURSE_DB_URL' in f.read():
                    env_read.append(pid)
        except OSError:
            pass
    time.sleep(0.05)
print(json.dumps({'cmdlines': sorted(seen), 'environ': env_read}))
"""


def _as_user(user: str, home: Path, *cmd: str, **kw) -> subprocess.Popen:
    env = {"HOME": str(home), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8", "PATH": "/usr/bin:/bin"}
    return subprocess.Popen([shutil.which("runuser") or "/usr/sbin/runuser", "-u", user, "--", *cmd], cwd=home,
                            env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kw)


def test_parallel_autograde_into_postgresql(postgres, student_account, tmp_path, monkeypatch):
    from course_tools.grading.privacy import exposure_warnings

    course = make_course(tmp_path / "course")
    classroom.nbgrader(["generate_assignment", AID, "--no-db"], course)
    # README's way: the URL without password, the password in a 0600 pgpass file libpq reads
    monkeypatch.setenv("PGPASSFILE", str(postgres.pgpass))
    classroom.register([AID], course, db=postgres.bare, log=lambda *_: None)
    student = json.loads((course / "notebooks" / AID / f"{AID}.ipynb").read_text())
    want = {}
    subs = {}
    for i in range(6):
        who = f"p{i}"
        subs[who] = answered(student, PARTLY if i % 3 == 2 else RIGHT)
        want[who] = 2.0 if i % 3 == 2 else MAX_AUTO
    # a submission that prints its kernel's whole environment into its graded notebook
    subs["p0"] = answered(student, RIGHT + "import os\nprint(dict(os.environ))\n")
    _submit(course, subs)
    watcher = None
    if student_account:
        user, home = student_account
        stop = Path(tempfile.mkdtemp(prefix="llmc-watch-"))
        stop.chmod(0o755)
        watcher = _as_user(user, home, "/usr/bin/python3", "-I", "-c", WATCH, str(stop / "stop"))
    try:
        # the worst case: the instructor hands the URL *with* its password to llm-course
        run = classroom.autograde(AID, course, jobs=3, db=str(postgres), log=lambda *_: None)
    finally:
        if watcher:
            (stop / "stop").touch()
            out, err = watcher.communicate(timeout=60)
            shutil.rmtree(stop, ignore_errors=True)
    assert not run.failed, run.logs
    assert run.jobs == 3
    scores = classroom.gradebook_scores(postgres.bare, AID)
    assert {k: v["score"] for k, v in scores.items()} == want
    assert not (course / "gradebook.db").exists(), "a worker wrote to the SQLite gradebook"
    graded = (course / "autograded" / "p0" / AID / f"{AID}.ipynb").read_text()
    assert "LLM_COURSE_SANDBOXED" in graded, "the kernel's environment was not printed"
    assert postgres.password not in graded and "LLM_COURSE_DB_URL" not in graded, "a kernel inherited the URL"
    # llm-course doctor's checks: grader authenticates; the one trusting line is found
    found = exposure_warnings(course, str(postgres))
    assert len(found) == 1 and TRUSTED_ROLE in found[0] and "trusts local" in found[0], found
    if not student_account:
        return
    assert watcher.returncode == 0, err
    seen = json.loads(out)
    assert not [c for c in seen["cmdlines"] if postgres.password in c or f"host={postgres.sock}" in c], \
        "the gradebook URL is on a command line every account reads"
    workers = [c for c in seen["cmdlines"] if "nbgrader" in c and " autograde " in c]
    assert workers, f"the watcher saw no autograde worker: {seen['cmdlines']}"
    assert not seen["environ"], "another account read a grader's environment"
    # a student connecting as the grader role, through the same socket, is refused
    user, home = student_account
    psql = _as_user(user, home, str(PG_BIN / "psql"), "-h", str(postgres.sock), "-p", str(postgres.port),
                    "-U", "grader", "-d", "gradebook", "-w", "-c", "UPDATE grade SET auto_score = 0")
    _, perr = psql.communicate(timeout=60)
    assert psql.returncode != 0, "a student connected to the gradebook as grader"
    assert "password" in perr, perr
