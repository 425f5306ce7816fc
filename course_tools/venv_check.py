"""``make install`` / ``make lab``: is the existing ``.venv`` the one asked for, and can a class use it?

Run by the Makefile with the interpreter the user asked for (``$(PYTHON)``), before anything is
installed: ``python course_tools/venv_check.py VENV ORIGIN``, where ``ORIGIN`` is make's
``$(origin PYTHON)``. Standard library only (it runs before the course is installed).

* ``PYTHON`` given (``make install PYTHON=/usr/bin/python3``, origin ``command line`` or
  ``environment``) while ``VENV`` exists and was made by another interpreter: make keeps an existing
  ``.venv``, so the request would silently do nothing. Exit 1, saying what to run.
* The environment's interpreter lies under a folder other accounts cannot enter (a pyenv in
  ``/root``): a warning, since students' accounts cannot run it (``Permission denied``).
"""
from __future__ import annotations

import os
import stat
import sys
from pathlib import Path


def venv_interpreter(venv: Path) -> Path | None:
    """The base interpreter ``venv`` was made with (its ``bin/python`` link, else ``pyvenv.cfg``)."""
    py = venv / "bin" / "python"
    if not os.path.lexists(py):
        return None
    if py.is_symlink():
        return Path(os.path.realpath(py))
    cfg = venv / "pyvenv.cfg"
    if cfg.is_file():
        for line in cfg.read_text().splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "executable" and value.strip():
                return Path(os.path.realpath(value.strip()))
    return Path(os.path.realpath(py))


def closed_folder(path: Path) -> Path | None:
    """The first folder above ``path`` that other accounts cannot enter (no ``o+x``), if any."""
    for d in reversed(path.parents):
        try:
            if not d.stat().st_mode & stat.S_IXOTH:
                return d
        except OSError:
            return d
    return None


def check(venv: Path, origin: str, requested: Path, asked: str = "", note: bool = True) -> tuple[int, list[str]]:
    """``(exit status, lines to print)`` for ``make``'s check of ``venv``; ``requested`` is the
    interpreter ``PYTHON`` names (resolved), ``asked`` how the user wrote it; ``note``: also warn
    when other accounts cannot run the environment (``make install`` only)."""
    have = venv_interpreter(venv)
    lines: list[str] = []
    at = "" if str(venv) == ".venv" else f" VENV={venv}"
    if have is None:   # the first install: warn before the environment is made with that interpreter
        closed = closed_folder(requested) if note else None
        if closed is not None:
            lines += [
                f"make: note: the interpreter {requested} is under {closed}, which other accounts cannot enter:",
                f"  the {venv} made now will work for you, but students' accounts cannot run it (Permission denied).",
                f"  For a class, stop now (Ctrl-C) and run: make install{at} PYTHON=/usr/bin/python3"
                "   (README, \"A shared environment for the class\")",
            ]
        return 0, lines
    if origin in ("command line", "environment") and have != requested:
        lines += [
            f"make: {venv} already exists, made by {have}; PYTHON asks for {requested}.",
            "  make keeps an existing environment, so nothing would change. To rebuild it with that interpreter:",
            f"    make clean{at} && make install{at} PYTHON={asked or requested}",
            "  (make clean removes the environment; the course cache, e.g. ~/.cache/llm-course, is kept)",
        ]
        return 1, lines
    closed = closed_folder(have) if note else None
    if closed is not None:
        lines += [
            f"make: note: {venv}'s interpreter {have} is under {closed}, which other accounts cannot enter:",
            "  fine for you, but students' accounts cannot run this environment (Permission denied). For a class:",
            f"    make clean{at} && make install{at} PYTHON=/usr/bin/python3   (README, \"A shared environment for the class\")",
        ]
    return 0, lines


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: python course_tools/venv_check.py VENV ORIGIN [PYTHON [GOALS]]", file=sys.stderr)
        return 2
    goals = argv[4].split() if len(argv) > 4 else []
    status, lines = check(Path(argv[1]), argv[2], Path(os.path.realpath(sys.executable)),
                          argv[3] if len(argv) > 3 else "", note="install" in goals)
    for line in lines:
        print(line, file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
