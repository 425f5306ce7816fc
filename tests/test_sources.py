"""Chapter sources are reviewable text (chapters/NN/NN.py) and never reach students.

* every chapter's percent script agrees with its solution notebook (cell types, sources, nbgrader
  metadata, tags, ids), and an edit to the script alone is caught;
* a one-line change to a hidden test is a one-line diff of the script;
* nbgrader never releases a script, even one placed next to the solution notebook, and jupytext
  pairs only solutions/ (a paired student notebook would write its solutions to disk);
* the package split: course_utils (what notebooks import) never imports course_tools (instructor
  and CI tooling), the chapters import only course_utils, and neither course_utils nor course_tools
  has an import cycle (course_tools.editions is the edition layer under release and translation).
"""
from __future__ import annotations

import ast
import difflib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_tools import authoring
from course_tools.release import chapters

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = chapters(ROOT)


def test_every_chapter_has_a_script_and_nothing_else_is_in_chapters():
    assert CHAPTERS, "no chapters found"
    for ch in CHAPTERS:
        assert authoring.script_path(ch, ROOT).is_file(), f"chapters/{ch}/{ch}.py is missing"
    files = [p for p in (ROOT / "chapters").rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    extra = sorted(str(p.relative_to(ROOT)) for p in files if p != authoring.script_path(p.parent.name, ROOT))
    assert not extra, f"chapters/ holds files that are not chapter scripts: {extra}"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_script_and_notebook_agree(chapter):
    problems = authoring.sync_problems(chapter, ROOT)
    assert not problems, "\n".join(problems)


def _copy_chapter(tmp_path: Path, chapter: str) -> Path:
    root = tmp_path / "course"
    for sub in ("chapters", "solutions"):
        (root / sub / chapter).mkdir(parents=True)
    shutil.copy(authoring.script_path(chapter, ROOT), authoring.script_path(chapter, root))
    shutil.copy(authoring.notebook_path(chapter, ROOT), authoring.notebook_path(chapter, root))
    return root


def test_a_script_edited_without_rebuilding_is_caught(tmp_path):
    root = _copy_chapter(tmp_path, "05_rope")
    script = authoring.script_path("05_rope", root)
    text = script.read_text(encoding="utf-8")
    assert authoring.sync_problems("05_rope", root) == []
    script.write_text(text.replace("check_close(", "check_close( ", 1), encoding="utf-8")
    problems = authoring.sync_problems("05_rope", root)
    assert problems and "source" in problems[0] and "llm-course build 05_rope" in problems[0], problems
    # a changed tag or nbgrader field is caught too
    script.write_text(text.replace('"points": 2', '"points": 5', 1), encoding="utf-8")
    assert any("nbgrader" in p for p in authoring.sync_problems("05_rope", root))
    # rebuilding (without executing) brings them back in sync and keeps the outputs of other cells
    authoring.build("05_rope", run=False, root=root)
    assert authoring.sync_problems("05_rope", root) == []
    before = nbformat.read(authoring.notebook_path("05_rope", ROOT), as_version=4)
    after = nbformat.read(authoring.notebook_path("05_rope", root), as_version=4)
    kept = [a.outputs == b.outputs for a, b in zip(before.cells, after.cells) if a.cell_type == "code"]
    assert all(kept), "build --no-run dropped the outputs of cells whose source did not change"


def test_a_one_line_hidden_test_change_is_a_one_line_script_diff(tmp_path):
    root = _copy_chapter(tmp_path, "05_rope")
    nbp = authoring.notebook_path("05_rope", root)
    nb = nbformat.read(nbp, as_version=4)
    cell = next(c for c in nb.cells if "BEGIN HIDDEN TESTS" in c.source)
    lines = cell.source.splitlines()
    i = next(k for k, line in enumerate(lines) if "manual_seed(" in line)
    lines[i] = lines[i].replace("manual_seed(", "manual_seed(1 + ", 1)
    cell.source = "\n".join(lines)
    nbformat.write(nb, nbp)
    script = authoring.script_path("05_rope", root)
    old = script.read_text(encoding="utf-8").splitlines()
    authoring.export("05_rope", root)
    new = script.read_text(encoding="utf-8").splitlines()
    changed = [d for d in difflib.unified_diff(old, new, lineterm="", n=0)
               if d[:1] in "+-" and not d.startswith(("+++", "---"))]
    assert len(changed) == 2 and "manual_seed(1 + " in changed[1], changed


def test_nbgrader_never_releases_a_script(tmp_path):
    """Even a script copied into solutions/NN/ stays out of the student release."""
    root = _copy_chapter(tmp_path, "05_rope")
    shutil.copy(ROOT / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copy(authoring.script_path("05_rope", ROOT), root / "solutions" / "05_rope" / "05_rope.py")
    (root / "solutions" / "05_rope" / "notes.md").write_text("answers\n")
    res = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "05_rope", "--no-db", "--force",
                          f"--CourseDirectory.root={root}", "--log-level=WARN"],
                         cwd=root, capture_output=True, text=True, env={**os.environ, "LLM_COURSE_NBGRADER_ROOT": str(root)})
    assert res.returncode == 0, res.stderr
    released = sorted(p.name for p in (root / "notebooks" / "05_rope").iterdir())
    assert released == ["05_rope.ipynb"], f"nbgrader released {released}"


