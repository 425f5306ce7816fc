"""``llm-course cluster …``: grade a class as Slurm job arrays (README: "A class larger than one machine").

submit CH...   write the manifest (shards of collected submissions), sbatch one array per chapter
               (split at MaxArraySize) and a merge job that waits for them (afterok)
work M         one array task: grade shard offset+$SLURM_ARRAY_TASK_ID of manifest M (what the arrays run),
               each submission within its share of the task's time limit (--time-limit-s)
merge M        write every finished student into the gradebook (what the merge job runs; the only writer);
               exits 4 naming who is not graded yet (a later merge, after `rerun`, adds them)
status [DIR]   the class's state: per shard its Slurm task state and result; who is not graded and why
rerun [DIR]    resubmit only the shards without a result (or --index I ...) and a new merge job
local-slurm    start|stop a one-node Slurm on this machine (to try it; what tests/test_slurm.py runs)
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def _folder(arg: str | None) -> Path:
    from course_tools.classroom import course_root

    return Path(arg).resolve() if arg else course_root() / "cluster"


def _slurm_opts(args: argparse.Namespace) -> dict[str, Any]:
    return {"partition": args.partition, "account": args.account, "time_min": args.time, "mem_mb": args.mem,
            "cpus": args.cpus_per_task, "throttle": args.throttle, "array_limit": args.max_array_size,
            "sbatch_extra": args.sbatch_arg or (), "dry_run": args.dry_run}


def _shard_sizes(given: list[str] | None, chapters: list[str]) -> dict[str, int]:
    """``["4", "05_rope=1"]`` -> ``{every chapter: 4, "05_rope": 1}``."""
    out: dict[str, int] = {}
    for g in given or []:
        if "=" in g:
            ch, n = g.split("=", 1)
            out[ch] = int(n)
        else:
            out.update({ch: int(g) for ch in chapters if ch not in out})
    return out


def _submit(args: argparse.Namespace) -> int:
    from course_tools.classroom import course_root

    from .slurm import SlurmError, prepare, submit

    root = course_root()
    try:
        m = prepare(args.chapters, root, _folder(args.folder), db=args.db, students=args.student,
                    shard_size=_shard_sizes(args.shard_size, args.chapters), cpus=args.cpus_per_task or 1)
        jobs = submit(m, **_slurm_opts(args))
    except (RuntimeError, SlurmError) as exc:
        print(f"cluster submit refused: {exc}", file=sys.stderr)
        return 2
    arrays = [j for j in jobs if j["kind"] == "array"]
    print(f"submitted {len(arrays)} array(s), {sum(len(j['indices']) for j in arrays)} task(s), merge job "
          f"{jobs[-1]['job']}; follow with: llm-course cluster status {m.folder}")
    return 0


def _log(*parts: Any) -> None:
    """print, flushed at once: a task's log must hold what happened even if the task is killed next."""
    print(*parts, flush=True)


def _work(args: argparse.Namespace) -> int:
    from .safetext import safe
    from .worker import ShardError, ShardStopped, task_index, work

    try:
        work(args.manifest, task_index(args.offset, args.index), jobs=args.jobs, time_limit_s=args.time_limit_s,
             log=_log)
    except ShardStopped as exc:
        print(f"shard stopped: {safe(exc)}", file=sys.stderr, flush=True)
        return 128 + exc.signum
    except ShardError as exc:
        print(f"shard not graded: {safe(exc)}", file=sys.stderr, flush=True)
        return 3
    return 0


def _merge(args: argparse.Namespace) -> int:
    from .merge import EXIT_INCOMPLETE, merge
    from .safetext import safe

    try:
        report = merge(args.manifest, db=args.db, log=_log)
    except RuntimeError as exc:
        print(f"merge refused: {safe(exc)}", file=sys.stderr)
        return 2
    return EXIT_INCOMPLETE if report.not_graded else 0


def _status(args: argparse.Namespace) -> int:
    from .manifest import Manifest
    from .slurm import class_state, status_text

    state = class_state(Manifest.load(_folder(args.folder)))
    print(json.dumps(state, indent=1) if args.json else status_text(state))
    return 0


def _rerun(args: argparse.Namespace) -> int:
    from .manifest import Manifest
    from .slurm import SlurmError, rerun

    try:
        rerun(Manifest.load(_folder(args.folder)), indices=args.index, **_slurm_opts(args))
    except SlurmError as exc:
        print(f"cluster rerun refused: {exc}", file=sys.stderr)
        return 2
    return 0


