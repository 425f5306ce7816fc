"""Issue 27: nothing a submission produced runs when the instructor looks at it.

A synthetic assignment is autograded by real ``nbgrader autograde`` with the course config; the
submission carries a script in every place a student controls (written answer, raw cell, each
output mimetype) beside honest work (a PNG figure, math, a table). A real Jupyter server, started
with the grading server's config (``course_tools/grading/jupyter_server_config.py``), serves
Formgrader; headless Chromium (selenium) opens the submission pages and the feedback HTML. Every
payload, if it ran, would call the server: ``PUT /api/contents`` (a file in the course folder),
``POST /api/terminals`` and a beacon ``GET /pwned/<name>`` (in the server's log). None may
arrive, while the honest figure and math still show and the grading inputs still save.
"""
from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from nbformat import from_dict

from _classroom import nbgrader_cell as _cell
from course_tools.grading.render import (SanitizeSubmission, add_nonce, sanitize_html, sanitize_output_data,
                                         submission_page_csp)

CH = "render27"
REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
LOCAL_MATHJAX = Path("/usr/share/javascript/mathjax/MathJax.js")   # course_tools/grading/jupyter_server_config.py


def _js(name: str, port: int) -> str:
    """JavaScript that, if it ever runs, tells the server (three ways)."""
    base = f"http://127.0.0.1:{port}"
    return ("(function(n){try{document.documentElement.setAttribute('data-pwned-'+n,'1')}catch(e){}"
            f"try{{new Image().src='{base}/pwned/'+n}}catch(e){{}}"
            "var m=document.cookie.match(/_xsrf=([^;]+)/),x=m?decodeURIComponent(m[1]):'';"
            f"try{{fetch('{base}/api/contents/pwned_'+n+'.txt',{{method:'PUT',credentials:'include',"
            "headers:{'X-XSRFToken':x,'Content-Type':'application/json'},"
            "body:JSON.stringify({type:'file',format:'text',content:'pwned'})})}catch(e){}"
            f"try{{fetch('{base}/api/terminals',{{method:'POST',credentials:'include',headers:{{'X-XSRFToken':x}}}})}}"
            f"catch(e){{}}}})('{name}')")


