"""Checks used by the graded test cells: they say *what* is wrong, not just that it is.

Every check raises ``AssertionError`` with a message aimed at a student: the name of the
thing checked, the expected and actual type / shape / dtype, the first mismatching index with
both values, and the tolerance used. Tests call these instead of bare ``assert``.

Threat model (see README, "Grading integrity"): student code shares the kernel with the tests.
Two layers keep an answer cell from steering the checks:

1. **Nothing on the comparison path can be rebound.** The checks call only objects captured
   when this module is imported (the setup cell, before any student code): C functions, NumPy
   ufuncs and methods of immutable C types (``numpy.ndarray``, ``torch._C.TensorBase``), and
   builtins from a private copy of the builtins namespace. They never look an attribute up on
   ``numpy``, ``torch``, ``torch.Tensor`` or ``builtins`` at run time, so rebinding ``np.where``,
   ``torch.Tensor.numpy`` or ``builtins.isinstance`` changes nothing they compute
   (``tests/test_grading.py`` checks this on their code objects; ``tests/test_integrity.py``
   traces what they call and autogrades an attack on each).
2. **Rebinding is detected.** :func:`assert_untampered` (hidden tests call it first; the
   autograder calls it at the end of every test cell) checks, by identity, every callable
   attribute of every ``numpy*`` / ``torch*`` module loaded at import, of the classes they
   define, of ``builtins``, ``math`` and ``operator``, and every name, default argument and
   closure of this module against a snapshot taken at import. This also covers the library
   functions a hidden test uses to compute its reference values.

What of this module still decides a grade (the verdict itself is taken outside the kernel, by
``course_tools.grading.preprocessors.VerifyRecords``, from records):

* ``check_*``: only the visible tests' feedback while a student works; under the autograder a
  failing visible check fails its cell too, so a right answer must also pass what the student saw.
* :func:`switched_off`: where an exercise forbids a *torch* function, which cannot be removed from
  the kernel as a package can, the hidden records are taken with it switched off: a call to it
  raises, and nothing is recorded.
* :func:`assert_untampered`: the autograder's end-of-cell check (``integrity.integrity_check``),
  so that a cell whose checks were rebound does not pass on its visible part.
"""
from __future__ import annotations

import builtins as _builtins
import contextlib
import functools
import importlib
import math
import operator
import sys
import types
from typing import Any, Callable, Iterator, Sequence

# A private copy of the builtins namespace: functions defined below look builtins up here, so
# `builtins.isinstance = ...` in an answer cell does not reach them.
__builtins__ = dict(vars(_builtins))

import numpy as np  # noqa: E402

from course_utils.records import expect, outcome, record  # noqa: E402,F401  (hidden tests record; see records.py)
from course_utils.translation import tr as _tr  # noqa: E402  (failure messages in the edition's language)

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
    "msg",
    "passed",
    "assert_untampered",
    "switched_off",
    "record",
    "expect",
    "outcome",
]

# --- the comparison path: references captured at import ---------------------------------------
# Only these are called by to_numpy / check_*. Each is a C object that cannot be modified (a
# ufunc, a C function, a method of an immutable C type); which module attribute later points
# where does not matter to them.
_ndarray = np.ndarray
_np_number = np.number
_np_bool = np.bool_
_asarray = np.asarray
_f64 = np.float64
_i64 = np.int64
_isnan = np.isnan
_isfinite = np.isfinite
_fabs = np.absolute
_greater = np.greater
_less_equal = np.less_equal
_equal = np.equal
_multiply = np.multiply
_add = np.add
_subtract = np.subtract
_logical_or = np.logical_or
_logical_and = np.logical_and
_logical_not = np.logical_not
_nd_astype = np.ndarray.astype
_nd_copy = np.ndarray.copy
_nd_nonzero = np.ndarray.nonzero
_nd_item = np.ndarray.item
_nd_reshape = np.ndarray.reshape
if torch is not None:
    _Tensor = torch.Tensor
    _TB = torch._C.TensorBase
    _no_subclass_fn = torch._C.DisableTorchFunctionSubclass
    _tb_detach, _tb_as_subclass, _tb_cpu, _tb_to = _TB.detach, _TB.as_subclass, _TB.cpu, _TB.to
    _tb_numpy, _tb_is_floating_point, _tb_size = _TB.numpy, _TB.is_floating_point, _TB.size
    _tb_resolve_conj, _tb_resolve_neg = _TB.resolve_conj, _TB.resolve_neg
    _tb_dtype = _TB.dtype.__get__
    _t_f64, _t_i64 = torch.float64, torch.int64
