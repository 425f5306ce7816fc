"""Grading a class as Slurm job arrays (course_tools/cluster), against a real one-node Slurm.

The fixture starts Debian's ``munged``, ``slurmctld`` and ``slurmd`` on localhost (no systemd, no
cgroups: ``proctrack/linuxproc``, ``task/none``; ``MaxArraySize=2`` so that a chapter's shards need
two arrays), and skips, saying why, where they cannot start. One class: chapters 03 and 05 with
honest, late, broken and empty submissions, registered with a due date.

* ``llm-course cluster submit`` runs real ``sbatch`` arrays; one running task is cancelled
  (``scancel``); ``status`` names its student and why, and the merge job that can no longer start;
  ``rerun`` resubmits exactly that index and a new merge; a broken notebook and a submission
  without one fail alone (their shards succeed);
* the merged gradebook equals a serial stock ``nbgrader autograde`` of the same submissions, field
  by field (scores per cell, comments, timestamps, late penalties), and the autograded notebooks
  are where nbgrader puts them;
* a rerun of a finished shard changes nothing; the same shard results merge into PostgreSQL;
* a node without the sandbox refuses to grade, naming what is missing.
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from course_tools import classroom
from course_tools.cluster import gradebook, localslurm, slurm
from course_tools.cluster.merge import merge
from course_tools.cluster.worker import ShardError, work
from course_tools.grading.selftest import _fill
from course_utils.paths import repo_root

from _classroom import AID, MAX_AUTO, RIGHT, answered, make_course
from test_classroom import postgres  # noqa: F401  (the PostgreSQL server fixture)

CH3, CH5 = "03_self_attention_by_hand", "05_rope"
DUE = "2026-11-21 00:00:00 UTC"
ON_TIME, LATE = "2026-11-20 10:00:00.000000 UTC", "2026-11-22 10:00:00.000000 UTC"
QUIET = dict(log=lambda *_: None)


def _cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_tools.cli", *args], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600)


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    """os.environ with ``values`` for the duration (sbatch passes the submitter's environment on)."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A one-node Slurm (MaxArraySize=2); skipped with the reason when it cannot start here."""
    why = localslurm.why_not()
    if why:
        pytest.skip(f"no Slurm here: {why}")
    folder = tmp_path_factory.mktemp("slurm")
    try:
        c = localslurm.start(folder, max_array=2)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"the Slurm daemons did not start: {exc}")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(c.conf)
    try:
        yield c
    finally:
        subprocess.run(["scancel", "--user=root"], capture_output=True)
        localslurm.stop(folder)
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old


def _course(root: Path) -> Path:
    for ch in (CH3, CH5):
        shutil.copytree(repo_root() / "solutions" / ch, root / "solutions" / ch)
    shutil.copy(repo_root() / "nbgrader_config.py", root / "nbgrader_config.py")
    return root


def _submissions(root: Path) -> dict[str, dict[str, str]]:
    """03: a (honest), c (honest, late); 05: a (honest), d (not a notebook), e (no notebook at all)."""
    plan = {CH3: {"a": ("full", ON_TIME), "c": ("full", LATE)},
            CH5: {"a": ("full", ON_TIME), "d": ("broken", ON_TIME), "e": ("none", ON_TIME)}}
    for ch, who in plan.items():
        source = json.loads((repo_root() / "solutions" / ch / f"{ch}.ipynb").read_text())
        student = json.loads((repo_root() / "notebooks" / ch / f"{ch}.ipynb").read_text())
        for s, (kind, ts) in who.items():
            d = root / "submitted" / s / ch
            d.mkdir(parents=True)
            text = {"full": lambda: json.dumps(_fill(student, source)), "blank": lambda: json.dumps(student),
                    "broken": lambda: "{this is not a notebook", "none": lambda: None}[kind]()
            if text is not None:
                (d / f"{ch}.ipynb").write_text(text)
            (d / "timestamp.txt").write_text(ts)
    return {ch: {s: k for s, (k, _) in who.items()} for ch, who in plan.items()}