SOURCE = {
    "cells": [
        _cell("code", "import course_utils\nDEVICE = course_utils.setup(seed=0, quiet=True)", "setup"),
        _cell("code", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "answer",
              solution=True, locked=False),
        _cell("code", "from course_utils.grading import check_equal\ncheck_equal('double(3)', double(3), 6)\n"
                      "### BEGIN HIDDEN TESTS\nfrom course_utils.grading import record\n"
                      "record('double(-2)', double(-2))\n### END HIDDEN TESTS", "test_int", grade=True, points=1),
        _cell("markdown", "Explain. YOUR ANSWER", "written", grade=True, solution=True, locked=False, points=1),
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                 "language_info": {"name": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}
HONEST_CODE = ("def double(x):\n    return 2 * x\n"
               "import struct, zlib\nfrom IPython.display import Image, display\n"
               "def _chunk(kind, data):\n"
               "    return struct.pack('>I', len(data)) + kind + data + struct.pack('>I', zlib.crc32(kind + data))\n"
               "_rows = b''.join(b'\\x00' + bytes(v for x in range(8) for v in (30 * x, 0, 255 - 30 * y)) for y in range(8))\n"
               "_png = (b'\\x89PNG\\r\\n\\x1a\\n' + _chunk(b'IHDR', struct.pack('>IIBBBBB', 8, 8, 8, 2, 0, 0, 0))\n"
               "        + _chunk(b'IDAT', zlib.compress(_rows)) + _chunk(b'IEND', b''))\n"
               "display(Image(_png))   # a figure, as matplotlib's inline backend shows it\n")
HONEST_TEXT = ("The sum $$\\sum_{i=1}^{n} x_i$$ and $a^2$ grow.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")


def _payload_code(port: int) -> str:
    p = {n: _js(n, port) for n in ("html_script", "html_img", "js", "svg", "md_out", "srcdoc", "md_link_out")}
    srcdoc = ("<script>" + p["srcdoc"] + "</script>").replace("&", "&amp;").replace('"', "&quot;")
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload=' + json.dumps(p["svg"])
           + '><rect width="10" height="10"/></svg>')
    shown = [
        ("HTML", "<script>" + p["html_script"] + "</script>"),
        ("HTML", "<img src=x onerror=" + json.dumps(p["html_img"]) + ">"),
        ("Javascript", p["js"]),
        ("SVG", svg),
        ("Markdown", "Output <img src=y onerror=" + json.dumps(p["md_out"]) + "> [x](javascript:"
         + p["md_link_out"].replace(" ", "%20").replace("(", "%28").replace(")", "%29") + ")"),
        ("HTML", '<iframe srcdoc="' + srcdoc + '"></iframe>'),
    ]
    return ("def double(x):\n    return 2 * x\n"
            "from IPython.display import HTML, Javascript, SVG, Markdown, display\n"
            + "".join(f"display({kind}({value!r}))\n" for kind, value in shown))


def _payload_text(port: int) -> str:
    return ("My answer <img src=x onerror=" + json.dumps(_js("md_img", port)) + ">\n\n"
            "<a href=\"javascript:" + _js("md_link", port).replace('"', "&quot;") + "\">click</a>\n\n"
            "<svg onload=" + json.dumps(_js("md_svg", port)) + "><rect/></svg>\n")


def _with(student: dict, code: str, text: str, extra: list | None = None) -> dict:
    nb = copy.deepcopy(student)
    for c in nb["cells"]:
        gid = c["metadata"].get("nbgrader", {}).get("grade_id")
        if gid == "answer":
            c["source"] = code
        elif gid == "written":
            c["source"] = text
    nb["cells"].extend(extra or [])
    return nb


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- fast unit tests of the sanitizer -----------------------------------------------------------

PAYLOADS = {
    "img onerror": "<img src=x onerror=alert(1)>",
    "svg onload": "<svg onload=alert(1)><rect/></svg>",
    "script": "<script>alert(1)</script>",
    "javascript link": "<a href='jav&#x61;script:alert(1)'>x</a><a href=' javascript:alert(1)'>y</a>",
    "iframe srcdoc": "<iframe srcdoc='<script>alert(1)</script>'></iframe>",
    "object/embed/base/form/meta": ("<object data=x></object><embed src=x><base href=//e/><form action=//e>"
                                    "<button formaction=javascript:alert(1)>b</button></form>"
                                    "<meta http-equiv=refresh content='0;url=javascript:alert(1)'>"),
    "style and ids": "<p style='position:fixed' class=score id=written>t</p><style>*{}</style>",
    "data: html image": "<img src='data:text/html;base64,PHNjcmlwdD4='>",
    "math with handler": "<math><maction actiontype=statusline onmouseover=alert(1)>x</maction></math>",
}


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_sanitizer_leaves_nothing_that_runs(name):
    out = sanitize_html(PAYLOADS[name]).lower()
    for bad in ("<script", "onerror", "onload", "onmouseover", "javascript:", "<iframe", "srcdoc", "<svg", "<object",
                "<embed", "<base", "<form", "<meta", "style=", "<style", "id=", "class=", "data:text"):
        assert bad not in out, (name, out)


def test_sanitizer_keeps_honest_markup():
    png = "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n").decode()
    out = sanitize_html(f"<p>$a^2$</p><table><tr><th>a</th></tr><tr><td>1</td></tr></table><img src='{png}' alt=f>"
                        "<a href='https://example.org'>link</a><pre><code>x = 1</code></pre>")
    assert "$a^2$" in out and "<table>" in out and "<th>a</th>" in out and f'src="{png}"' in out
    assert 'href="https://example.org"' in out and "<pre><code>x = 1</code></pre>" in out


def test_every_output_mimetype_is_made_inert():
    data = {
        "text/html": "<script>x()</script><b>ok</b>",
        "application/javascript": "x()",
        "image/svg+xml": "<svg onload='x()'></svg>",
        "text/markdown": "<img src=y onerror=x()> [a](javascript:x())",
        "application/vnd.jupyter.widget-view+json": {"model_id": "1"},
        "image/png": "not base64 \"><script>",
        "text/plain": "plain",
    }
    safe = sanitize_output_data(data)
    assert set(safe) == {"text/html", "text/plain"}
    assert safe["text/html"] == "<b>ok</b>"
    md = sanitize_output_data({"text/markdown": data["text/markdown"]})
    assert "onerror" not in md["text/html"] and "javascript" not in md["text/html"]
    svg = sanitize_output_data({"image/svg+xml": data["image/svg+xml"]})["text/html"]
    assert svg.startswith('<img src="data:image/svg+xml;base64,') and "onload" not in svg.split(",")[0]
    js = sanitize_output_data({"application/javascript": "x()"})
    assert "application/javascript" not in js and "removed" in js["text/plain"]
    nb = from_dict({"cells": [{"cell_type": "raw", "metadata": {"raw_mimetype": "text/html"}, "source": "<script>x()</script>r"},
                              {"cell_type": "code", "metadata": {}, "source": "", "execution_count": 1, "outputs": [
                                  {"output_type": "execute_result", "execution_count": 1, "data": data,
                                   "metadata": {"image/png": {"width": "1\" onload=\"x()"}}}]}],
                    "metadata": {"widgets": {"state": {}}}, "nbformat": 4, "nbformat_minor": 5})
    nb, _ = SanitizeSubmission().preprocess(nb, {})
    assert nb.cells[0].source == "r" and "widgets" not in nb.metadata
    assert nb.cells[1].outputs[0]["metadata"] == {}


