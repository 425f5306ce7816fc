"""The instructor's commands around stock nbgrader (course_tools/classroom.py), on real runs.

* ``CourseDirectory.ignore`` keeps the exchange's ``timestamp.txt`` and ``submission_secret.txt``
  and still keeps every other text file, script and markdown file out of a release;
* ``llm-course register`` fills the gradebook from the source without touching the release;
* ``llm-course autograde --jobs N`` grades submissions with N stock nbgrader processes into one
  gradebook: SQLite here, a real PostgreSQL server (started by the test as an unprivileged user)
  below; every grade lands;
* an honest submission logs no ``Attribute 'checksum' … has changed`` warning (stock nbgrader
  logs one per test cell that has hidden tests), while a submission that edited a locked test
  cell still does, and is graded with the cell restored.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
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


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server in a temporary folder, run by the unprivileged ``postgres`` account
    (Debian's postgresql package), listening only on a Unix socket; its URL."""
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
    if prefix:
        shutil.chown(base, "postgres", "postgres")
        shutil.chown(sock, "postgres", "postgres")
    port = _free_port()
    run = lambda *a, **k: subprocess.run([*prefix, *a], check=True, capture_output=True, text=True,  # noqa: E731
                                         cwd=base, timeout=120, **k)
    try:
        run(str(PG_BIN / "initdb"), "-D", str(data), "-U", "grader", "--auth=trust", "-E", "UTF8")
        run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(base / "log"), "-w", "-o",
            f"-k {sock} -p {port} -c listen_addresses='' -c max_connections=50", "start")
        run(str(PG_BIN / "createdb"), "-h", str(sock), "-p", str(port), "-U", "grader", "gradebook")
        yield f"postgresql+psycopg2://grader@/gradebook?host={sock}&port={port}"
    finally:
        subprocess.run([*prefix, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True, cwd=base, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


def test_parallel_autograde_into_postgresql(postgres, tmp_path):
    course = make_course(tmp_path / "course")
    classroom.nbgrader(["generate_assignment", AID, "--no-db"], course)
    classroom.register([AID], course, db=postgres, log=lambda *_: None)
    student = json.loads((course / "notebooks" / AID / f"{AID}.ipynb").read_text())
    want = {}
    subs = {}
    for i in range(6):
        who = f"p{i}"
        subs[who] = answered(student, PARTLY if i % 3 == 2 else RIGHT)
        want[who] = 2.0 if i % 3 == 2 else MAX_AUTO
    _submit(course, subs)
    run = classroom.autograde(AID, course, jobs=3, db=postgres, log=lambda *_: None)
    assert not run.failed, run.logs
    assert run.jobs == 3
    scores = classroom.gradebook_scores(postgres, AID)
    assert {k: v["score"] for k, v in scores.items()} == want
    assert not (course / "gradebook.db").exists(), "a worker wrote to the SQLite gradebook"
