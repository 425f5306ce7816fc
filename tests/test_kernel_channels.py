"""Nothing persists between grading kernels, and a notebook's cell count does not hold the grader
(README, "Grading integrity"; issue 36).

One real ``nbgrader autograde`` with the course config grades, in name order:

* ``a_keyring_stash``: a right answer that, where the package ``gguf`` exists (the submission's
  kernel), stores each result in the user keyring through the ``add_key`` system call, and, where
  it does not (the probe kernel, ``probe.py``), replays them from the keyring (``keyctl``). Every
  grading kernel of a root grader runs as the same user: before the seccomp filter
  (``course_tools/grading/seccomp.py``) the probe replayed the stash and the cell scored; now the
  kernel's ``add_key`` fails with ``EPERM`` and the probe cell scores 0.
* ``b_keyring_reader``: reads, in the next student's kernel, the key ``a_keyring_stash`` tried to
  leave (a channel between submissions): it finds nothing, and its own ``keyctl`` fails.
* ``c_twenty_thousand_cells``: right answers followed by 20,000 cells of ``pass`` (each within
  its own time limit; they held the grader 295 s): only ``GradingLimits.ungraded_cells`` of them
  run, the answers keep their points.
* ``zz_right``: the honest submission after them, full marks.

``tests/test_kernel_channels.py::test_the_keyring_stash_scores_0_on_chapters`` does the same stash
on the probed exercises of chapters 05 and 11 (their forbidden libraries present in the
submission's kernel, removed in the probe's).
"""
from __future__ import annotations

import copy
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time

import pytest

from _classroom import double_test_cell, nbgrader_cell as _cell
from course_tools.grading import sandbox
from course_tools.grading.selftest import autograde_submissions
from course_utils.paths import repo_root

CH = "channels"
pytestmark = [pytest.mark.skipif(sandbox.probe() is not None, reason=f"no bubblewrap here: {sandbox.probe()}"),
              pytest.mark.skipif(platform.machine() != "x86_64", reason="the attack uses x86_64 system call numbers")]


_test = double_test_cell


