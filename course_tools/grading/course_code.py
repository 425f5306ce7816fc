"""The grader and its kernels import the same course code, or grading stops before the first student.

nbgrader's process imports ``course_tools`` and ``course_utils`` from the course root
(``nbgrader_config.py`` puts its folder first on ``sys.path``), and the sandbox shows the kernel
that checkout's packages. The kernel, started by the environment's interpreter, imports them
through the environment's install instead. Grading a second clone of the course with the first
clone's environment (whose editable install points at the first clone) made every submission's
kernel miss the course code in the sandbox: the reference run's setup cell concluded it was on
Colab and tried ``git clone`` from the network, and every student failed with that misleading
error. :func:`check_same_course_code` compares the two before anything is graded and says which
two copies disagree and how to fix it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

PACKAGES = ("course_utils", "course_tools")

_FIND = ("import importlib.util, json, sys\n"
         "out = {}\n"
         "for n in sys.argv[1:]:\n"
         "    s = importlib.util.find_spec(n)\n"
         "    out[n] = list(s.submodule_search_locations or []) if s else None\n"
         "print(json.dumps(out))\n")


class CourseCodeMismatch(RuntimeError):
    """The grader and a grading kernel would import different copies of the course code."""


def grader_locations(course_root: Path | None = None) -> dict[str, Path]:
    """Where nbgrader imports each course package from: ``course_root/<package>`` when the course
    root holds it (its ``nbgrader_config.py`` puts the root first on ``sys.path``), else where this
    process imports it from."""
    import course_tools
    import course_utils

    out = {}
    for m in (course_utils, course_tools):
        local = Path(course_root) / m.__name__ if course_root is not None else None
        out[m.__name__] = (local.resolve() if local is not None and (local / "__init__.py").is_file()
                           else Path(m.__file__).resolve().parent)
    return out


@lru_cache(maxsize=4)
def kernel_locations(python: str = sys.executable) -> dict[str, Path | None]:
    """Where a kernel started by ``python`` (no ``PYTHONPATH``, a neutral working folder, as the
    sandbox starts it) finds each course package, without importing it; None where it does not."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME")}
    with tempfile.TemporaryDirectory(prefix="llm-course-code-") as cwd:
        res = subprocess.run([python, "-c", _FIND, *PACKAGES], cwd=cwd, env=env, capture_output=True, text=True,
                             timeout=120)
    if res.returncode != 0:
        raise CourseCodeMismatch(f"{python} could not be asked where it finds the course code:\n{res.stderr[-1000:]}")
    found = json.loads(res.stdout.strip().splitlines()[-1])
    return {n: (Path(locs[0]).resolve() if locs else None) for n, locs in found.items()}


def problem(python: str = sys.executable, course_root: Path | None = None) -> str | None:
    """None when the grader (nbgrader in ``course_root``, or this process) and the kernels import the
    same course packages, else the message."""
    mine = grader_locations(course_root)
    theirs = kernel_locations(python)
    for name in PACKAGES:
        if theirs.get(name) != mine[name]:
            where = theirs.get(name)
            root = mine[name].parent
            return (f"the grader imports {name} from {mine[name]} (the course root of nbgrader_config.py), but a "
                    f"grading kernel of this environment ({python}) "
                    + (f"imports it from {where}" if where else "cannot import it at all")
                    + ": every submission would be graded with the wrong course code (or none). Grade this course "
                    f"with its own environment ({root}/.venv/bin/llm-course autograde …, after `make install` in "
                    f"{root}), or point this environment at it: `{python} -m pip install -e {root}`.")
    return None


def check_same_course_code(python: str = sys.executable, course_root: Path | None = None) -> None:
    """Raise :class:`CourseCodeMismatch` (saying which two copies and how to fix it) when they differ."""
    msg = problem(python, course_root)
    if msg is not None:
        raise CourseCodeMismatch(msg)
