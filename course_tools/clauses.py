"""Every graded requirement is stated in the exercise a student reads.

A hidden check (``record(...)`` or a ``check_*`` call between ``### BEGIN HIDDEN TESTS`` and
``### END HIDDEN TESTS``, outside the instructor's ``### BEGIN REFERENCE`` block) tests one
*clause* of an exercise: "raise ``ValueError`` when τ ≤ 0", "keep the dtype", "leave ``x``
unchanged". A student who reads only the statement must be able to meet every clause, so:

* each hidden check names its clause in a comment, ``# clause: tau-positive``, on its line or on a
  line above it (a clause comment applies to the checks after it, up to the next one);
* the exercise's statement (the markdown from the exercise's heading, ``### Exercise N`` /
  ``### Exercício N``, down to its test cell) carries the marker ``<!-- clause: tau-positive -->``
  right after the sentence that states it — an HTML comment, which JupyterLab, Colab, GitHub and
  nbgrader's feedback page do not show;
* every marker is used by a check of that exercise (no marker left over from an older check).

A rule that every exercise of a chapter follows ("define each function in this notebook") is stated
once, before the first exercise, with ``<!-- clause-all: defined-here -->``; it counts as stated in
every exercise of the notebook, and some hidden check must test it.

The English text is the source; the edition's catalogue entry must keep the same markers
(:func:`course_tools.translation.protected`), so the Portuguese statement of a clause is checked
too. ``tests/test_clauses.py`` runs :func:`problems` on every chapter of every edition; the rule
serves the course's principle that an honest solution written from the text alone gets full marks
(``COURSE_DESIGN.md``, grading).
"""
from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

MARKER_RE = re.compile(r"<!--\s*clause:\s*([^>]*?)\s*-->")
# a rule every exercise of the chapter follows ("define each function in this notebook"), stated once
# before the first exercise
ALL_RE = re.compile(r"<!--\s*clause-all:\s*([^>]*?)\s*-->")
COMMENT_RE = re.compile(r"#\s*clause:\s*(.+?)\s*$")
CLAUSE_ID_RE = re.compile(r"^[a-z][a-z0-9-]*$")
HEADING_RE = re.compile(r"^#{2,4} .*\b(Exercise|Exercício)\b", re.M)
CHECK_NAMES = {"record", "check_close", "check_equal", "check_true", "check_shape", "check_type"}


@dataclass
class Exercise:
    """One autograded test cell: the clauses its hidden checks name, and its statement's markers."""

    grade_id: str
    checks: list[tuple[int, str, list[str]]] = field(default_factory=list)  # (line, call, clauses)
    markers: set[str] = field(default_factory=set)
    statement_found: bool = True