else:  # pragma: no cover
    _Tensor = ()


def _plain_tensor(value: Any) -> Any:
    """A plain ``torch.Tensor`` viewing ``value`` (a subclass's ``__torch_function__`` is not consulted)."""
    with _no_subclass_fn():
        return _tb_as_subclass(_tb_detach(value), _Tensor)


def to_numpy(value: Any, name: str = "value") -> np.ndarray:
    """Convert a tensor / array / nested list of numbers to a NumPy array (float64 or int64)."""
    if isinstance(value, _Tensor):
        with _no_subclass_fn():
            t = _tb_resolve_neg(_tb_resolve_conj(_tb_cpu(_plain_tensor(value))))
            return _tb_numpy(_tb_to(t, _t_f64 if _tb_is_floating_point(t) else _t_i64))
    if isinstance(value, _ndarray):
        return _asarray(value)  # a plain ndarray, never a subclass with its own operators
    if isinstance(value, (list, tuple, int, float, _np_number)):
        try:
            return _asarray(value)
        except (ValueError, TypeError) as exc:  # ragged nested lists
            raise AssertionError(_tr("{name}: could not turn it into an array ({error}).").format(name=_tr(name), error=exc)) from None
    raise AssertionError(
        _tr("{name}: expected a tensor, array, list or number, got {got}. "
            "Did your function forget to `return` its result?").format(name=_tr(name), got=type(value).__name__)
    )


def check_type(name: str, value: Any, expected: type | tuple[type, ...]) -> None:
    """Fail unless ``value`` is an instance of ``expected`` (its real type, not its ``__class__``)."""
    if not issubclass(type(value), expected):
        exp = expected.__name__ if isinstance(expected, type) else " or ".join(t.__name__ for t in expected)
        hint = " " + _tr("Did your function forget to `return` its result?") if value is None else ""
        raise AssertionError(_tr("{name}: expected type {expected}, got {got}.").format(
            name=_tr(name), expected=exp, got=type(value).__name__) + hint)


def check_shape(name: str, value: Any, shape: Sequence[int]) -> None:
    """Fail unless ``value`` (tensor/array/list) has exactly ``shape``."""
    if isinstance(value, _Tensor):
        actual = tuple(_tb_size(_plain_tensor(value)))
    else:
        actual = tuple(to_numpy(value, name).shape)
    if actual != tuple(shape):
        raise AssertionError(_tr("{name}: expected shape {expected}, got {got}.").format(
            name=_tr(name), expected=tuple(shape), got=actual))


