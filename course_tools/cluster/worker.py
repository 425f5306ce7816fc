"""One array task: grade one shard of the manifest (``llm-course cluster work``).

The shard is graded with the nbgrader command line of local grading
(:func:`course_tools.classroom.autograde`: stock ``nbgrader autograde`` processes with the course
config, bubblewrap sandbox, limits, reference records and verdicts; one process per core, the
students dealt round-robin, a student whose run failed retried alone) into a node-local SQLite
gradebook copied from the class's template and a node-local ``autograded/`` folder, then copied to
``results/<index>/`` on the shared file system under a temporary name and renamed.

**One submission costs at most its own grade.** The task knows its time limit (``--time-limit-s``,
written by ``submit``, or ``$SLURM_JOB_END_TIME`` where Slurm sets it). Each submission gets a
wall-clock *budget* when nbgrader starts on it (its folder appears under ``autograded/``): the
time left before the limit (less a reserve for publishing) shared among the submissions not
graded yet, so a fast submission leaves more to the next ones. A submission still running at the
end of its budget has its nbgrader process killed (with its sandboxed kernel) and is recorded as
``over budget``; the students after it in that process are graded by a new one. So a submission
that sleeps within its per-cell and per-notebook limits cannot push the task past its limit, and
its co-sharded students are graded.

**Stopped** (``SIGTERM``: Slurm's time limit or ``scancel``, then ``SIGKILL`` after ``KillWait``;
``SIGINT``): the nbgrader processes are killed, the students finished so far are published (the
others recorded ``not graded``), the node-local folder is removed, and the task exits 128 + the
signal. Folders of tasks that died by ``SIGKILL`` are removed by the next task on the node.

A result whose students are not all final (``graded``, or ``failed``: nbgrader could not grade the
notebook) is *partial*: ``submit``/``rerun`` resubmit its shard, and the next task grades only the
students still to do (an over-budget one then shares the whole task with fewer) into a copy of the
published result. A submission nbgrader cannot grade is that student's problem: it is recorded with
the end of nbgrader's output, and the task still succeeds. The task fails (non-zero exit) only when
the shard as a whole cannot be graded: no isolation on the node, inputs changed since the manifest
was written, a reference run that fails.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import IO, Any, Callable, Sequence

from .manifest import Manifest, fingerprint
from .safetext import safe

GRADED, FAILED, OVER_BUDGET, NOT_GRADED = "graded", "failed", "over budget", "not graded"
FINAL = frozenset({GRADED, FAILED})     # a student in one of these is not graded again for the same inputs
LOCAL_PREFIX = "llmc-shard"             # node-local folders: <prefix><index>-<random>
SCRATCH = ".scratch"                    # in one: owner.json, kernel sockets, nbgrader's output (not published)
RESERVE_MIN_S = 5.0                     # kept free before the task's limit: publishing, cleaning up
RESERVE_FRACTION = 0.05
POLL_S = 0.2
STARTUP_GUESS_S = 10.0                  # nbgrader's start-up before one is measured (3.4-7.5 s measured)
Log = Callable[..., Any]


class ShardError(RuntimeError):
    """The shard as a whole cannot be graded here (the task exits non-zero with this message)."""


class ShardStopped(ShardError):
    """The task was stopped by a signal; what was done is published (``signum``: the exit is 128 + it)."""

    def __init__(self, message: str, signum: int) -> None:
        super().__init__(message)
        self.signum = signum


class _Signalled(BaseException):
    """Raised by the signal handler inside the grading loop (a BaseException: no ``except Exception`` eats it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def todo_students(result: dict[str, Any] | None) -> list[str]:
    """Students of a shard's result still to grade (over budget, not graded); all of them without a result."""
    if result is None:
        return []
    return [s for s, v in result.get("students", {}).items() if v.get("status") not in FINAL]


def is_complete(result: dict[str, Any] | None) -> bool:
    """A result whose every student is final (graded, or failed by nbgrader)."""
    return result is not None and not todo_students(result)


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
    appear to be JSON``…), else its last line: what the status shows for a student not graded.
    Escaped (:func:`~course_tools.cluster.safetext.safe`): the message may be the student's."""
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = _EXC.match(ln)
        if m:
            return safe(f"{m.group(1).rsplit('.', 1)[-1]}: {m.group(2)}", 300)
    return safe(lines[-1], 300) if lines else "not graded"


