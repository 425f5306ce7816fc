"""Issue 45: nothing of the hidden tests, and nothing of the grader's environment, reaches feedback.

A student's cell can print what the kernel keeps of a hidden region that has run: IPython's
``In``/``_ih``/``Out``, ``linecache``, the caller's frame, or the hidden inputs its function kept
in a global; and, before any hidden region ran, the kernel's environment. One real ``nbgrader
autograde`` (course config, sandbox) of a small ``double`` assignment with distinctive hidden
inputs grades an attacking submission, then an honest one, with a secret token and ``SLURM_*``
variables in the grader's environment; one ``nbgrader generate_feedback`` follows:

* the attacker's feedback HTML holds no hidden-region line (normalised: letters and digits only,
  so ``repr`` escapes, HTML entities and tags do not hide one), no hidden input, no reference
  value, no secret; its environment print (before the hidden tests) is shown, without the secrets;
* the autograded notebook (the instructor's) keeps what the attack printed: the attack worked in
  the kernel, and the feedback is what withholds it; no secret is anywhere in it;
* the honest student graded after it keeps full marks, and its feedback shows its own output
  from before the first hidden region, and a note where an output after it is withheld.

Also: the reference run and the probe kernel (``execute_sandboxed``, packages removed) see only
the allow-listed environment; and the normalisation recognises a hidden line in its encoded forms.
"""
from __future__ import annotations

import copy
import html
import json
import os
import re
import uuid
from pathlib import Path

import pytest

from _classroom import SOURCE, double_test_cell
from course_tools.grading.feedback import HIDDEN_REGION
from course_tools.grading.selftest import autograde_submissions, generate_feedback

CH = "leak01"
HIDDEN_INT = 918273645            # hidden inputs: distinctive, to be searched for
HIDDEN_WORD = "q7Zk-hidden-word"
SECRET = f"s3cr3t-{uuid.uuid4().hex}"
SLURM_ID = f"slurm-{uuid.uuid4().hex[:12]}"

# The attacker: `double` keeps its inputs and the caller's source line (the hidden test's), and
# prints them while called; a stdout wrapper holds back the autograder's HIDDEN_START line (so
# what the hidden part printed would arrive "before" it); a display from before the hidden tests
# is updated after them; later cells print In, _ih, Out, linecache, globals and the kept inputs.
ATTACK_ANSWER = """import inspect
STASH = []
def double(x):
    STASH.append((x, inspect.stack()[1].code_context))
    print('double got', repr(x))
    return 2 * x
"""
BEFORE = [
    "import os\nprint(dict(os.environ))\n"
    "print(os.environ.get('LLM_COURSE_TEST_SECRET_TOKEN'), os.environ.get('SLURM_JOB_ID'))",
    "class _Delay:\n"
    "    def __init__(self, inner):\n        self.inner, self.held = inner, ''\n"
    "    def write(self, text):\n"
    "        if 'hidden checks start' in text:\n            self.held += text\n            return len(text)\n"
    "        return self.inner.write(text)\n"
    "    def __getattr__(self, name):\n        return getattr(self.inner, name)\n"
    "setattr(__import__('s' + 'ys'), 'std' + 'out', _Delay(__import__('s' + 'ys').stdout))",
    "from IPython.display import display\nSLOT = display('a display to update later', display_id=True)",
]
AFTER = [
    "print(In)\nprint(repr(_ih))\nprint(Out)\nprint(STASH)",
    "import linecache\nprint({k: v[2] for k, v in linecache.cache.items() if isinstance(v, tuple) and len(v) > 2})",
    "print(repr(globals().get('_ih')))\nimport html as _h\nfrom IPython.display import HTML\n"
    "display(HTML('<pre>' + _h.escape(repr(In)) + '</pre>'))\nprint(__import__('json').dumps(In))",
    "SLOT.update(repr(STASH) + repr(In))\nprint(STASH[-1])\nprint(dict(__import__('os').environ))",
]
_ESC = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4}))")


def normalise(text: str) -> str:
    """Letters and digits only, case-folded, after undoing HTML entities and ``\\x``/``\\u`` escapes
    (the test's own version: a line of the source in ``repr``, JSON or HTML gives the same string)."""
    for _ in range(2):
        text = _ESC.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), html.unescape(text))
    return re.sub(r"[\W_]+", "", text).casefold()


# computed, so that the text is in an output and not in the cell's source (which feedback shows)
HONEST_BEFORE = "print('honest output before the hidden tests', 4240 + 2)"
HONEST_AFTER = "print('honest output after the hidden tests', 5350 + 3)"


