"""Two small steps around bubblewrap, run as scripts (standard library only, ``python -I -S``).

``outer`` runs on the host, as the grader, just before bubblewrap: it joins the kernel's cgroups
(``limits.KernelCgroup``) and sets its rlimits, then executes bubblewrap, so that the sandbox and
everything in it are inside the limits from their first instruction.

``inner`` is the first program inside the sandbox: where it runs as root, it mounts the kernel's
working folder, ``/tmp`` and ``$HOME`` as tmpfs of a fixed size; it copies the pristine copy of
the submission (``pristine.py``) and the home template in, hands them to the grading user, and
executes the kernel through ``setpriv`` as that user, with every capability dropped (bounding
set included) and ``no_new_privs`` set. Run as an ordinary user (bubblewrap in a user
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


def _outer(spec: dict, cmd: list[str]) -> None:
    pid = str(os.getpid())
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


def _chown_tree(path: str, uid: int, gid: int) -> None:
    os.chown(path, uid, gid, follow_symlinks=False)
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(top, name), uid, gid, follow_symlinks=False)


def _inner(spec: dict, cmd: list[str]) -> None:
    root = os.geteuid() == 0
    if root:
        for path, size_mb in spec.get("mounts", []):
            _mount_tmpfs(path, size_mb)
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
    os.execvp(cmd[0], cmd)


def main(argv: list[str]) -> None:
    mode, spec_json, sep, *cmd = argv
    if sep != "--" or not cmd:
        raise SystemExit("usage: launch.py outer|inner SPEC_JSON -- COMMAND...")
    spec = json.loads(spec_json)
    (_outer if mode == "outer" else _inner)(spec, cmd)


if __name__ == "__main__":
    main(sys.argv[1:])
