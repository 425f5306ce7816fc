"""The autograder's integrity check, run at the end of every autograded test cell.

``course_tools.grading.preprocessors.AppendIntegrityCheck`` appends a call of :func:`integrity_check` to
each test cell of a submission. It lives in its own small module (no nbgrader import) because it
runs in the student's kernel.
"""
from __future__ import annotations

import sys


def integrity_check() -> None:
    """Fail unless ``course_utils.grading`` holds the functions compiled from its own file.

    Called at the end of every autograded test cell (see :class:`AppendIntegrityCheck`). The file
    is compiled afresh in the kernel and the code object of every function of the module (nested
    ones included, such as the verifier holding the snapshot) is compared with the live one, so
    replacing ``check_close``, ``assert_untampered`` or the code of any other grading function (or
    the module in ``sys.modules``) is caught. Then :func:`course_utils.grading.assert_untampered`
    compares, by identity, everything the checks and the tests rely on with the snapshot taken
    when ``course_utils`` was imported (see its docstring).
    """
    import types

    from course_utils import grading

    live = sys.modules.get("course_utils.grading")
    if live is not grading or getattr(live, "__file__", None) != grading.__file__:
        raise AssertionError("course_utils.grading was replaced in sys.modules: grading cannot be trusted.")
    with open(grading.__file__, encoding="utf-8") as fh:
        fresh = compile(fh.read(), grading.__file__, "exec", dont_inherit=True)
    expected: dict[str, types.CodeType] = {}
    todo = [fresh]
    while todo:
        for c in todo.pop().co_consts:
            if isinstance(c, types.CodeType):
                expected.setdefault(c.co_qualname, c)
                todo.append(c)
    for name, code in expected.items():
        if "<" in name and "<locals>" not in name:  # comprehensions, lambdas: part of their parent's code
            continue
        if "." in name:  # methods and nested functions: checked below where the module holds them
            continue
        fn = vars(grading).get(name)
        fn = getattr(fn, "__wrapped__", fn)  # @contextmanager
        if fn is None or not callable(fn):
            raise AssertionError(f"course_utils.grading.{name} is missing: grading cannot be trusted.")
        if isinstance(fn, types.FunctionType) and fn.__code__ != code:
            raise AssertionError(f"course_utils.grading.{name} was modified: grading cannot be trusted.")
    for name, fn in list(vars(grading).items()):  # nested functions kept by the module (the verifier)
        if isinstance(fn, types.FunctionType) and fn.__module__ == grading.__name__:
            fn = getattr(fn, "__wrapped__", fn)
            if expected.get(fn.__code__.co_qualname) != fn.__code__:
                raise AssertionError(f"course_utils.grading.{name} was modified: grading cannot be trusted.")
    grading.assert_untampered()
