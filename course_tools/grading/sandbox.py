"""A sandbox per submission: the kernel that executes a student's notebook runs under bubblewrap.

``nbgrader_config.py`` executes submissions with :class:`SandboxedExecute`, whose kernel manager
(:class:`SandboxedKernelManager`) starts each kernel as ``launch.py outer … bwrap … launch.py
inner … python -m ipykernel_launcher``:

* **an allow-list, not a block-list** (:func:`allowed_paths`): the kernel's file system is an
  empty root holding, read-only, the system (``/usr`` and its links, a few named files of
  ``/etc``), the Python installation and the virtual environment (the base installation's own
  ``site-packages`` hidden when the environment does not use it), the course packages the
  notebooks import (``course_utils``, ``course_tools``), ``assets/`` and ``nbgrader_config.py``
  of the checkout — no ``.git``, ``solutions/``, ``chapters/``, ``tests/``, gradebook, reference
  cache or other submission — and the model caches. Nothing else of the host exists there
  (``/opt``, ``/root``, ``/home``, ``/srv``, package caches, other environments).
* **no privilege**: when the grader is root, the kernel runs as an unprivileged user
  (``GradingLimits.uid``, ``nobody``) through ``setpriv`` with every capability dropped and
  ``no_new_privs``; it cannot mount, unmount, ptrace or change ownership. Started by an ordinary
  user, bubblewrap puts it in a user namespace without capabilities.
* **a private working folder**: the kernel works in a size-limited tmpfs at the path of its
  nbgrader folder, filled from a pristine copy of the submission's regular files
  (``pristine.py``); nbgrader's ``autograded/`` folder is not in the sandbox at all, so what the
  kernel writes is discarded with it and nothing it made is ever followed by the grader.
* **no network, no survivors, nothing left behind**: private network, PID, IPC and UTS namespaces;
  the kernel talks to nbgrader over ZMQ IPC sockets in a private folder; every process dies with
  the kernel; a seccomp filter (``seccomp.py``) refuses the kernel keyrings (``add_key``,
  ``keyctl``, ``request_key``), which no namespace makes private to one kernel.
* **an environment by allow-list** (:func:`kernel_env`): the grader's tokens, passwords and
  ``SLURM_*`` variables never reach the kernel (student code can print its environment).
* **limits** (``limits.py``): memory and tasks (cgroups), rlimits, tmpfs sizes, and the output
  and wall-clock limits of :class:`LimitedExecution`.
  A display is updated only in the cell that runs (never an output of an earlier cell).

Where bubblewrap is missing or cannot create namespaces, autograding **refuses**, saying why,
unless the instructor passes ``--SandboxedKernelManager.allow_unsandboxed=True`` (then each
kernel runs as a plain process and a warning is logged). Measured overhead: see README.
"""
from __future__ import annotations

import asyncio
import json
import os
import select
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient
from nbclient.util import run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import Execute
from traitlets import Bool, Enum, List, Type, Unicode

from course_tools.grading.launch import SECCOMP_FD
from course_tools.grading.limits import GradingLimits, KernelCgroup, rlimits
from course_tools.grading.pristine import IGNORE as PRISTINE_IGNORE
from course_tools.grading.pristine import copy_regular_files
from course_tools.grading.seccomp import SeccompUnavailable
from course_tools.grading.seccomp import write_filter as write_seccomp_filter
from course_tools.grading import zygote
from course_utils.paths import cache_dir, repo_root
from course_utils.records import RECORD_ENV

# What of the checkout a kernel sees (read-only): the packages notebooks import, the chapter
# assets, and the config file that course_utils.paths.repo_root() looks for.
CHECKOUT_ALLOWED = ("course_utils", "course_tools", "assets", "nbgrader_config.py")
# What of /etc (the rest of /etc is not there): libraries, names, time, fonts, certificates.
ETC_ALLOWED = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "localtime", "timezone", "passwd", "group",
               "nsswitch.conf", "host.conf", "hosts", "fonts", "ssl", "ca-certificates", "mime.types", "os-release",
               "debian_version", "matplotlibrc")
SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
LAUNCH = Path(__file__).with_name("launch.py")
# Instructor-side hook for tests: every file of this folder becomes an IPython startup file of
# the sandboxed kernel (tests/test_integrity.py uses it to make a library write to stderr).
STARTUP_ENV = "LLM_COURSE_SANDBOX_STARTUP"
# Inside the sandbox: the pristine copy of the submission and the home template, read-only.
STAGE = "/run/llm-course"
# Where a root grader keeps each kernel's host folder (sockets, staging), each a small tmpfs.
ROOT_SANDBOXES = "/run/llm-course-sandboxes"
# The kernel's $HOME inside the sandbox (a tmpfs): one path for every kernel, so that the template
# the kernels are forked from (zygote.py) imported its libraries with the same environment.
KERNEL_HOME = Path("/run/llm-course-home")
ZYGOTE = Path(__file__).with_name("zygote.py")


