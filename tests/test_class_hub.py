"""The class on a JupyterHub (``llm-course class-hub up``; README "Run the class on a JupyterHub").

One hub for the module, on loopback: an instructor owning a course root and two students, real
accounts logging in with their Unix passwords (PAM). Everything a person does here goes through the
hub with her own cookie: the student's server, the Assignments tab's endpoints (fetch, validate,
submit, fetch feedback), the instructor's Formgrader endpoints (collect, autograde, a hand grade,
feedback) — the ones the buttons call.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from _classroom import AID, MAX_AUTO, MAX_TOTAL, RIGHT, RUNUSER, VENV_BIN, answered
from _hub import class_hub
from course_utils.paths import repo_root

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="creates accounts and starts servers as them (root)")
# make test installs the proxy (npm ci --prefix hub) and .ci/run installs Node where it is missing
pytestmark = [root_only]
COURSE_ID = "llm-course"
PT_CHAPTER = "05_rope"


@pytest.fixture(scope="module")
def hub():
    base = Path(tempfile.mkdtemp(prefix="llmc-hub-"))
    base.chmod(0o755)
    try:
        with class_hub(base, n_students=4) as h:
            # chapter 05 in both editions as well (the Portuguese run: test_a_portuguese_student_in_a_browser)
            for rel in (f"solutions/{PT_CHAPTER}", f"notebooks/{PT_CHAPTER}", f"pt_BR/notebooks/{PT_CHAPTER}"):
                shutil.copytree(repo_root() / rel, h.course / rel)
            subprocess.run(["chown", "-R", f"{h.instructor}:{h.instructor}", str(h.course)], check=True)
            for u in [h.instructor, *h.students]:
                assert h.login(u).status_code == 302, h.log_text()
            h.start_server(h.instructor)
            # the instructor's first page: the server's own cookie (OAuth with the hub)
            assert h.get(h.instructor, f"/user/{h.instructor}/formgrader").status_code == 200, h.log_text()
            yield h
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _as(hub, user: str, *cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {"HOME": str(hub.homes[user]), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
           "PATH": f"{VENV_BIN}:/usr/local/bin:/usr/bin:/bin", "LLM_COURSE_NBGRADER_ROOT": str(hub.course)}
    return subprocess.run([RUNUSER, "-u", user, "--", *cmd], cwd=cwd or hub.homes[user], env=env,
                          capture_output=True, text=True, timeout=300)


def _xsrf(hub, user: str, server: str) -> dict[str, str]:
    s = hub.sessions[user]
    token = s.cookies.get("_xsrf", path=f"/user/{server}/") or s.cookies.get("_xsrf", path="/hub/") or ""
    return {"X-XSRFToken": token}


def _server_post(hub, user: str, path: str, **kw):
    return hub.sessions[user].post(f"{hub.url}/user/{user}{path}", headers=_xsrf(hub, user, user), timeout=300, **kw)


def _formgrader(hub, method: str, path: str, **kw):
    """One request to the instructor's Formgrader API through the hub, with her cookie; the reply
    must be 200 and, when it is an object, not say ``"success": false``."""
    inst = hub.instructor
    resp = hub.sessions[inst].request(method, f"{hub.url}/user/{inst}/formgrader/api{path}",
                                      headers=_xsrf(hub, inst, inst), timeout=900, **kw)
    out = resp.json() if resp.status_code == 200 else None
    assert out is not None and (not isinstance(out, dict) or out.get("success", True)), (
        f"{method} {path}: {resp.status_code} {resp.text[-3000:]}\n{hub.log_text()[-2000:]}")
    return out


def test_logins_are_the_machines_accounts(hub):
    """PAM: the account's own password logs in; a wrong one, or an account outside the class, does not."""
    s0 = hub.students[0]
    assert hub.login(s0, "not-" + hub.passwords[s0]).status_code == 403
    stranger = f"hx{hub.instructor[2:]}"
    subprocess.run(["useradd", "--no-create-home", stranger], check=True, capture_output=True)
    try:
        subprocess.run(["chpasswd"], input=f"{stranger}:Stranger-pw-1\n", text=True, check=True)
        assert hub.login(stranger, "Stranger-pw-1").status_code == 403   # in neither class group
    finally:
        subprocess.run(["userdel", stranger], capture_output=True)
    assert hub.login(s0).status_code == 302