def test_nonce_reaches_only_the_template_scripts():
    page = ('<head><script src="/a.js"></script><script>var a=1;</script></head><body><nav><script>t()</script></nav>'
            '<div class="container" id="notebook-container"><script>evil()</script></div></body>')
    out = add_nonce(page, "N0NCE")
    head, body = out.split('id="notebook-container"')
    assert head.count('nonce="N0NCE"') == 3 and "nonce" not in body
    csp = submission_page_csp("N0NCE")
    assert "script-src 'nonce-N0NCE'" in csp and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
    assert "object-src 'none'" in csp and "base-uri 'none'" in csp


# --- the real thing: autograde, Formgrader in a Jupyter server, Chromium ---------------------------

@pytest.fixture(scope="module")
def course(tmp_path_factory):
    from course_tools.grading.selftest import autograde_submissions, generate_feedback

    port = _free_port()
    course = tmp_path_factory.mktemp("course")
    src = tmp_path_factory.mktemp("src") / CH
    src.mkdir()
    (src / f"{CH}.ipynb").write_text(json.dumps(SOURCE))
    raw = {"cell_type": "raw", "id": "rawpayload", "metadata": {"raw_mimetype": "text/html"},
           "source": "<script>" + _js("raw_cell", port) + "</script>"}

    def build(student, _source):
        # one submission (one kernel: the test's budget): every payload, and honest work beside them
        return {"mallory": _with(student, HONEST_CODE + _payload_code(port).split("\n", 2)[2],
                                 HONEST_TEXT + "\n" + _payload_text(port), [raw])}

    log: list[str] = []
    scores = autograde_submissions(course, src, CH, build, timeout=600, log=log)
    assert scores["mallory"]["test_int"] == (1.0, 1.0), "\n".join(log)
    generate_feedback(course, CH)
    return course, port


@pytest.fixture(scope="module")
def server(course):
    course, port = course
    token = "t" + base64.b16encode(os.urandom(12)).decode().lower()
    logf = open(course / "server.log", "w")
    env = dict(os.environ, LLM_COURSE_NBGRADER_ROOT=str(course), GRADING_PORT=str(port),
               JUPYTER_CONFIG_DIR=str(course / ".jupyter-config"), JUPYTER_RUNTIME_DIR=str(course / ".jupyter-runtime"),
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", "jupyter_server",
                             f"--config={REPO / 'course_tools' / 'grading' / 'jupyter_server_config.py'}",
                             f"--IdentityProvider.token={token}", "--allow-root"],
                            cwd=course, env=env, stdout=logf, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.25)
        else:
            pass
        assert proc.poll() is None, (course / "server.log").read_text()
        yield course, base, token
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        logf.close()


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                f"--user-data-dir={tmp_path_factory.mktemp('chrome')}"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _submission_id(course: Path, who: str) -> str:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return gb.find_submission_notebook(CH, CH, who).id


def _visit(driver, url: str) -> None:
    driver.get(url)
    time.sleep(0.6)   # let onload / onerror handlers and timers fire, if any were left
    for link in driver.find_elements("css selector", "#notebook-container a, .cell a"):
        href = (link.get_attribute("href") or "").lower()
        if not href.startswith(("http", "mailto")):
            try:
                link.click()
            except Exception:  # noqa: BLE001  (not clickable: nothing to follow)
                pass
    time.sleep(0.4)


def _live_markup(page: str) -> list[str]:
    """Markup in ``page`` that could run or load something (the template's own scripts excepted)."""
    from html.parser import HTMLParser

    found: list[str] = []

    class Scan(HTMLParser):
        script = False

        def handle_starttag(self, tag, attrs):
            self.script = tag == "script"
            if tag in ("iframe", "svg", "object", "embed", "base", "form", "meta") and tag != "meta":
                found.append(f"<{tag}>")
            for name, value in attrs:
                v = (value or "").replace(" ", "").lower()
                if name.startswith("on") and value not in ("toggle_name(true);", "toggle_name(false);"):
                    found.append(f"<{tag} {name}>")
                if name in ("href", "src", "action", "formaction", "srcdoc") and (
                        v.startswith(("javascript:", "data:text")) or name == "srcdoc"):
                    found.append(f"<{tag} {name}={v[:30]}>")

        def handle_data(self, data):
            if self.script and "pwned" in data:
                found.append("a student script")

    Scan().feed(page)
    return found