@pytest.fixture(scope="module")
def klass(tmp_path_factory, cluster):
    """The class graded through Slurm (with one task cancelled and rerun) and serially; both roots."""
    base = tmp_path_factory.mktemp("klass")
    refs = base / "references"   # one reference cache for both roots (same source, same records)
    os.environ["LLM_COURSE_REFERENCES"] = str(refs)
    root = _course(base / "course")
    classroom.register([CH3, CH5], root, duedate=DUE, **QUIET)
    serial = base / "serial"
    shutil.copytree(root, serial)           # the same registration, before any grading
    plan = _submissions(root)
    _submissions(serial)
    env = classroom.nbgrader_env(root)
    node_tmp = base / "node-tmp"   # the tasks' node-local folders ($TMPDIR, passed on by sbatch --export=ALL)
    node_tmp.mkdir()
    t0 = time.perf_counter()
    # 03: one shard of 2; 05: three shards of 1 -> indices 1, 2 in one array, 3 in a second (MaxArraySize=2)
    m = slurm.prepare([CH3, CH5], root, root / "cluster", shard_size={CH3: 2, CH5: 1}, **QUIET)
    with _env(TMPDIR=str(node_tmp)):
        jobs = slurm.submit(m, cpus=1, mem_mb=3000, time_min=20, **QUIET)
    arrays = [j for j in jobs if j["kind"] == "array"]
    first05 = next(j for j in arrays if j["chapter"] == CH5)
    victim = f"{first05['job']}_0"               # shard 1: 05, student a
    deadline = time.monotonic() + 240
    # cancelled (SIGTERM, then SIGKILL after KillWait) while it grades, its node-local folder made
    while not list(node_tmp.glob("llmc-shard00001-*/autograded")):
        assert time.monotonic() < deadline, slurm.job_states([j["job"] for j in jobs])
        time.sleep(0.5)
    subprocess.run(["scancel", victim], check=True, env=env)
    # the class's state while it runs: the cancelled task, its student not graded and why
    while True:
        cancelled_status = _cli("cluster", "status", m.folder, env=env)
        if "the task was cancelled" in cancelled_status.stdout or time.monotonic() > deadline:
            break
        time.sleep(2)
    with _env(TMPDIR=str(node_tmp)):
        rerun_jobs = slurm.rerun(m, **QUIET)   # the other tasks may still run: only index 1 is resubmitted
    slurm.wait([j["job"] for j in arrays + rerun_jobs], timeout=420)
    slurm_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for ch in (CH3, CH5):   # stock nbgrader, one process per chapter, one submission after another
        classroom.nbgrader(["autograde", ch, "--force", "--log-level=WARN"], serial, check=False)
    serial_s = time.perf_counter() - t0
    print(f"\nslurm path (with a cancelled task and its rerun): {slurm_s:.0f} s; serial nbgrader: {serial_s:.0f} s")
    yield {"root": root, "serial": serial, "manifest": m, "jobs": jobs, "rerun": rerun_jobs, "plan": plan,
           "cancelled_status": cancelled_status, "victim": victim, "node_tmp": node_tmp}
    os.environ.pop("LLM_COURSE_REFERENCES", None)


def _dumps(url: str, course: str = "llm-course") -> dict:
    return {ch: gradebook.dump(url, course, ch) for ch in (CH3, CH5)}


def test_arrays_split_at_max_array_size_and_merge_waits_on_them(klass):
    jobs = klass["jobs"]
    arrays = [j for j in jobs if j["kind"] == "array"]
    assert [(j["chapter"], j["indices"]) for j in arrays] == [(CH3, [0]), (CH5, [1, 2]), (CH5, [3])]
    assert all(i - j["offset"] < 2 for j in arrays for i in j["indices"])   # MaxArraySize=2
    assert jobs[-1]["kind"] == "merge" and jobs[-1]["after"] == [j["job"] for j in arrays]
    assert slurm.max_array_size() == 2
    assert slurm.chunks([1, 2, 3], 2) == [(1, [0, 1]), (3, [0])]
    assert slurm.array_spec([0, 1, 2, 5, 7, 8], throttle=4) == "0-2,5,7-8%4"


