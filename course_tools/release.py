"""Student notebooks are *generated*: ``solutions/`` → nbgrader ``generate_assignment`` → ``notebooks/``.

``llm-course release`` regenerates them; ``llm-course check-release`` fails when they are out
of sync (CI runs it). Generation runs nbgrader with ``--no-db``, which is deterministic.
"""
from __future__ import annotations

import filecmp
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from course_utils.paths import repo_root

# chapters, ReleaseError and the generation step live in course_tools/editions.py (shared with the
# translated editions, course_tools/translation.py); importable from here as before
from .editions import ReleaseError, chapters, editions, generate as _generate  # noqa: F401


def check_metadata(nb_path: Path) -> None:
    """Refuse a solution notebook that has no nbgrader cells (it would release as-is, answers included)."""
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    graded = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("schema_version") == 3]
    if not graded:
        raise ReleaseError(
            f"{nb_path} has no nbgrader cell metadata (schema 3). Mark its cells with the nbgrader "
            "'Create Assignment' toolbar (see CONTRIBUTING.md) before releasing."
        )
    for c in graded:
        if "grade_id" not in c["metadata"]["nbgrader"]:
            raise ReleaseError(f"{nb_path}: an nbgrader cell has no grade_id; give every graded cell an id.")


def _dirty_notebooks(root: Path) -> list[str]:
    try:
        res = subprocess.run(["git", "status", "--porcelain", "--", "notebooks"], cwd=root,
                             capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return []  # not a git checkout: nothing to protect
    return [line[3:] for line in res.stdout.splitlines() if line.strip()]


def _sync_colab(chapter: str, root: Path) -> None:
    """Write the repository setting (``[tool.llm-course]``) into the chapter's badge and setup cell."""
    from .authoring import script_path
    from .colab import sync

    pyproject = root / "pyproject.toml"
    if script_path(chapter, root).is_file() and pyproject.is_file() and "[tool.llm-course]" in pyproject.read_text():
        sync(chapter, root)


def release(only: list[str] | None = None, force: bool = False, root: Path | None = None) -> list[str]:
    """Regenerate ``notebooks/`` from ``solutions/``; returns the chapters written.

    First writes the repository setting into each chapter's Colab badge and setup cell (script and
    solution notebook, ``course_tools/colab.py``), so the student notebooks follow it too.

    Refuses (unless ``force``) when the ``notebooks/<chapter>`` folders it would rewrite hold
    uncommitted edits: they would be lost.
    """
    root = root or repo_root()
    todo = only or chapters(root)
    folders = [f"notebooks/{ch}" for ch in todo]
    dirty = [p for p in _dirty_notebooks(root)  # "notebooks/" itself when the whole folder is untracked
             if p == "notebooks/" or any(p.rstrip("/") == f or p.startswith(f + "/") for f in folders)]
    if dirty and not force:
        raise ReleaseError(
            "notebooks/ has uncommitted changes that a release would overwrite:\n  "
            + "\n  ".join(dirty)
            + "\nStudent notebooks are generated: move your edits into solutions/, then commit or "
            "discard the changes in notebooks/ (git checkout -- notebooks) and run release again "
            "(or pass --force to overwrite them)."
        )
    unknown = sorted(set(todo) - set(chapters(root)))
    if unknown:
        raise ReleaseError(f"no solution notebook for {unknown}; chapters are: {', '.join(chapters(root))}")
    for ch in todo:
        _sync_colab(ch, root)
        check_metadata(root / "solutions" / ch / f"{ch}.ipynb")
    with tempfile.TemporaryDirectory() as tmp:
        # one nbgrader run for all chapters ("*") is much faster than one per chapter
        for pattern in (["*"] if sorted(todo) == chapters(root) else todo):
            _generate(root, pattern, Path(tmp))
        for ch in todo:
            dest = root / "notebooks" / ch
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(Path(tmp) / ch, dest)
    from .translation import build as build_edition

    for lang in editions(root):   # the editions follow: pt_BR/solutions and pt_BR/notebooks (course_tools/translation.py)
        build_edition(lang, todo, root)
    return todo


def check_release(root: Path | None = None) -> list[str]:
    """Return a list of problems (empty when ``notebooks/`` matches a fresh generation)."""
    root = root or repo_root()
    problems: list[str] = []
    expected = chapters(root)
    present = sorted(p.name for p in (root / "notebooks").iterdir() if p.is_dir()) if (root / "notebooks").is_dir() else []
    for extra in sorted(set(present) - set(expected)):
        problems.append(f"notebooks/{extra} has no source in solutions/ (delete it or add the solution).")
    with tempfile.TemporaryDirectory() as tmp:
        for ch in expected:
            check_metadata(root / "solutions" / ch / f"{ch}.ipynb")
        if expected:
            _generate(root, "*", Path(tmp))
        for ch in expected:
            cmp = filecmp.dircmp(Path(tmp) / ch, root / "notebooks" / ch) if (root / "notebooks" / ch).is_dir() else None
            if cmp is None:
                problems.append(f"notebooks/{ch} is missing.")
                continue
            stack = [(cmp, "")]
            while stack:
                d, prefix = stack.pop()
                for name in d.left_only:
                    problems.append(f"notebooks/{ch}/{prefix}{name} is missing.")
                for name in d.right_only:
                    problems.append(f"notebooks/{ch}/{prefix}{name} is not generated from solutions/.")
                _, mismatch, errors = filecmp.cmpfiles(d.left, d.right, d.common_files, shallow=False)
                for name in mismatch + errors:
                    problems.append(f"notebooks/{ch}/{prefix}{name} differs from its generated version.")
                for sub, subcmp in d.subdirs.items():
                    stack.append((subcmp, f"{prefix}{sub}/"))
    from .translation import edition_problems, stale_editions

    for lang in editions(root):
        problems += stale_editions(lang, root) + edition_problems(lang, root)
    return problems