def _evidence(course: Path, base: str, token: str, driver) -> list[str]:
    found = [p.name for p in course.rglob("pwned_*")]
    log = (course / "server.log").read_text()
    found += [line for line in log.splitlines() if "/pwned/" in line or "pwned_" in line]
    try:
        with urllib.request.urlopen(f"{base}/api/terminals?token={token}", timeout=5) as r:
            terms = json.loads(r.read() or b"[]")
    except urllib.error.HTTPError as exc:   # terminals switched off (the grading server's config)
        assert exc.code in (403, 404), exc
        terms = []
    found += [f"terminal {t}" for t in terms]
    attrs = driver.execute_script("return Array.from(document.documentElement.attributes).map(a => a.name)")
    found += [a for a in attrs if a.startswith("data-pwned")]
    return found


def test_formgrader_and_feedback_run_nothing_and_still_show_honest_work(server, browser):
    course, base, token = server
    driver = browser
    driver.get(f"{base}/formgrader?token={token}")          # logs in (cookie), as the instructor does
    page = f"{base}/formgrader/submissions/{_submission_id(course, 'mallory')}/"
    feedback = course / "feedback" / "mallory" / CH / f"{CH}.html"
    _visit(driver, feedback.as_uri())
    assert _evidence(course, base, token, driver) == [], "a payload ran in the feedback (file://)"
    _visit(driver, f"{base}/files/feedback/mallory/{CH}/{CH}.html?token={token}")
    assert _evidence(course, base, token, driver) == [], "a payload ran in the feedback (/files)"
    assert _live_markup(feedback.read_text()) == []
    with urllib.request.urlopen(f"{page}?token={token}", timeout=10) as r:
        assert "script-src 'nonce-" in r.headers.get("Content-Security-Policy", ""), r.headers
        assert _live_markup(r.read().decode()) == []

    _visit(driver, page)
    assert "My answer" in driver.page_source, "the written answer is shown"
    assert _evidence(course, base, token, driver) == [], "a payload ran on Formgrader's submission page"
    # honest work still shows, and grading still works under the page's policy
    widths = driver.execute_script(
        "return Array.from(document.querySelectorAll('#notebook-container img')).map(i => i.naturalWidth)")
    assert widths and max(widths) > 0, "the PNG figure is shown"
    typeset = driver.execute_script("return document.querySelectorAll('#notebook-container .MathJax_CHTML').length")
    if LOCAL_MATHJAX.exists():   # the grading server serves it (apt: libjs-mathjax): math must be typeset
        assert typeset >= 2, "the math is typeset by MathJax under the page's policy"
    else:                        # no MathJax reachable (offline, no libjs-mathjax): the TeX is there
        assert typeset >= 2 or "\\sum_{i=1}^{n}" in driver.page_source, "the math (typeset or TeX) is shown"
    refused = [e["message"] for e in driver.get_log("browser") if "Content Security Policy" in e["message"]]
    assert refused == [], f"the page's own scripts were refused: {refused[:3]}"
    assert driver.find_elements("css selector", "#notebook-container table"), "the table is shown"
    comment = driver.find_element("css selector", "textarea.comment")
    comment.send_keys("graded under the CSP")
    from selenium.common.exceptions import ElementClickInterceptedException

    score = driver.find_element("css selector", "input.score")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", score)
    try:
        score.click()   # blur saves the comment
    except ElementClickInterceptedException:   # a late layout shift (MathJax) on a loaded machine
        driver.execute_script("arguments[0].focus();", score)   # the same blur, without a pointer
    from nbgrader.api import Gradebook

    saved = False
    for _ in range(40):   # Formgrader saves asynchronously: up to 10 s on a loaded machine
        time.sleep(0.25)
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            nb = gb.find_submission_notebook(CH, CH, "mallory")
            saved = any((c.manual_comment or "") == "graded under the CSP" for c in nb.comments)
        if saved:
            break
    assert saved, "the comment saved"
    assert _evidence(course, base, token, driver) == []


def test_grading_server_refuses_terminals_kernels_and_writes(server):
    course, base, token = server
    for method, path in (("POST", "/api/terminals"), ("POST", "/api/kernels"), ("POST", "/api/sessions"),
                         ("PUT", "/api/contents/x.txt")):
        req = urllib.request.Request(f"{base}{path}?token={token}", method=method,
                                     data=json.dumps({"type": "file", "format": "text", "content": "x",
                                                      "path": "x.ipynb", "kernel": {"name": "python3"},
                                                      "name": "python3"}).encode(),
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=10)
        assert err.value.code in (403, 404), (method, path, err.value.code)
    assert not (course / "x.txt").exists()
