import nbformat

from course_tools.grading.preprocessors import StderrToStdout, StripExecutionTags


def _cell(grade, solution, tags=(), outputs=()):
    c = nbformat.v4.new_code_cell("x = 1")
    c.metadata["nbgrader"] = {"grade": grade, "solution": solution, "locked": not solution, "grade_id": "t",
                              "schema_version": 3, "task": False}
    c.metadata["tags"] = list(tags)
    c.outputs = [nbformat.from_dict(o) for o in outputs]
    return c


def test_every_tag_is_stripped_from_submissions():
    # any tag may be the executor's skip tag (Execute.skip_cells_with_tag is configurable)
    tags = ["skip-execution", "raises-exception", "course-internal-never-skip", "anything"]
    for grade, solution in ((True, False), (False, True), (False, False)):
        cell, _ = StripExecutionTags().preprocess_cell(_cell(grade, solution, tags), {}, 0)
        assert cell.metadata["tags"] == []


def test_stderr_in_test_cells_becomes_stdout_but_not_elsewhere():
    err = {"output_type": "stream", "name": "stderr", "text": "FutureWarning"}
    test, _ = StderrToStdout().preprocess_cell(_cell(True, False, outputs=[err]), {}, 0)
    assert test.outputs[0]["name"] == "stdout"
    answer, _ = StderrToStdout().preprocess_cell(_cell(False, True, outputs=[err]), {}, 0)
    assert answer.outputs[0]["name"] == "stderr"


def test_config_uses_the_hardening_preprocessors():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "nbgrader_config.py").read_text()
    for name in ("StripExecutionTags", "FlagKernelHooks", "AppendIntegrityCheck", "RequireIntegrityCheck",
                 "StderrToStdout", "add_missing_cells = True"):
        assert name in text, f"nbgrader_config.py does not use {name}"
    assert "skip_cells_with_tag" not in text, "a custom skip tag is a tag students can add"


def test_require_integrity_check_fails_cells_without_the_token():
    from course_tools.grading.preprocessors import TOKEN, RequireIntegrityCheck

    ok = {"output_type": "stream", "name": "stdout", "text": f"visible tests passed\n{TOKEN}\n"}
    cell, _ = RequireIntegrityCheck().preprocess_cell(_cell(True, False, outputs=[ok]), {}, 0)
    assert [o["output_type"] for o in cell.outputs] == ["stream"] and TOKEN not in cell.outputs[0]["text"]
    silent, _ = RequireIntegrityCheck().preprocess_cell(_cell(True, False), {}, 0)
    assert silent.outputs[-1]["output_type"] == "error"
    partial = {"output_type": "execute_result", "data": {"text/plain": "0.5"}, "metadata": {}, "execution_count": 1}
    cell, _ = RequireIntegrityCheck().preprocess_cell(_cell(True, False, outputs=[ok, partial]), {}, 0)
    assert [o["output_type"] for o in cell.outputs] == ["stream", "display_data"], "no partial credit from outputs"
    answer, _ = RequireIntegrityCheck().preprocess_cell(_cell(False, True), {}, 0)
    assert answer.outputs == []