def _local_slurm(args: argparse.Namespace) -> int:
    from . import localslurm

    if args.action == "stop":
        localslurm.stop(args.dir)
        print(f"stopped the one-node Slurm of {args.dir}")
        return 0
    try:
        cluster = localslurm.start(args.dir, max_array=args.max_array_size or 1001)
    except RuntimeError as exc:
        print(f"cannot start a one-node Slurm here: {exc}", file=sys.stderr)
        return 2
    print(f"one-node Slurm running; use it with:\n  export SLURM_CONF={cluster.conf}")
    return 0


def _add_slurm_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("Slurm (defaults: the cluster's partition and account; per chapter from its measured cost)")
    g.add_argument("--partition", "-p")
    g.add_argument("--account", "-A")
    g.add_argument("--time", type=int, help="minutes per task (default: 3 x the shard's expected time, >= 10)")
    g.add_argument("--mem", type=int, help="MB per task (default: cores x 1.5 x the chapter's kernel peak + 1 GB)")
    g.add_argument("--cpus-per-task", "-c", type=int, help="cores per task = nbgrader workers per task (default 1)")
    g.add_argument("--throttle", type=int, help="at most K tasks of an array at once (--array=...%%K)")
    g.add_argument("--max-array-size", type=int, help="split arrays below this (default: the cluster's MaxArraySize)")
    g.add_argument("--sbatch-arg", action="append", help="one more sbatch option, e.g. --sbatch-arg=--qos=course")
    g.add_argument("--dry-run", action="store_true", help="print the sbatch commands, submit nothing")


def add_parser(sub: Any) -> None:
    """Register ``llm-course cluster …`` on the CLI's subparsers."""
    p = sub.add_parser("cluster", help="grade a class as Slurm job arrays with one merge step",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cs = p.add_subparsers(dest="cluster_cmd", required=True)
    q = cs.add_parser("submit", help="write the manifest and sbatch the arrays and the merge job")
    q.add_argument("chapters", nargs="+")
    q.add_argument("--folder", help="the class folder on the shared file system (default: <course root>/cluster)")
    q.add_argument("--db", help="the gradebook the merge writes (default: the course config's)")
    q.add_argument("--student", action="append", help="only these students (repeatable)")
    q.add_argument("--shard-size", action="append", metavar="N|CHAPTER=N",
                   help="students per task, for all chapters or one (repeatable; default: ~5 min of grading per core)")
    _add_slurm_options(q)
    q.set_defaults(fn=_submit)
    q = cs.add_parser("work", help="grade one shard (what an array task runs)")
    q.add_argument("manifest")
    q.add_argument("--offset", type=int, default=0, help="index of the array's first shard")
    q.add_argument("--index", type=int, help="grade this shard (default: offset + $SLURM_ARRAY_TASK_ID)")
    q.add_argument("--jobs", type=int, help="nbgrader workers (default: $SLURM_CPUS_PER_TASK)")
    q.add_argument("--time-limit-s", type=float,
                   help="the task's time limit (submit passes sbatch --time): each submission gets a share of it")
    q.set_defaults(fn=_work)
    q = cs.add_parser("merge", help="write the finished shards into the gradebook (the only writer)")
    q.add_argument("manifest")
    q.add_argument("--db", help="gradebook URL (default: the manifest's)")
    q.set_defaults(fn=_merge)
    q = cs.add_parser("status", help="which shards and students are graded, pending, failed, and why")
    q.add_argument("folder", nargs="?")
    q.add_argument("--json", action="store_true")
    q.set_defaults(fn=_status)
    q = cs.add_parser("rerun", help="resubmit only the shards without a result, and a new merge job")
    q.add_argument("folder", nargs="?")
    q.add_argument("--index", type=int, action="append", help="exactly these shards (repeatable)")
    _add_slurm_options(q)
    q.set_defaults(fn=_rerun)
    q = cs.add_parser("local-slurm", help="start|stop a one-node Slurm on this machine (root)")
    q.add_argument("action", choices=["start", "stop"])
    q.add_argument("dir")
    q.add_argument("--max-array-size", type=int)
    q.set_defaults(fn=_local_slurm)