def _ids(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _ranges(lines: list[str], begin: str, end: str) -> list[tuple[int, int]]:
    out, start = [], None
    for i, line in enumerate(lines, 1):
        if line.strip() == begin:
            start = i
        elif line.strip() == end and start is not None:
            out.append((start, i))
            start = None
    return out


def hidden_checks(source: str) -> list[tuple[int, str, list[str]]]:
    """``(line, function, clauses)`` of each hidden check of a test cell's source.

    ``clauses`` is empty when no ``# clause:`` comment precedes the check within its hidden block.
    """
    lines = source.splitlines()
    hidden = _ranges(lines, "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")
    reference = _ranges(lines, "### BEGIN REFERENCE", "### END REFERENCE")
    comments: dict[int, list[str]] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            m = COMMENT_RE.search(tok.string)
            if m:
                comments[tok.start[0]] = _ids(m.group(1))
    calls: list[tuple[int, int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            if name in CHECK_NAMES:
                calls.append((node.lineno, node.end_lineno or node.lineno, name))
    out = []
    for line, end, name in sorted(calls):
        block = next(((a, b) for a, b in hidden if a < line < b), None)
        if block is None or any(a < line < b for a, b in reference):
            continue
        # a comment on one of the call's own lines (a multi-line call's closing line too), else the
        # nearest clause comment above it in the block
        own = [n for n in sorted(comments) if line <= n <= end]
        above = [n for n in comments if block[0] < n < line]
        clauses = comments[own[0]] if own else comments[max(above)] if above else []
        out.append((line, name, clauses))
    return out


def chapter_rules(nb: nbformat.NotebookNode) -> set[str]:
    """The ``clause-all`` markers written before the first exercise heading."""
    rules: set[str] = set()
    for cell in nb.cells:
        if cell.cell_type != "markdown":
            continue
        first = HEADING_RE.search(cell.source)
        for m in ALL_RE.finditer(cell.source[:first.start()] if first else cell.source):
            rules.update(_ids(m.group(1)))
        if first:
            break
    return rules


def exercises(nb: nbformat.NotebookNode) -> list[Exercise]:
    """Each autograded code test cell of a notebook with its checks and its statement's markers
    (the chapter's ``clause-all`` rules included)."""
    out: list[Exercise] = []
    rules = chapter_rules(nb)
    heading = None  # index of the markdown cell with the latest exercise heading
    for i, cell in enumerate(nb.cells):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.cell_type == "markdown" and HEADING_RE.search(cell.source):
            heading = i
        if cell.cell_type != "code" or not meta.get("grade") or meta.get("solution"):
            continue
        ex = Exercise(meta["grade_id"], hidden_checks(cell.source), set(rules))
        if heading is None:
            ex.statement_found = False
        else:
            for c in nb.cells[heading:i]:
                if c.cell_type == "markdown":
                    for m in MARKER_RE.finditer(c.source):
                        ex.markers.update(_ids(m.group(1)))
        out.append(ex)
    return out


_LEADING_COMMENT = re.compile(r"^(\s*)(<!--.*?-->)[ \t]*")


def broken_paragraphs(text: str) -> list[int]:
    """Lines (0-based) of a markdown text that start with an HTML comment inside a paragraph.

    CommonMark lets an HTML comment at the start of a line interrupt a paragraph: the paragraph
    ends there and the rest of that line is shown as raw HTML (its code spans and formulas
    unrendered). A marker belongs at the end of its sentence's line, never at the start of the next.
    """
    lines = text.split("\n")
    return [i for i, line in enumerate(lines) if i and _LEADING_COMMENT.match(line) and lines[i - 1].strip()]


def join_markers(text: str) -> str:
    """``text`` with every comment that starts a line inside a paragraph moved to the end of the line
    before it (what :func:`broken_paragraphs` reports, fixed)."""
    lines = text.split("\n")
    i = 1
    while i < len(lines):
        m = _LEADING_COMMENT.match(lines[i])
        if m and lines[i - 1].strip():
            lines[i - 1] = lines[i - 1].rstrip() + " " + m.group(2)
            rest = lines[i][m.end():]
            if rest.strip():
                lines[i] = m.group(1) + rest
                continue  # the rest may start with another comment
            del lines[i]
            continue
        i += 1
    return "\n".join(lines)


def problems(path: Path) -> list[str]:
    """What breaks the rule in one notebook (empty when every hidden check's clause is stated)."""
    nb = nbformat.read(path, as_version=4)
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for ln in broken_paragraphs(cell.source):
                out.append(f"cell {i}, line {ln + 1}: an HTML comment starts the line inside a paragraph, which "
                           "ends the paragraph and shows the rest of the line raw: put it at the end of the line before")
    rules, used = chapter_rules(nb), set()
    for ex in exercises(nb):
        if not ex.statement_found:
            out.append(f"{ex.grade_id}: no exercise heading (### Exercise N) above the test cell")
            continue
        named: set[str] = set()
        for line, name, clauses in ex.checks:
            if not clauses:
                out.append(f"{ex.grade_id}, line {line} of the test cell: {name}(...) names no clause "
                           "(a `# clause: id` comment on or above it)")
            for c in clauses:
                named.add(c)
                if not CLAUSE_ID_RE.match(c):
                    out.append(f"{ex.grade_id}, line {line}: clause id {c!r} is not lower-case words joined by '-'")
                elif c not in ex.markers:
                    out.append(f"{ex.grade_id}: the hidden check on line {line} tests clause {c!r}, which the "
                               f"statement does not state (no <!-- clause: {c} --> after its sentence)")
        used |= named & rules
        for c in sorted(ex.markers - named - rules):
            out.append(f"{ex.grade_id}: the statement marks clause {c!r}, but no hidden check tests it")
    for c in sorted(rules - used):
        out.append(f"the chapter's rule {c!r} (clause-all) is tested by no hidden check")
    return out
