"""nbgrader preprocessors that close holes in autograding (used by ``nbgrader_config.py``).

Student code runs in the same kernel as the tests, so nothing that runs there can be made
tamper-proof; these preprocessors defeat the cheap and generic tricks (each one was tried in a
real ``nbgrader autograde`` run, see ``tests/test_integrity.py``) and leave the rest to manual
review (README, "Grading integrity").

Sanitising a submission (before execution):

* :class:`StripExecutionTags` removes *every* cell tag. Tags change how a cell executes
  (``skip-execution``, ``raises-exception``, or whatever ``Execute.skip_cells_with_tag`` is set
  to); grading needs none of them.
* :class:`FlagKernelHooks` scans every cell the student could edit for kernel hooks and
  grading internals (input transformers, ``post_run_cell`` hooks, custom exception handlers,
  frame inspection, ``course_utils.grading``...) and, on its syntax tree, for assignments to an
  attribute of an imported module or class (``np.where = ...``, ``torch.Tensor.x = ...``,
  ``setattr(torch, ...)``, ``vars(np)[...] = ...``, ``del np.x``, ``__setattr__``). Answers
  never need them, so a submission that uses one gets 0 on every autograded test cell with a
  message asking for manual review.
* :class:`AppendIntegrityCheck` appends two lines to every autograded test cell: a call of
  :func:`course_tools.grading.integrity.integrity_check` (the course's check functions are the ones in
  ``grading.py``) and a ``print`` of a random token drawn for this autograde run.

After execution:

* :class:`RequireIntegrityCheck` gives an error output to every test cell whose stdout lacks the
  token: the cell did not run to its end, whatever a hook did to its error output afterwards.
  It also turns ``execute_result`` outputs of test cells into display data (nbgrader would read a
  number there as partial credit) and removes the token line from the visible output.
* :class:`StderrToStdout`: nbgrader gives 0 to a test cell with *any* stderr output, so a
  harmless library warning would zero a correct answer. Failures of our tests are exceptions
  (error outputs), never stderr, so stderr in a test cell is re-labelled as stdout.
"""
from __future__ import annotations

import ast
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any, Callable

from nbgrader.preprocessors import NbGraderPreprocessor
from nbformat.notebooknode import NotebookNode, from_dict

from course_tools.grading.cells import _meta
from course_tools.grading.i18n import N_
from course_tools.grading.cells import is_test_cell as _is_test_cell

# One token per autograde process: the sanitising and the executing step of `nbgrader autograde`
# run in the same process, the student's kernel never sees it before the test cell arrives.
TOKEN = "integrity-ok-" + secrets.token_hex(16)
TAIL_MARK = "# --- added by the autograder (course_tools.grading.preprocessors); not part of the test ---"

# What an answer never needs. Matched against the source of every cell the student controls.
HOOK_PATTERNS = {
    r"\binput_transformers": "an IPython input transformer",
    r"\bast_transformers": "an IPython AST transformer",
    r"\bevents\s*\.\s*(register|callbacks)": "an IPython event hook",
    r"\bset_custom_exc\b": "a custom exception handler",
    r"\bshowtraceback\b": "the traceback printer",
    r"\berror_in_(exec|before_exec)\b": "the cell result's error field",
    r"\b_getframe\b|\bf_locals\b|\bf_back\b": "stack-frame inspection",
    r"\bset(trace|profile)\b": "a tracing hook",
    r"\bsys\s*\.\s*modules\b": "sys.modules",
    r"\b__builtins__\b|\bimport\s+builtins\b|\bfrom\s+builtins\b": "the builtins module",
    r"\bgrading\s*\.\s*(?!import\b)\w+\s*=|\bsetattr\s*\(\s*(course_utils|grading)\b|\bcourse_tools\b|\bnbgrader_ext\b|\bassert_untampered\b|\bintegrity(_check)?\b": "the course's grading code",
    r"\bdisplayhook\b|\bexcepthook\b": "an interpreter hook",
}
# A forbidden torch function cannot be removed from torch: its kernels stay reachable below the
# Python API, so an answer that goes there is read by a person (README, "What remains possible").
BELOW_TORCH_API = "torch operators below the Python API (torch.ops / torch._C)"


LIBRARY_REBINDING = "an assignment to an attribute of an imported module or class"


