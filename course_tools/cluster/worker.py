"""One array task: grade one shard of the manifest (``llm-course cluster work``).

The shard is graded by the same code as local grading — :func:`course_tools.classroom.autograde`,
i.e. stock ``nbgrader autograde`` processes with the course config (bubblewrap sandbox, limits,
reference records, verdicts) — into a node-local SQLite gradebook copied from the class's
template and a node-local ``autograded/`` folder. Only when the shard is done are they copied to
``results/<index>/`` on the shared file system, under a temporary name first, then renamed: a
task killed half-way leaves no result, so its shard counts as not graded.

A submission nbgrader cannot grade is that student's problem: it is recorded in the result with
the end of nbgrader's output, and the task still succeeds. The task fails (non-zero exit) only
when the shard as a whole cannot be graded: no isolation on the node, inputs changed since the
manifest was written, a reference run that fails.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from .manifest import Manifest, fingerprint


class ShardError(RuntimeError):
    """The shard as a whole cannot be graded here (the task exits non-zero with this message)."""


def task_index(offset: int = 0, index: int | None = None) -> int:
    """The manifest index this task grades: ``index`` if given, else ``offset + $SLURM_ARRAY_TASK_ID``
    (an array's task ids start at 0; arrays after the first carry the offset of their first shard)."""
    if index is not None:
        return index
    tid = os.environ.get("SLURM_ARRAY_TASK_ID")
    if tid is None:
        raise ShardError("no SLURM_ARRAY_TASK_ID in the environment: pass --index")
    return offset + int(tid)


_EXC = re.compile(r"^\s*([\w.]+(?:Error|Exception|Exit|Interrupt)): (.+)$")


def failure_reason(output: str) -> str:
    """The exception a failed ``nbgrader autograde`` ended with (``NotJSONError: Notebook does not
    appear to be JSON``…), else its last line: what the status shows for a student not graded."""
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = _EXC.match(ln)
        if m:
            return f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2)}"[:300]
    return lines[-1][:300] if lines else "not graded"


def _slurm_id() -> str | None:
    job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{job}_{task}" if job and task else os.environ.get("SLURM_JOB_ID")


def work(manifest_path: str | Path, index: int, *, jobs: int | None = None, log=print) -> dict[str, Any]:
    """Grade shard ``index``; returns its result (also written to ``results/<index>/result.json``)."""
    t_start = time.perf_counter()
    m = Manifest.load(manifest_path)
    if not 0 <= index < len(m.shards):
        raise ShardError(f"no shard {index}: the manifest has {len(m.shards)}")
    shard = m.shards[index]
    done = m.result(index)
    if done is not None:
        log(f"shard {index} ({shard.chapter}: {', '.join(shard.students)}): already graded from the same "
            f"inputs (fingerprint {shard.fingerprint}), nothing to do")
        return {**done, "skipped": True}
    from course_tools import classroom   # (after the check above: a skipped task imports neither torch nor nbgrader)
    from course_tools.grading import sandbox

    why = sandbox.probe()
    if why is not None:
        raise ShardError(f"refusing to grade on {socket.gethostname()} without the sandbox: {why}. A compute node "
                         "needs bubblewrap and unprivileged user namespaces (kernel.unprivileged_userns_clone=1, "
                         "user.max_user_namespaces > 0) or a root job (README: A class larger than one machine)")
    root = Path(m.root)
    template = m.template(shard.chapter)
    from .gradebook import structure_digest

    digest = structure_digest(f"sqlite:///{template}", m.course, shard.chapter)
    now = fingerprint(root, shard.chapter, shard.students, digest)
    if now != shard.fingerprint:
        raise ShardError(f"shard {index}: its inputs changed since the manifest was written (submissions, "
                         "source notebook, course code or gradebook): run `llm-course cluster submit` again")
    t0 = time.perf_counter()
    cpus = jobs or int(os.environ.get("SLURM_CPUS_PER_TASK") or os.environ.get("SLURM_CPUS_ON_NODE") or 1)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")   # one BLAS thread per nbgrader worker: the task has `cpus` cores
    with tempfile.TemporaryDirectory(prefix=f"llmc-shard{index:05d}-") as tmp:   # node-local ($TMPDIR)
        local = Path(tmp)
        shutil.copy(template, local / "gradebook.db")
        (local / "autograded").mkdir()
        url = f"sqlite:///{local / 'gradebook.db'}"
        t_grade = time.perf_counter()
        try:
            run = classroom.autograde(shard.chapter, root, students=shard.students, jobs=cpus, db=url,
                                      extra=[f"--CourseDirectory.autograded_directory={local / 'autograded'}"],
                                      autograded=local / "autograded", log=log)
        except RuntimeError as exc:   # e.g. the reference run failed: nothing of this shard can be graded
            raise ShardError(f"shard {index} ({shard.chapter}): {exc}") from exc
        students = {}
        for s in shard.students:
            if s in run.failed:
                reason = failure_reason(run.failed[s])
                if not any((root / "submitted" / s / shard.chapter).glob("*.ipynb")):
                    reason = f"no notebook in submitted/{s}/{shard.chapter}"
                students[s] = {"status": "failed", "reason": reason}
            else:
                students[s] = {"status": "graded"}
        result = {"index": index, "chapter": shard.chapter, "fingerprint": shard.fingerprint,
                  "students": students, "host": socket.gethostname(), "slurm": _slurm_id(),
                  "cpus": cpus, "seconds": round(time.perf_counter() - t0, 1),
                  # where a task's time goes: checks before grading (sandbox probe, fingerprint,
                  # template), grading (nbgrader's start-up included), publishing (set below)
                  "timings": {"setup_s": round(t_grade - t_start, 2), "grading_s": round(run.seconds, 2)},
                  "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (local / "result.json").write_text(json.dumps(result, indent=1))
        (local / "nbgrader.log").write_text("\n\n".join(run.logs))
        t_pub = time.perf_counter()
        dest = m.result_dir(index)
        stage = dest.parent / f".{dest.name}.{os.getpid()}.{socket.gethostname()}"
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(stage, ignore_errors=True)
        shutil.copytree(local, stage, symlinks=True)
        if dest.exists():   # a stale result (other inputs): replaced whole
            old = dest.parent / f".{dest.name}.old.{os.getpid()}"
            dest.rename(old)
            stage.rename(dest)
            shutil.rmtree(old, ignore_errors=True)
        else:
            stage.rename(dest)
        result["timings"]["publish_s"] = round(time.perf_counter() - t_pub, 2)
        (dest / "result.json").write_text(json.dumps(result, indent=1))
    graded = sum(v["status"] == "graded" for v in students.values())
    log(f"shard {index} ({shard.chapter}): graded {graded}/{len(students)} in {result['seconds']} s on "
        f"{result['host']}" + "".join(f"\n  FAILED {s}: {v['reason']}" for s, v in students.items()
                                      if v["status"] == "failed"))
    return result