def _fmt(x: Any) -> str:
    if isinstance(x, float):
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
    if dtype is not None:
        if isinstance(actual, _Tensor):
            got = _tb_dtype(_plain_tensor(actual))
        elif isinstance(actual, _ndarray):
            got = _asarray(actual).dtype
        else:
            got = None
        if got is not None and got != dtype:
            raise AssertionError(_tr("{name}: expected dtype {expected}, got {got}.").format(
                name=_tr(name), expected=dtype, got=got))
    a = to_numpy(actual, name)
    e = to_numpy(expected, "expected")
    if a.shape != e.shape:
        raise AssertionError(_tr("{name}: expected shape {expected}, got {got}.").format(
            name=_tr(name), expected=e.shape, got=a.shape))
    if a.dtype.kind not in "biuf" or e.dtype.kind not in "biuf":
        raise AssertionError(_tr("{name}: expected numbers, got dtype {got}.").format(name=_tr(name), got=a.dtype))
    shape, ndim, size = a.shape, a.ndim, a.size
    a = _nd_reshape(_nd_astype(a, _f64), -1)  # flat, 1-d: ufuncs return arrays, never scalars
    e = _nd_reshape(_nd_astype(e, _f64), -1)
    a_nan, e_nan = _isnan(a), _isnan(e)
    finite = _logical_and(_isfinite(a), _isfinite(e))
    # finite values are compared at half scale: no overflow (hence no warning) for huge ones
    a0, e0 = _nd_copy(a), _nd_copy(e)
    a0[_logical_not(finite)] = 0.0
    e0[_logical_not(finite)] = 0.0
    err = _fabs(_subtract(_multiply(a0, 0.5), _multiply(e0, 0.5)))
    tol = _multiply(_add(atol, _multiply(rtol, _fabs(e0))), 0.5)
    same_nonfinite = _logical_or(_equal(a, e), _logical_and(a_nan, e_nan))  # inf == inf, nan vs nan
    bad = _logical_or(_logical_not(_equal(a_nan, e_nan)),
                      _logical_and(_logical_not(same_nonfinite),
                                   _logical_or(_greater(err, tol), _logical_not(finite))))
    if _logical_or.reduce(bad, axis=None):
        k = int(_nd_nonzero(bad)[0][0])
        idx, rest = [], k
        for dim in reversed(shape):
            rest, i = divmod(rest, dim)
            idx.insert(0, i)
        n_bad = int(_add.reduce(_nd_astype(bad, _i64), axis=None))
        template = (_tr("{name}: {n_bad} of {size} value(s) differ; first at index {index}: got {got}, "
                        "expected {expected} (tolerance atol={atol}, rtol={rtol}).") if ndim else
                    _tr("{name}: {n_bad} of {size} value(s) differ; first: got {got}, "
                        "expected {expected} (tolerance atol={atol}, rtol={rtol})."))
        raise AssertionError(template.format(
            name=_tr(name), n_bad=n_bad, size=size, index=tuple(idx), got=_fmt(_nd_item(a, k)),
            expected=_fmt(_nd_item(e, k)), atol=f"{atol:g}", rtol=f"{rtol:g}"))


def _same(x: Any, y: Any) -> bool:
    """Exact equality that never asks an object of the student's own type whether it is equal."""
    if type(x) is not type(y):
        return False
    if type(x) in (list, tuple):
        return len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    if type(x) is dict:
        return x.keys() == y.keys() and all(_same(x[k], y[k]) for k in y)
    return (x == y) is True


def check_equal(name: str, actual: Any, expected: Any) -> None:
    """Fail unless ``actual == expected`` exactly (lists, tuples, strings, ints, dicts).

    Types must match exactly at every level (a list may stand for a tuple at the top level).
    For sequences the message shows the first differing position.
    """
    if type(actual) is not type(expected) and not (
        type(actual) in (list, tuple) and type(expected) in (list, tuple)
    ):
        raise AssertionError(_tr("{name}: expected a {expected}, got {got} ({value}).").format(
            name=_tr(name), expected=type(expected).__name__, got=type(actual).__name__, value=_short(actual)))
    if type(expected) in (list, tuple):
        actual_list, expected_list = list(actual), list(expected)
        for i, (x, y) in enumerate(zip(actual_list, expected_list)):
            if not _same(x, y):
                raise AssertionError(_tr("{name}: first difference at position {position}: got {got}, "
                                         "expected {expected}.").format(
                    name=_tr(name), position=i, got=_short(x), expected=_short(y)))
        if len(actual_list) != len(expected_list):
            raise AssertionError(_tr("{name}: expected length {expected}, got {got} (the first {agree} items "
                                     "agree).").format(name=_tr(name), expected=len(expected_list),
                                                       got=len(actual_list),
                                                       agree=min(len(actual_list), len(expected_list))))
        return
    if type(expected) is dict:
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        if missing or extra:
            raise AssertionError(_tr("{name}: missing keys {missing}, unexpected keys {extra}.").format(
                name=_tr(name), missing=missing[:5], extra=extra[:5]))
        for k in expected:
            if not _same(actual[k], expected[k]):
                raise AssertionError(_tr("{name}[{key}]: got {got}, expected {expected}.").format(
                    name=_tr(name), key=repr(k), got=_short(actual[k]), expected=_short(expected[k])))
        return
    if not _same(actual, expected):
        raise AssertionError(_tr("{name}: got {got}, expected {expected}.").format(
            name=_tr(name), got=_short(actual), expected=_short(expected)))


