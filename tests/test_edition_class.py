"""A class given the Brazilian Portuguese edition, end to end, as README.pt_BR.md says (issue 47).

The instructor records the class edition once (``llm-course edition pt_BR``,
``course_tools/editions.py``); from then on the stock ``nbgrader release_assignment NN`` and
Formgrader's *Release* button hand out ``pt_BR/notebooks/NN``, while grading stays one gradebook
and the English source (``solutions/NN``, registered by ``llm-course register``).

* ``test_formgrader_release_follows_the_class_edition`` (no accounts, a few seconds): Formgrader's
  release, as its handlers call it (``NbGraderAPI.release_assignment``), hands out Portuguese (its
  release link shows ``pt_BR/notebooks/NN``), then English after ``llm-course edition en``, without
  a restart (the release plugin reads the record at each release);
  a broken record refuses to release (never English in its place); ``generate_assignment`` still
  writes ``notebooks/``.
* ``test_portuguese_class_cycle`` (root: one real Unix account, chapter 05_rope): register,
  release, the student fetches (the Portuguese notebook, byte for byte the pt-BR release), answers
  and submits through the submission service; collect, ``llm-course autograde`` (full marks),
  ``generate_feedback``, ``release_feedback``; the student fetches her feedback: Portuguese headings,
  no English one. One class cycle (the multi-student, hostile cases are tests/test_exchange.py's).
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from _classroom import VENV_BIN, run_as, student_accounts, submission_service
from course_tools import classroom, editions
from course_tools.grading.selftest import _fill
from course_utils.paths import cache_dir, repo_root

ROOT = repo_root()
CHAPTER = "05_rope"
LANG = "pt_BR"
COURSE_ID = "llm-course"


def _headings(course: Path) -> tuple[str, str]:
    """(English, Portuguese) text of the first heading the edition translates, as the course's
    student notebooks hold it (plain words: no code span, formula or quote, which HTML marks up)."""
    en = json.loads((course / "notebooks" / CHAPTER / f"{CHAPTER}.ipynb").read_text())
    pt = json.loads((course / LANG / "notebooks" / CHAPTER / f"{CHAPTER}.ipynb").read_text())
    for a, b in zip(en["cells"], pt["cells"]):
        if a["cell_type"] != "markdown":
            continue
        for la, lb in zip("".join(a["source"]).splitlines(), "".join(b["source"]).splitlines()):
            if la.startswith("#") and lb.startswith("#") and not any(ch in la + lb for ch in "`$\"<>&"):
                ta, tb = la.lstrip("#").strip(), lb.lstrip("#").strip()
                if ta != tb and ta not in tb:
                    return ta, tb
    raise AssertionError(f"no translated heading in {LANG}/notebooks/{CHAPTER}")


def _course(base: Path, exchange: Path) -> Path:
    """A course root with chapter 05 in both editions, the course config, and ``exchange`` as its exchange."""
    course = base / "course"
    for rel in (f"solutions/{CHAPTER}", f"notebooks/{CHAPTER}", f"{LANG}/notebooks/{CHAPTER}"):
        shutil.copytree(ROOT / rel, course / rel)
    (course / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text()
                                               + f"\nc.Exchange.root = {str(exchange)!r}\n")
    return course


def _env(course: Path) -> dict[str, str]:
    env = classroom.nbgrader_env(course)
    # the trusted reference records of 05, shared with the round trips of this machine (keyed by
    # the notebook, the course code and the library versions)
    env.setdefault("LLM_COURSE_REFERENCES", str(cache_dir() / "references"))
    return env


def _run(course: Path, *cmd: str, env: dict[str, str] | None = None, check: bool = True,
         timeout: int = 600) -> subprocess.CompletedProcess:
    res = subprocess.run(list(cmd), cwd=course, env=env or _env(course), capture_output=True, text=True,
                         timeout=timeout)
    if check:
        assert res.returncode == 0, f"{' '.join(cmd)} exited {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


# What each Formgrader request does (nbgrader/server_extensions/formgrader/base.py, `api`): reload
# the course config from the working directory, then call the API; here the Release button.
FORMGRADER_RELEASE = """
import json, sys
from nbgrader.apps.api import NbGraderAPI
from nbgrader.apps.baseapp import NbGrader
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory

app = NbGrader()
app.load_config_file()
coursedir = CourseDirectory(parent=app)
auth = Authenticator(parent=app)

def api():
    coursedir.parent.load_config_file()
    return NbGraderAPI(coursedir, auth, parent=coursedir.parent)

out = []
for step in sys.argv[2:]:
    if step.startswith("edition="):
        open(".llm-course/edition", "w").write(step.split("=", 1)[1] + "\\n")
        continue
    a = api()
    if step == "unrelease":
        out.append(a.unrelease(sys.argv[1]))
    else:
        out.append(dict(a.release_assignment(sys.argv[1]), release_path=a.get_assignment(sys.argv[1])["release_path"]))
print(json.dumps(out))
"""


def test_formgrader_release_follows_the_class_edition(tmp_path):
    exchange = tmp_path / "exchange"
    exchange.mkdir(mode=0o755)
    course = _course(tmp_path, exchange)
    llm = str(VENV_BIN / "llm-course")
    res = _run(course, llm, "edition", LANG)
    assert f"{LANG}/notebooks" in res.stdout, res.stdout
    assert (course / ".llm-course" / "edition").read_text().strip() == LANG
    released = exchange / COURSE_ID / "outbound" / CHAPTER / f"{CHAPTER}.ipynb"
    en_nb = (course / "notebooks" / CHAPTER / f"{CHAPTER}.ipynb").read_bytes()
    pt_nb = (course / LANG / "notebooks" / CHAPTER / f"{CHAPTER}.ipynb").read_bytes()

    # Formgrader's Release button: Portuguese; after `llm-course edition en` (no restart), English
    out = json.loads(_run(course, sys.executable, "-c", FORMGRADER_RELEASE, CHAPTER, "release",
                          "unrelease", "edition=en", "release").stdout)
    first, _, second = out
    assert first["success"], first
    assert "Releasing the pt_BR edition" in first["log"] and first["release_path"] == f"{LANG}/notebooks/{CHAPTER}", first
    # the record is read at each release (the server's config, read at its start, still says pt_BR)
    assert second["success"] and f"Releasing the English edition: notebooks/{CHAPTER}" in second["log"], second
    assert released.read_bytes() == en_nb
    # the stock command, the README's: Portuguese again
    _run(course, llm, "edition", LANG)
    res = _run(course, str(VENV_BIN / "nbgrader"), "release_assignment", CHAPTER, "--force")
    assert "Releasing the pt_BR edition" in res.stdout + res.stderr, res.stderr
    assert released.read_bytes() == pt_nb

    # a record that names no edition: nothing released, English neither
    (course / ".llm-course" / "edition").write_text("klingon\n")
    res = _run(course, str(VENV_BIN / "nbgrader"), "release_assignment", CHAPTER, "--force", check=False)
    assert res.returncode != 0 and "unknown edition 'klingon'" in res.stdout + res.stderr, res.stdout + res.stderr
    assert released.read_bytes() == pt_nb
    # generate_assignment writes English into notebooks/, never into the edition's release
    assert editions.release_directory(course, ["nbgrader", "generate_assignment", CHAPTER]) == "notebooks"
    (course / ".llm-course" / "edition").write_text(LANG + "\n")
    assert editions.release_directory(course, ["nbgrader", "release_assignment", CHAPTER]) == f"{LANG}/notebooks"


root_only = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("runuser"),
                               reason="creates a Unix account: run as root (CI does)")


@pytest.fixture(scope="module")
def student():
    name = f"lc{uuid.uuid4().hex[:6]}p"
    base = Path(tempfile.mkdtemp(prefix="llmc-edition-"))
    base.chmod(0o755)
    try:
        with student_accounts(base, [name]) as homes:
            yield base, name, homes[name]
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _as_student(user: str, home: Path, *args: str) -> subprocess.CompletedProcess:
    return run_as(user, home, str(VENV_BIN / "nbgrader"), *args)


@root_only
def test_portuguese_class_cycle(student):
    t_start = time.perf_counter()
    base, user, home = student
    exchange = base / "exchange"
    exchange.mkdir()
    exchange.chmod(0o755)
    course = _course(base, exchange)
    env = _env(course)
    llm, nbg = str(VENV_BIN / "llm-course"), str(VENV_BIN / "nbgrader")
    en_heading, pt_heading = _headings(course)
    timings: dict[str, float] = {}

    def instructor(label: str, *cmd: str) -> subprocess.CompletedProcess:
        t0 = time.perf_counter()
        res = _run(course, *cmd, env=env)
        timings[label] = round(time.perf_counter() - t0, 1)
        return res

    # The instructor, as README.pt_BR.md says: the class edition once, then register and release.
    instructor("edition", llm, "edition", LANG)
    instructor("register", llm, "register", CHAPTER)
    res = instructor("release", nbg, "release_assignment", CHAPTER)
    assert "Releasing the pt_BR edition" in res.stdout + res.stderr, res.stdout + res.stderr

    # The student: configure, fetch (the Portuguese notebook), answer, submit.
    cfg = home / ".jupyter"
    cfg.mkdir()
    shutil.chown(cfg, user, user)
    (cfg / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.course_id = {COURSE_ID!r}\nc.Exchange.root = {str(exchange)!r}\n")
    shutil.chown(cfg / "nbgrader_config.py", user, user)
    _as_student(user, home, "fetch_assignment", CHAPTER)
    fetched = home / CHAPTER / f"{CHAPTER}.ipynb"
    assert fetched.stat().st_uid != 0
    assert fetched.read_bytes() == (course / LANG / "notebooks" / CHAPTER / f"{CHAPTER}.ipynb").read_bytes()
    text = fetched.read_text()
    assert pt_heading in text and en_heading not in text, (en_heading, pt_heading)
    source = json.loads((course / "solutions" / CHAPTER / f"{CHAPTER}.ipynb").read_text())
    fetched.write_text(json.dumps(_fill(json.loads(text), source), indent=1))
    with submission_service(exchange):
        _as_student(user, home, "submit", CHAPTER)
    instructor("collect", nbg, "collect", CHAPTER)
    assert (course / "submitted" / user / CHAPTER / f"{CHAPTER}.ipynb").is_file()

    # Grading: one gradebook, the English source; the Portuguese solution gets every autograded point.
    res = instructor("autograde", llm, "autograde", CHAPTER, "--jobs", "1")
    assert "1/1 submissions" in res.stdout, res.stdout + res.stderr
    auto_points = sum(float(c["metadata"]["nbgrader"].get("points", 0)) for c in source["cells"]
                      if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code")
    scores = classroom.gradebook_scores(classroom.db_url(course), CHAPTER)
    assert scores[user]["score"] == auto_points, (scores, auto_points)
    graded = (course / "autograded" / user / CHAPTER / f"{CHAPTER}.ipynb").read_text()
    assert pt_heading in graded and en_heading not in graded

    # Feedback, generated, released and fetched: Portuguese.
    instructor("generate_feedback", nbg, "generate_feedback", CHAPTER)
    instructor("release_feedback", nbg, "release_feedback", CHAPTER)
    _as_student(user, home, "fetch_feedback", CHAPTER)
    got = sorted((home / CHAPTER / "feedback").glob(f"*/{CHAPTER}.html"))
    assert len(got) == 1, got
    page = html.unescape(got[0].read_text(encoding="utf-8"))
    assert pt_heading in page and en_heading not in page, (en_heading, pt_heading)
    # the notebook's score line, whatever its label's language: "<label>: 7.0 / 9.0" (stock nbgrader: "Score: 7")
    assert re.search(rf"\w+: {auto_points:g}(?:\.0+)?(?![\d.])", page), re.findall(r"\w+: [\d.]+(?: / [\d.]+)?", page)[:5]
    print(f"Portuguese class cycle: {time.perf_counter() - t_start:.0f} s; steps: {timings}")