def test_a_student_reaches_her_own_server_only(hub):
    """Each student's cookie reaches her server and nothing of anybody else's, nor the hub's admin API."""
    s0, s1 = hub.students[:2]
    hub.start_server(s0)
    hub.start_server(s1)
    assert hub.get(s0, f"/user/{s0}/lab").status_code == 200
    assert hub.get(s0, f"/user/{s0}/api/contents").status_code == 200
    # another student's server and files, the instructor's server and its Formgrader: refused
    for path in (f"/user/{s1}/api/contents", f"/user/{s1}/lab", f"/user/{hub.instructor}/formgrader",
                 f"/user/{hub.instructor}/formgrader/api/assignments",
                 f"/user/{hub.instructor}/api/contents/nbgrader_config.py"):
        r = hub.get(s0, path, allow_redirects=True)
        assert r.status_code == 403, f"{s0} -> {path}: {r.status_code}"
    # her own server has no Formgrader (the instructor's tool is not loaded there)
    assert hub.get(s0, f"/user/{s0}/formgrader").status_code == 404
    # the hub's API: her own user only; no list of users, no other server, no tokens for others, no admin
    assert hub.api(s0, "GET", f"/users/{s0}").status_code == 200
    assert hub.api(s0, "GET", "/users").status_code == 403
    assert hub.api(s0, "GET", f"/users/{s1}").status_code in (403, 404)
    assert hub.api(s0, "POST", f"/users/{s1}/server").status_code in (403, 404)
    assert hub.api(s0, "DELETE", f"/users/{s1}/server").status_code in (403, 404)
    assert hub.api(s0, "POST", f"/users/{s1}/tokens", json={}).status_code in (403, 404)
    assert hub.api(s0, "GET", "/services").status_code in (200, 403)
    assert hub.api(s0, "GET", "/proxy").status_code == 403
    assert hub.get(s0, "/hub/admin").status_code == 403
    # and on the machine (her terminal): the course root and the other student's home are closed
    for path in (hub.course / "nbgrader_config.py", hub.homes[s1]):
        r = _as(hub, s0, "ls", str(path))
        assert r.returncode != 0, f"{s0} can list {path}"


def test_the_class_cycle_through_the_tabs_endpoints(hub):
    """Release (the instructor's terminal) → fetch, validate, submit (the Assignments tab) → a late
    submission → collect, autograde, a hand grade, feedback (Formgrader) → fetch feedback (the tab)."""
    s0, s1 = hub.students[:2]
    _release_once(hub)
    for u in (s0, s1):
        hub.start_server(u)
        hub.get(u, f"/user/{u}/lab")
        listed = hub.get(u, f"/user/{u}/assignments?course_id={COURSE_ID}").json()
        assert listed["success"] and [a["assignment_id"] for a in listed["value"]] == [AID], listed
        r = _server_post(hub, u, "/assignments/fetch", data={"course_id": COURSE_ID, "assignment_id": AID})
        assert r.status_code == 200, r.text
        nb = hub.homes[u] / AID / f"{AID}.ipynb"
        assert nb.is_file() and nb.stat().st_uid != 0
    # s0 answers in her notebook (the contents API her editor saves through) and validates it
    nb_path = f"{AID}/{AID}.ipynb"
    model = hub.get(s0, f"/user/{s0}/api/contents/{nb_path}").json()
    content = answered(model["content"], RIGHT)
    r = hub.sessions[s0].put(f"{hub.url}/user/{s0}/api/contents/{nb_path}", headers=_xsrf(hub, s0, s0),
                             json={"type": "notebook", "format": "json", "content": content}, timeout=60)
    assert r.status_code == 200, r.text
    val = _server_post(hub, s0, "/assignments/validate", data={"path": nb_path}).json()
    assert val["success"] and not val["value"], val          # nothing failed, nothing changed
    blank = _server_post(hub, s1, "/assignments/validate", data={"path": nb_path}).json()
    assert blank["success"] and blank["value"].get("failed"), blank      # the unanswered notebook fails
    r = _server_post(hub, s0, "/assignments/submit", data={"course_id": COURSE_ID, "assignment_id": AID})
    assert r.status_code == 200 and '"success": true' in r.text.replace("'", '"'), r.text
    # the due date passes; s1 hands in the notebook as released: late and blank
    _pass_due_date(hub)
    r = _server_post(hub, s1, "/assignments/submit", data={"course_id": COURSE_ID, "assignment_id": AID})
    assert r.status_code == 200, r.text

    # The instructor's Formgrader, through the hub with her cookie.
    out = _formgrader(hub, "POST", f"/assignment/{AID}/collect")
    assert out["success"], out
    for u in (s0, s1):
        out = _formgrader(hub, "POST", f"/submission/{AID}/{u}/autograde")
        assert out["success"], str(out.get("log", out))[-5000:]
    subs = {s["student"]: s for s in _formgrader(hub, "GET", f"/submissions/{AID}")}
    assert subs[s0]["score"] == MAX_AUTO and subs[s1]["score"] == 0, subs
    # a hand grade of s0's written answer
    notebook = _formgrader(hub, "GET", f"/notebooks/{AID}")[0]["name"]
    grades = [g for g in _formgrader(hub, "GET", f"/grades?submission_id={_submitted_notebook_id(hub, AID, notebook, s0)}")
              if g["name"] == "written"]
    assert len(grades) == 1
    _formgrader(hub, "PUT", f"/grade/{grades[0]['id']}", json={"manual_score": 1})
    for path in (f"/assignment/{AID}/generate_feedback", f"/assignment/{AID}/release_feedback"):
        assert _formgrader(hub, "POST", path)["success"]
    # the student fetches her feedback in the tab and sees her score
    r = _server_post(hub, s0, "/assignments/fetch_feedback", data={"course_id": COURSE_ID, "assignment_id": AID})
    assert r.status_code == 200, r.text
    html = list((hub.homes[s0] / AID / "feedback").rglob("*.html"))
    assert html, "no feedback in the student's folder"
    text = html[0].read_text()
    assert "4.0" in text and "/ 4.0" in text or "4 / 4" in text, text[:2000]


