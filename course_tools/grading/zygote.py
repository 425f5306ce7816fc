"""Kernels forked from a pre-imported template instead of started from nothing (issue 46).

A graded kernel spent 4-6 s importing torch, transformers, matplotlib, seaborn, scipy and
IPython before the first cell of the chapter did anything, and every submission paid it again,
twice where a probe kernel runs (README, "Kernels from a template": what it saves, measured). Here one **template** process per grader imports them once, and each kernel
is a fork of it that then enters the sandbox the grader made for that submission:

* The template runs under bubblewrap with the same allow-list of read-only paths as a kernel
  (``sandbox.bwrap_args``), the same seccomp filter and the kernel's environment, as root, and
  never runs student code: it only imports libraries, then waits for requests on a socket that
  only root can reach.
* For each kernel the grader builds the sandbox exactly as before (``launch.py outer`` joins the
  cgroups and sets the rlimits, bubblewrap makes the namespaces and the allow-list root,
  ``launch.py inner`` mounts and fills the tmpfs folders), but ``inner`` then waits instead of
  starting Python. The grader hands the template the namespaces of that sandbox (descriptors of
  ``/proc/<inner>/ns/*``, passed over the socket); the template forks a child, which the grader
  moves into the kernel's cgroups; the child sets the same rlimits, enters the sandbox's cgroup,
  IPC, UTS, network, PID and mount namespaces, and forks the kernel process, which is inside the
  sandbox's PID namespace and dies with it. The kernel drops privileges exactly as ``setpriv``
  does on the other path (the grading user, no supplementary groups, every capability dropped,
  bounding, inheritable and ambient sets included, ``no_new_privs``), takes the kernel's
  environment, working folder and arguments, and runs ``ipykernel_launcher`` as ``python -m``
  would. When it exits, the grader lets ``inner`` go, and the sandbox ends as before.

What differs from a kernel started from nothing: the modules of :data:`TEMPLATE_MODULES` are
already imported (they never saw student code; ``course_utils`` is not among them, so its
pristine references are still taken by the setup cell), Python's string-hash seed is the
template's, and the pages the imports filled are shared with the template (charged to the
grader's memory group until a kernel writes them). Where a kernel cannot use the template
(not root, no sandbox, packages masked for a probe, another kernel command or environment), the
kernel starts from nothing as before. ``LLM_COURSE_ZYGOTE=0`` (or
``--SandboxedKernelManager.zygote=False``) turns the template off.

Standard library only until the template imports its modules.
"""
from __future__ import annotations

import array
import ctypes
import importlib
import json
import os
import resource
import signal
import socket
import sys
import traceback

# What the template imports: the libraries the chapters' setup and import cells load, and the
# kernel itself. Never the course's own packages (course_utils.grading snapshots references when
# a notebook's setup cell imports it).
TEMPLATE_MODULES = (
    "numpy", "torch", "torch.nn", "torch.nn.functional",
    "matplotlib", "matplotlib.pyplot", "matplotlib_inline.backend_inline", "seaborn", "pandas", "scipy.stats",
    "tokenizers", "safetensors", "transformers", "transformers.modeling_utils",
    "transformers.models.gpt2.modeling_gpt2", "transformers.models.bert.modeling_bert",
    "transformers.models.llama.modeling_llama", "transformers.models.t5.modeling_t5",
    "IPython", "ipykernel.kernelapp", "ipykernel.ipkernel", "ipykernel_launcher", "zmq",
)
# The namespaces a kernel enters, in this order (mount last), and their clone flags.
NAMESPACES = (("cgroup", 0x02000000), ("ipc", 0x08000000), ("uts", 0x04000000), ("net", 0x40000000),
              ("pid", 0x20000000), ("mnt", 0x00020000))
ENV = "LLM_COURSE_ZYGOTE"
IDLE_SECONDS = 120     # a template with no request and no kernel for this long ends
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG = 24, 38, 1
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 47, 4


def kernel_args(kernel_cmd: list[str]) -> list[str] | None:
    """The arguments of ``python -m ipykernel_launcher -f FILE ...`` run by this interpreter (``-f FILE ...``),
    else None (any other kernel command starts from nothing)."""
    if (len(kernel_cmd) >= 5 and kernel_cmd[1:4] == ["-m", "ipykernel_launcher", "-f"]
            and os.path.realpath(kernel_cmd[0]) == os.path.realpath(sys.executable)):
        return kernel_cmd[3:]
    return None


def send_fds(sock: socket.socket, data: bytes, fds: list[int]) -> None:
    sock.sendmsg([data], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def recv_fds(sock: socket.socket, size: int, max_fds: int) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    msg, anc, _flags, _addr = sock.recvmsg(size, socket.CMSG_LEN(max_fds * fds.itemsize))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - (len(data) % fds.itemsize)])
    return msg, list(fds)