def _parse(source: str) -> ast.Module | None:
    """The cell's syntax tree after IPython's transformations (magics, ``!cmd``); None if invalid."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # noqa: BLE001  (no IPython, or a cell it cannot transform: parse as is)
        pass
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def imported_names(sources: list[str]) -> set[str]:
    """Names bound by ``import`` statements (or ``__import__`` / ``import_module`` calls) in ``sources``."""
    names: set[str] = set()
    for source in sources:
        tree = _parse(source)
        for node in ast.walk(tree) if tree else ():
            if isinstance(node, ast.Import):
                names |= {a.asname or a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                names |= {a.asname or a.name for a in node.names if a.name != "*"}
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                func = node.value.func
                fname = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
                if fname in ("__import__", "import_module"):
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _root(node: ast.AST) -> str | None:
    """``np`` for ``np.linalg.norm`` / ``vars(np)`` / ``np.__dict__['x']``: the name an expression starts from."""
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript, ast.Starred)):
            node = node.value
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars" and node.args:
            node = node.args[0]
        elif isinstance(node, ast.Name):
            return node.id
        else:
            return None


def _namespace_of(node: ast.AST) -> bool:
    """``vars(x)`` or ``x.__dict__``: an object's namespace as a dictionary."""
    return ((isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "vars")
            or (isinstance(node, ast.Attribute) and node.attr == "__dict__"))


def library_rebinding(source: str, imported: set[str]) -> bool:
    """Whether ``source`` assigns to (or deletes) an attribute of a name in ``imported``."""
    tree = _parse(source)
    for node in ast.walk(tree) if tree else ():
        targets: list[ast.AST] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif isinstance(node, (ast.For, ast.comprehension)):
            targets = [node.target]
        elif isinstance(node, ast.withitem) and node.optional_vars is not None:
            targets = [node.optional_vars]
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, (ast.Store, ast.Del)) and _root(sub) in imported:
                    return True
                if (isinstance(sub, ast.Subscript) and isinstance(sub.ctx, (ast.Store, ast.Del))
                        and _namespace_of(sub.value) and _root(sub.value) in imported):
                    return True
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and node.args and _root(node.args[0]) in imported:
                return True
            if isinstance(func, ast.Attribute) and func.attr in ("__setattr__", "__delattr__"):
                return True
            if (isinstance(func, ast.Attribute) and func.attr in ("update", "setdefault", "pop", "__setitem__", "__delitem__",
                                                                 "clear", "popitem")
                    and _namespace_of(func.value) and _root(func.value) in imported):
                return True
    return False