def _submitted_notebook_id(hub, aid: str, notebook: str, student: str) -> str:
    for n in _formgrader(hub, "GET", f"/submitted_notebooks/{aid}/{notebook}"):
        if n["student"] == student:
            return n["id"]
    raise AssertionError(f"no submitted notebook {notebook} of {student}")


# ---------------------------------------------------------------------------------------------
# The same cycle in a real browser: Chromium logs in at the hub's login page, opens the
# Assignments tab from JupyterLab's Nbgrader menu, clicks Fetch, types the answer into the
# notebook and saves it, clicks Validate and Submit; after the instructor's grading, clicks
# Fetch Feedback and opens the feedback page. A screenshot of every step is kept in
# test-artifacts/class-hub/ when the test fails (CI keeps that folder).
# ---------------------------------------------------------------------------------------------
ARTIFACTS = Path(os.environ.get("LLM_COURSE_ARTIFACTS", Path(__file__).resolve().parent.parent / "test-artifacts"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def _release_once(hub) -> None:
    if hub.released:
        return
    # the class roster first (README: collect takes only students of the gradebook's roster)
    roster = hub.course / "students.csv"
    roster.write_text("id,first_name,last_name,email\n" + "".join(f"{u},Ada,Student,\n" for u in hub.students))
    shutil.chown(roster, hub.instructor, hub.instructor)
    for cmd in (["nbgrader", "db", "student", "import", str(roster)],
                ["nbgrader", "generate_assignment", AID, "--no-db", "--force"],
                ["llm-course", "register", AID, "--duedate", "2099-01-01 00:00:00 UTC"],
                ["nbgrader", "release_assignment", AID]):
        r = _as(hub, hub.instructor, *cmd, cwd=hub.course)
        assert r.returncode == 0, f"{cmd}: {r.stdout}\n{r.stderr}"
    hub.released = True


def _chromium():
    """Headless Chromium (Debian's, through chromium-driver)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


def _clickable(wait, path: str):
    """The element at XPath ``path`` once it can be clicked."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    return wait.until(EC.element_to_be_clickable((By.XPATH, path)))


def _open_assignments(d, wait) -> None:
    """JupyterLab's Nbgrader menu → Assignment List (the Assignments tab)."""
    from selenium.webdriver.common.by import By

    [m for m in d.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item") if m.text == "Nbgrader"][0].click()
    _clickable(wait, "//li[contains(@class,'lm-Menu-item')][.//div[text()='Assignment List']]").click()


def _formgrader_tab_is_refused(d, wait, hub) -> None:
    """JupyterLab's Nbgrader → Formgrader opens a tab that frames Formgrader's page, and the hub
    refuses it: JupyterHub's single-user servers send ``Content-Security-Policy: frame-ancestors
    'none'`` (on one origin, a page of another user's server could otherwise frame the instructor's
    Formgrader; nbgrader #1870 and #1947, JupyterHub's "mitigating same-origin deployments").
    So the README sends instructors to Formgrader's own page, ``/user/<name>/formgrader``."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    inst = hub.instructor
    [m for m in d.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item") if m.text == "Nbgrader"][0].click()
    _clickable(wait, "//li[contains(@class,'lm-Menu-item')][.//div[text()='Formgrader']]").click()
    frame = wait.until(EC.presence_of_element_located((By.CSS_SELECTOR, "#formgrader-iframe iframe")))
    assert frame.get_attribute("src") == f"{hub.url}/user/{inst}/formgrader", frame.get_attribute("src")
    d.switch_to.frame(frame)
    try:   # Chromium's page for a refused frame, never Formgrader's table
        wait.until(lambda drv: drv.execute_script("return document.location.href").startswith("chrome-error:"))
        assert not d.find_elements(By.ID, "main-table")
    finally:
        d.switch_to.default_content()
    headers = hub.get(inst, f"/user/{inst}/formgrader/manage_assignments").headers
    assert headers.get("Content-Security-Policy") == "frame-ancestors 'none'", dict(headers)


class Steps:
    """Screenshots of each step of a browser run; kept in ARTIFACTS only when the run fails."""

    def __init__(self, driver, name: str):
        self.driver, self.dir, self.n = driver, Path(tempfile.mkdtemp(prefix=f"shots-{name}-")), 0
        self.name = name

    def shot(self, what: str) -> None:
        self.n += 1
        self.driver.save_screenshot(str(self.dir / f"{self.n:02d}-{what}.png"))

    def keep(self) -> Path:
        dest = ARTIFACTS / "class-hub" / self.name
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self.dir, dest)
        return dest


def _browser_login(d, wait, hub, user: str) -> None:
    """The hub's login page (PAM), then wait for her JupyterLab."""
    from selenium.webdriver.common.by import By

    d.get(f"{hub.url}/hub/logout")       # whoever was logged in before, in this browser
    d.delete_all_cookies()
    d.get(f"{hub.url}/hub/login")
    d.find_element(By.ID, "username_input").send_keys(user)
    d.find_element(By.ID, "password_input").send_keys(hub.passwords[user])
    d.find_element(By.ID, "login_submit").click()
    wait.until(lambda drv: "/lab" in drv.current_url and drv.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item"))


def _set_due(hub, due: datetime) -> None:
    """The instructor sets ex01's due date in her terminal (README: `nbgrader db assignment add`)."""
    r = _as(hub, hub.instructor, "nbgrader", "db", "assignment", "add", AID, f"--duedate={due:%Y-%m-%d %H:%M:%S} UTC",
            cwd=hub.course)
    assert r.returncode == 0, r.stderr


def _pass_due_date(hub) -> None:
    """ex01's due date set one second ahead, then waited out: what is submitted from now on is late."""
    due = (datetime.now(timezone.utc) + timedelta(seconds=1)).replace(microsecond=0)
    _set_due(hub, due)
    time.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds()) + 0.2)


def _formgrader_button(d, wait, steps, row_xpath: str, column: str, expect: str) -> str:
    """Click the icon in ``column`` of the Formgrader table row ``row_xpath``, wait for the success
    dialog (it says ``expect``), close it with its OK button and return its text."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    _clickable(wait, f"{row_xpath}//td[contains(@class,'{column}')]/a").click()
    modal = wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, ".modal.in, .modal.show, #success-modal, #error-modal")))
    wait.until(lambda drv: modal.find_element(By.CSS_SELECTOR, ".modal-body").text.strip())
    text = modal.text
    steps.shot(column)
    assert expect in text, text[-3000:]
    modal.find_element(By.CSS_SELECTOR, ".modal-footer button").click()
    wait.until(EC.invisibility_of_element(modal))
    return text


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="needs chromium and chromium-driver (.ci/run installs them)")
def test_the_class_cycle_in_a_browser(hub):
    """Every click of the cycle in Chromium. A student logs in, opens the Assignments tab, fetches
    ex01, types her answers, Validate, Submit; the instructor logs in, finds JupyterLab's Formgrader
    tab refused by the hub, opens Formgrader's own page and sets ex01's due date in its edit dialog to
    a second after; a second student fetches and submits right answers late; the instructor, in
    Formgrader, collects, autogrades both, grades the
    written answer by hand, generates and releases feedback; the first student clicks Fetch Feedback
    and reads her score, the late one reads hers: 0, her 3 points taken by nbgrader_config.py's "zero"
    late penalty, which the page names."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    _release_once(hub)
    inst, student, late = hub.instructor, hub.students[2], hub.students[3]
    _set_due(hub, datetime(2099, 1, 1, tzinfo=timezone.utc))   # on time, whatever ran before in this module
    d = _chromium()
    steps = Steps(d, "en")
    wait = WebDriverWait(d, 300, ignored_exceptions=(StaleElementReferenceException,))   # JupyterLab re-renders

    def feedback_page(user: str) -> str:
        """Fetch Feedback in the tab, then open the feedback page; its text."""
        d.refresh()
        wait.until(lambda drv: drv.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item"))
        _open_assignments(d, wait)
        _clickable(wait, "//*[@id='submitted_assignments_list']//button[text()='Fetch Feedback']").click()
        wait.until(lambda _: list((hub.homes[user] / AID / "feedback").rglob("*.html")))
        html = next((hub.homes[user] / AID / "feedback").rglob("*.html"))
        d.get(f"{hub.url}/user/{user}/files/{html.relative_to(hub.homes[user]).as_posix()}")
        wait.until(lambda drv: "Score" in drv.find_element(By.TAG_NAME, "body").text)
        steps.shot(f"feedback-{user}")
        return d.find_element(By.TAG_NAME, "body").text

    try:
        d.get(f"{hub.url}/hub/login")
        steps.shot("login")
        _browser_login(d, wait, hub, student)
        steps.shot("lab")
        # the student's Nbgrader menu: the Assignments tab only (no Formgrader, no course list)
        [m for m in d.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item") if m.text == "Nbgrader"][0].click()
        entries = [e.text for e in d.find_elements(By.CSS_SELECTOR, ".lm-Menu-item") if e.text]
        assert entries == ["Assignment List"], entries
        # the menu is open: its one entry opens the tab (closing and reopening it races under load)
        _clickable(wait, "//li[contains(@class,'lm-Menu-item')][.//div[text()='Assignment List']]").click()
        _clickable(wait, "//*[@id='released_assignments_list']//div[contains(@class,'list_item')][.//span[text()='ex01']]"
              "//button[text()='Fetch']").click()
        _clickable(wait, "//*[@id='fetched_assignments_list']//button[text()='Submit']")
        steps.shot("fetched")
        _clickable(wait, "//*[@id='fetched_assignments_list']//a[contains(@class,'assignment-notebooks-link')]").click()
        _clickable(wait, "//*[@id='fetched_assignments_list']//div[contains(@class,'nested_list_item')]//a").click()
        cell = wait.until(lambda drv: next((c for c in drv.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-CodeCell")
                                            if "YOUR CODE HERE" in c.text), None))
        cell.find_element(By.CSS_SELECTOR, ".cm-content").click()
        ActionChains(d).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).perform()
        ActionChains(d).send_keys("def double(x): return 2 * x").perform()
        # the written answer: a Markdown cell, opened for editing with a double click
        md = next(c for c in d.find_elements(By.CSS_SELECTOR, ".jp-Notebook .jp-MarkdownCell") if "YOUR ANSWER HERE" in c.text)
        ActionChains(d).double_click(md).perform()
        wait.until(EC.element_to_be_clickable(
            (By.CSS_SELECTOR, ".jp-Notebook .jp-MarkdownCell:not(.jp-mod-rendered) .cm-content"))).click()
        ActionChains(d).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL).perform()
        ActionChains(d).send_keys("Because 2x = x + x.").key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
        ActionChains(d).key_down(Keys.CONTROL).send_keys("s").key_up(Keys.CONTROL).perform()
        nb_file = hub.homes[student] / AID / f"{AID}.ipynb"
        wait.until(lambda _: "return 2 * x" in nb_file.read_text() and "Because 2x" in nb_file.read_text())
        steps.shot("answered")
        # back to the Assignments tab: Validate, then Submit
        _clickable(wait, "//li[contains(@class,'lm-TabBar-tab')][.//div[text()='Assignments']]").click()
        _clickable(wait, "//*[@id='fetched_assignments_list']//button[text()='Validate']").click()
        dialog = wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, ".jp-Dialog-content")))
        steps.shot("validated")
        assert "Success! Your notebook passes all the tests." in dialog.text, dialog.text
        dialog.find_element(By.CSS_SELECTOR, ".jp-Dialog-footer button").click()
        _clickable(wait, "//*[@id='fetched_assignments_list']//button[text()='Submit']").click()
        wait.until(lambda drv: drv.find_elements(By.XPATH, "//*[@id='submitted_assignments_list']"
                                                            "//div[contains(@class,'list_item')][.//span[text()='ex01']]"))
        steps.shot("submitted")

        # the instructor: JupyterLab's Formgrader tab is refused by the hub (see the helper), so she
        # opens Formgrader's own page, and edits ex01's due date (the pencil icon's dialog) to a
        # second after that submission: what is submitted from now on is late
        due = (datetime.now(timezone.utc) + timedelta(seconds=1)).replace(microsecond=0)
        _browser_login(d, wait, hub, inst)
        _formgrader_tab_is_refused(d, wait, hub)
        steps.shot("formgrader-tab-refused")
        d.get(f"{hub.url}/user/{inst}/formgrader")
        row = "//tbody[@id='main-table']//tr[.//td[contains(@class,'name')][contains(., 'ex01')]]"
        _clickable(wait, f"{row}//td[contains(@class,'edit')]/a").click()
        dialog = wait.until(EC.visibility_of_element_located((By.ID, "edit-assignment-modal")))
        # a datetime-local field: its typed form depends on the browser's locale, its value does not
        d.execute_script("arguments[0].value = arguments[1]", dialog.find_element(By.CSS_SELECTOR, "input.modal-duedate"),
                         due.strftime("%Y-%m-%dT%H:%M:%S"))
        tz = dialog.find_element(By.CSS_SELECTOR, "input.modal-timezone")
        tz.clear()
        tz.send_keys("+0000")
        steps.shot("due-date")
        dialog.find_element(By.CSS_SELECTOR, "button.save").click()
        wait.until(EC.invisibility_of_element(dialog))
        steps.shot("due-date-saved")
        saved = _formgrader(hub, "GET", f"/assignment/{AID}")   # what the gradebook now holds
        assert saved["duedate"] == due.replace(tzinfo=None).isoformat(), saved
        time.sleep(max(0.0, (due - datetime.now(timezone.utc)).total_seconds()) + 0.2)

        # a second student fetches and submits the notebook as released: late
        hub.login(late)
        hub.start_server(late)
        _browser_login(d, wait, hub, late)
        _open_assignments(d, wait)
        _clickable(wait, "//*[@id='released_assignments_list']//div[contains(@class,'list_item')][.//span[text()='ex01']]"
              "//button[text()='Fetch']").click()
        submit = _clickable(wait, "//*[@id='fetched_assignments_list']//button[text()='Submit']")
        # right answers (saved through the contents API her editor saves through): late, so the penalty shows
        nb_path = f"{AID}/{AID}.ipynb"
        hub.get(late, f"/user/{late}/lab")        # her session's cookie for her server (the hub's OAuth)
        model = hub.get(late, f"/user/{late}/api/contents/{nb_path}").json()
        r = hub.sessions[late].put(f"{hub.url}/user/{late}/api/contents/{nb_path}", headers=_xsrf(hub, late, late),
                                   json={"type": "notebook", "format": "json", "content": answered(model["content"], RIGHT)},
                                   timeout=60)
        assert r.status_code == 200, r.text
        submit.click()
        wait.until(lambda drv: drv.find_elements(By.XPATH, "//*[@id='submitted_assignments_list']"
                                                            "//div[contains(@class,'list_item')][.//span[text()='ex01']]"))
        steps.shot("submitted-late")

        # the instructor, in Formgrader's page
        _browser_login(d, wait, hub, inst)
        d.get(f"{hub.url}/user/{inst}/formgrader")
        wait.until(EC.presence_of_element_located((By.XPATH, f"{row}//td[contains(@class,'collect')]/a")))
        steps.shot("formgrader")
        _formgrader_button(d, wait, steps, row, "collect", "Successfully collected submissions of 'ex01'")
        for u in (student, late):
            assert (hub.course / "submitted" / u / AID).is_dir(), u
        _clickable(wait, f"{row}//td[contains(@class,'num-submissions')]/a").click()
        for u in (student, late):
            sub = f"//tbody[@id='main-table']//tr[.//td[contains(@class,'student-id')][text()='{u}']]"
            _formgrader_button(d, wait, steps, sub, "autograde", f"Successfully autograded 'ex01' for student '{u}'")
        scores = {u: d.find_element(By.XPATH, f"//tbody[@id='main-table']//tr[.//td[contains(@class,'student-id')]"
                                               f"[text()='{u}']]//td[contains(@class,'score')]").text for u in (student, late)}
        steps.shot("autograded")
        assert scores[student].startswith(f"{MAX_AUTO:g}") or scores[student].startswith(f"{MAX_AUTO}"), scores
        assert scores[late].startswith("0"), scores
        # the hand grade: the student's name (a link once autograded) -> her notebook -> the written answer's score
        _clickable(wait, f"//tbody[@id='main-table']//tr[.//td[contains(@class,'student-id')][text()='{student}']]"
                         "//td[contains(@class,'student-name')]/a").click()
        _clickable(wait, "//tbody[@id='main-table']//td[contains(@class,'name')]/a").click()
        score = _clickable(wait, "//input[contains(@class,'score')][@id='written']")
        steps.shot("formgrade")
        score.clear()
        score.send_keys("1", Keys.TAB)
        nb_id = _submitted_notebook_id(hub, AID, AID, student)
        t_end = time.monotonic() + 60
        while time.monotonic() < t_end:
            written = [g for g in _formgrader(hub, "GET", f"/grades?submission_id={nb_id}") if g["name"] == "written"]
            if written and written[0]["manual_score"] == 1:
                break
            time.sleep(0.5)
        else:
            raise AssertionError(f"the hand grade was not saved: {written}")
        steps.shot("hand-graded")
        d.get(f"{hub.url}/user/{inst}/formgrader")
        wait.until(EC.presence_of_element_located((By.XPATH, f"{row}//td[contains(@class,'generate-feedback')]/a")))
        _formgrader_button(d, wait, steps, row, "generate-feedback", "Successfully generated feedback of 'ex01'")
        _formgrader_button(d, wait, steps, row, "release-feedback", "Successfully released feedback of 'ex01'")

        # each student clicks Fetch Feedback and reads her score
        _browser_login(d, wait, hub, student)
        body = feedback_page(student)
        assert f"Score: {MAX_TOTAL:.1f} / {MAX_TOTAL:.1f}" in body, body[:1500]
        _browser_login(d, wait, hub, late)
        body = feedback_page(late)
        assert f"Score: 0.0 / {MAX_TOTAL:.1f}" in body, body[:1500]
        assert f"Late submission penalty (Score: -{MAX_AUTO:.1f})" in body, body[:1500]   # right answers, zeroed
    except Exception:
        where = steps.keep()
        raise AssertionError(f"browser run failed; screenshots in {where}\n{hub.log_text()[-3000:]}")
    finally:
        d.quit()


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="needs chromium and chromium-driver (.ci/run installs them)")
def test_a_portuguese_student_in_a_browser(hub):
    """The pt-BR edition on the hub: the instructor records the class edition and releases chapter 05;
    in Chromium a student fetches the Portuguese notebook, sees its Portuguese statement, Validate
    explains the unanswered notebook in Portuguese; her answers saved, Validate passes, Submit;
    Formgrader collects and autogrades (full marks); Fetch Feedback: a Portuguese feedback page."""
    import html as html_lib

    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    from course_tools.grading.selftest import _fill

    ch, inst, student = PT_CHAPTER, hub.instructor, hub.students[0]
    _release_once(hub)   # the English run first (its roster too); then the class switches edition
    for cmd in (["llm-course", "edition", "pt_BR"], ["llm-course", "register", ch],
                ["nbgrader", "release_assignment", ch]):
        r = _as(hub, inst, *cmd, cwd=hub.course)
        assert r.returncode == 0, f"{cmd}: {r.stdout}\n{r.stderr}"
    pt_release = json.loads((hub.course / "pt_BR" / "notebooks" / ch / f"{ch}.ipynb").read_text())
    # the notebook's title (JupyterLab renders only the cells in view: the first one is)
    heading = next(line.lstrip("#").strip() for c in pt_release["cells"] if c["cell_type"] == "markdown"
                   for line in "".join(c["source"]).splitlines() if line.startswith("# "))
    assert heading.startswith("Capítulo"), heading
    d = _chromium()
    steps = Steps(d, "pt_BR")
    wait = WebDriverWait(d, 180, ignored_exceptions=(StaleElementReferenceException,))

    def validate() -> str:
        _clickable(wait, "//li[contains(@class,'lm-TabBar-tab')][.//div[text()='Assignments']]").click()
        link = _clickable(wait, "//*[@id='fetched_assignments_list']//a[contains(@class,'assignment-notebooks-link')]"
                     "[contains(., '%s')]" % ch)
        buttons = d.find_elements(By.XPATH, "//*[@id='nbgrader-llm-course-%s']//button[text()='Validate']" % ch)
        if not any(b.is_displayed() for b in buttons):   # the notebooks of the assignment are folded
            link.click()
        _clickable(wait, "//*[@id='nbgrader-llm-course-%s']//button[text()='Validate']" % ch).click()
        dialog = wait.until(EC.visibility_of_element_located((By.CSS_SELECTOR, ".jp-Dialog-content")))
        text = dialog.text
        dialog.find_element(By.CSS_SELECTOR, ".jp-Dialog-footer button").click()
        wait.until(lambda drv: not drv.find_elements(By.CSS_SELECTOR, ".jp-Dialog-content"))
        return text

    try:
        _browser_login(d, wait, hub, student)
        _open_assignments(d, wait)
        _clickable(wait, "//*[@id='released_assignments_list']//div[contains(@class,'list_item')][.//span[text()='%s']]"
              "//button[text()='Fetch']" % ch).click()
        _clickable(wait, "//*[@id='fetched_assignments_list']//a[contains(@class,'assignment-notebooks-link')][contains(., '%s')]"
              % ch).click()
        _clickable(wait, "//*[@id='nbgrader-llm-course-%s']//div[contains(@class,'nested_list_item')]//a" % ch).click()
        wait.until(lambda drv: heading in drv.find_element(By.CSS_SELECTOR, ".jp-Notebook").text)
        steps.shot("portuguese-notebook")
        failed = validate()
        steps.shot("validated-blank")
        assert "A seguinte célula falhou" in failed or "Você não deu uma resposta" in failed, failed
        # her answers, saved through the same contents API JupyterLab's editor saves through
        nb_path = f"{ch}/{ch}.ipynb"
        model = hub.get(student, f"/user/{student}/api/contents/{nb_path}").json()
        source = json.loads((hub.course / "solutions" / ch / f"{ch}.ipynb").read_text())
        r = hub.sessions[student].put(f"{hub.url}/user/{student}/api/contents/{nb_path}",
                                      headers=_xsrf(hub, student, student), timeout=60,
                                      json={"type": "notebook", "format": "json",
                                            "content": _fill(model["content"], source)})
        assert r.status_code == 200, r.text
        d.refresh()
        wait.until(lambda drv: drv.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item"))
        _open_assignments(d, wait)
        passed = validate()
        steps.shot("validated")
        assert "Success!" in passed or "Sucesso!" in passed, passed
        _clickable(wait, "//*[@id='fetched_assignments_list']//div[contains(@class,'list_item')][.//a[contains(., '%s')]]"
              "//button[text()='Submit']" % ch).click()
        wait.until(lambda drv: drv.find_elements(By.XPATH, "//*[@id='submitted_assignments_list']"
                                                            "//div[contains(@class,'list_item')][.//span[text()='%s']]" % ch))
        steps.shot("submitted")

        _formgrader(hub, "POST", f"/assignment/{ch}/collect")
        _formgrader(hub, "POST", f"/submission/{ch}/{student}/autograde")
        auto = sum(float(c["metadata"]["nbgrader"].get("points", 0)) for c in source["cells"]
                   if c["metadata"].get("nbgrader", {}).get("grade") and c["cell_type"] == "code")
        subs = {s["student"]: s for s in _formgrader(hub, "GET", f"/submissions/{ch}")}
        assert subs[student]["score"] == auto, subs[student]
        _formgrader(hub, "POST", f"/assignment/{ch}/{student}/generate_feedback")
        _formgrader(hub, "POST", f"/assignment/{ch}/{student}/release_feedback")
        d.refresh()
        wait.until(lambda drv: drv.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item"))
        _open_assignments(d, wait)
        _clickable(wait, "//*[@id='submitted_assignments_list']//div[contains(@class,'list_item')][.//span[text()='%s']]"
              "//button[text()='Fetch Feedback']" % ch).click()
        wait.until(lambda _: list((hub.homes[student] / ch / "feedback").rglob(f"{ch}.html")))
        page = next((hub.homes[student] / ch / "feedback").rglob(f"{ch}.html"))
        d.get(f"{hub.url}/user/{student}/files/{page.relative_to(hub.homes[student]).as_posix()}")
        wait.until(lambda drv: heading in drv.find_element(By.TAG_NAME, "body").text)
        steps.shot("feedback-page")
        body = d.find_element(By.TAG_NAME, "body").text
        assert f"Nota: {auto:g}" in body or f"Nota: {auto}" in body, body[:1500]
        assert "Score:" not in html_lib.unescape(page.read_text())
    except Exception:
        where = steps.keep()
        raise AssertionError(f"browser run failed; screenshots in {where}\n{hub.log_text()[-3000:]}")
    finally:
        d.quit()
