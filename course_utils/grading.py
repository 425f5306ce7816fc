"""Checks used by the graded test cells: they say *what* is wrong, not just that it is.

Every check raises ``AssertionError`` with a message aimed at a student: the name of the
thing checked, the expected and actual type / shape / dtype, the first mismatching index with
both values, and the tolerance used. Tests call these instead of bare ``assert``.

Threat model (see README, "Grading integrity"): student code shares the kernel with the tests.
:func:`assert_untampered` detects the cheap tricks (replacing these checks or the NumPy /
PyTorch comparison functions they rely on); hidden tests call it first.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import math
import types
from typing import Any, Callable, Iterator, Sequence

import numpy as np

try:  # torch is a dependency of the course, but grading works without it
    import torch
except ImportError:  # pragma: no cover
    torch = None  # type: ignore[assignment]

__all__ = [
    "to_numpy",
    "check_type",
    "check_shape",
    "check_close",
    "check_equal",
    "check_true",
    "assert_untampered",
    "switched_off",
]


def to_numpy(value: Any, name: str = "value") -> np.ndarray:
    """Convert a tensor / array / nested list of numbers to a NumPy array (float64 or int64)."""
    if torch is not None and isinstance(value, torch.Tensor):
        # as_subclass: a Tensor subclass cannot steer the comparison through __torch_function__
        value = value.detach().as_subclass(torch.Tensor)
        return value.cpu().to(torch.float64 if value.is_floating_point() else torch.int64).numpy()
    if isinstance(value, np.ndarray):
        return np.asarray(value)  # a plain ndarray, never a subclass with its own operators
    if isinstance(value, (list, tuple, int, float, np.number)):
        try:
            return np.asarray(value)
        except (ValueError, TypeError) as exc:  # ragged nested lists
            raise AssertionError(f"{name}: could not turn it into an array ({exc}).") from None
    raise AssertionError(
        f"{name}: expected a tensor, array, list or number, got {type(value).__name__}. "
        "Did your function forget to `return` its result?"
    )


def check_type(name: str, value: Any, expected: type | tuple[type, ...]) -> None:
    """Fail unless ``value`` is an instance of ``expected``."""
    if not isinstance(value, expected):
        exp = expected.__name__ if isinstance(expected, type) else " or ".join(t.__name__ for t in expected)
        hint = " Did your function forget to `return` its result?" if value is None else ""
        raise AssertionError(f"{name}: expected type {exp}, got {type(value).__name__}.{hint}")


def check_shape(name: str, value: Any, shape: Sequence[int]) -> None:
    """Fail unless ``value`` (tensor/array/list) has exactly ``shape``."""
    actual = tuple(to_numpy(value, name).shape) if not hasattr(value, "shape") else tuple(value.shape)
    if actual != tuple(shape):
        raise AssertionError(f"{name}: expected shape {tuple(shape)}, got {actual}.")


def _fmt(x: Any) -> str:
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.6g}"
    return repr(x.item() if hasattr(x, "item") else x)


def check_close(
    name: str,
    actual: Any,
    expected: Any,
    atol: float = 1e-6,
    rtol: float = 1e-5,
    dtype: Any = None,
) -> None:
    """Fail unless ``actual`` matches ``expected`` elementwise within ``atol + rtol*|expected|``.

    Checks, in order: convertible type, ``dtype`` (if given, a torch or NumPy dtype), shape,
    NaN/inf, values. The message names the first mismatching index and both values.
    """
    if dtype is not None and hasattr(actual, "dtype") and actual.dtype != dtype:
        raise AssertionError(f"{name}: expected dtype {dtype}, got {actual.dtype}.")
    a = to_numpy(actual, name)
    e = to_numpy(expected, "expected")
    if a.shape != e.shape:
        raise AssertionError(f"{name}: expected shape {e.shape}, got {a.shape}.")
    if a.dtype.kind not in "biuf" or e.dtype.kind not in "biuf":
        raise AssertionError(f"{name}: expected numbers, got dtype {a.dtype}.")
    a = a.astype(np.float64)
    e = e.astype(np.float64)
    bad_nan = np.isnan(a) != np.isnan(e)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(np.where(np.isfinite(a) & np.isfinite(e), a - e, 0.0))
    same_inf = (a == e) | (np.isnan(a) & np.isnan(e))
    bad = bad_nan | (~same_inf & ((err > atol + rtol * np.abs(np.where(np.isfinite(e), e, 0.0))) | ~np.isfinite(a) | ~np.isfinite(e)))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        where = f" at index {idx}" if a.ndim else ""
        n_bad = int(bad.sum())
        raise AssertionError(
            f"{name}: {n_bad} of {a.size} value(s) differ; first{where}: got {_fmt(a[idx])}, "
            f"expected {_fmt(e[idx])} (tolerance atol={atol:g}, rtol={rtol:g})."
        )


def check_equal(name: str, actual: Any, expected: Any) -> None:
    """Fail unless ``actual == expected`` exactly (lists, tuples, strings, ints, dicts).

    For sequences the message shows the first differing position.
    """
    if type(actual) is not type(expected) and not (
        isinstance(actual, (list, tuple)) and isinstance(expected, (list, tuple))
    ):
        raise AssertionError(
            f"{name}: expected a {type(expected).__name__}, got {type(actual).__name__} ({_short(actual)})."
        )
    if isinstance(expected, (list, tuple)):
        if type(actual) not in (list, tuple):  # a subclass could override iteration or comparison
            raise AssertionError(f"{name}: expected a plain list or tuple, got {type(actual).__name__}.")
        actual_list, expected_list = list(actual), list(expected)
        for i, (x, y) in enumerate(zip(actual_list, expected_list)):
            if type(x) is not type(y) or x != y:
                raise AssertionError(
                    f"{name}: first difference at position {i}: got {_short(x)}, expected {_short(y)}."
                )
        if len(actual_list) != len(expected_list):
            raise AssertionError(
                f"{name}: expected length {len(expected_list)}, got {len(actual_list)} "
                f"(the first {min(len(actual_list), len(expected_list))} items agree)."
            )
        return
    if isinstance(expected, dict):
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        if missing or extra:
            raise AssertionError(f"{name}: missing keys {missing[:5]}, unexpected keys {extra[:5]}.")
        for k in expected:
            if actual[k] != expected[k]:
                raise AssertionError(f"{name}[{k!r}]: got {_short(actual[k])}, expected {_short(expected[k])}.")
        return
    if actual != expected:
        raise AssertionError(f"{name}: got {_short(actual)}, expected {_short(expected)}.")


def check_true(condition: bool, message: str) -> None:
    """``assert`` that survives ``python -O`` and always carries a student-facing message."""
    if condition is not True and not (isinstance(condition, (np.bool_,)) and bool(condition)):
        raise AssertionError(message)


def _short(x: Any, limit: int = 80) -> str:
    s = repr(x)
    return s if len(s) <= limit else s[: limit - 3] + "..."


# --- integrity -------------------------------------------------------------------------------
# References captured when course_utils is imported (the setup cell, before any student code).
_ORIGINALS: dict[str, Any] = {
    "np.abs": np.abs,
    "np.isnan": np.isnan,
    "np.allclose": np.allclose,
    "np.array_equal": np.array_equal,
    "np.testing.assert_allclose": np.testing.assert_allclose,
    "math.isclose": math.isclose,
}
if torch is not None:
    _ORIGINALS.update({"torch.allclose": torch.allclose, "torch.equal": torch.equal,
                       "torch.testing.assert_close": torch.testing.assert_close})
_CODE = {n: f.__code__ for n, f in list(globals().items()) if n.startswith("check_") or n == "to_numpy"}


def _resolve(path: str) -> Any:
    mods = {"np": np, "math": math, "torch": torch}
    head, *rest = path.split(".")
    obj = mods[head]
    for part in rest:
        obj = getattr(obj, part)
    return obj


def assert_untampered() -> None:
    """Fail if a comparison function used by the tests was replaced since the setup cell."""
    import sys

    mod = sys.modules[__name__]
    for name, code in _CODE.items():
        fn = getattr(mod, name, None)
        if getattr(fn, "__code__", None) is not code:
            raise AssertionError(f"course_utils.grading.{name} was replaced: grading cannot be trusted.")
    for path, original in _ORIGINALS.items():
        if _resolve(path) is not original:
            raise AssertionError(f"{path} was replaced after the setup cell: grading cannot be trusted.")


# --- "write it yourself": library functions switched off while the student's code runs --------
def _resolve_dotted(path: str) -> tuple[Any, str, Any]:
    """``"torch.nn.functional.softmax"`` -> (owner object, attribute name, current value)."""
    parts = path.split(".")
    for i in range(len(parts) - 1, 0, -1):
        try:
            owner: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for part in parts[i:-1]:
            owner = getattr(owner, part)
        return owner, parts[-1], getattr(owner, parts[-1])
    raise ValueError(f"cannot resolve {path!r}")


def _base(value: Any) -> Any:
    while isinstance(value, functools.partial):
        value = value.func
    return value


def _is_banned(value: Any, banned: list[Any]) -> bool:
    value = _base(value)
    return any(value is b for b in banned)


@contextlib.contextmanager
def switched_off(*paths: str, functions: Sequence[Callable[..., Any]] = (), hint: str = "",
                 no_imports: Sequence[str] = ()) -> Iterator[None]:
    """While active, calling any library function named in ``paths`` raises ``AssertionError``.

    ``paths`` are dotted names such as ``"torch.softmax"``, ``"torch.Tensor.softmax"`` or
    ``"tokenizers.models.WordPiece"``; names that do not exist in the installed version are
    ignored. Aliases that the student's ``functions`` can reach are switched off too: names in
    their module globals (``_f = torch.softmax``), default arguments (``def f(x, _f=F.softmax)``),
    ``functools.partial`` wrappers and closures, also those of other functions defined in the
    notebook. ``no_imports`` lists module names (``"tokenizers"``, ``"transformers.models"``)
    whose import, or import of a submodule, raises too, by an ``import`` statement,
    ``__import__`` or ``importlib.import_module``. Hidden tests use it to check that an exercise
    is written "by hand" (Book exercises ask for the formula, not the library call); the message
    ``hint`` tells the student why.
    """
    import builtins

    msg = hint or f"this exercise must be written without {', '.join(paths or tuple(no_imports))}."

    def stub(*_a: Any, **_k: Any) -> Any:
        raise AssertionError(msg)

    def blocked(name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in no_imports)

    real_import, real_import_module = builtins.__import__, importlib.import_module

    def guarded_import(name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                       level: int = 0) -> Any:
        if level == 0 and blocked(name):
            raise AssertionError(msg)
        return real_import(name, globals, locals, fromlist, level)

    def guarded_import_module(name: str, package: str | None = None) -> Any:
        import importlib.util

        if blocked(importlib.util.resolve_name(name, package) if name.startswith(".") else name):
            raise AssertionError(msg)
        return real_import_module(name, package)

    restore: list[Callable[[], None]] = []  # undone in reverse order on exit

    def patch(owner: Any, name: str, new: Any) -> Any:
        """Set ``owner.name = new`` until exit; returns the value it replaced."""
        own = name in getattr(owner, "__dict__", {})  # else inherited (a method of a base class)
        old = getattr(owner, name)
        setattr(owner, name, new)
        restore.append(lambda: setattr(owner, name, old) if own else delattr(owner, name))
        return old

    banned: list[Any] = []
    guards: dict[int, Any] = {}  # aliases of the import functions get the guarded version
    try:
        for path in paths:
            try:
                owner, name, _ = _resolve_dotted(path)
            except (ValueError, AttributeError):
                continue
            banned.append(patch(owner, name, stub))
        if no_imports:
            for owner, name, guard in ((builtins, "__import__", guarded_import),
                                       (importlib, "__import__", guarded_import),
                                       (importlib, "import_module", guarded_import_module)):
                old = patch(owner, name, guard)
                banned.append(old)
                guards[id(old)] = guard

        def replacement(value: Any) -> Any:
            return guards.get(id(_base(value)), stub)

        seen: set[int] = set()
        todo = [f for f in functions if isinstance(f, types.FunctionType)]
        for fn in list(todo):  # functions of the notebook, defined next to the student's
            todo += [v for v in fn.__globals__.values() if isinstance(v, types.FunctionType)
                     and v.__globals__ is fn.__globals__]
        for fn in todo:
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            g = fn.__globals__
            for k, v in list(g.items()):
                if _is_banned(v, banned):
                    g[k] = replacement(v)
                    restore.append(lambda g=g, k=k, v=v: g.__setitem__(k, v))
            if fn.__defaults__ and any(_is_banned(v, banned) for v in fn.__defaults__):
                old = fn.__defaults__
                fn.__defaults__ = tuple(replacement(v) if _is_banned(v, banned) else v for v in old)
                restore.append(lambda fn=fn, old=old: setattr(fn, "__defaults__", old))
            if fn.__kwdefaults__ and any(_is_banned(v, banned) for v in fn.__kwdefaults__.values()):
                oldk = dict(fn.__kwdefaults__)
                fn.__kwdefaults__ = {k: (replacement(v) if _is_banned(v, banned) else v) for k, v in oldk.items()}
                restore.append(lambda fn=fn, oldk=oldk: setattr(fn, "__kwdefaults__", oldk))
            for cell in fn.__closure__ or ():
                try:
                    v = cell.cell_contents
                except ValueError:  # empty cell
                    continue
                if _is_banned(v, banned):
                    cell.cell_contents = replacement(v)
                    restore.append(lambda cell=cell, v=v: setattr(cell, "cell_contents", v))
                elif isinstance(v, types.FunctionType) and id(v) not in seen:
                    todo.append(v)
        yield
    finally:
        for undo in reversed(restore):
            undo()
