"""Autograder round trip: prove that a chapter grades the way an instructor expects.

For one chapter, in a temporary nbgrader course directory (with a gradebook database):

* ``solution``: the student notebook with every answer cell filled from ``solutions/`` must get
  full marks on every autograded test cell, even when a library writes to stderr in test cells;
* ``blank``: the untouched student notebook must get 0 on every autograded cell without
  crashing the autograder, even after the student tagged test cells ``skip-execution`` and
  deleted one of them;
* ``wrong_*``: plausible wrong answers (``tests/wrong_answers/<chapter>.py``) must lose the
  points of the test cells they name.

To keep the suite fast, variants that replace different cells and name different test cells
are graded together in one submission (``separate=True`` grades each alone, as
``llm-course selftest --separate`` does). Grouping cannot hide a missed wrong answer behind
another one, because every test cell *not* named by a group's variants must keep full marks:
a wrong answer that leaks into another exercise's test is reported. A variant with
``"alone": True`` is always graded by itself.

Used by ``tests/test_notebooks.py`` and ``llm-course selftest``.
"""
from __future__ import annotations

import copy
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .paths import repo_root

NOISY_CELL = (
    "# (round-trip check) simulate a library that writes warnings to stderr in every later cell\n"
    "import sys as _sys\n"
    "get_ipython().events.register('post_run_cell', lambda *_: print('SomeLibWarning: harmless', file=_sys.stderr))\n"
)


@dataclass
class Variant:
    """One wrong submission: cells replaced and the test cells that must lose points."""

    name: str
    cells: dict[str, Any]
    loses: list[str]
    alone: bool = False


@dataclass
class RoundTripResult:
    chapter: str
    scores: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)  # student -> cell -> (score, max)
    problems: list[str] = field(default_factory=list)
    log: str = ""


def _nbgrader_meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def load_variants(chapter: str, root: Path | None = None) -> list[Variant]:
    """Read ``tests/wrong_answers/<chapter>.py`` (a ``VARIANTS`` list of dicts)."""
    root = root or repo_root()
    path = root / "tests" / "wrong_answers" / f"{chapter}.py"
    if not path.is_file():
        return []
    ns = runpy.run_path(str(path))
    return [Variant(v["name"], v["cells"], list(v["loses"]), bool(v.get("alone", False))) for v in ns["VARIANTS"]]


def group_variants(variants: list[Variant], separate: bool = False) -> list[list[Variant]]:
    """Greedy grouping of variants whose replaced cells and targeted test cells are disjoint."""
    groups: list[list[Variant]] = []
    shared: list[list[Variant]] = []  # the groups that may take more variants
    for v in variants:
        if separate or v.alone:
            groups.append([v])
            continue
        for g in shared:
            if not {c for w in g for c in w.cells} & set(v.cells) and not {t for w in g for t in w.loses} & set(v.loses):
                g.append(v)
                break
        else:
            shared.append([v])
            groups.append(shared[-1])
    return groups


def _fill(student: dict, source: dict, replace: dict[str, Any] | None = None) -> dict:
    """Student notebook with answer cells copied from the source notebook (optionally replaced)."""
    replace = replace or {}
    by_id = {_nbgrader_meta(c).get("grade_id"): c for c in source["cells"] if _nbgrader_meta(c).get("solution")}
    nb = copy.deepcopy(student)
    unknown = set(replace) - set(by_id)
    if unknown:
        raise KeyError(f"wrong-answer variant names unknown solution cells: {sorted(unknown)}")
    for cell in nb["cells"]:
        gid = _nbgrader_meta(cell).get("grade_id")
        if _nbgrader_meta(cell).get("solution") and gid in by_id:
            src = "".join(by_id[gid]["source"]) if isinstance(by_id[gid]["source"], list) else by_id[gid]["source"]
            spec = replace.get(gid)
            if isinstance(spec, str):
                src = spec
            elif spec is not None:
                for old, new in spec:
                    if old not in src:
                        raise ValueError(f"variant substitution {old!r} not found in cell {gid}")
                    src = src.replace(old, new)
            cell["source"] = src
    return nb


def _first_error(path: Path) -> str:
    """``ename: evalue`` of the first error output in an autograded notebook (for messages)."""
    try:
        nb = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return f"(no autograded notebook: {exc})"
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                return f"cell {i}: {out.get('ename')}: {str(out.get('evalue'))[:300]}"
    return "(none recorded)"


def _cheat(student: dict) -> dict:
    """Blank notebook plus two cheats: skip-execution on every test cell, and one test cell deleted."""
    nb = copy.deepcopy(student)
    tests = [c for c in nb["cells"] if _nbgrader_meta(c).get("grade") and not _nbgrader_meta(c).get("solution")]
    for c in tests:
        c.setdefault("metadata", {}).setdefault("tags", []).append("skip-execution")
    if tests:
        nb["cells"].remove(tests[-1])
    return nb


def _with_noise(nb: dict) -> dict:
    nb = copy.deepcopy(nb)
    first_code = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code")
    nb["cells"].insert(first_code + 1, {"cell_type": "code", "execution_count": None, "metadata": {},
                                         "outputs": [], "source": NOISY_CELL})
    return nb


