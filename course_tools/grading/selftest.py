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
from typing import Any, Callable

from course_utils.paths import cache_dir, repo_root

# IPython startup file of the grading kernels: a library that writes a warning to stderr after
# every cell (stock nbgrader would give 0 to a correct test cell for that).
STDERR_NOISE = (
    "import sys as _sys\n"
    "get_ipython().events.register('post_run_cell', lambda *_: print('SomeLibWarning: harmless', file=_sys.stderr))\n"
)


@dataclass
class Variant:
    """One wrong submission: cells replaced and the test cells that must lose points.

    ``loses == []`` marks an *honest alternative*: another right answer (one a reader wrote from the
    student notebook's text alone, say); it must keep full marks on every test cell that no other
    variant graded with it targets.
    """

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


def fewest_groups(variants: list[Variant], separate: bool = False) -> int:
    """A lower bound on the submissions any grouping of ``variants`` needs under the rules above.

    Variants that replace the same answer cell, or lose the same test cell, never share a
    submission, and an ``alone`` variant shares none: at least as many submissions as the most
    variants on one cell, plus one per ``alone`` variant. :func:`group_variants` reaches it on
    every chapter (``tests/test_grading.py``): one autograde process grades all of a chapter's
    submissions, and there is no submission to save.
    """
    if separate:
        return len(variants)
    per_key: dict[str, int] = {}
    for v in variants:
        if not v.alone:
            for key in [f"cell:{c}" for c in v.cells] + [f"test:{t}" for t in v.loses]:
                per_key[key] = per_key.get(key, 0) + 1
    others = [v for v in variants if not v.alone]
    return (max(per_key.values(), default=1 if others else 0)) + sum(v.alone for v in variants)


def _test_cells(nb: dict) -> list[dict]:
    """The autograded test cells of a notebook (graded, not an answer)."""
    return [c for c in nb["cells"] if _nbgrader_meta(c).get("grade") and not _nbgrader_meta(c).get("solution")]


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
    """Blank notebook plus two cheats: execution-changing tags on every test cell, one test cell deleted."""
    nb = copy.deepcopy(student)
    tests = _test_cells(nb)
    for c in tests:
        c.setdefault("metadata", {}).setdefault("tags", []).extend(["skip-execution", "raises-exception"])
    if tests:
        nb["cells"].remove(tests[-1])
    return nb


def autograde_submissions(course: Path, source_folder: Path, chapter: str,
                          build: Callable[[dict, dict], dict[str, dict]], timeout: int = 1500,
                          log: list[str] | None = None, extra_args: list[str] | None = None,
                          files: dict[str, dict[str, bytes]] | None = None) -> dict[str, dict[str, tuple[float, float]]]:
    """Grade submissions of ``source_folder/<chapter>.ipynb`` with stock nbgrader and the course config.

    In the (empty) folder ``course``: copy the source and ``nbgrader_config.py``, run
    ``generate_assignment``, call ``build(student_nb, source_nb)`` for the submissions (student id
    -> notebook dict), run ``autograde`` and return ``{student: {test cell: (score, max)}}`` for
    the autograded test cells. The grading kernels start with an IPython startup file that writes
    a warning to stderr after every cell (:data:`STDERR_NOISE`). nbgrader's output is appended to
    ``log``. The autograded notebooks stay in ``course/autograded``. ``extra_args`` are added to
    every nbgrader command (e.g. ``--GradingLimits.memory_mb=1024``); ``files`` adds files to a
    student's submitted folder (``{student: {name: bytes}}``).
    """
    log = log if log is not None else []
    shutil.copytree(source_folder, course / "solutions" / chapter)
    shutil.copy(repo_root() / "nbgrader_config.py", course / "nbgrader_config.py")
    startup = course / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-stderr-noise.py").write_text(STDERR_NOISE)
    # nbgrader runs the `alembic` executable (gradebook migrations) from PATH: put this
    # interpreter's scripts folder first, so it works without an activated virtualenv.
    scripts = str(Path(sys.executable).parent)
    env = dict(os.environ, LLM_COURSE_NBGRADER_ROOT=str(course), IPYTHONDIR=str(course / "ipython"),
               PATH=scripts + os.pathsep + os.environ.get("PATH", ""), LLM_COURSE_SANDBOX_STARTUP=str(startup))
    env.setdefault("LLM_COURSE_CI", "1")
    # reference records of the instructor's notebooks, shared by every round trip of this machine
    # (keyed by the notebook, the course code and the library versions; hidden from submissions)
    env.setdefault("LLM_COURSE_REFERENCES", str(cache_dir() / "references"))
    cfg = [f"--CourseDirectory.root={course}", "--log-level=WARN",
           # The other pytest worker starts kernels too: a failed kernel start (a TCP port
           # taken between jupyter_client's pick and the kernel's bind) is retried, and on
           # POSIX kernels talk over IPC sockets in a private folder (no ports at all).
           "--Execute.execute_retries=2", *(extra_args or [])]
    sockdir = tempfile.mkdtemp(prefix="nbk-") if os.name == "posix" else None
    if sockdir:
        cfg += ["--KernelManager.transport=ipc", f"--KernelManager.ip={os.path.join(sockdir, 'k')}"]

    def run(*args: str) -> None:
        res = subprocess.run([sys.executable, "-m", "nbgrader", *args, *cfg], cwd=course, env=env,
                             capture_output=True, text=True, timeout=timeout)
        log.append(f"$ nbgrader {' '.join(args)}\n{res.stdout}{res.stderr}\n")
        if res.returncode != 0:
            raise RuntimeError(f"nbgrader {' '.join(args)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}")

    try:
        run("generate_assignment", chapter, "--force")
        source = json.loads((course / "solutions" / chapter / f"{chapter}.ipynb").read_text())
        student = json.loads((course / "notebooks" / chapter / f"{chapter}.ipynb").read_text())
        tests = {_nbgrader_meta(c)["grade_id"] for c in _test_cells(source)}
        submissions = build(student, source)
        for who, nb in submissions.items():
            d = course / "submitted" / who / chapter
            d.mkdir(parents=True, exist_ok=True)
            (d / f"{chapter}.ipynb").write_text(json.dumps(nb, indent=1))
            for name, data in (files or {}).get(who, {}).items():
                (d / name).write_bytes(data)
        run("autograde", chapter, "--force")
    finally:
        if sockdir:
            shutil.rmtree(sockdir, ignore_errors=True)

    from nbgrader.api import Gradebook

    scores: dict[str, dict[str, tuple[float, float]]] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for who in submissions:
            nbsub = gb.find_submission_notebook(chapter, chapter, who)
            scores[who] = {g.name: (float(g.score or 0.0), float(g.max_score)) for g in nbsub.grades
                           if g.name in tests}
    return scores


