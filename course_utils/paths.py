"""Where things are: the repository checkout, its assets, and the user cache directory."""
from __future__ import annotations

import os
from pathlib import Path


def repo_root() -> Path:
    """The course checkout (the folder holding ``nbgrader_config.py``).

    Found from the package location (editable install, the supported way) or, failing that,
    from the current directory upwards (a notebook opened inside the checkout).
    """
    candidates = [Path(__file__).resolve().parent.parent, *Path.cwd().resolve().parents, Path.cwd().resolve()]
    for c in candidates:
        if (c / "nbgrader_config.py").is_file() and (c / "course_utils").is_dir():
            return c
    raise FileNotFoundError(
        "Could not find the course checkout (a folder with nbgrader_config.py). Install the course "
        "with `pip install -e .` from a clone, or run `make lab`."
    )


def asset_path(name: str) -> Path:
    """Absolute path of ``assets/<name>`` in the checkout; a clear error if it is missing."""
    p = repo_root() / "assets" / name
    if not p.exists():
        raise FileNotFoundError(f"Asset {name!r} not found at {p}. Is your checkout complete (git pull)?")
    return p


def cache_dir() -> Path:
    """Cache for course-built artefacts (trained stand-in models, downloaded corpus).

    ``LLM_COURSE_CACHE`` overrides; default ``$XDG_CACHE_HOME/llm-course`` or ``~/.cache/llm-course``.
    """
    env = os.environ.get("LLM_COURSE_CACHE")
    if env:
        p = Path(env).expanduser()
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")).expanduser()
        p = base / "llm-course"
    p.mkdir(parents=True, exist_ok=True)
    return p