def test_student_notebooks_hold_only_notebooks():
    for ch in CHAPTERS:
        files = sorted(p.name for p in (ROOT / "notebooks" / ch).rglob("*") if p.is_file())
        assert files == [f"{ch}.ipynb"], f"notebooks/{ch} holds {files}: only the student notebook belongs there"


def test_jupytext_pairs_only_the_solution_notebooks():
    from jupytext.config import find_jupytext_configuration_file, load_jupytext_configuration_file

    cfg_file = find_jupytext_configuration_file(str(ROOT / "notebooks" / "05_rope"))
    assert cfg_file and Path(cfg_file).resolve() == ROOT / "jupytext.toml", cfg_file
    cfg = load_jupytext_configuration_file(cfg_file)
    assert cfg.default_formats(str(ROOT / "notebooks" / "05_rope" / "05_rope.ipynb")) is None, \
        "jupytext.toml pairs student notebooks: saving one would write its solutions next to it"
    fmts = cfg.default_formats(str(ROOT / "solutions" / "05_rope" / "05_rope.ipynb"))
    assert fmts and "chapters///py:percent" in fmts, fmts


# --- the package split ----------------------------------------------------------------------

def _imports(source: str, package: str = "") -> set[str]:
    """Every module a source imports, anywhere in it (lazy imports inside functions included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x / from .x import y
                base = package if node.module is None else f"{package}.{node.module}"
                found.update(f"{base}.{a.name}" if node.module is None else base for a in node.names)
            elif node.module:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def test_course_utils_never_imports_the_instructor_side():
    for f in sorted((ROOT / "course_utils").glob("*.py")):
        bad = sorted(m for m in _imports(f.read_text(encoding="utf-8"), "course_utils") if m.split(".")[0] == "course_tools")
        assert not bad, f"course_utils/{f.name} imports {bad}: notebooks' helpers must not depend on course_tools"


def test_chapters_import_only_course_utils():
    for ch in CHAPTERS:
        nb = authoring.read_script(authoring.script_path(ch, ROOT))
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            src = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
            bad = [m for m in _imports(src) if m.split(".")[0] == "course_tools"]
            assert not bad, f"{ch} cell {cell['id']} imports {bad}: notebooks import course_utils only"


def _assert_no_import_cycle(package: str) -> None:
    """No cycle among the top-level modules of ``package`` (lazy imports inside functions included)."""
    mods = {f.stem: f for f in (ROOT / package).glob("*.py") if f.stem != "__init__"}
    graph = {m: sorted({i.split(".")[1] for i in _imports(f.read_text(encoding="utf-8"), package)
                        if i.startswith(f"{package}.") and i.split(".")[1] in mods and i.split(".")[1] != m})
             for m, f in mods.items()}
    seen: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        if seen.get(m) == 1:
            raise AssertionError(f"import cycle in {package}: {' -> '.join(path + [m])}")
        if seen.get(m) == 2:
            return
        seen[m] = 1
        for n in graph[m]:
            visit(n, path + [m])
        seen[m] = 2

    for m in graph:
        visit(m, [])


def test_course_utils_has_no_import_cycle():
    _assert_no_import_cycle("course_utils")


def test_course_tools_has_no_import_cycle():
    """Issue 47: release and translation imported each other (translation reached into
    ``release._generate``); the edition layer is ``course_tools/editions.py``, which imports nothing
    of course_tools, translation builds on it, release on both."""
    _assert_no_import_cycle("course_tools")
    editions = _imports((ROOT / "course_tools" / "editions.py").read_text(encoding="utf-8"), "course_tools")
    assert not [m for m in editions if m.split(".")[0] == "course_tools"], editions
    translation = _imports((ROOT / "course_tools" / "translation.py").read_text(encoding="utf-8"), "course_tools")
    assert not [m for m in translation if m.startswith("course_tools.release")], translation


def test_build_without_running_keeps_outputs_when_a_cell_is_inserted(tmp_path):
    root = _copy_chapter(tmp_path, "05_rope")
    script = authoring.script_path("05_rope", root)
    text = script.read_text(encoding="utf-8")
    script.write_text(text.replace("# %% [markdown]", "# %% [markdown]\n# An inserted note.\n\n# %% [markdown]", 1),
                      encoding="utf-8")
    authoring.build("05_rope", run=False, root=root)
    before = nbformat.read(authoring.notebook_path("05_rope", ROOT), as_version=4)
    after = nbformat.read(authoring.notebook_path("05_rope", root), as_version=4)
    assert len(after.cells) == len(before.cells) + 1
    outs = lambda nb: [c.outputs for c in nb.cells if c.cell_type == "code"]  # noqa: E731
    assert outs(after) == outs(before), "inserting a cell dropped the outputs of cells after it"


def test_build_without_running_keeps_a_test_cell_changed_only_in_its_hidden_region(tmp_path):
    """A hidden check added or changed needs no full-mode rebuild: the visible part made the outputs.
    A change to the visible part still drops them (the notebook is then stamped incomplete)."""
    root = _copy_chapter(tmp_path, "05_rope")
    script = authoring.script_path("05_rope", root)
    text = script.read_text(encoding="utf-8")
    hidden = text.replace("### END HIDDEN TESTS", "_extra_hidden_check = 1\n### END HIDDEN TESTS", 1)
    assert hidden != text
    script.write_text(hidden, encoding="utf-8")
    authoring.build("05_rope", run=False, root=root)
    before = nbformat.read(authoring.notebook_path("05_rope", ROOT), as_version=4)
    after = nbformat.read(authoring.notebook_path("05_rope", root), as_version=4)
    changed = [i for i, (a, b) in enumerate(zip(before.cells, after.cells)) if a.source != b.source]
    assert len(changed) == 1 and "_extra_hidden_check" in after.cells[changed[0]].source
    outs = lambda nb: [c.outputs for c in nb.cells if c.cell_type == "code"]  # noqa: E731
    assert outs(after) == outs(before), "a hidden-only change dropped the test cell's outputs"
    assert authoring.outputs_mode(after) == authoring.outputs_mode(before) != authoring.INCOMPLETE
    # the visible part changed: that cell is re-run (no outputs kept), the notebook incomplete
    i = changed[0]
    assert after.cells[i].execution_count == before.cells[i].execution_count is not None
    script.write_text(hidden.replace("### BEGIN HIDDEN TESTS", "pass\n### BEGIN HIDDEN TESTS", 1), encoding="utf-8")
    authoring.build("05_rope", run=False, root=root)
    again = nbformat.read(authoring.notebook_path("05_rope", root), as_version=4)
    assert authoring.outputs_mode(again) == authoring.INCOMPLETE
    assert again.cells[i].execution_count is None and not again.cells[i].outputs
