"""Two small steps around bubblewrap, run as scripts (standard library only, ``python -I -S``).

``outer`` runs on the host, as the grader, just before bubblewrap: it joins the kernel's cgroups
(``limits.KernelCgroup``) and sets its rlimits, opens the compiled seccomp filter
(``seccomp.py``) for bubblewrap's ``--seccomp FD``, then executes bubblewrap, so that the sandbox
and everything in it are inside the limits from their first instruction.

``inner`` is the first program inside the sandbox: where it runs as root, it mounts the kernel's
working folder, ``/tmp`` and ``$HOME`` as tmpfs of a fixed size; it copies the pristine copy of
the submission (``pristine.py``) and the home template in, hands them to the grading user, and
executes the kernel through ``setpriv`` as that user, with every capability dropped (bounding
set included) and ``no_new_privs`` set; or, where the kernel is forked from the grader's
pre-imported template (``zygote.py``), which drops the same privileges itself, it tells the
grader the sandbox is ready and waits until the kernel has exited. Run as an ordinary user (bubblewrap in a user
namespace), it only copies and executes the kernel: bubblewrap has already dropped capabilities.

Usage: ``python -I -S launch.py outer|inner SPEC_JSON -- COMMAND...``
"""
from __future__ import annotations

import ctypes
import json
import os
import resource
import shutil
import sys


SECCOMP_FD = "@SECCOMP_FD@"   # in the command: replaced by the descriptor of the compiled filter


def _outer(spec: dict, cmd: list[str]) -> None:
    pid = str(os.getpid())
    if spec.get("seccomp"):   # bubblewrap --seccomp FD reads the filter (seccomp.py) from an open descriptor
        fd = os.open(spec["seccomp"], os.O_RDONLY)
        os.set_inheritable(fd, True)
        cmd = [str(fd) if a == SECCOMP_FD else a for a in cmd]
    for procs in spec.get("procs", []):
        with open(procs, "w") as f:
            f.write(pid)
    for name, (soft, hard) in spec.get("rlimits", {}).items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    os.execvp(cmd[0], cmd)


def _mount_tmpfs(path: str, size_mb: int) -> None:
    os.makedirs(path, exist_ok=True)
    libc = ctypes.CDLL(None, use_errno=True)
    opts = f"size={size_mb}m,mode=0755".encode()
    if libc.mount(b"tmpfs", path.encode(), b"tmpfs", 0x2 | 0x4, opts) != 0:  # MS_NOSUID | MS_NODEV
        err = ctypes.get_errno()
        raise OSError(err, f"mount tmpfs on {path}: {os.strerror(err)}")


MS_MOVE, MNT_DETACH = 8192, 2
STASH = "/run/llm-course-stash"


def _mount_points_under(top: str) -> list[str]:
    """The mount points strictly below ``top``, outermost only (a move takes the nested ones along)."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(top.rstrip("/") + "/"):
                points.append(point)
    return [p for p in points if not any(p != q and p.startswith(q + "/") for q in points)]


def _resize_tmp(size_mb: int) -> None:
    """A sized tmpfs on /tmp that keeps what bubblewrap bound below it (a checkout or a course in /tmp):
    the old /tmp is moved aside, the new one mounted, each mount below moved back."""
    libc = ctypes.CDLL(None, use_errno=True)
    keep = _mount_points_under("/tmp")
    if not keep:
        _mount_tmpfs("/tmp", size_mb)
        return
    os.makedirs(STASH, exist_ok=True)
    if libc.mount(b"/tmp", STASH.encode(), None, MS_MOVE, None) != 0:
        raise OSError(ctypes.get_errno(), "move /tmp aside")
    _mount_tmpfs("/tmp", size_mb)
    for point in keep:
        old = STASH + point[len("/tmp"):]
        if os.path.isdir(old):
            os.makedirs(point, exist_ok=True)
        else:   # a file bound on its own (nbgrader_config.py): the mount point is a file
            os.makedirs(os.path.dirname(point), exist_ok=True)
            open(point, "a").close()
        if libc.mount(old.encode(), point.encode(), None, MS_MOVE, None) != 0:
            raise OSError(ctypes.get_errno(), f"move {point} back below the new /tmp")
    libc.umount2(STASH.encode(), MNT_DETACH)
    os.rmdir(STASH)


def _chown_tree(path: str, uid: int, gid: int) -> None:
    """Hand a fresh tmpfs and what was copied into it to the grading user; never crosses into
    another mount (a read-only folder or file bound below /tmp stays as it is)."""
    with open("/proc/self/mountinfo") as f:
        mounts = {line.split()[4].replace("\\040", " ") for line in f}
    os.chown(path, uid, gid, follow_symlinks=False)
    for top, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if os.path.join(top, d) not in mounts]
        for name in dirs + files:
            if os.path.join(top, name) not in mounts:
                os.chown(os.path.join(top, name), uid, gid, follow_symlinks=False)


def _inner(spec: dict, cmd: list[str]) -> None:
    root = os.geteuid() == 0
    if root:
        for path, size_mb in spec.get("mounts", []):
            _resize_tmp(size_mb) if path == "/tmp" else _mount_tmpfs(path, size_mb)
    for src, dst in spec.get("copies", []):
        if os.path.isdir(src):
            shutil.copytree(src, dst, symlinks=True, dirs_exist_ok=True)
    if root:
        uid, gid = spec["uid"], spec["gid"]
        for path, _ in spec.get("mounts", []):
            _chown_tree(path, uid, gid)
        for path in spec.get("chown", []):
            _chown_tree(path, uid, gid)
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--bounding-set=-all",
               "--inh-caps=-all", "--ambient-caps=-all", "--no-new-privs", "--", *cmd]
    os.chdir(spec["cwd"])
    if spec.get("await"):
        # the kernel is forked from the grader's template (zygote.py), which enters this sandbox: say
        # that it is ready, then hold it open until the grader says the kernel has exited
        import socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(spec["await"])
        sock.sendall(b"ready\n")
        while sock.recv(4096):
            pass
        os._exit(0)
    os.execvp(cmd[0], cmd)


def main(argv: list[str]) -> None:
    mode, spec_json, sep, *cmd = argv
    if sep != "--" or not cmd:
        raise SystemExit("usage: launch.py outer|inner SPEC_JSON -- COMMAND...")
    spec = json.loads(spec_json)
    (_outer if mode == "outer" else _inner)(spec, cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
