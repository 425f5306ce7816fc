"""A sandbox per submission: the kernel that executes a student's notebook runs under bubblewrap.

``nbgrader_config.py`` executes submissions with :class:`SandboxedExecute`, whose kernel manager
(:class:`SandboxedKernelManager`) starts each kernel as ``bwrap … python -m ipykernel_launcher``:

* **no network**: a private network namespace (loopback only, nothing listening); the kernel talks
  to nbgrader over ZMQ IPC sockets in a private folder bound into the sandbox (TCP cannot cross
  the namespace);
* **no process outlives the kernel**: a private PID namespace, ``--die-with-parent``; when the
  kernel stops, every process it started is killed with it;
* **read-only system and course**: ``/`` is bound read-only (the interpreter, the virtual
  environment, ``course_utils``, the model caches), so a submission cannot rewrite the grading
  code, the course config or another user's IPython profile;
* **nothing to read that grades**: ``solutions/``, ``chapters/``, ``tests/``, ``submitted/``,
  ``autograded/``, ``feedback/``, ``source/`` and ``release/`` of the course root (and of the
  repository, when they differ) are empty, and ``gradebook.db`` reads as an empty file;
* **a fresh home**: ``HOME``, ``IPYTHONDIR``, ``MPLCONFIGDIR`` and ``/tmp`` are private tmpfs
  folders, discarded with the sandbox; the submission's own folder (the kernel's working
  directory) is the only writable place on disk.

Where bubblewrap is missing or cannot create namespaces, autograding **refuses**, saying why,
unless the instructor passes ``--SandboxedKernelManager.allow_unsandboxed=True`` (then each
kernel runs as a plain process and a warning is logged). Measured overhead: see README.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from jupyter_client.manager import AsyncKernelManager
from nbgrader.preprocessors import Execute
from traitlets import Bool, List, Type, Unicode

from course_utils.paths import cache_dir, repo_root
from course_utils.records import RECORD_ENV

# Folders of a course root that hold answers, hidden tests or other students' work.
PRIVATE_DIRS = ("solutions", "chapters", "tests", "submitted", "autograded", "feedback", "source", "release",
                ".llm-course")  # the last: the reference records (course_tools/references.py)
PRIVATE_FILES = ("gradebook.db",)
# Instructor-side hook for tests: every file of this folder becomes an IPython startup file of
# the sandboxed kernel (tests/test_integrity.py uses it to make a library write to stderr).
STARTUP_ENV = "LLM_COURSE_SANDBOX_STARTUP"


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


def _under(path: Path, parent: Path) -> bool:
    try:
        path.relative_to(parent)
        return True
    except ValueError:
        return False


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


def bwrap_args(workdir: Path, sockdir: Path, home: Path, course_roots: list[Path],
               extra_private: list[Path] | None = None, masked_packages: list[str] | None = None,
               stub_dir: Path | None = None) -> list[str]:
    """The bubblewrap command line (without the kernel command) for one submission's kernel.

    ``masked_packages``: top-level packages whose files are replaced by a stub that raises
    ``ModuleNotFoundError`` (:func:`mask_args`; ``stub_dir`` holds the stubs).
    """
    args = ["bwrap", "--die-with-parent", "--new-session", "--unshare-net", "--unshare-pid", "--unshare-ipc",
            "--unshare-uts", "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    # The grader's home (its IPython profile, credentials...) and /tmp are replaced by empty tmpfs
    # folders; what the kernel needs from them (the virtual environment, the course checkout, the
    # model caches: a CI clone often lives in /tmp) comes back read-only.
    real_home = Path(os.path.expanduser("~")).resolve()
    masked = [Path("/tmp")] + ([real_home] if real_home not in (Path("/"), Path("/tmp")) else [])
    for m in masked[1:]:
        args += ["--tmpfs", str(m)]
    hf = os.environ.get("HF_HOME") or os.path.join(os.environ.get("XDG_CACHE_HOME", str(real_home / ".cache")), "huggingface")
    keep = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent.parent,
            repo_root(), cache_dir().resolve(), Path(hf).resolve(), *course_roots}
    for p in sorted(keep, key=lambda q: len(q.parts)):
        if p.exists() and any(_under(p, m) and p != m for m in masked):
            args += ["--ro-bind", str(p), str(p)]
    # the submission's own folder (autograded/<student>/...) is bound back below
    private = [root / name for root in course_roots for name in (*PRIVATE_DIRS, *PRIVATE_FILES)]
    refs = os.environ.get("LLM_COURSE_REFERENCES")  # a reference cache kept elsewhere (tests share one)
    extra = list(extra_private or []) + ([Path(refs).resolve()] if refs else [])
    # folders the grader writes later must exist now, or the read-only view of / would show them
    for q in [root / ".llm-course" for root in course_roots] + extra[len(extra_private or []):]:
        q.mkdir(parents=True, exist_ok=True)
    for q in private + extra:
        if q.is_dir():
            args += ["--tmpfs", str(q)]
        elif q.exists():
            args += ["--ro-bind", "/dev/null", str(q)]
    # ipykernel polls its parent and exits when the parent pid becomes 1, which inside a PID
    # namespace it is from the start: 1 switches the poll off (--die-with-parent does its job).
    args += ["--setenv", "JPY_PARENT_PID", "1"]
    if masked_packages:
        args += mask_args(list(masked_packages), stub_dir or default_stub_dir())
    args += ["--bind", str(home), str(home), "--bind", str(sockdir), str(sockdir),
             "--bind", str(workdir), str(workdir), "--chdir", str(workdir)]
    return args


class SandboxedKernelManager(AsyncKernelManager):
    """An ipykernel started inside bubblewrap, talking to its client over IPC sockets."""

    allow_unsandboxed = Bool(False, config=True,
                             help="Run kernels without a sandbox where bubblewrap is unavailable (not recommended).")
    course_root = Unicode("", config=True, help="Course directory whose private folders the sandbox hides "
                                                "(default: $LLM_COURSE_NBGRADER_ROOT, else the repository).")
    extra_private = List(Unicode(), config=True, help="More paths to hide from the kernel (tmpfs or empty file).")
    masked_packages = List(Unicode(), config=True, help="Top-level packages the kernel cannot import: their files "
                                                        "are replaced by a stub (course_tools/probe.py).")

    _sandbox_dir: tempfile.TemporaryDirectory | None = None

    def _roots(self) -> list[Path]:
        roots = {repo_root()}
        for r in (self.course_root, os.environ.get("LLM_COURSE_NBGRADER_ROOT", "")):
            if r:
                roots.add(Path(r).resolve())
        return sorted(roots)

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
        self._sandbox_dir = tempfile.TemporaryDirectory(prefix="llm-course-sandbox-")
        base = Path(self._sandbox_dir.name)
        (base / "sock").mkdir()
        (base / "home").mkdir()
        self.transport = "ipc"
        self.ip = str(base / "sock" / "k")
        self.connection_file = str(base / "sock" / "kernel.json")
        return await super()._async_pre_start_kernel(**kw)

    async def _async_launch_kernel(self, kernel_cmd: list[str], **kw: Any) -> None:  # type: ignore[override]
        assert self._sandbox_dir is not None
        base = Path(self._sandbox_dir.name)
        home = base / "home"
        ipy = home / ".ipython"
        startup = ipy / "profile_default" / "startup"
        startup.mkdir(parents=True, exist_ok=True)
        extra = os.environ.get(STARTUP_ENV)
        if extra and Path(extra).is_dir():
            for f in sorted(Path(extra).iterdir()):
                shutil.copy(f, startup / f.name)
        env = dict(kw.get("env") or os.environ)
        env.update(HOME=str(home), IPYTHONDIR=str(ipy), MPLCONFIGDIR=str(home / ".mpl"), TMPDIR="/tmp",
                   JUPYTER_RUNTIME_DIR=str(home / ".runtime"),
                   LLM_COURSE_SANDBOXED="0" if self._unsandboxed else "1")
        env.pop("LLM_COURSE_NBGRADER_ROOT", None)
        env[RECORD_ENV] = "1"   # hidden tests write their records as outputs (course_utils/records.py)
        # model caches keep their real locations (read-only inside the sandbox)
        env.setdefault("LLM_COURSE_CACHE", str(cache_dir().resolve()))
        env.setdefault("HF_HOME", os.environ.get("HF_HOME") or os.path.join(
            os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "huggingface"))
        kw["env"] = env
        workdir = Path(kw.get("cwd") or os.getcwd()).resolve()
        if self.masked_packages and self._unsandboxed:
            raise SandboxUnavailable("a check that removes packages (course_tools/probe.py) needs bubblewrap: "
                                     "without a sandbox the packages cannot be removed")
        if not self._unsandboxed:
            args = bwrap_args(workdir, base / "sock", home, self._roots(), [Path(p) for p in self.extra_private],
                              list(self.masked_packages), base / "stubs")
            kernel_cmd = args + ["--", *kernel_cmd]
        await super()._async_launch_kernel(kernel_cmd, **kw)

    async def _async_cleanup_resources(self, restart: bool = False) -> None:  # type: ignore[override]
        await super()._async_cleanup_resources(restart=restart)
        if self._sandbox_dir is not None and not restart:
            self._sandbox_dir.cleanup()
            self._sandbox_dir = None


class SandboxedExecute(Execute):
    """nbgrader's Execute preprocessor with every submission's kernel in a sandbox."""

    kernel_manager_class = Type(SandboxedKernelManager, klass=AsyncKernelManager, config=True)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # nbgrader's Execute.__init__ forces AsyncKernelManager unless a class is passed
        kwargs.setdefault("kernel_manager_class", SandboxedKernelManager)
        super().__init__(*args, **kwargs)