def check_true(condition: bool, message: str) -> None:
    """``assert`` that survives ``python -O`` and always carries a student-facing message."""
    if condition is not True and not (type(condition) is _np_bool and condition.item() is True):
        raise AssertionError(_tr(message))


def msg(template: str, /, **fields: Any) -> str:
    """A test cell's message with values in it, in the edition's language.

    ``msg("tempered_softmax(x, tau={tau})", tau=tau)``: the template is the catalogue entry
    (``course_utils.po``, extracted from the test cells), its fields are filled after the lookup, so
    the Portuguese edition prints ``"tempered_softmax(x, tau=0.5)"``'s translation with the same
    values. Use it wherever a visible test builds a message (a ``check_*`` name, a ``check_true``
    message, ``raise AssertionError(msg(...))``) instead of an f-string, which no catalogue can hold.
    """
    return _tr(template).format(**fields)


def passed(message: str | None = None) -> None:
    """Print the line a test cell ends with when its visible checks pass, in the edition's language."""
    print(_tr(message) if message else _tr("Visible tests passed."))


def _short(x: Any, limit: int = 80) -> str:
    s = repr(x)
    return s if len(s) <= limit else s[: limit - 3] + "..."


# --- integrity: a snapshot taken at import, verified by identity ------------------------------
_WATCHED_PACKAGES = ("numpy", "torch")  # every loaded module of these, and the classes they define
_WATCHED_MODULES = ("builtins", "math", "operator")
# Modules whose classes are watched too (the classes hidden tests build references with).
_WATCHED_CLASS_MODULES = ("numpy", "torch.nn.modules", "torch.nn.parameter", "torch.autograd.function")
_IMMUTABLE = 1 << 8  # Py_TPFLAGS_IMMUTABLETYPE: C types whose attributes cannot be set at all
# Wrappers torch itself installs over its own functions when torch._dynamo is first imported
# (torch.manual_seed, torch.jit.trace...): accepted only around the very function they replaced.
_TORCH_WRAPPERS = {"_disable_dynamo.<locals>.inner", "DisableContext.__call__.<locals>._fn"}


def _no_new_names() -> tuple:
    """Classes that may not gain names: a new name would hide a method of their C base class."""
    return (torch.Tensor,) if torch is not None else ()


_NO_NEW_NAMES = _no_new_names()


def _watched_entries(ns: dict, cls: bool) -> dict[str, Any]:
    """The callable attributes of a namespace (plus descriptors, for a class)."""
    out = {}
    for k, v in list(ns.items()):
        t = type(v)  # never v.__class__: some library objects warn when their attributes are read
        if issubclass(t, types.ModuleType):
            continue
        if callable(v) or (cls and t in (classmethod, staticmethod, property)):
            out[k] = v
    return out


def _take_snapshot() -> tuple:
    """(owner, label, ((name, value), ...), names) for every watched namespace, as immutable tuples.

    ``names`` (``torch.Tensor`` only) is every name of the class's own
    namespace: a name added later would shadow what the class inherits (``torch.Tensor.numpy``
    lives in ``torch._C.TensorBase``). Other classes gain names legitimately (torch completes some
    of its classes when a submodule is first imported), so only their existing names are watched.
    """
    owners: list[tuple[Any, str]] = []
    for name, mod in list(sys.modules.items()):
        if mod is None or name.split(".")[0] not in _WATCHED_PACKAGES:
            continue
        owners.append((mod, name))
        if not name.startswith(_WATCHED_CLASS_MODULES):  # torch completes many other classes lazily
            continue
        for v in list(vars(mod).values()):
            if issubclass(type(v), type) and not v.__flags__ & _IMMUTABLE and v.__module__ == name:
                owners.append((v, f"{name}.{v.__qualname__}"))
    owners += [(sys.modules[m], m) for m in _WATCHED_MODULES]
    if torch is not None:
        owners += [(torch.Tensor, "torch.Tensor"), (torch.nn.Module, "torch.nn.Module")]
    snap = []
    seen: set[int] = set()
    for owner, label in owners:
        if id(owner) in seen:
            continue
        seen.add(id(owner))
        entries = _watched_entries(vars(owner), isinstance(owner, type))
        if owner is _builtins:  # IPython/ipykernel put their own objects there and swap them per cell
            entries = {k: v for k, v in entries.items() if getattr(v, "__module__", None) == "builtins"}
        names = frozenset(vars(owner)) if owner in _NO_NEW_NAMES else None
        snap.append((owner, label, tuple(entries.items()), names))
    return tuple(snap)


