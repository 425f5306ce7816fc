"""The JupyterHub configuration of the class (see the package docstring for the design).

:func:`write_hub` writes a state folder the hub runs from::

    STATE/                       0711, the hub's owner (root)
      jupyterhub_config.py       0600: the settings below, applied by :func:`apply`
      jupyterhub.sqlite, jupyterhub_cookie_secret, proxy-token     0600 (the hub writes the first two)
      roles/student/             0755: the students' Jupyter config (``JUPYTER_CONFIG_PATH``)
      roles/instructor/          0755: the instructors'

``jupyterhub -f STATE/jupyterhub_config.py`` then reads :class:`HubSettings` back from the file and
calls :func:`apply`. Book context: none (this is the classroom, not a chapter).
"""
from __future__ import annotations

import dataclasses
import json
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from course_tools.grading.privacy import write_private

STUDENTS_GROUP = "llm-course-students"
INSTRUCTORS_GROUP = "llm-course-instructors"
# nbgrader's pieces a student's server must not offer (the instructor's tools; they would only
# show errors there, and the course list would ask the hub for scopes students do not have).
INSTRUCTOR_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list")
INSTRUCTOR_LAB_EXTENSIONS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:course-list",
                             "@jupyter/nbgrader:create-assignment")
# What the idle culler needs, and nothing more (jupyterhub-idle-culler's README).
CULLER_SCOPES = ["list:users", "read:users:activity", "read:servers", "delete:servers"]
# The environment every single-user server gets (besides PATH, the cache and the edition).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "LLM_COURSE_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@dataclasses.dataclass
class HubSettings:
    """Everything :func:`apply` needs; stored as JSON in the generated config file."""

    state: str                      # the hub's folder (root's, 0711)
    course_root: str                # the instructor's course root (owned by the instructor)
    instructor: str                 # the account that owns the course root and runs the exchange service
    exchange_root: str              # c.Exchange.root of the course
    course_id: str = "llm-course"
    ip: str = "127.0.0.1"
    port: int = 8000
    hub_port: int = 8081
    proxy_api_port: int = 8001
    venv_bin: str = str(Path(sys.executable).parent)
    proxy: str = ""                 # configurable-http-proxy's executable
    cache: str = ""                 # LLM_COURSE_CACHE for every server ("" = each account's default)
    offline: bool = True
    edition: str = "en"             # the language students' notebooks print their test messages in
    students_group: str = STUDENTS_GROUP
    instructors_group: str = INSTRUCTORS_GROUP
    cull_idle_s: int = 3600         # stop a server idle this long (0: no culler)
    spawn_timeout_s: int = 120

    @property
    def url(self) -> str:
        return f"http://{self.ip}:{self.port}"


def role_dirs(s: HubSettings) -> dict[str, Path]:
    return {"student": Path(s.state) / "roles" / "student", "instructor": Path(s.state) / "roles" / "instructor"}


def _write_role_configs(s: HubSettings) -> None:
    """Each role's Jupyter config folder (on ``JUPYTER_CONFIG_PATH``, above the environment's own)."""
    nbgrader_common = (f"c = get_config()  # noqa: F821\nc.CourseDirectory.course_id = {s.course_id!r}\n"
                       f"c.Exchange.root = {s.exchange_root!r}\n")
    for role, d in role_dirs(s).items():
        (d / "labconfig").mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o755)
        os.chmod(d / "labconfig", 0o755)
        if role == "student":
            server = {"ServerApp": {"jpserver_extensions": {e: False for e in INSTRUCTOR_SERVER_EXTENSIONS}}}
            page = {"disabledExtensions": {e: True for e in INSTRUCTOR_LAB_EXTENSIONS}}
        else:
            server, page = {"ServerApp": {"jpserver_extensions": {}}}, {"disabledExtensions": {}}
        for path, text in ((d / "jupyter_server_config.json", json.dumps(server, indent=1)),
                           (d / "labconfig" / "page_config.json", json.dumps(page, indent=1)),
                           (d / "nbgrader_config.py", nbgrader_common)):
            path.write_text(text)
            os.chmod(path, 0o644)


CONFIG_TEMPLATE = '''\
# The class's JupyterHub (written by `llm-course class-hub config`; course_tools/class_hub/config.py).
import json
from course_tools.class_hub.config import HubSettings, apply

apply(c, HubSettings(**json.loads({settings!r})))  # noqa: F821
'''


def write_hub(s: HubSettings) -> Path:
    """Create the state folder, the role configs and the config file; return the config file."""
    state = Path(s.state)
    state.mkdir(parents=True, exist_ok=True)
    os.chmod(state, 0o711)
    (state / "roles").mkdir(exist_ok=True)
    os.chmod(state / "roles", 0o755)
    _write_role_configs(s)
    token = state / "proxy-token"
    if not token.exists():
        write_private(token, secrets.token_hex(32))
    cfg = state / "jupyterhub_config.py"
    write_private(cfg, CONFIG_TEMPLATE.format(settings=json.dumps(dataclasses.asdict(s))))
    return cfg


