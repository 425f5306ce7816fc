"""A seccomp filter for grading kernels: the system calls that would let one kernel leave something
for another are refused.

Every grading kernel of a root grader runs as the same unprivileged user (``nobody``), and the
kernel keyrings belong to the user, not to a namespace bubblewrap can make private: a key added
to the user keyring (``add_key``, by syscall) by one submission's kernel was readable by the
probe kernel of the same submission and by the next student's kernel. The filter refuses
``add_key``, ``keyctl`` and ``request_key`` with ``EPERM`` (as Docker's default seccomp profile
does); System V and POSIX IPC, abstract sockets and ``/dev/shm`` are already private to each
kernel (bubblewrap's IPC and network namespaces, its own ``/dev``).

The filter is compiled with libseccomp (Debian ``libseccomp2``, loaded through :mod:`ctypes`; no
Python binding needed) into a classic BPF program, which bubblewrap installs with ``--seccomp FD``
before it starts the sandbox's first process. System calls of another architecture (``int 0x80``
from a 64-bit process) kill the process (libseccomp's default for a foreign architecture).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from functools import lru_cache
from pathlib import Path

# Refused with EPERM in every grading kernel.
REFUSED_SYSCALLS = ("add_key", "keyctl", "request_key")
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_ERRNO = 0x00050000


class SeccompUnavailable(RuntimeError):
    """libseccomp cannot be loaded or cannot compile the filter; the message says what to install."""


@lru_cache(maxsize=1)
def _libseccomp() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SeccompUnavailable(f"libseccomp is not installed ({exc}); Debian/Ubuntu: apt-get install libseccomp2") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add.restype = ctypes.c_int
    lib.seccomp_rule_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.restype = ctypes.c_int
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.restype = None
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def write_filter(path: Path, refused: tuple[str, ...] = REFUSED_SYSCALLS) -> Path:
    """Compile the filter (allow everything but ``refused``, which fail with ``EPERM``) into ``path``."""
    lib = _libseccomp()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        for name in refused:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                raise SeccompUnavailable(f"libseccomp does not know the system call {name!r}")
            rc = lib.seccomp_rule_add(ctx, SCMP_ACT_ERRNO | errno.EPERM, nr, 0)
            if rc != 0:
                raise SeccompUnavailable(f"seccomp_rule_add({name}) failed: {os.strerror(-rc)}")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            rc = lib.seccomp_export_bpf(ctx, fd)
        finally:
            os.close(fd)
        if rc != 0:
            raise SeccompUnavailable(f"seccomp_export_bpf failed: {os.strerror(-rc)}")
    finally:
        lib.seccomp_release(ctx)
    return path


def available() -> str | None:
    """None when the filter can be compiled here, else why not."""
    try:
        _libseccomp()
    except SeccompUnavailable as exc:
        return str(exc)
    return None
