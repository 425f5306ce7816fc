"""The trusted side of grading: reference records from the instructor's notebook, and verdicts.

A graded test cell's hidden region only records what the student's functions return
(``course_utils.records``). This module, which runs in the autograder's process and never in a
student's kernel:

* removes the ``### BEGIN REFERENCE`` … ``### END REFERENCE`` blocks of the hidden tests before a
  submission runs (:func:`strip_reference_blocks`): what they compute never enters a student's
  kernel;
* executes the instructor's **source** notebook (solutions in the answer cells, reference blocks
  kept) once per source version, in a kernel of its own, and keeps the records of each test cell
  (:func:`reference_records`), cached on disk under a key made of the notebook's bytes, the course
  code and the library versions, in a folder the sandbox hides from submissions;
* compares a submission's records with them (:func:`course_utils.records.verify_cell`), with the
  tolerances of the reference run.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

import nbformat

from course_utils.paths import repo_root
from course_utils.records import MIME, RECORD_ENV

BEGIN_TESTS, END_TESTS = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
BEGIN_REF, END_REF = "### BEGIN REFERENCE", "### END REFERENCE"
REFERENCES_ENV = "LLM_COURSE_REFERENCES"     # cache folder (default: <course root>/.llm-course/references)
COURSE_PRIVATE = ".llm-course"               # under the course root; hidden from submissions by the sandbox
_RECORD_CALL = re.compile(r"^\s*record\(", re.M)


def _meta(cell: Any) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_test_cell(cell: Any) -> bool:
    meta = _meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def split_reference_blocks(source: str) -> tuple[str, str]:
    """``(source without its reference blocks, what the blocks hold)``; marker lines in neither."""
    outside: list[str] = []
    inside_blocks: list[str] = []
    inside = False
    for line in source.splitlines(keepends=True):
        s = line.strip()
        if s == BEGIN_REF:
            inside = True
        elif s == END_REF:
            inside = False
        else:
            (inside_blocks if inside else outside).append(line)
    return "".join(outside), "".join(inside_blocks)


def strip_reference_blocks(source: str) -> str:
    """``source`` without its reference blocks (marker lines included): what a submission's kernel runs."""
    return split_reference_blocks(source)[0]


def hidden_region(source: str) -> str:
    """The hidden-test region of a test cell (markers excluded), reference blocks removed."""
    lines = source.splitlines(keepends=True)
    stripped = [ln.strip() for ln in lines]
    if BEGIN_TESTS not in stripped or END_TESTS not in stripped:
        return ""
    b, e = stripped.index(BEGIN_TESTS), stripped.index(END_TESTS)
    return strip_reference_blocks("".join(lines[b + 1:e]))


def source_problems(source: str) -> list[str]:
    """What is wrong with a test cell's source under the record protocol (empty: nothing).

    A hidden region that records at least one value; reference blocks balanced and inside it.
    """
    lines = [ln.strip() for ln in source.splitlines()]
    problems: list[str] = []
    if lines.count(BEGIN_TESTS) != 1 or lines.count(END_TESTS) != 1:
        return ["needs exactly one hidden-test region (### BEGIN HIDDEN TESTS / ### END HIDDEN TESTS)"]
    b, e = lines.index(BEGIN_TESTS), lines.index(END_TESTS)
    if e < b:
        return ["hidden-test markers out of order"]
    depth = 0
    for i, ln in enumerate(lines):
        if ln in (BEGIN_REF, END_REF):
            if not b < i < e:
                problems.append("a reference marker outside the hidden-test region")
            depth += 1 if ln == BEGIN_REF else -1
            if depth not in (0, 1):
                problems.append("reference blocks unbalanced or nested")
    if depth:
        problems.append("a reference block is not closed")
    from course_tools.probe import END_PROBE, PROBE_RE
    inside_ref = inside_probe = False
    for i, ln in enumerate(lines):
        if ln in (BEGIN_REF, END_REF):
            inside_ref = ln == BEGIN_REF
        elif PROBE_RE.match(ln) or ln == END_PROBE:
            opening = ln != END_PROBE
            if not b < i < e or inside_ref:
                problems.append("a probe marker outside the hidden-test region or inside a reference block")
            if opening == inside_probe:
                problems.append("probe blocks unbalanced or nested")
            inside_probe = opening
    if inside_probe:
        problems.append("a probe block is not closed")
    hidden = hidden_region(source)
    if not _RECORD_CALL.search(hidden):
        problems.append("the hidden region records nothing outside its reference blocks (record(...))")
    return problems


def records_by_cell(nb: Any) -> dict[str, list[Any]]:
    """The record payloads of every test cell of an executed notebook, by grade id."""
    out: dict[str, list[Any]] = {}
    for cell in nb.cells:
        if is_test_cell(cell):
            out[_meta(cell)["grade_id"]] = [o["data"][MIME] for o in cell.get("outputs", [])
                                            if o.get("output_type") in ("display_data", "execute_result")
                                            and MIME in o.get("data", {})]
    return out


