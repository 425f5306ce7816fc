"""Every chapter: notebook shape (badge, setup, points, hidden tests, no stderr) and the autograde round trip."""
import json
from pathlib import Path

import pytest

from course_tools.grading.selftest import load_variants, round_trip
from course_tools.release import chapters

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = chapters(ROOT)


def _nb(ch):
    return json.loads((ROOT / "solutions" / ch / f"{ch}.ipynb").read_text())


def _meta(c):
    return c.get("metadata", {}).get("nbgrader", {})


def test_there_are_chapters():
    assert "01_tokenization" in CHAPTERS


@pytest.mark.parametrize("ch", CHAPTERS)
def test_notebook_shape(ch):
    nb = _nb(ch)
    cells = nb["cells"]
    text = "".join("".join(c["source"]) for c in cells[:3])
    assert "colab.research.google.com" in text, "Colab badge missing at the top"
    assert "Book" in text, "the first cells must name the book sections"
    first_code = next(c for c in cells if c["cell_type"] == "code")
    assert "course_utils.setup(" in "".join(first_code["source"]), "first code cell must be the setup cell"
    tests = [c for c in cells if _meta(c).get("grade") and not _meta(c).get("solution")]
    written = [c for c in cells if _meta(c).get("grade") and _meta(c).get("solution") and c["cell_type"] == "markdown"]
    answers = [c for c in cells if _meta(c).get("solution") and c["cell_type"] == "code"]
    assert len(answers) >= 2 and len(tests) >= 2, "each chapter has graded exercises"
    assert written, "each chapter has a manually graded written question"
    for c in tests:
        src = "".join(c["source"])
        assert _meta(c).get("points", 0) > 0, f"{_meta(c)['grade_id']}: no points"
        assert "BEGIN HIDDEN TESTS" in src, f"{_meta(c)['grade_id']}: no hidden tests"
        assert _meta(c).get("locked"), f"{_meta(c)['grade_id']}: test cells must be locked"
    for c in cells:
        for o in c.get("outputs", []):
            assert not (o.get("output_type") == "stream" and o.get("name") == "stderr"), (
                f"stderr output stored in {ch}: {''.join(o.get('text', ''))[:200]}")
            assert o.get("output_type") != "error", f"error output stored in {ch}"
    assert any("nbval-check-output" in c.get("metadata", {}).get("tags", []) for c in cells), (
        "no cell's output is checked by nbval")


@pytest.mark.parametrize("ch", CHAPTERS)
def test_editable_cells_would_not_be_flagged_by_the_autograder(ch):
    from course_tools.grading.preprocessors import hook_findings

    for i, c in enumerate(_nb(ch)["cells"]):
        if c["cell_type"] == "code" and not _meta(c).get("locked"):
            found = hook_findings("".join(c["source"]))
            assert not found, (f"{ch} cell {i} ({_meta(c).get('grade_id')}) is editable by students and uses "
                               f"{found}: the autograder would flag every submission (lock the cell or rewrite it)")


@pytest.mark.parametrize("ch", CHAPTERS)
def test_wrong_answers_exist(ch):
    assert load_variants(ch, ROOT), f"tests/wrong_answers/{ch}.py is missing or empty"


# Chapters whose round trip also grades the cheating submissions of course_tools/grading/attacks.py
# (import hook, trace hook, answers that rebind the checks, shadowed reference names, library
# liars), each built on wrong answers and required to score 0 where they are wrong.
ATTACKED = {"05_rope", "08_gpt2_sampling_kv_cache", "11_quantization", "12_lora_qlora", "13_dpo_alignment"}


def _round_trip(ch):
    res = round_trip(ch, attacks=ch in ATTACKED)
    summary = {who: f"{sum(s for s, _ in c.values()):g}/{sum(m for _, m in c.values()):g}" for who, c in res.scores.items()}
    assert not res.problems, f"{summary}\n" + "\n".join(res.problems) + "\n--- nbgrader log ---\n" + res.log[-3000:]


# One class per chapter, so that `pytest -n 2 --dist loadscope` spreads the (slow) round trips
# over the workers while each stays in one piece.
for _ch in CHAPTERS:
    _name = "TestAutograde_" + _ch
    globals()[_name] = type(_name, (), {"test_round_trip": lambda self, ch=_ch: _round_trip(ch)})
