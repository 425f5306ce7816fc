"""The pt-BR edition cannot drift from the English one (course_tools/translation.py, README "Editions").

Catalogues current with the English sources; every entry translated, with its inline code,
formulas, links, numbers and message fields intact; the edition's notebooks built from the current
catalogues, with code cells, outputs and nbgrader metadata byte-identical to English; every number
its prose quotes printed by the committed notebook (the claims check on the edition); the checks'
messages translated at run time. Grading a Portuguese submission: tests/test_translation_grading.py.
"""
from __future__ import annotations

import glob
from pathlib import Path

import nbformat
import pytest

from course_tools import translation as tr
from course_tools.claims import unasked_answers, unbacked_numbers

LANG = "pt_BR"
CHAPTERS = sorted(Path(p).parent.name for p in glob.glob("solutions/*/*.ipynb"))


def test_blocks_join_back_to_every_markdown_cell():
    for ch in CHAPTERS:
        nb = nbformat.read(f"solutions/{ch}/{ch}.ipynb", as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown":
                assert tr.join_blocks(*tr.split_blocks(cell.source)) == cell.source, (ch, i)


def test_blocks_keep_fences_and_displays_whole():
    text = "Intro line\n\n```python\nx = 1\n\ny = 2\n```\n\n$$\na\n\nb\n$$\n\n\nLast"
    blocks, seps = tr.split_blocks(text)
    assert blocks == ["Intro line", "```python\nx = 1\n\ny = 2\n```", "$$\na\n\nb\n$$", "Last"]
    assert tr.join_blocks(blocks, seps) == text
    assert not tr.translatable(blocks[1]) and not tr.translatable(blocks[2]) and tr.translatable("Last one")


@pytest.mark.parametrize("english, translated, kind", [
    ("Loss 1.0019 after `step()`.", "Perda 1,0019 depois de `step()`.", "numbers"),
    ("Loss 1.0019 after `step()`.", "Perda 1.0019 depois de `passo()`.", "inline code"),
    ("With $\\sqrt{d_k}$ scaling.", "Com escala $\\sqrt{d}$.", "math"),
    ("See [the docs](https://example.org/a).", "Veja [a documentação](https://example.org/b).", "links"),
    ("{name}: expected shape {expected}, got {got}.", "{nome}: formato esperado {expected}, obtido {got}.", "placeholders"),
])
def test_a_changed_protected_part_is_caught(english, translated, kind):
    problems = tr.protected_problems(english, translated)
    assert problems and problems[0].startswith(kind), problems
    assert tr.protected_problems(english, english) == []


def test_changed_english_marks_the_entry_stale():
    """Babel's merge: a changed block keeps its old translation, flagged fuzzy with the old English."""
    old = tr._new_catalog("x", LANG)
    old.add("The loss falls from 1.0 to 0.5.", string="A perda cai de 1.0 para 0.5.")
    old.add("Unchanged block.", string="Bloco inalterado.")
    new = tr._new_catalog("x")
    new.add("The loss falls from 1.0 to 0.4.")
    new.add("Unchanged block.")
    new.add("A brand new paragraph about nothing in particular.")
    merged = tr.merge(old, new)
    stale = merged.get("The loss falls from 1.0 to 0.4.")
    assert stale.fuzzy and stale.string == "A perda cai de 1.0 para 0.5."
    assert stale.previous_id == ["The loss falls from 1.0 to 0.5."]
    assert not merged.get("Unchanged block.").fuzzy and merged.get("Unchanged block.").string == "Bloco inalterado."
    assert not merged.get("A brand new paragraph about nothing in particular.").string
    assert "The loss falls from 1.0 to 0.5." not in merged


def test_catalogues_are_current_with_english_and_keep_protected_parts():
    problems = tr.catalogue_problems(LANG)
    assert not problems, "\n".join(problems)


def test_every_entry_is_translated():
    rows = tr.coverage(LANG)
    assert all(c.translated == c.total for c in rows), "coverage of the pt-BR edition:\n" + tr.coverage_report(LANG)


def test_edition_notebooks_are_built_from_current_catalogues():
    problems = tr.stale_editions(LANG)
    assert not problems, "\n".join(problems)


def test_edition_code_outputs_and_metadata_identical_to_english():
    problems = tr.edition_problems(LANG)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("ch", CHAPTERS)
def test_edition_quotes_only_printed_numbers(ch):
    nb = nbformat.read(f"{LANG}/solutions/{ch}/{ch}.ipynb", as_version=4)
    problems = unbacked_numbers(nb)
    listing = "\n".join(f"  cell {i}: {num!r} in: {line}" for i, num, line in problems)
    assert not problems, f"{LANG}/{ch}: numbers quoted that the committed notebook does not print:\n{listing}"
    student = nbformat.read(f"{LANG}/notebooks/{ch}/{ch}.ipynb", as_version=4)
    assert unasked_answers(student) == []
    assert student.metadata["llm_course"]["edition"] == LANG


def test_edition_setup_cell_sets_the_language_and_badge_points_at_the_edition():
    for ch in CHAPTERS:
        nb = nbformat.read(f"{LANG}/notebooks/{ch}/{ch}.ipynb", as_version=4)
        setup = next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "setup")
        assert tr.LANG_LINE[LANG] in setup.source
        assert f"/blob/main/{LANG}/notebooks/{ch}/{ch}.ipynb)" in nb.cells[0].source


