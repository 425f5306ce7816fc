"""``llm-course exchange init|serve|check|client-config`` (README "A class, step by step")."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any


def _exchange_root(root: Path) -> str:
    """``Exchange.root`` of the course at ``root`` (its ``nbgrader_config.py``, else nbgrader's default)."""
    from nbgrader.exchange.default.exchange import Exchange
    from traitlets.config import PyFileConfigLoader

    cfg_file = root / "nbgrader_config.py"
    cfg = PyFileConfigLoader(cfg_file.name, str(root)).load_config() if cfg_file.is_file() else None
    return str(Exchange(config=cfg).root if cfg is not None else Exchange().root)


def _where(args: argparse.Namespace) -> tuple[str, str]:
    from course_tools import classroom

    root = classroom.course_root()
    return (args.root or _exchange_root(root)), (args.course or classroom.course_id(root))


def _init(args: argparse.Namespace) -> int:
    from course_tools.exchange_service import layout

    ex, course = _where(args)
    p = layout.paths(ex, course)
    for change in layout.init(p):
        print(change)
    found = layout.problems(p, os.geteuid())
    for line in found:
        print("UNSAFE:", line)
    if not found:
        print(f"exchange {p.course}: only this account can write it; students submit through "
              f"`llm-course exchange serve` ({p.socket})")
    return 1 if found else 0


def _check(args: argparse.Namespace) -> int:
    from course_tools.exchange_service import layout

    ex, course = _where(args)
    found = layout.problems(layout.paths(ex, course), os.geteuid(), check_socket=True)
    for line in found:
        print("UNSAFE:" if "service" not in line else "NOTE:", line)
    if not found:
        print("exchange safe; submission service listening")
    return 1 if any("service" not in line for line in found) else 0


def _serve(args: argparse.Namespace) -> int:
    from course_tools.exchange_service.server import SubmissionService

    ex, course = _where(args)
    SubmissionService(ex, course, max_bytes=args.max_bytes, per_student=args.per_student).serve()
    return 0


def _client_config(args: argparse.Namespace) -> int:
    from course_tools.exchange_service.client import write_client_config

    print(f"wrote {write_client_config(args.prefix)}")
    return 0


def add_parser(sub: Any) -> None:
    """Register ``llm-course exchange ...``."""
    p = sub.add_parser("exchange", help="the class's exchange: init, the submission service, checks")
    es = p.add_subparsers(dest="exchange_cmd", required=True)
    for name, fn, text in (("init", _init, "create or tighten the exchange folders of the course (instructor)"),
                           ("serve", _serve, "receive submissions on <exchange>/<course>/submit.sock (instructor; "
                                             "runs until stopped)"),
                           ("check", _check, "say whether another account could write the exchange, and whether "
                                             "the service listens")):
        q = es.add_parser(name, help=text)
        q.add_argument("--root", help="the exchange root (default: Exchange.root of the course's nbgrader_config.py)")
        q.add_argument("--course", help="the course id (default: CourseDirectory.course_id)")
        if name == "serve":
            q.add_argument("--max-bytes", type=int, default=100_000_000, help="largest submission (bytes)")
            q.add_argument("--per-student", type=int, default=50, help="submissions kept per student and assignment")
        q.set_defaults(fn=fn)
    q = es.add_parser("client-config", help="write the students' exchange plugins into this environment "
                                            "(<prefix>/etc/jupyter/nbgrader_config.py; make install runs it)")
    q.add_argument("--prefix", default=sys.prefix, help="the environment (default: this one)")
    q.set_defaults(fn=_client_config)
