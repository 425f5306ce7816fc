"""Records: what a hidden test hands to the grader, and how the grader compares it.

Course infrastructure (no book section). A graded test cell ends with a hidden region that only
*records* what the student's functions return on the hidden inputs::

    ### BEGIN HIDDEN TESTS
    _x = torch.randn(5, 7, 2, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    record("rotate_2d on a (5, 7, 2) batch", rotate_2d(_x, 0.3), atol=1e-6)
    record("rotate_2d(0 pairs) raises", outcome(rotate_2d, torch.zeros(5, 3), 0.3))
    ### BEGIN REFERENCE
    expect("rotate_2d on a (5, 7, 2) batch", library_rotation(_x, 0.3), atol=1e-6)
    ### END REFERENCE
    ### END HIDDEN TESTS

During autograding, :func:`record` writes each value, encoded as plain data (type, dtype, shape,
raw bytes), as an output of the course's own MIME type :data:`MIME`. The verdict is not computed
in the student's kernel: the autograder (``course_tools.grading.preprocessors.VerifyRecords``) executes the
instructor's source notebook once in a kernel of its own, where the answer cells hold the
solutions and the ``REFERENCE`` blocks run (they are removed before a submission runs), and
compares the two streams of records with :func:`compare`, using the tolerances of the reference
run. :func:`expect` (reference blocks only) sets the reference of a key to a value computed
independently (a library, a closed form); the solution's own value must match it, which is what
CI checks when it executes the solutions.

This module is imported by the student's kernel (``record``, ``outcome``) and by the grader
(``decode``, ``compare``); the grader never executes anything that came out of a kernel: records
are JSON, parsed strictly (no pickle; a whitelist of types and dtypes; byte counts checked).
"""
from __future__ import annotations

import base64
import math
import os
from typing import Any, Callable

import numpy as np

MIME = "application/vnd.llm-course.record.v1+json"
RECORD_ENV = "LLM_COURSE_RECORD"
DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64",
          "complex64", "complex128")
MAX_BYTES = 64 * 2**20      # per array
MAX_DEPTH = 8               # nesting of lists / tuples / dicts
MAX_ITEMS = 10_000          # elements of one list / tuple / dict
SPEC_KEYS = ("atol", "rtol", "dtype", "pvalue")
MAX_KEY = 500               # characters of a key (the grader rejects longer ones)

_recorded: dict[str, dict] = {}   # last record per key in this kernel (expect() compares with it)


class RecordError(ValueError):
    """A value that cannot be recorded, or a record that does not parse."""


# --- encoding (in the kernel) ------------------------------------------------------------------

def _array_payload(kind: str, arr: np.ndarray, dtype_name: str) -> dict:
    arr = np.array(arr, order="C", copy=True)   # (np.ascontiguousarray makes a 0-d array 1-d)
    if arr.nbytes > MAX_BYTES:
        raise RecordError(f"array of {arr.nbytes} bytes is too large to record (max {MAX_BYTES})")
    return {"t": kind, "dtype": dtype_name, "shape": [int(n) for n in arr.shape],
            "b64": base64.b64encode(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()).decode("ascii")}


def encode(value: Any, _depth: int = 0) -> dict:
    """Plain-data form of ``value``: tensors, arrays, numbers, strings, None and containers of them."""
    if _depth > MAX_DEPTH:
        raise RecordError("value nested too deeply to record")
    torch = _torch()
    if torch is not None and isinstance(value, torch.Tensor):
        t = value.detach().to("cpu").contiguous()
        name = str(t.dtype).removeprefix("torch.")
        if name == "bfloat16":
            return _array_payload("tensor", t.view(torch.int16).numpy().view(np.uint16), "bfloat16")
        if name not in DTYPES:
            raise RecordError(f"cannot record a tensor of dtype {t.dtype}")
        return _array_payload("tensor", t.numpy(), name)
    if isinstance(value, np.ndarray | np.generic):
        arr = np.asarray(value)
        if arr.dtype.name not in DTYPES or arr.dtype.name == "bfloat16":
            raise RecordError(f"cannot record a NumPy value of dtype {arr.dtype}")
        return _array_payload("ndarray" if isinstance(value, np.ndarray) else "npscalar", arr, arr.dtype.name)
    if value is None:
        return {"t": "none"}
    if isinstance(value, bool):
        return {"t": "bool", "v": bool(value)}
    if isinstance(value, int):
        return {"t": "int", "v": str(int(value))}
    if isinstance(value, float):
        return {"t": "float", "v": float(value).hex()}
    if isinstance(value, str):
        return {"t": "str", "v": str(value)}
    if isinstance(value, list | tuple):
        if len(value) > MAX_ITEMS:
            raise RecordError(f"a {type(value).__name__} of {len(value)} items is too long to record")
        return {"t": "list" if isinstance(value, list) else "tuple", "v": [encode(v, _depth + 1) for v in value]}
    if isinstance(value, dict):
        if len(value) > MAX_ITEMS or not all(isinstance(k, str) for k in value):
            raise RecordError("only dicts with at most 10,000 string keys can be recorded")
        return {"t": "dict", "v": [[str(k), encode(v, _depth + 1)] for k, v in value.items()]}
    raise RecordError(f"cannot record a value of type {type(value).__name__}")


