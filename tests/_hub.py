"""The class hub for the tests (tests/test_class_hub.py): real accounts with passwords, PAM logins,
the course's ``llm-course class-hub up``, each person a ``requests`` session with her own cookie."""
from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import requests

from course_utils.paths import repo_root

from course_tools.class_hub.config import INSTRUCTORS_GROUP, STUDENTS_GROUP

from _classroom import VENV_BIN, make_course, others_may_enter


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Hub:
    url: str
    base: Path
    course: Path
    exchange: Path
    state: Path
    instructor: str
    students: list[str]
    passwords: dict[str, str]
    homes: dict[str, Path]
    log: Path
    proc: subprocess.Popen
    sessions: dict[str, requests.Session] = field(default_factory=dict)
    released: bool = False          # ex01 released (tests/test_class_hub.py::_release_once)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]

    def login(self, user: str, password: str | None = None) -> requests.Response:
        """Log ``user`` in through the hub's login form (PAM); her session keeps the cookies."""
        s = requests.Session()
        r = s.get(f"{self.url}/hub/login", timeout=30)
        xsrf = s.cookies.get("_xsrf") or re.search(r'name="_xsrf" value="([^"]+)"', r.text).group(1)
        r = s.post(f"{self.url}/hub/login?next=", data={"username": user, "password": password or self.passwords[user],
                                                         "_xsrf": xsrf}, allow_redirects=False, timeout=60)
        if r.status_code == 302:
            self.sessions[user] = s
        return r

    def api(self, user: str, method: str, path: str, **kw) -> requests.Response:
        """The hub's REST API with ``user``'s own cookie (and the XSRF header the hub asks of cookies)."""
        s = self.sessions[user]
        headers = {"X-XSRFToken": s.cookies.get("_xsrf", path="/hub/") or s.cookies.get("_xsrf") or ""}
        return s.request(method, f"{self.url}/hub/api{path}", headers=headers, timeout=60, **kw)

    def start_server(self, user: str, timeout: float = 120) -> None:
        """Start ``user``'s server with her cookie and wait until the hub says it is ready."""
        r = self.api(user, "POST", f"/users/{user}/server")
        assert r.status_code in (201, 202, 400), f"{user}: start server {r.status_code} {r.text[:300]}"
        t_end = time.monotonic() + timeout
        while time.monotonic() < t_end:
            info = self.api(user, "GET", f"/users/{user}").json()
            srv = info.get("servers", {}).get("", {})
            if srv.get("ready"):
                return
            time.sleep(0.5)
        raise AssertionError(f"{user}'s server not ready after {timeout} s\n{self.log_text()}")

    def get(self, user: str, path: str, **kw) -> requests.Response:
        """GET ``path`` (below the hub's URL) with ``user``'s cookies, following the hub's OAuth redirects."""
        return self.sessions[user].get(f"{self.url}{path}", timeout=60, **kw)


def _make_account(name: str, home: Path, group: str, password: str) -> None:
    home.mkdir(parents=True)
    subprocess.run(["useradd", "--no-create-home", "--home-dir", str(home), "--shell", "/bin/sh", "--user-group",
                    "--groups", group, name], check=True, capture_output=True)
    subprocess.run(["chpasswd"], input=f"{name}:{password}\n", text=True, check=True, capture_output=True)
    shutil.chown(home, name, name)
    home.chmod(0o700)


@contextlib.contextmanager
def class_hub(base: Path, n_students: int = 2, edition: str = "en", cull_idle: int = 0) -> Iterator[Hub]:
    """A running class hub on loopback: one instructor owning a course root (the tiny ``ex01``
    course of tests/_classroom.py), ``n_students`` students, each a real account with a password."""
    tag = secrets.token_hex(3)
    instructor = f"hp{tag}"
    students = [f"hs{tag}{i}" for i in range(n_students)]
    passwords = {u: secrets.token_urlsafe(12) for u in [instructor, *students]}
    homes = {u: base / "home" / u for u in passwords}
    for g in (STUDENTS_GROUP, INSTRUCTORS_GROUP):
        subprocess.run(["groupadd", "-f", g], check=True, capture_output=True)
    proc = None
    log = base / "hub.log"
    with others_may_enter([sys.executable, os.path.realpath(sys.executable), VENV_BIN, repo_root()]):
        try:
            _make_account(instructor, homes[instructor], INSTRUCTORS_GROUP, passwords[instructor])
            for u in students:
                _make_account(u, homes[u], STUDENTS_GROUP, passwords[u])
            course = make_course(homes[instructor] / "course")
            exchange = base / "exchange"
            exchange.mkdir()
            (course / "nbgrader_config.py").write_text((course / "nbgrader_config.py").read_text()
                                                       + f"\nc.Exchange.root = {str(exchange)!r}\n")
            subprocess.run(["chown", "-R", f"{instructor}:{instructor}", str(course), str(exchange)], check=True)
            exchange.chmod(0o755)
            state = base / "state"
            port = free_port()
            cmd = [str(VENV_BIN / "llm-course"), "class-hub", "up", "--course-root", str(course), "--state", str(state),
                   "--port", str(port), "--hub-port", str(free_port()), "--proxy-api-port", str(free_port()),
                   "--edition", edition, "--cull-idle", str(cull_idle)]
            env = dict(os.environ, PATH=f"{VENV_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")
            with open(log, "w") as fh:
                proc = subprocess.Popen(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
            url = f"http://127.0.0.1:{port}"
            hub = Hub(url, base, course, exchange, state, instructor, students, passwords, homes, log, proc)
            t_end = time.monotonic() + 90
            while True:
                try:
                    if requests.get(f"{url}/hub/api/", timeout=5).status_code == 200:
                        break
                except requests.ConnectionError:
                    pass
                if proc.poll() is not None or time.monotonic() > t_end:
                    raise AssertionError(f"the hub did not come up (exit {proc.poll()}):\n{hub.log_text()}")
                time.sleep(0.3)
            yield hub
        finally:
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            for u in passwords:
                subprocess.run(["pkill", "-KILL", "-u", u], capture_output=True)
                subprocess.run(["userdel", u], capture_output=True)