# The kernel's environment is an allow-list of the grader's (:func:`kernel_env`): student code can
# print its environment into its own feedback, so an instructor's tokens, passwords, or the SLURM_*
# variables of a cluster job must never reach it. Kept: what Python, the libraries and the course
# read (locale, time zone, thread counts, the course's own switches, Hugging Face's offline and
# logging switches); the sandbox then sets HOME, TMPDIR, the Jupyter/IPython/matplotlib folders,
# the caches' locations and the record switch itself.
KERNEL_ENV_ALLOWED = frozenset({
    "PATH", "LD_LIBRARY_PATH", "LANG", "LANGUAGE", "TZ",
    "PYTHONHASHSEED", "PYTHONIOENCODING", "PYTHONUTF8", "PYTHONDONTWRITEBYTECODE", "PYTHONWARNINGS",
    "MPLBACKEND",
    # the course (course_utils/env.py, progress.py, translation.py, records.py) and nbgrader
    "LLM_COURSE_CI", "LLM_COURSE_OFFLINE", "LLM_COURSE_LANG", "LLM_COURSE_PROGRESS", "NBGRADER_EXECUTION",
    RECORD_ENV,
    # Hugging Face: offline and quiet (never HF_TOKEN)
    "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_DISABLE_TELEMETRY",
    "HF_HUB_DISABLE_PROGRESS_BARS", "HF_HUB_DISABLE_IMPLICIT_TOKEN", "TRANSFORMERS_VERBOSITY",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS", "TOKENIZERS_PARALLELISM",
    # thread pools (an autograde worker sizes them to its share of the cores)
    "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
})
# Whole families: the locale (LC_ALL, LC_CTYPE...) and OpenBLAS's settings (OPENBLAS_NUM_THREADS,
# and OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE, which some machines need for correct results).
KERNEL_ENV_PREFIXES = ("LC_", "OPENBLAS_")


def kernel_env(parent: Mapping[str, str], extra: Iterable[str] = ()) -> dict[str, str]:
    """The part of ``parent`` (the grader's environment) a sandboxed kernel gets: the names of
    :data:`KERNEL_ENV_ALLOWED`, those starting with :data:`KERNEL_ENV_PREFIXES`, and ``extra``
    (``SandboxedKernelManager.env_allow``). Everything else (secrets, ``SLURM_*``, ``PYTHONPATH``,
    the course root) is left out."""
    allowed = KERNEL_ENV_ALLOWED | set(extra)
    return {k: v for k, v in parent.items()
            if isinstance(k, str) and isinstance(v, str) and (k in allowed or k.startswith(KERNEL_ENV_PREFIXES))}


class SandboxUnavailable(RuntimeError):
    """bubblewrap cannot run here; the message says what to do."""


def probe() -> str | None:
    """None when bubblewrap can create the namespaces the sandbox needs, else the reason."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap is not installed (Debian/Ubuntu: apt-get install bubblewrap)"
    try:
        res = subprocess.run([exe, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-net",
                              "--unshare-pid", "--die-with-parent", "true"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap failed to start: {exc}"
    if res.returncode != 0:
        return f"bubblewrap cannot create namespaces here ({res.stderr.strip()[:200]})"
    return None


def package_paths(names: list[str]) -> list[Path]:
    """Where the installed top-level packages ``names`` live (folders or single files), without importing them."""
    import importlib.util

    found: list[Path] = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        if spec.submodule_search_locations:
            found += [Path(p).resolve() for p in spec.submodule_search_locations]
        elif spec.origin and spec.origin not in ("built-in", "frozen"):
            found.append(Path(spec.origin).resolve())
    return found


def mask_args(names: list[str], stub_dir: Path) -> list[str]:
    """bubblewrap arguments that make the packages ``names`` unimportable: their files are replaced.

    A package folder becomes an empty tmpfs holding only an ``__init__.py`` that raises
    ``ModuleNotFoundError`` (an empty folder would import as a namespace package); a single-file
    module is replaced by that stub. Nothing of the package's code is left to reach in the sandbox.
    """
    args: list[str] = []
    stub_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        stub = stub_dir / f"{name}.py"
        text = (f"raise ModuleNotFoundError({name!r} ' is not installed in this check: the autograder runs "
                f"this exercise with ' {name!r} ' removed, because it must be written without it', "
                f"name={name!r})\n")
        if not stub.is_file() or stub.read_text() != text:  # shared folder: replace atomically
            tmp = stub_dir / f".{name}.{os.getpid()}.tmp"
            tmp.write_text(text)
            os.replace(tmp, stub)
        for path in package_paths([name]):
            if path.is_dir():
                args += ["--tmpfs", str(path), "--ro-bind", str(stub), str(path / "__init__.py")]
            else:
                args += ["--ro-bind", str(stub), str(path)]
    return args


def default_stub_dir() -> Path:
    """One folder per user for the stubs of :func:`mask_args` (rewritten in place, never leaked)."""
    return Path(tempfile.gettempdir()) / f"llm-course-stubs-{os.getuid()}"


@lru_cache(maxsize=1)
def bwrap_supports_size() -> bool:
    """bubblewrap >= 0.10 sizes its own tmpfs mounts (``--size``)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return False
    res = subprocess.run([exe, "--help"], capture_output=True, text=True)
    return "--size" in (res.stdout + res.stderr)


def _hf_home() -> Path:
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "huggingface")
    return Path(home).resolve()


