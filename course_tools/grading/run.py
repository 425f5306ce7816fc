"""Execute a notebook as the autograder does, in a sandboxed kernel within the grading limits.

Used by the reference run (the instructor's source) and the probe (a submission again, with
packages removed). The kernel starts in a private copy of ``folder`` made by the sandbox
(``pristine.py``): nothing in ``folder`` is written or followed.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from traitlets import List as TList
from traitlets import Unicode

from course_tools.grading.pristine import IGNORE
from course_utils.records import RECORD_ENV


def execute_sandboxed(nb: Any, folder: Path, *, kernel_manager_class: Any = None, timeout: int = 600,
                      config: Any = None, log: Any = None, ignore: tuple[str, ...] = IGNORE + ("*.py",)) -> Any:
    """Execute ``nb`` in place, as the autograder would (records on, ``NBGRADER_EXECUTION`` set), in a
    sandboxed kernel whose working folder is a private copy of ``folder``'s regular files (``ignore``
    left out); returns ``nb``."""
    from course_tools.grading.sandbox import SandboxedClient, SandboxedKernelManager

    km_class = kernel_manager_class or SandboxedKernelManager

    class CopyingKernelManager(km_class):  # type: ignore[misc, valid-type]
        copy_ignore = TList(Unicode(), default_value=list(ignore))

    old = {k: os.environ.get(k) for k in ("NBGRADER_EXECUTION", RECORD_ENV)}
    os.environ.setdefault("NBGRADER_EXECUTION", "autograde")
    os.environ[RECORD_ENV] = "1"
    try:
        kw: dict[str, Any] = {"config": config} if config is not None else {}
        client = SandboxedClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True, interrupt_on_timeout=True,
                                 kernel_manager_class=CopyingKernelManager,
                                 resources={"metadata": {"path": str(folder)}}, **kw)
        if log is not None:
            client.log = log
        client.execute(cwd=str(folder))
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return nb