def _torch() -> Any:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    return torch


def _spec(atol: float | None, rtol: float | None, dtype: bool, pvalue: float | None) -> dict:
    spec: dict[str, Any] = {"dtype": bool(dtype)}
    for name, v in (("atol", atol), ("rtol", rtol), ("pvalue", pvalue)):
        if v is not None:
            v = float(v)
            if not (math.isfinite(v) and v >= 0):
                raise RecordError(f"{name} must be a finite number >= 0")
            spec[name] = v
    return spec


def recording() -> bool:
    """Whether records are written as outputs (the autograder's kernels set ``LLM_COURSE_RECORD=1``)."""
    return os.environ.get(RECORD_ENV, "") == "1"


def _emit(rec: dict) -> None:
    from IPython.display import display

    display({MIME: rec, "text/plain": f"[{rec['role']}: {rec['key']}]"}, raw=True)


def record(key: str, value: Any, *, atol: float | None = None, rtol: float | None = None, dtype: bool = True,
           pvalue: float | None = None) -> None:
    """Hand ``value`` (what the student's code returned on a hidden input) to the grader under ``key``.

    The comparison is set by the reference run (the same call in the instructor's notebook):
    exact by default (type, dtype, shape and every element); ``atol`` / ``rtol`` for floating
    values (``|got - ref| <= atol + rtol * |ref|``, NaN and inf where the reference has them);
    ``dtype=False`` to compare values only; ``pvalue``: ``value`` are counts of draws and the
    reference (set with :func:`expect`) their probabilities, accepted when a chi-square
    goodness-of-fit test gives a p-value of at least ``pvalue``.
    """
    if not isinstance(key, str) or not key or len(key) > MAX_KEY:
        raise RecordError(f"record() needs a non-empty string key of at most {MAX_KEY} characters")
    rec = {"role": "record", "key": key, "spec": _spec(atol, rtol, dtype, pvalue), "value": encode(value)}
    _recorded[key] = rec
    if recording():
        _emit(rec)


def expect(key: str, value: Any, *, atol: float | None = None, rtol: float | None = None, dtype: bool = True,
           pvalue: float | None = None) -> None:
    """Reference blocks only: the reference of ``key`` is ``value`` (computed independently).

    Raises ``AssertionError`` when the value this kernel recorded last under ``key`` (the
    solution's, in the instructor's notebook) does not match it, so executing the solutions checks
    them against the library or closed form the reference comes from.
    """
    prior = _recorded.get(key)
    if prior is None:
        raise AssertionError(f"expect({key!r}) comes before any record({key!r})")
    rec = {"role": "expect", "key": key, "spec": _spec(atol, rtol, dtype, pvalue), "value": encode(value)}
    problem = compare(decode(prior["value"]), decode(rec["value"]), rec["spec"])
    if problem:
        raise AssertionError(f"{key}: the recorded value does not match the reference: {problem}")
    if recording():
        _emit(rec)


def outcome(fn: Any, *args: Any, **kwargs: Any) -> str:
    """``"raises ValueError"`` (the nearest built-in exception class) or ``"returns"``: for contracts that say "raises"."""
    try:
        fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001  (what was raised is the record)
        for cls in type(exc).__mro__:
            if cls.__module__ == "builtins":
                return f"raises {cls.__name__}"
        return "raises Exception"  # pragma: no cover
    return "returns"


# --- decoding and comparison (in the grader) ---------------------------------------------------

