"""Issue 37: the README's instructor path, followed literally, with nothing set by hand.

One class cycle with real Unix accounts (skipped unless root), on the small assignment of
``tests/_classroom.py`` whose setup cell loads a model (``load_model("bert-base-uncased")``) and
whose intro carries the Colab badge: A solved, B blank, C solved but late. The instructor's steps
are the README's ("A class, step by step"), with **no** ``LLM_COURSE_OFFLINE`` / ``HF_HUB_OFFLINE``
in the grader's environment:

  students imported with names (README command), register --duedate, release; students fetch,
  run the README's ``nbgrader validate`` path, submit; C submits after the due date; collect;
  ``llm-course autograde --jobs 2``; ``make grade-lab``: Formgrader shows names, no "Generate"
  button, C marked late, the badge as text, no "config is not serializable"; the written answers
  graded by hand through Formgrader's API after autograding; export: A full, B 0, C 0;
  ``generate_feedback``: no ``display_data_priority`` warning, no hidden-test marker in B's
  traceback; ``llm-course autograde NN --student C`` re-grades C alone; export again: C still 0.

Faster checks beside it: the statement that raised in a reference run's setup cell is quoted,
``make install PYTHON=...`` over an existing ``.venv`` says what to do, the Shakespeare GPT-2 build
reports progress, grades are git-ignored, and ``llm-course export-script`` is not ``nbgrader export``.
"""
from __future__ import annotations

import copy
import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

import _classroom
from _classroom import AID, MAX_AUTO, MAX_TOTAL, RIGHT, answered, make_course, student_accounts, submission_service
from course_tools import classroom
from course_utils.paths import repo_root

ROOT = repo_root()
README = (ROOT / "README.md").read_text()
VENV_BIN = Path(sys.executable).parent
RUNUSER = shutil.which("runuser") or "/usr/sbin/runuser"
COURSE_ID = "llm-course"
OFFLINE_VARS = ("LLM_COURSE_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
BADGE = ("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
         "(https://colab.research.google.com/github/OWNER/NAME/blob/main/notebooks/ex01/ex01.ipynb)")


def _readme_command(pattern: str) -> str:
    """The first command of the README matching ``pattern`` (a regex), as written there."""
    m = re.search(pattern, README)
    assert m, f"the README has no command matching {pattern!r}"
    return m.group(0)


# --------------------------------------------------------------------------- fast checks

def test_reference_failure_quotes_the_statement_that_raised(tmp_path):
    """(1) The message names the statement that raised, not the cell's first line."""
    import nbformat
    from nbclient import NotebookClient

    src = "import os\nx = 1\nraise RuntimeError(\n    'no hub here')\ny = 2\n"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src)])
    nb.cells[0].metadata["nbgrader"] = {"grade_id": "load_model", "grade": False, "solution": False}
    NotebookClient(nb, kernel_name="python3", allow_errors=True, timeout=60).execute(cwd=str(tmp_path))
    found = classroom.setup_cell_failures(nb)
    assert len(found) == 1 and "`raise RuntimeError( 'no hub here')` raised RuntimeError" in found[0], found
    assert "`import os`" not in found[0]
    # the statement is located from IPython's traceback: a statement inside a function the cell calls
    assert classroom.raising_statement("a = 1\nb = f(\n  2)\n", ["Cell In[3], line 3\n----> 3   2)"]) == "b = f( 2)"