def test_cancelled_task_is_visible_and_only_its_index_is_rerun(klass):
    text = klass["cancelled_status"].stdout
    assert klass["cancelled_status"].returncode == 0, klass["cancelled_status"].stderr
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("1 "))
    assert "CANCELLED" in line and "no result" in line, text
    assert f"a ({CH5}): not graded: the task was cancelled [task {klass['victim']}" in text, text
    rerun = klass["rerun"]
    assert [(j["kind"], j.get("indices")) for j in rerun] == [("array", [1]), ("merge", None)]
    state = slurm.class_state(klass["manifest"])
    assert all(s["done"] for s in state["shards"]), state
    assert state["merge"]["state"] == "COMPLETED", state["merge"]
    after = _cli("cluster", "status", klass["manifest"].folder).stdout
    assert "submissions: 2 failed, 3 graded" in after, after
    # the broken submissions failed alone, their shards succeeded; the status says why
    assert "d (05_rope): failed: NotJSONError: Notebook does not appear to be JSON" in after, after
    assert "e (05_rope): failed: no notebook in submitted/e/05_rope" in after, after
    # the cancelled task removed its node-local folder on SIGTERM (and every other task its own)
    assert not list(klass["node_tmp"].glob("llmc-shard*")), list(klass["node_tmp"].iterdir())
    log = (klass["manifest"].logs / f"{klass['victim']}.out").read_text()
    assert "stopped by SIGTERM" in log and "node-local folder removed" in log, log


def test_merged_gradebook_equals_serial_nbgrader(klass):
    root, serial = klass["root"], klass["serial"]
    got = _dumps(classroom.db_url(root))
    want = _dumps(classroom.db_url(serial))
    # the broken notebook is in both, as stock nbgrader leaves it: a submission row, no scores
    assert set(got[CH3]) == {"a", "c"} and {"a", "d"} <= set(got[CH5]), {ch: set(v) for ch, v in got.items()}
    assert got == want
    # the late submission kept its score and got the penalty; the honest one is full marks
    assert got[CH3]["c"]["late_submission_penalty"] > 0 and got[CH3]["a"]["late_submission_penalty"] == 0
    assert got[CH5]["a"]["score"] > 0 == got[CH5]["d"]["score"]
    for ch, who in ((CH3, "ac"), (CH5, "a")):
        for s in who:
            assert (root / "autograded" / s / ch / f"{ch}.ipynb").is_file()
            assert (serial / "autograded" / s / ch / f"{ch}.ipynb").is_file()
    assert (root / "autograded" / "d" / CH5).exists() == (serial / "autograded" / "d" / CH5).exists()


def test_rerun_of_a_finished_shard_changes_nothing(klass):
    m = klass["manifest"]
    before = (m.result_dir(0) / "result.json").read_bytes()
    db_before = _dumps(m.db)
    jobs = slurm.rerun(m, indices=[0], **QUIET)
    states = slurm.wait([j["job"] for j in jobs], timeout=300)
    assert all(v["state"] == "COMPLETED" for v in states.values()), states
    log = (m.logs / f"{jobs[0]['job']}_0.out").read_text()
    assert "already graded from the same inputs" in log, log
    assert (m.result_dir(0) / "result.json").read_bytes() == before
    assert _dumps(m.db) == db_before


def test_merge_into_postgresql(klass, postgres):  # noqa: F811
    m = klass["manifest"]
    for ch in (CH3, CH5):   # the assignment as registered, in the PostgreSQL gradebook
        gradebook.copy_assignment(m.db, postgres, m.course, ch)
    report = merge(m.path, db=postgres, **QUIET)
    assert not report.missing
    assert set(report.failed) == {CH5} and set(report.failed[CH5]) == {"d", "e"}
    assert _dumps(postgres) == _dumps(classroom.db_url(klass["serial"]))


def test_grading_refuses_without_the_sandbox(klass, monkeypatch):
    m = klass["manifest"]
    shutil.rmtree(m.result_dir(3))   # shard 3 (student e of 05): not graded any more
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))   # no bwrap on this "node"
    with pytest.raises(ShardError, match="without the sandbox: bubblewrap is not installed"):
        work(m.path, 3, **QUIET)
    assert m.result(3) is None


