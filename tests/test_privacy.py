"""The course root on a shared machine: other accounts can use the checkout, not read the class's data.

README "A shared environment for the class": the checkout (its ``.venv``, ``course_utils``) stays
readable by every account, while student work, grades, feedback, refused copies, the submissions'
secrets and the reference records are the instructor's alone (``course_tools/grading/privacy.py``,
applied by the course's ``nbgrader_config.py`` and by ``llm-course``).

* unit tests (any account): :func:`exposure_warnings` names every exposed item of a course root
  laid out as umask 022 leaves it (and a password in a readable config), :func:`secure_course`
  closes them, the cluster's ``manifest.json`` keeps no gradebook password, and a course config
  that does not read ``$LLM_COURSE_DB_URL`` is refused by ``register``/``autograde`` (else its
  workers would write into another gradebook);
* with real accounts (root only): a whole small class cycle (register, release, fetch and submit
  as two students through the course's exchange, collect, ``llm-course autograde``, feedback
  released and fetched, an export; a ``refused/`` left world-readable by an earlier version) in a
  course root every account can enter, under umask 022, then one
  student walks the whole course root and reads whatever it can: no submission, autograded
  notebook, feedback, refused copy, secret, reference record, export or gradebook; the checkout
  itself is still readable, a student fetched its own feedback, and :func:`exposure_warnings`
  has nothing to say.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from _classroom import (AID, PARTLY, RIGHT, VENV_BIN, answered, make_course, run_as, student_accounts,
                        submission_service)
from course_tools import classroom

as_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("runuser"),
                             reason="creates Unix accounts: run as root (CI does)")
PW_URL = "postgresql+psycopg2://grader:s3cr3t-pw@/gradebook?host=/nonexistent&port=5"


def _open_base() -> Path:
    """A folder every account can enter (pytest's own tmp folders are 0700)."""
    base = Path(tempfile.mkdtemp(prefix="llmc-privacy-"))
    base.chmod(0o755)
    return base


# --------------------------------------------------------------------------- units

def test_exposure_warnings_then_secure_course(monkeypatch):
    from course_tools.cli import _privacy_lines
    from course_tools.grading.privacy import exposure_warnings, secure_course

    base = _open_base()
    old = os.umask(0o022)
    try:
        root = base / "course"
        for d in ("submitted/alice/ex01", "autograded/alice/ex01", "feedback/alice/ex01", "refused/ex01/1-ab",
                  ".llm-course/references", "solutions/ex01"):
            (root / d).mkdir(parents=True)
        for f in ("submitted/alice/ex01/ex01.ipynb", "submitted/alice/ex01/submission_secret.txt",
                  "autograded/alice/ex01/ex01.ipynb", "feedback/alice/ex01/ex01.html", "refused/ex01/report.jsonl",
                  ".llm-course/references/ex01-x.json", "grades.csv", "gradebook.db", "solutions/ex01/ex01.ipynb"):
            (root / f).write_text("x")
        (root / "nbgrader_config.py").write_text(f"c = get_config()\nc.CourseDirectory.db_url = {PW_URL!r}\n")
        sqlite = f"sqlite:///{root / 'gradebook.db'}"
        found = exposure_warnings(root, sqlite)
        for what in ("submitted/", "autograded/", "feedback/", "refused/", ".llm-course/", "grades.csv",
                     "gradebook.db"):
            assert any(w.startswith(what) for w in found), (what, found)
        assert not any("solutions" in w for w in found), found   # the checkout itself is meant to be readable
        assert any("nbgrader_config.py holds the gradebook's password" in w
                   for w in exposure_warnings(root, PW_URL, check_server=False))
        # llm-course doctor: the gradebook without its password, then one PRIVACY line per problem
        monkeypatch.setenv("LLM_COURSE_NBGRADER_ROOT", str(root))
        lines = _privacy_lines()
        assert lines[0].split() == ["gradebook", PW_URL.replace(":s3cr3t-pw", "")], lines
        assert any(ln.startswith("PRIVACY       submitted/") for ln in lines), lines
        assert any("holds the gradebook's password" in ln for ln in lines), lines

        changed = secure_course(root, sqlite)
        assert changed
        assert exposure_warnings(root, sqlite) == []
        for d in ("submitted", "autograded", "feedback", "refused", ".llm-course"):
            assert stat.S_IMODE((root / d).stat().st_mode) == 0o700, d
        for f in ("grades.csv", "gradebook.db"):
            assert stat.S_IMODE((root / f).stat().st_mode) == 0o600, f
        assert stat.S_IMODE((root / "solutions").stat().st_mode) == 0o755   # untouched
        # a command that writes the gradebook: created 0600 before nbgrader opens it
        (root / "gradebook.db").unlink()
        secure_course(root, sqlite, ["/x/bin/llm-course", "register", AID])
        assert stat.S_IMODE((root / "gradebook.db").stat().st_mode) == 0o600
    finally:
        os.umask(old)
        shutil.rmtree(base, ignore_errors=True)


def test_command_of_reads_the_subcommand():
    from course_tools.grading.privacy import command_of

    assert command_of(["/v/lib/python3.11/site-packages/nbgrader/__main__.py", "collect", "ex01"]) == ("nbgrader", "collect")
    assert command_of(["/v/bin/nbgrader", "--debug", "autograde", "ex01"]) == ("nbgrader", "autograde")
    assert command_of(["/v/bin/llm-course", "register", "ex01"]) == ("llm-course", "register")
    assert command_of(["/r/course_tools/cli.py", "cluster", "merge"]) == ("llm-course", "cluster")
    assert command_of(["/v/bin/pytest", "-q"]) == ("", "")


def test_manifest_keeps_the_gradebook_password_in_a_0600_file(tmp_path):
    from course_tools.cluster.manifest import Manifest, Shard

    m = Manifest(root=str(tmp_path), folder=str(tmp_path / "cluster"), db=PW_URL, course="llm-course",
                 python=sys.executable, shards=[Shard(0, AID, ["a"])])
    m.save()
    assert "s3cr3t-pw" not in m.path.read_text()
    assert json.loads(m.path.read_text())["db"] == "postgresql+psycopg2://grader@/gradebook?host=/nonexistent&port=5"
    secret = tmp_path / "cluster" / "gradebook-url"
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert Manifest.load(tmp_path / "cluster").db == PW_URL     # the merge job still gets the whole URL
    m.db = "sqlite:////x/gradebook.db"
    m.save()
    assert not secret.exists() and Manifest.load(m.path).db == m.db


# --------------------------------------------------------------------------- real accounts

SNOOP = r"""
import json, os, sys
root, marker = sys.argv[1], sys.argv[2]
readable, listed, leaked = [], [], []
for d, dirs, files in os.walk(root):
    listed.append(os.path.relpath(d, root))
    for n in files:
        p = os.path.join(d, n)
        try:
            with open(p, 'rb') as f:
                data = f.read()
        except OSError:
            continue
        readable.append(os.path.relpath(p, root))
        if marker.encode() in data:
            leaked.append(os.path.relpath(p, root))
# what a student who knows the layout (account names are no secret) tries by name
probes = {}
for rel in sys.argv[3:]:
    try:
        with open(os.path.join(root, rel), 'rb') as f:
            f.read(1)
        probes[rel] = 'read'
    except OSError as e:
        probes[rel] = type(e).__name__
print(json.dumps({'readable': readable, 'listed': listed, 'leaked': leaked, 'probes': probes}))
"""

@pytest.fixture(scope="module")
def two_students():
    tag = uuid.uuid4().hex[:6]
    base = _open_base()
    try:
        with student_accounts(base, [f"lc{tag}p1", f"lc{tag}p2"]) as homes:
            yield base, homes
    finally:
        shutil.rmtree(base, ignore_errors=True)


_as = run_as


@as_root
def test_other_accounts_cannot_read_the_class_data(two_students):
    t0 = time.perf_counter()
    base, homes = two_students
    p1, p2 = homes
    exchange = base / "exchange"
    exchange.mkdir()
    exchange.chmod(0o755)   # README: the instructor's exchange root
    old = os.umask(0o022)   # the README's layout: root, umask 022
    try:
        course = make_course(base / "course")
        ex = [f"--Exchange.root={exchange}"]
        env = classroom.nbgrader_env(course)
        classroom.nbgrader(["generate_assignment", AID, "--no-db"], course)
        res = subprocess.run([str(VENV_BIN / "llm-course"), "register", AID], cwd=course, env=env,
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stdout + res.stderr
        classroom.nbgrader(["release_assignment", AID], course, extra=ex)
        marker = f"only-{p1}-wrote-this"
        with submission_service(exchange):
            for user, answer in ((p1, RIGHT + f"# {marker}\n"), (p2, PARTLY)):
                home = homes[user]
                (home / ".jupyter").mkdir()
                (home / ".jupyter" / "nbgrader_config.py").write_text(
                    f"c = get_config()\nc.CourseDirectory.course_id = 'llm-course'\nc.Exchange.root = {str(exchange)!r}\n")
                for p in (home / ".jupyter", home / ".jupyter" / "nbgrader_config.py"):
                    shutil.chown(p, user, user)
                _as(user, home, str(VENV_BIN / "nbgrader"), "fetch_assignment", AID)
                nb = home / AID / f"{AID}.ipynb"
                nb.write_text(json.dumps(answered(json.loads(nb.read_text()), answer)))
                shutil.chown(nb, user, user)
                _as(user, home, str(VENV_BIN / "nbgrader"), "submit", AID)
        # what an earlier version's collect left: refused/ readable by everyone
        (course / "refused" / AID / "1-ab").mkdir(parents=True)
        (course / "refused" / AID / "report.jsonl").write_text(json.dumps({"claimed": p1, "marker": marker}) + "\n")
        (course / "refused" / AID / "1-ab" / f"{AID}.ipynb").write_text(marker)
        classroom.nbgrader(["collect", AID], course, extra=ex)
        res = subprocess.run([str(VENV_BIN / "llm-course"), "autograde", AID, "--jobs", "2"], cwd=course, env=env,
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stdout + res.stderr
        classroom.nbgrader(["generate_feedback", AID], course, extra=ex)
        classroom.nbgrader(["release_feedback", AID], course, extra=ex)
        classroom.nbgrader(["export", "--to", str(course / "grades.csv")], course)
        # release_feedback still hands a student its own (0644 in the exchange, from the 0700 feedback/)
        _as(p1, homes[p1], str(VENV_BIN / "nbgrader"), "fetch_feedback", AID)
        assert len(list((homes[p1] / AID / "feedback").glob(f"*/{AID}.html"))) == 1
    finally:
        os.umask(old)
    refs = list((course / ".llm-course" / "references").glob("*.json"))
    assert refs, "the reference run kept no records"
    for d in ("submitted", "autograded", "feedback"):
        assert (course / d / p1 / AID).is_dir(), d

    probes = [f"submitted/{p1}/{AID}/{AID}.ipynb", f"submitted/{p1}/{AID}/submission_secret.txt",
              f"autograded/{p1}/{AID}/{AID}.ipynb", f"feedback/{p1}/{AID}/{AID}.html", f"refused/{AID}/report.jsonl",
              "gradebook.db", "grades.csv", str(refs[0].relative_to(course)), "nbgrader_config.py"]
    out = json.loads(_as(p2, homes[p2], "/usr/bin/python3", "-I", "-c", SNOOP, str(course), marker, *probes).stdout)
    private = ("submitted/", "autograded/", "feedback/", "refused/", ".llm-course/", "cluster/")
    seen = [p for p in out["readable"] if p.startswith(private) or p in ("gradebook.db", "grades.csv")]
    assert not seen, f"another student reads: {seen}"
    assert not out["leaked"], f"{p1}'s answer is readable in {out['leaked']}"
    assert {k: v for k, v in out["probes"].items() if v == "read"} == {"nbgrader_config.py": "read"}, out["probes"]
    assert not [d for d in out["listed"] if d.split("/")[0] in {p.rstrip("/") for p in private}], out["listed"]

    from course_tools.grading.privacy import exposure_warnings

    assert exposure_warnings(course, classroom.db_url(course)) == []
    print(f"privacy cycle: {time.perf_counter() - t0:.0f} s")


def test_a_config_that_ignores_the_url_variable_is_refused(tmp_path):
    """register/autograde hand nbgrader the URL in $LLM_COURSE_DB_URL: with a course config that does
    not read it (an older copy), a worker would write into its own default gradebook: refused."""
    url = f"sqlite:///{tmp_path / 'elsewhere.db'}?timeout=120"
    course = make_course(tmp_path / "course")
    classroom.check_config_takes_db_url(course, url)           # the course's config: fine
    assert "LLM_COURSE_DB_URL" not in os.environ
    (course / "nbgrader_config.py").write_text("c = get_config()\nc.CourseDirectory.course_id = 'llm-course'\n")
    with pytest.raises(RuntimeError, match="does not read the gradebook URL"):
        classroom.check_config_takes_db_url(course, url)
