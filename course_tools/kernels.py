"""Start Jupyter kernels that survive a busy test machine (used by the repository's conftest.py).

``make test`` runs two pytest-xdist workers that start kernels at the same time: nbval
kernels and the nbgrader kernels of the autograde round trips. Over TCP, jupyter_client picks
five free ports, releases them and lets the kernel bind them a second later; another process
can take one in between, the kernel exits with "Address already in use", and nbval reports
"Kernel died before replying to kernel_info" on every cell of the notebook (seen once in CI).

:func:`start_new_kernel` is a drop-in replacement for ``nbval.kernel.start_new_kernel``: on
POSIX the kernel talks over IPC sockets in a private temporary folder (no ports, nothing to
collide with); a failed start is retried; the last failure is raised with the kernel's stderr.
"""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import time
from typing import Any

ATTEMPTS = 3


def start_new_kernel(startup_timeout: float = 60, kernel_name: str = "python", **kwargs: Any) -> tuple[Any, Any]:
    """Start a kernel and return ``(KernelManager, KernelClient)``, ready to execute.

    Same signature and result as ``nbval.kernel.start_new_kernel``. A ``stderr`` argument is
    ignored: the kernel's stderr goes to a temporary file that the error message quotes.
    """
    from jupyter_client import KernelManager
    from nbval.kernel import NbvalKernelspecManager

    kwargs.pop("stderr", None)
    error = ""
    for attempt in range(1, ATTEMPTS + 1):
        extra: dict[str, Any] = {}
        sockdir = None
        if os.name == "posix":
            sockdir = tempfile.mkdtemp(prefix="nbk-")
            extra = {"transport": "ipc", "ip": os.path.join(sockdir, "k")}
        log = tempfile.TemporaryFile(mode="w+")
        km = KernelManager(kernel_name=kernel_name, kernel_spec_manager=NbvalKernelspecManager(), **extra)
        km.start_kernel(stderr=log, **kwargs)
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=startup_timeout)
        except RuntimeError as exc:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
            log.seek(0)
            error = f"{exc} (attempt {attempt} of {ATTEMPTS}); the kernel's stderr:\n{log.read()[-3000:]}"
            if sockdir:
                shutil.rmtree(sockdir, ignore_errors=True)
            time.sleep(0.5 * attempt)
            continue
        if sockdir:
            atexit.register(shutil.rmtree, sockdir, True)
        return km, kc
    raise RuntimeError(error)


def harden_nbval() -> bool:
    """Make nbval start its kernels with :func:`start_new_kernel`; False when nbval is absent."""
    try:
        import nbval.kernel
    except ImportError:
        return False
    nbval.kernel.start_new_kernel = start_new_kernel
    return True
