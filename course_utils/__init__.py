"""course_utils: the helpers shared by the chapters of the LLM course.

What lives here is what *several* chapters need (model and corpus loading, plotting, grading
feedback, building blocks an earlier chapter asked students to write). The answer to a
chapter's own graded exercise never lives here.

In a notebook's kernel (IPython), importing this package imports :mod:`course_utils.grading` at
once: the setup cell, before any student code, so that its pristine references are captured
early (see ``grading.assert_untampered``). Elsewhere (the autograder's and nbgrader's own
processes, the command line), nothing here needs torch at import: ``course_utils.grading`` is
imported on first use, and ``from course_utils.paths import ...`` stays cheap (issue 46).
"""
from __future__ import annotations

import sys as _sys
from typing import Any

from .env import CI_MODE, ci_mode, offline_mode, seed_everything, setup

if "IPython" in _sys.modules:  # a kernel: capture the pristine references now (the setup cell)
    from . import grading  # noqa: F401

__all__ = ["CI_MODE", "ci_mode", "offline_mode", "seed_everything", "setup", "__version__"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """``course_utils.grading`` without an explicit import, outside a kernel (imported on first use)."""
    if name == "grading":
        import importlib

        return importlib.import_module(".grading", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