# --------------------------------------------------------------------------- one submission, its own grade

EVIL = "\x1b]0;pwned\x07\x1b[2J\x9b31m\u202e"   # retitle the terminal, clear it, CSI, bidi override
SLEEPER = "import time\ntime.sleep(200)   # within the 300 s per-cell and 1800 s per-notebook limits\n" + RIGHT


@pytest.fixture(scope="module")
def budget(tmp_path_factory, cluster):
    """The small ``ex01`` class: shard 0 = ann, bob, cat (bob's answer sleeps 200 s, within every
    grading limit), shard 1 = eve, whose notebook makes nbgrader fail with an escape sequence in the
    message. First a task of shard 0 run by hand is stopped by SIGTERM while it grades bob, and the
    class merged by hand; then ``rerun`` through Slurm with 1-minute tasks, and the merge job."""
    base = tmp_path_factory.mktemp("budget")
    node_tmp = base / "node-tmp"
    node_tmp.mkdir()
    root = make_course(base / "course")
    with _env(LLM_COURSE_REFERENCES=str(base / "references")):
        classroom.nbgrader(["generate_assignment", AID, "--no-db"], root)
        classroom.register([AID], root, **QUIET)
        student = json.loads((root / "notebooks" / AID / f"{AID}.ipynb").read_text())
        subs = {"ann": json.dumps(answered(student, RIGHT)), "bob": json.dumps(answered(student, SLEEPER)),
                "cat": json.dumps(answered(student, RIGHT)), "eve": json.dumps({"nbformat": EVIL, "cells": []})}
        for who, text in subs.items():
            d = root / "submitted" / who / AID
            d.mkdir(parents=True)
            (d / f"{AID}.ipynb").write_text(text)
            (d / "timestamp.txt").write_text(ON_TIME)
        m = slurm.prepare([AID], root, root / "cluster", shard_size=3, **QUIET)
        env = classroom.nbgrader_env(root, TMPDIR=str(node_tmp))
        t0 = time.perf_counter()
        # 1. a task stopped by SIGTERM (what Slurm sends at the time limit) while it grades bob
        proc = subprocess.Popen([sys.executable, "-m", "course_tools.cli", "cluster", "work", str(m.path),
                                 "--index", "0"], cwd=root, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 180
        while not list(node_tmp.glob(f"llmc-shard00000-*/autograded/bob/{AID}")):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        stopped_out = proc.communicate(timeout=60)[0]
        stopped = {"rc": proc.returncode, "out": stopped_out, "result": m.result(0),
                   "left": sorted(p.name for p in node_tmp.glob("llmc-shard*"))}
        merged_by_hand = _cli("cluster", "merge", str(m.path), env=env, cwd=root)
        # 2. rerun through Slurm, 1-minute tasks: shard 0 grades bob and cat, shard 1 eve
        with _env(TMPDIR=str(node_tmp)):
            jobs = slurm.rerun(m, cpus=1, mem_mb=1500, time_min=1, **QUIET)
        states = slurm.wait([j["job"] for j in jobs], timeout=300)
        slurm_s = time.perf_counter() - t0
        status = _cli("cluster", "status", m.folder, env=env)
    print(f"\nbudget class: SIGTERM, merge by hand, rerun with 1-minute tasks and merge job: {slurm_s:.0f} s")
    yield {"root": root, "manifest": m, "stopped": stopped, "merged_by_hand": merged_by_hand, "jobs": jobs,
           "states": states, "status": status, "node_tmp": node_tmp}


def test_sigterm_publishes_what_is_done_and_removes_the_node_local_folder(budget):
    st = budget["stopped"]
    assert st["rc"] == 128 + signal.SIGTERM, st["out"]
    assert "stopped by SIGTERM" in st["out"] and "node-local folder removed" in st["out"], st["out"]
    assert st["left"] == [], st
    res = st["result"]
    assert res is not None and not res["complete"], st["out"]
    assert res["students"]["ann"] == {"status": "graded"}, res
    assert {res["students"][s]["status"] for s in ("bob", "cat")} == {"not graded"}, res
    assert "SIGTERM" in res["students"]["bob"]["reason"]
    # the merge by hand merges ann, names who is missing and why, and says so in its exit code
    mg = budget["merged_by_hand"]
    assert mg.returncode == 4, (mg.stdout, mg.stderr)
    assert "merged 1 submission(s)" in mg.stdout, mg.stdout
    assert f"not graded: bob ({AID}): not graded: the task was stopped (SIGTERM" in mg.stdout, mg.stdout
    assert f"not graded: cat ({AID})" in mg.stdout and f"not graded: eve ({AID}): shard 1 has no result" in mg.stdout


def test_a_sleeping_submission_costs_only_its_own_grade(budget):
    m, jobs = budget["manifest"], budget["jobs"]
    tasks = {k: v for k, v in budget["states"].items() if "_" in k}
    # both tasks ended by themselves within their 1-minute limit (no TIMEOUT), the merge job ran
    assert {v["state"] for v in tasks.values()} == {"COMPLETED"}, budget["states"]
    merge_job = budget["states"][jobs[-1]["job"]]
    assert merge_job["state"] == "FAILED" and merge_job["exit"].startswith("4"), merge_job
    res = m.result(0)
    assert res["students"]["ann"]["status"] == res["students"]["cat"]["status"] == "graded", res
    bob = res["students"]["bob"]
    assert bob["status"] == "over budget" and bob["seconds"] < 60, bob
    # the honest co-sharded students have full marks in the class's gradebook; bob is not in it
    scores = classroom.gradebook_scores(m.db, AID)
    assert scores["ann"]["score"] == scores["cat"]["score"] == MAX_AUTO, scores
    assert "bob" not in scores or scores["bob"]["score"] == 0, scores
    assert (budget["root"] / "autograded" / "cat" / AID / f"{AID}.ipynb").is_file()
    # the merge job named bob, with the reason, and eve; status names them too
    log = next(m.logs.glob(f"merge_{jobs[-1]['job']}.out")).read_text()
    assert f"not graded: bob ({AID}): over budget: over its grading budget: stopped after" in log, log
    assert f"failed: eve ({AID}): NBFormatError: Unsupported nbformat version" in log, log
    status = budget["status"].stdout
    assert f"bob ({AID}): over budget: over its grading budget" in status, status
    assert "partial: graded 2/3" in status and "submissions: 1 failed, 2 graded, 1 over budget" in status, status
    assert "it merged what was done and named who is not graded yet" in status, status
    assert not list(budget["node_tmp"].glob("llmc-shard*"))


def test_student_text_is_escaped_in_status_and_merge(budget):
    status = budget["status"].stdout
    assert f"eve ({AID}): failed: NBFormatError: Unsupported nbformat version \\x1b]0;pwned\\x07" in status, status
    log = next(budget["manifest"].logs.glob(f"merge_{budget['jobs'][-1]['job']}.out")).read_text()
    for out in (status, budget["status"].stderr, budget["merged_by_hand"].stdout, budget["merged_by_hand"].stderr,
                log, budget["stopped"]["out"]):
        assert not any(c in out for c in "\x1b\x07\x9b\u202e\r\x08"), out


def test_safe_and_status_text_escape_control_characters():
    from course_tools.cluster.safetext import safe

    assert safe("Zoë Ŝmith") == "Zoë Ŝmith"
    assert safe(EVIL + "\r\x08\n\u2066") == "\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\u202e\\r\\x08\\n\\u2066"
    state = {"folder": "/c", "db": "sqlite:///g.db", "merge": None, "merged_at": "",
             "shards": [{"index": 0, "chapter": AID, "task": "7_0", "state": "COMPLETED", "done": False,
                         "partial": True, "log": "", "students": {
                             "x" + EVIL: {"status": "not graded", "reason": "boom " + EVIL},
                             "y": {"status": "failed", "reason": "ValueError: " + EVIL}}}]}
    text = slurm.status_text(state)
    assert "x\\x1b]0;pwned" in text and "ValueError: \\x1b]0;pwned" in text, text
    assert not any(c in text for c in "\x1b\x07\x9b\u202e"), text
