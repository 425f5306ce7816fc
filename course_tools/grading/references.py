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

import fcntl
import hashlib
import json
import os
from importlib import metadata
from pathlib import Path
from typing import Any

import nbformat

from course_tools.grading.cells import _meta, is_test_cell, records_by_cell
from course_tools.grading.probe import PROBE_SUFFIX, probe_reference, run_probe
from course_tools.grading.run import execute_sandboxed
from course_utils.paths import repo_root

REFERENCES_ENV = "LLM_COURSE_REFERENCES"     # cache folder (default: <course root>/.llm-course/references)
# reference runs that failed in this process (one nbgrader command grades every submission)
_FAILED: dict[str, str] = {}
COURSE_PRIVATE = ".llm-course"               # under the course root; hidden from submissions by the sandbox


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
    if str(path) in _FAILED:      # the same broken source, again for the next submission: say so at once
        raise RuntimeError(_FAILED[str(path)])
    if path.is_file():
        return json.loads(path.read_text())
    # one reference run per version, also when several graders (pytest workers, --jobs, cluster
    # tasks sharing a cache) need it at once: the others wait for it and read the cache
    folder.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            return json.loads(path.read_text())
        return _compute_records(source_nb, path, timeout=timeout, config=config, log=log)


def _compute_records(source_nb: Path, path: Path, *, timeout: int, config: Any, log: Any) -> dict[str, list[Any]]:
    """Run the reference (and its probe) and write the records to ``path``; see :func:`reference_records`."""
    folder = path.parent
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
    if problems:   # a setup cell that failed first (e.g. a cache the sandbox cannot write) is the cause
        from course_tools.classroom import reference_setup_problem

        setup = reference_setup_problem(nb)
        if setup:
            problems.insert(0, setup)
    if not problems:   # the solution must also pass the checks that remove a library (course_tools/probe.py)
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
        _FAILED[str(path)] = f"reference run of {source_nb}: " + "; ".join(problems)
        raise RuntimeError(_FAILED[str(path)])
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(recs))
    tmp.replace(path)
    return recs
