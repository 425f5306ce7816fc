"""What a student names, as the exchange and the export judge it (no accounts needed; the real
cycle with accounts is tests/test_exchange.py)."""
from __future__ import annotations

import pytest

from course_tools.grading.exchange import valid_student_id
from course_tools.grading.export import neutralise


@pytest.mark.parametrize("sid", ["alice", "bob_2", "j.doe", "_svc", "a-b", "x" * 32])
def test_account_names_are_student_ids(sid):
    assert valid_student_id(sid)


@pytest.mark.parametrize("sid", ['=HYPERLINK("x";"y")', "@SUM(1;2)", "<img src=x onerror=alert(1)>", "zz_honest_afte?",
                                 "[z]z_honest_after", "zz*", "alice\nbob", "alice\r", "-rf", "+1", ".hidden", "a b",
                                 "a+b", "a,b", "", "x" * 33, "é", "a/b", "a\tb"])
def test_anything_else_is_refused(sid):
    assert not valid_student_id(sid)


@pytest.mark.parametrize("text, want", [
    ('=HYPERLINK("x";"y")', '\'=HYPERLINK("x";"y")'), ("@SUM(1;2)", "'@SUM(1;2)"), ("+1", "'+1"), ("-1+2", "'-1+2"),
    ("\t=1", "'\t=1"), ("\r=1", "'\r=1"), ("  =1", "'  =1"), ("\uff1d1", "'\uff1d1"),
    ("alice", "alice"), ("O'Brien", "O'Brien"), ("", ""), (None, ""), (2.5, "2.5"), (-1.0, "-1.0"), (0, "0"),
])
def test_a_csv_cell_never_starts_a_formula(text, want):
    assert neutralise(text) == want