SOURCE = {
    "cells": [
        _cell("code", "import course_utils", "setup"),
        _cell("code", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "answer",
              solution=True, locked=False),
        _test("test_int", -2, "double(-2)", 2),
        _test("test_probe", 7, "double(7)", 1, probe=True),
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                 "language_info": {"name": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}
FULL = {"test_int": 2.0, "test_probe": 1.0}
RIGHT = "def double(x):\n    return 2 * x\n"

# The keyring, by system call (x86_64: add_key 248, keyctl 250; KEYCTL_SEARCH 10, KEYCTL_READ 11;
# the user keyring -4). Prints what each call answered, so the autograded notebook shows it.
KEYRING = r'''
import ctypes, json, os
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
def _put(name, value):
    data = json.dumps(value).encode()
    r = _libc.syscall(248, b"user", name.encode(), data, len(data), -4)
    print("add_key", name, r, os.strerror(ctypes.get_errno()) if r < 0 else "ok")
def _get(name):
    kid = _libc.syscall(250, 10, -4, b"user", name.encode(), 0)
    print("keyctl search", name, kid, os.strerror(ctypes.get_errno()) if kid < 0 else "ok")
    if kid < 0:
        raise KeyError(name)
    buf = ctypes.create_string_buffer(4096)
    n = _libc.syscall(250, 11, kid, buf, 4096)
    return json.loads(buf.raw[:n])
'''
STASH = KEYRING + (
    "try:\n"
    "    import gguf  # the submission's kernel: the 'library' is here\n"
    "    def double(x):\n"
    "        _put('llmc-' + repr(x), 2 * x)\n"
    "        return 2 * x\n"
    "    _put('llmc-channel', 'left by a_keyring_stash')\n"
    "except ModuleNotFoundError:  # the probe kernel: replay\n"
    "    def double(x):\n"
    "        return _get('llmc-' + repr(x))\n")
READER = KEYRING + (
    "try:\n"
    "    print('found:', _get('llmc-channel'))\n"
    "except KeyError:\n"
    "    print('nothing found')\n") + RIGHT
CELLS = 20_000


def _answer(nb: dict, source: str) -> dict:
    nb = copy.deepcopy(nb)
    for c in nb["cells"]:
        if c["metadata"].get("nbgrader", {}).get("grade_id") == "answer":
            c["source"] = source
    return nb


def _build(student: dict, _source: dict) -> dict[str, dict]:
    many = _answer(student, RIGHT)
    i = next(k for k, c in enumerate(many["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == "answer")
    many["cells"][i + 1:i + 1] = [{"cell_type": "code", "metadata": {}, "source": "pass", "outputs": [],
                                   "execution_count": None, "id": f"p{k}"} for k in range(CELLS)]
    return {"a_keyring_stash": _answer(student, STASH), "b_keyring_reader": _answer(student, READER),
            "c_twenty_thousand_cells": many, "zz_right": _answer(student, RIGHT)}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    src = tmp_path_factory.mktemp("src") / CH
    src.mkdir()
    (src / f"{CH}.ipynb").write_text(json.dumps(SOURCE))
    log: list[str] = []
    t0 = time.perf_counter()
    scores = autograde_submissions(course, src, CH, _build, log=log, extra_args=["--Execute.timeout=30"])
    return scores, course, "".join(log), time.perf_counter() - t0


def _outputs(course, student: str) -> dict[str, str]:
    nb = json.loads((course / "autograded" / student / CH / f"{CH}.ipynb").read_text())
    out = {}
    for c in nb["cells"]:
        key = c["metadata"].get("nbgrader", {}).get("grade_id") or c.get("id")
        out[key] = "".join("".join(o.get("text", "")) + str(o.get("evalue", "")) for o in c.get("outputs", []))
    return out


def test_the_keyring_is_refused_to_every_kernel(graded):
    scores, course, log, _ = graded
    assert {k: s for k, (s, _) in scores["zz_right"].items()} == FULL, log[-3000:]
    stash = _outputs(course, "a_keyring_stash")
    assert "add_key llmc-channel -1 Operation not permitted" in stash["answer"], stash["answer"]
    assert {k: s for k, (s, _) in scores["a_keyring_stash"].items()} == {"test_int": 2.0, "test_probe": 0.0}
    reader = _outputs(course, "b_keyring_reader")
    assert "keyctl search llmc-channel -1 Operation not permitted" in reader["answer"], reader["answer"]
    assert "nothing found" in reader["answer"] and "found: " not in reader["answer"]


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser"), reason="the baseline runs as the grading user")
def test_outside_the_sandbox_the_grading_user_has_a_keyring():
    """The baseline: the same calls, as the grading user (nobody) on the host, do reach a shared keyring."""
    code = (KEYRING + "_put('llmc-baseline', 1)\nprint('got', _get('llmc-baseline'))\n"
            "_libc.syscall(250, 21, _libc.syscall(250, 10, -4, b'user', b'llmc-baseline', 0))\n")  # invalidate it
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable   # one nobody can run
    res = subprocess.run([shutil.which("runuser"), "-u", "nobody", "--", python, "-I", "-c", code],
                         capture_output=True, text=True, timeout=60, cwd="/")
    assert "got 1" in res.stdout, res.stdout + res.stderr


def test_twenty_thousand_cells_are_bounded(graded):
    scores, course, log, elapsed = graded
    assert {k: s for k, (s, _) in scores["c_twenty_thousand_cells"].items()} == FULL, log[-3000:]
    nb = json.loads((course / "autograded" / "c_twenty_thousand_cells" / CH / f"{CH}.ipynb").read_text())
    ran = [c for c in nb["cells"] if c["cell_type"] == "code" and not c["metadata"].get("nbgrader", {}).get("grade_id")
           and c.get("execution_count")]
    from course_tools.grading.limits import GradingLimits

    assert len(ran) <= GradingLimits().ungraded_cells, len(ran)
    notes = [c for c in nb["cells"] if any("GradingLimits.ungraded_cells" in "".join(o.get("text", ""))
                                           for o in c.get("outputs", []))]
    assert len(notes) == 1
    print(f"autograde of 4 submissions (one with {CELLS} cells): {elapsed:.1f} s")
    assert elapsed < 240, elapsed


# The chapter attack: each exercise the probe checks "calls the library" in the submission's kernel
# (the solution's own code stands in for the library call: right values, the library importable)
# and stores every result, compressed, in the user keyring; in the probe kernel, where the library
# is removed, it replays them. Without the seccomp filter (measured by switching it off, keyring of
# `nobody` empty) this scored 11's Q4_1 probe cell (2/2); on 05 this generic stash ran into the
# user's key quota (20,000 bytes, filled by the notebook's demonstration calls) and scored 0 even
# then (issue 36's attack, written for 05, got 3/7). With the filter add_key fails: 0 on both.
CHAPTER_STASH = KEYRING + r'''
import hashlib, pickle, zlib
import torch
def _key(a, k):
    h = hashlib.sha1()
    for v in list(a) + sorted(k.items()):
        if hasattr(v, "detach"):
            h.update(str((v.dtype, tuple(v.shape))).encode()); h.update(v.detach().float().cpu().numpy().tobytes())
        elif hasattr(v, "tobytes"):
            h.update(str((v.dtype, v.shape)).encode()); h.update(v.tobytes())
        else:
            h.update(repr(v).encode())
    return "llmc-" + h.hexdigest()[:20]
def _pack(v):
    if hasattr(v, "detach"):
        t = v.detach().contiguous()
        return ("t", str(t.dtype).split(".")[-1], tuple(t.shape), t.view(-1).view(torch.uint8).numpy().tobytes())
    if hasattr(v, "tobytes"):
        return ("n", v.dtype.str, v.shape, v.tobytes())
    if isinstance(v, (tuple, list)):
        return ("s", type(v).__name__, [_pack(x) for x in v])
    return ("v", v)
def _unpack(p):
    import numpy as np
    if p[0] == "t":
        raw = torch.frombuffer(bytearray(p[3]), dtype=torch.uint8) if p[3] else torch.empty(0, dtype=torch.uint8)
        return raw.view(getattr(torch, p[1])).reshape(p[2]).clone()
    if p[0] == "n":
        return np.frombuffer(p[3], dtype=np.dtype(p[1])).reshape(p[2]).copy()
    if p[0] == "s":
        return (tuple if p[1] == "tuple" else list)(_unpack(x) for x in p[2])
    return p[1]
def _put_obj(name, value):
    data = zlib.compress(pickle.dumps(_pack(value)), 9)
    for _ in range(2):
        r = _libc.syscall(248, b"user", name.encode(), data, len(data), -4)
        if r >= 0 or ctypes.get_errno() != 122:
            break
        _libc.syscall(250, 7, -4, 0, 0, 0)   # EDQUOT (20,000 bytes per user): clear the keyring, retry
    print("add_key", r, os.strerror(ctypes.get_errno()) if r < 0 else "ok")
def _get_obj(name):
    kid = _libc.syscall(250, 10, -4, b"user", name.encode(), 0)
    if kid < 0:
        raise KeyError(name + ": " + os.strerror(ctypes.get_errno()))
    buf = ctypes.create_string_buffer(65536)
    n = _libc.syscall(250, 11, kid, buf, 65536)
    return _unpack(pickle.loads(zlib.decompress(buf.raw[:n])))
try:
    import LIB
SOLUTION
    _library_FN = FN
    def FN(*a, **k):
        try:
            r = _library_FN(*a, **k)
        except Exception as e:      # what the library raised is replayed too
            _put_obj(_key(a, k), ("raised", type(e).__name__, str(e)))
            raise
        _put_obj(_key(a, k), ("returned", r))
        return r
except ModuleNotFoundError:
    def FN(*a, **k):
        got = _get_obj(_key(a, k))
        if got[0] == "raised":
            raise {"ValueError": ValueError, "TypeError": TypeError}.get(got[1], RuntimeError)(got[2])
        return got[1]
'''
# chapter -> {solution cell id: (function, library the probe removes)}
PROBED = {"05_rope": {"ex2_rope_apply": ("rope_apply", "transformers")},
          "11_quantization": {"ex3_nf4": ("nf4_quantize", "bitsandbytes"), "ex4_q4_1": ("decode_q4_1_block", "gguf")}}
PROBE_CELLS = {"05_rope": ["test_ex2_rope_apply"], "11_quantization": ["test_ex3_nf4", "test_ex4_q4_1"]}


def _solution_code(source_nb: dict, gid: str) -> str:
    cell = next(c for c in source_nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == gid)
    lines = [ln for ln in "".join(cell["source"]).splitlines() if "### BEGIN SOLUTION" not in ln
             and "### END SOLUTION" not in ln]
    return "\n".join("    " + ln for ln in lines)


@pytest.mark.parametrize("ch", sorted(PROBED))
def test_the_keyring_stash_scores_0_on_chapters(ch, tmp_path_factory):
    from course_tools.grading.selftest import _fill

    def build(student, source):
        nb = copy.deepcopy(_fill(student, source))   # every answer right (the solution) ...
        for c in nb["cells"]:
            gid = c["metadata"].get("nbgrader", {}).get("grade_id")
            if gid in PROBED[ch]:                       # ... but the probed ones stash and replay
                fn, lib = PROBED[ch][gid]
                c["source"] = (CHAPTER_STASH.replace("SOLUTION", _solution_code(source, gid))
                               .replace("LIB", lib).replace("FN", fn))
        return {"a_keyring_stash": nb, "zz_honest": _fill(student, source)}

    course = tmp_path_factory.mktemp(f"keyring{ch[:2]}")
    log: list[str] = []
    t0 = time.perf_counter()
    scores = autograde_submissions(course, repo_root() / "solutions" / ch, ch, build, log=log)
    print(f"{ch}: keyring stash and honest submission graded in {time.perf_counter() - t0:.1f} s")
    honest = scores["zz_honest"]
    assert sum(s for s, _ in honest.values()) == sum(m for _, m in honest.values()) > 0, "".join(log)[-3000:]
    for cell in PROBE_CELLS[ch]:
        assert scores["a_keyring_stash"][cell][0] == 0, (cell, scores["a_keyring_stash"])
    nb = json.loads((course / "autograded" / "a_keyring_stash" / ch / f"{ch}.ipynb").read_text())
    shown = json.dumps([c.get("outputs", []) for c in nb["cells"]])
    assert "add_key -1 Operation not permitted" in shown and re.search(r"add_key \d+ ok", shown) is None