def _fingerprint(source_nb: Path) -> str:
    h = hashlib.sha256(source_nb.read_bytes())
    for f in sorted((repo_root() / "course_utils").glob("*.py")):
        h.update(f.name.encode() + f.read_bytes())
    for dist in ("torch", "transformers", "numpy", "peft", "trl", "bitsandbytes", "gguf", "tokenizers"):
        try:
            h.update(f"{dist}=={metadata.version(dist)}".encode())
        except metadata.PackageNotFoundError:
            pass
    for var in ("LLM_COURSE_CI", "LLM_COURSE_OFFLINE", "HF_HUB_OFFLINE", "NBGRADER_EXECUTION"):
        h.update(f"{var}={os.environ.get(var, '')}".encode())
    return h.hexdigest()[:32]


def cache_folder(course_root: Path) -> Path:
    """Where reference records are kept (``$LLM_COURSE_REFERENCES`` or ``<course>/.llm-course/references``)."""
    env = os.environ.get(REFERENCES_ENV)
    return Path(env).resolve() if env else (course_root / COURSE_PRIVATE / "references").resolve()


def execute_sandboxed(nb: Any, folder: Path, *, kernel_manager_class: Any = None, timeout: int = 600,
                      config: Any = None, log: Any = None, ignore: tuple[str, ...] = (".ipynb_checkpoints", "*.py"),
                      prefix: str = "llm-course-reference-") -> Any:
    """Execute ``nb`` in place, as the autograder would (records on, ``NBGRADER_EXECUTION`` set), in a
    sandboxed kernel whose working directory is a copy of ``folder``; returns ``nb``."""
    from nbclient import NotebookClient

    from course_tools.sandbox import SandboxedKernelManager

    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        work = Path(tmp) / (folder.name or "work")
        shutil.copytree(folder, work, ignore=shutil.ignore_patterns(*ignore))
        old = {k: os.environ.get(k) for k in ("NBGRADER_EXECUTION", RECORD_ENV)}
        os.environ.setdefault("NBGRADER_EXECUTION", "autograde")
        os.environ[RECORD_ENV] = "1"
        try:
            kw: dict[str, Any] = {"config": config} if config is not None else {}
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                                    kernel_manager_class=kernel_manager_class or SandboxedKernelManager,
                                    resources={"metadata": {"path": str(work)}}, **kw)
            if log is not None:
                client.log = log
            client.execute(cwd=str(work))
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return nb


def execute_source(source_nb: Path, *, timeout: int = 600, config: Any = None, log: Any = None) -> Any:
    """Execute the instructor's notebook (reference blocks kept) in a sandboxed kernel; the executed notebook."""
    return execute_sandboxed(nbformat.read(source_nb, as_version=4), source_nb.parent, timeout=timeout,
                             config=config, log=log)


def reference_records(source_nb: Path, course_root: Path, *, timeout: int = 600, config: Any = None,
                      log: Any = None) -> dict[str, list[Any]]:
    """The records of every test cell of the instructor's notebook (cached; computed once per version).

    Raises ``RuntimeError`` when a test cell fails in the reference run or records nothing: the
    source notebook is broken and no submission can be graded against it.
    """
    folder = cache_folder(course_root)
    path = folder / f"{source_nb.stem}-{_fingerprint(source_nb)}.json"
    if path.is_file():
        return json.loads(path.read_text())
    nb = execute_source(source_nb, timeout=timeout, config=config, log=log)
    problems = []
    for cell in nb.cells:
        if is_test_cell(cell):
            gid = _meta(cell)["grade_id"]
            errors = [f"{o.get('ename')}: {str(o.get('evalue'))[:300]}" for o in cell.get("outputs", [])
                      if o.get("output_type") == "error"]
            if errors:
                problems.append(f"test cell {gid} failed in the reference run: {errors[0]}")
    recs = json.loads(json.dumps(records_by_cell(nb)))
    problems += [f"test cell {gid} records nothing in the reference run" for gid, r in recs.items() if not r]
    if not problems:   # the solution must also pass the checks that remove a library (course_tools/probe.py)
        from course_tools.probe import PROBE_SUFFIX, probe_reference, run_probe
        from course_utils.records import verify_cell

        probe_recs, probe_errors, plan = run_probe(nb, nb, source_nb.parent, config=config, log=log)
        for gid in plan:
            got = json.loads(json.dumps(probe_recs.get(gid, [])))
            recs[gid + PROBE_SUFFIX] = probe_reference(recs[gid], got)
            bad, _ = verify_cell(got, recs[gid + PROBE_SUFFIX])
            if bad or not got:
                problems.append(f"the probe block of {gid} (without {', '.join(plan[gid])}) fails on the solution: "
                                f"{(probe_errors.get(gid) or bad or ['records nothing'])[:2]}")
    if problems:
        raise RuntimeError(f"reference run of {source_nb}: " + "; ".join(problems))
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(recs))
    tmp.replace(path)
    return recs