def _source() -> dict:
    """The small ``double`` assignment (tests/_classroom.py) with distinctive hidden inputs."""
    nb = copy.deepcopy(SOURCE)
    cells = nb["cells"]
    ids = [c["metadata"]["nbgrader"]["grade_id"] for c in cells]
    cells[ids.index("test_int")] = double_test_cell("test_int", HIDDEN_INT, "double on a hidden integer", 2)
    cells[ids.index("test_str")] = double_test_cell("test_str", repr(HIDDEN_WORD), "double on a hidden word", 1)
    return nb


def _code(source: str) -> dict:
    return {"cell_type": "code", "metadata": {}, "source": source, "outputs": [], "execution_count": None,
            "id": uuid.uuid4().hex[:8]}


def _submission(student: dict, answer: str, before: list[str], after_first: list[str], at_end: list[str]) -> dict:
    """The released notebook answered, with cells added before the first test cell, after it and at the end."""
    nb = copy.deepcopy(student)
    out = []
    for c in nb["cells"]:
        gid = c["metadata"].get("nbgrader", {}).get("grade_id")
        if gid == "answer":
            c["source"] = answer
        if gid == "test_int":
            out += [_code(s) for s in before]
        out.append(c)
        if gid == "test_int":
            out += [_code(s) for s in after_first]
    nb["cells"] = out + [_code(s) for s in at_end]
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("LLM_COURSE_TEST_SECRET_TOKEN", SECRET)   # the grader's environment (an instructor's shell, a job)
    mp.setenv("SLURM_JOB_ID", SLURM_ID)
    mp.setenv("SLURM_JOB_ACCOUNT", SECRET + "-account")
    try:
        src = tmp_path_factory.mktemp("src")
        (src / f"{CH}.ipynb").write_text(json.dumps(_source(), indent=1))
        course = tmp_path_factory.mktemp("course")

        def build(student, source):
            return {"a_attack": _submission(student, ATTACK_ANSWER, BEFORE, AFTER[:3], AFTER[3:]),
                    "z_honest": _submission(student, "def double(x):\n    return 2 * x\n", [HONEST_BEFORE],
                                            [HONEST_AFTER], [])}

        log: list[str] = []
        scores = autograde_submissions(course, src, CH, build, log=log)
        generate_feedback(course, CH)
    finally:
        mp.undo()
    return course, scores, "\n".join(log)


def _page(course: Path, who: str) -> tuple[str, str]:
    """The feedback HTML of ``who`` and its visible text."""
    page = (course / "feedback" / who / CH / f"{CH}.html").read_text()
    body = re.sub(r"<(style|script)\b.*?</\1>", " ", page, flags=re.S | re.I)
    return page, html.unescape(re.sub(r"<[^>]+>", "", body))


def _autograded(course: Path, who: str) -> str:
    """Every output of ``who``'s autograded notebook (the instructor's copy), as JSON text."""
    nb = json.loads((course / "autograded" / who / CH / f"{CH}.ipynb").read_text())
    return "\n".join(json.dumps(c.get("outputs", [])) for c in nb["cells"])


def _hidden_lines(course: Path) -> list[str]:
    """The hidden regions' lines (normalised) that the student was never given."""
    source = json.loads((course / "solutions" / CH / f"{CH}.ipynb").read_text())
    released = json.loads((course / "notebooks" / CH / f"{CH}.ipynb").read_text())
    src = lambda c: "".join(c["source"]) if isinstance(c["source"], list) else c["source"]  # noqa: E731
    public = normalise("\n".join(src(c) for c in released["cells"]))
    lines = [normalise(line) for c in source["cells"] for m in HIDDEN_REGION.finditer(src(c))
             for line in m.group(0).splitlines()[1:-1]]
    return [n for n in lines if len(n) >= 12 and n not in public]


def test_feedback_holds_nothing_hidden_nor_secret(graded):
    course, scores, log = graded
    page, text = _page(course, "a_attack")
    auto = _autograded(course, "a_attack")
    # the grader's environment never reached the kernel: not in the feedback, not in the notebook
    assert "LLM_COURSE_SANDBOXED" in text, "the environment printed before the hidden tests is shown"
    for secret in (SECRET, SLURM_ID):
        assert secret not in page and secret not in auto, secret
    # not even the names, as keys of the printed environment (the names are in the attacker's own source)
    assert "'SLURM_JOB_ID':" not in auto and "'LLM_COURSE_TEST_SECRET_TOKEN':" not in auto
    assert "'HOME'" in auto
    assert SECRET not in (course / "autograded" / "a_attack" / CH / f"{CH}.ipynb").read_text()
    hidden = _hidden_lines(course)
    assert len(hidden) >= 2, hidden
    # the attack worked in the kernel: the instructor's notebook shows the hidden source and inputs
    assert str(HIDDEN_INT) in auto and HIDDEN_WORD in auto, log
    assert any(h in normalise(auto) for h in hidden)
    # ... and none of it reaches the student's feedback, in any encoding
    for form in (normalise(page), normalise(text)):
        assert [h for h in hidden if h in form] == []
        for value in (str(HIDDEN_INT), str(2 * HIDDEN_INT), HIDDEN_WORD, 2 * HIDDEN_WORD):
            assert normalise(value) not in form, value
    assert "hidden tests: run and decided by the autograder" in text
    assert "are not shown here" in text          # the note where outputs are withheld