def _groups_of(user: str) -> set[str]:
    import grp
    import pwd

    gid = pwd.getpwnam(user).pw_gid
    return {g.gr_name for g in grp.getgrall() if user in g.gr_mem or g.gr_gid == gid}


def role_of(user: str, s: HubSettings) -> str | None:
    """``"instructor"``, ``"student"`` or None (not in the class) from the account's Unix groups."""
    try:
        groups = _groups_of(user)
    except KeyError:
        return None
    if s.instructors_group in groups:
        return "instructor"
    if s.students_group in groups:
        return "student"
    return None


def server_env(s: HubSettings, role: str) -> dict[str, str]:
    """The environment of one role's single-user servers."""
    env = {"PATH": f"{s.venv_bin}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8",
           "JUPYTER_CONFIG_PATH": str(role_dirs(s)[role])}
    if s.offline:
        env.update(OFFLINE_ENV)
    if s.cache:
        env["LLM_COURSE_CACHE"] = s.cache
    if s.edition != "en":
        env["LLM_COURSE_LANG"] = s.edition
    if role == "instructor":
        env["LLM_COURSE_NBGRADER_ROOT"] = s.course_root
    return env


def _class_spawner() -> type:
    """LocalProcessSpawner whose server starts in ``spawner.start_dir`` (the instructor's course root:
    nbgrader reads the course's ``nbgrader_config.py`` from the working folder) instead of the home."""
    from jupyterhub.spawner import LocalProcessSpawner, set_user_setuid

    class ClassSpawner(LocalProcessSpawner):
        start_dir: str = ""

        def make_preexec_fn(self, name: str):  # type: ignore[override]
            become = set_user_setuid(name)
            where = self.start_dir

            def preexec() -> None:
                become()
                if where:
                    os.chdir(where)
            return preexec

    return ClassSpawner


def apply(c: Any, s: HubSettings) -> None:
    """Set the hub's configuration ``c`` from ``s`` (called by the generated config file)."""
    state = Path(s.state)
    c.JupyterHub.bind_url = s.url
    c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{s.hub_port}"
    c.JupyterHub.db_url = f"sqlite:///{state / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(state / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(state / "jupyterhub.pid")
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{s.proxy_api_port}"
    c.ConfigurableHTTPProxy.auth_token = (state / "proxy-token").read_text().strip()
    if s.proxy:
        c.ConfigurableHTTPProxy.command = [s.proxy]
    c.ConfigurableHTTPProxy.pid_file = str(state / "proxy.pid")

    # Logins: the machine's accounts through PAM, members of the class's two groups; no admins.
    c.JupyterHub.authenticator_class = "pam"
    c.PAMAuthenticator.allowed_groups = {s.students_group, s.instructors_group}
    c.PAMAuthenticator.open_sessions = False      # no logind/systemd session on a plain machine
    c.Authenticator.admin_users = set()
    c.JupyterHub.admin_access = False

    # Servers: each account's own process, JupyterLab, this environment.
    c.JupyterHub.spawner_class = _class_spawner()
    c.Spawner.cmd = [str(Path(s.venv_bin) / "jupyterhub-singleuser")]
    c.Spawner.default_url = "/lab"
    c.Spawner.start_timeout = s.spawn_timeout_s
    c.Spawner.http_timeout = s.spawn_timeout_s

    def pre_spawn(spawner: Any) -> None:
        role = role_of(spawner.user.name, s)
        if role is None:
            raise PermissionError(f"{spawner.user.name} is in neither {s.students_group} nor {s.instructors_group}")
        spawner.environment = dict(server_env(s, role))
        if role == "instructor":
            # Formgrader works on the course root, with the course's nbgrader_config.py
            spawner.notebook_dir = s.course_root
            spawner.start_dir = s.course_root
            spawner.args = [f"--config={Path(__file__).parent.parent / 'grading' / 'jupyter_server_config.py'}"]
        else:
            spawner.notebook_dir = "~"
            spawner.start_dir = ""
            spawner.args = []

    c.Spawner.pre_spawn_hook = pre_spawn

    # Services: the submission service as the instructor (no API scope), the idle culler.
    services: list[dict[str, Any]] = [{
        "name": "exchange",
        "command": [str(Path(s.venv_bin) / "llm-course"), "exchange", "serve", "--root", s.exchange_root,
                    "--course", s.course_id],
        "user": s.instructor,
        "cwd": s.course_root,
        "environment": {"PATH": f"{s.venv_bin}:/usr/bin:/bin", "LLM_COURSE_NBGRADER_ROOT": s.course_root},
    }]
    roles: list[dict[str, Any]] = []
    if s.cull_idle_s > 0:
        services.append({"name": "idle-culler",
                         "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={s.cull_idle_s}"]})
        roles.append({"name": "idle-culler", "scopes": CULLER_SCOPES, "services": ["idle-culler"]})
    c.JupyterHub.services = services
    c.JupyterHub.load_roles = roles
