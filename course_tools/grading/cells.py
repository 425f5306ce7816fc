"""What the grader reads in a notebook's cells: test cells, hidden regions, reference and probe blocks, records.

Shared by the reference run (``references.py``), the probe (``probe.py``), the preprocessors and
the claims check; it imports nothing else of the grading package.
"""
from __future__ import annotations

import re
from typing import Any

from course_utils.records import MIME

BEGIN_TESTS, END_TESTS = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
BEGIN_REF, END_REF = "### BEGIN REFERENCE", "### END REFERENCE"
_RECORD_CALL = re.compile(r"^\s*record\(", re.M)
PROBE_RE = re.compile(r"^\s*### BEGIN PROBE WITHOUT\s+(.+?)\s*$")
END_PROBE = "### END PROBE"


def _meta(cell: Any) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_test_cell(cell: Any) -> bool:
    meta = _meta(cell)
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


def _split_regions(source: str, begin: str, end: str) -> tuple[str, str]:
    """``(source outside the begin/end regions, what they hold)``; marker lines in neither."""
    outside: list[str] = []
    inside_blocks: list[str] = []
    inside = False
    for line in source.splitlines(keepends=True):
        s = line.strip()
        if s == begin:
            inside = True
        elif s == end:
            inside = False
        else:
            (inside_blocks if inside else outside).append(line)
    return "".join(outside), "".join(inside_blocks)


def visible_part(source: str) -> str:
    """A test cell's source without its hidden region (marker lines included): what a student sees run."""
    return _split_regions(source, BEGIN_TESTS, END_TESTS)[0]


def split_reference_blocks(source: str) -> tuple[str, str]:
    """``(source without its reference blocks, what the blocks hold)``; marker lines in neither."""
    return _split_regions(source, BEGIN_REF, END_REF)


def strip_reference_blocks(source: str) -> str:
    """``source`` without its reference blocks (marker lines included): what a submission's kernel runs."""
    return split_reference_blocks(source)[0]


def hidden_region(source: str) -> str:
    """The hidden-test region of a test cell (markers excluded), reference blocks removed."""
    lines = source.splitlines(keepends=True)
    stripped = [ln.strip() for ln in lines]
    if BEGIN_TESTS not in stripped or END_TESTS not in stripped:
        return ""
    b, e = stripped.index(BEGIN_TESTS), stripped.index(END_TESTS)
    return strip_reference_blocks("".join(lines[b + 1:e]))


def source_problems(source: str) -> list[str]:
    """What is wrong with a test cell's source under the record protocol (empty: nothing).

    A hidden region that records at least one value; reference blocks balanced and inside it.
    """
    lines = [ln.strip() for ln in source.splitlines()]
    problems: list[str] = []
    if lines.count(BEGIN_TESTS) != 1 or lines.count(END_TESTS) != 1:
        return ["needs exactly one hidden-test region (### BEGIN HIDDEN TESTS / ### END HIDDEN TESTS)"]
    b, e = lines.index(BEGIN_TESTS), lines.index(END_TESTS)
    if e < b:
        return ["hidden-test markers out of order"]
    depth = 0
    for i, ln in enumerate(lines):
        if ln in (BEGIN_REF, END_REF):
            if not b < i < e:
                problems.append("a reference marker outside the hidden-test region")
            depth += 1 if ln == BEGIN_REF else -1
            if depth not in (0, 1):
                problems.append("reference blocks unbalanced or nested")
    if depth:
        problems.append("a reference block is not closed")
    inside_ref = inside_probe = False
    for i, ln in enumerate(lines):
        if ln in (BEGIN_REF, END_REF):
            inside_ref = ln == BEGIN_REF
        elif PROBE_RE.match(ln) or ln == END_PROBE:
            opening = ln != END_PROBE
            if not b < i < e or inside_ref:
                problems.append("a probe marker outside the hidden-test region or inside a reference block")
            if opening == inside_probe:
                problems.append("probe blocks unbalanced or nested")
            inside_probe = opening
    if inside_probe:
        problems.append("a probe block is not closed")
    hidden = hidden_region(source)
    if not _RECORD_CALL.search(hidden):
        problems.append("the hidden region records nothing outside its reference blocks (record(...))")
    return problems


def records_by_cell(nb: Any) -> dict[str, list[Any]]:
    """The record payloads of every test cell of an executed notebook, by grade id."""
    out: dict[str, list[Any]] = {}
    for cell in nb.cells:
        if is_test_cell(cell):
            out[_meta(cell)["grade_id"]] = [o["data"][MIME] for o in cell.get("outputs", [])
                                            if o.get("output_type") in ("display_data", "execute_result")
                                            and MIME in o.get("data", {})]
    return out
