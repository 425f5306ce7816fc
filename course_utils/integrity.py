"""The autograder's integrity check, run at the end of every autograded test cell.

``course_utils.nbgrader_ext.AppendIntegrityCheck`` appends a call of :func:`integrity_check` to
each test cell of a submission. It lives in its own small module (no nbgrader import) because it
runs in the student's kernel.
"""
from __future__ import annotations

import sys


def integrity_check() -> None:
    """Fail unless ``course_utils.grading`` holds the functions compiled from its own file.

    Called at the end of every autograded test cell (see :class:`AppendIntegrityCheck`). The file
    is compiled afresh in the kernel and every function's code object is compared with the live
    one, so replacing ``check_close``, ``assert_untampered`` or any other grading function (or the
    module in ``sys.modules``) is caught. Then :func:`course_utils.grading.assert_untampered`
    checks the NumPy/PyTorch comparison functions.
    """
    import types

    from course_utils import grading

    live = sys.modules.get("course_utils.grading")
    if live is not grading or getattr(live, "__file__", None) != grading.__file__:
        raise AssertionError("course_utils.grading was replaced in sys.modules: grading cannot be trusted.")
    with open(grading.__file__, encoding="utf-8") as fh:
        fresh = compile(fh.read(), grading.__file__, "exec", dont_inherit=True)
    expected = {c.co_name: c for c in fresh.co_consts if isinstance(c, types.CodeType)}
    for name, code in expected.items():
        if name.startswith("<"):  # comprehensions, lambdas: part of their parent's code
            continue
        fn = vars(grading).get(name)
        fn = getattr(fn, "__wrapped__", fn)  # @contextmanager
        if isinstance(fn, types.FunctionType) and fn.__code__ != code:
            raise AssertionError(f"course_utils.grading.{name} was modified: grading cannot be trusted.")
        if fn is None or not callable(fn):
            raise AssertionError(f"course_utils.grading.{name} is missing: grading cannot be trusted.")
    grading.assert_untampered()
