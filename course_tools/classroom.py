"""The classroom cycle with stock nbgrader: what ``llm-course register / autograde / prefetch`` do.

* :func:`ignore_patterns` — ``CourseDirectory.ignore`` without a plain ``*.txt``: nbgrader's
  exchange keeps each submission's ``timestamp.txt`` (late penalties) and
  ``submission_secret.txt`` (``release_feedback`` needs both), while every other ``.txt`` file of
  a source folder still stays out of a release (:func:`ignore_all_except`).
* :func:`register` — put assignments, notebooks and their graded cells into the gradebook from the
  source notebooks (nbgrader's own ``generate_assignment`` with its ``SaveCells`` step), writing
  the release into a temporary folder: ``notebooks/`` (the committed release) is never touched.
* :func:`autograde` — ``nbgrader autograde`` of many submissions at once: the students are split
  into ``jobs`` groups, each graded by one stock ``nbgrader autograde`` process (course config,
  its own kernel socket folder), all writing into one gradebook (SQLite with a busy timeout, or
  any SQLAlchemy URL such as PostgreSQL); a student whose run failed is retried alone.
* :func:`build_caches` — everything a sandboxed grading kernel reads from the course cache but
  cannot write there (the sandbox mounts ``/`` read-only): the converted SmolLM2 and the
  Shakespeare GPT-2, plus the corpus.
* :func:`setup_cell_failures` / :func:`reference_setup_problem` — the errors of a reference run
  outside the test cells, named by cell, with what to run when it is the course cache (for the
  message of ``course_tools.grading.references.reference_records``).
"""
from __future__ import annotations

import ast
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from course_tools.grading.privacy import DB_URL_ENV


# --------------------------------------------------------------------------- ignore patterns

def ignore_all_except(suffix: str, keep: Iterable[str]) -> list[str]:
    """fnmatch patterns that match every file name ending in ``suffix`` except the names in ``keep``.

    ``ignore_all_except(".txt", ["timestamp.txt", "submission_secret.txt"])`` matches ``notes.txt``,
    ``t.txt``, ``timestamps.txt`` … but neither kept name (nbgrader's exchange writes both into
    every submission, and ``collect`` / ``release_feedback`` need them; a ``*.txt`` ignore pattern
    dropped them). fnmatch has no negation, so this spells the complement over the prefix tree of
    the kept stems: at each prefix, any other next character; past a leaf, anything longer; and
    every prefix that is not itself kept.
    """
    stems = sorted({k[: -len(suffix)] for k in keep if k.endswith(suffix)})
    if not stems:
        return [f"*{suffix}"]
    for stem in stems:
        if not stem.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"only letters, digits, '_' and '-' in a kept name: {stem!r}")
    prefixes = sorted({st[:i] for st in stems for i in range(len(st) + 1)})
    pats = []
    for p in prefixes:
        nxt = sorted({st[len(p)] for st in stems if st.startswith(p) and len(st) > len(p)})
        pats.append(f"{p}[!{''.join(nxt)}]*{suffix}" if nxt else f"{p}?*{suffix}")
        if p not in stems:
            pats.append(f"{p}{suffix}")
    return pats


KEPT_TEXT = ("timestamp.txt", "submission_secret.txt")   # written by nbgrader's exchange


def ignore_patterns() -> list[str]:
    """``CourseDirectory.ignore`` of the course: no scripts or text reach students, timestamps travel."""
    return [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.py", "*.md",
            *ignore_all_except(".txt", KEPT_TEXT)]


def is_ignored(name: str, patterns: Sequence[str] | None = None) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in (patterns if patterns is not None else ignore_patterns()))


# --------------------------------------------------------------------------- running nbgrader

