"""Measure grading throughput: serial ``nbgrader autograde`` against ``llm-course autograde --jobs N``.

    python -m course_tools.bench_autograde 05_rope --students 8 --jobs 2

In a temporary course root (this checkout's ``nbgrader_config.py`` and ``solutions/<chapter>``),
registers the chapter, submits the solution as ``--students`` students, runs the reference run
once, then times: nbgrader's start-up alone (``autograde`` of a student who submitted nothing),
one submission alone, all of them in one stock ``nbgrader autograde`` process (serial), and all
of them with ``llm-course autograde --jobs N``. Prints a JSON summary.
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


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("chapter")
    ap.add_argument("--students", type=int, default=8)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--keep", action="store_true", help="keep the temporary course root")
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
        out["startup_s"] = _timed(lambda: classroom.nbgrader(
            ["autograde", ch, "--student", "nobody", "--force", "--log-level=WARN"], root, extra=ipc, check=False))
        out["one_submission_s"] = _timed(lambda: classroom.nbgrader(
            ["autograde", ch, "--student", names[0], "--force", "--log-level=WARN"], root, extra=ipc))
        out["serial_s"] = _timed(lambda: classroom.nbgrader(["autograde", ch, "--force", "--log-level=WARN"],
                                                            root, extra=ipc))
        run = classroom.autograde(ch, root, jobs=args.jobs, log=lambda *_: None)
        out["parallel_s"] = round(run.seconds, 1)
        out["parallel_failed"] = sorted(run.failed)
        out["speedup"] = round(out["serial_s"] / out["parallel_s"], 2)
        out["per_submission_serial_s"] = round((out["serial_s"] - out["startup_s"]) / args.students, 1)
        out["load_after"] = os.getloadavg()
        scores = classroom.gradebook_scores(classroom.sqlite_busy_url(classroom.db_url(root)), ch)
        out["all_full_marks"] = all(v["score"] == max(w["score"] for w in scores.values()) for v in scores.values()) \
            and len(scores) == args.students
        print(json.dumps(out, indent=1))
        shutil.rmtree(sock, ignore_errors=True)
        return 0 if not run.failed else 1
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