def _slurm_id() -> str | None:
    job, task = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    return f"{job}_{task}" if job and task else os.environ.get("SLURM_JOB_ID")


def _process_started() -> float:
    """When this process started (epoch seconds; the task's clock starts about then), else now."""
    try:
        ticks = int(Path(f"/proc/{os.getpid()}/stat").read_text().rsplit(")", 1)[1].split()[19])
        btime = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines()
                     if ln.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return time.time()


def task_deadline(time_limit_s: float | None) -> tuple[float | None, float]:
    """(The epoch second by which grading must stop, the reserve kept after it): the task's end
    (``$SLURM_JOB_END_TIME`` where Slurm sets it, else the task's start + ``time_limit_s``: in a
    Slurm job this process's start, elsewhere now) less a reserve of max(5 s, 5 % of the limit)
    for publishing and cleaning up; (None, 0) without a limit."""
    end = None
    env_end = os.environ.get("SLURM_JOB_END_TIME", "")
    started = _process_started() if os.environ.get("SLURM_JOB_ID") else time.time()
    if env_end.isdigit() and int(env_end) > started:
        end = float(env_end)
    elif time_limit_s:
        end = started + float(time_limit_s)
    if end is None:
        return None, 0.0
    reserve = max(RESERVE_MIN_S, RESERVE_FRACTION * (end - started))
    return end - reserve, reserve


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_local(parent: Path | None = None, log: Log = print) -> list[Path]:
    """Remove the node-local folders of tasks on this host that died without cleaning up (SIGKILL):
    each holds ``.scratch/owner.json`` (host, pid); a folder whose process is gone is removed."""
    parent = Path(parent or tempfile.gettempdir())
    host = socket.gethostname()
    removed = []
    for d in parent.glob(f"{LOCAL_PREFIX}*"):
        try:
            owner = json.loads((d / SCRATCH / "owner.json").read_text())
        except (OSError, ValueError):
            continue
        if owner.get("host") == host and isinstance(owner.get("pid"), int) and not _alive(owner["pid"]):
            shutil.rmtree(d, ignore_errors=True)
            removed.append(d)
    if removed:
        log(f"removed {len(removed)} node-local folder(s) of tasks that were killed: "
            + ", ".join(safe(p.name) for p in removed))
    return removed


# --------------------------------------------------------------------------- the budgeted grader

@dataclass
class _Proc:
    """One ``nbgrader autograde`` process grading ``group`` (in nbgrader's order)."""
    proc: subprocess.Popen
    group: list[str]
    out: IO[str]
    started: float = field(default_factory=time.monotonic)
    seen: dict[str, float] = field(default_factory=dict)     # student -> when nbgrader started on it
    budget: dict[str, float] = field(default_factory=dict)   # student -> seconds it may take

    def current(self) -> str | None:
        """The student nbgrader works on now: the last one started (the earlier ones are finished)."""
        started = [s for s in self.group if s in self.seen]
        return started[-1] if started else None


def _order(students: Sequence[str]) -> list[str]:
    """nbgrader's order: it sorts the submission paths ``submitted/<student>/<assignment>``."""
    return sorted(students, key=lambda s: s + "/")


