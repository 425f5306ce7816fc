"""Measure grading throughput: serial ``nbgrader autograde`` against ``llm-course autograde --jobs N``.

    python -m course_tools.bench_autograde 05_rope --students 8 --jobs 2

In a temporary course root (this checkout's ``nbgrader_config.py`` and ``solutions/<chapter>``),
registers the chapter, submits the solution as ``--students`` students, runs the reference run
once, then times: one submission executed plainly (nbclient, no nbgrader, no sandbox: what the
grading adds is measured against it), nbgrader's start-up alone (``autograde`` of a student who
submitted nothing), one submission alone (twice: the first may start the pre-imported kernel
template, ``course_tools/grading/zygote.py``, the second finds it), all of them in one stock
``nbgrader autograde`` process (serial), and all of them with ``llm-course autograde --jobs N``
(twice: the workers' environment has its own template). ``speedup`` compares the serial run with
the second parallel run, both with their templates running; ``speedup_first`` with the first.

    python -m course_tools.bench_autograde 05_rope --students 8 --jobs 2 --slurm --start-slurm

adds, in the same run, the Slurm path against ``--jobs N`` on the same cores
(:func:`course_tools.cluster.bench.measure`, ``--slurm-students`` submissions: the ratio and
where the difference went). Prints a JSON summary, then the lines that answer the questions.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from course_tools import classroom
from course_tools.grading.selftest import _fill
from course_utils.paths import repo_root


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return round(time.perf_counter() - t0, 1)


def _plain_run(notebook: Path) -> None:
    """One submission executed as a student's own kernel would run it, as autograding sees it
    (``NBGRADER_EXECUTION=autograde``): a plain nbclient run, kernel start included, no nbgrader,
    no sandbox, in a copy of its folder."""
    import nbformat
    from nbclient import NotebookClient

    work = Path(tempfile.mkdtemp(prefix="bench-plain-"))
    try:
        shutil.copytree(notebook.parent, work, dirs_exist_ok=True)
        nb = nbformat.read(work / notebook.name, as_version=4)
        old = os.environ.get("NBGRADER_EXECUTION")
        os.environ["NBGRADER_EXECUTION"] = "autograde"
        try:
            NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                           resources={"metadata": {"path": str(work)}}).execute()
        finally:
            if old is None:
                os.environ.pop("NBGRADER_EXECUTION", None)
            else:
                os.environ["NBGRADER_EXECUTION"] = old
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _summary(out: dict) -> str:
    """The answers, one per line, from the JSON summary."""
    lines = [f"{out['chapter']}, {out['students']} submissions, {out['cpus']} CPUs, load before {out['load_before'][0]:.2f}",
             f"per submission: plain {out['plain_s']} s, graded {out['per_submission_serial_s']} s in a class "
             f"(serial, nbgrader's start-up {out['startup_s']} s apart)",
             f"one submission alone: {out['one_submission_again_s']} s "
             f"({out['one_submission_over_plain_s']:+} s against plain; {out['one_submission_s']} s starting the template)",
             f"--jobs {out['jobs']}: {out['parallel_again_s']} s against serial {out['serial_s']} s: "
             f"{out['speedup']}x ({out['speedup_first']}x starting the workers' template)",
             f"all full marks: {out['all_full_marks']}"]
    for sl in out.get("slurm", []):
        lines += [f"Slurm, {sl['students']} submissions in {sl['jobs']} one-core tasks: {sl['slurm_s']} s against "
                  f"--jobs {sl['jobs']} {sl['local_jobs_s']} s: ratio {sl['ratio_slurm_over_local']}",
                  f"  the difference {sl['difference_s']} s: prepare {sl['prepare_s']} s, a task's time besides "
                  f"grading up to {sl['task_overhead_s']} s, the merge job {sl['merge_job_wall_s']} s, the rest "
                  f"the scheduler's waits; a task with nothing to do {sl['skipped_task_wall_s']} s; "
                  f"gradebooks equal: {sl['gradebooks_equal']}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapter")
    ap.add_argument("--students", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the temporary course root")
    ap.add_argument("--slurm", action="store_true", help="also the Slurm path against --jobs (SLURM_CONF, or --start-slurm)")
    ap.add_argument("--start-slurm", action="store_true", help="start a one-node Slurm for it (root)")
    ap.add_argument("--slurm-students", default=None,
                    help="submissions for the Slurm part, comma-separated for several sizes (default: --students)")
    args = ap.parse_args(argv)
    ch = args.chapter
    for k, v in (("HF_HUB_OFFLINE", "1"), ("LLM_COURSE_OFFLINE", "1"), ("LLM_COURSE_CI", "1")):
        os.environ.setdefault(k, v)
    root = Path(tempfile.mkdtemp(prefix=f"bench-{ch}-"))
    try:
        shutil.copytree(repo_root() / "solutions" / ch, root / "solutions" / ch)
        shutil.copy(repo_root() / "nbgrader_config.py", root / "nbgrader_config.py")
        classroom.nbgrader(["generate_assignment", ch, "--force"], root)   # release + gradebook
        source = json.loads((root / "solutions" / ch / f"{ch}.ipynb").read_text())
        student = json.loads((root / "notebooks" / ch / f"{ch}.ipynb").read_text())
        names = [f"s{i:02d}" for i in range(args.students)]
        for s in names:
            d = root / "submitted" / s / ch
            d.mkdir(parents=True)
            (d / f"{ch}.ipynb").write_text(json.dumps(_fill(student, source)))
        classroom._reference_run(ch, root, print)
        sock = tempfile.mkdtemp(prefix="nbk-")
        ipc = ["--KernelManager.transport=ipc", f"--KernelManager.ip={os.path.join(sock, 'k')}"]
        out: dict[str, object] = {"chapter": ch, "students": args.students, "jobs": args.jobs,
                                  "cpus": os.cpu_count(), "load_before": os.getloadavg()}
        out["plain_s"] = _timed(lambda: _plain_run(root / "submitted" / names[0] / ch / f"{ch}.ipynb"))
        out["startup_s"] = _timed(lambda: classroom.nbgrader(
            ["autograde", ch, "--student", "nobody", "--force", "--log-level=WARN"], root, extra=ipc, check=False))
        out["one_submission_s"] = _timed(lambda: classroom.nbgrader(
            ["autograde", ch, "--student", names[0], "--force", "--log-level=WARN"], root, extra=ipc))
        # again: the kernel template (course_tools/grading/zygote.py) is now running, as in a class
        out["one_submission_again_s"] = _timed(lambda: classroom.nbgrader(
            ["autograde", ch, "--student", names[0], "--force", "--log-level=WARN"], root, extra=ipc))
        out["one_submission_over_plain_s"] = round(out["one_submission_again_s"] - out["plain_s"], 1)
        out["serial_s"] = _timed(lambda: classroom.nbgrader(["autograde", ch, "--force", "--log-level=WARN"],
                                                            root, extra=ipc))
        run = classroom.autograde(ch, root, jobs=args.jobs, log=lambda *_: None)
        out["parallel_s"] = round(run.seconds, 1)
        out["parallel_failed"] = sorted(run.failed)
        # again, with the workers' kernel template running (their environment, one BLAS thread each,
        # is not the serial run's, so the first parallel run starts a template of its own)
        run = classroom.autograde(ch, root, jobs=args.jobs, log=lambda *_: None)
        out["parallel_again_s"] = round(run.seconds, 1)
        out["parallel_failed"] = sorted(set(out["parallel_failed"]) | set(run.failed))
        out["speedup"] = round(out["serial_s"] / out["parallel_again_s"], 2)
        out["speedup_first"] = round(out["serial_s"] / out["parallel_s"], 2)
        out["per_submission_serial_s"] = round((out["serial_s"] - out["startup_s"]) / args.students, 1)
        out["load_after"] = os.getloadavg()
        scores = classroom.gradebook_scores(classroom.sqlite_busy_url(classroom.db_url(root)), ch)
        out["all_full_marks"] = all(v["score"] == max(w["score"] for w in scores.values()) for v in scores.values()) \
            and len(scores) == args.students
        shutil.rmtree(sock, ignore_errors=True)
        ok = not run.failed and bool(out["all_full_marks"])
        if args.slurm:
            from course_tools.cluster import bench as cluster_bench

            sizes = [int(n) for n in str(args.slurm_students or args.students).split(",")]
            out["slurm"] = [cluster_bench.measure(ch, n, args.jobs, args.start_slurm) for n in sizes]
            ok = ok and all(bool(r["gradebooks_equal"]) for r in out["slurm"])
        print(json.dumps(out, indent=1))
        print(_summary(out))
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
