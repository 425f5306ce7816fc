"""nbgrader preprocessors that close holes in autograding (used by ``nbgrader_config.py``).

* :class:`StripExecutionTags` runs while a submission is sanitised: it removes the
  ``skip-execution`` and ``raises-exception`` tags, so a student cannot make the executor skip
  a test cell (a skipped test cell has no error output and would get full marks).
* :class:`StderrToStdout` runs after execution: nbgrader gives 0 to a test cell with *any*
  stderr output, so a harmless library warning would zero a correct answer. Failures of our
  tests are exceptions (error outputs), never stderr, so stderr in a locked test cell is
  re-labelled as stdout and stays visible in the feedback.
"""
from __future__ import annotations

from typing import Any

from nbgrader.preprocessors import NbGraderPreprocessor
from nbformat.notebooknode import NotebookNode

BLOCKED_TAGS = ("skip-execution", "raises-exception")


def _is_test_cell(cell: NotebookNode) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


class StripExecutionTags(NbGraderPreprocessor):
    """Remove tags that change how a cell executes, in every cell of a submission."""

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        tags = cell.get("metadata", {}).get("tags")
        if tags:
            cell.metadata["tags"] = [t for t in tags if t not in BLOCKED_TAGS]
        return cell, resources


class StderrToStdout(NbGraderPreprocessor):
    """Re-label stderr streams of test cells as stdout so warnings cannot zero a grade."""

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if _is_test_cell(cell):
            for out in cell.get("outputs", []):
                if out.get("output_type") == "stream" and out.get("name") == "stderr":
                    out["name"] = "stdout"
        return cell, resources
