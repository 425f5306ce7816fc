"""The repository layout of COURSE_DESIGN.md, and where course_utils finds files."""
from pathlib import Path

import pytest

from course_utils import paths
from course_tools.release import chapters

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ["README.md", "CONTRIBUTING.md", "environment.yml", "pyproject.toml", "constraints.txt",
          "nbgrader_config.py", "Makefile", ".ci/run", "course_utils/__init__.py", "course_tools/__init__.py",
          "jupytext.toml", "assets/README.md"]


@pytest.mark.parametrize("rel", LAYOUT)
def test_layout_file_exists(rel):
    assert (ROOT / rel).is_file(), f"{rel} is missing from the checkout"


def test_every_solution_has_a_student_notebook_and_nothing_else():
    for ch in chapters(ROOT):
        assert (ROOT / "notebooks" / ch / f"{ch}.ipynb").is_file(), f"notebooks/{ch} missing: run llm-course release"
        extra = sorted(p.name for p in (ROOT / "solutions" / ch).iterdir() if p.name != f"{ch}.ipynb"
                       and p.name != ".ipynb_checkpoints")
        assert not extra, f"solutions/{ch} holds {extra}: nbgrader would copy them to students (use assets/)"


def test_repo_root_and_asset_path():
    assert paths.repo_root() == ROOT
    assert paths.asset_path("README.md") == ROOT / "assets" / "README.md"
    with pytest.raises(FileNotFoundError, match="git pull"):
        paths.asset_path("no_such_chapter/file.csv")


def test_cache_dir_follows_the_variable(monkeypatch, tmp_path):
    monkeypatch.setenv("LLM_COURSE_CACHE", str(tmp_path / "c"))
    assert paths.cache_dir() == tmp_path / "c" and (tmp_path / "c").is_dir()
    monkeypatch.delenv("LLM_COURSE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert paths.cache_dir() == tmp_path / "xdg" / "llm-course"