def allowed_paths() -> list[Path]:
    """Every host path a kernel sees (read-only), besides /dev, /proc and its own tmpfs folders."""
    paths = [Path("/usr")]
    paths += [Path("/etc") / name for name in ETC_ALLOWED]
    prefixes = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(),
                Path(os.path.realpath(sys.executable)).parent.parent}
    paths += sorted(prefixes)
    root = repo_root()
    paths += [root / name for name in CHECKOUT_ALLOWED]
    paths += [cache_dir().resolve(), _hf_home()]
    return [p for p in paths if os.path.lexists(p)]


def hidden_inside_allowed(extra_private: list[Path] | None = None) -> list[Path]:
    """Paths under an allowed one that the kernel must not see (replaced by an empty tmpfs / file)."""
    out = list(extra_private or [])
    refs = os.environ.get("LLM_COURSE_REFERENCES")   # a reference cache kept elsewhere (the tests share one)
    if refs:
        out.append(Path(refs).resolve())
    if Path(sys.prefix).resolve() != Path(sys.base_prefix).resolve():
        cfg = Path(sys.prefix) / "pyvenv.cfg"
        if cfg.is_file() and "include-system-site-packages = true" not in cfg.read_text():
            # the base installation's packages (not on the environment's path, but importable by hand)
            out += [p for p in Path(sys.base_prefix).resolve().glob("lib/python3*/site-packages")]
    return out


def bwrap_args(workdir: Path, sockdir: Path, home: Path, stage: Path, limits: GradingLimits,
               extra_private: list[Path] | None = None, masked_packages: list[str] | None = None,
               stub_dir: Path | None = None, template: bool = False) -> list[str]:
    """The bubblewrap command line (without the kernel command) for one submission's kernel.

    ``stage`` (host) holds ``submission/`` (the pristine copy) and ``home/`` (the home template);
    the launcher copies both into the kernel's tmpfs ``workdir`` and ``home``. ``masked_packages``:
    top-level packages whose files are replaced by a stub raising ``ModuleNotFoundError``.
    ``template``: the same view for a :class:`ZygoteTemplate`, which stays in the host's PID
    namespace (the pids it reports are the grader's) and outlives the grader that started it.
    """
    args = ["bwrap"] + ([] if template else ["--die-with-parent"]) + ["--new-session", "--unshare-net"]
    args += ([] if template else ["--unshare-pid"]) + ["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
                                                       "--dev", "/dev", "--proc", "/proc"]
    sized = bwrap_supports_size() and os.geteuid() != 0
    # /tmp first: a checkout, an environment or a course kept in /tmp is bound below it afterwards
    args += (["--size", str(limits.tmp_mb * (1 << 20))] if sized else []) + ["--perms", "1777", "--tmpfs", "/tmp"]
    for name in SYSTEM_LINKS:
        link = Path("/") / name
        if link.is_symlink():
            args += ["--symlink", os.readlink(link), str(link)]
        elif link.is_dir():
            args += ["--ro-bind", str(link), str(link)]
    # bubblewrap makes missing parent folders 0700 as root: the unprivileged kernel could not cross them
    allowed = allowed_paths()
    targets = [*allowed, sockdir, Path(STAGE), home, workdir]
    parents = sorted({q for t in targets for q in t.parents if q != Path("/")}, key=lambda q: (len(q.parts), str(q)))
    for q in parents:
        args += ["--perms", "0755", "--dir", str(q)]
    for p in sorted(set(allowed), key=lambda q: (len(q.parts), str(q))):
        args += ["--ro-bind", str(p), str(p)]
    for q in hidden_inside_allowed(extra_private):
        if not any(q == a or a in q.parents for a in allowed):
            continue
        if q.is_dir():
            args += ["--tmpfs", str(q)]
        elif q.exists():
            args += ["--ro-bind", "/dev/null", str(q)]
    if masked_packages:
        args += mask_args(list(masked_packages), stub_dir or default_stub_dir())
    for path, mb in ((str(home), limits.home_mb), (str(workdir), limits.workdir_mb)):
        args += (["--size", str(mb * (1 << 20))] if sized else []) + ["--perms", "0755", "--tmpfs", path]
    # ipykernel polls its parent and exits when the parent pid becomes 1, which inside a PID
    # namespace it is from the start: 1 switches the poll off (--die-with-parent does its job).
    args += ["--setenv", "JPY_PARENT_PID", "1"]
    args += ["--ro-bind", str(stage), STAGE, "--bind", str(sockdir), str(sockdir), "--chdir", "/"]
    return args


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def sweep_stale(parent: Path) -> None:
    """Remove what graders that were killed left behind: their sandboxes' tmpfs folders and cgroups
    (each is named after the grader's pid)."""
    from course_tools.grading.limits import sweep_stale_cgroups

    for d in parent.glob("llm-course-sandbox-*"):
        pid = d.name.split("-")[3] if len(d.name.split("-")) > 4 else ""
        if not pid.isdigit() or _pid_alive(int(pid)):
            continue
        subprocess.run(["umount", "-l", str(d)], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)
    sweep_stale_cgroups(_pid_alive)


