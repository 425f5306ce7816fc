"""No chapter reads a null result by its power or an MDE (issue 49), in either edition."""
from pathlib import Path

import nbformat
import pytest

from course_tools.editions import edition_dir
from course_tools.null_results import power_readings
from course_tools.release import chapters

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("text", [
    # chapter 09 before issue 49: the MDE read as a bound although 0.250 is inside [-0.051, 0.301]
    'Fixed before looking (power 0.8), a test detects 0.250. So this null says "probably no effect of 0.250 '
    'or more", not "no effect".',
    # chapter 13 before issue 49: power at 0.75 used to exclude a judge the interval [0.366, 0.779] allows
    "With 24 pairs the exact test detects a judge of accuracy 0.75 with power 0.61. So the data rule out a "
    "clearly competent judge, not a weak one.",
    "O teste tem poder 0.8 para 0.25; portanto os dados descartam um efeito desse tamanho.",
    "Este nulo diz: provavelmente nenhum efeito de 0.25 ou mais.",
    # chapter 12 before its fix: the null's size read from what the run could detect
    "QLoRA - LoRA is -0.014 [-0.066, 0.039]: only a large difference could show with 24 prompts.",
    # chapter 08 before its fix
    "(differences in distinct-2 below a few hundredths are out of this grid's reach)",
    # chapter 13 before its fix: an MDE sentence next to a null
    "The power of that test was fixed before the run: what accuracy 24 pairs can detect.",
    "Diferenças menores que alguns centésimos estão fora do alcance desta grade.",
    "Com 24 pares, só uma diferença grande apareceria.",
])
def test_power_readings_are_flagged(text):
    assert power_readings(text), text


@pytest.mark.parametrize("text", [
    # an interval reading next to a power sentence
    "The interval +0.125 [-0.051, +0.301] contains no effect and a gain of 0.3: the data rule out a loss "
    "larger than 0.051. At power 0.8 a next run of 192 examples would detect 0.125.",
    "The interval still contains 0.75, so these 24 pairs do not rule out a competent judge; with power 0.8 "
    "a decision needs 90 pairs.",
    "Three seeds cannot tell either from zero, nor rule out a cost as large as the upper end.",
    "O intervalo contém 0.75: estes pares não descartam um juiz competente, e o poder só diz quantos pares faltam.",
])
def test_interval_readings_pass(text):
    assert power_readings(text) == []


@pytest.mark.parametrize("edition", ["en", "pt_BR"])
def test_no_null_is_read_by_power(edition):
    base = ROOT / "solutions" if edition == "en" else edition_dir(edition, "solutions", ROOT)
    found = []
    for ch in chapters(ROOT):
        nb = nbformat.read(base / ch / f"{ch}.ipynb", as_version=4)
        for i, cell in enumerate(nb.cells):
            if cell.cell_type == "markdown":
                found += [f"{ch} cell {i}: {s[:300]}" for s in power_readings(cell.source)]
    assert not found, ("a null result read by power or an MDE (read it by its interval: what lies inside is "
                       "compatible, what lies outside is excluded; course_tools/null_results.py):\n" + "\n".join(found))