def read_line(sock: socket.socket) -> bytes:
    buf = b""
    while not buf.endswith(b"\n"):
        part = sock.recv(4096)
        if not part:
            raise ConnectionError("the other side closed the connection")
        buf += part
    return buf[:-1]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _drop_privileges(uid: int, gid: int) -> None:
    """What ``setpriv --reuid --regid --clear-groups --bounding-set=-all --inh-caps=-all
    --ambient-caps=-all --no-new-privs`` does (the other path's launcher, ``launch.py``)."""
    libc = _libc()
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        _check(libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap} from the bounding set")
    _check(libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear the ambient capabilities")
    os.setresuid(uid, uid, uid)

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    header, data = Header(0x20080522, 0), (Data * 2)()   # _LINUX_CAPABILITY_VERSION_3: all sets empty
    _check(libc.capset(ctypes.byref(header), ctypes.byref(data)), "clear the capability sets")
    _check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "set no_new_privs")
    with open("/proc/self/status") as f:
        caps = {k: v.strip() for k, v in (line.split(":", 1) for line in f if line.startswith("Cap"))}
    if any(int(v, 16) for v in caps.values()) or os.getuid() != uid or os.geteuid() != uid:
        raise PermissionError(f"privileges not dropped: {caps}, uid {os.getuid()}/{os.geteuid()}")


def _run_kernel(spec: dict, stdio: list[int]) -> None:
    """The kernel process (inside the sandbox's PID namespace): drop privileges, become the
    ``python -m ipykernel_launcher -f FILE`` the other path would have started, run it."""
    os.setsid()                                       # bubblewrap --new-session
    for i, fd in enumerate(stdio):
        os.dup2(fd, i)
    for fd in sorted(int(name) for name in os.listdir("/proc/self/fd")):   # nothing of the template's stays open
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass
    os.chdir(spec["cwd"])
    if spec.get("uid") is not None:
        _drop_privileges(spec["uid"], spec["gid"])
    # after the change of user, which clears it: the kernel also dies with the template's child
    # (it dies with its sandbox's PID namespace in any case)
    _libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    os.umask(spec.get("umask", 0o022))
    os.environ.clear()
    os.environ.update(spec["env"])
    sys.path[0] = spec["cwd"]                         # `python -m` puts the working folder first
    import random

    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    sys.argv = ["ipykernel_launcher", *spec["args"]]
    import runpy

    try:
        runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _serve_one(conn: socket.socket) -> None:
    """The template's child for one kernel: enter the sandbox, fork the kernel, wait for it."""
    msg, fds = recv_fds(conn, 1 << 20, 16)
    if not msg:                                       # a grader checking that the template is there
        os._exit(0)
    spec = json.loads(msg)
    ns_fds, stdio = fds[:len(NAMESPACES)], fds[len(NAMESPACES):]
    os.dup2(stdio[2], 2)                              # what goes wrong here, the requesting grader's log shows
    conn.sendall(json.dumps({"pid": os.getpid()}).encode() + b"\n")
    if read_line(conn) != b"go":                      # the grader has put this process in the kernel's cgroups
        os._exit(2)
    for name, (soft, hard) in spec.get("rlimits", {}).items():
        resource.setrlimit(getattr(resource, name), (int(soft), int(hard)))
    libc = _libc()
    for fd, (name, flag) in zip(ns_fds, NAMESPACES):
        _check(libc.setns(fd, flag), f"enter the sandbox's {name} namespace")
        os.close(fd)
    kid = os.fork()
    if kid == 0:
        try:
            conn.close()
            _run_kernel(spec, stdio)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        os._exit(1)
    for fd in stdio:
        os.close(fd)
    conn.sendall(json.dumps({"kernel": kid}).encode() + b"\n")
    conn.close()
    _pid, status = os.waitpid(kid, 0)
    os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def serve(path: str) -> None:
    """The template: import :data:`TEMPLATE_MODULES`, then fork a kernel for each request on ``path``."""
    failed = []
    for name in TEMPLATE_MODULES:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001  (a library that is not installed: its kernels import nothing)
            failed.append(f"{name} ({type(exc).__name__})")
    if "ipykernel_launcher" not in sys.modules:
        print(f"template not ready: the kernel itself could not be imported ({', '.join(failed)})", flush=True)
        return
    import threading

    # fork() copies one thread: a Python thread started by an import would be lost in every kernel.
    # (The native worker threads of OpenBLAS, which NumPy and SciPy start where more than one BLAS
    # thread is allowed, are stopped and started again around fork() by OpenBLAS's own
    # pthread_atfork handlers, as for every forked NumPy process.)
    if threading.active_count() != 1:
        print(f"template not ready: {threading.active_count()} Python threads after the imports", flush=True)
        return
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    os.chmod(path, 0o600)
    srv.listen(64)
    srv.settimeout(1.0)
    print(json.dumps({"ready": True, "not_imported": failed}), flush=True)
    import time

    children: set[int] = set()
    last = time.monotonic()
    while True:
        for pid in list(children):                    # reap the children of finished kernels
            try:
                if os.waitpid(pid, os.WNOHANG)[0]:
                    children.discard(pid)
            except ChildProcessError:
                children.discard(pid)
        if children:
            last = time.monotonic()
        elif time.monotonic() - last > IDLE_SECONDS:
            os.unlink(path)
            srv.close()
            return
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            continue
        last = time.monotonic()
        conn.settimeout(None)
        pid = os.fork()
        if pid == 0:
            try:
                srv.close()
                _serve_one(conn)
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            os._exit(1)
        children.add(pid)
        conn.close()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "serve":
        raise SystemExit("usage: zygote.py serve SOCKET")
    serve(sys.argv[2])