def test_make_install_with_another_python_says_what_to_do(tmp_path):
    """(2) ``make install PYTHON=...`` over an environment made by another interpreter stops and says
    to run ``make clean`` first (before, it did nothing: the environment exists)."""
    # "another interpreter": a copy of this one (a venv made with --copies: its python is a file of
    # its own, not a link), so the test runs on any machine, whichever interpreter made .venv
    other_env = tmp_path / "other-python"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", "--copies", str(other_env)], check=True)
    other = str(other_env / "bin" / "python")
    assert os.path.realpath(other) != os.path.realpath(sys._base_executable)
    venv = tmp_path / "venv"
    subprocess.run([sys._base_executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (venv / ".course-installed").touch()       # installed, as far as make can tell
    t0 = time.perf_counter()
    res = subprocess.run(["make", "-C", str(ROOT), "install", f"VENV={venv}", f"PYTHON={other}"],
                         capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - t0
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "make clean" in out and f"PYTHON={other}" in out and str(venv) in out, out
    assert "prefetch" not in res.stdout and took < 30, (took, out)   # stopped before anything ran
    same = subprocess.run(["make", "-s", "-C", str(ROOT), "venv-check", f"VENV={venv}",
                           f"PYTHON={sys._base_executable}"], capture_output=True, text=True, timeout=60)
    assert same.returncode == 0, same.stdout + same.stderr
    assert re.search(r"make clean && make install PYTHON=/usr/bin/python3", README), "the README does not say it"


def test_first_install_with_a_private_interpreter_warns(tmp_path):
    """(2) The first ``make install`` (no environment yet) already says when students could not run
    the environment it is about to make (an instructor following the README met it only on a rerun)."""
    from course_tools.venv_check import check

    private = tmp_path / "home"
    (private / "bin").mkdir(parents=True)
    private.chmod(0o700)
    status, lines = check(tmp_path / "no-venv-yet", "file", private / "bin" / "python3", note=True)
    assert status == 0 and any("cannot enter" in ln for ln in lines) and any("PYTHON=/usr/bin/python3" in ln for ln in lines), lines
    status, lines = check(tmp_path / "no-venv-yet", "file", private / "bin" / "python3", note=False)
    assert status == 0 and lines == []           # make lab: no note


def test_shakespeare_build_reports_progress(tmp_path):
    """(7) The long build prints its phases and steps (``make install`` was silent for 13 minutes)."""
    env = {k: v for k, v in os.environ.items() if k != "LLM_COURSE_CACHE"}
    env.update(LLM_COURSE_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    code = ("from course_utils import shakespeare_gpt2 as s\n"
            "import time\nt = time.time()\n"
            "s.build(verbose=lambda line: print(f'{time.time() - t:.2f} {line}', flush=True), steps=3)\n")
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    lines = res.stdout.splitlines()
    text = "\n".join(lines)
    assert "building the course's Shakespeare GPT-2" in lines[0], text
    assert "tokenizer ready" in text and "done in" in lines[-1], text
    steps = [ln for ln in lines if re.search(r"step \d+/3, loss [\d.]+, \d+ s elapsed, about \d+ s left", ln)]
    assert len(steps) == 3, text
    assert re.search(r"Measured[^.]*make install`\s+[\d.]+ min[^)]*Shakespeare\s+GPT-2\s+\d+ s", README), "no measured time"


def test_grades_stay_out_of_git():
    """(8) ``nbgrader export --to grades.csv`` (the README's command) and nbgrader's outputs are ignored."""
    export = _readme_command(r"nbgrader export --to \S+?(?=`)")
    target = export.split("--to ")[1]
    paths = [target, "gradebook.db", "gradebook.db-journal", "autograded/s/ex01/ex01.ipynb",
             "submitted/s/ex01/ex01.ipynb", "feedback/s/ex01/ex01.html", ".llm-course/references/x.json",
             "nbgrader.log", "grades-2026.csv"]
    res = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index", *paths], capture_output=True, text=True)
    ignored = set(res.stdout.split())
    assert ignored == set(paths), f"not ignored: {sorted(set(paths) - ignored)}"


def test_export_script_is_not_nbgrader_export():
    """(8) ``llm-course export-script`` writes chapter scripts; its help sends grades to ``nbgrader export``."""
    res = subprocess.run([str(VENV_BIN / "llm-course"), "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "export-script" in res.stdout and "nbgrader export" in res.stdout, res.stdout
    sub = subprocess.run([str(VENV_BIN / "llm-course"), "export", "--help"], capture_output=True, text=True, timeout=60)
    assert "export-script" in sub.stdout, sub.stdout   # the old name still works, under the new one
    assert "`llm-course export`" not in README.replace("`llm-course export-script`", "")


def test_students_validate_path_is_where_fetch_puts_it():
    """(8) The students' README validates the fetched notebook, ``NN/NN.ipynb`` (not ``notebooks/...``)."""
    students = README.split("## For students", 1)[1].split("## For instructors", 1)[0]
    cmd = re.search(r"nbgrader validate (\S+?)`", students)
    assert cmd and cmd.group(1) == "NN/NN.ipynb", cmd and cmd.group(0)


# --------------------------------------------------------------------------- the class cycle

root_only = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or not shutil.which("runuser"),
                               reason="creates Unix accounts: run as root (CI does)")
webdriver = None
try:
    from selenium import webdriver  # type: ignore[no-redef]
except ImportError:  # pragma: no cover
    pass
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")
TOKEN = "instructor-path-" + uuid.uuid4().hex[:8]


def _source() -> dict:
    """The small assignment, with a model loaded in its setup cell and the Colab badge in its intro."""
    src = copy.deepcopy(_classroom.SOURCE)
    for c in src["cells"]:
        gid = c["metadata"]["nbgrader"]["grade_id"]
        if gid == "setup":
            c["source"] = ("import course_utils\nfrom course_utils.models import load_model\n"
                           "model, tokenizer = load_model('bert-base-uncased', verbose=False)")
        elif gid == "intro":
            c["source"] = BADGE + "\n\n" + c["source"]
    return src


@pytest.fixture(scope="module")
def accounts():
    tag = uuid.uuid4().hex[:6]
    base = Path(tempfile.mkdtemp(prefix="llmc-path-"))
    base.chmod(0o755)
    names = {"A": f"lc{tag}a", "B": f"lc{tag}b", "C": f"lc{tag}c"}
    try:
        with student_accounts(base, names.values()) as homes:
            yield base, names, homes
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _as_student(user: str, home: Path, *args: str) -> subprocess.CompletedProcess:
    # what a student of the shared class environment has (README: /etc/profile.d/llm-course.sh)
    env = {"HOME": str(home), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8", "HF_HUB_OFFLINE": "1",
           "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin"}
    res = subprocess.run([RUNUSER, "-u", user, "--", str(VENV_BIN / "nbgrader"), *args], cwd=home, env=env,
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, f"{user}: nbgrader {' '.join(args)} exited {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res


def _write_as(user: str, path: Path, text: str) -> None:
    path.write_text(text)
    shutil.chown(path, user, user)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _api(base: str, path: str, method: str = "GET", body: dict | None = None) -> object:
    req = urllib.request.Request(f"{base}{path}", method=method, headers={"Authorization": f"token {TOKEN}"},
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read().decode())


def _export(course: Path, env: dict[str, str]) -> dict[str, dict[str, str]]:
    out = course / "grades.csv"
    out.unlink(missing_ok=True)
    res = subprocess.run([str(VENV_BIN / "nbgrader"), "export", "--to", str(out)], cwd=course, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    return {r["student_id"]: r for r in csv.DictReader(out.open())}


@root_only
@pytest.mark.skipif(not (webdriver and CHROMIUM and DRIVER and shutil.which("make")),
                    reason="needs chromium, chromedriver, selenium and make")
def test_class_cycle_as_the_readme_says(accounts):
    t_start = time.perf_counter()
    base, names, homes = accounts
    A, B, C = names["A"], names["B"], names["C"]
    exchange = base / "exchange"
    exchange.mkdir()
    exchange.chmod(0o755)       # README: the instructor's exchange root; students submit through the service
    course = make_course(base / "course")
    (course / "solutions" / AID / f"{AID}.ipynb").write_text(json.dumps(_source(), indent=1))
    (course / "nbgrader_config.py").write_text((course / "nbgrader_config.py").read_text()
                                               + f"\nc.Exchange.root = {str(exchange)!r}\n")
    # The instructor's shell: nothing set by hand (no offline variable), the README's PATH line.
    env = {k: v for k, v in classroom.nbgrader_env(course).items() if k not in OFFLINE_VARS}
    timings: dict[str, float] = {}

    def run(label: str, *cmd: str, timeout: int = 600) -> subprocess.CompletedProcess:
        t0 = time.perf_counter()
        res = subprocess.run(list(cmd), cwd=course, env=env, capture_output=True, text=True, timeout=timeout)
        timings[label] = round(time.perf_counter() - t0, 1)
        assert res.returncode == 0, f"{label}: {' '.join(cmd)} exited {res.returncode}\n{res.stdout}\n{res.stderr}"
        return res

    llm, nbg = str(VENV_BIN / "llm-course"), str(VENV_BIN / "nbgrader")
    classroom.nbgrader(["generate_assignment", AID, "--no-db"], course)   # the committed release, as notebooks/ ships
    # (5) students with their names: the README's command, with the file it describes
    imp = _readme_command(r"nbgrader db student import \S+?(?=`)")
    (course / imp.split()[-1]).write_text("id,first_name,last_name,email\n" + "".join(
        f"{u},Ada{k},Student{k},\n" for k, u in names.items()))
    run("students", *imp.replace("nbgrader", nbg, 1).split())
    run("register", llm, "register", AID, "--duedate", "2099-01-01 00:00:00 UTC")
    run("release", nbg, "release_assignment", AID)

    for user, home in homes.items():
        cfg = home / ".jupyter"
        cfg.mkdir()
        shutil.chown(cfg, user, user)
        _write_as(user, cfg / "nbgrader_config.py",
                  f"c = get_config()\nc.CourseDirectory.course_id = {COURSE_ID!r}\nc.Exchange.root = {str(exchange)!r}\n")

    def fetch(user: str) -> None:
        _as_student(user, homes[user], "fetch_assignment", AID)
        nb = homes[user] / AID / f"{AID}.ipynb"
        assert nb.is_file() and nb.stat().st_uid != 0
        if user != B:   # B hands in the notebook as released
            _write_as(user, nb, json.dumps(answered(json.loads(nb.read_text()), RIGHT), indent=1))

    with ThreadPoolExecutor(3) as pool:
        list(pool.map(fetch, homes))
    # (8) the students' README path to validate: where fetch put the notebook
    students = README.split("## For students", 1)[1].split("## For instructors", 1)[0]
    path = re.search(r"nbgrader validate (\S+?)`", students).group(1).replace("NN", AID)
    val = _as_student(A, homes[A], "validate", path)
    assert "Success! Your notebook passes all the tests." in val.stdout, val.stdout + val.stderr
    with submission_service(exchange):     # the README's `llm-course exchange serve`
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda u: _as_student(u, homes[u], "submit", AID), (A, B)))
        due = (datetime.now(timezone.utc) + timedelta(seconds=1)).replace(microsecond=0)
        time.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds()) + 0.2)
        run("due date", nbg, "db", "assignment", "add", AID, f"--duedate={due:%Y-%m-%d %H:%M:%S} UTC")
        _as_student(C, homes[C], "submit", AID)
    run("collect", nbg, "collect", AID)

    # (1) grading without any offline variable: the reference run and every kernel use the caches
    res = run("autograde --jobs 2", llm, "autograde", AID, "--jobs", "2")
    assert "3/3 submissions" in res.stdout, res.stdout + res.stderr
    url = classroom.db_url(course)
    scores = classroom.gradebook_scores(url, AID)
    assert scores[A]["score"] == MAX_AUTO and scores[B]["score"] == 0.0 and scores[C]["score"] == MAX_AUTO
    assert scores[C]["late_penalty"] == MAX_AUTO and scores[A]["late_penalty"] == 0

    # The grading server, as the README starts it.
    port = _free_port()
    runtime = Path(tempfile.mkdtemp(prefix="jrt-"))
    log = base / "grade-lab.log"
    args = f"--no-browser --port={port} --ServerApp.ip=127.0.0.1 --IdentityProvider.token={TOKEN}"
    server_env = dict(env, JUPYTER_RUNTIME_DIR=str(runtime))
    server_env.pop("LLM_COURSE_NBGRADER_ROOT", None)
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.Popen(["make", "-s", "-C", str(ROOT), "-o", "install", "grade-lab",
                                 f"VENV={VENV_BIN.parent}", f"COURSE_ROOT={course}", f"GRADE_LAB_ARGS={args}"],
                                env=server_env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
    fg = f"http://127.0.0.1:{port}"
    driver = None
    try:
        for _ in range(240):
            try:
                urllib.request.urlopen(f"{fg}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.5)
        timings["make grade-lab (server up)"] = round(time.perf_counter() - t0, 1)

        # (3) hand grading after autograde, through Formgrader's API: A and C get their written point
        t0 = time.perf_counter()
        for who in (A, C):
            sub = [s for s in _api(fg, f"/formgrader/api/submitted_notebooks/{AID}/{AID}") if s["student"] == who][0]
            grade = [g for g in _api(fg, f"/formgrader/api/grades?submission_id={sub['id']}") if g["name"] == "written"][0]
            _api(fg, f"/formgrader/api/grade/{grade['id']}", "PUT", {"manual_score": 1, "extra_credit": 0})
        timings["hand grading (2 answers, API)"] = round(time.perf_counter() - t0, 1)
        rows = _export(course, env)
        assert float(rows[A]["score"]) == MAX_TOTAL, rows[A]
        assert float(rows[B]["score"]) == 0.0, rows[B]
        assert float(rows[C]["raw_score"]) == MAX_TOTAL and float(rows[C]["score"]) == 0.0, rows[C]

        # Formgrader's data and pages
        subs = {s["student"]: s for s in _api(fg, f"/formgrader/api/submissions/{AID}")}
        assert subs[C].get("late") is True and subs[C]["score"] == 0.0, subs[C]
        assert not subs[A].get("late") and subs[A]["score"] == MAX_TOTAL, subs[A]
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as EC
        from selenium.webdriver.support.ui import WebDriverWait

        opts = Options()
        opts.binary_location = CHROMIUM
        for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"):
            opts.add_argument(a)
        driver = webdriver.Chrome(service=Service(DRIVER), options=opts)
        wait = WebDriverWait(driver, 60)
        driver.get(f"{fg}/formgrader/manage_assignments?token={TOKEN}")
        wait.until(EC.presence_of_element_located((By.XPATH, f"//td//a[text()='{AID}']")))
        row = driver.find_element(By.XPATH, f"//tr[.//a[text()='{AID}']]")
        assert row.find_elements(By.CSS_SELECTOR, "td.assign a") == [], "a Generate button is shown"
        assert f"llm-course register {AID}" in row.find_element(By.CSS_SELECTOR, "td.assign").text
        headers = [th.text for th in driver.find_elements(By.TAG_NAME, "th")]
        assert "Generate" not in headers, headers
        refused = driver.execute_async_script(
            "var done = arguments[arguments.length - 1];"
            f"$.post(base_url + '/formgrader/api/assignment/{AID}/assign').done(function (r) {{ done(r); }})"
            ".fail(function (x) { done('HTTP ' + x.status); });")
        assert '"success": false' in refused and "llm-course register" in refused, refused
        driver.get(f"{fg}/formgrader/manage_students?token={TOKEN}")
        wait.until(EC.presence_of_element_located((By.XPATH, f"//td[contains(., '{C}')]")))
        page = driver.find_element(By.TAG_NAME, "body").text
        assert "None, None" not in page and "StudentC, AdaC" in page, page[:2000]
        driver.get(f"{fg}/formgrader/manage_submissions/{AID}?token={TOKEN}")
        wait.until(lambda d: "/ 4" in d.find_element(By.XPATH, "//tr[td[contains(., 'StudentC')]]").text)
        c_row = driver.find_element(By.XPATH, f"//tr[td[contains(., 'StudentC')]]").text
        a_row = driver.find_element(By.XPATH, f"//tr[td[contains(., 'StudentA')]]").text
        assert "LATE" in c_row and "0 / 4" in c_row, c_row
        assert "LATE" not in a_row and "4 / 4" in a_row, a_row
        driver.get(f"{fg}/formgrader/submissions/{subs_nb_id(fg, C)}/?token={TOKEN}")
        wait.until(EC.presence_of_element_located((By.ID, "notebook-container")))
        banner = driver.find_elements(By.CSS_SELECTOR, ".llm-course-late")
        assert banner and "LATE" in banner[0].text and "0 / 4" in banner[0].text, [b.text for b in banner]
        broken = driver.execute_script("return Array.from(document.querySelectorAll('#notebook-container img'))"
                                       ".filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.outerHTML)")
        assert broken == [], broken
        assert "Open In Colab" in driver.find_element(By.ID, "notebook-container").text
    finally:
        if driver is not None:
            driver.quit()
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(runtime, ignore_errors=True)
    server_log = log.read_text()
    assert "not serializable" not in server_log, server_log[-3000:]

    # (6) feedback: no warning, no marker of the hidden region in B's traceback
    res = run("generate_feedback", nbg, "generate_feedback", AID)
    assert "display_data_priority" not in res.stdout + res.stderr, res.stderr[-2000:]
    fb = {u: (course / "feedback" / u / AID / f"{AID}.html").read_text() for u in homes}
    assert "NotImplementedError" in fb[B]
    for u, page in fb.items():
        assert "BEGIN HIDDEN TESTS" not in page and "hidden checks start here" not in page, u
    assert f"0 / {MAX_TOTAL:g}" in fb[C] or "Score: 0" in fb[C], fb[C][:500]

    # (4) one student re-graded after hand grading: exactly that one
    before = {u: (course / "autograded" / u / AID / f"{AID}.ipynb").stat().st_mtime_ns for u in homes}
    res = run("autograde --student C", llm, "autograde", AID, "--student", C)
    assert "1/1 submissions" in res.stdout, res.stdout
    after = {u: (course / "autograded" / u / AID / f"{AID}.ipynb").stat().st_mtime_ns for u in homes}
    assert after[A] == before[A] and after[B] == before[B], "--student re-graded other students"
    assert after[C] != before[C]
    rows = _export(course, env)
    assert float(rows[C]["score"]) == 0.0 and float(rows[A]["score"]) == MAX_TOTAL, (rows[C], rows[A])
    assert float(rows[B]["score"]) == 0.0
    print(f"instructor path: {time.perf_counter() - t_start:.0f} s; steps: {timings}")


def subs_nb_id(fg: str, student: str) -> str:
    return [s for s in _api(fg, f"/formgrader/api/submitted_notebooks/{AID}/{AID}") if s["student"] == student][0]["id"]