def _need(cond: bool, what: str) -> None:
    if not cond:
        raise RecordError(what)


def decode(obj: Any, _depth: int = 0) -> Any:
    """Parse an encoded value strictly into a tagged tuple ``(kind, payload)``; raises RecordError."""
    _need(_depth <= MAX_DEPTH, "nested too deeply")
    _need(type(obj) is dict and type(obj.get("t")) is str, "not an encoded value")
    t = obj["t"]
    if t in ("tensor", "ndarray", "npscalar"):
        _need(set(obj) == {"t", "dtype", "shape", "b64"}, f"unexpected fields {sorted(obj)}")
        dt, shape, b64 = obj["dtype"], obj["shape"], obj["b64"]
        _need(type(dt) is str and dt in DTYPES, f"dtype {dt!r} not allowed")
        _need(type(shape) is list and len(shape) <= 32 and all(type(n) is int and 0 <= n for n in shape), "bad shape")
        _need(t != "npscalar" or shape == [], "a NumPy scalar has shape ()")
        _need(type(b64) is str and len(b64) <= MAX_BYTES * 4 // 3 + 8, "bad or oversized data")
        try:
            raw = base64.b64decode(b64.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError) as exc:
            raise RecordError(f"bad base64 data: {exc}") from None
        store = np.dtype("<u2") if dt == "bfloat16" else np.dtype(dt).newbyteorder("<")
        n = math.prod(shape)
        _need(len(raw) == n * store.itemsize, f"{len(raw)} bytes for shape {shape} of {dt}")
        arr = np.frombuffer(raw, dtype=store).reshape(shape)
        if dt == "bfloat16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        return (t, dt, arr.astype(arr.dtype.newbyteorder("=")))
    if t == "none":
        _need(set(obj) == {"t"}, "bad none")
        return ("none", None)
    _need(set(obj) == {"t", "v"}, f"unexpected fields {sorted(obj)}")
    v = obj["v"]
    if t == "bool":
        _need(type(v) is bool, "bad bool")
        return ("bool", v)
    if t == "int":
        _need(type(v) is str and len(v) <= 4300 and v.lstrip("-").isdigit() and v.isascii(), "bad int")
        return ("int", int(v))
    if t == "float":
        _need(type(v) is str and len(v) <= 40, "bad float")
        try:
            return ("float", float.fromhex(v))
        except (ValueError, OverflowError):
            raise RecordError("bad float") from None
    if t == "str":
        _need(type(v) is str and len(v) <= MAX_BYTES, "bad str")
        return ("str", v)
    if t in ("list", "tuple"):
        _need(type(v) is list and len(v) <= MAX_ITEMS, f"bad {t}")
        return (t, [decode(x, _depth + 1) for x in v])
    if t == "dict":
        _need(type(v) is list and len(v) <= MAX_ITEMS, "bad dict")
        _need(all(type(p) is list and len(p) == 2 and type(p[0]) is str for p in v), "bad dict item")
        keys = [p[0] for p in v]
        _need(len(set(keys)) == len(keys), "duplicate dict key")
        return ("dict", [(k, decode(x, _depth + 1)) for k, x in v])
    raise RecordError(f"unknown kind {t!r}")


def parse_spec(obj: Any) -> dict:
    """A comparison spec, parsed strictly."""
    _need(type(obj) is dict and set(obj) <= set(SPEC_KEYS) and "dtype" in obj, "bad spec")
    _need(type(obj["dtype"]) is bool, "bad spec dtype")
    for k in ("atol", "rtol", "pvalue"):
        if k in obj:
            _need(type(obj[k]) in (int, float) and math.isfinite(obj[k]) and obj[k] >= 0, f"bad spec {k}")
    return dict(obj)


def parse_record(obj: Any) -> tuple[str, str, dict, Any]:
    """``(role, key, spec, decoded value)`` of one record output; raises RecordError."""
    _need(type(obj) is dict and set(obj) == {"role", "key", "spec", "value"}, "not a record")
    _need(obj["role"] in ("record", "expect") and type(obj["key"]) is str and 0 < len(obj["key"]) <= MAX_KEY,
          "bad role or key")
    return obj["role"], obj["key"], parse_spec(obj["spec"]), decode(obj["value"])


def describe(v: Any) -> str:
    """Short description of a decoded value (for messages)."""
    kind = v[0]
    if kind in ("tensor", "ndarray", "npscalar"):
        return f"{kind} of dtype {v[1]} and shape {tuple(v[2].shape)}"
    if kind in ("list", "tuple", "dict"):
        return f"{kind} of {len(v[1])} items"
    text = repr(v[1])
    return f"{kind} {text if len(text) <= 60 else text[:57] + '...'}"


def _show(x: Any) -> str:
    """An element in its own precision, shortest form (2.1, not 2.0999999046325684)."""
    if isinstance(x, np.floating):
        with np.errstate(over="ignore", invalid="ignore"):
            small = bool(np.isfinite(x)) and abs(float(x)) < 1e16
        return np.format_float_positional(x, unique=True, trim="-") if small else repr(float(x))
    if isinstance(x, np.generic):
        return repr(x.item())
    return repr(x)


def _fmt_index(idx: tuple) -> str:
    return "[" + ", ".join(str(int(i)) for i in idx) + "]"


def _compare_arrays(got: np.ndarray, ref: np.ndarray, spec: dict) -> str | None:
    if got.shape != ref.shape:
        return f"shape {tuple(got.shape)}, expected {tuple(ref.shape)}"
    if "pvalue" in spec:
        return _chi_square(got, ref, spec["pvalue"])
    close = "atol" in spec or "rtol" in spec
    if close and (np.issubdtype(got.dtype, np.number) or got.dtype == bool):
        g = got.astype(np.complex128 if np.iscomplexobj(got) or np.iscomplexobj(ref) else np.float64)
        r = ref.astype(g.dtype)
        atol, rtol = spec.get("atol", 0.0), spec.get("rtol", 0.0)
        with np.errstate(invalid="ignore", over="ignore"):
            same_special = (np.isnan(g) & np.isnan(r)) | (np.isinf(g) & (g == r))
            ok = same_special | (np.isfinite(g) & np.isfinite(r) & (np.abs(g - r) <= atol + rtol * np.abs(r)))
        if ok.all():
            return None
        bad = np.argwhere(~ok)
        i = tuple(bad[0])
        diff = np.abs(g - r)
        worst = float(np.nanmax(np.where(np.isfinite(diff), diff, np.inf)))
        return (f"{len(bad)} of {g.size} elements differ; first at {_fmt_index(i)}: got {_show(got[i])}, expected {_show(ref[i])} "
                f"(largest difference {worst:.3g}; tolerance atol={atol:g}, rtol={rtol:g})")
    with np.errstate(invalid="ignore"):
        eq = (got == ref) | ((got != got) & (ref != ref))
    if np.all(eq):
        return None
    bad = np.argwhere(~np.asarray(eq)) if got.ndim else [()]
    i = tuple(bad[0])
    return (f"{int(np.size(eq) - np.count_nonzero(eq))} of {got.size} elements differ; first at {_fmt_index(i)}: "
            f"got {_show(got[i])}, expected {_show(ref[i])}")


def _chi_square(counts: np.ndarray, probs: np.ndarray, alpha: float) -> str | None:
    if not np.issubdtype(counts.dtype, np.integer) or (counts < 0).any():
        return "expected non-negative integer counts"
    p = probs.astype(np.float64).ravel()
    c = counts.astype(np.float64).ravel()
    if (p < 0).any() or not math.isclose(p.sum(), 1.0, abs_tol=1e-6):
        return "the reference is not a probability vector"
    n = c.sum()
    if n == 0:
        return "no draws counted"
    if (c[p == 0] > 0).any():
        i = int(np.argwhere((p == 0) & (c > 0))[0][0])
        return f"{int(c[i])} draws of outcome {i}, whose probability is 0"
    from scipy.stats import chi2

    keep = p > 0
    e = n * p[keep]
    stat = float(((c[keep] - e) ** 2 / e).sum())
    dof = max(int(keep.sum()) - 1, 1)
    pv = float(chi2.sf(stat, dof))
    if pv >= alpha:
        return None
    worst = int(np.argmax(np.abs(c[keep] - e) / np.sqrt(e)))
    idx = int(np.flatnonzero(keep)[worst])
    return (f"the counts do not follow the expected probabilities (chi-square {stat:.1f}, {dof} degrees of freedom, "
            f"p = {pv:.2g} < {alpha:g}); largest gap at outcome {idx}: {int(c[idx])} draws, expected {n * p[idx]:.1f}")


def compare(got: Any, ref: Any, spec: dict, _path: str = "") -> str | None:
    """None when the decoded value ``got`` matches ``ref`` under ``spec``, else what differs."""
    where = f" at {_path}" if _path else ""
    gk, rk = got[0], ref[0]
    if rk in ("tensor", "ndarray", "npscalar") and "pvalue" in spec and gk == rk:
        return _prefix(where, _compare_arrays(got[2], ref[2], spec))
    if gk != rk:
        return f"got a {describe(got)}{where}, expected a {describe(ref)}"
    if gk in ("tensor", "ndarray", "npscalar"):
        if spec.get("dtype", True) and got[1] != ref[1]:
            return f"dtype {got[1]}{where}, expected {ref[1]}"
        return _prefix(where, _compare_arrays(got[2], ref[2], spec))
    if gk == "float":
        g, r = got[1], ref[1]
        if "atol" in spec or "rtol" in spec:
            ok = (math.isnan(g) and math.isnan(r)) or (g == r) or (
                math.isfinite(g) and math.isfinite(r) and abs(g - r) <= spec.get("atol", 0.0) + spec.get("rtol", 0.0) * abs(r))
        else:
            ok = g == r or (math.isnan(g) and math.isnan(r))
        return None if ok else f"got {g!r}{where}, expected {r!r}"
    if gk in ("list", "tuple"):
        if len(got[1]) != len(ref[1]):
            return f"{len(got[1])} items{where}, expected {len(ref[1])}"
        for i, (g, r) in enumerate(zip(got[1], ref[1])):
            problem = compare(g, r, spec, f"{_path}[{i}]")
            if problem:
                return problem
        return None
    if gk == "dict":
        gkeys, rkeys = [k for k, _ in got[1]], [k for k, _ in ref[1]]
        if sorted(gkeys) != sorted(rkeys):
            return f"keys {sorted(gkeys)}{where}, expected {sorted(rkeys)}"
        rmap = dict(ref[1])
        for k, g in got[1]:
            problem = compare(g, rmap[k], spec, f"{_path}[{k!r}]")
            if problem:
                return problem
        return None
    return None if got[1] == ref[1] else f"got {got[1]!r}{where}, expected {ref[1]!r}"


def _prefix(where: str, problem: str | None) -> str | None:
    return None if problem is None else (f"{problem.rstrip('.')}{where}" if where else problem)


_OUTCOME = ("returns", "raises ")


def summarize(got: Any, ref: Any, spec: dict, _t: Callable[[str], str] = str) -> str:
    """What kind of thing differs between ``got`` and ``ref``, for a student's feedback.

    Names the kind of difference (type, dtype, shape, length, keys, raises vs returns, values
    beyond the tolerance) and, at most, the student's own type, dtype, shape or exception class:
    never a reference value, nor a value computed from the hidden inputs. Call it only where
    :func:`compare` found a problem. ``_t`` translates the English templates (the autograder passes
    the submission's language, ``course_tools/grading/i18n.py``).
    """
    gk, rk = got[0], ref[0]
    arrays = ("tensor", "ndarray", "npscalar")
    if rk in arrays and "pvalue" in spec and gk == rk:
        if got[2].shape != ref[2].shape:
            return _t("shape differs (yours: {shape})").format(shape=tuple(got[2].shape))
        return _t("the counts of draws do not follow the expected probabilities (chi-square test)")
    if gk != rk:
        return _t("type differs (yours: a {kind})").format(kind=gk)
    if gk in arrays:
        if spec.get("dtype", True) and got[1] != ref[1]:
            return _t("dtype differs (yours: {dtype})").format(dtype=got[1])
        if got[2].shape != ref[2].shape:
            return _t("shape differs (yours: {shape})").format(shape=tuple(got[2].shape))
        n = int(got[2].size)
        problem = _compare_arrays(got[2], ref[2], spec) or ""
        count = problem.split(" of ", 1)[0] if " of " in problem else _t("some")
        if "atol" in spec or "rtol" in spec:
            return _t("values differ beyond the tolerance ({count} of {n} elements)").format(count=count, n=n)
        return _t("values differ ({count} of {n} elements)").format(count=count, n=n)
    if gk == "float":
        return _t("value differs beyond the tolerance") if ("atol" in spec or "rtol" in spec) else _t("value differs")
    if gk in ("list", "tuple"):
        if len(got[1]) != len(ref[1]):
            return _t("length differs (yours: {n} items)").format(n=len(got[1]))
        for i, (g, r) in enumerate(zip(got[1], ref[1])):
            if compare(g, r, spec):
                return _t("item [{index}]: {problem}").format(index=i, problem=summarize(g, r, spec, _t))
        return _t("items differ")
    if gk == "dict":
        if sorted(k for k, _ in got[1]) != sorted(k for k, _ in ref[1]):
            return _t("keys differ")
        rmap = dict(ref[1])
        for k, g in got[1]:
            if compare(g, rmap[k], spec):
                return _t("item [{index}]: {problem}").format(index=repr(k), problem=summarize(g, rmap[k], spec, _t))
        return _t("items differ")
    if gk == "str" and (got[1].startswith(_OUTCOME) or ref[1].startswith(_OUTCOME)):
        mine, theirs = got[1], ref[1]
        if mine == "returns":
            return _t("raises vs returns: your function returns where the check expects an exception")
        if theirs == "returns":
            return _t("raises vs returns: your function {outcome} where the check expects it to return").format(outcome=mine)
        return _t("raises vs returns: your function {outcome}, not the exception the check expects").format(outcome=mine)
    return _t("value differs")


def verify_cell_detailed(student: list[Any], reference: list[Any],
                         _t: Callable[[str], str] = str) -> tuple[list[tuple[str, str]], int]:
    """:func:`verify_cell`, with each problem in two forms: ``(full, for_student)``.

    ``full`` (the instructor's: autograded notebook, Formgrader) names both values, in English;
    ``for_student`` (the feedback) names the check and the kind of difference only
    (:func:`summarize`): no reference value and nothing computed from a hidden input. ``_t``
    translates ``for_student`` (the submission's language; record keys stay as they are).
    """
    ref: dict[str, tuple[dict, Any]] = {}
    order: list[str] = []
    for obj in reference:
        role, key, spec, value = parse_record(obj)
        if role == "record":
            if key in ref:
                raise RecordError(f"the reference records {key!r} twice")
            ref[key] = (spec, value)
            order.append(key)
        else:
            if key not in ref:
                raise RecordError(f"the reference expects {key!r} before recording it")
            ref[key] = (spec, value)
    problems: list[tuple[str, str]] = []
    got: dict[str, Any] = {}
    for obj in student:
        try:
            role, key, _spec_ignored, value = parse_record(obj)
        except RecordError as exc:
            problems.append((f"a malformed record ({exc})", _t("a malformed record")))
            continue
        if role != "record":
            msg = f"{key}: a record of role {role!r} (only the reference run sets references)"
            problems.append((msg, _t("{key}: a record of role {role} (only the reference run sets references)").format(
                key=key, role=repr(role))))
        elif key in got:
            problems.append((f"{key}: recorded twice", _t("{key}: recorded twice").format(key=key)))
        elif key not in ref:
            problems.append((f"{key}: not a value this test records",
                             _t("{key}: not a value this test records").format(key=key)))
        else:
            got[key] = value
    missing = [k for k in order if k not in got]
    if missing:
        msg = (f"{len(missing)} of {len(order)} hidden values never recorded (the cell stopped before "
               f"{missing[0]!r}: see the error above, if any)")
        problems.append((msg, _t("{missing} of {total} hidden values never recorded (the cell stopped before "
                                 "{first}: see the error above, if any)").format(
            missing=len(missing), total=len(order), first=repr(missing[0]))))
    for key in order:
        if key in got:
            spec, value = ref[key]
            problem = compare(got[key], value, spec)
            if problem:
                problems.append((f"{key}: {problem}", f"{key}: {summarize(got[key], value, spec, _t)}"))
    return problems, len(order)


def verify_cell(student: list[Any], reference: list[Any]) -> tuple[list[str], int]:
    """Compare the record outputs of one test cell with the reference run's (raw JSON payloads).

    Returns ``(problems, n_checked)``; no problems means the cell passes. Strict: a malformed
    record, a record of a role other than ``record``, a key recorded twice, a key missing or a key
    the reference does not have is a problem.
    """
    problems, n = verify_cell_detailed(student, reference)
    return [full for full, _ in problems], n