def test_check_messages_follow_the_edition(monkeypatch):
    """The same check call prints Portuguese under LLM_COURSE_LANG=pt_BR, English without it."""
    from course_utils import grading, translation

    assert tr.mo_path(LANG).is_file()
    try:
        translation.use_language("en")
        with pytest.raises(AssertionError) as en:
            grading.check_shape("rotate_2d on a batch of 3 pairs with 3 angles", [[1.0, 2.0]], (3, 2))
        monkeypatch.setenv("LLM_COURSE_LANG", LANG)
        assert translation.use_language() == LANG   # what importing the course after the setup cell's line does
        with pytest.raises(AssertionError) as pt:
            grading.check_shape("rotate_2d on a batch of 3 pairs with 3 angles", [[1.0, 2.0]], (3, 2))
    finally:
        translation.use_language("en")
    assert "expected shape (3, 2), got (1, 2)" in str(en.value)
    assert str(pt.value) != str(en.value) and "(3, 2)" in str(pt.value) and "(1, 2)" in str(pt.value)
    assert "expected" not in str(pt.value) and "rotate_2d" in str(pt.value)


def test_an_english_edit_makes_exactly_its_entry_stale(tmp_path):
    """Edit one sentence of chapter 05's English source: that block, and only it, needs translating;
    merged into the catalogue it keeps its old translation, marked fuzzy, and the edition keeps English."""
    import shutil

    ch = "05_rope"
    src = Path("chapters") / ch / f"{ch}.py"
    (tmp_path / "chapters" / ch).mkdir(parents=True)
    text = src.read_text(encoding="utf-8")
    old = "**What you will do.**"
    assert text.count(old) == 1
    (tmp_path / "chapters" / ch / f"{ch}.py").write_text(text.replace(old, "**What you will build.**"), encoding="utf-8")
    po = tr.catalogue_path(ch, LANG, tmp_path)
    po.parent.mkdir(parents=True)
    shutil.copy(tr.catalogue_path(ch, LANG), po)
    assert tr.stale_entries(ch, LANG, tmp_path) == ["**What you will build.**"]
    merged = tr.merge(tr.read_catalogue(po), tr.chapter_template(ch, tmp_path))
    entry = merged.get("**What you will build.**")
    assert entry.fuzzy and entry.previous_id == [old] and entry.string
    tr.write_catalogue(merged, po)
    assert tr.stale_entries(ch, LANG, tmp_path) == ["**What you will build.**"]   # fuzzy is not current


def test_a_translation_that_drops_a_list_item_is_refused():
    # chapter 09's "In practice" lost its last two bullets in Portuguese, unseen by every other check
    english = "* one `a`;\n* two;\n  still two\n* three."
    assert tr.protected_problems(english, "* um `a`;\n* dois;\n  ainda dois\n* três.") == []
    assert tr.protected_problems(english, "* um `a`;\n* dois; ainda dois; três.") == ["list items: missing ['item'], added []"]
