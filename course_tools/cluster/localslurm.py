"""A one-node Slurm on this machine, to try the cluster path (and for ``tests/test_slurm.py``).

``llm-course cluster local-slurm start DIR`` writes ``DIR/slurm.conf`` (localhost, every core,
``ProctrackType=proctrack/linuxproc``, ``TaskPlugin=task/none``: no cgroups or systemd needed;
no accounting database, so the job completion log ``jobcomp/filetxt`` keeps the final state of
each task), a fresh MUNGE key, and starts ``munged`` (as the ``munge`` account), ``slurmctld`` and
``slurmd`` in the background, as root; ``... stop DIR`` stops them. Use the cluster with
``export SLURM_CONF=DIR/slurm.conf``. Debian packages: ``slurmctld slurmd slurm-client munge``.
"""
from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

CONF = """# one-node Slurm written by course_tools/cluster/localslurm.py
ClusterName=llmcourse
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_sock}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={d}/log/jobcomp.txt
MinJobAge=3600
MaxArraySize={max_array}
DefMemPerCPU=1024
ReturnToService=2
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
MpiDefault=none
SwitchType=switch/none
InactiveLimit=0
KillWait=5
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={mem} State=UNKNOWN
PartitionName=grading Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def why_not() -> str | None:
    """None when a one-node Slurm can be started here, else what is missing."""
    missing = [b for b in ("munged", "slurmctld", "slurmd", "sbatch", "scontrol") if shutil.which(b) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (apt-get install slurmctld slurmd slurm-client munge)"
    if os.geteuid() != 0:
        return "slurmd must run as root to start jobs as their users (run as root)"
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no 'munge' account (the munge package creates it)"
    return None


@dataclass
class LocalSlurm:
    folder: Path

    @property
    def conf(self) -> Path:
        return self.folder / "slurm.conf"

    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def logs(self) -> str:
        out = []
        for f in sorted((self.folder / "log").glob("*")):
            text = f.read_text(errors="replace")
            out.append(f"--- {f.name}\n{text[-2000:]}")
        return "\n".join(out)


def start(folder: str | Path, *, cpus: int | None = None, max_array: int = 1001, timeout: float = 60) -> LocalSlurm:
    """Start munged, slurmctld and slurmd for a one-node cluster configured in ``folder``."""
    why = why_not()
    if why:
        raise RuntimeError(why)
    d = Path(folder).resolve()
    for sub in ("state", "spool", "log"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    d.chmod(0o755)
    # munged runs as `munge`, which must reach its key and socket: a folder of its own under /tmp
    # (the caller's folder may sit below one only root can enter, e.g. pytest's)
    mdir = Path(tempfile.mkdtemp(prefix="llmc-munge-"))
    (d / "munge-dir").write_text(str(mdir))
    mdir.chmod(0o711)
    (mdir / "key").mkdir()
    key = mdir / "key" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    shutil.chown(key, "munge", "munge")
    (mdir / "key").chmod(0o700)
    shutil.chown(mdir / "key", "munge", "munge")
    shutil.chown(mdir, "munge", "munge")
    sock = mdir / "munge.sock"
    res = subprocess.run(["runuser", "-u", "munge", "--", shutil.which("munged") or "munged", "--force",
                          f"--key-file={key}", f"--socket={sock}", f"--pid-file={mdir / 'munged.pid'}",
                          f"--log-file={mdir / 'munged.log'}", f"--seed-file={mdir / 'seed'}"],
                         capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise RuntimeError(f"munged did not start: {(res.stderr or res.stdout).strip()[:500]}")
    mem_mb = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    host = socket.gethostname().split(".")[0]
    (d / "slurm.conf").write_text(CONF.format(
        host=host, ctld_port=_free_port(), d_port=_free_port(), munge_sock=sock, d=d,
        max_array=max_array, cpus=cpus or os.cpu_count() or 1, mem=max(1024, int(mem_mb * 0.9))))
    env = dict(os.environ, SLURM_CONF=str(d / "slurm.conf"))
    pids = {}
    for name, cmd in (("slurmctld", ["slurmctld", "-D", "-i", "-f", str(d / "slurm.conf")]),
                      ("slurmd", ["slurmd", "-D", "-f", str(d / "slurm.conf")])):
        out = open(d / "log" / f"{name}.stdout", "w")
        p = subprocess.Popen([shutil.which(cmd[0]), *cmd[1:]], env=env, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True)
        pids[name] = p.pid
        (d / "pids.json").write_text(json.dumps(pids))
        time.sleep(1.0)
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        res = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True, text=True)
        if res.returncode == 0 and res.stdout.strip() in ("idle", "mix", "alloc"):
            return LocalSlurm(d)
        time.sleep(1.0)
    cluster = LocalSlurm(d)
    stop(d)
    raise RuntimeError(f"the one-node Slurm did not come up in {timeout:.0f} s:\n{cluster.logs()}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def stop(folder: str | Path) -> None:
    """Stop the daemons ``start`` started in ``folder`` (by their process ids)."""
    d = Path(folder).resolve()
    try:
        pids = json.loads((d / "pids.json").read_text())
    except (OSError, ValueError):
        pids = {}
    mdir = None
    try:
        mdir = Path((d / "munge-dir").read_text().strip())
        pids["munged"] = int((mdir / "munged.pid").read_text().strip())
    except (OSError, ValueError):
        pass
    for pid in pids.values():
        if _alive(pid):
            os.kill(pid, signal.SIGTERM)
    t0 = time.monotonic()
    while any(_alive(p) for p in pids.values()) and time.monotonic() - t0 < 15:
        for p in pids.values():   # reap our own children
            try:
                os.waitpid(p, os.WNOHANG)
            except ChildProcessError:
                pass
        time.sleep(0.2)
    for pid in pids.values():
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    (d / "pids.json").unlink(missing_ok=True)
    if mdir is not None and mdir.name.startswith("llmc-munge-"):
        shutil.rmtree(mdir, ignore_errors=True)
