"""Every hidden check names the clause it tests, and every clause is stated in the exercise (both editions)."""
from pathlib import Path

import nbformat
import pytest

from course_tools.authoring import same_code
from course_tools.clauses import problems
from course_tools.editions import edition_dir
from course_tools.release import chapters

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = chapters(ROOT)

TEST_CELL = '''from course_utils.grading import check_close
check_close("visible", f(1.0), 2.0)
### BEGIN HIDDEN TESTS
from course_utils.grading import outcome, record
# clause: doubles
for _x in (1.0, 2.0):
    record(f"f({_x})", f(_x))
record("f(-1.0) (raises ValueError)", outcome(f, -1.0))  # clause: negative-raises
record("f(0.0)", f(0.0),
       atol=0.0)  # clause: doubles
### BEGIN REFERENCE
from course_utils.grading import expect
expect("f(-1.0) (raises ValueError)", "raises ValueError")
### END REFERENCE
### END HIDDEN TESTS
'''


def _notebook(statement: str, test: str = TEST_CELL, heading: str = "### Exercise 1 (2 points)") -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(heading + "\n\n" + statement),
                nbformat.v4.new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION"),
                nbformat.v4.new_code_cell(test)]
    nb.cells[1].metadata["nbgrader"] = {"grade": False, "solution": True, "grade_id": "ex1", "locked": False}
    nb.cells[2].metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "test_ex1", "locked": True,
                                        "points": 2}
    return nb


def _problems(tmp_path: Path, nb: nbformat.NotebookNode) -> list[str]:
    path = tmp_path / "nb.ipynb"
    nbformat.write(nb, path)
    return problems(path)


STATED = ("Return twice `x`. <!-- clause: doubles --> Raise `ValueError` for a negative `x`. "
          "<!-- clause: negative-raises -->")


def test_a_statement_that_states_every_clause_passes(tmp_path):
    assert _problems(tmp_path, _notebook(STATED)) == []
    assert _problems(tmp_path, _notebook(STATED.replace("Return", "Devolva"), heading="### Exercício 1 (2 pontos)")) == []


def test_a_clause_only_the_docstring_states_is_reported(tmp_path):
    found = _problems(tmp_path, _notebook("Return twice `x`. <!-- clause: doubles -->"))
    assert len(found) == 1 and "'negative-raises', which the statement does not state" in found[0], found


def test_a_hidden_check_without_a_clause_is_reported(tmp_path):
    test = TEST_CELL.replace("  # clause: negative-raises", "")
    found = _problems(tmp_path, _notebook(STATED, test))
    # the check on line 8 falls under the nearest clause above it ('doubles'); 'negative-raises' is left unused
    assert found == ["test_ex1: the statement marks clause 'negative-raises', but no hidden check tests it"], found
    test = TEST_CELL.replace("# clause: doubles\nfor", "for")
    found = _problems(tmp_path, _notebook(STATED, test))
    assert any("line 6 of the test cell: record(...) names no clause" in p for p in found), found


def test_visible_and_reference_checks_need_no_clause(tmp_path):
    test = TEST_CELL.replace('check_close("visible", f(1.0), 2.0)', 'check_close("visible", f(1.0), 2.0)\nrecord("x", 1)')
    assert _problems(tmp_path, _notebook(STATED, test)) == []


def test_a_marker_outside_the_exercise_does_not_count(tmp_path):
    nb = _notebook("Return twice `x`. <!-- clause: doubles -->")
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("Earlier prose. <!-- clause: negative-raises -->"))
    assert any("'negative-raises', which the statement does not state" in p for p in _problems(tmp_path, nb))


def test_comments_do_not_change_what_a_cell_runs():
    assert same_code("x = 1\nprint(x)", "# clause: a\nx = 1  # clause: b\n\nprint(x)")
    assert not same_code("x = 1\nprint(x)", "x = 2\nprint(x)")
    assert not same_code("x = '# a'", "x = '# b'")
    assert not same_code("!echo a", "!echo a  # c")  # IPython syntax: compared as text


@pytest.mark.parametrize("edition", ["en", "pt_BR"])
@pytest.mark.parametrize("ch", CHAPTERS)
def test_every_graded_clause_is_stated(ch, edition):
    path = (ROOT / "solutions" if edition == "en" else edition_dir(edition, "solutions", ROOT)) / ch / f"{ch}.ipynb"
    found = problems(path)
    assert not found, f"{path.relative_to(ROOT)}:\n" + "\n".join(found)


def test_a_chapter_rule_counts_for_every_exercise_and_must_be_used(tmp_path):
    test = TEST_CELL.replace('record("f(0.0)"', '# clause: defined-here\nrecord("f.__module__", f.__module__)\n# clause: doubles\nrecord("f(0.0)"')
    nb = _notebook(STATED, test)
    assert any("'defined-here', which the statement does not state" in p for p in _problems(tmp_path, nb))
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("Define every function in this notebook. <!-- clause-all: defined-here -->"))
    assert _problems(tmp_path, nb) == []
    nb.cells.insert(0, nbformat.v4.new_markdown_cell("Rules. <!-- clause-all: no-network -->"))
    assert _problems(tmp_path, nb) == ["the chapter's rule 'no-network' (clause-all) is tested by no hidden check"]


def test_a_marker_at_the_start_of_a_line_breaks_the_paragraph_and_is_moved():
    import mistune

    from course_tools.clauses import broken_paragraphs, join_markers

    text = "Keep the dtype.\n<!-- clause: keeps-dtype --> Leave `p` unchanged.\n<!-- clause: unchanged-input -->\n\nNext."
    assert "<code>" not in mistune.html(text).split("<!--")[1]   # the line after the comment is raw
    assert broken_paragraphs(text) == [1, 2]
    fixed = join_markers(text)
    assert fixed == ("Keep the dtype. <!-- clause: keeps-dtype -->\nLeave `p` unchanged. <!-- clause: unchanged-input -->"
                     "\n\nNext.")
    assert broken_paragraphs(fixed) == [] and "<code>p</code>" in mistune.html(fixed)
    assert join_markers("<!-- clause-all: x --> first line\n\n<!-- y -->") == "<!-- clause-all: x --> first line\n\n<!-- y -->"
