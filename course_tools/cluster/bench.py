"""Measure the Slurm path against ``llm-course autograde --jobs N`` on the same submissions.

    SLURM_CONF=... python -m course_tools.cluster.bench 05_rope --students 4 --jobs 2
    python -m course_tools.cluster.bench 05_rope --start-slurm     # root: a one-node Slurm of its own

Two temporary course roots with the same registration and submissions (the solution, ``--students``
times) and one reference cache. Times ``classroom.autograde(jobs=N)`` in one, and in the other the
cluster path end to end: ``prepare`` (manifest, templates), ``sbatch`` of N tasks of 1 core (shards of
students/N), the afterok merge job, until the merge is done. Then reruns one finished shard (a task
that finds its result and does nothing: the fixed cost of a task) and reads from Slurm where each
task's time went. Prints a JSON summary; the two gradebooks must be equal.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from course_tools import classroom
from course_tools.cluster import gradebook, localslurm, slurm
from course_tools.grading.selftest import _fill
from course_utils.paths import repo_root


def _secs(a: str, b: str) -> float | None:
    try:
        return (dt.datetime.fromisoformat(b) - dt.datetime.fromisoformat(a)).total_seconds()
    except ValueError:
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapter")
    ap.add_argument("--students", type=int, default=4)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--start-slurm", action="store_true", help="start a one-node Slurm for the run (root)")
    args = ap.parse_args(argv)
    out = measure(args.chapter, args.students, args.jobs, args.start_slurm)
    print(json.dumps(out, indent=1))
    return 0 if out["gradebooks_equal"] else 1


def measure(ch: str, students: int, jobs: int, start_slurm: bool = False) -> dict[str, object]:
    """The Slurm path against ``llm-course autograde --jobs`` on the same submissions (the module's
    docstring); the summary as a dict, ``ratio_slurm_over_local`` and where the difference went."""
    for k, v in (("HF_HUB_OFFLINE", "1"), ("LLM_COURSE_OFFLINE", "1"), ("LLM_COURSE_CI", "1")):
        os.environ.setdefault(k, v)
    base = Path(tempfile.mkdtemp(prefix=f"bench-cluster-{ch}-"))
    cluster = None
    try:
        if start_slurm:
            cluster = localslurm.start(base / "slurm")
            os.environ["SLURM_CONF"] = str(cluster.conf)
        os.environ["LLM_COURSE_REFERENCES"] = str(base / "references")
        local = base / "local"
        shutil.copytree(repo_root() / "solutions" / ch, local / "solutions" / ch)
        shutil.copy(repo_root() / "nbgrader_config.py", local / "nbgrader_config.py")
        classroom.register([ch], local, log=lambda *_: None)
        source = json.loads((repo_root() / "solutions" / ch / f"{ch}.ipynb").read_text())
        student = json.loads((repo_root() / "notebooks" / ch / f"{ch}.ipynb").read_text())
        for i in range(students):
            d = local / "submitted" / f"s{i:02d}" / ch
            d.mkdir(parents=True)
            (d / f"{ch}.ipynb").write_text(json.dumps(_fill(student, source)))
            (d / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
        remote = base / "cluster"
        shutil.copytree(local, remote)
        classroom._reference_run(ch, local, lambda *_: None)   # cached for both: neither path pays it
        out: dict[str, object] = {"chapter": ch, "students": students, "jobs": jobs,
                                  "cpus": os.cpu_count(), "load_before": os.getloadavg()}
        t0 = time.perf_counter()   # the whole command, as `llm-course autograde --jobs N` takes it
        run = classroom.autograde(ch, local, jobs=jobs, log=lambda *_: None)
        out["local_jobs_s"] = round(time.perf_counter() - t0, 1)
        out["local_grading_s"] = round(run.seconds, 1)
        out["load_mid"] = os.getloadavg()
        os.environ["LLM_COURSE_NBGRADER_ROOT"] = str(remote)
        t0 = time.perf_counter()
        m = slurm.prepare([ch], remote, remote / "cluster", shard_size=-(-students // jobs),
                          log=lambda *_: None)
        out["prepare_s"] = round(time.perf_counter() - t0, 1)
        submitted = slurm.submit(m, cpus=1, time_min=30, log=lambda *_: None)
        states = slurm.wait([j["job"] for j in submitted], timeout=1800, poll=1.0)
        out["slurm_s"] = round(time.perf_counter() - t0, 1)
        out["ratio_slurm_over_local"] = round(out["slurm_s"] / out["local_jobs_s"], 3)
        tasks = []
        for s in m.shards:
            res = m.result(s.index) or {}
            j = next(j for j in submitted if j["kind"] == "array" and s.index in j["indices"])
            st = states.get(f"{j['job']}_{s.index - j['offset']}", {})
            wall = _secs(st.get("start", ""), st.get("end", ""))
            tasks.append({"index": s.index, "students": len(s.students), "task_wall_s": wall,
                          "grading_s": res.get("timings", {}).get("grading_s"), "timings": res.get("timings")})
        out["tasks"] = tasks
        mj = submitted[-1]["job"]
        out["merge_job_wall_s"] = _secs(states.get(mj, {}).get("start", ""), states.get(mj, {}).get("end", ""))
        again = slurm.rerun(m, indices=[0], log=lambda *_: None)
        st2 = slurm.wait([again[0]["job"]], timeout=600, poll=1.0)
        rec = st2.get(f"{again[0]['job']}_0", {})
        out["skipped_task_wall_s"] = _secs(rec.get("start", ""), rec.get("end", ""))
        slurm.wait([again[-1]["job"]], timeout=600, poll=1.0)
        out["load_after"] = os.getloadavg()
        a = gradebook.dump(classroom.db_url(local), "llm-course", ch)
        b = gradebook.dump(classroom.db_url(remote), "llm-course", ch)
        out["gradebooks_equal"] = a == b and len(a) == students
        fixed = [t["task_wall_s"] - t["grading_s"] for t in tasks
                 if t["task_wall_s"] is not None and t["grading_s"] is not None]
        # where the difference went: what the tasks did besides grading, and the rest (prepare,
        # the tasks' start, the merge job and the waits between them)
        out["difference_s"] = round(out["slurm_s"] - out["local_jobs_s"], 1)
        out["task_overhead_s"] = round(max(fixed), 1) if fixed else None
        return out
    finally:
        if cluster is not None:
            localslurm.stop(cluster.folder)
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