def course_root() -> Path:
    """The nbgrader course root: ``$LLM_COURSE_NBGRADER_ROOT``, else the working directory when it
    holds an ``nbgrader_config.py`` (where nbgrader itself reads its config), else this checkout."""
    from course_utils.paths import repo_root

    if os.environ.get("LLM_COURSE_NBGRADER_ROOT"):
        return Path(os.environ["LLM_COURSE_NBGRADER_ROOT"]).resolve()
    if (Path.cwd() / "nbgrader_config.py").is_file():
        return Path.cwd().resolve()
    return repo_root().resolve()


def nbgrader_env(root: Path | None = None, **extra: str) -> dict[str, str]:
    """The environment nbgrader needs: this interpreter's scripts first on PATH (nbgrader runs
    ``alembic`` from PATH when it creates a gradebook; without it the gradebook is half created)."""
    scripts = str(Path(sys.executable).parent)
    env = dict(os.environ, PATH=scripts + os.pathsep + os.environ.get("PATH", ""), **extra)
    if root is not None:
        env["LLM_COURSE_NBGRADER_ROOT"] = str(root)
    return env


def nbgrader(args: Sequence[str], root: Path, *, extra: Sequence[str] = (), env: dict[str, str] | None = None,
             timeout: float | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """``python -m nbgrader ARGS`` run in the course root with its config."""
    cmd = [sys.executable, "-m", "nbgrader", *args, *extra]
    res = subprocess.run(cmd, cwd=root, env=env or nbgrader_env(root), capture_output=True, text=True,
                         timeout=timeout)
    if check and res.returncode != 0:
        raise RuntimeError(f"nbgrader {' '.join(args)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}")
    return res


def _coursedir(root: Path) -> Any:
    """nbgrader's ``CourseDirectory`` with the course config of ``root`` loaded in this process."""
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import PyFileConfigLoader

    cfg_file = root / "nbgrader_config.py"
    cfg = PyFileConfigLoader(cfg_file.name, str(root)).load_config() if cfg_file.is_file() else None
    cd = CourseDirectory(config=cfg) if cfg is not None else CourseDirectory()
    cd.root = str(root)
    return cd


def db_url(root: Path, explicit: str | None = None) -> str:
    """The gradebook URL nbgrader uses for ``root`` (its config, or ``explicit``)."""
    return explicit or _coursedir(root).db_url


def check_config_takes_db_url(root: Path, url: str) -> None:
    """Raise ``RuntimeError`` unless the course config of ``root`` reads the gradebook URL from
    ``$LLM_COURSE_DB_URL`` (how :func:`register` and :func:`autograde` hand it to nbgrader: a config
    copied before that would send a worker to its own default gradebook instead)."""
    from course_tools.grading import privacy

    saved_env, saved_taken = os.environ.get(DB_URL_ENV), privacy._taken_url
    os.environ[DB_URL_ENV] = url
    try:
        got = _coursedir(root).db_url
    finally:
        privacy._taken_url = saved_taken
        os.environ.pop(DB_URL_ENV, None)
        if saved_env is not None:
            os.environ[DB_URL_ENV] = saved_env
    if got != url:
        raise RuntimeError(f"{root / 'nbgrader_config.py'} does not read the gradebook URL from ${DB_URL_ENV} "
                           "(an older copy of the course config?): copy the course's nbgrader_config.py there, or "
                           "set c.CourseDirectory.db_url in it and leave out --db")


def course_id(root: Path) -> str:
    """``CourseDirectory.course_id`` of the course at ``root`` (gradebook rows carry it)."""
    return _coursedir(root).course_id or "default_course"


def sqlite_busy_url(url: str, seconds: int = 120) -> str:
    """A SQLite URL with a busy timeout: concurrent graders wait for the write lock instead of
    failing with ``database is locked`` (pysqlite's default is 5 s)."""
    if url.startswith("sqlite") and "timeout=" not in url:
        return url + ("&" if "?" in url else "?") + f"timeout={seconds}"
    return url


# --------------------------------------------------------------------------- register

def source_assignments(root: Path) -> list[str]:
    src = root / "solutions"
    return sorted(p.name for p in src.iterdir() if p.is_dir() and any(p.glob("*.ipynb"))) if src.is_dir() else []


def register(assignments: Sequence[str], root: Path, *, duedate: str | None = None,
             db: str | None = None, log=print) -> None:
    """Add each assignment, its notebooks and graded cells to the gradebook, from the source.

    Runs nbgrader's own ``generate_assignment --force`` (whose ``SaveCells`` step writes the
    gradebook) with ``CourseDirectory.release_directory`` set to a temporary folder, so the
    committed release ``notebooks/`` is neither read nor written. nbgrader refuses (and so does
    this) to add or remove cells of a notebook that already has submissions. ``duedate`` (any
    format nbgrader accepts, e.g. ``"2026-12-01 17:00:00 UTC"``) is stored with the assignment.
    """
    # the URL in the environment, never on the command line (every account reads those in /proc)
    url = db_url(root, db)
    if db:
        check_config_takes_db_url(root, url)
    env = nbgrader_env(root, **{DB_URL_ENV: url})
    for a in assignments:
        if not (root / "solutions" / a).is_dir():
            raise FileNotFoundError(f"no source folder solutions/{a} under {root}")
        with tempfile.TemporaryDirectory(prefix="llm-course-register-") as tmp:
            t0 = time.perf_counter()
            nbgrader(["generate_assignment", a, "--force", "--create", "--log-level=WARN",
                      f"--CourseDirectory.release_directory={tmp}"], root, env=env)
        if duedate:   # what `nbgrader db assignment add NN --duedate=...` does, without a second start-up
            from nbgrader.api import Gradebook
            from nbgrader.utils import parse_utc

            with Gradebook(db_url(root, db), course_id(root)) as gb:
                gb.update_or_create_assignment(a, duedate=parse_utc(duedate))
        log(f"registered {a} in the gradebook ({time.perf_counter() - t0:.1f} s)"
            + (f", due {duedate}" if duedate else ""))


# --------------------------------------------------------------------------- parallel autograde

@dataclass
class AutogradeRun:
    assignment: str
    students: list[str]
    jobs: int
    seconds: float = 0.0
    failed: dict[str, str] = field(default_factory=dict)   # student -> last lines of nbgrader's output
    logs: list[str] = field(default_factory=list)


def submitted_students(root: Path, assignment: str) -> list[str]:
    sub = root / "submitted"
    return sorted(p.name for p in sub.iterdir() if (p / assignment).is_dir()) if sub.is_dir() else []


def _graded(root: Path, url: str, assignment: str, students: Sequence[str],
            autograded: Path | None = None) -> set[str]:
    """Students whose submission of ``assignment`` is in the gradebook with an autograded notebook
    (under ``autograded``, default ``<root>/autograded``)."""
    from nbgrader.api import Gradebook, MissingEntry

    done = set()
    with Gradebook(url, course_id(root)) as gb:
        for s in students:
            try:
                gb.find_submission(assignment, s)
            except MissingEntry:
                continue
            if ((autograded or root / "autograded") / s / assignment).is_dir():
                done.add(s)
    return done


def autograde(assignment: str, root: Path, *, students: Sequence[str] | None = None, jobs: int = 2,
              force: bool = True, db: str | None = None, extra: Sequence[str] = (), retries: int = 1,
              timeout: float | None = None, log=print, autograded: Path | None = None) -> AutogradeRun:
    """Grade the submissions of ``assignment`` with ``jobs`` stock ``nbgrader autograde`` processes.

    The students are dealt round-robin into ``jobs`` groups; each group is one nbgrader process
    (``--CourseDirectory.student_id_exclude`` = everyone else), so nbgrader's start-up is paid once
    per worker, not once per submission. Before the workers start, the gradebook is opened once
    (created and stamped here, not by racing workers), the assignment must be registered, and the
    reference run is done once (``llm-course references``) so that workers do not each repeat it.
    ``autograded``: where ``extra`` points ``CourseDirectory.autograded_directory`` (a cluster
    shard grades into a folder of its own: ``course_tools/cluster``); default ``<root>/autograded``.
    """
    from nbgrader.api import Gradebook, MissingEntry

    students = sorted(students) if students else submitted_students(root, assignment)
    run = AutogradeRun(assignment, list(students), max(1, min(jobs, len(students) or 1)))
    if not students:
        log(f"no submissions of {assignment} under {root / 'submitted'}")
        return run
    url = sqlite_busy_url(db_url(root, db))
    scripts = str(Path(sys.executable).parent)   # a new SQLite gradebook runs `alembic` from PATH
    if scripts not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
    with Gradebook(url, course_id(root)) as gb:   # creates the gradebook (one process), fails early if unregistered
        try:
            gb.find_assignment(assignment)
        except MissingEntry:
            raise RuntimeError(f"{assignment} is not in the gradebook: run `llm-course register {assignment}` "
                               "first") from None
    from course_tools.grading.course_code import check_same_course_code

    check_same_course_code(course_root=root)   # grader and kernels import the same course code, or no student is graded
    if db:
        check_config_takes_db_url(root, url)
    _reference_run(assignment, root, log)
    base = ["autograde", assignment, "--log-level=WARN", *(["--force"] if force else []), *extra]
    groups = [students[i::run.jobs] for i in range(run.jobs)]
    # every student nbgrader would otherwise grade: those with a submission folder (not only the
    # ones asked for: with --student C, excluding "everyone but C" among [C] excluded no one)
    everyone = sorted(set(submitted_students(root, assignment)) | set(students))
    t0 = time.perf_counter()
    _run_groups(groups, everyone, base, root, run, timeout, url)
    done = _graded(root, url, assignment, students, autograded)
    for attempt in range(retries):
        again = [s for s in students if s not in done]
        if not again:
            break
        log(f"retrying {len(again)} submission(s) one at a time: {', '.join(again)}")
        _run_groups([[s] for s in again], everyone, base, root, run, timeout, url)
        done = _graded(root, url, assignment, students, autograded)
    run.seconds = time.perf_counter() - t0
    for s in students:
        if s not in done:
            run.failed.setdefault(s, "not graded (see nbgrader's output above)")
        else:
            run.failed.pop(s, None)
    return run


def _run_groups(groups: list[list[str]], everyone: Sequence[str], base: list[str], root: Path,
                run: AutogradeRun, timeout: float | None, url: str) -> None:
    """Start one nbgrader process per group, at most ``run.jobs`` at a time; wait for all.

    ``everyone``: every student with a submission of the assignment; each process excludes all of
    them but its group (``CourseDirectory.student_id_exclude``), so it grades exactly its group.
    ``url``: the gradebook, handed over in ``$LLM_COURSE_DB_URL`` (readable in ``/proc`` by this
    account only; the course config takes it out of the environment before any kernel starts).
    """
    queue = list(groups)
    active: list[tuple[subprocess.Popen, list[str], str, Any, float]] = []
    env = nbgrader_env(root, **{DB_URL_ENV: url})
    # One BLAS/OpenMP pool per worker, sized to its share of the cores (N workers each starting
    # torch with every core oversubscribe the machine); an explicit setting wins.
    threads = str(max(1, (os.cpu_count() or 1) // run.jobs))
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.setdefault(var, threads)
    while queue or active:
        while queue and len(active) < run.jobs:
            group = queue.pop(0)
            others = [s for s in everyone if s not in group]
            sock = tempfile.mkdtemp(prefix="nbk-")   # kernels talk over IPC sockets: no port races
            args = [*base, f"--CourseDirectory.student_id_exclude={','.join(others)}",
                    "--KernelManager.transport=ipc", f"--KernelManager.ip={os.path.join(sock, 'k')}",
                    "--Execute.execute_retries=2"]
            out = tempfile.TemporaryFile(mode="w+")
            proc = subprocess.Popen([sys.executable, "-m", "nbgrader", *args], cwd=root, env=env,
                                    stdout=out, stderr=subprocess.STDOUT, text=True)
            active.append((proc, group, sock, out, time.monotonic()))
        time.sleep(0.2)
        for item in list(active):
            proc, group, sock, out, started = item
            if proc.poll() is None:
                if timeout is not None and time.monotonic() - started > timeout:
                    proc.kill()   # counted as failed below; its students are retried alone
                continue
            active.remove(item)
            shutil.rmtree(sock, ignore_errors=True)
            out.seek(0)
            text = out.read()
            out.close()
            run.logs.append(f"$ nbgrader autograde ({', '.join(group)}): exit {proc.returncode}\n{text}")
            if proc.returncode != 0:
                for s in group:
                    run.failed[s] = text[-2000:]


def _reference_run(assignment: str, root: Path, log) -> None:
    """The trusted reference run, once, before the workers (cached; a no-op when current)."""
    src = root / "solutions" / assignment / f"{assignment}.ipynb"
    if not src.is_file():
        return
    try:
        from course_tools.grading.references import reference_records
    except ImportError:   # pragma: no cover - a course config without reference records
        return
    old = os.environ.get("NBGRADER_EXECUTION")
    os.environ.setdefault("NBGRADER_EXECUTION", "autograde")
    try:
        t0 = time.perf_counter()
        reference_records(src, root)
        log(f"reference run of {assignment}: ready ({time.perf_counter() - t0:.1f} s)")
    finally:
        if old is None:
            os.environ.pop("NBGRADER_EXECUTION", None)


def gradebook_scores(url: str, assignment: str, course: str = "llm-course") -> dict[str, dict[str, Any]]:
    """``{student: {"score", "max_score", "timestamp", "late_penalty"}}`` for one assignment."""
    from nbgrader.api import Gradebook

    out: dict[str, dict[str, Any]] = {}
    with Gradebook(url, course) as gb:
        for sub in gb.assignment_submissions(assignment):
            out[sub.student.id] = {"score": float(sub.score), "max_score": float(sub.max_score),
                                   "timestamp": sub.timestamp, "late_penalty": float(sub.late_submission_penalty or 0)}
    return out


# --------------------------------------------------------------------------- caches

def build_caches(log=print) -> list[str]:
    """Build every artefact a sandboxed grading kernel reads from the course cache (no network).

    The sandbox mounts the course cache read-only, so a kernel that finds one missing fails
    trying to write it. Returns what was built (or found current).
    """
    from course_utils import data, shakespeare_gpt2, smollm2

    def progress(line: str) -> None:   # the long builds report their phases and steps (make install shows them)
        log(line)
        sys.stdout.flush()

    done = []
    for name, fn in (("Shakespeare corpus", lambda: data.shakespeare_dir()),
                     ("SmolLM2 (GGUF -> float32 safetensors)", lambda: smollm2.build(verbose=progress)),
                     ("Shakespeare GPT-2 (course-trained stand-in)", lambda: shakespeare_gpt2.build(verbose=progress))):
        t0 = time.perf_counter()
        path = Path(fn())
        _readable(path)
        done.append(f"{name}: {path} ({time.perf_counter() - t0:.1f} s)")
        log(done[-1])
    return done


def _readable(path: Path) -> None:
    """a+rX on a built artefact of the course cache: the sandboxed kernel may run as another user."""
    from course_utils.paths import cache_dir

    if not path.resolve().is_relative_to(cache_dir().resolve()):
        return
    for p in [path, *path.rglob("*")] if path.is_dir() else [path]:
        try:
            mode = p.stat().st_mode
            p.chmod(mode | 0o444 | (0o111 if p.is_dir() else 0))
        except OSError:
            pass


def missing_caches() -> list[str]:
    """The cached artefacts that are not built yet (what ``llm-course prefetch --offline`` builds)."""
    from course_utils import shakespeare_gpt2, smollm2

    out = []
    if not smollm2.is_built():
        out.append(f"SmolLM2 conversion ({smollm2.model_dir()})")
    if not shakespeare_gpt2.is_built():
        out.append(f"Shakespeare GPT-2 ({shakespeare_gpt2.model_dir()})")
    return out


# --------------------------------------------------------------------------- reference-run errors

def setup_cell_failures(nb: Any) -> list[str]:
    """``"cell N (id): Ename: message"`` for each non-test cell of an executed notebook that raised.

    A reference run whose setup failed (a missing model cache, a broken import) makes every test
    cell fail with a ``NameError``; the first failing non-test cell is the cause worth naming.
    """
    out = []
    for i, cell in enumerate(nb["cells"] if isinstance(nb, dict) else nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") != "code" or (meta.get("grade") and not meta.get("solution")):
            continue
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                gid = meta.get("grade_id") or cell.get("id") or ""
                stmt = raising_statement("".join(cell.get("source", "")), o.get("traceback") or [])
                out.append(f"cell {i}{f' ({gid})' if gid else ''} `{stmt}` raised {o.get('ename')}: "
                           f"{str(o.get('evalue'))[:300]}")
                break
    return out


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_CELL_FRAME = re.compile(r"(?:Cell In\s*\[[^\]]*\],\s*line\s*(\d+))|(?:Input In\s*\[[^\]]*\])|(?:<ipython-input-)")
_ARROW = re.compile(r"^-+>\s*(\d+)", re.M)


def raising_statement(source: str, traceback: Sequence[str], width: int = 120) -> str:
    """The statement of a cell that raised, from the cell's source and IPython's traceback.

    The traceback's first frame in the cell (``Cell In[4], line 7`` and its ``---->`` arrow)
    gives the line; the innermost statement of the source holding that line is quoted, on one
    line, at most ``width`` characters. Falls back to that line, then to the cell's first line.
    """
    line = None
    for entry in traceback:
        text = _ANSI.sub("", str(entry))
        m = _CELL_FRAME.search(text)
        if not m:
            continue
        arrow = _ARROW.search(text)
        line = int(m.group(1)) if m.group(1) else (int(arrow.group(1)) if arrow else None)
        if line is not None:
            break
    lines = source.splitlines()
    if line is None or not 1 <= line <= len(lines):
        first = (source.strip().splitlines() or [""])[0]
        return first[:width]
    text = lines[line - 1].strip()
    try:
        tree = ast.parse(source)
    except SyntaxError:   # IPython syntax (magics): the line itself
        tree = None
    if tree is not None:
        best = None
        for node in ast.walk(tree):
            if isinstance(node, ast.stmt) and node.lineno <= line <= (node.end_lineno or node.lineno):
                if best is None or (node.end_lineno or 0) - node.lineno <= (best.end_lineno or 0) - best.lineno:
                    best = node
        if best is not None and not isinstance(best, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                                                      ast.For, ast.While, ast.If, ast.With, ast.Try)):
            text = " ".join((ast.get_source_segment(source, best) or text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def reference_setup_problem(nb: Any) -> str | None:
    """The message a failed reference run should start with when a setup (non-test) cell failed:
    that cell and its error, and, when it is the course cache, what to run. ``None`` otherwise.

    For ``course_tools.grading.references.reference_records``: when ``problems`` is not empty,
    ``problems.insert(0, msg)`` with ``msg = reference_setup_problem(nb)`` if it is not ``None``.
    """
    found = setup_cell_failures(nb)
    if not found:
        return None
    msg = f"a setup cell failed before the tests: {found[0]}"
    from course_utils.paths import cache_dir

    if "Read-only file system" in found[0] or str(cache_dir()) in found[0] or "Permission denied" in found[0]:
        msg += (f" (the course cache {cache_dir()} is read-only for grading kernels: build it first with "
                "`llm-course prefetch --offline`, which `make install` runs)")
    return msg


def gradebook_json(url: str, assignment: str) -> str:   # pragma: no cover - a debugging aid
    return json.dumps(gradebook_scores(url, assignment), default=str, indent=1)