@dataclass
class _Grader:
    """Grades students of one chapter into ``local`` with per-submission budgets (see the module docstring)."""
    root: Path
    chapter: str
    local: Path
    url: str
    lanes: int
    deadline: float | None      # time.monotonic() by which grading stops (None: no limit)
    log: Log
    outcome: dict[str, dict[str, Any]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)       # student -> output of the process that failed it
    logs: list[str] = field(default_factory=list)
    active: list[_Proc] = field(default_factory=list)
    queue: list[list[str]] = field(default_factory=list)
    finished: set[str] = field(default_factory=set)           # students nbgrader is done with (graded or not)
    startup_s: float = 0.0      # the longest nbgrader start-up seen (process start -> its first student)
    _n: int = 0

    @property
    def autograded(self) -> Path:
        return self.local / "autograded"

    @property
    def scratch(self) -> Path:
        """Kernel socket folders and nbgrader's output (not published)."""
        return self.local / SCRATCH

    def _start(self, group: list[str], everyone: Sequence[str]) -> _Proc:
        from course_tools import classroom

        others = [s for s in everyone if s not in group]
        self._n += 1
        sock = self.scratch / f"k{self._n}"
        sock.mkdir(parents=True)
        out = open(self.scratch / f"nbgrader-{self._n}.out", "w+")
        args = ["autograde", self.chapter, "--log-level=WARN", f"--CourseDirectory.db_url={self.url}", "--force",
                f"--CourseDirectory.autograded_directory={self.autograded}",
                f"--CourseDirectory.student_id_exclude={','.join(others)}",
                "--KernelManager.transport=ipc", f"--KernelManager.ip={sock / 'k'}", "--Execute.execute_retries=2"]
        env = classroom.nbgrader_env(self.root)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env.setdefault(var, "1")
        # a session of its own: killing its process group ends nbgrader and its kernel launcher; the
        # sandboxed kernel (bubblewrap --die-with-parent) goes with them
        proc = subprocess.Popen([sys.executable, "-m", "nbgrader", *args], cwd=self.root, env=env, stdout=out,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        return _Proc(proc, group, out)

    def _budget(self, now: float, followers: bool) -> float:
        """The budget of a submission starting now: the time left, shared among those not finished.
        With ``followers`` (students after it in its process), less one nbgrader start-up: were it
        stopped, they need a new process."""
        if self.deadline is None:
            return float("inf")
        restart = (self.startup_s or STARTUP_GUESS_S) if followers else 0.0
        left = sum(len([s for s in p.group if s not in p.seen]) + (p.current() is not None) for p in self.active)
        left += sum(len(g) for g in self.queue)
        lanes = max(1, min(self.lanes, left))
        return max(0.0, (self.deadline - now - restart) * lanes / max(1, left))

    def _scan(self, p: _Proc, now: float) -> None:
        """Note the students nbgrader has started on in ``p`` (their folder appeared) and their budgets."""
        for s in p.group:
            if s not in p.seen and (self.autograded / s / self.chapter).exists():
                if not p.seen:
                    self.startup_s = max(self.startup_s, now - p.started)
                p.seen[s] = now
                p.budget[s] = self._budget(now, followers=s != p.group[-1])

    def _finish(self, p: _Proc) -> str:
        p.out.seek(0)
        text = p.out.read()
        p.out.close()
        self.logs.append(f"$ nbgrader autograde ({', '.join(map(safe, p.group))}): exit {p.proc.returncode}\n{text}")
        return text

    def _kill(self, p: _Proc) -> None:
        try:
            os.killpg(p.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            p.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:   # pragma: no cover - a process SIGKILL does not end
            pass

    def kill_all(self) -> list[_Proc]:
        """Kill every running nbgrader process (with its kernels); the processes killed."""
        killed = list(self.active)
        for p in killed:
            self._kill(p)
            self._scan(p, time.monotonic())   # what it started since the last look
            cur = p.current()
            self.finished |= {s for s in p.seen if s != cur}
        self.active.clear()
        if os.geteuid() == 0:   # their sandboxes' host folders and cgroups (named after the dead graders)
            try:
                from course_tools.grading import sandbox

                sandbox.sweep_stale(Path(sandbox.ROOT_SANDBOXES))
            except Exception:   # noqa: BLE001 - best effort; the next kernel start sweeps them too
                pass
        return killed

    def _run(self, groups: list[list[str]], everyone: Sequence[str]) -> None:
        """Grade ``groups`` (at most ``lanes`` processes at a time) until done, killing at budgets."""
        self.queue = [_order(g) for g in groups if g]
        while self.queue or self.active:
            while self.queue and len(self.active) < self.lanes:
                self.active.append(self._start(self.queue.pop(0), everyone))
            time.sleep(POLL_S)
            now = time.monotonic()
            for p in list(self.active):
                self._scan(p, now)
                cur = p.current()
                if p.proc.poll() is not None:
                    self.active.remove(p)
                    self.finished |= set(p.seen)
                    text = self._finish(p)
                    if p.proc.returncode != 0:
                        for s in p.group:
                            self.texts[s] = text[-2000:]
                    continue
                over = cur is not None and now - p.seen[cur] > p.budget[cur]
                out_of_time = self.deadline is not None and now > self.deadline
                if not (over or out_of_time):
                    continue
                self._kill(p)
                self.active.remove(p)
                self._finish(p)
                self.finished |= {s for s in p.seen if s != cur}
                if cur is not None:
                    shutil.rmtree(self.autograded / cur / self.chapter, ignore_errors=True)   # half written
                    spent = now - p.seen[cur]
                    self.outcome[cur] = {
                        "status": OVER_BUDGET, "seconds": round(spent, 1), "budget_s": round(p.budget[cur], 1),
                        "reason": f"over its grading budget: stopped after {spent:.0f} s (its share of the task's "
                                  f"time left was {p.budget[cur]:.0f} s; a larger --time or a smaller --shard-size "
                                  "gives it more, a rerun gives it the task's time shared with fewer)"}
                    self.log(f"  {safe(cur)}: over its budget of {p.budget[cur]:.0f} s, stopped")
                rest = [s for s in p.group if s not in p.seen]
                if rest and self.deadline is not None and time.monotonic() < self.deadline:
                    self.queue.insert(0, rest)   # the students after it: a new nbgrader process
                else:
                    for s in rest:
                        self.outcome[s] = {"status": NOT_GRADED,
                                           "reason": "the task ran out of time before grading it"}

    def grade(self, students: Sequence[str]) -> None:
        """Grade ``students``; ``outcome`` then holds each one's status (see the module docstring)."""
        from course_tools import classroom

        everyone = sorted(set(classroom.submitted_students(self.root, self.chapter)) | set(students))
        students = sorted(students)
        n = max(1, min(self.lanes, len(students)))
        self._run([students[i::n] for i in range(n)], everyone)
        done = classroom._graded(self.root, self.url, self.chapter, students, self.autograded)
        again = [s for s in students if s not in done and s not in self.outcome]
        if again:   # as `llm-course autograde`: a student whose run failed is retried alone
            self.log(f"retrying {len(again)} submission(s) one at a time: {', '.join(map(safe, again))}")
            self._run([[s] for s in again], everyone)
            done = classroom._graded(self.root, self.url, self.chapter, students, self.autograded)
        for s in students:
            if s in self.outcome:
                continue
            if s in done:
                self.outcome[s] = {"status": GRADED}
                continue
            reason = failure_reason(self.texts.get(s, "not graded (see nbgrader's output)"))
            if not any((self.root / "submitted" / s / self.chapter).glob("*.ipynb")):
                reason = f"no notebook in submitted/{safe(s)}/{safe(self.chapter)}"
            self.outcome[s] = {"status": FAILED, "reason": reason}

    def finished_so_far(self, students: Sequence[str]) -> dict[str, dict[str, Any]]:
        """On a signal, with the processes killed (:meth:`kill_all`): the students nbgrader finished
        with their notebook written are graded, the others ``not graded``."""
        out = dict(self.outcome)
        for s in students:
            if s not in out:
                graded = s in self.finished and (self.autograded / s / self.chapter).is_dir()
                out[s] = {"status": GRADED} if graded else {"status": NOT_GRADED, "reason": "stopped"}
        return out


# --------------------------------------------------------------------------- the task

def _publish(local: Path, dest: Path) -> None:
    """``local`` to ``dest`` on the shared file system: copied under a temporary name, then renamed."""
    stage = dest.parent / f".{dest.name}.{os.getpid()}.{socket.gethostname()}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(stage, ignore_errors=True)
    shutil.copytree(local, stage, symlinks=True,
                    ignore=lambda d, names: [SCRATCH] if Path(d) == local and SCRATCH in names else [])
    if dest.exists():   # a stale or partial result: replaced whole
        old = dest.parent / f".{dest.name}.old.{os.getpid()}"
        dest.rename(old)
        stage.rename(dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        stage.rename(dest)


def _settle_sqlite(db: Path) -> None:
    """Roll back what a killed nbgrader left half written (SQLite does it on the first read)."""
    try:
        with sqlite3.connect(db, timeout=5) as con:
            con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        pass


def work(manifest_path: str | Path, index: int, *, jobs: int | None = None, time_limit_s: float | None = None,
         log: Log = print) -> dict[str, Any]:
    """Grade shard ``index``; returns its result (also written to ``results/<index>/result.json``).

    ``time_limit_s``: the task's time limit (what ``submit`` passed to ``sbatch --time``), from which
    each submission's budget is derived; None (and no ``$SLURM_JOB_END_TIME``): no budget.
    Raises :class:`ShardStopped` after SIGTERM/SIGINT (what was finished is published first).
    """
    t_start = time.perf_counter()
    m = Manifest.load(manifest_path)
    if not 0 <= index < len(m.shards):
        raise ShardError(f"no shard {index}: the manifest has {len(m.shards)}")
    shard = m.shards[index]
    prev = m.result(index)
    if is_complete(prev):
        log(f"shard {index} ({shard.chapter}: {', '.join(map(safe, shard.students))}): already graded from the same "
            f"inputs (fingerprint {shard.fingerprint}), nothing to do")
        return {**prev, "skipped": True}
    todo = todo_students(prev) if prev is not None else list(shard.students)
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
    deadline_epoch, reserve = task_deadline(time_limit_s)
    deadline = None if deadline_epoch is None else time.monotonic() + (deadline_epoch - time.time())
    sweep_local(log=log)
    stopped: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        first = not stopped
        stopped.append(signum)
        if first:
            raise _Signalled(signum)

    handlers = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    local = Path(tempfile.mkdtemp(prefix=f"{LOCAL_PREFIX}{index:05d}-"))   # node-local ($TMPDIR)
    grader: _Grader | None = None
    try:
        (local / SCRATCH).mkdir()
        (local / SCRATCH / "owner.json").write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(),
                                                      "slurm": _slurm_id()}))
        if prev is not None:   # a partial result: its finished students stay, the others are graded again
            src = m.result_dir(index)
            shutil.copy(src / "gradebook.db", local / "gradebook.db")
            shutil.copytree(src / "autograded", local / "autograded", symlinks=True)
            for s in todo:
                shutil.rmtree(local / "autograded" / s, ignore_errors=True)
            log(f"shard {index}: a partial result exists; grading the {len(todo)} student(s) still to do")
        else:
            shutil.copy(template, local / "gradebook.db")
            (local / "autograded").mkdir()
        url = classroom.sqlite_busy_url(f"sqlite:///{local / 'gradebook.db'}")
        scripts = str(Path(sys.executable).parent)   # a new SQLite gradebook runs `alembic` from PATH
        if scripts not in os.environ.get("PATH", "").split(os.pathsep):
            os.environ["PATH"] = scripts + os.pathsep + os.environ.get("PATH", "")
        from course_tools.grading.course_code import check_same_course_code

        try:
            check_same_course_code(course_root=root)
            classroom._reference_run(shard.chapter, root, log)
        except RuntimeError as exc:   # e.g. the reference run failed: nothing of this shard can be graded
            raise ShardError(f"shard {index} ({shard.chapter}): {exc}") from exc
        if deadline is not None:
            left = deadline - time.monotonic()
            log(f"shard {index}: {len(todo)} submission(s), {left:.0f} s of grading before the task's limit "
                f"(less {reserve:.0f} s to publish): about {left * min(cpus, len(todo)) / max(1, len(todo)):.0f} s "
                "each, a submission's unused time going to the next")
        grader = _Grader(root, shard.chapter, local, url, cpus, deadline, log)
        t_grade = time.perf_counter()
        try:
            grader.grade(todo)
        except _Signalled as sig:
            grader.kill_all()
            students = {**(prev or {}).get("students", {}), **grader.finished_so_far(todo)}
            _stopped(m, index, shard.chapter, local, students, sig.signum, prev, log)
        stopped.append(0)   # graded: a signal from now on waits for the result to be published
        students = {s: v for s, v in {**(prev or {}).get("students", {}), **grader.outcome}.items()
                    if s in shard.students}
        students = {s: students[s] for s in shard.students}
        result = {"index": index, "chapter": shard.chapter, "fingerprint": shard.fingerprint,
                  "students": students, "complete": all(v["status"] in FINAL for v in students.values()),
                  "host": socket.gethostname(), "slurm": _slurm_id(), "cpus": cpus,
                  "time_limit_s": time_limit_s, "seconds": round(time.perf_counter() - t0, 1),
                  # where a task's time goes: checks before grading (sandbox probe, fingerprint,
                  # template), grading (nbgrader's start-up included), publishing (set below)
                  "timings": {"setup_s": round(t_grade - t_start, 2),
                              "grading_s": round(time.perf_counter() - t_grade, 2)},
                  "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (local / "result.json").write_text(json.dumps(result, indent=1))
        (local / "nbgrader.log").write_text("\n\n".join(grader.logs))
        t_pub = time.perf_counter()
        dest = m.result_dir(index)
        _publish(local, dest)
        result["timings"]["publish_s"] = round(time.perf_counter() - t_pub, 2)
        (dest / "result.json").write_text(json.dumps(result, indent=1))
    except _Signalled as sig:   # before or after grading: nothing new to publish
        if grader is not None:
            grader.kill_all()
        raise ShardStopped(f"shard {index} ({shard.chapter}): stopped by {signal.Signals(sig.signum).name} before "
                           "grading; nothing published; node-local folder removed", sig.signum) from None
    finally:
        shutil.rmtree(local, ignore_errors=True)
        for sig, h in handlers.items():
            signal.signal(sig, h)
    graded = sum(v["status"] == GRADED for v in students.values())
    log(f"shard {index} ({shard.chapter}): graded {graded}/{len(students)} in {result['seconds']} s on "
        f"{result['host']}" + "".join(f"\n  {v['status'].upper()} {safe(s)}: {safe(v.get('reason', ''))}"
                                      for s, v in students.items() if v["status"] != GRADED))
    return result


def _stopped(m: Manifest, index: int, chapter: str, local: Path, students: dict[str, dict[str, Any]], signum: int,
             prev: dict[str, Any] | None, log: Log) -> None:
    """On SIGTERM/SIGINT, with nbgrader killed: publish the students finished (if any is new), then
    raise :class:`ShardStopped` (the caller removes the node-local folder)."""
    name = signal.Signals(signum).name
    shard = m.shards[index]
    students = {s: students.get(s, {"status": NOT_GRADED, "reason": "the task was stopped before grading it"})
                for s in shard.students}
    for v in students.values():
        if v["status"] == NOT_GRADED:
            v["reason"] = f"the task was stopped ({name}: its time limit, or scancel) before grading it"
    new = [s for s, v in students.items() if v["status"] in FINAL
           and (prev is None or prev["students"].get(s, {}).get("status") not in FINAL)]
    if new:
        _settle_sqlite(local / "gradebook.db")
        result = {"index": index, "chapter": chapter, "fingerprint": shard.fingerprint, "students": students,
                  "complete": False, "stopped": name, "host": socket.gethostname(), "slurm": _slurm_id(),
                  "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        (local / "result.json").write_text(json.dumps(result, indent=1))
        _publish(local, m.result_dir(index))
    done = sum(v["status"] == GRADED for v in students.values())
    msg = (f"shard {index} ({chapter}): stopped by {name}; {done}/{len(students)} graded"
           + (f", published (partial: `llm-course cluster rerun` grades the rest)" if new else ", nothing new published")
           + "; node-local folder removed")
    log(msg)
    raise ShardStopped(msg, signum)