def inner_spec(workdir: Path, home: Path, limits: GradingLimits) -> dict[str, Any]:
    """What the launcher does inside the sandbox before it starts the kernel (``launch.py inner``)."""
    return {"mounts": [["/tmp", limits.tmp_mb], [str(home), limits.home_mb], [str(workdir), limits.workdir_mb]],
            "copies": [[f"{STAGE}/submission", str(workdir)], [f"{STAGE}/home", str(home)]],
            "uid": limits.uid, "gid": limits.gid, "cwd": str(workdir)}


def _release_sandbox(base: Path) -> None:
    """Unmount (a root grader's tmpfs) and remove a kernel's host folder."""
    if os.path.ismount(base):
        subprocess.run(["umount", "-l", str(base)], capture_output=True)
    shutil.rmtree(base, ignore_errors=True)


ZYGOTE_PREFIX = "llm-course-zygote-"


def _connectable(path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(path))
        return True
    except OSError:
        return False


@lru_cache(maxsize=None)
def _zygote_source() -> str:
    return ZYGOTE.read_text()


# what allowed_paths() (cache_dir, _hf_home) and hidden_inside_allowed() read from the grader's environment
_VIEW_ENV = ("LLM_COURSE_REFERENCES", "LLM_COURSE_CACHE", "XDG_CACHE_HOME", "HF_HOME", "HOME")


@lru_cache(maxsize=64)
def _template_key(env: tuple[tuple[str, str], ...], extra_private: tuple[str, ...], masked: tuple[str, ...],
                  slurm_job: str, view_env: tuple[str, ...]) -> str:
    """The key of a template's environment and view. ``view_env``: the grader's variables that
    :func:`allowed_paths` and :func:`hidden_inside_allowed` read (:data:`_VIEW_ENV`), so that a
    cached key never outlives the view it was computed for."""
    import hashlib

    private = [Path(p) for p in extra_private]
    src = json.dumps([slurm_job, sys.executable, _zygote_source(), list(env), list(extra_private), sorted(masked),
                      [str(p) for p in allowed_paths()], [str(p) for p in hidden_inside_allowed(private)]])
    return hashlib.sha256(src.encode()).hexdigest()[:20]


