"""Grading a class as Slurm job arrays: prepare, submit, read the state, rerun.

* :func:`prepare` — the manifest: the collected submissions of each chapter cut into shards,
  a template gradebook per chapter (copied from the main gradebook), the reference run done once
  here (the tasks find it cached), and each shard's fingerprint.
* :func:`submit` — one array per chapter (``--array=0-N%K``; split into several arrays when a
  chapter has more shards than ``MaxArraySize`` allows: each later array carries the offset of its
  first shard), each task running ``llm-course cluster work`` on shard ``offset +
  $SLURM_ARRAY_TASK_ID`` with its time limit (each submission gets a share of it); then one merge
  job with ``--dependency=afterany:`` on every array: it runs once they have all ended, however
  they ended, merges what is done and names who is not graded.
* :func:`class_state` / :func:`status_text` — per shard, the Slurm state of its latest task (from
  ``sacct`` when the cluster keeps accounting, else ``scontrol show job`` while slurmctld
  remembers the job, else the ``jobcomp/filetxt`` log), the result the worker wrote, and which
  students are not graded and why.
* :func:`rerun` — resubmits only the shards without a complete result (or the indices asked for),
  cancels a merge job still pending, and submits a new one (after the tasks still running too).

Every student-derived string (student ids, failure reasons, file names) is escaped
(:func:`~course_tools.cluster.safetext.safe`) before it reaches the terminal.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from course_tools.grading.privacy import redact_url

from .manifest import Manifest, default_mem_mb, default_shard_size, default_time_min, fingerprint, shards_for
from .safetext import safe
from .worker import FINAL, OVER_BUDGET, is_complete

ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING", "SUSPENDED", "STAGE_OUT",
          "SIGNALING"}
WHY = {  # Slurm's final states, as a sentence for the instructor
    "TIMEOUT": "the task hit its time limit (--time)",
    "OUT_OF_MEMORY": "the task ran out of memory (--mem)",
    "NODE_FAIL": "its node failed",
    "CANCELLED": "the task was cancelled",
    "FAILED": "the task exited non-zero",
    "PREEMPTED": "the task was preempted",
    "BOOT_FAIL": "its node did not boot",
    "DEADLINE": "the task missed its deadline",
}


class SlurmError(RuntimeError):
    """A Slurm command failed (its output is in the message)."""


# --------------------------------------------------------------------------- talking to Slurm

def _run(cmd: Sequence[str], check: bool = True) -> subprocess.CompletedProcess:
    exe = shutil.which(cmd[0])
    if exe is None:
        raise SlurmError(f"`{cmd[0]}` not found: this machine is not a Slurm login node (apt-get install slurm-client)")
    res = subprocess.run([exe, *cmd[1:]], capture_output=True, text=True, timeout=120)
    if check and res.returncode != 0:
        raise SlurmError(f"{' '.join(cmd)} exited {res.returncode}: {res.stderr.strip() or res.stdout.strip()}")
    return res


def config() -> dict[str, str]:
    """``scontrol show config`` as a dict."""
    out = {}
    for line in _run(["scontrol", "show", "config"]).stdout.splitlines():
        if " = " in line:
            k, v = line.split(" = ", 1)
            out[k.strip()] = v.strip()
    return out


def max_array_size(cfg: dict[str, str] | None = None) -> int:
    """``MaxArraySize``: array task ids must be below it (Slurm's default 1001)."""
    cfg = cfg if cfg is not None else config()
    try:
        return int(cfg.get("MaxArraySize", "1001"))
    except ValueError:
        return 1001


def array_spec(task_ids: Sequence[int], throttle: int = 0) -> str:
    """``0-4,7,9-10%K`` for sorted task ids."""
    ids = sorted(set(task_ids))
    parts, start = [], ids[0]
    for a, b in zip(ids, ids[1:] + [None]):
        if b != a + 1:
            parts.append(f"{start}-{a}" if a != start else f"{a}")
            start = b
    return ",".join(parts) + (f"%{throttle}" if throttle > 0 else "")


def chunks(indices: Sequence[int], limit: int) -> list[tuple[int, list[int]]]:
    """``[(offset, task_ids)]``: ``indices`` cut so that every task id (index − offset) is below ``limit``."""
    out: list[tuple[int, list[int]]] = []
    for i in sorted(indices):
        if out and i - out[-1][0] < limit:
            out[-1][1].append(i - out[-1][0])
        else:
            out.append((i, [0]))
    return out


def _sbatch(args: Sequence[str], dry_run: bool, log) -> str:
    cmd = ["sbatch", "--parsable", *args]
    log("$ " + " ".join(cmd))
    if dry_run:
        return "DRYRUN"
    return _run(cmd).stdout.strip().split(";")[0]


# --------------------------------------------------------------------------- prepare and submit

SCRIPT = """#!/bin/bash
# Written by `llm-course cluster submit`: {what}. Slurm runs it with the
# submitter's environment (--export=ALL); the course environment and the model cache must be at
# the same paths on every node (shared file system, read-only is enough).
set -euo pipefail
cd {root}
export LLM_COURSE_NBGRADER_ROOT={root}
export PATH={scripts}:$PATH
exec {python} -m course_tools.cli cluster {verb} {manifest} "$@"
"""


def prepare(chapters: Sequence[str], root: Path, folder: Path, *, db: str | None = None,
            students: Sequence[str] | None = None, shard_size: int | Mapping[str, int] | None = None,
            cpus: int = 1, log=print) -> Manifest:
    """Write the class's manifest, templates and scripts (see the module docstring).

    ``shard_size``: students per task, for every chapter or per chapter (``{"05_rope": 10}``);
    a chapter not given gets :func:`~course_tools.cluster.manifest.default_shard_size`.
    """
    from course_tools import classroom

    from .gradebook import copy_assignment, ensure_alembic_on_path, structure_digest

    ensure_alembic_on_path()
    root = root.resolve()
    folder = folder.resolve()
    url = classroom.sqlite_busy_url(classroom.db_url(root, db))
    course = classroom.course_id(root)
    m = Manifest(root=str(root), folder=str(folder), db=url, course=course, python=sys.executable)
    per_chapter: dict[str, list[str]] = {}
    for ch in chapters:
        who = classroom.submitted_students(root, ch)
        if students:
            who = [s for s in who if s in set(students)]
        if not who:
            log(f"{ch}: no submissions under {root / 'submitted'}")
            continue
        per_chapter[ch] = who
    if not per_chapter:
        raise RuntimeError("nothing to grade: no submissions of " + ", ".join(chapters))
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(url, course) as gb:
        for ch in per_chapter:
            try:
                gb.find_assignment(ch)
            except MissingEntry:
                raise RuntimeError(f"{ch} is not in the gradebook {url}: run `llm-course register {ch}` first") from None
    given = shard_size if isinstance(shard_size, Mapping) else {ch: shard_size for ch in per_chapter}
    sizes = {ch: given.get(ch) or default_shard_size(ch, cpus) for ch in per_chapter}
    m.shards = shards_for(per_chapter, sizes)
    (folder / "templates").mkdir(parents=True, exist_ok=True)
    m.logs.mkdir(parents=True, exist_ok=True)
    digests = {}
    for ch in per_chapter:
        classroom._reference_run(ch, root, log)   # once, here: every task then finds it cached
        tpl = m.template(ch)
        tmp = tpl.with_suffix(".tmp.db")
        tmp.unlink(missing_ok=True)
        copy_assignment(url, f"sqlite:///{tmp}", course, ch, per_chapter[ch])
        tmp.replace(tpl)
        digests[ch] = structure_digest(f"sqlite:///{tpl}", course, ch)
    for s in m.shards:
        s.fingerprint = fingerprint(root, s.chapter, s.students, digests[s.chapter])
    scripts = Path(sys.executable).parent
    for verb, what in (("work", "one array task grades one shard of manifest.json"),
                       ("merge", "the merge job, the only writer of the gradebook")):
        p = folder / f"{verb}.sbatch"
        p.write_text(SCRIPT.format(what=what, root=root, scripts=scripts, python=sys.executable, verb=verb,
                                   manifest=m.path))
        p.chmod(0o755)
    m.save()
    for ch in per_chapter:
        n = [s for s in m.shards if s.chapter == ch]
        log(f"{ch}: {len(per_chapter[ch])} submission(s) in {len(n)} shard(s) of up to {sizes[ch]} "
            f"(indices {n[0].index}-{n[-1].index})")
    return m


def submit(m: Manifest, *, indices: Iterable[int] | None = None, partition: str | None = None,
           account: str | None = None, time_min: int | None = None, mem_mb: int | None = None,
           cpus: int | None = None, throttle: int | None = None, array_limit: int | None = None,
           sbatch_extra: Sequence[str] = (), dry_run: bool = False, after: Sequence[str] = (),
           log=print) -> list[dict[str, Any]]:
    """Submit the arrays for ``indices`` (default: every shard without a complete result) and the merge.

    The merge job starts when these arrays and the jobs ``after`` (tasks of this class still
    running) have ended, however they ended (``afterany``).

    Options not given are taken from the previous submit of this class (``manifest.options``),
    else defaults: partition and account the cluster's defaults, per chapter a memory and time
    limit from its measured cost (:mod:`course_tools.cluster.manifest`), 1 core per task, no throttle.
    Returns the jobs submitted (also appended to ``jobs.json``).
    """
    opts = dict(m.options)
    for k, v in (("partition", partition), ("account", account), ("time_min", time_min), ("mem_mb", mem_mb),
                 ("cpus", cpus), ("throttle", throttle), ("sbatch_extra", list(sbatch_extra) or None)):
        if v is not None:
            opts[k] = v
    m.options = opts
    m.save()
    cpus_ = int(opts.get("cpus") or 1)
    common = [f"--{k}={opts[k]}" for k in ("partition", "account") if opts.get(k)] + list(opts.get("sbatch_extra") or [])
    limit = array_limit or max_array_size()
    todo = sorted(set(indices) if indices is not None else
                  {s.index for s in m.shards if not is_complete(m.result(s.index))})
    skipped = len(m.shards) - len(todo) if indices is None else 0
    if skipped:
        log(f"{skipped} shard(s) already graded from the same inputs: not submitted")
    jobs: list[dict[str, Any]] = []
    by_ch: dict[str, list[int]] = {}
    for i in todo:
        by_ch.setdefault(m.shards[i].chapter, []).append(i)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    for ch, idx in sorted(by_ch.items()):
        most = max(len(m.shards[i].students) for i in idx)
        mem = int(opts.get("mem_mb") or default_mem_mb(ch, cpus_))
        tmin = int(opts.get("time_min") or default_time_min(ch, most, cpus_))
        for offset, tids in chunks(idx, limit):
            args = [f"--job-name=llmc-{ch[:2]}", f"--array={array_spec(tids, int(opts.get('throttle') or 0))}",
                    f"--cpus-per-task={cpus_}", f"--mem={mem}M", f"--time={tmin}",
                    f"--output={m.logs}/%A_%a.out", *common, str(Path(m.folder) / "work.sbatch"),
                    "--offset", str(offset), "--time-limit-s", str(tmin * 60)]
            job = _sbatch(args, dry_run, log)
            jobs.append({"kind": "array", "job": job, "chapter": ch, "offset": offset,
                         "indices": [offset + t for t in tids], "submitted": stamp})
    arrays = [j["job"] for j in jobs]
    deps = list(dict.fromkeys([*arrays, *after]))
    margs = ["--job-name=llmc-merge", "--cpus-per-task=1", "--mem=2048M", "--time=30",
             f"--output={m.logs}/merge_%j.out", *common]
    if deps:   # afterany: a task that died or hit its limit must not keep the merge waiting forever
        margs += [f"--dependency=afterany:{':'.join(deps)}", "--kill-on-invalid-dep=no"]
    mjob = _sbatch([*margs, str(Path(m.folder) / "merge.sbatch")], dry_run, log)
    jobs.append({"kind": "merge", "job": mjob, "after": deps, "submitted": stamp})
    if not dry_run:
        m.add_jobs(jobs)
    return jobs


# --------------------------------------------------------------------------- state

def _records(text: str) -> list[dict[str, str]]:
    """``key=value key=value`` lines (``scontrol -o show job``, jobcomp/filetxt) as dicts."""
    out = []
    for line in text.splitlines():
        rec = dict(re.findall(r"(\w+)=(\S*)", line))
        if rec:
            out.append(rec)
    return out


def _expand(task_field: str) -> list[int]:
    """``0-2,5%2`` -> [0, 1, 2, 5]."""
    out: list[int] = []
    for part in task_field.split("%")[0].strip("[]").split(","):
        if "-" in part:
            a, b = part.split("-")
            out += range(int(a), int(b) + 1)
        elif part.isdigit():
            out.append(int(part))
    return out


def job_states(job_ids: Sequence[str], cfg: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    """``{"J_t" or "J": {"state", "reason", "exit", "node", "start", "end", "source"}}`` for ``job_ids``.

    Read from ``sacct`` when the cluster keeps accounting (``AccountingStorageType`` other than
    ``accounting_storage/none``); otherwise from ``scontrol show job`` (what slurmctld still holds:
    ``MinJobAge`` seconds after the end) and the ``jobcomp/filetxt`` log (``JobCompLoc``) for jobs
    slurmctld has forgotten.
    """
    ids = [j for j in job_ids if j and j != "DRYRUN"]
    if not ids:
        return {}
    cfg = cfg if cfg is not None else config()
    out: dict[str, dict[str, str]] = {}
    if cfg.get("AccountingStorageType", "accounting_storage/none") != "accounting_storage/none":
        res = _run(["sacct", "-X", "-n", "-P", "-j", ",".join(ids),
                    "--format=JobID,State,ExitCode,Reason,NodeList,Start,End"], check=False)
        for line in res.stdout.splitlines():
            f = line.split("|")
            if len(f) < 7:
                continue
            jid, state, code, reason, node, start, end = f[:7]
            keys = [jid]
            m = re.match(r"(\d+)_\[(.+)\]$", jid)
            if m:
                keys = [f"{m.group(1)}_{t}" for t in _expand(m.group(2))]
            for k in keys:
                out[k] = {"state": state.split()[0], "reason": reason, "exit": code, "node": node,
                          "start": start, "end": end, "source": "sacct"}
        if out:
            return out
    if cfg.get("JobCompType") == "jobcomp/filetxt" and cfg.get("JobCompLoc"):
        try:
            text = Path(cfg["JobCompLoc"]).read_text(errors="replace")
        except OSError:
            text = ""
        want = set(ids)
        for rec in _records(text):
            arr, task = rec.get("ArrayJobId"), rec.get("ArrayTaskId")
            key = f"{arr}_{task}" if arr and arr != "0" and task and task != "4294967294" else rec.get("JobId", "")
            if (arr in want or rec.get("JobId") in want) and key:
                out[key] = {"state": rec.get("JobState", "?"), "reason": "", "exit": rec.get("ExitCode", ""),
                            "node": rec.get("NodeList", ""), "start": rec.get("StartTime", ""),
                            "end": rec.get("EndTime", ""), "source": "jobcomp"}
    for jid in ids:
        res = _run(["scontrol", "-o", "show", "job", jid], check=False)
        for rec in _records(res.stdout):
            arr, task = rec.get("ArrayJobId"), rec.get("ArrayTaskId")
            keys = [f"{arr}_{t}" for t in _expand(task)] if arr and task else [rec.get("JobId", jid)]
            for k in keys:
                out[k] = {"state": rec.get("JobState", "?"), "reason": rec.get("Reason", ""),
                          "exit": rec.get("ExitCode", ""), "node": rec.get("NodeList", ""),
                          "start": rec.get("StartTime", ""), "end": rec.get("EndTime", ""), "source": "scontrol"}
    return out


def _why(state: str, st: dict[str, str]) -> str:
    """Why a task's students are not graded, from its Slurm state."""
    why = WHY.get(state, "")
    if state in ACTIVE:
        why = f"{state.lower()}" + (f" ({st.get('reason')})" if st.get("reason") not in (None, "", "None") else "")
    elif state == "COMPLETED":
        why = "the task completed without writing a result (see its log)"
    elif state == "UNKNOWN":
        why = ("Slurm no longer knows the task (no accounting storage, MinJobAge passed) and it left no "
               "result: rerun it")
    elif state == "NOT SUBMITTED":
        why = "not submitted yet"
    return why or f"task {state}"


def class_state(m: Manifest) -> dict[str, Any]:
    """Per shard: its latest task and that task's Slurm state, its result, its students' state.

    A shard is ``done`` when its result is complete (every student graded, or failed by nbgrader);
    a partial result (a submission over its budget, a task stopped at its limit) gives its finished
    students, the others are ``pending`` while a task of the shard runs, else ``not graded`` /
    ``over budget`` with why.
    """
    jobs = m.jobs()
    latest: dict[int, tuple[str, str]] = {}   # index -> (array job, task key)
    merges = [j for j in jobs if j["kind"] == "merge"]
    for j in jobs:
        if j["kind"] == "array":
            for i in j["indices"]:
                latest[i] = (j["job"], f"{j['job']}_{i - j['offset']}")
    states = job_states(sorted({j["job"] for j in jobs}))
    shards = []
    for s in m.shards:
        res = m.result(s.index)
        job, key = latest.get(s.index, ("", ""))
        st = states.get(key, {}) if key else {}
        state = st.get("state", "UNKNOWN" if key else "NOT SUBMITTED")
        why = _why(state, st)
        students: dict[str, dict[str, Any]] = {}
        for who in s.students:
            v = dict((res or {}).get("students", {}).get(who) or {"status": "not graded", "reason": why})
            if v["status"] not in FINAL:
                if state in ACTIVE:   # a task of the shard (a rerun) is on it
                    v = {"status": "pending", "reason": why}
                elif v["status"] != OVER_BUDGET and res is not None and state in WHY:
                    v["reason"] = f"{v.get('reason', '')} ({why})"
            students[who] = v
        log = next(iter(sorted(m.logs.glob(f"{key}.out"))), None) if key else None
        shards.append({"index": s.index, "chapter": s.chapter, "task": key, "state": state,
                       "exit": st.get("exit", ""), "node": st.get("node", ""), "source": st.get("source", ""),
                       "done": is_complete(res), "partial": res is not None and not is_complete(res),
                       "students": students, "log": str(log) if log else ""})
    merge = merges[-1] if merges else None
    mstate = states.get(merge["job"], {}) if merge else {}
    merged = _merged(m)
    return {"folder": m.folder, "db": m.db, "shards": shards,
            "merge": {"job": merge["job"] if merge else "", "state": mstate.get("state", "UNKNOWN" if merge else ""),
                      "reason": mstate.get("reason", ""), "exit": mstate.get("exit", "")} if merge else None,
            "merged_at": merged}


def _merged(m: Manifest) -> str:
    logs = sorted(m.logs.glob("merge_*.out"), key=lambda p: p.stat().st_mtime)
    for p in reversed(logs):
        text = p.read_text(errors="replace")
        if "merged " in text:
            return f"{p.name}: " + next(ln for ln in text.splitlines() if ln.startswith("merged "))
    return ""


def status_text(state: dict[str, Any]) -> str:
    """The class's state for an instructor: one line per shard, then every student not graded and
    why. Every string that comes from a student (ids, reasons, file names) is escaped."""
    lines = [f"class {safe(state['folder'])} -> {safe(redact_url(state['db']))}",
             f"{'shard':>5}  {'chapter':<30} {'task':<12} {'slurm state':<14} result"]
    bad: list[str] = []
    counts: dict[str, int] = {}
    for s in state["shards"]:
        graded = sum(v["status"] == "graded" for v in s["students"].values())
        res = (f"graded {graded}/{len(s['students'])}" if s["done"] else
               f"partial: graded {graded}/{len(s['students'])}" if s.get("partial") else "no result")
        lines.append(f"{s['index']:>5}  {safe(s['chapter']):<30} {safe(s['task'] or '-'):<12} "
                     f"{safe(s['state']):<14} {res}")
        for who, v in s["students"].items():
            counts[v["status"]] = counts.get(v["status"], 0) + 1
            if v["status"] != "graded":
                where = (f" [task {safe(s['task'])}{', log ' + safe(s['log']) if s['log'] else ''}]"
                         if v["status"] not in FINAL and s["task"] else "")
                bad.append(f"  {safe(who)} ({safe(s['chapter'])}): {safe(v['status'])}: "
                           f"{safe(v.get('reason', ''))}{where}")
    lines.append("submissions: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    if bad:
        lines.append("not graded (yet):")
        lines += bad
    mg = state.get("merge")
    if mg:
        lines.append(f"merge job {safe(mg['job'])}: {safe(mg['state'])}"
                     + (f" ({safe(mg['reason'])})" if mg["reason"] not in ("", "None") else ""))
        if mg.get("exit", "").split(":")[0] == "4":
            lines.append("  it merged what was done and named who is not graded yet: `llm-course cluster rerun` grades "
                         "them and submits a new merge")
        if mg["reason"] == "DependencyNeverSatisfied":
            lines.append("  a task failed, so the merge cannot start: `llm-course cluster rerun` resubmits the "
                         "shards without a result and a new merge")
    if state.get("merged_at"):
        lines.append(f"last merge: {safe(state['merged_at'])}")
    return "\n".join(lines)


def rerun(m: Manifest, *, indices: Iterable[int] | None = None, log=print, **opts: Any) -> list[dict[str, Any]]:
    """Resubmit the shards without a complete result whose task is not pending or running (or exactly
    ``indices``), cancelling this class's merge jobs that are still pending; then a new merge, which
    also waits for the tasks still running."""
    st = class_state(m)
    busy = {s["index"] for s in st["shards"] if s["state"] in ACTIVE}
    if indices is None:
        indices = [s["index"] for s in st["shards"] if not s["done"] and s["index"] not in busy]
        if busy:
            log(f"still pending or running, not resubmitted: {', '.join(map(str, sorted(busy)))}")
    indices = sorted(set(indices))
    if not indices:
        log("every shard has a complete result or a live task: nothing to rerun")
        return []
    states = job_states([j["job"] for j in m.jobs() if j["kind"] == "merge"])
    for j in m.jobs():
        if j["kind"] == "merge" and states.get(j["job"], {}).get("state") == "PENDING" and not opts.get("dry_run"):
            _run(["scancel", j["job"]], check=False)
            log(f"cancelled merge job {j['job']} (a new one follows the resubmitted tasks)")
    live = sorted({s["task"].split("_")[0] for s in st["shards"] if s["index"] in busy and s["index"] not in indices
                   and s["task"]})
    return submit(m, indices=indices, log=log, after=live, **opts)


def wait(jobs: Sequence[str], timeout: float = 600, poll: float = 2.0) -> dict[str, dict[str, str]]:
    """Wait until none of ``jobs`` (and their tasks) is pending or running; their final states."""
    t0 = time.monotonic()
    while True:
        states = job_states(jobs)
        live = {k: v for k, v in states.items() if v["state"] in ACTIVE}
        if not live:
            return states
        if time.monotonic() - t0 > timeout:
            raise TimeoutError(f"still active after {timeout} s: {json.dumps(live)}")
        time.sleep(poll)