def _is_torch_wrapper(new: Any, old: Any) -> bool:
    """``new`` is torch's own ``disable dynamo`` wrapper around exactly ``old``."""
    code = getattr(new, "__code__", None)
    if not isinstance(new, types.FunctionType) or code.co_qualname not in _TORCH_WRAPPERS:
        return False
    if torch is None or not code.co_filename.startswith(torch.__path__[0]):
        return False
    inner = new
    for _ in range(4):
        inner = getattr(inner, "__wrapped__", None)
        if inner is old:
            return True
    return False


def _own_state() -> tuple:
    """Every name of this module, and the defaults and closures of its functions."""
    g = globals()
    names = tuple(g.items())
    funcs = tuple((fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__,
                   tuple(c.cell_contents for c in fn.__closure__ or ()))
                  for _, fn in names if isinstance(fn, types.FunctionType))  # @contextmanager wrappers too
    return names, funcs, tuple(__builtins__.items())


def _verifier() -> Callable[[], None]:
    """The check behind :func:`assert_untampered`; the snapshot lives in its closure."""
    snapshot = _take_snapshot()
    own: list[tuple] = []  # filled once this module is complete (last line of the file)
    modules = tuple((name, mod) for mod, name, _, _ in snapshot if isinstance(mod, types.ModuleType))

    def verify() -> None:
        if not own:
            own.append(_own_state())
            return
        names, funcs, builtins_copy = own[0]
        g = globals()
        for k, v in names:
            if g.get(k) is not v:
                raise AssertionError(f"course_utils.grading.{k} was replaced: grading cannot be trusted.")
        for fn, code, defaults, kwdefaults, cells in funcs:
            if (fn.__code__ is not code or fn.__defaults__ is not defaults or fn.__kwdefaults__ is not kwdefaults
                    or len(fn.__closure__ or ()) != len(cells)
                    or any(c.cell_contents is not v for c, v in zip(fn.__closure__ or (), cells))):
                raise AssertionError(f"course_utils.grading.{fn.__name__} was modified: grading cannot be trusted.")
        for k, v in builtins_copy:
            if __builtins__.get(k) is not v:
                raise AssertionError(f"the builtins of course_utils.grading were modified ({k}): "
                                     "grading cannot be trusted.")
        for name, mod in modules:
            if sys.modules.get(name, mod) is not mod:
                raise AssertionError(f"module {name} was replaced in sys.modules: grading cannot be trusted.")
        for owner, label, entries, names in snapshot:
            ns = vars(owner)
            if names is not None and len(ns) != len(names):
                added = _watched_entries({k: ns[k] for k in ns.keys() - names}, True)
                if added:
                    raise AssertionError(f"{label}.{next(iter(added))} was added after the setup cell "
                                         "(it hides what the class inherits): grading cannot be trusted.")
            for k, v in entries:
                new = ns.get(k)
                if new is not v and not _is_torch_wrapper(new, v):
                    raise AssertionError(f"{label}.{k} was replaced or removed after the setup cell: "
                                         "grading cannot be trusted.")

    return verify


def assert_untampered() -> None:
    """Fail if anything the checks or the tests' references rely on was rebound since the setup cell.

    Verifies by identity against the snapshot taken when this module was imported: this module's
    names, functions (code, defaults, closures) and private builtins, and every callable
    attribute of the loaded ``numpy*`` / ``torch*`` modules and of the (mutable) classes they
    define, ``torch.Tensor``, ``torch.nn.Module``, ``builtins``, ``math`` and ``operator``.
    """
    _verify()


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


_verify = _verifier()  # the snapshot: the last thing this module does, before any student code
_verify()  # seals this module's own names