def below_torch_api(source: str) -> bool:
    """Whether the *code* of ``source`` (not its comments or strings) reaches ``torch.ops`` or
    ``torch._C``: an attribute of a name bound to torch, or an import of either."""
    tree = _parse(source)
    if tree is None:
        return False
    low = ("ops", "_C")
    torch_names = {"torch"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "torch":
                    if a.name.split(".")[1:2] and a.name.split(".")[1] in low:
                        return True
                    torch_names.add(a.asname or "torch")
        elif isinstance(node, ast.ImportFrom) and node.module:
            parts = node.module.split(".")
            if parts[0] == "torch" and (parts[1:2] and parts[1] in low or any(a.name in low for a in node.names)):
                return True
    return any(isinstance(n, ast.Attribute) and n.attr in low and isinstance(n.value, ast.Name)
               and n.value.id in torch_names for n in ast.walk(tree))


def hook_findings(source: str, imported: set[str] | None = None) -> list[str]:
    """What in ``source`` matches :data:`HOOK_PATTERNS` or rebinds a library (empty list: nothing suspicious).

    ``imported``: the names imported anywhere in the notebook (default: those ``source`` imports).
    """
    found = [what for pattern, what in HOOK_PATTERNS.items() if re.search(pattern, source)]
    if library_rebinding(source, imported_names([source]) if imported is None else imported):
        found.append(LIBRARY_REBINDING)
    if below_torch_api(source):
        found.append(BELOW_TORCH_API)
    return found


REVIEW_NOTE = "**Autograder note (for the instructor)**: "


class ResolveDuplicateCells(NbGraderPreprocessor):
    """Grade a notebook in which a graded cell was pasted twice, instead of failing on it.

    JupyterLab copies a cell's nbgrader metadata with the cell, and stock nbgrader then stops on
    the whole submission (0 points for every exercise). Here the **last** copy of each grade id
    keeps its metadata (it is the definition that wins when the notebook runs top to bottom); the
    earlier copies become ordinary cells, still executed in place. A markdown note at the top of
    the autograded notebook names the cells, so the instructor can review them.
    """

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        seen: set[str] = set()
        dups: list[str] = []
        for cell in reversed(nb.cells):
            gid = _meta(cell).get("grade_id")
            if not gid:
                continue
            if gid in seen:
                cell.metadata.pop("nbgrader", None)
                if gid not in dups:
                    dups.append(gid)
            else:
                seen.add(gid)
        if dups:
            names = ", ".join(sorted(dups))
            self.log.warning("Submission has graded cells pasted more than once (%s): graded the last copy of each", names)
            nb.cells.insert(0, from_dict({"cell_type": "markdown", "metadata": {}, "id": "autograder-note-duplicates",
                                          "source": REVIEW_NOTE + f"the cells {names} appear more than once in the "
                                          "submission (a pasted copy keeps its nbgrader id). The last copy of each "
                                          "was graded; earlier copies ran as ordinary cells. Review by hand."}))
        return nb, resources


class StripExecutionTags(NbGraderPreprocessor):
    """Remove every tag from every cell of a submission (tags can make the executor skip a cell)."""

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if "tags" in cell.get("metadata", {}):
            cell.metadata["tags"] = []
        return cell, resources


class FlagKernelHooks(NbGraderPreprocessor):
    """Zero the autograded cells of a submission whose own code uses kernel hooks (manual review).

    Runs after ``OverwriteCells``: the locked cells then hold the instructor's source and are
    trusted; every other code cell (answer cells, cells the student added) is scanned.
    """

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        locked = self._locked_sources(resources)
        imported = imported_names([c.source for c in nb.cells if c.get("cell_type") == "code"])
        findings: list[str] = []
        for cell in nb.cells:
            if cell.get("cell_type") != "code":
                continue
            if self._trusted(cell.source, locked.get(_meta(cell).get("grade_id"))):
                continue
            for what in hook_findings(cell.source, imported):
                if what not in findings:
                    findings.append(what)
        if findings:
            self.log.warning("Submission uses %s: autograded cells set to 0 for manual review", ", ".join(findings))
            msg = ("Autograding withheld: the submitted code uses " + ", ".join(findings) + ", which no answer "
                   "needs. Your instructor will review this notebook by hand.")
            for cell in nb.cells:
                if _is_test_cell(cell):
                    cell.source = f"raise RuntimeError({msg!r})\n" + cell.source
        return nb, resources

    @staticmethod
    def _trusted(source: str, locked_source: str | None) -> bool:
        """The instructor's locked cell, as restored by ``OverwriteCells`` (or re-added by it
        after a deletion, with its comment line on top)."""
        if locked_source is None or not source.endswith(locked_source):
            return False
        prefix = source[: len(source) - len(locked_source)]
        return all(not line.strip() or line.lstrip().startswith("#") for line in prefix.splitlines())

    @staticmethod
    def _locked_sources(resources: Any) -> dict[str, str]:
        info = resources.get("nbgrader", {}) if isinstance(resources, dict) else {}
        if not {"db_url", "notebook", "assignment"} <= set(info):
            return {}
        from nbgrader.api import Gradebook, MissingEntry

        try:
            with Gradebook(info["db_url"]) as gb:
                source_nb = gb.find_notebook(info["notebook"], info["assignment"])
                return {c.name: c.source for c in source_nb.source_cells if c.locked}
        except MissingEntry:
            return {}


HIDDEN_START = "[autograder] hidden checks start here"
_HIDDEN_BEGIN = re.compile(r"^([ \t]*)###\s*BEGIN HIDDEN TESTS", re.M)


class AppendIntegrityCheck(NbGraderPreprocessor):
    """Append the integrity check and the run's token to every autograded test cell.

    Also prints :data:`HIDDEN_START` where the hidden region begins, so that the feedback can
    leave out what the hidden part printed or displayed (``course_tools/grading/feedback.py``).
    """

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if _is_test_cell(cell):
            cell.source = _HIDDEN_BEGIN.sub(lambda m: f"{m.group(1)}print({HIDDEN_START!r})\n{m.group(0)}",
                                            cell.source, count=1)
            cell.source = (cell.source.rstrip("\n") + f"\n{TAIL_MARK}\n"
                           "__import__('course_tools.grading.integrity').grading.integrity.integrity_check()\n"
                           f"print({TOKEN!r})\n")
        return cell, resources


class RequireIntegrityCheck(NbGraderPreprocessor):
    """Fail every test cell that did not print the run's token; keep the token out of the feedback."""

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if not _is_test_cell(cell):
            return cell, resources
        outputs = cell.get("outputs", [])
        seen = False
        for i, out in enumerate(outputs):
            if out.get("output_type") == "stream" and TOKEN in out.get("text", ""):
                seen = True
                out["text"] = "".join(line for line in out["text"].splitlines(keepends=True) if TOKEN not in line)
            elif out.get("output_type") == "execute_result":  # nbgrader would read a number as partial credit
                outputs[i] = from_dict({"output_type": "display_data", "data": out.get("data", {}),
                                        "metadata": out.get("metadata", {})})
        cell["outputs"] = [o for o in outputs if not (o.get("output_type") == "stream" and o.get("text") == "")]
        if not seen and not any(o.get("output_type") == "error" for o in cell["outputs"]):
            cell["outputs"].append(from_dict({
                "output_type": "error", "ename": "IncompleteTestCell",
                "evalue": "this test cell did not run to its end (its error was hidden or it was skipped)",
                "traceback": ["IncompleteTestCell: this test cell did not run to its end "
                              "(its error was hidden or it was skipped)"],
            }))
        return cell, resources


class StderrToStdout(NbGraderPreprocessor):
    """Re-label stderr streams of test cells as stdout so warnings cannot zero a grade."""

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if _is_test_cell(cell):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    out["name"] = "stdout"
        return cell, resources


class StripReferenceBlocks(NbGraderPreprocessor):
    """Remove the hidden tests' reference blocks before a submission runs (sanitising step).

    Runs after ``OverwriteCells`` has restored the test cells from the instructor's source: what
    the reference blocks compute (library values, closed forms) never enters a student's kernel.
    """

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if _is_test_cell(cell):
            from course_tools.grading.cells import strip_reference_blocks

            cell.source = strip_reference_blocks(cell.source)
        return cell, resources


VERDICT_ALL_MATCH = N_("[autograder] {n} hidden values checked outside your kernel{extra}: all match")
VERDICT_ALSO_WITHOUT = N_(" (also with {packages} removed)")


def verdict(n: int, without: list[str] | None, _t: Callable[[str], str] = str) -> str:
    """The line a passing test cell gets: ``n`` hidden values matched (also with ``without`` removed)."""
    extra = _t(VERDICT_ALSO_WITHOUT).format(packages=", ".join(without)) if without else ""
    return _t(VERDICT_ALL_MATCH).format(n=n, extra=extra) + "\n"


def verdict_pattern(_t: Callable[[str], str] = str) -> "re.Pattern[str]":
    """What :func:`verdict` writes, in the language of ``_t`` (the feedback keeps only that line)."""
    extra = re.escape(_t(VERDICT_ALSO_WITHOUT)).replace(re.escape("{packages}"), "[A-Za-z0-9_, .-]+")
    line = re.escape(_t(VERDICT_ALL_MATCH)).replace(re.escape("{n}"), r"\d+").replace(re.escape("{extra}"),
                                                                                      f"(?:{extra})?")
    return re.compile(r"\A" + line + r"\n?\Z")


class VerifyRecords(NbGraderPreprocessor):
    """Decide every autograded test cell outside the student's kernel (autograding step).

    The hidden tests recorded what the student's functions returned (``course_utils/records.py``).
    This preprocessor, in nbgrader's process, gets the reference records of the assignment's source
    notebook (executed once in a kernel of its own, cached: ``course_tools/grading/references.py``),
    compares them with the submission's, removes the record outputs, and gives the cell an error
    output naming what differs (nbgrader then scores it 0) or a one-line summary when everything
    matches. Nothing that came out of the student's kernel is executed: records are parsed as data.

    What the student reads (the verdict, the feedback's form of a failure) is in the language of the
    submission's edition (``course_tools/grading/i18n.py``); the instructor's form names the values in English.

    Test cells whose hidden region holds a ``### BEGIN PROBE WITHOUT <packages>`` block are recorded a second time
    in a sandboxed kernel where those packages do not exist (``course_tools/grading/probe.py``); both sets of
    records must match the reference.
    """

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        import nbformat

        from course_tools.grading.probe import ANSWER_ERRORS, PROBE_SUFFIX, run_probe
        from course_tools.grading.render import FEEDBACK_MIME
        from course_utils.records import MIME, RecordError, verify_cell_detailed

        from course_tools.grading.i18n import notebook_language, translator

        source, root = self._source(resources)
        refs = self._references(source, root)
        # what the student reads is in the language of the submission's edition (course_tools/grading/i18n.py)
        _t = translator(notebook_language(nb))
        # the records of each test cell, checked against the reference (outputs of the kernel kept apart)
        # grade id -> (outputs kept, what differs, number of checks, failed in the student's kernel)
        verified: dict[str, tuple[list[Any], list[Any], int, bool]] = {}
        for cell in nb.cells:
            if not _is_test_cell(cell):
                continue
            gid = _meta(cell).get("grade_id")
            kept, recs = [], []
            for out in cell.get("outputs", []):
                data = out.get("data", {}) if isinstance(out.get("data"), dict) else {}
                if out.get("output_type") in ("display_data", "execute_result", "update_display_data") and MIME in data:
                    recs.append(json.loads(json.dumps(data[MIME])))   # plain JSON data, nothing else
                elif FEEDBACK_MIME in data:
                    continue   # only this preprocessor writes the feedback's form of its verdict
                else:
                    kept.append(out)
            try:
                detailed, n = verify_cell_detailed(recs, refs[gid], _t)
            except (KeyError, RecordError) as exc:
                raise RuntimeError(f"no usable reference records for test cell {gid}: {exc}") from exc
            failed_here = bool(detailed) or any(o.get("output_type") == "error" for o in kept)
            verified[gid] = (kept, detailed, n, failed_here)
        # exercises that must be written without a library: recorded again where it does not exist, for
        # the cells that passed here (the probe can only take points away: it is not run for the others)
        workdir = Path(resources.get("metadata", {}).get("path") or ".")
        cell_timeout = self.config.Execute.get("timeout", 120) if "Execute" in self.config else 120
        probe_recs, probe_errors, plan = run_probe(nbformat.read(source, as_version=4), nb, workdir,
                                                   timeout=min(120, int(cell_timeout or 120)),
                                                   config=self.config, log=self.log,
                                                   only={g for g, v in verified.items() if not v[3]})
        for cell in nb.cells:
            if not _is_test_cell(cell):
                continue
            gid = _meta(cell).get("grade_id")
            kept, detailed, n, _ = verified[gid]
            try:
                problems = [full for full, _ in detailed]
                safe = [for_student for _, for_student in detailed]
                if gid in plan:
                    without = ", ".join(plan[gid])
                    d2, _ = verify_cell_detailed(json.loads(json.dumps(probe_recs.get(gid, []))), refs[gid + PROBE_SUFFIX], _t)
                    p2 = [full for full, _ in d2]
                    if p2:
                        why = "; ".join(probe_errors.get(gid, [])[:1]) or "; ".join(p[:300] for p in p2[:2])
                        if probe_errors.get(ANSWER_ERRORS):
                            why += f"; there, one of your cells failed with {probe_errors[ANSWER_ERRORS][0]}"
                        problems.append(f"this exercise must work without {without}: run again where {without} "
                                        f"is not installed, it does not give the same results ({why})")
                        safe.append(_t("this exercise must work without {packages}: run again where {packages} "
                                       "is not installed, it does not give the same results ({why})").format(
                                           packages=without, why=d2[0][1][:300]))
            except (KeyError, RecordError) as exc:
                raise RuntimeError(f"no usable reference records for test cell {gid}: {exc}") from exc
            if problems:
                head = _t("{n} hidden check(s) failed (decided by the autograder outside your kernel):").format(
                    n=len(problems)) + "\n- "
                msg = head + "\n- ".join(p[:600] for p in problems[:8])
                # the student's feedback shows this form instead (course_tools/grading/feedback.py)
                kept.append(from_dict({"output_type": "display_data", "metadata": {},
                                       "data": {FEEDBACK_MIME: {"ename": "HiddenTestFailed",
                                                                "evalue": head + "\n- ".join(p[:600] for p in safe[:8])}}}))
                kept.append(from_dict({"output_type": "error", "ename": "HiddenTestFailed", "evalue": msg,
                                       "traceback": ["HiddenTestFailed: " + msg]}))
            else:
                kept.append(from_dict({"output_type": "stream", "name": "stdout",
                                       "text": verdict(n, plan.get(gid), _t)}))
            cell["outputs"] = kept
        return nb, resources

    def _source(self, resources: Any) -> tuple[Path, Path]:
        from nbgrader.coursedir import CourseDirectory

        info = resources.get("nbgrader", {})
        coursedir = CourseDirectory(config=self.config)
        folder = Path(coursedir.format_path(coursedir.source_directory, ".", info["assignment"]))
        return folder / f"{info['notebook']}.ipynb", Path(coursedir.root)

    def _references(self, source: Path, root: Path) -> dict[str, list[Any]]:
        from course_tools.grading.references import reference_records

        return reference_records(source, root, config=self.config, log=self.log,
                                 timeout=int(os.environ.get("LLM_COURSE_CELL_TIMEOUT", "300")) * 4)
