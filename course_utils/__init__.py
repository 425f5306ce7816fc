"""course_utils: the helpers shared by the chapters of the LLM course.

What lives here is what *several* chapters need (model and corpus loading, plotting, grading
feedback, building blocks an earlier chapter asked students to write). The answer to a
chapter's own graded exercise never lives here.
"""
from __future__ import annotations

from . import grading  # noqa: F401  (captures pristine references early; see grading.assert_untampered)
from .env import CI_MODE, ci_mode, offline_mode, seed_everything, setup

__all__ = ["CI_MODE", "ci_mode", "offline_mode", "seed_everything", "setup", "__version__"]
__version__ = "0.1.0"