def generate_feedback(course: Path, chapter: str, timeout: int = 300) -> None:
    """``nbgrader generate_feedback`` for ``chapter`` in a course made by :func:`autograde_submissions`."""
    env = dict(os.environ, LLM_COURSE_NBGRADER_ROOT=str(course),
               PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    res = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", chapter, "--force",
                          f"--CourseDirectory.root={course}"], cwd=course, env=env, capture_output=True,
                         text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"nbgrader generate_feedback {chapter} exited {res.returncode}:\n{res.stdout}\n{res.stderr}")


def round_trip(chapter: str, workdir: Path | None = None, timeout: int = 1500,
               separate: bool = False, attacks: bool = False) -> RoundTripResult:
    """Run the round trip for ``chapter`` and return scores and problems (empty = pass).

    ``attacks``: also grade the cheating submissions of :mod:`course_tools.grading.attacks`, built on the
    first group of wrong answers (each must score 0 on every test cell that group loses). nbgrader
    grades the submissions in the order of their ids, so the ``attack_*`` ones run before
    ``solution``, whose full marks then also show that no attack carried harm over to the next
    kernel (until issue 46 a second copy of the solution was graded last for that).
    """
    root = repo_root()
    result = RoundTripResult(chapter)
    tmp_ctx = tempfile.TemporaryDirectory(prefix=f"autograde-{chapter}-") if workdir is None else None
    course = Path(tmp_ctx.name if tmp_ctx else workdir)
    variants = load_variants(chapter, root)
    groups = group_variants(variants, separate)
    tests: dict[str, dict] = {}

    def build(student: dict, source: dict) -> dict[str, dict]:
        tests.update({_nbgrader_meta(c)["grade_id"]: c for c in _test_cells(source)})
        subs = {"solution": _fill(student, source), "blank": _cheat(student)}
        for i, g in enumerate(groups):
            subs[f"wrong_{i:02d}"] = _fill(student, source, {k: val for v in g for k, val in v.cells.items()})
        if attacks and groups:
            from course_tools.grading.attacks import attack_submissions, discover_comparison_path

            targets = sorted({p for places in discover_comparison_path()[0].values() for p in places})
            attacks_made = attack_submissions(subs["wrong_00"], source, targets)
            late = [who for who in attacks_made if not who < "solution"]
            if late:   # nbgrader's order (sorted ids): the solution must be graded after every attack
                raise ValueError(f"attack submissions {late} would be graded after the solution")
            subs.update(attacks_made)
        return subs

    log: list[str] = []
    try:
        try:
            result.scores = autograde_submissions(course, root / "solutions" / chapter, chapter, build,
                                                  timeout, log)
        finally:
            result.log = "".join(log)
        sol, blank = result.scores["solution"], result.scores["blank"]
        after = " after the attack submissions" if attacks and any(w.startswith("attack_") for w in result.scores) else ""
        for gid, (score, mx) in sol.items():
            if score < mx:
                result.problems.append(f"solution: test cell {gid} scored {score}/{mx} (expected full marks{after})")
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
            targeted = {t for v in g for t in v.loses}
            if len(g) > 1 or not targeted:
                for gid, (score, mx) in got.items():
                    if gid not in targeted and score < mx:
                        if not targeted:  # only honest alternatives in this submission
                            result.problems.append(
                                f"honest answer(s) {[v.name for v in g]}: test cell {gid} scored {score}/{mx} "
                                "(an honest solution written from the text must get full marks)")
                            continue
                        result.problems.append(
                            f"variants {[v.name for v in g]} (graded together) also lost points in {gid}: "
                            "a wrong answer leaks into another exercise's test (or an honest answer lost points); "
                            'make the tests independent or mark the variant "alone": True')
        for who, got in result.scores.items():
            if who.startswith("attack_"):
                for gid in {t for v in groups[0] for t in v.loses}:
                    if got.get(gid, (0, 0))[0] != 0:
                        result.problems.append(f"{who}: test cell {gid} scored {got[gid][0]}/{got[gid][1]} with wrong "
                                               f"answers (expected 0)")
        untested = [g for g in tests if tests[g]["cell_type"] == "code" and not any(g in v.loses for v in variants)]
        if untested:
            result.problems.append(f"no wrong-answer variant targets test cell(s) {untested}")
        return result
    finally:
        if tmp_ctx is not None:
            tmp_ctx.cleanup()