def round_trip(chapter: str, workdir: Path | None = None, timeout: int = 1500,
               separate: bool = False) -> RoundTripResult:
    """Run the round trip for ``chapter`` and return scores and problems (empty = pass)."""
    root = repo_root()
    result = RoundTripResult(chapter)
    tmp_ctx = tempfile.TemporaryDirectory(prefix=f"autograde-{chapter}-") if workdir is None else None
    course = Path(tmp_ctx.name if tmp_ctx else workdir)
    sockdir: str | None = None
    try:
        shutil.copytree(root / "solutions" / chapter, course / "solutions" / chapter)
        # nbgrader runs the `alembic` executable (gradebook migrations) from PATH: put this
        # interpreter's scripts folder first, so it works without an activated virtualenv.
        scripts = str(Path(sys.executable).parent)
        env = dict(os.environ, LLM_COURSE_NBGRADER_ROOT=str(course),
                   PATH=scripts + os.pathsep + os.environ.get("PATH", ""))
        env.setdefault("LLM_COURSE_CI", "1")
        base = [sys.executable, "-m", "nbgrader"]
        shutil.copy(root / "nbgrader_config.py", course / "nbgrader_config.py")
        cfg = [f"--CourseDirectory.root={course}", "--log-level=WARN",
               # The other pytest worker starts kernels too: a failed kernel start (a TCP port
               # taken between jupyter_client's pick and the kernel's bind) is retried, and on
               # POSIX kernels talk over IPC sockets in a private folder (no ports at all).
               "--Execute.execute_retries=2"]
        if os.name == "posix":
            sockdir = tempfile.mkdtemp(prefix="nbk-")
            cfg += ["--KernelManager.transport=ipc", f"--KernelManager.ip={os.path.join(sockdir, 'k')}"]

        def run(*args: str) -> None:
            res = subprocess.run([*base, *args, *cfg], cwd=course, env=env, capture_output=True, text=True,
                                 timeout=timeout)
            result.log += f"$ nbgrader {' '.join(args)}\n{res.stdout}{res.stderr}\n"
            if res.returncode != 0:
                raise RuntimeError(f"nbgrader {' '.join(args)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}")

        run("generate_assignment", chapter, "--force")
        source = json.loads((course / "solutions" / chapter / f"{chapter}.ipynb").read_text())
        student = json.loads((course / "notebooks" / chapter / f"{chapter}.ipynb").read_text())
        tests = {_nbgrader_meta(c)["grade_id"]: c for c in source["cells"]
                 if _nbgrader_meta(c).get("grade") and not _nbgrader_meta(c).get("solution")}
        variants = load_variants(chapter, root)
        submissions: dict[str, dict] = {
            "solution": _with_noise(_fill(student, source)),
            "blank": _cheat(student),
        }
        groups = group_variants(variants, separate)
        for i, g in enumerate(groups):
            cells = {k: val for v in g for k, val in v.cells.items()}
            submissions[f"wrong_{i:02d}"] = _fill(student, source, cells)
        for who, nb in submissions.items():
            d = course / "submitted" / who / chapter
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{chapter}.ipynb").write_text(json.dumps(nb, indent=1))
        run("autograde", chapter, "--force")

        from nbgrader.api import Gradebook

        with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
            for who in submissions:
                nbsub = gb.find_submission_notebook(chapter, chapter, who)
                result.scores[who] = {g.name: (float(g.score or 0.0), float(g.max_score)) for g in nbsub.grades
                                      if g.name in tests}
        sol, blank = result.scores["solution"], result.scores["blank"]
        for gid, (score, mx) in sol.items():
            if score < mx:
                result.problems.append(f"solution: test cell {gid} scored {score}/{mx} (expected full marks)")
        if any(score < mx for score, mx in sol.values()):
            result.problems.append("solution: first error: " + _first_error(
                course / "autograded" / "solution" / chapter / f"{chapter}.ipynb"))
        for gid, (score, mx) in blank.items():
            if score != 0:
                result.problems.append(f"blank notebook: test cell {gid} scored {score}/{mx} (expected 0)")
        for i, g in enumerate(groups):
            got = result.scores[f"wrong_{i:02d}"]
            for v in g:
                for gid in v.loses:
                    if gid not in got:
                        result.problems.append(f"variant {v.name}: no test cell {gid}")
                    elif got[gid][0] >= got[gid][1]:
                        result.problems.append(f"variant {v.name}: test cell {gid} still got full marks")
            if len(g) > 1:
                targeted = {t for v in g for t in v.loses}
                for gid, (score, mx) in got.items():
                    if gid not in targeted and score < mx:
                        result.problems.append(
                            f"variants {[v.name for v in g]} (graded together) also lost points in {gid}: "
                            "a wrong answer leaks into another exercise's test; make the tests independent "
                            'or mark the variant "alone": True')
        untested = [g for g in tests if tests[g]["cell_type"] == "code" and not any(g in v.loses for v in variants)]
        if untested:
            result.problems.append(f"no wrong-answer variant targets test cell(s) {untested}")
        return result
    finally:
        if tmp_ctx is not None:
            tmp_ctx.cleanup()
        if sockdir is not None:
            shutil.rmtree(sockdir, ignore_errors=True)
