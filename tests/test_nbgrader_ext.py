import nbformat

from course_utils.nbgrader_ext import StderrToStdout, StripExecutionTags


def _cell(grade, solution, tags=(), outputs=()):
    c = nbformat.v4.new_code_cell("x = 1")
    c.metadata["nbgrader"] = {"grade": grade, "solution": solution, "locked": not solution, "grade_id": "t",
                              "schema_version": 3, "task": False}
    c.metadata["tags"] = list(tags)
    c.outputs = [nbformat.from_dict(o) for o in outputs]
    return c


def test_skip_execution_tag_is_stripped():
    cell, _ = StripExecutionTags().preprocess_cell(_cell(True, False, ["skip-execution", "raises-exception", "keep"]), {}, 0)
    assert cell.metadata["tags"] == ["keep"]


def test_stderr_in_test_cells_becomes_stdout_but_not_elsewhere():
    err = {"output_type": "stream", "name": "stderr", "text": "FutureWarning"}
    test, _ = StderrToStdout().preprocess_cell(_cell(True, False, outputs=[err]), {}, 0)
    assert test.outputs[0]["name"] == "stdout"
    answer, _ = StderrToStdout().preprocess_cell(_cell(False, True, outputs=[err]), {}, 0)
    assert answer.outputs[0]["name"] == "stderr"


def test_config_uses_the_hardening_preprocessors():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "nbgrader_config.py").read_text()
    assert "StripExecutionTags" in text and "StderrToStdout" in text and "add_missing_cells = True" in text