class ZygoteTemplate:
    """A pre-imported template process (``zygote.py``) for kernels of one environment and one view.

    It runs under bubblewrap with a kernel's allow-list (:func:`bwrap_args`, with the same masked
    packages; in the host's PID namespace, so that the pids it reports are the grader's), the
    seccomp filter and the kernel's environment, as root. Graders share it: it is found by a key of
    all that (and of the interpreter and ``zygote.py``) under :data:`ROOT_SANDBOXES`, where only root
    can reach its socket, and it exits after ``zygote.IDLE_SECONDS`` without a request.

    Making one only computes where it lives; :meth:`start` starts the process where none answers.
    """

    def __init__(self, env: dict[str, str], limits: GradingLimits, extra_private: list[Path], masked: list[str]):
        self._env, self._limits, self._private, self._masked = dict(env), limits, list(extra_private), list(masked)
        # a Slurm job's graders share a template only within the job: Slurm ends what a job started
        # (proctrack), which would take other jobs' kernels, children of the template, with it
        key = _template_key(tuple(sorted(env.items())), tuple(str(p) for p in extra_private), tuple(masked),
                            os.environ.get("SLURM_JOB_ID", ""), tuple(os.environ.get(k, "") for k in _VIEW_ENV))
        self.base = Path(ROOT_SANDBOXES) / f"{ZYGOTE_PREFIX}{key}"
        self.socket = str(self.base / "ctl" / "zygote.sock")

    def running(self) -> bool:
        """Whether its socket is there (it removes it when it ends idle; a crashed one is found on connecting)."""
        return os.path.exists(self.socket)

    def start(self) -> None:
        """Start the template unless one answers: one grader starts it, the others wait and use it."""
        import fcntl

        parent = Path(ROOT_SANDBOXES)
        parent.mkdir(mode=0o711, parents=True, exist_ok=True)
        with open(parent / f"{self.base.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not _connectable(Path(self.socket)):
                self._start()

    def _start(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)
        for sub in ("ctl", "stage", "work", "stubs"):
            (self.base / sub).mkdir(mode=0o700, parents=True)
        bpf = write_seccomp_filter(self.base / "seccomp.bpf")
        args = bwrap_args(self.base / "work", self.base / "ctl", KERNEL_HOME, self.base / "stage", self._limits,
                          self._private, self._masked, self.base / "stubs", template=True)
        fd = os.open(bpf, os.O_RDONLY)
        args[1:1] = ["--seccomp", str(fd)]
        tenv = dict(self._env)
        # what ipykernel sets before any cell runs, where the grader set no backend: matplotlib reads it at import
        tenv.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        try:
            proc = subprocess.Popen([*args, "--", sys.executable, str(ZYGOTE), "serve", self.socket], env=tenv,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    pass_fds=(fd,), cwd=self.base,
                                    start_new_session=True)
        finally:
            os.close(fd)
        # reaped when it ends (idle), however long this grader lives
        threading.Thread(target=proc.wait, name="template-reaper", daemon=True).start()
        ready, _, _ = select.select([proc.stdout], [], [], 180)
        line = proc.stdout.readline() if ready else b""
        proc.stdout.close()
        try:
            info = json.loads(line)
        except ValueError:
            info = {}
        if not info.get("ready"):
            if proc.poll() is None:
                proc.kill()
            raise RuntimeError(f"the kernel template did not start: {line.decode(errors='replace').strip()[:300]}")


def _watch_kernel(pid: int, inner: socket.socket) -> None:
    """Let the sandbox's launcher go (and with it the sandbox) when the forked kernel has exited."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        inner.close()
        return

    def wait() -> None:
        try:
            select.select([fd], [], [])
        finally:
            os.close(fd)
            inner.close()

    threading.Thread(target=wait, daemon=True, name=f"llm-course-kernel-{pid}").start()


class SandboxedKernelManager(AsyncKernelManager):
    """An ipykernel started inside bubblewrap, talking to its client over IPC sockets."""

    allow_unsandboxed = Bool(False, config=True,
                             help="Run kernels without a sandbox where bubblewrap is unavailable (not recommended).")
    extra_private = List(Unicode(), config=True, help="Paths inside the allowed ones to hide from the kernel.")
    masked_packages = List(Unicode(), config=True, help="Top-level packages the kernel cannot import: their files "
                                                        "are replaced by a stub (course_tools/grading/probe.py).")
    copy_ignore = List(Unicode(), default_value=list(PRISTINE_IGNORE), config=True,
                       help="Names of the submission's folder that are not copied into the kernel's folder.")
    zygote = Bool(True, config=True,
                  help="Fork kernels from a pre-imported template (course_tools/grading/zygote.py) where the grader is "
                       "root; LLM_COURSE_ZYGOTE=0 turns it off too.")
    env_allow = List(Unicode(), config=True,
                     help="Names of environment variables passed to the kernel besides KERNEL_ENV_ALLOWED "
                          "(the kernel's environment is an allow-list: student code can print it).")

    _sandbox_dir: Path | None = None
    _release: Any = None
    _cgroup: KernelCgroup | None = None
    copy_report: Any = None

    @property
    def limits(self) -> GradingLimits:
        return GradingLimits(config=self.config)

    async def _async_pre_start_kernel(self, **kw: Any):  # type: ignore[override]
        reason = probe()
        self._unsandboxed = reason is not None
        if reason is not None:
            if not self.allow_unsandboxed:
                raise SandboxUnavailable(
                    f"Autograding refuses to run student code without a sandbox: {reason}. A submission "
                    "could then read the solutions and the gradebook, keep processes running, or change "
                    "the next student's grade. Install bubblewrap, or pass "
                    "--SandboxedKernelManager.allow_unsandboxed=True to grade anyway.")
            self.log.warning("autograding WITHOUT a sandbox (%s): --SandboxedKernelManager.allow_unsandboxed", reason)
        from course_tools.grading.course_code import problem as course_code_problem

        mismatch = course_code_problem()   # the same course code in the grader and the kernel (cached)
        if mismatch is not None:
            raise SandboxUnavailable(f"Autograding refuses to start a kernel: {mismatch}")
        parent = None
        if os.geteuid() == 0:
            # outside /tmp: the launcher mounts a fresh /tmp inside, which would hide the sockets
            parent = Path(ROOT_SANDBOXES)
            parent.mkdir(mode=0o711, parents=True, exist_ok=True)
            sweep_stale(parent)
        base = self._sandbox_dir = Path(tempfile.mkdtemp(prefix=f"llm-course-sandbox-{os.getpid()}-", dir=parent))
        # released by cleanup, or when the manager goes away after a failed start
        self._release = weakref.finalize(self, _release_sandbox, base)
        self._mount_private(base)
        for sub in ("sock", "stage/home", "stage/submission"):
            (base / sub).mkdir(parents=True)
        os.chmod(base, 0o755)
        if os.geteuid() == 0 and not self._unsandboxed:
            os.chown(base / "sock", self.limits.uid, self.limits.gid)
        # interrupts reach the kernel as a message: a signal to bubblewrap would stop at the sandbox
        self.kernel_spec.interrupt_mode = "message"
        self.transport = "ipc"
        self.ip = str(base / "sock" / "k")
        self.connection_file = str(base / "sock" / "kernel.json")
        return await super()._async_pre_start_kernel(**kw)

    def _mount_private(self, base: Path) -> None:
        """As root, the sandbox's host folder (sockets, staging) is a small tmpfs: a kernel cannot fill the disk."""
        if os.geteuid() != 0 or shutil.which("mount") is None:
            return
        size = self.limits.submission_mb + 64
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}m,mode=0755,nosuid,nodev", "tmpfs", str(base)],
                       capture_output=True, text=True)   # where it fails, the folder stays on disk

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:  # type: ignore[override]
        assert self._sandbox_dir is not None
        base = self._sandbox_dir
        limits = self.limits
        stage = base / "stage"
        home = base / "home" if self._unsandboxed else KERNEL_HOME   # a tmpfs inside the sandbox
        startup = stage / "home" / ".ipython" / "profile_default" / "startup"
        startup.mkdir(parents=True, exist_ok=True)
        extra = os.environ.get(STARTUP_ENV)
        if extra and Path(extra).is_dir():
            for f in sorted(Path(extra).iterdir()):
                if f.is_file() and not f.is_symlink():
                    shutil.copyfile(f, startup / f.name)
        # an allow-list of the grader's environment (its tokens, passwords, SLURM_* never reach student code)
        env = kernel_env(kw.get("env") or os.environ, self.env_allow)
        env.update(HOME=str(home), IPYTHONDIR=str(home / ".ipython"), MPLCONFIGDIR=str(home / ".mpl"), TMPDIR="/tmp",
                   JUPYTER_RUNTIME_DIR=str(home / ".runtime"), JUPYTER_CONFIG_DIR=str(home / ".jupyter"),
                   JUPYTER_DATA_DIR=str(home / ".local"), XDG_CACHE_HOME=str(home / ".cache"),
                   LLM_COURSE_SANDBOXED="0" if self._unsandboxed else "1")
        env[RECORD_ENV] = "1"   # hidden tests write their records as outputs (course_utils/records.py)
        # model caches keep their real locations (read-only inside the sandbox)
        env["LLM_COURSE_CACHE"] = str(cache_dir().resolve())
        env["HF_HOME"] = str(_hf_home())
        kw["env"] = env
        workdir = Path(kw.get("cwd") or os.getcwd()).resolve()
        if self.masked_packages and self._unsandboxed:
            raise SandboxUnavailable("a check that removes packages (course_tools/grading/probe.py) needs bubblewrap: "
                                     "without a sandbox the packages cannot be removed")
        self.copy_report = copy_regular_files(workdir, stage / "submission", max_total_bytes=limits.submission_mb << 20,
                                              ignore=tuple(self.copy_ignore))
        for rel, why in self.copy_report.skipped:
            self.log.warning("not copied into the kernel's folder: %s (%s)", rel, why)
        if self._unsandboxed:   # the instructor's choice: at least the kernel works in a copy
            shutil.copytree(stage / "home", home, dirs_exist_ok=True)
            kw["cwd"] = str(stage / "submission")
            await super()._async_launch_kernel(kernel_cmd, **kw)
            return
        self._cgroup = KernelCgroup(limits)
        if os.geteuid() == 0:
            os.chown(self.connection_file, limits.uid, limits.gid)   # the kernel reads its key there
            subprocess.run(["chmod", "-R", "a+rX", str(stage)], check=False)
        py = os.path.realpath(sys.executable)
        # no keyring, no key: nothing one kernel can leave for another through the kernel's keys (seccomp.py)
        try:
            bpf = write_seccomp_filter(base / "seccomp.bpf")
        except SeccompUnavailable as exc:
            raise SandboxUnavailable(f"Autograding refuses to run student code without its seccomp filter: {exc}") from None
        outer = [py, "-I", "-S", str(LAUNCH), "outer",
                 json.dumps({"procs": self._cgroup.procs_files(), "rlimits": rlimits(limits, self._cgroup.active),
                             "seccomp": str(bpf)}), "--"]
        inner = [py, "-I", "-S", str(LAUNCH), "inner", json.dumps(inner_spec(workdir, home, limits)), "--"]
        args = bwrap_args(workdir, base / "sock", home, stage, limits, [Path(p) for p in self.extra_private],
                          list(self.masked_packages), base / "stubs")
        args[1:1] = ["--seccomp", SECCOMP_FD]
        kw["cwd"] = str(base)
        template = self._template(env, kernel_cmd)
        if template is None:
            await super()._async_launch_kernel(outer + args + ["--", *inner, *kernel_cmd], **kw)
            return
        # the same sandbox, whose launcher waits; the kernel is forked from the template and enters it
        ready = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ready_path = base / "sock" / ".launcher"
        ready.bind(str(ready_path))
        ready.listen(1)
        spec = inner_spec(workdir, home, limits)
        spec["await"] = str(ready_path)
        inner = [py, "-I", "-S", str(LAUNCH), "inner", json.dumps(spec), "--", *kernel_cmd]
        try:
            await super()._async_launch_kernel(outer + args + ["--", *inner], **kw)
            await asyncio.to_thread(self._fork_kernel, template, ready, env, workdir, zygote.kernel_args(kernel_cmd),
                                    rlimits(limits, self._cgroup.active))
        finally:
            ready.close()
            ready_path.unlink(missing_ok=True)

    def _template(self, env: dict[str, str], kernel_cmd: list[str]) -> ZygoteTemplate | None:
        """The pre-imported template this kernel can be forked from, or None (it starts from nothing)."""
        if (not self.zygote or os.environ.get(zygote.ENV, "1") == "0" or os.geteuid() != 0
                or zygote.kernel_args(kernel_cmd) is None):
            return None
        template = ZygoteTemplate(env, self.limits, [Path(p) for p in self.extra_private], list(self.masked_packages))
        if template.running():
            return template          # not probed: a template that ended is started again by _fork_kernel
        try:
            template.start()
            return template
        except (OSError, RuntimeError, SeccompUnavailable) as exc:
            self.log.warning("kernels start without the pre-imported template: %s", exc)
            return None

    def _fork_kernel(self, template: ZygoteTemplate, ready: socket.socket, env: dict[str, str], workdir: Path,
                     kernel_args: list[str] | None, limits: dict[str, tuple[int, int]]) -> None:
        """Hand the template the namespaces of the sandbox whose launcher is waiting on ``ready``; put
        the template's child in the kernel's cgroups; keep the launcher until the kernel exits."""
        ready.settimeout(120)
        launcher, _ = ready.accept()
        launcher.settimeout(120)
        pid = struct.unpack("3i", launcher.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
        if zygote.read_line(launcher) != b"ready":
            raise RuntimeError("the sandbox's launcher did not get ready")
        fds = [os.open(f"/proc/{pid}/ns/{name}", os.O_RDONLY) for name, _ in zygote.NAMESPACES]
        fds.append(os.open(os.devnull, os.O_RDONLY))
        umask = os.umask(0o022)
        os.umask(umask)
        # JPY_PARENT_PID as bubblewrap sets it on the other path (ipykernel's parent poll off)
        spec = {"env": dict(env, JPY_PARENT_PID="1"), "cwd": str(workdir), "uid": self.limits.uid, "gid": self.limits.gid, "rlimits": limits,
                "args": kernel_args, "umask": umask}
        try:
            for attempt in (0, 1):
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    conn.settimeout(120)
                    conn.connect(template.socket)
                    zygote.send_fds(conn, json.dumps(spec).encode(), fds + [1, 2])
                    child = json.loads(zygote.read_line(conn))["pid"]
                    break
                except (OSError, ValueError, KeyError):
                    conn.close()
                    if attempt:
                        raise
                    # the template ended (idle, or it was killed) as this request came: start it again, once
                    template.start()
        finally:
            for fd in fds:
                os.close(fd)
        try:
            assert self._cgroup is not None
            for procs in self._cgroup.procs_files():
                with open(procs, "w") as f:
                    f.write(str(child))
            conn.sendall(b"go\n")
            kernel = json.loads(zygote.read_line(conn))["kernel"]
        finally:
            conn.close()
        launcher.settimeout(None)
        _watch_kernel(kernel, launcher)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:  # type: ignore[override]
        await super()._async_cleanup_resources(restart=restart)
        if restart:
            return
        if self._cgroup is not None:
            self._cgroup.remove()
            self._cgroup = None
        if self._release is not None:
            self._release()
            self._sandbox_dir = self._release = None


class LimitedExecution(NotebookClient):
    """The grader's side of the limits: output per cell and per notebook, wall-clock time, a stopped kernel.

    * A cell's outputs beyond ``GradingLimits.cell_output_kb`` / ``cell_outputs`` are dropped, and
      one line says so; beyond ``notebook_output_mb`` for the notebook, the kernel is stopped.
    * A cell that runs past its timeout is interrupted (as a message: a signal would stop at the
      sandbox); a kernel that does not answer the interrupt, dies (memory limit) or passes the
      notebook's ``wall_seconds`` is stopped.
    * Code cells outside the exercises (no nbgrader id: the source has a few, the rest a student
      added) beyond ``GradingLimits.ungraded_cells`` are not run (one note says so): 20,000 cells
      of ``pass`` held the grader 295 s, every cell within its own limit. The exercises' cells
      always run.
    * After a stop, the remaining cells are not run: each gets an error output saying why, so the
      cells before keep their points, the rest score 0, and the submission is graded and gets
      feedback instead of being dropped by nbgrader.
    """

    _stopped: str | None = None
    _started_at: float | None = None
    # the sandbox is discarded with the kernel: nothing to wait for (a graceful stop cost ~2.5 s a kernel)
    shutdown_kernel = Enum(["graceful", "immediate"], default_value="immediate", config=True)

    def _limits(self) -> GradingLimits:
        return GradingLimits(config=self.config)

    def _note(self, cell: NotebookNode, text: str, error: bool = False) -> None:
        if error:
            cell.outputs.append(from_dict({"output_type": "error", "ename": "GradingLimit", "evalue": text,
                                           "traceback": [f"GradingLimit: {text}"]}))
        else:
            cell.outputs.append(from_dict({"output_type": "stream", "name": "stdout", "text": f"[autograder] {text}\n"}))

    async def _stop(self, why: str) -> None:
        if self._stopped is None:
            self._stopped = why
        self.log.warning("stopping the kernel: %s", why)
        try:
            km = self.km
            if km is not None:
                cg = getattr(km, "_cgroup", None)
                if cg is not None:
                    cg.kill()
                await asyncio.wait_for(asyncio.ensure_future(km._async_shutdown_kernel(now=True)), 30)
        except Exception as exc:  # noqa: BLE001  (the kernel may already be gone)
            self.log.warning("while stopping the kernel: %s", exc)

    async def _async_handle_timeout(self, timeout: int, cell: NotebookNode | None = None) -> None | dict[str, Any]:
        """Interrupt once; a cell still running at its next timeout stops the kernel (nbclient would
        interrupt it again and again, forever, where the kernel ignores interrupts)."""
        if cell is not None and getattr(self, "_interrupted", None) is cell:
            raise CellTimeoutError.error_from_timeout_and_cell("the cell ignored an interrupt", timeout, cell)
        self._interrupted = cell
        return await super()._async_handle_timeout(timeout, cell)

    def _get_timeout(self, cell: NotebookNode | None) -> int | None:  # type: ignore[override]
        timeout = super()._get_timeout(cell)
        if self._started_at is None:
            return timeout
        left = max(1, int(self._limits().wall_seconds - (time.monotonic() - self._started_at)))
        return left if timeout is None else min(timeout, left)

    async def async_execute_cell(self, cell: NotebookNode, cell_index: int, execution_count: int | None = None,
                                 store_history: bool = True) -> NotebookNode:  # type: ignore[override]
        if self._started_at is None:
            self._started_at = time.monotonic()
            self._notebook_bytes = 0
        if cell.cell_type != "code" or not cell.source.strip():
            return await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        limits = self._limits()
        if not cell.get("metadata", {}).get("nbgrader", {}).get("grade_id"):
            # a cell of no exercise: the source has a handful, any more a student added (the
            # gradebook's cells keep their ids; nbgrader drops an id it does not know)
            self._ungraded = getattr(self, "_ungraded", 0) + 1
            if self._ungraded > limits.ungraded_cells:
                cell.outputs = []
                if self._ungraded == limits.ungraded_cells + 1:
                    self.log.warning("more than %d code cells outside the exercises: the rest are not run",
                                     limits.ungraded_cells)
                    self._note(cell, f"not run, nor any later code cell outside the exercises: the notebook has more "
                                     f"than {limits.ungraded_cells} of them (GradingLimits.ungraded_cells)")
                return cell
        if self._stopped is None and time.monotonic() - self._started_at > limits.wall_seconds:
            await self._stop(f"the notebook ran past its {limits.wall_seconds} s")
        if self._stopped is not None:
            cell.outputs = []
            self._note(cell, f"not run: the kernel was stopped ({self._stopped})", error=True)
            return cell
        self._cell_bytes, self._cell_count, self._cell_dropped = 0, 0, 0
        try:
            cell = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        except (CellTimeoutError, DeadKernelError, RuntimeError) as exc:
            cg = getattr(self.km, "_cgroup", None)
            why = self._stopped or ("the kernel was killed at its memory limit" if cg is not None and cg.oom_killed()
                                    else f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
            await self._stop(why)
            self._note(cell, f"this cell stopped the kernel ({why})", error=True)
        if self._cell_dropped:
            self._note(cell, f"{self._cell_dropped} more outputs of this cell were dropped (limit: "
                             f"{limits.cell_output_kb} KiB, {limits.cell_outputs} outputs per cell)")
        if self._stopped is None and self._notebook_bytes > limits.notebook_output_mb << 20:
            await self._stop(f"the notebook's output passed {limits.notebook_output_mb} MiB")
        return cell

    # nbclient binds the synchronous wrapper to its own coroutine: bind it to this one
    execute_cell = run_sync(async_execute_cell)

    def _update_display_id(self, display_id: str, msg: dict[str, Any]) -> None:
        """A display is updated only in the cell that is running: nbclient rewrites every earlier
        output with the same ``display_id``, so a cell running after the hidden tests could write
        what they held into an output of a cell that ran before them, which the feedback shows."""
        cells = self._display_id_map.get(display_id)
        if cells:
            current = getattr(self, "_executing_index", None)
            self._display_id_map[display_id] = {i: idx for i, idx in cells.items() if i == current}
        super()._update_display_id(display_id, msg)

    def process_message(self, msg: dict[str, Any], cell: NotebookNode, cell_index: int) -> NotebookNode | None:
        self._executing_index = cell_index
        kind = msg.get("msg_type")
        if kind in ("stream", "display_data", "execute_result", "update_display_data", "error", "clear_output"):
            size = len(json.dumps(msg.get("content", {}), default=str))
            limits = self._limits()
            self._notebook_bytes = getattr(self, "_notebook_bytes", 0) + size
            self._notebook_count = getattr(self, "_notebook_count", 0) + 1
            self._cell_bytes = getattr(self, "_cell_bytes", 0) + size
            self._cell_count = getattr(self, "_cell_count", 0) + 1
            over_notebook = (self._notebook_bytes > limits.notebook_output_mb << 20
                             or self._notebook_count > limits.notebook_outputs)
            if over_notebook and self._stopped is None:
                # stop now: a flood keeps the grader busy receiving it even when nothing is kept
                why = (f"the notebook's output passed {limits.notebook_output_mb} MiB or "
                       f"{limits.notebook_outputs} outputs")
                self._stopped = why
                self._stop_task = asyncio.ensure_future(self._stop(why))
            if kind != "error" and (over_notebook or self._cell_bytes > limits.cell_output_kb << 10
                                    or self._cell_count > limits.cell_outputs):
                self._cell_dropped = getattr(self, "_cell_dropped", 0) + 1
                return None
        return super().process_message(msg, cell, cell_index)


class SandboxedExecute(LimitedExecution, Execute):
    """nbgrader's Execute preprocessor with every submission's kernel in a sandbox, within limits."""

    kernel_manager_class = Type(SandboxedKernelManager, klass=AsyncKernelManager, config=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # nbgrader's Execute.__init__ forces AsyncKernelManager unless a class is passed
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(*args, **kwargs)


class SandboxedClient(LimitedExecution):
    """A plain nbclient with the same limits (the reference run and the probe)."""
