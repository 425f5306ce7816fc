"""Forbidden routes by construction: exercises that must be written without a library are recorded
again in a kernel where that library does not exist.

Switching library functions off inside the student's kernel (``grading.switched_off``) can be
dodged by a handle the switch does not see (a subclass keeping the original method, a kernel op
such as ``torch.ops.bitsandbytes.*``, an import done before the switch). So the hidden region of
such a test cell holds a **probe block**:

    ### BEGIN PROBE WITHOUT tokenizers transformers
    record("wordpiece_tokenize_word on ... (probe)", wordpiece_tokenize_word(...))
    ### END PROBE

It runs in the student's kernel like the rest of the hidden region, and again, after the
submission, in a **second sandboxed kernel in which those packages' files are replaced by a stub
that raises ``ModuleNotFoundError``** (``course_tools.grading.sandbox.mask_args``). That kernel runs, in
order:

1. each top-level statement of the source notebook's ``imports`` cell and of its cells tagged
   ``probe-setup`` (a statement that needs a removed package fails on its own and the rest still
   runs), as the chapter's answers expect ``torch``, ``math``, ``np``, a table such as
   ``NF4_CODE`` ... to be there;
2. every code cell of the submission the student could write (answer cells, cells the student
   added; never the locked cells of the source, which load models and data);
3. the probe block of every probed test cell, exactly as the instructor wrote it (it builds its
   inputs without the removed packages).

The records of step 3 must equal the reference records of the same keys
(:func:`course_tools.grading.references.reference_records` keeps them under ``"<grade id>#probe"``), or
the cell fails (:class:`course_tools.grading.preprocessors.VerifyRecords`). A function that reaches the
removed library by any route fails, since nothing of the library is left to reach; an honest
answer, written with the chapter's imports alone, gives the same records in both kernels.
"""
from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import nbformat
from nbformat.notebooknode import from_dict

from course_tools.grading.cells import END_PROBE, PROBE_RE, _meta, hidden_region, is_test_cell, records_by_cell

PROBE_SUFFIX = "#probe"      # reference records of a probe block: refs[grade_id + PROBE_SUFFIX]
IMPORTS_CELL = "imports"     # grade id of each chapter's imports cell
SETUP_TAG = "probe-setup"    # a locked cell whose definitions the answers use (e.g. a table), run in the probe too


def probe_blocks(source: str) -> tuple[list[str], str]:
    """``(packages, code)`` of the probe blocks of a test cell's hidden region (``([], "")``: none)."""
    packages: list[str] = []
    code: list[str] = []
    inside = False
    for line in hidden_region(source).splitlines(keepends=True):
        m = PROBE_RE.match(line)
        if m:
            packages += m.group(1).replace(",", " ").split()
            inside = True
        elif line.strip() == END_PROBE:
            inside = False
        elif inside:
            code.append(line)
    return packages, "".join(code)


def probe_plan(nb: Any) -> dict[str, list[str]]:
    """``{grade id: packages it must work without}`` for the test cells that hold a probe block."""
    plan: dict[str, list[str]] = {}
    for cell in nb.cells:
        if is_test_cell(cell):
            packages, _ = probe_blocks(cell.source)
            if packages:
                plan[_meta(cell)["grade_id"]] = packages
    return plan


def _statements(source: str) -> list[str]:
    """Top-level statements of ``source`` as separate snippets (the whole source if it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return [source]
    out = []
    for node in tree.body:
        seg = ast.get_source_segment(source, node)
        if seg:
            out.append(seg)
    return out


def build_probe(source_nb: Any, submission_nb: Any, plan: dict[str, list[str]]) -> Any:
    """The notebook the probe kernel executes (see the module docstring); test cells keep their grade id."""
    locked = {_meta(c).get("grade_id") for c in source_nb.cells
              if _meta(c).get("grade_id") and not _meta(c).get("solution")}
    cells = []
    for cell in source_nb.cells:
        if cell.cell_type == "code" and (_meta(cell).get("grade_id") == IMPORTS_CELL
                                         or SETUP_TAG in cell.get("metadata", {}).get("tags", [])):
            cells += [nbformat.v4.new_code_cell(s) for s in _statements(cell.source)]
    for cell in submission_nb.cells:
        gid = _meta(cell).get("grade_id")
        if cell.cell_type == "code" and (gid not in locked or gid is None):
            cells.append(nbformat.v4.new_code_cell(cell.source, metadata={"probe_role": "answer"}))
    for cell in source_nb.cells:
        gid = _meta(cell).get("grade_id")
        if gid in plan:
            test = nbformat.v4.new_code_cell(probe_blocks(cell.source)[1])
            test.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": gid, "locked": True}
            cells.append(test)
    nb = nbformat.v4.new_notebook()
    nb.metadata = from_dict(dict(source_nb.metadata))
    nb.cells = cells
    return nb


def probe_reference(reference: list[Any], probe_records: list[Any]) -> list[Any]:
    """The payloads of a test cell's reference run whose keys the probe block of the solution recorded."""
    from course_utils.records import parse_record

    keys = {parse_record(r)[1] for r in probe_records}
    return [r for r in reference if parse_record(r)[1] in keys]


ANSWER_ERRORS = "__answer_cells__"   # key of errors_by_cell for the errors of the submission's own cells


def errors_by_cell(nb: Any) -> dict[str, list[str]]:
    """First lines of the error outputs of each probed test cell, and of the submission's cells."""
    def errs(c: Any) -> list[str]:
        return [f"{o.get('ename')}: {str(o.get('evalue'))[:300]}" for o in c.get("outputs", [])
                if o.get("output_type") == "error"]
    out = {_meta(c)["grade_id"]: errs(c) for c in nb.cells if is_test_cell(c)}
    out[ANSWER_ERRORS] = [e for c in nb.cells if not is_test_cell(c) and c.metadata.get("probe_role") == "answer"
                          for e in errs(c)]
    return out


def run_probe(source_nb: Any, submission_nb: Any, workdir: Path, *, timeout: int = 120, config: Any = None,
              log: Any = None, only: set[str] | None = None
              ) -> tuple[dict[str, list[Any]], dict[str, list[str]], dict[str, list[str]]]:
    """Execute the probe in a sandboxed kernel with the planned packages removed.

    ``only``: probe these test cells alone (the autograder passes the cells that passed in the
    student's kernel: the probe can only take points away, so a cell that already failed needs no
    second kernel, and a submission whose probed cells all failed starts none).
    Returns ``(records by grade id, errors by grade id, plan)``; empty when nothing is probed.
    """
    from traitlets import List as TList
    from traitlets import Unicode

    from course_tools.grading.run import execute_sandboxed
    from course_tools.grading.sandbox import SandboxedKernelManager

    plan = probe_plan(source_nb)
    if only is not None:
        plan = {gid: packages for gid, packages in plan.items() if gid in only}
    if not plan:
        return {}, {}, {}
    packages = sorted({p for pkgs in plan.values() for p in pkgs})

    class MaskedKernelManager(SandboxedKernelManager):
        masked_packages = TList(Unicode(), default_value=packages)

    # the submission's folder as nbgrader made it: the first kernel never wrote there (sandbox.py)
    nb = execute_sandboxed(build_probe(source_nb, submission_nb, plan), Path(workdir),
                           kernel_manager_class=MaskedKernelManager, timeout=timeout, config=config, log=log)
    return records_by_cell(nb), errors_by_cell(nb), plan
