"""The instructor's server (`make grade-lab`) in headless Chromium: Formgrader loads, lists the
assignment, and its link to the assignment's source opens (no 404).

`make grade-lab` is run for real (with `-o install`: the environment is this one) on a small
course root (tests/_classroom.py) whose gradebook `llm-course register` filled. Skipped without
Chromium, chromedriver (apt: chromium chromium-driver) or selenium (the dev extra).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from _classroom import AID, make_course
from course_tools import classroom
from course_utils.paths import repo_root

webdriver = pytest.importorskip("selenium.webdriver")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER and shutil.which("make")),
                                reason="needs chromium, chromedriver and make")
TOKEN = "formgrader-test-token"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    course = make_course(tmp_path_factory.mktemp("grade-lab"))
    classroom.register([AID], course, log=lambda *_: None)
    port = _free_port()
    runtime = tmp_path_factory.mktemp("jupyter-runtime")
    args = f"--no-browser --port={port} --ServerApp.ip=127.0.0.1 --IdentityProvider.token={TOKEN}"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(runtime))
    env.pop("LLM_COURSE_NBGRADER_ROOT", None)
    proc = subprocess.Popen(["make", "-s", "-C", str(repo_root()), "-o", "install", "grade-lab",
                             f"VENV={Path(sys.executable).parent.parent}", f"COURSE_ROOT={course}",
                             f"GRADE_LAB_ARGS={args}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    pytest.fail(f"make grade-lab exited {proc.returncode}:\n{proc.stdout.read()}")
                time.sleep(0.5)
        else:
            pytest.fail("the grading server did not answer in 60 s")
        yield base, course
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"):
        opts.add_argument(a)
    drv = webdriver.Chrome(service=Service(DRIVER), options=opts)
    try:
        yield drv
    finally:
        drv.quit()


def test_formgrader_lists_the_assignment_and_opens_its_source(server, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    base, course = server
    browser.get(f"{base}/formgrader?token={TOKEN}")
    WebDriverWait(browser, 60).until(EC.presence_of_element_located((By.XPATH, f"//td//a[text()='{AID}']")))
    row = browser.find_element(By.XPATH, f"//tr[.//a[text()='{AID}']]")
    hrefs = [a.get_attribute("href") for a in row.find_elements(By.TAG_NAME, "a")]
    edit = [h for h in hrefs if h and "/tree/" in h and "solutions" in h]
    assert edit, f"no link to the source in the assignment row: {hrefs}"
    print("assignment row links:", hrefs)
    if os.environ.get("LLM_COURSE_SCREENSHOT"):
        browser.save_screenshot(os.environ["LLM_COURSE_SCREENSHOT"])
    # the link opens the source folder (the server is rooted at the course root: no 404)
    browser.get(edit[0])
    WebDriverWait(browser, 60).until(lambda d: d.execute_script("return document.readyState") == "complete")
    status = urllib.request.urlopen(f"{edit[0]}{'&' if '?' in edit[0] else '?'}token={TOKEN}", timeout=10).status
    assert status == 200
    assert "404" not in browser.title, browser.title
    api = f"{base}/api/contents/solutions/{AID}?token={TOKEN}"
    listing = urllib.request.urlopen(api, timeout=10).read().decode()
    assert f"{AID}.ipynb" in listing
