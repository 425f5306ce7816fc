"""``llm-course class-hub config|up`` (``make hub``; README "Run the class on a JupyterHub")."""
from __future__ import annotations

import argparse
import os
import pwd
import shutil
from pathlib import Path
from typing import Any

from course_utils.paths import repo_root

DEFAULT_STATE = "/srv/llm-course-hub"


def proxy_path() -> str:
    """configurable-http-proxy: the pinned copy of ``hub/`` (``npm ci --prefix hub``), else PATH."""
    pinned = repo_root() / "hub" / "node_modules" / ".bin" / "configurable-http-proxy"
    if pinned.exists():
        return str(pinned)
    return shutil.which("configurable-http-proxy") or ""


def settings_from(args: argparse.Namespace) -> Any:
    from course_tools.class_hub.config import HubSettings
    from course_tools.exchange_service.commands import _exchange_root

    course = Path(args.course_root).resolve()
    if not (course / "nbgrader_config.py").is_file():
        raise SystemExit(f"{course} is not a course root (no nbgrader_config.py)")
    owner = pwd.getpwuid(course.stat().st_uid).pw_name
    instructor = args.instructor or owner
    if instructor != owner:
        raise SystemExit(f"{course} belongs to {owner}, not to the instructor {instructor}: Formgrader and the "
                         "submission service run as the instructor and must own the course root")
    if instructor == "root":
        raise SystemExit("the instructor must be an ordinary account (it logs in to the hub): give the course root "
                         "to that account (chown -R) and pass --instructor NAME")
    proxy = args.proxy or proxy_path()
    if not proxy:
        raise SystemExit("configurable-http-proxy not found: run `npm ci --prefix hub` (make hub does)")
    return HubSettings(state=str(Path(args.state).resolve()), course_root=str(course), instructor=instructor,
                       exchange_root=args.exchange_root or _exchange_root(course), course_id=args.course_id,
                       ip=args.ip, port=args.port, hub_port=args.hub_port, proxy_api_port=args.proxy_api_port,
                       proxy=proxy, cache=args.cache or os.environ.get("LLM_COURSE_CACHE", ""),
                       offline=not args.online, edition=args.edition, cull_idle_s=args.cull_idle)


def _config(args: argparse.Namespace) -> int:
    from course_tools.class_hub.config import write_hub

    s = settings_from(args)
    print(f"wrote {write_hub(s)}")
    return 0


def _up(args: argparse.Namespace) -> int:
    from course_tools.class_hub.config import write_hub

    if os.geteuid() != 0:
        raise SystemExit("the hub starts each account's server as that account: run it as root")
    s = settings_from(args)
    cfg = write_hub(s)
    print(f"class hub on {s.url} (state {s.state}); students: group {s.students_group}, "
          f"instructors: group {s.instructors_group}", flush=True)
    hub = str(Path(s.venv_bin) / "jupyterhub")
    os.chdir(s.state)
    os.execv(hub, [hub, "-f", str(cfg)])
    return 0   # not reached


def add_parser(sub: Any) -> None:
    """Register ``llm-course class-hub ...``."""
    p = sub.add_parser("class-hub", help="the class on a JupyterHub: config, up")
    hs = p.add_subparsers(dest="hub_cmd", required=True)
    for name, fn, text in (("config", _config, "write the hub's state folder and jupyterhub_config.py"),
                           ("up", _up, "write the config and run JupyterHub in the foreground (root)")):
        q = hs.add_parser(name, help=text)
        q.add_argument("--course-root", required=True, help="the instructor's course root (its nbgrader_config.py)")
        q.add_argument("--instructor", default="", help="the instructor's account (default: the course root's owner)")
        q.add_argument("--state", default=DEFAULT_STATE, help=f"the hub's own folder (default {DEFAULT_STATE})")
        q.add_argument("--exchange-root", default="", help="default: the course's c.Exchange.root")
        q.add_argument("--course-id", default="llm-course")
        q.add_argument("--ip", default="127.0.0.1", help="where the hub listens (put TLS in front: README)")
        q.add_argument("--port", type=int, default=8000)
        q.add_argument("--hub-port", type=int, default=8081)
        q.add_argument("--proxy-api-port", type=int, default=8001)
        q.add_argument("--proxy", default="", help="configurable-http-proxy (default: hub/node_modules, else PATH)")
        q.add_argument("--cache", default="", help="LLM_COURSE_CACHE of every server (default: yours, if set)")
        q.add_argument("--online", action="store_true", help="let servers reach model hubs (default: offline)")
        q.add_argument("--edition", default="en", choices=["en", "pt_BR"],
                       help="the language of the test messages students see")
        q.add_argument("--cull-idle", type=int, default=3600, help="stop servers idle this many seconds (0: never)")
        q.set_defaults(fn=fn)