def test_honest_student_after_the_attack(graded):
    course, scores, log = graded
    assert scores["z_honest"] == {"test_int": (2.0, 2.0), "test_str": (1.0, 1.0)}, log
    _, text = _page(course, "z_honest")
    assert "honest output before the hidden tests 4242" in text
    assert "honest output after the hidden tests 5353" not in text
    assert "are not shown here" in text and "hidden values checked outside your kernel: all match" in text
    assert "honest output after the hidden tests 5353" in _autograded(course, "z_honest")   # the instructor's copy


def test_reference_and_probe_kernels_get_the_allow_list(tmp_path, monkeypatch):
    """The reference run and the probe start kernels through ``execute_sandboxed`` (the probe with
    packages removed): their environment is the allow-list too."""
    import nbformat
    from traitlets import List as TList
    from traitlets import Unicode

    from course_tools.grading.run import execute_sandboxed
    from course_tools.grading.sandbox import SandboxedKernelManager

    monkeypatch.setenv("LLM_COURSE_TEST_SECRET_TOKEN", SECRET)
    monkeypatch.setenv("SLURM_JOB_ID", SLURM_ID)
    monkeypatch.setenv("MY_SERVICE_PASSWORD", SECRET)

    class Masked(SandboxedKernelManager):
        masked_packages = TList(Unicode(), default_value=["gguf"])

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import os, json\nprint(json.dumps(dict(os.environ)))")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    execute_sandboxed(nb, tmp_path, kernel_manager_class=Masked, timeout=120)
    out = "".join(o.get("text", "") for o in nb.cells[0].outputs if o.get("output_type") == "stream")
    env = json.loads(out.strip().splitlines()[-1])
    assert SECRET not in out and SLURM_ID not in out
    from course_tools.grading.sandbox import KERNEL_ENV_ALLOWED, KERNEL_ENV_PREFIXES

    set_by_sandbox = {"HOME", "IPYTHONDIR", "MPLCONFIGDIR", "TMPDIR", "JUPYTER_RUNTIME_DIR", "JUPYTER_CONFIG_DIR",
                      "JUPYTER_DATA_DIR", "XDG_CACHE_HOME", "LLM_COURSE_SANDBOXED", "LLM_COURSE_CACHE", "HF_HOME",
                      "JPY_PARENT_PID", "PWD"}
    set_by_ipython = {"TERM", "CLICOLOR", "CLICOLOR_FORCE", "FORCE_COLOR", "PAGER", "GIT_PAGER", "MPLBACKEND",
                      "PYDEVD_USE_FRAME_EVAL", "JPY_SESSION_NAME"}
    # nothing of the grader's environment outside the allow-list
    leaked = {k for k in env if k in os.environ and k not in KERNEL_ENV_ALLOWED | set_by_sandbox | set_by_ipython
              and not k.startswith(KERNEL_ENV_PREFIXES)}
    assert leaked == set(), leaked
    assert env.get("LLM_COURSE_RECORD") == "1" and env.get("NBGRADER_EXECUTION")


def test_hidden_lines_are_recognised_in_their_encodings():
    from course_tools.grading.feedback import HiddenLines

    line = "record('double on a hidden word', double(\"q7Zk-hidden-word\"))"
    src = f"check_equal('x', double(3), 6)\n### BEGIN HIDDEN TESTS\n{line}\n### END HIDDEN TESTS\n"
    hl = HiddenLines([src], public="check_equal('x', double(3), 6)")
    assert hl.lines == [normalise(line)]
    stream = lambda t: {"output_type": "stream", "name": "stdout", "text": t}  # noqa: E731
    for shown in (line, repr([src]), json.dumps([src]), html.escape(src), "<td>" + html.escape(line) + "</td>",
                  line.upper(), src.encode("unicode_escape").decode(), repr(src).replace("'", "\\x27")):
        assert hl.found_in(stream(shown)), shown
        assert hl.found_in({"output_type": "display_data", "metadata": {}, "data": {"text/html": shown}})
        assert hl.found_in({"output_type": "error", "ename": "E", "evalue": shown, "traceback": []})
    assert not hl.found_in(stream("double(3) is 6, and the visible check passed"))
